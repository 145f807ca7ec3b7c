"""Save or compare the tables of a fixed set of fits, to check that a refactor changes no bit.

    python benchmarks/golden_tables.py save FILE      # before the change
    python benchmarks/golden_tables.py check FILE     # after it: every table equal, bit for bit
    python benchmarks/golden_tables.py save FILE --only hmm,tmap   # cases named so, only

Runs the CPU engine and, with ``--cuda``, the CUDA engine (the simulator unless a GPU is
present: keep the sizes small there): both mixture families (both regimes, several
component counts, both dtypes and tolerances), hidden Markov models of the three emissions,
TMAPs, the AR and local-level state-space models, and the Kalman likelihoods (exact, scan,
splash).  The script uses the public API only, so it runs on any tree of the package (to
save the tables of an older one: ``PYTHONPATH=old_tree python benchmarks/golden_tables.py
save FILE``).
"""

from __future__ import annotations

import argparse
import pickle
import sys

import numpy as np


def cases(cuda: bool):
    import bulkem

    simulate_demo = bulkem.datasets.simulate_demo  # (bulkem.datasets in every tree)

    ig = simulate_demo(6, 300, seed=3)
    ig_big = simulate_demo(1, 40_000, seed=4)
    rng = np.random.default_rng(5)
    ga = [np.concatenate([rng.normal(0, 1, (150, 2)), rng.normal(4, 0.5, (100, 2))])
          for _ in range(4)]
    ga_big = [np.concatenate([rng.normal(0, 1, (20_000, 3)), rng.normal(3, 0.7, (15_000, 3))])]
    backends = ["cpu"] + (["cuda"] if cuda else [])
    for backend in backends:
        small = backend == "cuda"
        for dtype in ("float64", "float32"):
            for tol in (0.0, 1e-6):
                for m in (1, 2, 3):
                    data = [x[:60] for x in ig[:2]] if small else ig
                    yield (f"ig-{backend}-{dtype}-{tol}-{m}", dict(
                        datasets=data, family="invgauss", n_components=m,
                        n_starts=2 if small else 5, max_iter=8 if small else 60, tol=tol,
                        seed=11, backend=backend, dtype=dtype))
                    data = [x[:40] for x in ga[:2]] if small else ga
                    yield (f"ga-{backend}-{dtype}-{tol}-{m}", dict(
                        datasets=data, family="gaussian", n_components=m,
                        n_starts=2 if small else 4, max_iter=8 if small else 60, tol=tol,
                        seed=12, backend=backend, dtype=dtype))
            if not small:  # the one-large-dataset regime (CPU)
                yield (f"ig-large-{dtype}", dict(datasets=ig_big, family="invgauss", n_components=2,
                                                 n_starts=1, max_iter=20, seed=13, backend=backend,
                                                 dtype=dtype))
                yield (f"ga-large-{dtype}", dict(datasets=ga_big, family="gaussian",
                                                 n_components=2, n_starts=1, max_iter=20, seed=14,
                                                 backend=backend, dtype=dtype))
    yield from other_families(bulkem)


def other_families(bulkem):
    """HMMs, TMAPs and state-space models on the CPU (every dtype each offers)."""
    rng = np.random.default_rng(6)
    seqs = {
        "categorical": [[rng.integers(0, 3, int(rng.integers(5, 15))).astype(float)
                         for _ in range(6)] for _ in range(4)],
        "poisson": [[rng.poisson(rng.choice([1.0, 6.0]), int(rng.integers(5, 15))).astype(float)
                     for _ in range(6)] for _ in range(4)],
        "gaussian": [[rng.normal(rng.choice([-1.0, 2.0]), 1.0, int(rng.integers(5, 15)))
                      for _ in range(6)] for _ in range(4)],
    }
    for emission, data in seqs.items():
        extra = {"n_symbols": 3} if emission == "categorical" else {}
        for dtype in ("float64", "float32"):
            yield (f"hmm-{emission}-{dtype}", dict(
                datasets=data, family="hmm", emission=emission, n_components=2, n_starts=3,
                max_iter=30, seed=15, backend="cpu", dtype=dtype, **extra))
    traces = [bulkem.datasets.simulate_tmap(300, seed=s, as_frame=False) for s in (1, 2)]
    for dtype in ("float64", "float32"):
        yield (f"tmap-{dtype}", dict(datasets=traces, family="tmap", orders=(1, 2, 3),
                                     n_starts=2, max_iter=20, seed=16, backend="cpu",
                                     dtype=dtype))
    ar = bulkem.StateSpace.ar([0.6, -0.2], sigma2=1.0, obs_var=0.5)
    series = [ar.simulate(100, rng=s)[:, 0] for s in range(4)]
    yield ("ar2", dict(datasets=series, family="ar", order=2, n_starts=3, max_iter=30,
                       seed=17, backend="cpu"))
    yield ("local_level", dict(datasets=[np.cumsum(y) for y in series], family="local_level",
                               n_starts=3, max_iter=30, seed=18, backend="cpu"))
    for method, kw in (("exact", {}), ("scan", {}), ("splash", {"window": 8})):
        yield (f"kalman-{method}", dict(kalman=True, series=series, model=ar, method=method,
                                        backend="cpu", **kw))


def run(cuda: bool, only: tuple = ()) -> dict:
    import bulkem

    out = {}
    for name, kw in cases(cuda):
        if only and not name.startswith(only):
            continue
        if kw.pop("kalman", False):
            frame = bulkem.kalman_loglik(kw.pop("series"), kw.pop("model"), **kw)
            out[name] = {"loglik": frame}
            print(name, frame.loglik.round(6).tolist(), flush=True)
            continue
        res = bulkem.fit(progress=False, **kw)
        out[name] = {k: getattr(res, k) for k in ("summary", "components", "starts",
                                                  "start_values", "transitions")
                     if hasattr(res, k)}
        print(name, res.summary.loglik.round(6).tolist(), flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["save", "check"])
    ap.add_argument("file")
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated prefixes of the case names")
    args = ap.parse_args()
    only = tuple(p for p in args.only.split(",") if p)
    got = run(args.cuda, only)
    if args.action == "save":
        with open(args.file, "wb") as fh:
            pickle.dump(got, fh)
        return 0
    with open(args.file, "rb") as fh:
        want = pickle.load(fh)
    bad = 0
    for name, tables in want.items():
        if name not in got:
            print(f"MISSING: {name}")
            bad += 1
            continue
        for key, table in tables.items():
            other = got[name][key]
            same = table.shape == other.shape and all(
                np.array_equal(table[c].to_numpy(), other[c].to_numpy(), equal_nan=True)
                if table[c].dtype.kind == "f"
                else (table[c].astype(str) == other[c].astype(str)).all()
                for c in table.columns)
            if not same:
                bad += 1
                print(f"DIFFERS: {name} {key}")
    print(f"{bad} table(s) differ of {sum(len(t) for t in want.values())}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
