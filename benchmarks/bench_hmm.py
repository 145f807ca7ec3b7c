"""Hidden Markov models in bulk: bulkem's CPU and CUDA engines beside hmmlearn, in one run.

The issue-13 batch: D datasets x 20 sequences of lengths 50-500, N = 4 states,
V = 8 symbols (categorical), S random starts, 100 iterations (``tol=0``).
Everything is timed end to end through ``bulkem.fit`` (compilation excluded
by a warm-up).  hmmlearn (``CategoricalHMM``, the same iterations, ``tol`` off,
``implementation="scaling"``, its fastest) fits a sample of the same (dataset, start)
pairs in a process pool of one worker per core, each with one BLAS thread
(``baselines.py``), and one at a time on one core; the ratios are to the pool's rate,
and to the per-core rate times the cores.  bulkem's CPU engine is timed on every core
and on one (one Numba thread), beside hmmlearn's one-core rate.

    python benchmarks/bench_hmm.py                                # full size
    python benchmarks/bench_hmm.py --datasets 20 --starts 4 --hmmlearn-fits 8   # small
    python benchmarks/bench_hmm.py --grid "cuda_max_registers_units=64;128;None"  # CUDA variants

``--grid NAME=V1;V2`` times CUDA float64 with each value of a field of
:class:`bulkem.tuning.Tuning` (passed as ``bulkem.fit(..., tuning=...)``); ``NAME`` is the
field or its old ``bulkem.config`` name in upper case (``tuning_args.py``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import warnings

import numba
import numpy as np

import bulkem
from bulkem.tuning import DEFAULT

sys.path.insert(0, os.path.dirname(__file__))
from baselines import pool, rates  # noqa: E402
from tuning_args import grid_variants, variant_label  # noqa: E402

N_STATES, N_SYMBOLS, N_SEQ = 4, 8, 20
# hmmlearn's fastest forward-backward: its default, "log", gives the same fits 7x slower
# (dev VM, 2026-11-27: 0.28 against 2.03 fits/s; H200 machine, one core: 1.0 fits/s)
IMPLEMENTATION = "scaling"


def make_batch(n_datasets: int, seed: int = 1) -> list[list[np.ndarray]]:
    """Datasets of 20 categorical sequences (lengths 50-500) from random 4-state HMMs."""
    rng = np.random.default_rng(seed)
    A = rng.dirichlet(np.ones(N_STATES) * 0.5, (n_datasets, N_STATES)) + np.eye(N_STATES) * 2
    A /= A.sum(axis=2, keepdims=True)
    B = rng.dirichlet(np.ones(N_SYMBOLS) * 0.5, (n_datasets, N_STATES))
    cum_a, cum_b = np.cumsum(A, axis=2), np.cumsum(B, axis=2)
    lengths = rng.integers(50, 501, (n_datasets, N_SEQ))
    ds = np.repeat(np.arange(n_datasets), N_SEQ)  # every sequence at once, step by step
    state = rng.integers(N_STATES, size=len(ds))
    x = np.empty((len(ds), 500))
    for t in range(500):
        u = rng.random((len(ds), 2))
        x[:, t] = (u[:, :1] > cum_b[ds, state]).sum(axis=1)
        state = np.minimum((u[:, 1:] > cum_a[ds, state]).sum(axis=1), N_STATES - 1)
    x = np.minimum(x, N_SYMBOLS - 1).reshape(n_datasets, N_SEQ, 500)
    return [[x[d, k, :lengths[d, k]].copy() for k in range(N_SEQ)] for d in range(n_datasets)]


def fit(data, args, **kw):
    base = dict(family="hmm", emission="categorical", n_symbols=N_SYMBOLS,
                n_components=N_STATES, n_starts=args.starts, max_iter=args.iters, tol=0.0,
                accel=False,
                seed=1, progress=False)
    return bulkem.fit(data, **{**base, **kw})


def timed(data, args, repeat, **kw):
    fit(data[:2], args, n_starts=2, max_iter=2, **kw)  # compile
    best, res = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fit(data, args, **kw)
        best = min(best, time.perf_counter() - t0)
    return res, best


def _hmmlearn_one(job):
    """One hmmlearn fit from a bulkem start (so that both do the same work)."""
    from hmmlearn.hmm import CategoricalHMM

    seqs, start, iters = job
    X = np.concatenate(seqs).astype(int)[:, None]
    m = CategoricalHMM(N_STATES, n_iter=iters, tol=-np.inf, init_params="",
                       n_features=N_SYMBOLS, implementation=IMPLEMENTATION)
    m.startprob_, m.transmat_, m.emissionprob_ = (start["startprob"], start["transmat"],
                                                  start["emissionprob"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X, [len(s) for s in seqs])
    return m.score(X, [len(s) for s in seqs])


def hmmlearn_rate(data, res, args) -> tuple[float, float, float, int]:
    """fits/s of hmmlearn over a sample of the batch's fits, in a pool of every core and on
    one core; its agreement with bulkem; the pool's size."""
    n = min(args.hmmlearn_fits, len(res.starts))
    jobs, ours = [], []
    for d in range(n):
        ds = d % len(data)
        # the best start's starting values: the same work as any of bulkem's fits
        jobs.append((data[ds], res.init_params(ds), args.iters))
        ours.append(res.summary.loglik[ds])
    # (one core: every job too, so that its datasets are those of bulkem's rates)
    rate, core, workers, ll = rates(_hmmlearn_one, jobs, per_core_jobs=len(jobs))
    rel = float(np.max(np.abs(np.array(ll) - ours) / np.abs(ours)))
    return rate, rel, core, workers


def _hmmlearn_infer(job):
    """hmmlearn's score and Viterbi decode of one dataset's sequences under one model."""
    from hmmlearn.hmm import CategoricalHMM

    seqs, p = job
    m = CategoricalHMM(N_STATES, n_features=N_SYMBOLS, implementation=IMPLEMENTATION)
    m.startprob_, m.transmat_, m.emissionprob_ = p["startprob"], p["transmat"], p["emissionprob"]
    t0 = time.perf_counter()
    for s in seqs:
        m.score(s.astype(int)[:, None])
    t1 = time.perf_counter()
    for s in seqs:
        m.decode(s.astype(int)[:, None])
    return t1 - t0, time.perf_counter() - t1


def inference_rows(data, res, args, gpu, rows) -> list[str]:
    """Sequences/s of forward scores and Viterbi paths under each dataset's fitted model."""
    from bulkem.engines import infer

    seqs = [s for ds in data for s in ds]
    which = np.repeat(np.arange(len(data)), [len(ds) for ds in data])
    params = np.stack([res._get(d)[0] for d in range(len(data))])
    model = res._model
    out, notes = {}, []
    for backend in ["cpu"] + (["cuda"] if gpu else []):
        for name, fn in (("forward", infer.score), ("viterbi", infer.viterbi)):
            fn(model, params[:1], which[:2] * 0, seqs[:2], backend=backend)  # compile
            best = np.inf
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                got = fn(model, params, which, seqs, backend=backend)
                best = min(best, time.perf_counter() - t0)
            out[backend, name] = got
            rows.append((f"{name}: bulkem {backend.upper()}", len(seqs), best, len(seqs) / best))
    if gpu:
        diff = np.max(np.abs(out["cuda", "forward"] - out["cpu", "forward"])
                      / np.abs(out["cpu", "forward"]))
        same = all(np.array_equal(a, b) for a, b in zip(out["cpu", "viterbi"][0],
                                                       out["cuda", "viterbi"][0], strict=True))
        notes.append(f"forward CUDA vs CPU max rel diff {diff:.1e}; Viterbi paths equal: {same}")
    k = min(args.hmmlearn_fits, len(data))
    jobs = [(data[d], res.params(d)) for d in range(k)]
    with pool(min(os.cpu_count() or 1, k)) as workers:
        list(workers.map(_hmmlearn_infer, jobs[:2]))
        t0 = time.perf_counter()
        times = list(workers.map(_hmmlearn_infer, jobs))
        wall = time.perf_counter() - t0
    n = sum(len(data[d]) for d in range(k))
    share = np.array(times).sum(axis=0)  # split the wall time by each part's CPU time
    for j, name in enumerate(("forward", "viterbi")):
        sec = wall * share[j] / share.sum()
        rows.append((f"{name}: hmmlearn (all cores)", n, sec, n / sec))
    return notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--cpu-datasets", type=int, default=50, help="bulkem CPU timed on this many")
    ap.add_argument("--hmmlearn-fits", type=int, default=64, help="hmmlearn timed on this many")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    ap.add_argument("--inference", action="store_true",
                    help="also forward scores and Viterbi paths of every sequence")
    ap.add_argument("--grid", nargs="*", default=[], metavar="NAME=V1;V2",
                    help="CUDA float64 with each value of a Tuning field (NAME=V1;V2, Python "
                         "literals; old upper-case config names accepted)")
    args = ap.parse_args()
    variants = grid_variants(args.grid)  # (a bad name fails now, not after the runs)
    from bulkem.engines.cuda import available

    gpu, name = available()
    data = make_batch(args.datasets)
    n_obs = sum(len(s) for ds in data for s in ds)
    print(f"# {datetime.date.today()}  cpu cores {os.cpu_count()}  gpu {name if gpu else 'none'}"
          f"  batch {args.datasets} datasets x {N_SEQ} sequences ({n_obs:,} observations), "
          f"N={N_STATES}, V={N_SYMBOLS}, {args.starts} starts, {args.iters} iterations, tol=0")
    rows = []
    cpu_data = data[:args.cpu_datasets]
    res_cpu, s = timed(cpu_data, args, 1, backend="cpu")
    if not gpu:
        data = cpu_data  # (inference below: the datasets that were fitted)
    cpu_rate = len(res_cpu.starts) / s
    rows.append(("bulkem CPU f64 (all cores)", len(res_cpu.starts), s, cpu_rate))
    threads = numba.get_num_threads()
    numba.set_num_threads(1)  # bulkem on one core, beside hmmlearn's one-core rate
    try:
        res_one, s_one = timed(cpu_data, args, 1, backend="cpu")
    finally:
        numba.set_num_threads(threads)
    one_rate = len(res_one.starts) / s_one
    rows.append(("bulkem CPU f64 (1 thread)", len(res_one.starts), s_one, one_rate))
    hl_rate, agree, hl_core, workers = hmmlearn_rate(cpu_data, res_cpu, args)
    rows.append((f"hmmlearn pool ({workers} x 1 BLAS thread)", args.hmmlearn_fits,
                 args.hmmlearn_fits / hl_rate, hl_rate))
    rows.append(("hmmlearn 1 core (1 BLAS thread)", args.hmmlearn_fits,
                 args.hmmlearn_fits / hl_core, hl_core))
    notes = [f"hmmlearn vs bulkem CPU, same starts and iterations: max relative loglik "
             f"difference {agree:.2e}",
             f"one core each: bulkem CPU {one_rate:,.1f} fits/s, hmmlearn {hl_core:.2f} fits/s: "
             f"{one_rate / hl_core:.1f}x"]
    res_gpu = None
    if gpu:
        for dtype in args.dtypes:
            res, s = timed(data, args, args.repeat, backend="cuda", dtype=dtype)
            if dtype == "float64":
                res_gpu = res
            rows.append((f"bulkem CUDA {dtype}", len(res.starts), s, len(res.starts) / s))
            if dtype == "float64":
                sub = res.summary.loglik.to_numpy()[:args.cpu_datasets]
                ref = res_cpu.summary.loglik.to_numpy()
                notes.append(f"CUDA vs CPU float64 best loglik: max relative difference "
                             f"{np.nanmax(np.abs(sub - ref) / np.abs(ref)):.2e}")
        for variant in variants:
            res, s = timed(data, args, args.repeat, backend="cuda",
                           tuning=DEFAULT.replace(**variant))
            rows.append((f"  CUDA f64 {variant_label(variant)}", len(res.starts), s,
                         len(res.starts) / s))
    cores = os.cpu_count() or 1
    print(f"{'run':<36}{'fits':>9}{'seconds':>10}{'fits/s':>12}{'vs pool':>10}"
          f"{'vs core x' + str(cores):>14}")
    for label, n, s, rate in rows:
        print(f"{label:<36}{n:>9}{s:>10.3f}{rate:>12,.1f}{rate / hl_rate:>9,.1f}x"
              f"{rate / (hl_core * cores):>13,.1f}x")
    if args.inference:
        irows: list[tuple] = []
        notes += inference_rows(data, res_gpu or res_cpu, args, gpu, irows)
        base = {name: rate for label, _, _, rate in irows for name in ("forward", "viterbi")
                if label.startswith(f"{name}: hmmlearn")}
        print(f"{'inference':<34}{'seqs':>9}{'seconds':>10}{'seqs/s':>12}{'vs hmmlearn':>13}")
        for label, n, s, rate in irows:
            name = label.split(":")[0]
            print(f"{label:<34}{n:>9}{s:>10.3f}{rate:>12,.0f}{rate / base[name]:>12,.1f}x")
    for note in notes:
        print(f"# {note}")


if __name__ == "__main__":
    main()
