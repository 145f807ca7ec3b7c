"""Command line: ``bulkem demo`` and ``bulkem fit``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__, datasets, stream
from .api import BACKENDS, DTYPES, fit


def _demo(args: argparse.Namespace) -> int:
    print(f"bulkem {__version__} demo: {args.datasets} datasets x {args.obs} values from the "
          f"mixture weights {datasets.DEMO_WEIGHTS}, mu {datasets.DEMO_MU}, "
          f"lambda {datasets.DEMO_LAMBDA}; {args.starts} random starts each")
    data = datasets.simulate_demo(args.datasets, args.obs, seed=args.seed)
    # A tiny first fit compiles the kernels, so that the timing is of the fitting.
    fit(data[:1], n_starts=1, max_iter=2, seed=1, backend=args.backend, progress=False)
    t0 = time.perf_counter()
    res = fit(data, n_components=2, n_starts=args.starts, max_iter=args.max_iter, tol=args.tol,
              seed=args.seed, backend=args.backend, progress=not args.quiet)
    wall = time.perf_counter() - t0
    n_fits = args.datasets * args.starts
    comp = res.components
    truth = pd.DataFrame({"component": [1, 2], "weight": datasets.DEMO_WEIGHTS,
                          "mu": datasets.DEMO_MU, "lambda": datasets.DEMO_LAMBDA})
    stats = comp.groupby("component")[["weight", "mu", "lambda"]].median()
    err = comp.merge(truth, on="component", suffixes=("", "_true"))
    print(f"backend: {res.backend}   wall time: {wall:.3f} s   fits: {n_fits}   "
          f"fits/s: {n_fits / wall:,.0f}")
    print(res.summary["status"].value_counts().to_string())
    print("\nmedian fitted parameters over datasets (truth in brackets):")
    for c, row in stats.iterrows():
        t = truth.set_index("component").loc[c]
        print(f"  component {c}: weight {row.weight:.3f} ({t.weight})  mu {row.mu:.3f} ({t.mu})"
              f"  lambda {row['lambda']:.3f} ({t['lambda']})")
    for p in ("weight", "mu", "lambda"):
        rel = np.abs(err[p] - err[p + "_true"]) / err[p + "_true"]
        print(f"  {p:>6}: median relative error {rel.median():.3f}, 90th percentile "
              f"{rel.quantile(0.9):.3f}")
    return 0


def _read_table(path: Path) -> pd.DataFrame:
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    return pd.read_csv(path)


def _fit(args: argparse.Namespace) -> int:
    if stream.wanted(args):  # --chunk-datasets, --checkpoint or --resume: bulkem/stream.py
        return stream.main(args)
    df = _read_table(Path(args.input))
    res = fit(df, family=args.family, n_components=args.components, n_starts=args.starts,
              max_iter=args.max_iter, tol=args.tol, seed=args.seed, backend=args.backend,
              dtype=args.dtype, progress=not args.quiet, dataset_col=args.dataset_col,
              value_col=args.value_col)
    out = Path(args.out)
    stem = out.with_suffix("")
    res.summary.to_csv(out, index=False)
    res.components.to_csv(f"{stem}.components.csv", index=False)
    res.starts.to_csv(f"{stem}.starts.csv", index=False)
    res.start_values.to_csv(f"{stem}.start_values.csv", index=False)
    print(f"{len(res.summary)} datasets fitted on {res.backend} in {res.elapsed:.2f} s; "
          f"wrote {out}, {stem}.components.csv, {stem}.starts.csv, {stem}.start_values.csv")
    print(res.summary["status"].value_counts().to_string())
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bulkem", description=__doc__)
    ap.add_argument("--version", action="version", version=f"bulkem {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, starts: int) -> None:
        p.add_argument("--starts", type=int, default=starts, help="random starts per dataset")
        p.add_argument("--max-iter", type=int, default=100)
        p.add_argument("--tol", type=float, default=1e-6)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--backend", choices=BACKENDS, default="auto")
        p.add_argument("--quiet", action="store_true", help="no progress bar")

    d = sub.add_parser("demo", help="fit the embedded demo batch and report speed and accuracy")
    d.add_argument("--datasets", type=int, default=1000)
    d.add_argument("--obs", type=int, default=2000)
    common(d, 10)
    d.set_defaults(func=_demo)

    f = sub.add_parser("fit", help="fit a long CSV/Parquet table (dataset,value) and write tables")
    f.add_argument("input", help="CSV or Parquet file in long form")
    f.add_argument("--components", type=int, default=2)
    f.add_argument("--family", default="invgauss")
    f.add_argument("--dtype", choices=DTYPES, default="float64")
    f.add_argument("--dataset-col", default="dataset")
    f.add_argument("--value-col", default="value")
    f.add_argument("--out", default="fits.csv", help="summary CSV; the other tables go beside it")
    common(f, 100)
    stream.add_arguments(f)
    f.set_defaults(func=_fit)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"bulkem: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
