"""``bulkem.loglik`` at given parameters against a vectorised NumPy/SciPy evaluation.

    python benchmarks/bench_loglik.py [--datasets 1000] [--obs 2000] [--rounds 3]
                                      [--backends cpu,cuda]

An inverse-Gaussian mixture of 2 components, one parameter set per dataset. bulkem: the
whole call (reading and checking the datasets, packing, the engine, the table) and, beside
it, the engine's part (``engines.select.run``: one E-step per dataset). Baselines in the same
run: the whole batch in one vectorised NumPy expression on one core (scipy's ``invgauss``
log density, one BLAS thread), its per-core rate, and a pool of one process per core each
taking a share of the datasets (one BLAS thread per worker). Best of ``--rounds``; the
first bulkem call of each backend (compilation or the disk cache) is timed apart.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy: one BLAS thread a worker
os.environ.setdefault("OMP_NUM_THREADS", "1")

from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402


def numpy_loglik(x: np.ndarray, offsets: np.ndarray, w: np.ndarray, mu: np.ndarray,
                 lam: np.ndarray) -> np.ndarray:
    """Per-dataset mixture log-likelihood, the whole batch in one vectorised pass."""
    n = np.diff(offsets)
    d = np.repeat(np.arange(len(n)), n)
    comp = [np.log(w[d, m]) + stats.invgauss.logpdf(x, mu[d, m] / lam[d, m],
                                                     scale=lam[d, m]) for m in range(2)]
    return np.add.reduceat(np.logaddexp(*comp), offsets[:-1])


def _share(args):
    return numpy_loglik(*args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="cpu")
    args = ap.parse_args()

    import bulkem
    from bulkem.engines import select

    rng = np.random.default_rng(0)
    D, n = args.datasets, args.obs
    data = [np.concatenate([rng.wald(0.8, 2.0, n // 2), rng.wald(2.0, 4.0, n - n // 2)])
            for _ in range(D)]
    w = rng.dirichlet([2.0, 2.0], D)
    mu = np.sort(rng.uniform(0.5, 3.0, (D, 2)), axis=1)
    lam = rng.uniform(1.0, 5.0, (D, 2))
    params = [{"weight": w[d], "mu": mu[d], "lambda": lam[d]} for d in range(D)]
    x = np.concatenate(data)
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in data])])

    engine_s = []
    run = select.run

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return run(*a, **k)
        finally:
            engine_s.append(time.perf_counter() - t)

    select.run = timed
    rows = []
    ref = None
    for backend in args.backends.split(","):
        t = time.perf_counter()
        out = bulkem.loglik(data, "invgauss", params, backend=backend)
        first = time.perf_counter() - t
        best, best_engine = np.inf, np.inf
        for _ in range(args.rounds):
            engine_s.clear()
            t = time.perf_counter()
            out = bulkem.loglik(data, "invgauss", params, backend=backend)
            whole = time.perf_counter() - t
            if whole < best:
                best, best_engine = whole, engine_s[-1]
        ref = out.loglik.to_numpy() if ref is None else ref
        rows.append((f"bulkem {backend}", best, best_engine, first))
    base = np.inf
    for _ in range(args.rounds):
        t = time.perf_counter()
        np_ll = numpy_loglik(x, offsets, w, mu, lam)
        base = min(base, time.perf_counter() - t)
    cores = os.cpu_count() or 1
    cuts = np.linspace(0, D, cores + 1).astype(int)
    shares = [(x[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a], w[a:b], mu[a:b], lam[a:b])
              for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]
    with ProcessPoolExecutor(len(shares)) as pool:
        list(pool.map(_share, shares))  # start the workers
        pooled = np.inf
        for _ in range(args.rounds):
            t = time.perf_counter()
            list(pool.map(_share, shares))
            pooled = min(pooled, time.perf_counter() - t)
    rel = float(np.max(np.abs(np_ll - ref) / np.abs(np_ll)))
    print(f"{D:,} datasets x {n:,} values, inverse-Gaussian mixture (M = 2), one parameter set "
          f"each; {cores} cores; best of {args.rounds}; largest relative difference from "
          f"NumPy {rel:.1e}")
    print("| evaluator | whole call (s) | engine (s) | datasets/s | first call (s) |")
    print("|---|---|---|---|---|")
    for name, whole, eng, first in rows:
        print(f"| {name} | {whole:.4f} | {eng:.4f} | {D / whole:,.0f} | {first:.2f} |")
    print(f"| NumPy/SciPy vectorised, 1 core | {base:.4f} | | {D / base:,.0f} | |")
    print(f"| NumPy/SciPy, pool of {len(shares)} (1 BLAS thread each) | {pooled:.4f} | | "
          f"{D / pooled:,.0f} | |")


if __name__ == "__main__":
    main()
