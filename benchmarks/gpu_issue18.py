"""Issue 18 on a GPU machine, end to end through ``bulkem.fit``: three checks, one command.

1. ``large``: the one large Gaussian dataset (N = 230,400, M = 32, D = 32, the CUDA EM
   paper's largest problem), one fit of 100 iterations (``tol=0``), start included, on the
   GPU: the wall time of the user's call (best of ``--repeat``, after one call that
   compiles), with k-means++ and subset starts, float32 and float64; the status of every
   start (issue 18, item 4: float32 subset starts all ended ``failed`` on an H100) and the
   log-likelihood beside the CPU engine's from the same start (float32 subset starts).
2. ``ragged``: a ragged inverse-Gaussian batch (2,000 datasets of 100-14,000 values, M = 3,
   50 starts, ``tol=1e-6``) on the CPU and the GPU: the share of datasets whose best start
   and log-likelihood (1e-9 relative) agree (the issue's goal: at least 99.9%).

    PYTHONPATH=. python3 benchmarks/gpu_issue18.py            # both
    PYTHONPATH=. python3 benchmarks/gpu_issue18.py large --n 50000
    PYTHONPATH=. python3 benchmarks/gpu_issue18.py ragged --datasets 200

4. ``profile`` (not in ``both``): the CUDA fit from one given start with 1, 10 and 100
   iterations (the fixed cost of a call against the cost of an iteration) and a cProfile of
   the 100-iteration call (where the host time goes).

5. ``sklearn-gpu`` (not in ``both``): issue 37's baseline for ``large``: scikit-learn's own GPU
   path (``GaussianMixture(covariance_type="diag")`` with array API dispatch on torch CUDA
   tensors, ``SCIPY_ARRAY_API=1``), 100 iterations (``tol=0``), start included (k-means++
   where its array API path takes it, else ``random_from_data``) and from the given start,
   float32 and float64, best of ``--repeat``, beside bulkem's whole call with k-means++.

3. ``versus`` (not in ``both``): the large fit from one given start, 100 iterations, by the
   CUDA engine (float64, float32), the CPU engine and scikit-learn's ``GaussianMixture``
   (diagonal, float64, all cores), each a whole fit, the same run: the ratio to scikit-learn.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd

import bulkem


def mixture(n, d, m, seed):
    """Well-separated diagonal Gaussian mixture data (as bench_gaussian.py)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 3.0, (m, d))
    sds = rng.uniform(0.5, 1.5, (m, d))
    labels = rng.choice(m, n, p=rng.dirichlet(np.full(m, 5.0)))
    return means[labels] + sds[labels] * rng.normal(size=(n, d))


def large(args) -> None:
    x = mixture(args.n, args.d, args.m, seed=1)
    print(f"# one large dataset: N = {args.n}, M = {args.m}, D = {args.d}, {args.iters} "
          f"iterations (tol=0), 1 start; wall time of bulkem.fit, best of {args.repeat}")
    for dtype in ("float32", "float64"):
        for method in ("kmeans++", "subset"):
            kw = dict(family="gaussian", n_components=args.m, n_starts=1, max_iter=args.iters,
                      tol=0.0, accel=False, seed=3, dtype=dtype, init_method=method, progress=False)
            bulkem.fit([x], backend="cuda", **kw)  # compile
            best = np.inf
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                res = bulkem.fit([x], backend="cuda", **kw)
                best = min(best, time.perf_counter() - t0)
            print(f"cuda {dtype} {method:<8}: {best * 1e3:8.1f} ms per call; status "
                  f"{res.summary.status[0]}, loglik {res.summary.loglik[0]:.9e}", flush=True)
    # item 4: float32 subset starts, several of them, GPU against CPU and float64
    kw = dict(family="gaussian", n_components=args.m, n_starts=args.starts, max_iter=args.iters,
              tol=1e-6, seed=7, init_method="subset", progress=False)
    runs = {(b, dt): bulkem.fit([x], backend=b, dtype=dt, **kw)
            for b in ("cuda", "cpu") for dt in ("float32", "float64")}
    for (b, dt), r in runs.items():
        st = r.starts.status.value_counts().to_dict()
        print(f"item 4, subset starts, {b} {dt}: summary {r.summary.status[0]}, starts {st}, "
              f"best loglik {r.summary.loglik[0]:.9e}")
    a, b = runs[("cuda", "float32")].starts, runs[("cpu", "float32")].starts
    rel = np.abs(a.loglik - b.loglik) / np.abs(b.loglik)
    print(f"item 4: float32 GPU vs CPU per-start loglik, largest relative difference "
          f"{rel.max():.2e}")


def ragged(args) -> None:
    rng = np.random.default_rng(11)
    sizes = rng.integers(min(100, args.max_obs), args.max_obs + 1, args.datasets)
    data = [bulkem.datasets.simulate_demo(1, int(n), seed=int(s))[0]
            for n, s in zip(sizes, rng.integers(0, 2**31, args.datasets), strict=True)]
    kw = dict(n_components=3, n_starts=args.ragged_starts, max_iter=1000, tol=1e-6, seed=5,
              progress=False)
    t0 = time.perf_counter()
    gres = bulkem.fit(data, backend="cuda", **kw)
    print(f"ragged batch on cuda: {time.perf_counter() - t0:.1f} s", flush=True)
    # The CPU side in pieces (each dataset's fits do not depend on the batch), with the
    # running agreement after each: a run cut short still says how far it got.
    step = args.cpu_piece or len(data)
    cpu_tables, t_cpu = [], 0.0
    for lo in range(0, len(data), step):
        t0 = time.perf_counter()
        piece = bulkem.fit(data[lo:lo + step], backend="cpu", **kw)
        t_cpu += time.perf_counter() - t0
        piece.summary["dataset"] += lo
        piece.starts["dataset"] += lo
        cpu_tables.append((piece.summary, piece.starts))
        c = pd.concat([t[0] for t in cpu_tables], ignore_index=True)
        g = gres.summary.iloc[:len(c)].reset_index(drop=True)
        ok = np.isfinite(c.loglik) & np.isfinite(g.loglik)
        rel = np.abs(g.loglik - c.loglik) / np.abs(c.loglik)
        agree = ok & (g.best_start == c.best_start) & (rel <= 1e-9)
        print(f"ragged batch ({len(c)} of {args.datasets} datasets of 100-{args.max_obs:,} "
              f"values, M = 3, {args.ragged_starts} starts, tol=1e-6): CPU {t_cpu:.1f} s; same "
              f"best start and loglik (1e-9) on {agree.sum()} = {agree.mean():.4%} of the "
              f"datasets; largest relative loglik difference {np.nanmax(rel):.2e}", flush=True)
    out = {"cuda": gres, "cpu": SimpleNamespace(
        summary=c, starts=pd.concat([t[1] for t in cpu_tables], ignore_index=True))}
    gs, cs = out["cuda"].starts, out["cpu"].starts
    print(f"starts with the same n_iter: {(gs.n_iter == cs.n_iter).mean():.4%}; same status: "
          f"{(gs.status == cs.status).mean():.4%}")


def versus(args) -> None:
    """The large fit from one given start: CUDA, the CPU engine and scikit-learn, same run."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    x = mixture(args.n, args.d, args.m, seed=1)
    init = given_start(x, args)
    D = args.d
    print(f"# one large dataset from one given start: N = {args.n}, M = {args.m}, D = {D}, "
          f"{args.iters} iterations (tol=0); wall time per whole fit, best of {args.repeat}")
    out = {}

    def bulkem_fit(backend, dtype):
        return bulkem.fit([x], family="gaussian", n_components=args.m, n_starts=1, init=init,
                          max_iter=args.iters, tol=0.0, accel=False, dtype=dtype, backend=backend,
                          progress=False).summary.loglik[0]

    def sklearn_fit(dtype):
        gm = GaussianMixture(args.m, covariance_type="diag", weights_init=init["weight"],
                             means_init=init["mean"], precisions_init=1.0 / init["var"],
                             max_iter=args.iters, tol=0.0, reg_covar=1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gm.fit(x.astype(dtype))
        return gm.score(x) * len(x)

    runs = [(f"bulkem cuda {dt}", lambda dt=dt: bulkem_fit("cuda", dt))
            for dt in ("float64", "float32")]
    runs += [("bulkem cpu float64 (all cores)", lambda: bulkem_fit("cpu", "float64")),
             ("scikit-learn float64 (all cores)", lambda: sklearn_fit(np.float64))]
    for name, fn in runs:
        if not name.startswith("scikit"):
            fn()  # compile
        best, ll = np.inf, None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ll = fn()
            best = min(best, time.perf_counter() - t0)
        out[name] = best
        print(f"{name:<34}: {best * 1e3:9.1f} ms per fit; loglik {ll:.9e}", flush=True)
    base = out["scikit-learn float64 (all cores)"]
    for name, t in out.items():
        print(f"{name:<34}: {base / t:7.1f}x scikit-learn")


def sklearn_gpu(args) -> None:
    """scikit-learn on the GPU (array API dispatch on torch CUDA tensors) beside bulkem."""
    import os
    import warnings

    os.environ.setdefault("SCIPY_ARRAY_API", "1")  # before scipy / sklearn load their array API
    import sklearn
    import torch
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    x = mixture(args.n, args.d, args.m, seed=1)
    init = given_start(x, args)
    print(f"# one large dataset: N = {args.n}, M = {args.m}, D = {args.d}, {args.iters} "
          f"iterations (tol=0), 1 start, whole fit, best of {args.repeat}; scikit-learn "
          f"{sklearn.__version__} on torch {torch.__version__} CUDA tensors")

    def best_of(fn):
        fn()  # compile / warm up
        best, ll = np.inf, None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ll = fn()
            best = min(best, time.perf_counter() - t0)
        return best, ll

    for dtype, tdt in (("float32", torch.float32), ("float64", torch.float64)):
        xt = torch.as_tensor(x, dtype=tdt, device="cuda")
        given = dict(weights_init=init["weight"], means_init=init["mean"],
                     precisions_init=1.0 / init["var"])
        for name, kw in (("k-means++", dict(init_params="k-means++")),
                         ("random_from_data", dict(init_params="random_from_data")),
                         ("given start", given)):
            def fit(kw=kw, xt=xt):
                gm = GaussianMixture(args.m, covariance_type="diag", max_iter=args.iters,
                                     tol=0.0, reg_covar=1e-6, random_state=3, **kw)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    with sklearn.config_context(array_api_dispatch=True):
                        gm.fit(xt)
                        out = float(gm.score(xt)) * len(x)
                torch.cuda.synchronize()
                return out
            try:
                t, ll = best_of(fit)
                print(f"scikit-learn gpu {dtype} {name:<16}: {t * 1e3:8.1f} ms per fit; "
                      f"loglik {ll:.9e}", flush=True)
            except Exception as exc:  # an init its array API path lacks: say so, go on
                print(f"scikit-learn gpu {dtype} {name:<16}: failed ({type(exc).__name__}: "
                      f"{str(exc)[:120]})", flush=True)
        kw = dict(family="gaussian", n_components=args.m, n_starts=1, max_iter=args.iters,
                  tol=0.0, accel=False, seed=3, dtype=dtype, init_method="kmeans++",
                  progress=False)
        t, ll = best_of(lambda kw=kw: bulkem.fit([x], backend="cuda", **kw).summary.loglik[0])
        print(f"bulkem cuda {dtype} kmeans++ (whole call): {t * 1e3:8.1f} ms per fit; "
              f"loglik {ll:.9e}", flush=True)


def given_start(x, args):
    sv = bulkem.fit([x], family="gaussian", n_components=args.m, n_starts=1, max_iter=1,
                    seed=3, init_method="subset", backend="cpu", progress=False).start_values
    return {"weight": sv.weight.to_numpy(),
            "mean": sv[[f"mean_{j}" for j in range(1, args.d + 1)]].to_numpy(),
            "var": sv[[f"var_{j}" for j in range(1, args.d + 1)]].to_numpy()}


def profile(args) -> None:
    """Fixed cost against per-iteration cost of the large CUDA fit, and a cProfile of it."""
    import cProfile
    import pstats

    x = mixture(args.n, args.d, args.m, seed=1)
    init = given_start(x, args)
    for dtype in ("float64", "float32"):
        def fit(iters, dtype=dtype):
            return bulkem.fit([x], family="gaussian", n_components=args.m, n_starts=1,
                              init=init, max_iter=iters, tol=0.0,
                              accel=False, dtype=dtype, backend="cuda",
                              progress=False)
        fit(2)
        for iters in (1, 10, 100):
            best = np.inf
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                fit(iters)
                best = min(best, time.perf_counter() - t0)
            print(f"{dtype} {iters:>4} iterations: {best * 1e3:8.1f} ms per call", flush=True)
        pr = cProfile.Profile()
        pr.enable()
        fit(100)
        pr.disable()
        st = pstats.Stats(pr)
        st.sort_stats("cumulative").print_stats(35)
        st.sort_stats("tottime").print_stats(20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", default="both",
                    choices=("both", "large", "ragged", "versus", "profile", "sklearn-gpu"))
    ap.add_argument("--n", type=int, default=230_400)
    ap.add_argument("--m", type=int, default=32)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--starts", type=int, default=4, help="item 4: subset starts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--datasets", type=int, default=2000)
    ap.add_argument("--max-obs", type=int, default=14_000)
    ap.add_argument("--ragged-starts", type=int, default=50)
    ap.add_argument("--cpu-piece", type=int, default=250,
                    help="ragged: datasets per CPU fit (0: all in one)")
    args = ap.parse_args()
    if args.what in ("both", "large"):
        large(args)
    if args.what == "versus":
        versus(args)
    if args.what == "profile":
        profile(args)
    if args.what == "sklearn-gpu":
        sklearn_gpu(args)
    if args.what in ("both", "ragged"):
        ragged(args)


if __name__ == "__main__":
    main()
