"""What ``fit(se=True)`` adds to a fit's time: the same fits with and without standard errors.

    python benchmarks/bench_se.py [--datasets 1000] [--obs 2000] [--starts 20]
                                  [--backends cpu,cuda] [--only ig,gauss,hmm]

Whole calls, best of ``--rounds`` after a warm-up (compilation apart). The standard errors
cost ``2 P`` E-steps per dataset from the score (models with ``has_score``) or ``1 + 2 P +
P (P - 1) / 2`` from log-likelihood values, for ``P`` free parameters (IG M = 2: P = 5;
Gaussian M = 3, D = 2: P = 14; categorical HMM N = 4, V = 8: P = 43), against the fit's
``starts x iterations`` E-steps. ``--recipes score,values`` times both in the same run (the
second with the models' scores switched off).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np


def cases(D: int, n: int, starts: int):
    rng = np.random.default_rng(0)
    yield "ig", "inverse Gaussian, M = 2", dict(
        datasets=[np.concatenate([rng.wald(0.5, 4.0, n // 2), rng.wald(3.0, 20.0, n - n // 2)])
                  for _ in range(D)], family="invgauss", n_components=2, n_starts=starts)
    yield "gauss", "Gaussian, M = 3, D = 2", dict(
        datasets=[np.concatenate([rng.normal(0, 1, (n // 3, 2)), rng.normal(4, 1, (n // 3, 2)),
                                  rng.normal((0, 5), 1, (n - 2 * (n // 3), 2))])
                  for _ in range(D)], family="gaussian", n_components=3, n_starts=starts)
    N, V = 4, 8  # an HMM whose maximum is inside the parameter space (no probability near 0)
    trans = np.full((N, N), 0.1 / (N - 1)) + np.eye(N) * (0.9 - 0.1 / (N - 1))
    emis = np.full((N, V), 0.02)
    for s in range(N):
        emis[s, 2 * s:2 * s + 2] = (1 - 0.02 * (V - 2)) / 2
    seqs = []
    for _ in range(max(1, D // 10)):
        z = np.empty((n // 100, 100), np.int64)
        z[:, 0] = rng.integers(0, N, n // 100)
        for t in range(1, 100):
            z[:, t] = (rng.random((n // 100, 1)) > np.cumsum(trans[z[:, t - 1]], 1)).sum(1)
        x = (rng.random(z.shape + (1,)) > np.cumsum(emis[z], -1)).sum(-1)
        seqs.append([row.astype(float) for row in x])
    yield "hmm", "categorical HMM, N = 4, V = 8, a tenth of the datasets (20 x 100 symbols)", dict(
        datasets=seqs, family="hmm", emission="categorical", n_symbols=V, n_components=N,
        n_starts=starts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--only", default="ig,gauss,hmm")
    ap.add_argument("--recipes", default="score",
                    help="score, values or both: the standard errors' recipe(s) to time")
    ap.add_argument("--profile", action="store_true",
                    help="then print where the time of one se=True call goes (cProfile)")
    args = ap.parse_args()

    import bulkem

    only = args.only.split(",")
    print(f"{args.datasets:,} datasets x {args.obs:,} values, {args.starts} starts, "
          f"100 iterations at most; whole calls, best of {args.rounds}")
    print("| model | backend | recipe | fit (s) | fit, se=True (s) | ratio | "
          "datasets with NaN errors |")
    print("|---|---|---|---|---|---|---|")
    from bulkem.models.base import Model

    def timed(kw, backend, se):
        bulkem.fit(**{**kw, "datasets": kw["datasets"][:2]}, seed=1, backend=backend,
                   se=se)  # compile
        best = np.inf
        for _ in range(args.rounds):
            t = time.perf_counter()
            res = bulkem.fit(**kw, seed=1, backend=backend, se=se)
            best = min(best, time.perf_counter() - t)
        return best, res

    for key, label, kw in cases(args.datasets, args.obs, args.starts):
        if key not in only:
            continue
        for backend in args.backends.split(","):
            for recipe in args.recipes.split(","):
                fit_s = timed(kw, backend, False)[0]
                with _recipe(recipe, Model):
                    se_s, res = timed(kw, backend, True)
                if args.profile:
                    import cProfile
                    import pstats
                    prof = cProfile.Profile()
                    prof.runcall(bulkem.fit, **kw, seed=1, backend=backend, se=True)
                    pstats.Stats(prof).sort_stats("tottime").print_stats(12)
                nan = int(res.summary.message.str.contains("standard errors NaN").sum())
                print(f"| {label} | {backend} | {recipe} | {fit_s:.3f} | {se_s:.3f} | "
                      f"{se_s / fit_s:.2f} | {nan} of {len(res.summary)} |", flush=True)


@contextlib.contextmanager
def _recipe(recipe: str, base):
    """With ``recipe="values"``, every model's score switched off (``has_score`` False),
    for this A/B only."""
    saved = {c: c.__dict__["has_score"] for c in _classes(base) if "has_score" in c.__dict__}
    if recipe == "values":
        for c in saved:
            c.has_score = property(lambda self: False)
    try:
        yield
    finally:
        for c, v in saved.items():
            c.has_score = v


def _classes(cls):
    """``cls`` and every subclass, recursively."""
    out = [cls]
    for sub in cls.__subclasses__():
        out += _classes(sub)
    return out


if __name__ == "__main__":
    main()
