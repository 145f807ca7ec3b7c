"""The HMM CUDA paper's workloads: forward pass and Baum-Welch iteration, N states x M sequences.

Brändle and Haubenstock (../shared/papers/hmm-cuda-bayesian-network-inference.txt) time the
forward algorithm and one Baum-Welch iteration of one categorical HMM over M sequences of
length 16, for N = M = 64 ... 512 (their Figures 11 and 13; Liu's 2009 GPU: forward 64x64
10.2 ms, 512x512 410 ms; Baum-Welch 512x512 6,055 ms).  This script times, in one run:

* bulkem on the GPU (the many-states regime, ``bulkem.engines.cuda.many_states``): the forward pass
  and one Baum-Welch iteration (E-step, stopping rule, M-step), device work synchronised;
  for the largest size also a Baum-Welch iteration through ``bulkem.fit`` end to end
  (``max_iter=k2`` minus ``max_iter=k1``, over ``k2 - k1`` iterations: host work included);
* a plain PyTorch batched implementation (float64 on the GPU, a matrix product per step);
* bulkem's CPU engine on every core for the smallest sizes;
* the floor: the multiply-adds of the matrix products over the GPU's float64 FMA rate.

    python benchmarks/bench_hmm_paper.py --sizes 64 128 256 512 --lengths 16 1000
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import numpy as np

import bulkem
from bulkem.tuning import DEFAULT

V_SYMBOLS = 16
FP64_FLOPS = 33.5e12  # H100/H200 SXM: 132 SMs x 64 FP64 FMA lanes x 1.98 GHz x 2 flops
PUBLISHED = {  # Liu's GPU (2009), ms: forward, Baum-Welch (length 16)
    64: (10.2, 35.9), 128: (19.74, 142.6), 192: (40.93, 339.1), 256: (71.77, 903.3),
    320: (128.44, 1328.6), 448: (208.08, 2479.6), 512: (410.17, 6054.8)}


def model(N: int, rng) -> dict:
    A = rng.dirichlet(np.ones(N), N)
    B = rng.dirichlet(np.ones(V_SYMBOLS), N)
    return {"startprob": rng.dirichlet(np.ones(N)), "transmat": A, "emissionprob": B}


def sample(p: dict, M: int, T: int, rng) -> np.ndarray:
    """M sequences of T symbols, (M, T), all at once, step by step."""
    cum_a, cum_b = np.cumsum(p["transmat"], axis=1), np.cumsum(p["emissionprob"], axis=1)
    N = len(p["startprob"])
    s = np.minimum((rng.random((M, 1)) > np.cumsum(p["startprob"])).sum(axis=1), N - 1)
    x = np.empty((M, T))
    for t in range(T):
        u = rng.random((M, 2))
        x[:, t] = np.minimum((u[:, :1] > cum_b[s]).sum(axis=1), V_SYMBOLS - 1)
        s = np.minimum((u[:, 1:] > cum_a[s]).sum(axis=1), N - 1)
    return x


def bulkem_pass_ms(p, x, repeat: int, bw: bool) -> tuple[float, float]:
    """Device time (synchronised) of a forward pass, or of one Baum-Welch iteration."""
    from bulkem.engines.cuda.many_states import Pass

    M, T = x.shape
    N = len(p["startprob"])
    off = np.arange(0, M * T + 1, T, dtype=np.int64)
    ps = Pass(x.reshape(-1), off, N, V_SYMBOLS)
    prm = np.concatenate([p["startprob"], p["transmat"].ravel(), p["emissionprob"].ravel()])
    _, fstate, iteration = ps.iteration(10**9, 0.0, 1e-9, np.ones(3, np.int32))

    def run():
        if bw:
            iteration()
        else:
            ps.forward()
            ps.loglik()  # (only the log-likelihoods are read)

    best = np.inf
    for k in range(repeat + 1):  # the first compiles
        ps.set_params(prm)
        ps.stream.synchronize()
        t0 = time.perf_counter()
        run()
        ps.stream.synchronize()
        if k:
            best = min(best, time.perf_counter() - t0)
    ll = fstate.copy_to_host()[1] if bw else ps.ll.copy_to_host().sum()
    return best * 1e3, float(ll)


def bulkem_bw_ms(p, x, backend: str, k1: int, k2: int) -> tuple[float, float]:
    seqs = [row for row in x]
    kw = dict(family="hmm", emission="categorical", n_symbols=V_SYMBOLS,
              n_components=len(p["startprob"]), n_starts=1, init=p, tol=0.0,
              accel=False, backend=backend,
              progress=False)
    bulkem.fit([seqs], max_iter=1, **kw)  # compile
    times = []
    res = None
    for k in (k1, k2):
        t0 = time.perf_counter()
        res = bulkem.fit([seqs], max_iter=k, **kw)
        times.append(time.perf_counter() - t0)
    return (times[1] - times[0]) / (k2 - k1) * 1e3, float(res.summary.loglik[0])


def torch_ms(p, x, repeat: int, bw: bool) -> tuple[float, float] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    dev = torch.device("cuda")
    A = torch.tensor(p["transmat"], device=dev)
    B = torch.tensor(p["emissionprob"], device=dev)
    pi = torch.tensor(p["startprob"], device=dev)
    X = torch.tensor(x, device=dev, dtype=torch.long)
    M, T = X.shape

    def forward():
        alphas, scales = [], []
        a = pi[None, :] * B[:, X[:, 0]].T
        for t in range(T):
            if t:
                a = (a @ A) * B[:, X[:, t]].T
            c = a.sum(1, keepdim=True)
            a = a / c
            alphas.append(a)
            scales.append(c)
        return alphas, torch.log(torch.cat(scales, 1)).sum()

    def iteration():
        alphas, ll = forward()
        b = torch.ones_like(alphas[0])
        xi = torch.zeros_like(A)
        occ = torch.zeros(A.shape[0], device=dev, dtype=A.dtype)
        counts = torch.zeros_like(B)
        for t in range(T - 1, -1, -1):
            g = alphas[t] * b
            g = g / g.sum(1, keepdim=True)
            occ += g.sum(0)
            counts.index_add_(1, X[:, t], g.T)
            if t:
                w = B[:, X[:, t]].T * b
                nb = w @ A.T
                z = (alphas[t - 1] * nb).sum(1, keepdim=True)
                xi += (alphas[t - 1] / z).T @ w
                b = nb / nb.sum(1, keepdim=True)
        newA = A * xi
        return ll, newA / newA.sum(1, keepdim=True), counts / occ[:, None]

    run = iteration if bw else (lambda: forward()[1])
    run()
    torch.cuda.synchronize()
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = run()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    ll = out[0] if bw else out
    return best * 1e3, float(ll)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 1000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--iters", type=int, nargs=2, default=[2, 6], metavar=("K1", "K2"),
                    help="Baum-Welch: time fit(max_iter=K2) - fit(max_iter=K1)")
    ap.add_argument("--cpu-max", type=int, default=64, help="bulkem CPU for N <= this")
    ap.add_argument("--csv", help="also write the table here (the vignettes read it)")
    args = ap.parse_args()
    from bulkem.engines.cuda import available

    gpu, name = available()
    print(f"# {datetime.date.today()}  cpu cores {os.cpu_count()}  gpu {name if gpu else 'none'}"
          f"  V={V_SYMBOLS} symbols, float64; Tuning.hmm_many_states={DEFAULT.hmm_many_states}")
    print(f"{'N=M':>5}{'T':>6}{'what':>11}{'bulkem GPU':>12}{'PyTorch':>11}{'bulkem CPU':>12}"
          f"{'floor':>9}{'published':>11}  (ms; agreement of the log-likelihoods)")
    rng = np.random.default_rng(1)
    table = []
    for N in args.sizes:
        p = model(N, rng)
        for T in args.lengths:
            x = sample(p, N, T, rng)
            fma = N * T * N * N  # per matrix product over the steps
            for what in ("forward", "Baum-Welch"):
                bw = what == "Baum-Welch"
                g = t = c = None
                if gpu:
                    g = bulkem_pass_ms(p, x, args.repeat, bw)
                    t = torch_ms(p, x, args.repeat, bw)
                    if bw and N == args.sizes[-1] and T == args.lengths[-1]:
                        e2e = bulkem_bw_ms(p, x, "cuda", *args.iters)
                        print(f"# N=M={N}, T={T}: bulkem.fit end to end {e2e[0]:.2f} ms per "
                              "Baum-Welch iteration (host work included)")
                if N <= args.cpu_max:
                    if bw:
                        c = bulkem_bw_ms(p, x, "cpu", *args.iters)
                    else:
                        from bulkem.engines import infer
                        from bulkem.models.hmm.model import HMMModel

                        m = HMMModel(bulkem.models.hmm.EMISSIONS["categorical"], N, V_SYMBOLS)
                        prm = np.concatenate([p["startprob"], p["transmat"].ravel(),
                                              p["emissionprob"].ravel()])[None]
                        seqs, which = list(x), np.zeros(N, np.int64)
                        infer.score(m, prm, which, seqs[:2], "cpu")
                        t0 = time.perf_counter()
                        ll = infer.score(m, prm, which, seqs, "cpu").sum()
                        c = ((time.perf_counter() - t0) * 1e3, float(ll))
                floor = (3 if bw else 1) * 2 * fma / FP64_FLOPS * 1e3
                pub = PUBLISHED.get(N, (None, None))[1 if bw else 0] if T == 16 else None
                # (Baum-Welch: the start's log-likelihood on the GPUs, after K2 steps on the CPU)
                lls = [v[1] for v in ((g, t) if bw else (g, t, c)) if v is not None]
                agree = (max(abs(a - lls[0]) / abs(lls[0]) for a in lls) if lls else np.nan)

                def cell(v, width):
                    return f"{v[0]:>{width},.2f}" if v is not None else f"{'-':>{width}}"
                print(f"{N:>5}{T:>6}{what:>11}{cell(g, 12)}{cell(t, 11)}{cell(c, 12)}"
                      f"{floor:>9.3f}{(f'{pub:,.1f}' if pub else '-'):>11}  ({agree:.1e})",
                      flush=True)
                table.append(dict(N=N, T=T, what=what,
                                  bulkem_gpu_ms=g[0] if g else np.nan,
                                  pytorch_ms=t[0] if t else np.nan,
                                  bulkem_cpu_ms=c[0] if c else np.nan, floor_ms=floor,
                                  published_ms=pub or np.nan, device=name if gpu else "none",
                                  date=str(datetime.date.today())))
    if args.csv:
        import pandas as pd

        pd.DataFrame(table).to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
