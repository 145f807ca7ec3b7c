"""The host's part of a mixture fit: reading and packing many datasets, by input form.

    python benchmarks/bench_inputs.py [--datasets 100000] [--obs 200] [--rounds 3]

Rows, each the best of ``--rounds``, the baseline beside it in the same run:

* packing a list of arrays: ``MixtureModel.pack`` (one vectorised screen, the family's
  check only on flagged datasets) against checking every dataset in Python (``screen=None``,
  the path before 2026-11-29);
* the list's values into one array: ``bulkem.data.gather`` (one compiled pass, copied on
  every core) against ``np.concatenate`` (the path before, one thread);
* reading a long DataFrame (sorted by dataset, and shuffled): ``data.as_datasets`` (by column:
  one factorise, one stable sort) against splitting it by ``groupby`` (the path before);
* a ``pyarrow`` list array (zero per-dataset Python objects), read;
* a whole ``bulkem.fit`` (2 starts, 5 iterations: the host's share large) from the list and
  from the frame, with the engine's time beside it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np
import pandas as pd


def best(f, rounds: int) -> float:
    out = np.inf
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        out = min(out, time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=100_000)
    ap.add_argument("--obs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", default="cpu")
    args = ap.parse_args()

    import bulkem
    from bulkem.data import as_datasets, pack
    from bulkem.data.gather import gather
    from bulkem.engines import select
    from bulkem.models.mixture import GAUSSIAN, INVGAUSS
    from bulkem.models.mixture.model import MixtureModel

    n, k = args.datasets, args.obs
    rng = np.random.default_rng(0)
    print(f"device: {platform.node()}, {os.cpu_count()} CPUs; {datetime.date.today()}; "
          f"{n:,} datasets x {k} values; best of {args.rounds}")
    print("| step | input | bulkem (s) | baseline, same run (s) | ratio |")
    print("|---|---|---|---|---|")

    def row(step, form, new, old=None):
        ratio = f"{old / new:.1f}x" if old else ""
        print(f"| {step} | {form} | {new:.3f} | {'' if old is None else f'{old:.3f}'} | "
              f"{ratio} |", flush=True)

    x = [rng.wald(1.0, 3.0, k) for _ in range(n)]
    for fam, D, data in ((INVGAUSS, 1, x),
                         (GAUSSIAN, 2, [rng.normal(0, 1, (k, 2)) for _ in range(n // 2)])):
        pairs = as_datasets(data, fam.ndim)
        m = MixtureModel(fam, 2, D)
        row("pack (check, concatenate)", f"{fam.name}, list of {len(data):,} arrays",
            best(lambda p=pairs, m=m: pack(p, m.check, m.screen), args.rounds),
            best(lambda p=pairs, m=m: pack(p, m.check), args.rounds))
        arrays = [v for _, v in pairs]
        row("concatenate (gather)", f"{fam.name}, list of {len(data):,} arrays",
            best(lambda a=arrays, nd=fam.ndim, D=D: gather(a, nd, D), args.rounds),
            best(lambda a=arrays: np.concatenate(a), args.rounds))
    df = pd.DataFrame({"dataset": np.repeat(np.arange(n), k), "value": np.concatenate(x)})
    shuffled = df.sample(frac=1.0, random_state=0)
    for form, frame in (("long frame, sorted", df), ("long frame, shuffled", shuffled)):
        row("read", form, best(lambda f=frame: as_datasets(f), args.rounds),
            best(lambda f=frame: [(key, g["value"].to_numpy())
                                  for key, g in f.groupby("dataset", sort=False)], 1))
    try:
        import pyarrow as pa

        arr = pa.ListArray.from_arrays(pa.array(np.arange(n + 1) * k, pa.int32()),
                                       pa.array(np.concatenate(x)))
        row("read", "pyarrow ListArray", best(lambda: as_datasets(arr), args.rounds))
    except ImportError:
        print("| read | pyarrow ListArray | (pyarrow not installed) | | |")
    kw = dict(n_components=2, n_starts=2, max_iter=5, tol=0.0, seed=1, backend=args.backend)
    bulkem.fit(x[:10], **kw)  # compile
    engine = {}
    run = select.run_jobs

    def timed(*a, **kwa):
        t = time.perf_counter()
        out = run(*a, **kwa)
        engine["s"] = time.perf_counter() - t
        return out

    select.run_jobs = timed
    for form, data in (("list of arrays", x), ("long frame", df)):
        whole = best(lambda d=data: bulkem.fit(d, **kw), args.rounds)
        print(f"| whole fit ({args.backend}; engine {engine['s']:.3f} s) | {form} | "
              f"{whole:.3f} | | |", flush=True)
    select.run_jobs = run


if __name__ == "__main__":
    main()
