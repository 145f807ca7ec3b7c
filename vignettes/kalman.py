"""The GPU-based parallel Kalman filter paper's Figures 5 and 6, with today's numbers.

Lin, Moore and Russell ("GPU-Based Parallel Kalman Filter") compute the
marginal likelihood of a series with a "splash" approximation: each step's
predictive density from the last ``window`` observations only, every step in
parallel.  This vignette measures, with ``bulkem.kalman_loglik``'s engines:

* Figure 5: time per series against its length (32 .. 4,096 steps) for a
  2-D and a 10-D random walk and an AR(10) process with and without a
  missing observation every 20 steps: the sequential filter on one CPU core,
  the exact time-parallel ``scan`` and the ``splash`` approximation (window
  10 for the random walks, 11 for AR(10), as in the paper) on the CPU cores,
  and on the GPU when one is usable (without missing observations ``scan``
  runs its steady-state form, which carries means alone once the covariance
  recursion has settled; with them, the full scan);
* Figure 6: the splash error ``|splash - exact|`` against the window (1 .. 20)
  for the 2-D random walk and AR(10).

It prints both tables and writes ``kalman_speed_py.png`` and
``kalman_error_py.png``.  The defaults are small so that the test command
stays fast (most of the time is compilation); ``--lengths`` and ``--steps``
take larger sizes, and ``benchmarks/bench_kalman.py`` measures the issue's.

Run::

    python vignettes/kalman.py --out vignettes/output
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bulkem  # noqa: E402
from bulkem import StateSpace  # noqa: E402

AR10_PHI = -np.poly([0.9, -0.8, 0.7, -0.6, 0.5, -0.4, 0.3, -0.2, 0.1, 0.05])[1:]


def models() -> dict:
    """name -> (model, splash window, missing every 20 steps?)."""
    ar = StateSpace.ar(AR10_PHI, sigma2=1.0, obs_var=0.1)
    return {"RW 2-D": (StateSpace.random_walk(2, q=0.1, r=1.0), 10, False),
            "RW 10-D": (StateSpace.random_walk(10, q=0.1, r=1.0), 10, False),
            "AR(10)": (ar, 11, False),
            "AR(10), missing every 20": (ar, 11, True)}


def series(model: StateSpace, n_steps: int, missing: bool, seed: int) -> np.ndarray:
    y = model.simulate(n_steps, rng=seed)
    if missing:
        y[::20] = np.nan
    return y[:, 0] if model.dim_obs == 1 else y


def seconds(fn, repeat: int = 3) -> float:
    fn()  # compiles at the first call of a shape
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def one_core(fn):
    def run():
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return fn()
        finally:
            numba.set_num_threads(before)

    return run


def speed(lengths: list[int], gpu: bool) -> pd.DataFrame:
    runs = [("sequential, 1 CPU core", "cpu", "exact"), ("scan, CPU", "cpu", "scan"),
            ("splash, CPU", "cpu", "splash")]
    if gpu:
        runs += [("scan, GPU", "cuda", "scan"), ("splash, GPU", "cuda", "splash")]
    rows = []
    for name, (model, window, missing) in models().items():
        y_all = series(model, max(lengths), missing, seed=1)
        for T in lengths:
            y = [y_all[:T]]
            for label, backend, method in runs:
                kw = {"window": window} if method == "splash" else {}

                def call(backend=backend, method=method, kw=kw, y=y, model=model):
                    return bulkem.kalman_loglik(y, model, method=method, backend=backend, **kw)

                fn = one_core(call) if label.endswith("1 CPU core") else call
                rows.append({"model": name, "T": T, "run": label, "seconds": seconds(fn)})
    return pd.DataFrame(rows)


def error(n_steps: int) -> pd.DataFrame:
    rows = []
    for name in ("RW 2-D", "AR(10)"):
        model, _, _ = models()[name]
        y = [series(model, n_steps, False, seed=2)]
        exact = bulkem.kalman_loglik(y, model, backend="cpu").loglik[0]
        for w in range(1, 21):
            ll = bulkem.kalman_loglik(y, model, method="splash", window=w, backend="cpu")
            err = abs(ll.loglik[0] - exact)
            rows.append({"model": name, "window": w, "abs_error": err,
                         "rel_error": err / abs(exact)})
    return pd.DataFrame(rows)


def main(out: Path, lengths: list[int], n_steps: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 160)
    from bulkem.engines import cuda

    gpu, found = cuda.available()
    print(f"CPU threads: {numba.get_num_threads()}; GPU: {found if gpu else 'none usable'}\n")

    sp = speed(lengths, gpu)
    table = sp.pivot_table(index=["model", "T"], columns="run", values="seconds", sort=False)
    print("Figure 5: milliseconds per series (best of 3, compilation excluded)")
    print((table * 1e3).to_string(float_format="%.3f"), "\n")

    err = error(n_steps)
    print(f"Figure 6: splash error |splash - exact| against the window ({n_steps} steps)")
    print(err.pivot(index="window", columns="model", values="abs_error")
          .to_string(float_format="%.3e"), "\n")

    names = list(models())
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.6), sharey=True)
    for ax, name in zip(axes, names, strict=True):
        sub = sp[sp.model == name]
        for run, g in sub.groupby("run", sort=False):
            ax.plot(g["T"], g["seconds"] * 1e3, marker="o", ms=3, label=run)
        ax.set(xscale="log", yscale="log", xlabel="series length (steps)", title=name)
    axes[0].set_ylabel("milliseconds per series")
    axes[0].legend(frameon=False, fontsize=8)
    fig.suptitle("Figure 5 today: time against series length")
    fig.tight_layout()
    fig.savefig(out / "kalman_speed_py.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, g in err.groupby("model", sort=False):
        ax.plot(g["window"], g["abs_error"], marker="o", ms=3, label=name)
    ax.set(yscale="log", xlabel="splash window (steps)", ylabel="|splash - exact| log-likelihood",
           title=f"Figure 6 today: splash error ({n_steps} steps)")
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(out / "kalman_error_py.png", dpi=100)
    plt.close(fig)
    print(f"figures in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("BULKEM_VIGNETTE_OUT") or Path(__file__).parent / "output"
    parser.add_argument("--out", type=Path, default=Path(default), help="folder for figures")
    parser.add_argument("--lengths", default="32,128,512,2048,4096",
                        help="series lengths of Figure 5, comma-separated")
    parser.add_argument("--steps", type=int, default=1000, help="series length of Figure 6")
    args = parser.parse_args()
    main(args.out, [int(v) for v in args.lengths.split(",")], args.steps)
