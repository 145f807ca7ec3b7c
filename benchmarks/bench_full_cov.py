"""Full covariance mixtures (issue 34): bulkem against scikit-learn in the same run.

    python benchmarks/bench_full_cov.py [--backends cpu,cuda] [--datasets 1000] [--obs 1000]
                                        [--large-n 230400] [--large-m 32] [--large-d 32]
                                        [--covariance-type full]

Two workloads, plain EM for a fixed number of iterations (``tol=0``, ``accel=False``) so
that both sides do the same work:

* bulk: ``--datasets`` datasets of ``--obs`` points, D = 4, M = 3, ``--starts`` starts,
  ``--iters`` iterations; bulkem's whole call against ``GaussianMixture(3,
  covariance_type="full", n_init=starts)`` per dataset in a process pool of one worker per
  core with one BLAS thread each, and one at a time on one core (``baselines.rates``;
  ``--baseline-datasets`` of them), in fits per second; ``--covariance-type`` ``tied`` or
  ``spherical`` runs this workload with that type on both sides (the large one stays full);
* large: one dataset of ``--large-n`` points, D = ``--large-d``, M = ``--large-m``, from one
  start: milliseconds per iteration from two whole calls (``--iters`` and ``2 --iters``
  iterations: the difference over ``--iters``), against scikit-learn's own fit with its BLAS
  on every core, timed the same way.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
import warnings

import numpy as np
from baselines import rates
from timing import engine_seconds
from tuning_args import from_items


def bulk_batch(n_datasets: int, n: int, D: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_datasets):
        parts = []
        for m, k in enumerate((n // 3, n // 3, n - 2 * (n // 3))):
            A = rng.normal(size=(D, D)) * 0.5
            parts.append(rng.normal(size=(k, D)) @ A + 3.0 * m)
        out.append(np.vstack(parts))
    return out


def sk_fit(job: tuple) -> float:
    from sklearn.mixture import GaussianMixture

    x, M, starts, iters, cov_type = job
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm = GaussianMixture(M, covariance_type=cov_type, n_init=starts, max_iter=iters, tol=0.0,
                             reg_covar=1e-6, init_params="random_from_data",
                             random_state=0).fit(x)
    return float(gm.lower_bound_)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--baseline-datasets", type=int, default=32)
    ap.add_argument("--large-n", type=int, default=230_400)
    ap.add_argument("--large-m", type=int, default=32)
    ap.add_argument("--large-d", type=int, default=32)
    ap.add_argument("--covariance-type", default="full",
                    help="the bulk workload's: full, tied or spherical")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--skip-bulk", action="store_true")
    ap.add_argument("--skip-sklearn", action="store_true", help="large: no scikit-learn row")
    ap.add_argument("--large-iters", type=int, help="iterations of the large fits "
                    "(default --iters)")
    ap.add_argument("--slow-iters", type=int, help="iterations of the CPU engine's and "
                    "scikit-learn's large fits (default: as the GPU's)")
    ap.add_argument("--large-dtypes", default="float64", help="e.g. float64,float32")
    ap.add_argument("--large-set", nargs="*", default=[""],
                    help="Tuning variants of the large fits, each 'NAME=VALUE ...' "
                         "(tuning_args.py), e.g. 'large_cuda_threads=256'")
    a = ap.parse_args()
    import bulkem

    kw = dict(family="gaussian", covariance_type="full", tol=0.0, accel=False, progress=False)
    print(f"device: {platform.node()}, {os.cpu_count()} CPUs; {datetime.date.today()}")
    if not a.skip_bulk:
        bulk(a, bulkem, kw)
    if not a.skip_large:
        large(a, bulkem, kw)
    return 0


def bulk(a, bulkem, kw) -> None:
    X = bulk_batch(a.datasets, a.obs, 4)
    kw = {**kw, "covariance_type": a.covariance_type}
    print(f"bulk: {a.covariance_type} covariances, {a.datasets} datasets x {a.obs} points, "
          f"D = 4, M = 3, {a.starts} starts, "
          f"{a.iters} iterations (fits/s: datasets x starts / whole-call seconds)")
    print("| backend | whole call s | engines s | fits/s |")
    print("|---|---|---|---|")
    engines = engine_seconds()  # the engines' time inside the whole call
    for be in a.backends.split(","):
        bulkem.fit(X[:2], n_components=3, n_starts=2, max_iter=2, backend=be, **kw)  # compile
        best = (np.inf, 0.0)
        for _ in range(2):
            engines[0] = 0.0
            t = timed(lambda be=be: bulkem.fit(X, n_components=3, n_starts=a.starts,
                                               max_iter=a.iters, seed=1, backend=be, **kw))
            best = min(best, (t, engines[0]))
        t, e = best
        print(f"| {be} | {t:.3f} | {e:.3f} | {a.datasets * a.starts / t:,.0f} |", flush=True)
    nb = min(a.baseline_datasets, a.datasets)
    pool_rate, core_rate, workers, _ = rates(
        sk_fit, [(X[d], 3, a.starts, a.iters, a.covariance_type) for d in range(nb)],
        per_core_jobs=min(4, nb))
    print(f"scikit-learn GaussianMixture({a.covariance_type}), {nb} datasets: pool of {workers} "
          f"(1 BLAS thread each) {pool_rate * a.starts:,.1f} fits/s; one core "
          f"{core_rate * a.starts:,.2f} fits/s")


def large(a, bulkem, kw) -> None:
    from bulkem.engines.cuda import large as cuda_large

    iters = a.large_iters or a.iters
    rng = np.random.default_rng(1)
    N, M, D = a.large_n, a.large_m, a.large_d
    centres = rng.normal(0, 4, (M, D))
    big = centres[rng.integers(0, M, N)] + rng.normal(size=(N, D))
    tri = np.tril_indices(D)
    init = {"weight": np.full((1, M), 1.0 / M), "mean": big[rng.choice(N, M, replace=False)][None],
            "cov": np.tile(np.eye(D)[tri], (1, M, 1))}
    print(f"\nlarge: one dataset, N = {N:,}, D = {D}, M = {M}, one start; ms per iteration from "
          f"whole calls of {iters} and {2 * iters} iterations (the GPU's EM loop alone beside "
          "it: launches and device work of the longer call, per iteration)")
    print("| backend | dtype | tuning | ms / iteration | GPU loop ms / iteration | whole call "
          "of the longer, s | first call (compiles), s |")
    print("|---|---|---|---|---|---|---|")
    for be, dt, var in ((be, dt, var) for be in a.backends.split(",")
                        for dt in a.large_dtypes.split(",") for var in a.large_set):
        tuning = from_items(var.split())

        k1 = iters if be == "cuda" else (a.slow_iters or iters)

        def run(k, be=be, dt=dt, tuning=tuning):
            return bulkem.fit([big], n_components=M, n_starts=1, init=init, max_iter=k,
                              backend=be, dtype=dt, tuning=tuning, **kw)
        cold = timed(lambda: run(1))
        t1, t2 = timed(lambda k1=k1: run(k1)), timed(lambda k1=k1: run(2 * k1))
        loop = cuda_large.last_cuda_loop
        kern = (f"{1e3 * loop['seconds'] / loop['iterations']:.2f}"
                if be == "cuda" and loop["iterations"] else "")
        print(f"| {be} | {dt} | {var or 'default'} | {1e3 * (t2 - t1) / k1:.2f} | {kern} "
              f"| {t2:.2f} | {cold:.1f} |", flush=True)
    if a.skip_sklearn:
        return
    from sklearn.mixture import GaussianMixture

    prec = np.linalg.inv(np.eye(D))[None].repeat(M, axis=0)

    def sk(k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            GaussianMixture(M, covariance_type="full", weights_init=init["weight"][0],
                            means_init=init["mean"][0], precisions_init=prec, max_iter=k,
                            tol=0.0, reg_covar=1e-6).fit(big)
    k1 = a.slow_iters or iters
    s1, s2 = timed(lambda: sk(k1)), timed(lambda: sk(2 * k1))
    print(f"| scikit-learn, BLAS on every core | float64 | | {1e3 * (s2 - s1) / k1:.1f} | | "
          f"{s2:.2f} | |")


if __name__ == "__main__":
    raise SystemExit(main())
