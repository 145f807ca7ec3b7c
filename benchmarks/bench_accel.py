"""Accelerated EM (SQUAREM, ``fit(accel=True)``) beside plain EM, same starts, same run (issue 38).

Workloads, each fitted to convergence (``tol``, default 1e-6 on the log-likelihood, with a
``--max-iter`` high enough that few starts stop there) from the same seed, once plain and
once accelerated:

* ``ar``: the state-space EM benchmark, ``--ar-series`` AR(3)-plus-noise series x 500 steps
  (10,000 x 500 in the issue), ``--ar-starts`` starts (10);
* ``hmm``: the HMM bulk batch of issue 13, ``--hmm-datasets`` datasets (1,000) x 20
  categorical sequences of 50-500 symbols, N = 4, V = 8, ``--hmm-starts`` starts (20);
* ``nile``: the Nile local level (100 values), 50 starts.

Printed per workload and backend: passes over the data per start (mean; ``n_iter``: with
acceleration an E-step whose extrapolation was not kept counts too), the share of starts
stopped by ``max_iter``, the whole call's seconds and fits per second, and how the best
fits compare (relative log-likelihood difference of each dataset's best, accelerated minus
plain: the median, and the datasets where the accelerated best is higher or lower by more
than 1e-9 relative).  Compilation is excluded by a warm-up of each workload's kernels.

    python benchmarks/bench_accel.py                                   # the issue's sizes
    python benchmarks/bench_accel.py --ar-series 300 --hmm-datasets 30 --backends cpu
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
import warnings

import numpy as np

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402

import bulkem  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from bench_hmm import N_STATES, N_SYMBOLS, make_batch  # noqa: E402
from bench_kalman import simulate_ar  # noqa: E402

NILE = np.array([
    1120, 1160, 963, 1210, 1160, 1160, 813, 1230, 1370, 1140, 995, 935, 1110, 994, 1020,
    960, 1180, 799, 958, 1140, 1100, 1210, 1150, 1250, 1260, 1220, 1030, 1100, 774, 840,
    874, 694, 940, 833, 701, 916, 692, 1020, 1050, 969, 831, 726, 456, 824, 702, 1120,
    1100, 832, 764, 821, 768, 845, 864, 862, 698, 845, 744, 796, 1040, 759, 781, 865, 845,
    944, 984, 897, 822, 1010, 771, 676, 649, 846, 812, 742, 801, 1040, 860, 874, 848, 890,
    744, 749, 838, 1050, 918, 986, 797, 923, 975, 815, 1020, 906, 901, 1170, 912, 746, 919,
    718, 714, 740], dtype=float)


def workloads(args):
    """``name -> (data, fit keywords, starts)``."""
    out = {}
    if args.ar_series:
        model = bulkem.StateSpace.ar([0.5, -0.3, 0.2], sigma2=1.0, obs_var=0.5)
        ys = simulate_ar(model, args.ar_series, 500, args.seed)
        out["ar"] = ([[y] for y in ys], dict(family="ar", order=3), args.ar_starts)
    if args.hmm_datasets:
        out["hmm"] = (make_batch(args.hmm_datasets, seed=args.seed),
                      dict(family="hmm", emission="categorical", n_symbols=N_SYMBOLS,
                           n_components=N_STATES), args.hmm_starts)
    out["nile"] = ([[NILE]], dict(family="local_level"), 50)
    return out


def run(data, kw, starts, backend, accel, max_iter, tol, seed):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bulkem.fit(data, n_starts=starts, seed=seed, max_iter=max_iter, tol=tol,
                         backend=backend, accel=accel, progress=False, **kw)
    return res, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ar-series", type=int, default=10_000)
    ap.add_argument("--ar-starts", type=int, default=10)
    ap.add_argument("--hmm-datasets", type=int, default=1_000)
    ap.add_argument("--hmm-starts", type=int, default=20)
    ap.add_argument("--max-iter", type=int, default=5000)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--backends", default="auto", help="comma-separated: cpu, cuda; auto: both "
                    "where a GPU is usable")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    from bulkem.engines import cuda

    backends = (["cpu"] + (["cuda"] if cuda.available()[0] else [])
                if args.backends == "auto" else args.backends.split(","))
    print(f"# bulkem accelerated EM, {datetime.date.today()}, {platform.node()}, "
          f"{numba.get_num_threads()} CPU threads, backends {backends}, tol {args.tol:g}, "
          f"max_iter {args.max_iter}, float64", flush=True)
    work = workloads(args)
    print("| workload | backend | EM | fits | passes/start | at max_iter | call s | fits/s "
          "| passes ratio | speed-up | best: median rel diff, higher, lower |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, (data, kw, starts) in work.items():
        for backend in backends:
            for accel in (False, True):  # warm-up: compile
                run(data[:2], kw, 2, backend, accel, 3, 0.0, args.seed)
            got = {accel: run(data, kw, starts, backend, accel, args.max_iter, args.tol,
                              args.seed) for accel in (False, True)}
            (plain, tp), (fast, tf) = got[False], got[True]
            a, b = plain.summary.loglik.to_numpy(), fast.summary.loglik.to_numpy()
            rel = (b - a) / np.abs(a)
            higher, lower = int((rel > 1e-9).sum()), int((rel < -1e-9).sum())
            ip, ia = plain.starts.n_iter.mean(), fast.starts.n_iter.mean()
            for res, t, acc in ((plain, tp, "plain"), (fast, tf, "SQUAREM")):
                st = res.starts
                n = len(st)
                extra = (f"{ip / ia:.2f}x | {tp / tf:.2f}x | {np.nanmedian(rel):.1e}, {higher}, "
                         f"{lower}" if acc == "SQUAREM" else " | | ")
                print(f"| {name} | {backend} | {acc} | {n:,} | {st.n_iter.mean():.1f} | "
                      f"{(st.status == 'max_iter').mean():.1%} | {t:.3f} | {n / t:,.0f} | "
                      f"{extra} |", flush=True)


if __name__ == "__main__":
    main()
