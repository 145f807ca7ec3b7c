"""Hidden Markov models in bulk, and the HMM CUDA paper's tables with today's figures.

1. The source paper (Brändle and Haubenstock, "HMM forward, Viterbi and Baum-Welch in
   CUDA"; its Figures 11 and 13) timed the forward algorithm and a Baum-Welch iteration of
   one categorical HMM over M sequences of length 16, N = M = 64 ... 512.  Today's figures
   for the same workloads come from ``benchmarks/bench_hmm_paper.py --csv`` on a GPU
   (``benchmarks/results/hmm_paper.csv``: the device and date are in it); this vignette
   prints them beside the published ones, and measures the smallest size live on this
   machine's CPU cores.
2. A batch of datasets fitted in one call, and a decoded state path over one sequence,
   drawn against the states that generated it.

Run::

    python vignettes/hmm.py --out vignettes/output
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bulkem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "hmm_paper.csv"
TRUTH = dict(  # three hidden states emitting four symbols
    startprob=np.array([0.6, 0.3, 0.1]),
    transmat=np.array([[0.90, 0.08, 0.02], [0.05, 0.90, 0.05], [0.02, 0.08, 0.90]]),
    emissionprob=np.array([[0.70, 0.20, 0.05, 0.05], [0.10, 0.40, 0.40, 0.10],
                           [0.05, 0.05, 0.20, 0.70]]))


def sample(rng: np.random.Generator, lengths) -> tuple[list, list]:
    seqs, paths = [], []
    for T in lengths:
        s = np.empty(T, dtype=int)
        s[0] = rng.choice(3, p=TRUTH["startprob"])
        for t in range(1, T):
            s[t] = rng.choice(3, p=TRUTH["transmat"][s[t - 1]])
        x = np.array([rng.choice(4, p=TRUTH["emissionprob"][k]) for k in s], dtype=float)
        seqs.append(x)
        paths.append(s + 1)
    return seqs, paths


def paper_table(out: Path) -> None:
    print("\n== The paper's workloads (N states = M sequences; ms)")
    if RESULTS.exists():
        t = pd.read_csv(RESULTS)
        dev = ", ".join(sorted(set(t.device))) + ", " + ", ".join(sorted(set(t.date)))
        print(f"today's GPU figures: {RESULTS.relative_to(ROOT)} ({dev})")
        cols = ["N", "T", "what", "published_ms", "bulkem_gpu_ms", "pytorch_ms", "floor_ms"]
        print(t[cols].to_string(index=False, float_format=lambda v: f"{v:,.2f}"))
        short = t[(t["T"] == 16) & t.published_ms.notna()]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, what in zip(axes, ("forward", "Baum-Welch"), strict=True):
            r = short[short.what == what]
            ax.plot(r.N, r.published_ms, "o-", label="published (GPU of 2009)")
            ax.plot(r.N, r.bulkem_gpu_ms, "s-", label="bulkem, today's GPU")
            ax.plot(r.N, r.pytorch_ms, "^-", label="PyTorch, same GPU, same run")
            ax.plot(r.N, r.floor_ms, ":", color="grey", label="floor (FP64 FMA rate)")
            ax.set(yscale="log", xlabel="N states = M sequences (length 16)", ylabel="ms",
                   title=what)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "hmm_paper_py.png", dpi=100)
        plt.close(fig)
    else:
        print("GPU figures not measured yet (run benchmarks/bench_hmm_paper.py --csv on a GPU).")
    # live, on this machine's CPU: the smallest workload through bulkem.fit
    rng = np.random.default_rng(3)
    N = 64
    A = rng.dirichlet(np.ones(N), N)
    B = rng.dirichlet(np.ones(16), N)
    start = rng.dirichlet(np.ones(N))
    x = [rng.integers(0, 16, 16).astype(float) for _ in range(N)]
    init = dict(startprob=start, transmat=A, emissionprob=B)
    kw = dict(family="hmm", emission="categorical", n_symbols=16, n_components=N,
              n_starts=1, init=init, tol=0.0, backend="cpu", progress=False,
              accel=False)  # (the cost of a Baum-Welch iteration)
    bulkem.fit([x], max_iter=1, **kw)  # compile
    t0 = time.perf_counter()
    bulkem.fit([x], max_iter=1, **kw)
    t1 = time.perf_counter()
    bulkem.fit([x], max_iter=11, **kw)
    t2 = time.perf_counter()
    per = ((t2 - t1) - (t1 - t0)) / 10 * 1e3
    print(f"this machine's CPU cores, N = M = 64, length 16: {per:.2f} ms per Baum-Welch "
          "iteration through bulkem.fit (published GPU: 35.9 ms)")


def bulk_fit(out: Path) -> None:
    print("\n== A batch: 40 subjects, 8 sequences each, 3 states, 20 starts")
    rng = np.random.default_rng(7)
    data, paths = [], []
    for _ in range(40):
        seqs, p = sample(rng, rng.integers(30, 120, 8))
        data.append(seqs)
        paths.append(p)
    res = bulkem.fit(data, family="hmm", emission="categorical", n_symbols=4, n_components=3,
                     n_starts=20, seed=1, backend="cpu", progress=False)
    print(res.summary.status.value_counts().to_string())
    med = res.components.groupby("state")[["prob_0", "prob_1", "prob_2", "prob_3"]].median()
    print("median fitted emission probabilities per state (truth:",
          TRUTH["emissionprob"].round(2).tolist(), ")")
    print(med.round(3).to_string())
    # one sequence decoded under its subject's fit; states are numbered by expected symbol,
    # as the truth's are, so they can be drawn against each other
    x, truth = data[0][0], paths[0][0]
    logprob, path = res.decode(0, x)
    agree = np.mean(path == truth)
    print(f"dataset 0, sequence 0: Viterbi log-probability {logprob:.2f}; the decoded path "
          f"agrees with the generating states at {agree:.0%} of the steps")
    fig, ax = plt.subplots(figsize=(10, 3.5))
    t = np.arange(len(x))
    ax.plot(t, x, ".", color="grey", label="observed symbol (0-3)")
    ax.step(t, truth - 0.9, where="mid", color="tab:blue", label="generating state (shifted)")
    ax.step(t, path - 1.1, where="mid", color="tab:red", label="Viterbi path (shifted)")
    ax.set(xlabel="step", yticks=[], title="A decoded state path (bulkem decode)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "hmm_path_py.png", dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="vignettes/output")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paper_table(out)
    bulk_fit(out)


if __name__ == "__main__":
    main()
