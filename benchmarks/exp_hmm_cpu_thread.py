"""The CPU engine's HMM E-step on one thread: nanoseconds per observation and iteration.

A few datasets of the issue-13 batch shape (``bench_hmm.make_batch``: 20 sequences of
50-500 observations, N = 4 states), 4 starts, 100 iterations (``tol=0``, no acceleration),
``backend="cpu"`` with one Numba thread, best of 3 whole calls after a warm-up (which
compiles, or loads from the disk cache; its seconds are printed).  For A/B runs of an
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


def measure(emission: str, n_datasets: int, repeat: int = 3) -> tuple[float, float, float]:
    """(first call s, best call s, ns per observation-iteration) for one emission."""
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
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        bulkem.fit(data, **kw)
        best = min(best, time.perf_counter() - t)
    obs = sum(len(s) for d in data for s in d)
    return first, best, best / (obs * kw["n_starts"] * kw["max_iter"]) * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("emissions", nargs="+", choices=list(EMISSIONS))
    ap.add_argument("--datasets", type=int, default=4)
    args = ap.parse_args()
    numba.set_num_threads(1)
    print(f"{'emission':<12} {'first call s':>12} {'best call s':>12} {'ns/obs-iter':>12}")
    for e in args.emissions:
        first, best, ns = measure(e, args.datasets)
        print(f"{e:<12} {first:12.1f} {best:12.3f} {ns:12.1f}")


if __name__ == "__main__":
    main()
