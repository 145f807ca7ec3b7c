"""Command line: ``bulkem demo`` and ``bulkem fit``."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..api import BACKENDS, DTYPES, fit
from ..models import FAMILIES
from ..scale import stream
from . import datasets

DESCRIPTION = (
    "Fit mixture models by EM to many datasets at once, each from many random starts, "
    "on every CPU core or on NVIDIA GPUs. 'bulkem demo' fits a simulated batch and reports "
    "speed and accuracy; 'bulkem fit' fits a long table (one row per value) and writes "
    "the result tables. 'bulkem COMMAND --help' lists a command's options."
)
# Output formats by file name suffix.
FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
# The tables 'bulkem fit' writes: the summary at --out, the others beside it.
TABLES = ("summary", "components", "starts", "start_values")


class UsageError(Exception):
    """A problem with the command's arguments or files: one line, exit status 2."""


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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


def output_paths(out: Path, tables: tuple[str, ...] = TABLES) -> dict[str, Path]:
    """Where ``bulkem fit`` writes each table; checked before anything is read or fitted.

    Parameters
    ----------
    out : Path
        The summary table's file; its suffix (.csv, .parquet or .pq) gives the
        format of every table, written beside it as ``<stem>.<table>.<suffix>``.

    Returns
    -------
    dict of str -> Path
        Table name -> file.

    Raises
    ------
    UsageError
        Unknown format, Parquet without a Parquet engine, a missing or
        read-only folder, or a folder where a file should be written.
    """
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise UsageError(f"--out {out}: unknown format {out.suffix or '(no suffix)'!r}; "
                         f"expected a file name ending in {', '.join(FORMATS)}.")
    if fmt == "parquet" and not any(importlib.util.find_spec(m) for m in
                                    ("pyarrow", "fastparquet")):
        raise UsageError(f"--out {out}: writing Parquet needs pyarrow; install it "
                         "(pip install 'bulkem[parquet]') or write .csv.")
    folder = out.parent
    if not folder.is_dir():
        raise UsageError(f"--out {out}: the folder {folder} does not exist; create it first.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: the folder {folder} is not writable.")
    stem = out.with_suffix("")
    paths = {"summary": out}
    paths.update({t: Path(f"{stem}.{t}{out.suffix}") for t in tables[1:]})
    for p in paths.values():
        if p.is_dir():
            raise UsageError(f"--out {out}: {p} is a folder; expected a file name.")
    return paths


@contextlib.contextmanager
def _all_or_nothing(paths: dict[str, Path]) -> Iterator[dict[str, Path]]:
    """Temporary files beside ``paths``, renamed into place only if all were written."""
    tmp = {}
    try:
        for name, p in paths.items():
            fd, t = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            os.close(fd)
            tmp[name] = Path(t)
        yield tmp
        for name, p in paths.items():
            os.replace(tmp.pop(name), p)
    finally:
        for t in tmp.values():
            t.unlink(missing_ok=True)


def _read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise UsageError(f"input {path} {what}; expected a CSV or Parquet file.")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise UsageError(f"input {path} is empty; expected a table with a header line "
                         "(dataset,value) and one row per value.") from None
    except (ValueError, OSError, ImportError) as err:  # parse errors, bad Parquet, no engine
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"input {path} could not be read: {first}") from None
    if len(df) == 0:
        raise UsageError(f"input {path} has columns {list(df.columns)} but no rows.")
    return df


# The family options of `bulkem fit`: option -> (the families that take it, bulkem.fit's name).
FAMILY_OPTIONS = {
    "covariance_type": (("gaussian",), "covariance_type"),
    "emission": (("hmm",), "emission"),
    "symbols": (("hmm",), "n_symbols"),
    "sequence_col": (("hmm",), "sequence_col"),
    "orders": (("tmap",), "orders"),
    "run_col": (("tmap",), "run_col"),
    "order": (("ar",), "order"),
    "series_col": (("ar", "local_level"), "series_col"),
}
# Their defaults: an option left at its default is not refused for another family.
_DEFAULTS = {"covariance_type": "diag", "emission": "gaussian", "sequence_col": "sequence",
             "run_col": "run", "series_col": "series"}
# Python's names in bulkem.fit's messages -> the command line's.
CLI_TERMS = (("dataset_col=", "--dataset-col"), ("value_col=", "--value-col"),
             ("weights=", "--weight-col "),
             ("sequence_col=", "--sequence-col"), ("series_col=", "--series-col"),
             ("run_col=", "--run-col"), ("n_symbols=", "--symbols"),
             ("order=p", "--order P"), ("(pandas.to_numeric)", ""),
             ("backend='cpu'", "--backend cpu"), ("backend='auto'", "--backend auto"),
             ("backend='cuda'", "--backend cuda"),
             ("numba.cuda.is_available() is False", "CUDA is not available"))


def _cli_terms(message: str) -> str:
    """A message of bulkem.fit in the command's terms, on one line."""
    for python, option in CLI_TERMS:
        message = message.replace(python, option)
    return " ".join(message.split())


def family_options(args: argparse.Namespace) -> dict:
    """The family options of ``bulkem fit`` as :func:`bulkem.fit` arguments.

    Options of another family are refused (those with a default are passed
    only to their families).

    Raises
    ------
    UsageError
        An option given that the family does not take; ``--family ar`` without
        ``--order``.
    """
    out = {}
    for option, (families, name) in FAMILY_OPTIONS.items():
        value = getattr(args, option, None)
        if args.family in families:
            if value is not None:
                out[name] = tuple(value) if isinstance(value, list) else value
        elif value is not None and value != _DEFAULTS.get(option):
            flag = "--" + option.replace("_", "-")
            raise UsageError(f"{flag} is an option of --family {' or '.join(families)}, not of "
                             f"--family {args.family}; leave it out.")
    if args.family == "ar" and out.get("order") is None:
        raise UsageError("--family ar needs --order P, the number of AR coefficients "
                         "(e.g. --order 2).")
    return out


def _fit(args: argparse.Namespace) -> int:
    options = family_options(args)
    if args.weight_col is not None:  # (streamed chunks carry the column with their rows)
        options["weights"] = args.weight_col
    if stream.wanted(args):  # --chunk-datasets, --checkpoint or --resume: bulkem/scale/stream.py
        return stream.main(args, options)
    out = Path(args.out)
    paths = output_paths(out, TABLES + (("transitions",) if args.family == "hmm" else ()))
    src = Path(args.input)
    if any(p.resolve() == src.resolve() for p in paths.values()):
        raise UsageError(f"--out {out} would overwrite the input {src}; choose another name.")
    df = _read_table(src)
    try:
        res = fit(df, family=args.family, n_components=args.components, n_starts=args.starts,
                  max_iter=args.max_iter, tol=args.tol, seed=args.seed, backend=args.backend,
                  dtype=args.dtype, progress=not args.quiet, dataset_col=args.dataset_col,
                  value_col=args.value_col, **options)
    except (ValueError, TypeError) as err:  # about the data: said in the command's terms
        raise UsageError(str(err).replace("DataFrame input", f"input {src}")) from None
    fmt = FORMATS[out.suffix.lower()]
    with _all_or_nothing(paths) as tmp:
        for name, t in tmp.items():
            table = res.tables[name] if name in res.tables else getattr(res, name)
            if fmt == "parquet":
                table.to_parquet(t, index=False)
            else:
                table.to_csv(t, index=False)
    print(f"{_plural(len(res.summary), 'dataset')} fitted on {res.backend} in "
          f"{res.elapsed:.2f} s; wrote {', '.join(str(p) for p in paths.values())}")
    print(res.summary["status"].value_counts().to_string())
    return 0


def _at_least(low: int):
    """An argparse type: a whole number >= low."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The ``bulkem`` argument parser."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    ap = argparse.ArgumentParser(prog="bulkem", description=DESCRIPTION, formatter_class=fmt)
    ap.add_argument("--version", action="version", version=f"bulkem {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(p: argparse.ArgumentParser, starts: int) -> None:
        p.add_argument("--starts", type=_at_least(1), default=starts, metavar="N",
                       help="random starts per dataset")
        p.add_argument("--max-iter", type=_at_least(1), default=100, metavar="N",
                       help="most EM iterations per start")
        p.add_argument("--tol", type=float, default=1e-6,
                       help="a start has converged when its log-likelihood changes by less")
        p.add_argument("--seed", type=_at_least(0), default=1, metavar="N",
                       help="seed of the random starts")
        p.add_argument("--backend", choices=BACKENDS, default="auto",
                       help="auto: the GPU when one is usable, else every CPU core")
        p.add_argument("--quiet", action="store_true", help="no progress bar")

    d = sub.add_parser("demo", formatter_class=fmt,
                       help="fit a simulated batch; report speed and accuracy",
                       description="Fit datasets drawn from the demo inverse-Gaussian mixture "
                       "(weights 0.3/0.7, mu 1/3, lambda 30/0.2) and report the speed and "
                       "how close the fits come to the truth.")
    d.add_argument("--datasets", type=_at_least(1), default=1000, metavar="N",
                   help="number of datasets")
    d.add_argument("--obs", type=_at_least(1), default=2000, metavar="N",
                   help="values per dataset")
    common(d, 10)
    d.set_defaults(func=_demo)

    f = sub.add_parser("fit", formatter_class=fmt,
                       help="fit a long CSV/Parquet table (dataset,value); write the tables",
                       description="Fit every dataset of a long table (one row per value, a "
                       "column naming the dataset) and write four tables: the summary at "
                       "--out, and components, starts and start_values beside it "
                       "(fits.csv -> fits.components.csv, ...). Outputs are checked before "
                       "the fit, and written only when all of them can be.")
    f.add_argument("input", help="CSV or Parquet (.parquet, .pq) file in long form")
    f.add_argument("--family", choices=list(FAMILIES), default="invgauss",
                   help="component distribution")
    f.add_argument("--components", type=_at_least(1), default=2, metavar="M",
                   help="mixture components (hmm: hidden states)")
    f.add_argument("--dtype", choices=DTYPES, default="float64",
                   help="precision of the per-observation arithmetic")
    f.add_argument("--dataset-col", default="dataset", metavar="NAME",
                   help="column naming the dataset of each row")
    f.add_argument("--value-col", default="value", metavar="NAME",
                   help="column of the values (gaussian: all other columns when there is "
                   "no such column)")
    f.add_argument("--weight-col", default=None, metavar="NAME",
                   help="mixtures: column of each value's weight (>= 0; a value counts that "
                   "many times; 0 leaves it out)")
    f.add_argument("--covariance-type", choices=["diag", "full", "tied", "spherical"],
                   default="diag", help="gaussian: the components' covariance matrices")
    f.add_argument("--emission", choices=["categorical", "gaussian", "poisson"],
                   default="gaussian", help="hmm: the states' emission distribution")
    f.add_argument("--symbols", type=_at_least(1), default=None, metavar="V",
                   help="hmm, categorical: symbols 0..V-1 (default: the largest seen + 1)")
    f.add_argument("--sequence-col", default="sequence", metavar="NAME",
                   help="hmm: column naming the sequence of each row (rows in time order)")
    f.add_argument("--orders", type=_at_least(1), nargs="+", default=None, metavar="R",
                   help="tmap: the order of each Erlang branch (default: 1 2 3, or 1..M "
                   "with --components M)")
    f.add_argument("--run-col", default="run", metavar="NAME",
                   help="tmap: column naming the run of each row (rows in order within a run)")
    f.add_argument("--order", type=_at_least(1), default=None, metavar="P",
                   help="ar: the number of AR coefficients (required for --family ar)")
    f.add_argument("--series-col", default="series", metavar="NAME",
                   help="ar, local_level: column naming the series of each row (rows in time "
                   "order; without it, one series per dataset)")
    f.add_argument("--out", default="fits.csv", metavar="FILE",
                   help="summary table; its suffix (.csv, .parquet, .pq) sets the format of "
                   "every table")
    common(f, 100)
    stream.add_arguments(f)
    f.set_defaults(func=_fit)
    return ap


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line, without the source line that raised them."""
    if category.__module__.startswith("numba"):
        return  # compiler notes, not about the user's data
    text = str(message).replace("see summary.status and summary.message",
                                "see the status and message columns of the summary")
    print(f"bulkem: warning: {text}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad arguments or files)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error argparse has printed
        return done.code if isinstance(done.code, int) else 2
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return args.func(args)
        except (UsageError, ValueError, TypeError, OSError) as err:
            print(f"bulkem: error: {_cli_terms(str(err))}", file=sys.stderr)
            return 2
        except MemoryError as err:  # numpy's _ArrayMemoryError says how much it wanted
            what = f" ({err})" if str(err) else ""
            print(f"bulkem: error: out of memory{what}. Fit fewer datasets at a time: "
                  "stream the input with --chunk-datasets N (host memory is bounded by N "
                  "datasets), or a smaller N.", file=sys.stderr)
            return 1
        except Exception as err:
            if not type(err).__module__.startswith(("pyarrow", "numba.cuda")):
                raise  # a bug: its traceback is what a report needs
            print(f"bulkem: error: {type(err).__name__}: {_cli_terms(str(err))}",
                  file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
