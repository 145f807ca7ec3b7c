"""What bootstrap intervals, checkpoints and traces cost a whole call, per backend, in one run.

    python benchmarks/bench_capabilities.py [--backends cpu,cuda] [--datasets 1000]
                                            [--cpu-datasets 100] [--boot 20]

Inverse-Gaussian mixtures (the demo's, M = 2, 1,000 values a dataset, 10 starts, 100
iterations of plain EM, ``tol=0``), every call whole (tables included), the best of
``--repeat`` after a warm-up that compiles every kernel:

* ``fit(bootstrap=B)`` against the same fit without: the refit of ``B`` parametric samples of
  each dataset is one more batch, of ``B`` x datasets datasets with the fit's starts;
* ``fit(checkpoint=dir)`` (a fresh run directory each time, chunks of ``--chunk`` datasets
  (``Tuning.checkpoint_chunk_fits``),
  Parquet tables written as each chunk finishes) against the same fit without; then the
  same call again on the finished directory (resume: every table read back, nothing fitted);
* ``fit(trace=True)`` (every start's log-likelihood after each iteration) against the same
  fit without;
* hidden Markov models (categorical, 4 states, 8 symbols, ``--hmm-datasets`` datasets of 20
  sequences of 50-500 symbols, 10 starts, 50 iterations): the plain fit against the same with
  a weight per sequence (1, 2 or 3) and with 10% of the steps missing (NaN).

The CPU engine fits ``--cpu-datasets`` of the datasets (its rows are rates, fits per
second); the GPU all of them.  Each time is the whole call's, with the engines' part of it in
brackets (``timing.engine_seconds``: starts, packing and kernels).  Prints two tables.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import tempfile
import time
import warnings

import numpy as np
from timing import engine_seconds

import bulkem
from bulkem.interop.datasets import simulate_demo
from bulkem.tuning import DEFAULT

ENGINES = engine_seconds()  # the engines' seconds inside each whole call


def best_of(repeat: int, *args, **kwargs) -> tuple[float, float]:
    """The fewest seconds of ``repeat`` calls ``bulkem.fit(*args, **kwargs)``, and the
    engines' seconds within that call."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        ENGINES[0] = 0.0
        t = time.perf_counter()
        bulkem.fit(*args, **kwargs)
        best = min(best, (time.perf_counter() - t, ENGINES[0]))
    return best


def cell(t: tuple[float, float]) -> str:
    """A whole call's seconds with the engines' in brackets."""
    return f"{t[0]:.3f} ({t[1]:.3f})"


def measure(d: list, kw: dict, a, root: str) -> tuple[tuple[float, float], ...]:
    """(whole call, engines) seconds of the plain fit, with ``bootstrap=``, with a fresh
    checkpoint (a new run directory each time), resumed, and with ``trace=True``."""
    chunked = DEFAULT.replace(checkpoint_chunk_fits=a.chunk * a.starts)
    for extra in ({}, {"bootstrap": a.boot}, {"trace": True}):  # compile
        bulkem.fit(d[:4], **{**kw, "max_iter": 2}, **extra)
    plain = best_of(a.repeat, d, **kw)
    boot = best_of(a.repeat, d, bootstrap=a.boot, **kw)
    ckpt = min(best_of(1, d, checkpoint=f"{root}-{k}", tuning=chunked, **kw)
               for k in range(a.repeat))
    resume = best_of(a.repeat, d, checkpoint=f"{root}-0", tuning=chunked, **kw)
    trace = best_of(a.repeat, d, trace=True, **kw)
    return plain, boot, ckpt, resume, trace


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="cpu,cuda")
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--cpu-datasets", type=int, default=100)
    ap.add_argument("--obs", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--boot", type=int, default=20, help="bootstrap samples per dataset")
    ap.add_argument("--chunk", type=int, default=250, help="datasets per checkpoint chunk")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--hmm-datasets", type=int, default=200)
    ap.add_argument("--hmm-cpu-datasets", type=int, default=40)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    data = simulate_demo(a.datasets, a.obs, seed=1)
    kw = dict(n_components=2, n_starts=a.starts, max_iter=a.iters, tol=0.0, accel=False,
              seed=1, progress=False)
    print(f"# bench_capabilities {datetime.date.today()}  {platform.node()}  "
          f"cpus={os.cpu_count()}")
    print(f"# inverse Gaussian M = 2, {a.obs} values a dataset, {a.starts} starts, {a.iters} "
          f"iterations (plain EM); bootstrap B = {a.boot}; "
          f"checkpoint chunks of {a.chunk} datasets")
    print("| backend | datasets | plain fit s (engines) | bootstrap s | x plain | checkpoint s "
          "| x plain | resume s | trace s | x plain | plain fits/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    root = tempfile.mkdtemp(prefix="bulkem_bench_cap_")
    try:
        for be in a.backends.split(","):
            d = data if be != "cpu" else data[:a.cpu_datasets]
            plain, boot, ckpt, resume, trace = measure(d, {**kw, "backend": be}, a,
                                                       os.path.join(root, be))
            print(f"| {be} | {len(d)} | {cell(plain)} | {cell(boot)} | {boot[0] / plain[0]:.2f} "
                  f"| {cell(ckpt)} | {ckpt[0] / plain[0]:.2f} | {cell(resume)} | {cell(trace)} "
                  f"| {trace[0] / plain[0]:.2f} | {len(d) * a.starts / plain[0]:,.0f} |",
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.hmm_datasets:
        hmm_rows(a)
    return 0


def hmm_rows(a) -> None:
    """The HMM table: plain, weighted and holed fits per backend."""
    rng = np.random.default_rng(3)
    seqs = [[rng.integers(0, 8, rng.integers(50, 501)).astype(float) for _ in range(20)]
            for _ in range(a.hmm_datasets)]
    weights = [rng.integers(1, 4, 20).astype(float) for _ in seqs]
    holed = [[np.where(rng.random(len(x)) < 0.1, np.nan, x) for x in d] for d in seqs]
    kw = dict(family="hmm", emission="categorical", n_symbols=8, n_components=4, n_starts=10,
              max_iter=50, tol=0.0, accel=False, seed=1, progress=False)
    print("\n# categorical HMM, 4 states, 8 symbols, 20 sequences of 50-500 a dataset, "
          "10 starts, 50 iterations (plain EM); weights 1-3 per sequence; 10% of steps NaN")
    print("| backend | datasets | plain s (engines) | weighted s | x plain | 10% missing s "
          "| x plain | plain fits/s |")
    print("|---|---|---|---|---|---|---|---|")
    for be in a.backends.split(","):
        n = a.hmm_datasets if be != "cpu" else a.hmm_cpu_datasets
        d, w, h = seqs[:n], weights[:n], holed[:n]
        run = {**kw, "backend": be}
        for args in ((d[:2], {}), (d[:2], {"weights": w[:2]}), (h[:2], {})):  # compile
            bulkem.fit(args[0], **{**run, "max_iter": 2}, **args[1])
        plain = best_of(a.repeat, d, **run)
        weighted = best_of(a.repeat, d, weights=w, **run)
        missing = best_of(a.repeat, h, **run)
        print(f"| {be} | {n} | {cell(plain)} | {cell(weighted)} | {weighted[0] / plain[0]:.2f} "
              f"| {cell(missing)} | {missing[0] / plain[0]:.2f} | {n * 10 / plain[0]:,.0f} |",
              flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
