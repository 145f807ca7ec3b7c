"""The count and positive-value mixture families (Poisson, negative binomial, log-normal,
gamma): whole-call fits per second on each backend, the same batch, in one run.

    python benchmarks/bench_families.py [--backends cpu,cuda] [--datasets 1000] [--obs 2000]
                                        [--starts 20] [--iters 100]
                                        [--families poisson,negbinom,lognormal,gamma]

Plain EM for a fixed number of iterations (``tol=0``, ``accel=False``): the same work on
every backend. Whole calls (packing, starts, tables), best of two after a warm-up, with the
engines' time inside the call beside it (``engines.select.run_jobs``: starts, packing per
chunk, kernels).

The baseline (``--baseline-datasets``, 0: none) is a loop a SciPy user would write: the
tests' oracles (``tests/reference.py``: NumPy EM with ``scipy.stats`` log-densities, the
gamma shape and the negative binomial's ``u`` by ``scipy.optimize.brentq``), one
(dataset, start) per job from a quantile start, the same iterations, in a pool of one
worker per core with one BLAS thread each and one at a time on one core
(``baselines.rates``); its rate is in fits (dataset, start) per second.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))


def scipy_fit(job) -> float:
    """One (dataset, start) by the tests' SciPy oracle: the log-likelihood after ``iters``."""
    import reference

    family, x, iters = job
    q = np.quantile(x, [0.25, 0.75])
    w = np.array([0.5, 0.5])
    if family == "poisson":
        return reference.poisson_em(x, w, q + 0.5, max_iter=iters, tol=0.0)["loglik"]
    if family == "negbinom":
        return reference.negbinom_em(x, w, np.full(2, 2.0), q + 0.5, max_iter=iters,
                                     tol=0.0)["loglik"]
    if family == "lognormal":
        return reference.lognormal_em(x, w, np.log(q), np.full(2, np.var(np.log(x))),
                                      max_iter=iters, tol=0.0)["loglik"]
    m, v = q, np.full(2, np.var(x))
    return reference.gamma_em(x, w, m * m / v, m / v, max_iter=iters, tol=0.0)["loglik"]


def batch(family: str, D: int, n: int, rng) -> list[np.ndarray]:
    half = n // 2
    if family == "poisson":
        return [np.r_[rng.poisson(3.0, half), rng.poisson(12.0, n - half)].astype(float)
                for _ in range(D)]
    if family == "negbinom":
        return [np.r_[rng.negative_binomial(2, 2 / 5, half),
                      rng.negative_binomial(6, 6 / 46, n - half)].astype(float)
                for _ in range(D)]
    if family == "lognormal":
        return [np.exp(np.r_[rng.normal(0, 0.5, half), rng.normal(2, 0.4, n - half)])
                for _ in range(D)]
    return [np.r_[rng.gamma(2.0, 1.0, half), rng.gamma(20.0, 0.5, n - half)] for _ in range(D)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--baseline-datasets", type=int, default=0)
    ap.add_argument("--families", default="poisson,negbinom,lognormal,gamma")
    a = ap.parse_args()
    from timing import engine_seconds

    import bulkem

    engine_s = engine_seconds()  # the engines' time inside the whole call
    rng = np.random.default_rng(0)
    print(f"device: {platform.node()}, {os.cpu_count()} CPUs; {datetime.date.today()}; "
          f"{a.datasets:,} datasets x {a.obs:,} values, M = 2, {a.starts} starts, {a.iters} "
          "iterations")
    print("| family | backend | whole call s | engines s | fits/s |")
    print("|---|---|---|---|---|")
    for fam in a.families.split(","):
        x = batch(fam, a.datasets, a.obs, rng)
        for be in a.backends.split(","):
            kw = dict(family=fam, n_components=2, tol=0.0, accel=False, seed=1, backend=be,
                      progress=False)
            bulkem.fit(x[:2], n_starts=2, max_iter=2, **kw)  # compile
            best, eng = np.inf, np.nan
            for _ in range(2):
                engine_s[0] = 0.0
                t = time.perf_counter()
                bulkem.fit(x, n_starts=a.starts, max_iter=a.iters, **kw)
                took = time.perf_counter() - t
                if took < best:
                    best, eng = took, engine_s[0]
            print(f"| {fam} | {be} | {best:.3f} | {eng:.3f} | "
                  f"{a.datasets * a.starts / best:,.0f} |", flush=True)
        if a.baseline_datasets:
            from baselines import rates

            jobs = [(fam, x[d], a.iters) for d in range(a.baseline_datasets)
                    for _ in range(a.starts)]
            pool_rate, core_rate, workers, _ = rates(scipy_fit, jobs)
            print(f"| {fam} | SciPy loop (tests/reference.py), pool of {workers} | | | "
                  f"{pool_rate:,.1f} (one core: {core_rate:,.1f}) |", flush=True)


if __name__ == "__main__":
    main()
