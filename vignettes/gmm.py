"""The GMM CUDA paper's time per EM iteration and speed-up against problem size, with today's.

Kumar, Satoor and Buck ("Fast Parallel Expectation Maximization for Gaussian
Mixture Models on GPUs using CUDA", NVIDIA, 2009; ``shared/papers/gmm-em-cuda.txt``)
fit a Gaussian mixture with diagonal covariances to one dataset of N points,
M components, D dimensions in single precision, on a GeForce 8800 Ultra and a
Quadro FX 5800, against a naive single-threaded C implementation on a 3.0 GHz
Pentium IV.  Their headline: one iteration for N = 230,400, M = 32, D = 32
takes 264.9 ms on the Quadro FX 5800, 164x the CPU's 43,352.6 ms (Table IV;
the abstract says 264 ms, section VI 265 ms).  This vignette

1. shows the paper's Tables III and IV, and today's time per iteration of
   ``bulkem.fit(data, family="gaussian", n_components=M)`` for the same
   sizes, read from the CSV files ``benchmarks/bench_gmm_paper.py`` writes
   (``benchmarks/results/gmm_paper_<backend>.csv``; the device and date are in
   them); the GPU figures are not measured here (the test command runs on a
   CPU), and what is missing is said so;
2. draws the time per iteration and the speed-up against problem size,
   ``gmm_paper_py.png``;
3. fits one small dataset live (N = 2,000, M = 2, D = 2, float64: a model
   shape the tests compile already) and draws it, ``gmm_fit_py.png``.

Run::

    python vignettes/gmm.py --out vignettes/output
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bulkem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

# The paper's section VI: Table III (GeForce 8800 Ultra, 128 cores) and Table IV (Quadro FX
# 5800, 240 cores), ms per EM iteration, single precision; "CPU" is the naive single-threaded
# C code on a 3.0 GHz Pentium IV (Table IV's column; Table III's differs by < 4%, and its first
# row is Table IV's, printed twice). N as printed: "46.8K" is taken as 46,800. The 230.4K row
# ran on the Quadro FX 5800 only (4 GB of memory).
PAPER = pd.DataFrame({
    "N": [46_800, 76_800, 122_800, 153_600, 230_400],
    "M": [8, 16, 24, 32, 32],
    "D": [8, 16, 24, 32, 32],
    "cpu_ms": [338.9, 2495.8, 11175.1, 32225.6, 43352.6],
    "ultra_ms": [16.2, 43.8, 146.8, 269.3, np.nan],
    "fx5800_ms": [16.2, 42.4, 102.1, 215.0, 264.9],
})
HEADLINE = (230_400, 32, 32)
TODAY_COLOURS = ["navy", "seagreen", "purple", "steelblue", "darkgoldenrod", "black"]


def read_measured() -> pd.DataFrame | None:
    """Every ``gmm_paper_*.csv`` in benchmarks/results, one frame (None when there is none)."""
    files = sorted(RESULTS.glob("gmm_paper_*.csv"))
    if not files:
        return None
    frames = [pd.read_csv(f).assign(file=f.name) for f in files]
    return pd.concat(frames, ignore_index=True)


def label(row) -> str:
    return f"bulkem {row.backend}, {row.dtype} ({row.device})"


def tables(measured: pd.DataFrame | None) -> None:
    pd.set_option("display.width", 160)
    print("== The paper's Tables III and IV: ms per EM iteration (single precision)")
    shown = PAPER.assign(**{"speed-up FX 5800": PAPER.cpu_ms / PAPER.fx5800_ms})
    print(shown.to_string(index=False, float_format=lambda v: f"{v:,.1f}"), "\n")
    if measured is None:
        print("Today's figures: no benchmarks/results/gmm_paper_*.csv yet (run "
              "benchmarks/bench_gmm_paper.py --backend cpu|cuda).")
        print("GPU figures not measured yet.\n")
        return
    for f, g in measured.groupby("file"):
        print(f"read benchmarks/results/{f}: {', '.join(sorted(set(g.device)))}; "
              f"{', '.join(sorted(set(g.date)))}; commit {', '.join(sorted(set(g.commit)))}")
    if not (measured.backend == "cuda").any():
        print("GPU figures not measured yet (benchmarks/results/gmm_paper_cuda.csv is missing: "
              "on a GPU machine, python benchmarks/bench_gmm_paper.py --backend cuda).")
    n, m, d = HEADLINE
    print(f"\n== N = {n:,}, M = {m}, D = {d}: ms per EM iteration")
    rows = [("the paper: Quadro FX 5800, CUDA (Table IV)", "float32", 264.9),
            ("the paper: Pentium IV, naive C, 1 thread (Table IV)", "float32", 43352.6)]
    at = measured[(measured.N == n) & (measured.M == m) & (measured.D == d)]
    for r in at.itertuples():
        rows.append((f"today: {label(r)}, {r.date}", r.dtype, r.ms_per_iteration))
    head = pd.DataFrame(rows, columns=["who", "precision", "ms per iteration"])
    head["paper's GPU / this"] = 264.9 / head["ms per iteration"]
    print(head.to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    missing = sorted(set(measured.backend) - set(at.backend))
    for b in missing:
        sizes = measured[measured.backend == b]
        print(f"(the {b} CSV has no row at this size: it measured N = "
              f"{', '.join(f'{v:,}' for v in sorted(set(sizes.N)))})")
    print("\n== Every size measured today (ms per iteration)")
    cols = ["device", "date", "backend", "dtype", "N", "M", "D", "ms_per_iteration"]
    print(measured[cols].to_string(index=False, float_format=lambda v: f"{v:,.3f}"), "\n")


def speedups(measured: pd.DataFrame | None) -> list[tuple[str, pd.DataFrame, str]]:
    """(label, frame of size and speed-up, colour) series: the paper's own, and today's
    against it (in the colour of that measurement's times)."""
    work = PAPER.N * PAPER.M * PAPER.D
    out = [("the paper: 8800 Ultra vs its CPU", pd.DataFrame(
               {"work": work, "speedup": PAPER.cpu_ms / PAPER.ultra_ms}), "darkorange"),
           ("the paper: FX 5800 vs its CPU", pd.DataFrame(
               {"work": work, "speedup": PAPER.cpu_ms / PAPER.fx5800_ms}), "firebrick")]
    if measured is None:
        return out
    groups = measured.groupby(["device", "backend", "dtype"], sort=False)
    for colour, (key, g) in zip(TODAY_COLOURS, groups, strict=False):
        j = g.merge(PAPER, on=["N", "M", "D"])
        if len(j):
            out.append((f"today: bulkem {key[1]}, {key[2]} ({key[0]}) vs the paper's CPU",
                        pd.DataFrame({"work": j.N * j.M * j.D,
                                      "speedup": j.cpu_ms / j.ms_per_iteration}), colour))
    cpu = measured[measured.backend == "cpu"]
    gpu = measured[measured.backend == "cuda"]
    j = gpu.merge(cpu, on=["N", "M", "D", "dtype"], suffixes=("_gpu", "_cpu"))
    for key, g in j.groupby(["device_gpu", "device_cpu", "dtype"], sort=False):
        out.append((f"today: bulkem GPU vs CPU, {key[2]} ({key[0]}; {key[1]})",
                    pd.DataFrame({"work": g.N * g.M * g.D,
                                  "speedup": g.ms_per_iteration_cpu / g.ms_per_iteration_gpu}),
                    "black"))
    return out


def figure(measured: pd.DataFrame | None, out: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    ax = axes[0]
    work = PAPER.N * PAPER.M * PAPER.D
    ax.plot(work, PAPER.cpu_ms, "o-", color="grey", label="the paper: Pentium IV, naive C")
    ax.plot(work, PAPER.ultra_ms, "s-", color="darkorange", label="the paper: 8800 Ultra")
    ax.plot(work, PAPER.fx5800_ms, "^-", color="firebrick", label="the paper: Quadro FX 5800")
    if measured is not None:
        groups = measured.groupby(["device", "backend", "dtype"], sort=False)
        for colour, (key, g) in zip(TODAY_COLOURS, groups, strict=False):
            g = g.assign(work=g.N * g.M * g.D).sort_values("work")
            ax.plot(g.work, g.ms_per_iteration, "D--", ms=4, color=colour,
                    label=f"today: bulkem {key[1]}, {key[2]} ({key[0][:60]})")
    ax.set(xscale="log", yscale="log", xlabel="problem size N x M x D",
           ylabel="ms per EM iteration", title="Time per iteration against problem size")
    ax.legend(fontsize=7, frameon=False)
    ax = axes[1]
    for name, s, colour in speedups(measured):
        s = s.sort_values("work")
        ax.plot(s.work, s.speedup, "o-" if name.startswith("the paper") else "D--", ms=4,
                color=colour, label=name[:100])
    ax.set(xscale="log", yscale="log", xlabel="problem size N x M x D", ylabel="speed-up",
           title="Speed-up against problem size"
           + ("" if measured is not None and (measured.backend == "cuda").any()
              else " (GPU figures not measured yet)"))
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(out / "gmm_paper_py.png", dpi=100)
    plt.close(fig)


def live_fit(out: Path) -> None:
    """One small fit through the API: N = 2,000 points, M = 2 components, D = 2, float64."""
    rng = np.random.default_rng(5)
    n = 2_000
    truth = {"weight": np.array([0.4, 0.6]), "mean": np.array([[0.0, 0.0], [4.0, -3.0]]),
             "sd": np.array([[1.0, 1.0], [1.0, 0.5]])}
    z = rng.random(n) >= truth["weight"][0]
    x = truth["mean"][z.astype(int)] + truth["sd"][z.astype(int)] * rng.normal(size=(n, 2))
    t0 = time.perf_counter()
    res = bulkem.fit([x], family="gaussian", n_components=2, n_starts=3, seed=2,
                     backend="cpu", progress=False)
    secs = time.perf_counter() - t0
    print(f"== A live fit: one dataset of N = {n:,} points, M = 2, D = 2, float64, 3 starts "
          f"({secs:.2f} s, backend {res.backend})")
    print(res.summary.to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    print(res.components.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    p = res.params(0)
    print("truth: weights", truth["weight"].tolist(), "means", truth["mean"].tolist(),
          "variances", (truth["sd"] ** 2).tolist(), "\n")
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(x[:, 0], x[:, 1], s=3, c=np.where(z, "seagreen", "steelblue"), alpha=0.5)
    t = np.linspace(0, 2 * np.pi, 200)
    for k in range(2):
        sd = np.sqrt(p["var"][k])
        for r in (1, 2):
            ax.plot(p["mean"][k, 0] + r * sd[0] * np.cos(t),
                    p["mean"][k, 1] + r * sd[1] * np.sin(t), color="firebrick", lw=1)
        ax.plot(*p["mean"][k], "x", color="firebrick", ms=10, mew=2)
    ax.set(xlabel="dimension 1", ylabel="dimension 2",
           title="Diagonal Gaussian mixture, M = 2: 1 and 2 sd of each fitted component")
    fig.tight_layout()
    fig.savefig(out / "gmm_fit_py.png", dpi=100)
    plt.close(fig)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    measured = read_measured()
    tables(measured)
    figure(measured, out)
    live_fit(out)
    print(f"figures in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("BULKEM_VIGNETTE_OUT") or Path(__file__).parent / "output"
    parser.add_argument("--out", type=Path, default=Path(default), help="folder for figures")
    args = parser.parse_args()
    main(args.out)
