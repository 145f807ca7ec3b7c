"""Model choice over a grid of sizes: one grid call against one call per size, and a loop a
scikit-learn user would write, in one run.

    python benchmarks/bench_selection.py                      # issue 32's size (long on a CPU)
    python benchmarks/bench_selection.py --datasets 100 --obs 500 --baseline-datasets 4

Rows (whole calls, compilation excluded by a warm-up of every variant on a small batch):

* inverse Gaussian, K = 1..6 x ``--starts`` on ``--datasets`` datasets of ``--obs`` values:
  ``bulkem.fit(n_components=range(1, 7))`` (on the CPU one run-time-size kernel), alone and
  with its ``selection`` table read (whose ICL column is computed on first use), against six
  calls ``n_components=k`` (compiled sizes, the default) and six calls with the grid's tuning;
* Gaussian (D = 1), the same grid and batch against scikit-learn's ``GaussianMixture`` per K
  (``covariance_type="diag"``, ``n_init`` = the starts, the same ``max_iter``, ``tol`` and
  ``reg_covar``, ``init_params="k-means++"``) over ``--baseline-datasets`` datasets in a
  process pool of one worker per core with one BLAS thread each, and one at a time on one
  core (``baselines.rates``); the ratio is in datasets (all K) per second.

A fit is a (dataset, size, start): the grid's fits are datasets x 6 x starts.
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

import bulkem
from bulkem.tuning import Tuning

sys.path.insert(0, os.path.dirname(__file__))
from baselines import rates  # noqa: E402

KS = range(1, 7)


def ig_batch(n: int, obs: int, seed: int = 1) -> list[np.ndarray]:
    """Datasets of 1-3 inverse-Gaussian components (a third each), ``obs`` values each."""
    rng = np.random.default_rng(seed)
    out = []
    for d in range(n):
        m = d % 3 + 1
        mu = np.array([1.0, 3.0, 8.0])[:m]
        comp = rng.integers(0, m, obs)
        out.append(rng.wald(mu[comp], 10.0 * mu[comp]))
    return out


def gauss_batch(n: int, obs: int, seed: int = 2) -> list[np.ndarray]:
    """Datasets of 1-3 Gaussian components (D = 1), ``obs`` values each, shape (obs, 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for d in range(n):
        m = d % 3 + 1
        comp = rng.integers(0, m, obs)
        out.append((rng.normal(size=obs) + 4.0 * comp)[:, None])
    return out


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def sk_grid(job: tuple) -> int:
    """One dataset, every K, as a scikit-learn user loops (BIC choice); returns the K."""
    from sklearn.mixture import GaussianMixture

    x, starts, max_iter, tol, seed = job
    bics = []
    for k in KS:
        gm = GaussianMixture(k, covariance_type="diag", n_init=starts, max_iter=max_iter,
                             tol=tol, reg_covar=1e-6, init_params="k-means++",
                             random_state=seed).fit(x)
        bics.append(gm.bic(x))
    return int(np.argmin(bics)) + 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--baseline-datasets", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-sklearn", action="store_true")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    kw = dict(n_starts=a.starts, max_iter=a.max_iter, tol=1e-6, seed=1, backend=a.backend,
              progress=False)
    run_time = Tuning(cpu_sizes="run-time")
    ig, ga = ig_batch(a.datasets, a.obs), gauss_batch(a.datasets, a.obs)
    for fam, data in (("invgauss", ig), ("gaussian", ga)):  # warm-up: every kernel
        small = data[:4]
        bulkem.fit(small, family=fam, n_components=list(KS), **kw)
        for k in KS:
            bulkem.fit(small, family=fam, n_components=k, **kw)
            bulkem.fit(small, family=fam, n_components=k, tuning=run_time, **kw)
    rows = []
    for fam, data in (("invgauss", ig), ("gaussian", ga)):
        best = {}
        for _ in range(a.rounds):  # alternating rounds, the best of each
            t, grid = timed(lambda d=data, f=fam: bulkem.fit(d, family=f, n_components=list(KS),
                                                            **kw))
            best["grid"] = min(best.get("grid", np.inf), t)
            t_icl, _ = timed(lambda g=grid: g.selection)  # its ICL column, on first use
            best["grid, then its selection table (ICL)"] = min(
                best.get("grid, then its selection table (ICL)", np.inf), t + t_icl)
            t, _ = timed(lambda d=data, f=fam: [bulkem.fit(d, family=f, n_components=k, **kw)
                                                for k in KS])
            best["six calls"] = min(best.get("six calls", np.inf), t)
            t, _ = timed(lambda d=data, f=fam: [bulkem.fit(d, family=f, n_components=k,
                                                           tuning=run_time, **kw) for k in KS])
            best["six calls, run-time sizes"] = min(best.get("six calls, run-time sizes",
                                                         np.inf), t)
        chosen = grid.summary["n_components"].astype(float)
        truth = np.arange(len(data)) % 3 + 1
        for name, t in best.items():
            rows.append((fam, name, t, a.datasets * len(KS) * a.starts / t,
                         best["grid"] / t if name != "grid" else 1.0))
        print(f"{fam}: grid chose the true K for {np.mean(chosen == truth):.1%} of datasets "
              f"({grid.backend})", flush=True)
    sk = None
    if not a.skip_sklearn:
        n = min(a.baseline_datasets, a.datasets)
        jobs = [(ga[d], a.starts, a.max_iter, 1e-6, d) for d in range(n)]
        pool_rate, core_rate, workers, ks = rates(sk_grid, jobs, per_core_jobs=min(4, n))
        truth = np.arange(n) % 3 + 1
        sk = (pool_rate, core_rate, workers, np.mean(np.array(ks) == truth))
    print()
    print(f"device: {platform.node()}, {os.cpu_count()} CPUs; "
          f"{datetime.date.today()}; batch {a.datasets} x {a.obs} values, K = 1..6, "
          f"{a.starts} starts, max_iter {a.max_iter}, tol 1e-6, best of {a.rounds} rounds")
    print("| family | call | whole s | fits/s | grid time / this |")
    print("|---|---|---|---|---|")
    for fam, name, t, rate, ratio in rows:
        print(f"| {fam} | {name} | {t:.3f} | {rate:,.0f} | {ratio:.2f} |")
    if sk is not None:
        pool_rate, core_rate, workers, right = sk
        g = next(t for fam, name, t, *_ in rows if fam == "gaussian" and name == "grid")
        ours = a.datasets / g
        print(f"\nscikit-learn GaussianMixture per K (BIC), {a.baseline_datasets} datasets: pool "
              f"of {workers}: {pool_rate:.2f} datasets/s; one core: {core_rate:.2f} "
              f"datasets/s (true K for {right:.0%}); bulkem grid: {ours:,.1f} datasets/s = "
              f"{ours / pool_rate:.1f}x the pool, {ours / (core_rate * workers):.1f}x "
              f"{workers} x one core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
