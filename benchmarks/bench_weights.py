"""Observation weights (``fit(weights=...)``): what a weighted fit costs beside the same fit
unweighted, and beside the repeated values that integer weights stand for, in one run.

    python benchmarks/bench_weights.py [--backends cpu,cuda] [--family invgauss]
                                       [--datasets 1000] [--obs 2000] [--starts 20]
                                       [--iters 100]

Plain EM for a fixed number of iterations (``tol=0``, ``accel=False``): the same iterations
in every row. Whole calls (packing, starts, tables), best of two after a warm-up, with the
engines' share beside them (``engines.select.run_jobs``: starts, packing per chunk, kernels).
Rows:
unweighted; weighted with weights 1..4 (integers); the values repeated as often as their
weight (the unweighted engine on 2.5x the values). A weighted E-step takes a log per value
(the unweighted one a log per block of values), so its cost per value is the exact pass's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np


def batch(family: str, D: int, n: int, rng) -> list[np.ndarray]:
    half = n // 2
    if family == "gaussian":
        return [np.r_[rng.normal(0, 1, half), rng.normal(4, 1, n - half)][:, None]
                for _ in range(D)]
    return [np.r_[rng.wald(1.0, 5.0, half), rng.wald(4.0, 20.0, n - half)] for _ in range(D)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--family", default="invgauss")
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    a = ap.parse_args()
    from timing import engine_seconds

    import bulkem

    engine_s = engine_seconds()  # the engines' time inside the whole call
    rng = np.random.default_rng(0)
    x = batch(a.family, a.datasets, a.obs, rng)
    w = [rng.integers(1, 5, len(v)).astype(float) for v in x]
    rep = [np.repeat(v, wk.astype(int), axis=0) for v, wk in zip(x, w, strict=True)]
    print(f"device: {platform.node()}, {os.cpu_count()} CPUs; {datetime.date.today()}; "
          f"{a.family}, {a.datasets:,} datasets x {a.obs:,} values, M = 2, {a.starts} starts, "
          f"{a.iters} iterations")
    print("| backend | fit | whole call s | engines s | fits/s | vs unweighted |")
    print("|---|---|---|---|---|---|")
    for be in a.backends.split(","):
        kw = dict(family=a.family, n_components=2, tol=0.0, accel=False, seed=1, backend=be,
                  progress=False, n_starts=a.starts, max_iter=a.iters)
        plain = None
        for name, data, wts in (("unweighted", x, None), ("weights 1..4", x, w),
                                ("values repeated", rep, None)):
            bulkem.fit(data[:2], **{**kw, "n_starts": 2, "max_iter": 2},
                       weights=None if wts is None else wts[:2])  # compile
            best, eng = np.inf, np.inf
            for _ in range(2):
                engine_s[0] = 0.0
                t = time.perf_counter()
                bulkem.fit(data, weights=wts, **kw)
                took = time.perf_counter() - t
                if took < best:
                    best, eng = took, engine_s[0]
            plain = plain or best
            print(f"| {be} | {name} | {best:.3f} | {eng:.3f} | "
                  f"{a.datasets * a.starts / best:,.0f} | {best / plain:.2f}x the time |",
                  flush=True)


if __name__ == "__main__":
    main()
