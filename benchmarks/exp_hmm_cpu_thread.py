"""The CPU engine's HMM E-step on one thread: nanoseconds per observation and iteration.

A few datasets of the issue-13 batch shape (``bench_hmm.make_batch``: 20 sequences of
50-500 observations, N = 4 states), 4 starts, 100 iterations (``tol=0``, no acceleration),
``backend="cpu"`` with one Numba thread, best of 3 whole calls after a warm-up (which
compiles, or loads from the disk cache; its seconds are printed), the engines' part of the
best call beside it (``timing.engine_seconds``: starts, packing, the kernels).  For A/B runs of an
E-step change on a machine too small for ``bench_hmm.py``:

    python benchmarks/exp_hmm_cpu_thread.py gaussian1 gaussian4 poisson categorical
    python benchmarks/exp_hmm_cpu_thread.py --datasets 8 gaussian4
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numba

import bulkem

sys.path.insert(0, os.path.dirname(__file__))
from bench_hmm import EMISSIONS, make_batch  # noqa: E402
from timing import engine_seconds  # noqa: E402

ENGINES = engine_seconds()


def measure(emission: str, n_datasets: int, repeat: int = 3
            ) -> tuple[float, float, float, float]:
    """(first call s, best call s, its engines' s, ns per observation-iteration)."""
    kind, _ = EMISSIONS[emission]
    data = make_batch(n_datasets, emission=emission)
    kw = dict(family="hmm", emission=kind, n_components=4, n_starts=4, max_iter=100, tol=0.0,
              backend="cpu", progress=False, seed=1, accel=False)
    if kind == "categorical":
        kw["n_symbols"] = 8
    if kind == "gaussian":
        kw["reg_covar"] = 0.0
    t = time.perf_counter()
    bulkem.fit(data[:1], **{**kw, "n_starts": 1, "max_iter": 2})
    first = time.perf_counter() - t
    best, engines = float("inf"), 0.0
    for _ in range(repeat):
        ENGINES[0] = 0.0
        t = time.perf_counter()
        bulkem.fit(data, **kw)
        took = time.perf_counter() - t
        if took < best:
            best, engines = took, ENGINES[0]
    obs = sum(len(s) for d in data for s in d)
    return first, best, engines, best / (obs * kw["n_starts"] * kw["max_iter"]) * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("emissions", nargs="+", choices=list(EMISSIONS))
    ap.add_argument("--datasets", type=int, default=4)
    args = ap.parse_args()
    numba.set_num_threads(1)
    print(f"{'emission':<12} {'first call s':>12} {'best call s':>12} {'engines s':>10} "
          f"{'ns/obs-iter':>12}")
    for e in args.emissions:
        first, best, engines, ns = measure(e, args.datasets)
        print(f"{e:<12} {first:12.1f} {best:12.3f} {engines:10.3f} {ns:12.1f}")


if __name__ == "__main__":
    main()
