"""The TMAP paper's Table 1 with today's figures: one huge trace, 30 EM iterations.

Bražėnas, Horváth and Telek fitted a transient Markovian arrival process of
three Erlang branches (orders 1, 2, 3) to a trace of 1,000,000 runs (8.8M
inter-arrival times) by 30 EM iterations from one start: C++ (double) took
6 min 21 s, their CUDA code (single) 46 s.  This vignette draws a trace from a
known TMAP of that structure (``bulkem.datasets.simulate_tmap``; 20,000 runs
by default so that it runs in seconds, ``--runs 1000000`` for the paper's
size), fits it with bulkem on the CPU cores and, when a usable GPU is
present, on the GPU (float64 and float32), beside a plain vectorised NumPy
EM timed in the same run from the same start, and prints the table.  Then:

* the fitted TMAP's moments (mean run length, mean inter-arrival time, the
  lag-1 correlation of a run's first two inter-arrival times; the paper's
  eqs 1-7) against the trace's empirical ones and the true TMAP's;
* the log-likelihood over the iterations (the paper's Figures 3-4) and the
  float32 fit's difference to the float64 one, as plots.

Run::

    python vignettes/tmap.py --out vignettes/output [--runs 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bulkem  # noqa: E402
from bulkem.interop.datasets import simulate_tmap, tmap_truth  # noqa: E402
from bulkem.models.tmap import empirical_moments, moments  # noqa: E402
from bulkem.tuning import Tuning  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_tmap import NumpyTMAP  # noqa: E402  (the baseline the benchmark times)

ORDERS = (1, 2, 3)
WIDE = Tuning(strategy="wide")  # the wide regime (the whole machine on one fit) whatever the size


def gpu_available() -> tuple[bool, str]:
    from bulkem.engines import cuda

    return cuda.available()


def fit(data, backend: str, dtype: str, iters: int, seed: int, init=None):
    """One start, ``iters`` iterations, in the wide regime (the whole machine on one fit)."""
    with warnings.catch_warnings():  # (the warm-up's small grid)
        warnings.simplefilter("ignore")
        bulkem.fit(simulate_tmap(200, seed=9, as_frame=False), family="tmap", n_starts=1,
                   max_iter=2, seed=1, backend=backend, dtype=dtype, progress=False, tuning=WIDE)
    t0 = time.perf_counter()
    res = bulkem.fit(data, family="tmap", orders=ORDERS, n_starts=1, max_iter=iters,
                     tol=0.0, seed=seed, backend=backend, dtype=dtype, init=init,
                     progress=False, tuning=WIDE, accel=False)  # (the paper's EM)
    return res, time.perf_counter() - t0


def loglik_curve(data, backend: str, dtype: str, start: dict, iters: int) -> np.ndarray:
    """The log-likelihood after 0, 1, ..., ``iters`` iterations: one iteration per call,
    each from the previous call's parameters (EM's state is its parameters)."""
    out, p = [loglik_at(data, start)], start
    for _ in range(iters):
        res = bulkem.fit(data, family="tmap", orders=ORDERS, n_starts=1, max_iter=1,
                         tol=0.0, backend=backend, dtype=dtype, init=p, progress=False,
                         tuning=WIDE, accel=False)
        out.append(res.summary.loglik[0])
        p = res.params(0)
    return np.array(out)


def loglik_at(runs, params: dict) -> float:
    """Log-likelihood of runs under a TMAP (forward passes on the CPU)."""
    from bulkem.engines import infer
    from bulkem.models.tmap import TMAPModel

    p = np.concatenate([params["alpha"], np.ravel(params["pi"]), params["rates"]])[None]
    ll = infer.score(TMAPModel.of(ORDERS), p, np.zeros(len(runs), np.int64), runs)
    return float(ll.sum() - sum(np.log(u).sum() for u in runs))


def main(out: Path, n_runs: int, iters: int, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 140)
    runs = simulate_tmap(n_runs, seed=seed, as_frame=False)
    n_values = sum(len(u) for u in runs)
    print(f"A trace of {n_runs:,} runs and {n_values:,} inter-arrival times, drawn from a TMAP "
          f"of Erlang branches of orders {ORDERS}; {iters} EM iterations from one start\n")

    backends = ["cpu"]
    has_gpu, found = gpu_available()
    if has_gpu:
        backends.insert(0, "cuda")
    else:
        print(f"GPU: none usable ({found}); timing the CPU only\n")
    rows, fits = [], {}
    for backend in backends:
        for dtype in ("float64", "float32"):
            res, secs = fit(runs, backend, dtype, iters, seed)
            fits[backend, dtype] = res
            rows.append({"implementation": f"bulkem, {backend}", "precision": dtype,
                         "log-likelihood": res.summary.loglik[0], "seconds": secs})
    start = fits["cpu", "float64"].init_params(0)
    t0 = time.perf_counter()
    base = NumpyTMAP(np.concatenate(runs), np.array([len(u) for u in runs]))
    _, curve_np = base.iterate(start["alpha"], start["pi"], start["rates"], iters)
    rows.append({"implementation": "plain NumPy, vectorised (1 core)", "precision": "float64",
                 "log-likelihood": curve_np[-1], "seconds": time.perf_counter() - t0})
    table = pd.DataFrame(rows)
    table["x NumPy"] = table["seconds"].iloc[-1] / table["seconds"]
    print(f"Table 1 today ({iters} iterations, compilation excluded; the published figures "
          "are for their own 1,000,000-run trace: C++ double 6 min 21 s, CUDA single 46 s):")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"), "\n")
    ref = fits["cpu", "float64"].summary.loglik[0]
    print(f"NumPy against bulkem (float64): relative difference {abs(curve_np[-1] / ref - 1):.1e}")

    res = fits["cpu", "float64"]
    truth = tmap_truth(bulkem.datasets.PAPER_MEAN_RUNS.get(n_runs, 8.824586))
    mom = pd.DataFrame({
        "fitted TMAP": res.moments(0),
        "trace (empirical)": empirical_moments(runs),
        "true TMAP": moments(truth["alpha"], truth["pi"], truth["rates"], ORDERS),
    })
    print("\nMoments (eqs 1-7): E(K) runs' length, E(X) inter-arrival time, "
          "Corr(X1, X2 | K >= 2):")
    print(mom.to_string(float_format=lambda v: f"{v:.4f}"), "\n")
    print(res.components.to_string(index=False, float_format=lambda v: f"{v:.4f}"), "\n")

    # the log-likelihood over the iterations (Figures 3-4), float64 and float32
    c64 = curve_np
    c32 = loglik_curve(runs, "cpu", "float32", start, iters)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    it = np.arange(iters + 1)
    axes[0].plot(it, c64, "o-", ms=3, color="steelblue")
    axes[0].set(xlabel="iteration", ylabel="log-likelihood",
                title=f"Log-likelihood of a {n_runs:,}-run trace (float64)")
    axes[1].plot(it[1:], (c32 - c64)[1:], "o-", ms=3, color="firebrick")
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set(xlabel="iteration", ylabel="float32 minus float64",
                title="float32 fit's log-likelihood minus float64's")
    fig.tight_layout()
    fig.savefig(out / "tmap_loglik_py.png", dpi=100)
    plt.close(fig)

    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6))
    titles = {"mean_run_length": "E(K), values per run", "mean_interarrival": "E(X)",
              "corr_x1_x2": "Corr(X1, X2 | K >= 2)"}
    for ax, (key, title) in zip(axes[:3], titles.items(), strict=True):
        vals = mom.loc[key]
        bars = ax.bar(range(3), vals, color=["steelblue", "lightgrey", "seagreen"])
        ax.bar_label(bars, [f"{v:.3f}" for v in vals])
        ax.set_xticks(range(3), ["fitted", "trace", "truth"])
        ax.set(title=title, ylim=(0, vals.max() * 1.2))
    lengths = np.bincount([len(u) for u in runs])[1:]
    k = np.arange(1, min(len(lengths), 40) + 1)
    p = res.params(0)
    d = 1.0 - p["pi"].sum(axis=1)
    pmf = [p["alpha"] @ np.linalg.matrix_power(p["pi"], j - 1) @ d for j in k]
    axes[3].bar(k, lengths[:len(k)] / n_runs, color="lightgrey", label="trace")
    axes[3].plot(k, pmf, "o-", ms=3, color="steelblue", label="fitted TMAP")
    axes[3].set(xlabel="values per run (K)", ylabel="share of runs", title="Run lengths")
    axes[3].legend(frameon=False)
    fig.tight_layout()
    fig.savefig(out / "tmap_moments_py.png", dpi=100)
    plt.close(fig)
    print(f"figures in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("BULKEM_VIGNETTE_OUT") or Path(__file__).parent / "output"
    parser.add_argument("--out", type=Path, default=Path(default), help="folder for figures")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    main(args.out, args.runs, args.iters, args.seed)
