"""The original bulkem demo in Python: many simulated datasets, CPU against GPU.

100 datasets of 2,000 values each, drawn from the inverse-Gaussian mixture
with weights 0.3/0.7, mu 1/3 and lambda 30/0.2, are fitted with 10 random
starts each on the CPU and, when a usable CUDA GPU is present, on the GPU.
Prints the times, beside a baseline timed in the same run (a plain NumPy EM
loop, one fit at a time, on a sample of the datasets from the same starts),
and how close the fits come to the truth, and writes PNG figures.
``demo.Rmd`` does the same from R.

Run::

    python vignettes/demo.py --out vignettes/output
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bulkem  # noqa: E402
from bulkem.interop.datasets import DEMO_LAMBDA, DEMO_MU, DEMO_WEIGHTS  # noqa: E402

TRUTH = {"weight": DEMO_WEIGHTS, "mu": DEMO_MU, "lambda": DEMO_LAMBDA}


def gpu_available() -> tuple[bool, str]:
    from bulkem.engines import cuda

    return cuda.available()


def timed_fit(data: list, backend: str, starts: int, seed: int) -> tuple[bulkem.FitResult, float]:
    # A first, tiny call compiles the kernels, so the timing below is the fit alone
    # (numba warns that its one-block launch under-uses a GPU: true, and meant).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bulkem.fit(data[:1], n_starts=1, seed=seed, backend=backend, progress=False)
    t0 = time.perf_counter()
    fit = bulkem.fit(data, n_components=2, n_starts=starts, max_iter=100, tol=1e-6,
                     seed=seed, backend=backend, progress=False,
                     accel=False)  # (plain EM, as numpy_em below and the R package's)
    return fit, time.perf_counter() - t0


def numpy_em(x: np.ndarray, w, mu, lam, max_iter: int, tol: float) -> tuple[float, int]:
    """The baseline: one fit by a plain NumPy EM loop, bulkem's equations and stopping rule.

    The inverse-Gaussian mixture EM of the original bulkem (lambda updated
    with the previous mu); stops when the log-likelihood changes by less than
    ``tol`` or after ``max_iter`` M-steps.  Returns (log-likelihood, M-steps).
    """
    x = x[:, None]
    w, mu, lam = (np.array(a, dtype=float) for a in (w, mu, lam))
    log_2pi_x3 = np.log(2 * np.pi * x**3)
    prev = -np.inf
    for it in range(max_iter + 1):
        comp = np.log(w) + 0.5 * (np.log(lam) - log_2pi_x3) - lam * (x - mu) ** 2 / (2 * mu**2 * x)
        top = comp.max(axis=1, keepdims=True)
        lse = top + np.log(np.exp(comp - top).sum(axis=1, keepdims=True))
        ll = float(lse.sum())
        if (it > 0 and abs(ll - prev) < tol) or it == max_iter:
            return ll, it
        prev = ll
        r = np.exp(comp - lse)
        s0 = r.sum(axis=0)
        new_mu = (r * x).sum(axis=0) / s0
        lam = s0 / (r * (x - mu) ** 2 / (mu**2 * x)).sum(axis=0)
        mu, w = new_mu, s0 / len(x)
    raise AssertionError("unreachable")


def timed_baseline(data: list, fit: bulkem.FitResult, n_sample: int) -> tuple[float, int, float]:
    """Time the NumPy loop on the first ``n_sample`` datasets, from bulkem's own starts.

    Returns (seconds, fits, largest |log-likelihood difference| to bulkem's fits).
    """
    sv = fit.start_values
    sv = sv[sv["dataset"] < n_sample]
    starts = fit.starts.set_index(["dataset", "start"])["loglik"]
    groups = list(sv.groupby(["dataset", "start"], sort=True))
    diff = 0.0
    t0 = time.perf_counter()
    results = [numpy_em(data[d], g["weight"], g["mu"], g["lambda"], 100, 1e-6)
               for (d, _), g in groups]
    seconds = time.perf_counter() - t0
    for ((d, k), _), (ll, _) in zip(groups, results, strict=True):
        diff = max(diff, abs(ll - starts[(d, k)]))
    return seconds, len(groups), diff


def accuracy(fit: bulkem.FitResult) -> pd.DataFrame:
    rows = []
    comps = fit.components
    for param, truth in TRUTH.items():
        for j, true in enumerate(truth, start=1):
            got = comps.loc[comps["component"] == j, param].to_numpy()
            rel = np.abs(got / true - 1)
            rows.append({
                "parameter": f"{param}[{j}]", "truth": true,
                "median fit": np.median(got),
                "5%": np.quantile(got, 0.05), "95%": np.quantile(got, 0.95),
                "median |rel. error|": np.median(rel),
                "within 10%": np.mean(rel <= 0.10),
            })
    return pd.DataFrame(rows)


def main(out: Path, n_datasets: int, n_obs: int, starts: int, seed: int,
         n_sample: int = 5) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 140)
    data = bulkem.datasets.simulate_demo(n_datasets, n_obs, seed=seed)
    n_fits = n_datasets * starts
    print(f"{n_datasets} datasets x {n_obs} values, {starts} random starts each "
          f"({n_fits} fits of up to 100 iterations)\n")

    backends = ["cpu"]
    has_gpu, found = gpu_available()
    if has_gpu:
        backends.append("cuda")
    else:
        print(f"GPU: none usable ({found}); timing the CPU only\n")

    fits, timing = {}, []
    for backend in backends:
        fit, seconds = timed_fit(data, backend, starts, seed)
        fits[backend] = fit
        where = "all CPU cores" if backend == "cpu" else "GPU"
        timing.append({"what": f"bulkem, {backend} ({where})", "fits": n_fits,
                       "seconds": seconds, "fits/s": n_fits / seconds})
    # The baseline, in the same run: a plain NumPy EM loop, one fit after another
    # on one core, from the same starts, on a sample of the datasets.
    seconds, n_base, diff = timed_baseline(data, fits["cpu"], n_sample)
    timing.append({"what": "plain NumPy EM loop (1 core)", "fits": n_base,
                   "seconds": seconds, "fits/s": n_base / seconds})
    timing = pd.DataFrame(timing)
    base = timing["fits/s"].iloc[-1]
    timing["x baseline"] = timing["fits/s"] / base
    print("Time of the fits (compilation excluded), against a plain NumPy EM loop timed in "
          f"the same run on {n_sample} of the datasets (same starts, same stopping rule):")
    print(timing.to_string(index=False, float_format="%.3f"))
    print(f"largest |log-likelihood difference| of the loop's fits to bulkem's: {diff:.2e}\n")

    acc = accuracy(fits["cpu"])
    print("How close the CPU fits come to the truth (component 1 has the smaller mu):")
    print(acc.to_string(index=False, float_format="%.3f"), "\n")
    if "cuda" in fits:
        a = fits["cpu"].components[["weight", "mu", "lambda"]].to_numpy()
        b = fits["cuda"].components[["weight", "mu", "lambda"]].to_numpy()
        rel = np.max(np.abs(a / b - 1))
        same = np.mean(fits["cpu"].summary["best_start"] == fits["cuda"].summary["best_start"])
        print(f"CPU against GPU: largest relative difference of a parameter {rel:.2e}; "
              f"same best start for {same:.0%} of the datasets\n")

    first = fits["cpu"].params(0)
    print("The first fit: " + ", ".join(
        f"{k}=[{' '.join(f'{v:.4f}' for v in first[k])}]" for k in ("mu", "lambda", "weight")))

    comps = fits["cpu"].components
    fig, axes = plt.subplots(2, 3, figsize=(11, 6))
    for col, (param, truth) in enumerate(TRUTH.items()):
        for row, true in enumerate(truth):
            ax = axes[row, col]
            got = comps.loc[comps["component"] == row + 1, param].to_numpy()
            ax.hist(got, bins=25, color="steelblue", edgecolor="white")
            ax.axvline(true, color="firebrick", lw=2, label="truth")
            ax.set_title(f"{param}, component {row + 1}")
    axes[0, 0].legend(frameon=False)
    fig.suptitle(f"Fitted parameters of {n_datasets} simulated datasets (red: truth)")
    fig.tight_layout()
    fig.savefig(out / "demo_truth_py.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.8))
    labels = [f"{w}\n{n} fits" for w, n in zip(timing["what"], timing["fits"], strict=True)]
    colors = ["seagreen"] * (len(timing) - 1) + ["grey"]
    bars = ax.barh(labels[::-1], timing["fits/s"][::-1], color=colors[::-1])
    ratio = [f"{r:.3g}x the baseline" if r != 1 else "the baseline"
             for r in timing["x baseline"][::-1]]
    ax.bar_label(bars, [f"{v:,.0f} fits/s ({r})" for v, r in
                        zip(timing["fits/s"][::-1], ratio, strict=True)], padding=3)
    ax.set_xscale("log")  # a GPU is orders of magnitude faster
    ax.set_xlim(timing["fits/s"].min() / 5, timing["fits/s"].max() * 300)
    ax.set(xlabel="fits per second (log scale)",
           title=f"Fits of {n_obs} values, up to 100 EM iterations; one run")
    fig.tight_layout()
    fig.savefig(out / "demo_timing_py.png", dpi=100)
    plt.close(fig)
    print(f"\nfigures in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("BULKEM_VIGNETTE_OUT") or Path(__file__).parent / "output"
    parser.add_argument("--out", type=Path, default=Path(default), help="folder for figures")
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--obs", type=int, default=2000)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--baseline-datasets", type=int, default=5,
                        help="datasets the plain NumPy loop fits (all their starts)")
    args = parser.parse_args()
    main(args.out, args.datasets, args.obs, args.starts, args.seed, args.baseline_datasets)
