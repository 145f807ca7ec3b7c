"""EM fits of many AR(p)-plus-noise series: bulkem on the CPU cores and the GPU, beside statsmodels.

The issue's workload: ``--n-series`` AR(3) series x ``--n-steps`` steps (10,000
x 500), each fitted from ``--n-starts`` random starts (10) for exactly
``--n-iter`` EM iterations (50; ``tol=0``), through ``bulkem.fit(family="ar")``
end to end (packing, starts, tables; compilation excluded by a warm-up fit
of the same order).

Baseline, in the same run: statsmodels' ``SARIMAX(order=(p, 0, 0),
measurement_error=True).fit()`` (maximum likelihood by L-BFGS from its own
start, the stationary prior as bulkem's) in a loop over ``--sm-sample``
series, on one core.  That is what a Python user would otherwise run to fit
an AR model with observation noise to each series: statsmodels has no EM
for SARIMAX, and simdkalman's EM learns the noise covariances only, not the
transition matrix (the AR coefficients).  The two do different work per
series (10 EM starts x 50 iterations against one quasi-Newton fit to
convergence), so the ratio compares *series* per second; the accuracy rows
say how close bulkem's best start came to statsmodels' maximum (the
log-likelihood gap, statsmodels minus bulkem, on the sample).

    python benchmarks/bench_kalman_em.py                          # the issue's sizes
    python benchmarks/bench_kalman_em.py --n-series 300 --sm-sample 20   # a small CPU
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
import warnings

# statsmodels' baseline on one core: a BLAS thread pool on its tiny matrices only contends
# (measured here: 40x slower with two threads on a loaded machine).  Set before NumPy loads.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402

import bulkem  # noqa: E402
from bulkem import StateSpace  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from bench_kalman import row, simulate_ar  # noqa: E402
from tuning_args import from_items  # noqa: E402

PHI = {1: [0.6], 2: [0.5, -0.3], 3: [0.5, -0.3, 0.2]}  # stationary; the AR(3)


def bulkem_fit(ys, args, backend):
    return bulkem.fit(list(ys), family="ar", order=args.order, n_starts=args.n_starts,
                      max_iter=args.n_iter, tol=0.0, accel=False, seed=args.seed, backend=backend,
                      progress=False, tuning=from_items(args.set))


def statsmodels_fits(ys, order: int) -> tuple[float, np.ndarray]:
    """Seconds and log-likelihoods of SARIMAX maximum-likelihood fits, one series at a time."""
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    llf = np.empty(len(ys))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and boundary warnings of the optimiser
        for k, y in enumerate(ys):
            mod = SARIMAX(y, order=(order, 0, 0), measurement_error=True, trend="n")
            llf[k] = mod.fit(disp=False).llf
    return time.perf_counter() - t0, llf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-series", type=int, default=10_000)
    ap.add_argument("--n-steps", type=int, default=500)
    ap.add_argument("--n-starts", type=int, default=10)
    ap.add_argument("--n-iter", type=int, default=50)
    ap.add_argument("--order", type=int, default=3, choices=sorted(PHI))
    ap.add_argument("--sm-sample", type=int, default=30, help="series of the statsmodels loop")
    ap.add_argument("--backends", default="auto",
                    help="comma-separated cpu,cuda; auto: the CPU, and the GPU when usable")
    ap.add_argument("--cpu-series", type=int, default=0,
                    help="the CPU engine is timed on this many series (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a Tuning field to fit with, e.g. cuda_max_registers_units=None")
    args = ap.parse_args()
    from bulkem.engines import cuda

    gpu, found = cuda.available()
    backends = (["cpu"] + (["cuda"] if gpu else []) if args.backends == "auto"
                else args.backends.split(","))
    print(f"bench_kalman_em  {datetime.datetime.now():%Y-%m-%d %H:%M}  {platform.node()}  "
          f"{platform.processor() or platform.machine()}  numba {numba.__version__}  "
          f"{numba.config.NUMBA_NUM_THREADS} threads  GPU: {found}")
    model = StateSpace.ar(PHI[args.order], sigma2=1.0, obs_var=0.5)
    t0 = time.perf_counter()
    ys = simulate_ar(model, args.n_series, args.n_steps, args.seed)
    print(f"{args.n_series} AR({args.order}) series x {args.n_steps} steps (simulated in "
          f"{time.perf_counter() - t0:.1f} s), {args.n_starts} starts, {args.n_iter} "
          "iterations (tol=0), float64", flush=True)

    n_sm = min(args.sm_sample, args.n_series)
    sm_s, sm_llf = statsmodels_fits(ys[:n_sm], args.order)
    sm_rate = n_sm / sm_s
    row("", "series", "fits", "seconds", "fits/s", "series/s", "x statsmodels",
        widths=(40, 8, 10, 10, 12, 10, 14))
    results = {}
    for be in backends:
        t0 = time.perf_counter()
        bulkem_fit(ys[:4, :50], argparse.Namespace(**{**vars(args), "n_iter": 2}), be)
        warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        data = ys[:args.cpu_series] if be == "cpu" and args.cpu_series else ys
        res = bulkem_fit(data, args, be)
        dt = time.perf_counter() - t0
        results[be] = res
        n_fits = len(data) * args.n_starts
        where = (f"{numba.config.NUMBA_NUM_THREADS} CPU threads" if be == "cpu"
                 else "GPU")
        row(f"bulkem {be} ({where}; compile {warm:.0f} s)", len(data), n_fits,
            f"{dt:.2f}", f"{n_fits / dt:,.0f}", f"{len(data) / dt:,.1f}",
            f"{len(data) / dt / sm_rate:,.1f}", widths=(40, 8, 10, 10, 12, 10, 14))
    row("statsmodels SARIMAX MLE loop (1 core)", n_sm, n_sm, f"{sm_s:.2f}",
        f"{sm_rate:,.1f}", f"{sm_rate:,.1f}", "1.0", widths=(40, 8, 10, 10, 12, 10, 14))
    for be, res in results.items():
        s = res.summary
        gap = sm_llf[:len(s)] - s.loglik.to_numpy()[:n_sm]
        status = s.status.value_counts().to_dict()
        print(f"accuracy ({be}): statsmodels MLE loglik minus bulkem's best start on the "
              f"{n_sm} sampled series: median {np.median(gap):.3g}, 90th percentile "
              f"{np.quantile(gap, 0.9):.3g}, max {gap.max():.3g}; statuses {status}; "
              f"degenerate starts {int((res.starts.status == 'degenerate').sum())}")
    if len(results) == 2:
        a, b = results["cpu"].starts, results["cuda"].starts
        b = b[b.dataset.isin(a.dataset.unique())]  # the series both engines fitted
        a, b = a.loglik.to_numpy(), b.loglik.to_numpy()
        rel = np.abs(a - b) / np.abs(a)
        print(f"cpu vs cuda: largest relative difference of the starts' log-likelihoods "
              f"{np.nanmax(rel):.2g}")


if __name__ == "__main__":
    main()
