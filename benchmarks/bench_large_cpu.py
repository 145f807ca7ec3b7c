"""One large diagonal Gaussian dataset on the CPU: bulkem beside scikit-learn, per iteration.

The CUDA EM paper's largest problem (N = 230,400 points, M = 32 components,
D = 32 dimensions), fitted from the same start by ``bulkem.fit`` (CPU engine)
and by scikit-learn's ``GaussianMixture(covariance_type="diag")``, in float64
and float32, on 1 thread and on every thread (Numba's threads and the BLAS
threads limited alike, with threadpoolctl).  The time per iteration is the
difference of two whole fits (``max_iter`` = k1 and k2, ``tol=0``) divided by
k2 - k1, so start, packing, the first (exact) E-step and the tables cancel;
each timing is the best of ``--repeat`` runs, bulkem and scikit-learn taking
turns.

    python benchmarks/bench_large_cpu.py                 # the paper's problem
    python benchmarks/bench_large_cpu.py --n 20000       # quicker
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
import warnings

import numba
import numpy as np
import scipy.linalg  # noqa: F401  (BLAS loaded now, so that threadpool_limits sees it)
from threadpoolctl import threadpool_limits

import bulkem
import bulkem.api  # noqa: F401  (bulkem imports lazily: numba and its libraries now, likewise)

HERE = os.path.dirname(os.path.abspath(__file__))


def mixture(n, n_dims, n_comp, seed):
    """Well-separated diagonal Gaussian mixture data (as bench_gaussian.py) and a start near it."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 3.0, (n_comp, n_dims))
    sds = rng.uniform(0.5, 1.5, (n_comp, n_dims))
    w = rng.dirichlet(np.full(n_comp, 5.0))
    labels = rng.choice(n_comp, n, p=w)
    x = means[labels] + sds[labels] * rng.normal(size=(n, n_dims))
    rng2 = np.random.default_rng(seed + 1)
    init = {"weight": np.full(n_comp, 1.0 / n_comp),
            "mean": means + rng2.normal(0.0, 0.5, means.shape), "var": sds**2 * 1.5}
    return x, init


def sklearn_fit(x, init, k):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(len(init["weight"]), covariance_type="diag",
                         weights_init=init["weight"], means_init=init["mean"],
                         precisions_init=1.0 / init["var"], max_iter=k, tol=0.0,
                         reg_covar=1e-6, init_params="random_from_data", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gm.fit(x)
    return gm


def bulkem_fit(x, init, k, dtype, tuning=None):
    return bulkem.fit([x], family="gaussian", n_components=len(init["weight"]), n_starts=1,
                      init=init, max_iter=k, tol=0.0, accel=False, dtype=dtype, backend="cpu",
                      progress=False, tuning=tuning)


def timed(fn):
    """(wall seconds, CPU seconds of this process, result) of ``fn()``."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=230_400)
    ap.add_argument("--m", type=int, default=32)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--k1", type=int, default=2)
    ap.add_argument("--k2", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", default="1,all", help="comma list of thread counts, 'all'")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--tiles", default="",
                    help="comma list of Tuning.cpu_tile_obs values: bulkem alone, per tile")
    args = ap.parse_args()
    if args.tiles:
        return tile_sweep(args)
    n_all = numba.config.NUMBA_NUM_THREADS
    threads = [n_all if t == "all" else int(t) for t in args.threads.split(",")]
    x64, init = mixture(args.n, args.d, args.m, seed=1)
    head = (f"{datetime.datetime.now():%Y-%m-%d %H:%M}  {platform.node()}  CPU: {os.cpu_count()} "
            f"cores ({platform.processor() or platform.machine()}), Numba threads {n_all}")
    print("#", head)
    print(f"# N = {args.n}, M = {args.m}, D = {args.d}; per iteration = (fit of {args.k2} - fit "
          f"of {args.k1} iterations) / {args.k2 - args.k1}; best of {args.repeat}")
    rows = []
    for dtype in args.dtypes.split(","):
        x = x64.astype(dtype)
        for th in threads:
            numba.set_num_threads(th)
            with threadpool_limits(th):
                bulkem_fit(x64, init, 1, dtype)  # compile
                sklearn_fit(x, init, 1)
                wall = {"bulkem": [np.inf, np.inf], "sklearn": [np.inf, np.inf]}
                cpu = {"bulkem": [np.inf, np.inf], "sklearn": [np.inf, np.inf]}
                for _ in range(args.repeat):
                    for j, k in enumerate((args.k1, args.k2)):
                        fns = (("bulkem", lambda k=k, dt=dtype: bulkem_fit(x64, init, k, dt)),
                               ("sklearn", lambda k=k, xx=x: sklearn_fit(xx, init, k)))
                        for name, fn in fns:
                            t, c, out = timed(fn)
                            wall[name][j] = min(wall[name][j], t)
                            cpu[name][j] = min(cpu[name][j], c)
                            if name == "bulkem":
                                res = out
                            else:
                                gm = out
                dk = args.k2 - args.k1
                per = {k: (v[1] - v[0]) / dk for k, v in wall.items()}
                per_cpu = {k: (v[1] - v[0]) / dk for k, v in cpu.items()}
                ll_b = res.summary.loglik[0]
                ll_s = gm.score(x64) * len(x64)
                rows.append((dtype, th, per, per_cpu, ll_b, ll_s))
                print(f"{dtype} {th} thread(s): wall bulkem {per['bulkem'] * 1e3:.1f} ms/iter, "
                      f"scikit-learn {per['sklearn'] * 1e3:.1f}; CPU time bulkem "
                      f"{per_cpu['bulkem'] * 1e3:.1f}, scikit-learn {per_cpu['sklearn'] * 1e3:.1f};"
                      f" loglik after {args.k2}: {ll_b:.9e} vs {ll_s:.9e}", flush=True)
    print(f"\n## Summary ({head})")
    print("Wall time per iteration, and the process's CPU time per iteration (all threads "
          "together: on a shared machine the steadier of the two)")
    print("| dtype | threads | bulkem ms/iter (CPU ms) | scikit-learn ms/iter (CPU ms) | "
          "speed-up wall (CPU) | loglik rel. diff |")
    print("|---|---|---|---|---|---|")
    for dtype, th, w, c, lb, ls in rows:
        print(f"| {dtype} | {th} | {w['bulkem'] * 1e3:.1f} ({c['bulkem'] * 1e3:.1f}) | "
              f"{w['sklearn'] * 1e3:.1f} ({c['sklearn'] * 1e3:.1f}) | "
              f"{w['sklearn'] / w['bulkem']:.2f}x ({c['sklearn'] / c['bulkem']:.2f}x) | "
              f"{abs(lb - ls) / abs(ls):.1e} |")


def tile_sweep(args) -> None:
    """bulkem's time per iteration for each ``Tuning.cpu_tile_obs`` (no scikit-learn)."""
    from bulkem.tuning import DEFAULT

    x64, init = mixture(args.n, args.d, args.m, seed=1)
    n_all = numba.config.NUMBA_NUM_THREADS
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}  {platform.node()}  CPU: "
          f"{os.cpu_count()} cores; N = {args.n}, M = {args.m}, D = {args.d}; ms per iteration "
          f"(fit of {args.k2} - fit of {args.k1}) / {args.k2 - args.k1}, best of {args.repeat}")
    for tile in (int(t) for t in args.tiles.split(",")):
        tuning = DEFAULT.replace(cpu_tile_obs=tile)
        for dtype in args.dtypes.split(","):
            for th in (n_all if t == "all" else int(t) for t in args.threads.split(",")):
                numba.set_num_threads(th)
                bulkem_fit(x64, init, 1, dtype, tuning)  # compile
                best = [np.inf, np.inf]
                for _ in range(args.repeat):
                    for j, k in enumerate((args.k1, args.k2)):
                        t, _, _ = timed(lambda k=k, dt=dtype, tu=tuning:
                                        bulkem_fit(x64, init, k, dt, tu))
                        best[j] = min(best[j], t)
                per = (best[1] - best[0]) / (args.k2 - args.k1)
                print(f"tile {tile:4d}  {dtype}  {th:2d} thread(s): {per * 1e3:8.1f} ms/iter",
                      flush=True)


if __name__ == "__main__":
    main()
