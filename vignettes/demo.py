"""The original bulkem demo in Python: many simulated datasets, CPU against GPU.

100 datasets of 2,000 values each, drawn from the inverse-Gaussian mixture
with weights 0.3/0.7, mu 1/3 and lambda 30/0.2, are fitted with 10 random
starts each on the CPU and, when a usable CUDA GPU is present, on the GPU.
Prints the times and how close the fits come to the truth, and writes PNG
figures.  ``demo.Rmd`` does the same from R.

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
from bulkem.datasets import DEMO_LAMBDA, DEMO_MU, DEMO_WEIGHTS  # noqa: E402

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
                     seed=seed, backend=backend, progress=False)
    return fit, time.perf_counter() - t0


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


def main(out: Path, n_datasets: int, n_obs: int, starts: int, seed: int) -> None:
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
        status = fit.summary["status"].value_counts().to_dict()
        timing.append({"backend": backend, "seconds": seconds, "fits/s": n_fits / seconds,
                       "status": status})
    timing = pd.DataFrame(timing)
    print("Time of the fit (compilation excluded):")
    print(timing.to_string(index=False, float_format="%.3f"), "\n")

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

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(timing["backend"], timing["fits/s"], color=["grey", "seagreen"][: len(timing)])
    ax.set(ylabel="fits per second", title=f"{n_fits} fits, {n_obs} values each")
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
    args = parser.parse_args()
    main(args.out, args.datasets, args.obs, args.starts, args.seed)
