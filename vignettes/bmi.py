"""Two-component inverse-Gaussian mixture of the BMI data (the Python version of bmi.Rmd).

Fits the BMI data (2107 values, the ``bmi`` data of the R package mixsmsn)
from one fixed start and from 100 random starts, draws the histogram with
both fitted densities, and chooses among 1 to 4 components by BIC in one grid call, with the
standard errors of the chosen fit beside its bootstrap intervals.

Run from anywhere::

    python vignettes/bmi.py --out vignettes/output

The data ship with bulkem (:func:`bulkem.datasets.load_bmi`; the same values
are the R package's data set ``bmi``).  Figures are PNG files in
``--out`` (default ``$BULKEM_VIGNETTE_OUT`` or ``vignettes/output``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bulkem  # noqa: E402

FIXED_START = {"weight": [0.5, 0.5], "mu": [0.99, 1.01], "lambda": [1.0, 1.0]}
SEED = 2024


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 120)
    x = bulkem.datasets.load_bmi()
    print(f"{len(x)} BMI values, from {x.min():.2f} to {x.max():.2f}\n")

    # One fixed start (both components almost equal) against 100 random starts.
    # plain EM, as mixsmsn's: the starts that 100 iterations leave climbing (below)
    fixed = bulkem.fit([x], n_components=2, n_starts=1, init=FIXED_START, max_iter=100,
                       seed=1, progress=False, accel=False)
    random = bulkem.fit([x], n_components=2, n_starts=100, max_iter=100, seed=SEED,
                        progress=False, accel=False)
    params = pd.concat([
        fixed.components.assign(fit="fixed start"),
        random.components.assign(fit="100 random starts"),
    ])[["fit", "component", "weight", "mu", "lambda"]]
    print("Fitted parameters:")
    print(params.to_string(index=False, float_format="%.3f"), "\n")
    ll_fixed = fixed.summary["loglik"].iloc[0]
    ll_random = random.summary["loglik"].iloc[0]
    print(f"log-likelihood: fixed start {ll_fixed:.2f} ({fixed.summary['status'].iloc[0]}), "
          f"best random start {ll_random:.2f} ({random.summary['status'].iloc[0]}); "
          f"gain {ll_random - ll_fixed:.1f}\n")

    ll = random.starts["loglik"].to_numpy()
    stopped = (random.starts["status"] == "max_iter").to_numpy()
    at_best = np.abs(ll - np.nanmax(ll)) < 1e-3
    edges = np.histogram_bin_edges(ll[np.isfinite(ll)], bins=40)
    counts, _ = np.histogram(ll, bins=edges)
    top = int(np.argmax(counts))
    in_top = (ll >= edges[top]) & (ll <= edges[top + 1])
    print(f"{at_best.sum()} of {len(ll)} random starts reach the best log-likelihood "
          "(within 0.001):")
    print(f"  {np.sum(~stopped & at_best)} of the {np.sum(~stopped)} that converged, and "
          f"{np.sum(stopped & at_best)} of the {stopped.sum()} stopped by max_iter (100 "
          "iterations)")
    print(f"  the histogram's tallest bar holds {in_top.sum()}: those and "
          f"{np.sum(in_top & ~at_best)} more stopped by max_iter within "
          f"{np.max(np.nanmax(ll) - ll[in_top]):.2g} of the best, still climbing\n")

    grid = np.linspace(x.min() * 0.9, x.max() * 1.05, 400)
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.hist(x, bins=50, density=True, color="0.88", edgecolor="0.6")
    ax.plot(grid, fixed.density(0, grid), "--", color="firebrick", lw=2,
            label=f"fixed start (loglik {ll_fixed:.1f})")
    ax.plot(grid, random.density(0, grid), color="navy", lw=2,
            label=f"best of 100 random starts (loglik {ll_random:.1f})")
    ax.set(title="BMI: two-component inverse-Gaussian mixtures", xlabel="BMI",
           ylabel="density")
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(out / "bmi_fits_py.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.hist([ll[~stopped], ll[stopped]], bins=edges, stacked=True,
            color=["steelblue", "darkorange"], edgecolor="white",
            label=["converged", "stopped at max_iter (100 iterations)"])
    ax.axvline(ll_fixed, color="firebrick", ls="--", lw=2, label="fixed start")
    ax.annotate(f"{in_top.sum()} starts in this bar,\n{at_best.sum()} within 0.001 of the best",
                xy=(edges[top], counts[top]), xytext=(-10, -30), textcoords="offset points",
                ha="right")
    ax.set(title="Final log-likelihood of each of the 100 random starts",
           xlabel="log-likelihood", ylabel="starts")
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(out / "bmi_starts_py.png", dpi=110)
    plt.close(fig)

    # 1 to 4 components in one call: BIC chooses, with standard errors of every size's fit.
    grid = bulkem.fit([x], n_components=[1, 2, 3, 4], n_starts=100, max_iter=1000, tol=1e-10,
                      seed=SEED, se=True, progress=False)
    bic = grid.selection.rename(columns={"n_components": "components"})
    print("BIC by number of components (n_best: the starts within 1e-6 of the best):")
    print(bic[["components", "status", "loglik", "n_params", "bic", "icl", "n_best",
               "chosen"]].to_string(index=False, float_format="%.2f"))
    chosen = int(grid.summary["n_components"].iloc[0])
    print(f"lowest BIC: {chosen} components\n")
    comps = [grid.for_size(m).components.assign(components=m) for m in (1, 2, 3, 4)]
    print(pd.concat(comps)[["components", "component", "weight", "mu", "lambda"]]
          .to_string(index=False, float_format="%.3f"))
    print("\nThe chosen fit with its standard errors (observed information):")
    print(grid.components[["component", "weight", "se_weight", "mu", "se_mu", "lambda",
                           "se_lambda"]].to_string(index=False, float_format="%.3f"))
    # The same fit bootstrapped: 100 datasets drawn from it, each refitted from 5 starts.
    boot = bulkem.fit([x], n_components=chosen, n_starts=5, max_iter=1000, tol=1e-10,
                      seed=SEED, bootstrap=100, bootstrap_level=0.9, progress=False)
    iv = boot.intervals.set_index("parameter")
    se = {f"{name}_{c}": grid.components[f"se_{name}"].iloc[c - 1]
          for c in range(1, chosen + 1) for name in ("weight", "mu", "lambda")}
    iv["estimate +- 1.645 se"] = [f"{e - 1.645 * se[p]:.3f} .. {e + 1.645 * se[p]:.3f}"
                                  for p, e in iv["estimate"].items()]
    print("\n90% intervals: parametric bootstrap (100 refits) beside the standard errors':")
    print(iv[["estimate", "lower", "upper", "estimate +- 1.645 se"]].to_string(
        float_format="%.3f"))
    # BIC = -2 loglik + k log n; a component adds 3 parameters (weight, mu, lambda).
    gain = bic["loglik"].iloc[2] - bic["loglik"].iloc[1]
    c2, c3 = comps[1], comps[2]
    # The text below reads these numbers; it assumes BIC picks three components.
    assert chosen == 3 and bic["bic"].idxmin() == 2 and gain > 1.5 * np.log(len(x)), bic
    print(f"\nWhat BIC says: a third component raises the log-likelihood by {gain:.1f}, more "
          f"than the {1.5 * np.log(len(x)):.1f} (3/2 log n) BIC charges for its 3 parameters. "
          f"It splits the upper component of the two-component fit (weight "
          f"{c2.weight.iloc[1]:.2f}, mu {c2.mu.iloc[1]:.1f}) into two overlapping ones (mu "
          f"{c3.mu.iloc[1]:.1f} and {c3.mu.iloc[2]:.1f}, weights {c3.weight.iloc[1]:.2f} and "
          f"{c3.weight.iloc[2]:.2f}): the upper group's long right tail is more than one "
          "inverse-Gaussian shape follows. Two components describe the two modes; three "
          "describe the data's shape better.")

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(bic["components"], bic["bic"], "o-")
    ax.set(xticks=[1, 2, 3, 4], xlabel="components", ylabel="BIC (lower is better)",
           title="BMI: BIC by number of components")
    fig.tight_layout()
    fig.savefig(out / "bmi_bic_py.png", dpi=110)
    plt.close(fig)
    print(f"\nbackend: {random.backend}; figures in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("BULKEM_VIGNETTE_OUT") or Path(__file__).parent / "output"
    parser.add_argument("--out", type=Path, default=Path(default),
                        help="folder for the PNG figures")
    main(parser.parse_args().out)
