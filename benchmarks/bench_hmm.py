"""Hidden Markov models in bulk: bulkem's CPU and CUDA engines beside hmmlearn and JAX, in one run.

The issue-13 batch: D datasets x 20 sequences of lengths 50-500, N = 4 states, S random
starts, 100 iterations (``tol=0``: every start runs them all), for each emission of
``--emissions``: categorical (V = 8 symbols), Gaussian with D = 1 and D = 4 dimensions
(diagonal covariances) and Poisson counts, each batch simulated from random 4-state models
with the same chains (``make_batch``).
Everything is timed end to end through ``bulkem.fit`` (compilation excluded
by a warm-up).  hmmlearn (``CategoricalHMM``, ``GaussianHMM(covariance_type="diag")``,
``PoissonHMM``; the same iterations from bulkem's starting values, ``tol`` off,
``implementation="scaling"``, its fastest) fits a sample of the same (dataset, start)
pairs in a process pool of one worker per core, each with one BLAS thread
(``baselines.py``), and one at a time on one core; the ratios are to the pool's rate,
and to the per-core rate times the cores.  bulkem's CPU engine is timed on every core
and on one (one Numba thread), beside hmmlearn's one-core rate.  The Gaussian fits use
``reg_covar=0`` and hmmlearn ``covars_prior=0``: the same M-step, so the same fits.

``--jax`` also runs ``peer_jax_hmm.py`` (its own process) on the batch that bulkem's
fastest engine fitted, from the same starts: a jitted, vmapped Baum-Welch in float64, its
fits/s and its final log-likelihoods against bulkem's, fit by fit.

    python benchmarks/bench_hmm.py --jax              # full size, every emission, JAX categorical
    python benchmarks/bench_hmm.py --datasets 20 --starts 3 --iters 5 --cpu-datasets 4 \\
        --hmmlearn-fits 4 --jax                                     # small
    python benchmarks/bench_hmm.py --emissions categorical \\
        --grid "cuda_max_registers_units=64;128;None"                # CUDA variants

``--grid NAME=V1;V2`` times CUDA float64 with each value of a field of
:class:`bulkem.tuning.Tuning` (passed as ``bulkem.fit(..., tuning=...)``); ``NAME`` is the
field or its old ``bulkem.config`` name in upper case (``tuning_args.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numba
import numpy as np

import bulkem
from bulkem.tuning import DEFAULT

sys.path.insert(0, os.path.dirname(__file__))
from baselines import pool, rates  # noqa: E402
from peer_jax_hmm import save_input  # noqa: E402
from tuning_args import grid_variants, variant_label  # noqa: E402

N_STATES, N_SYMBOLS, N_SEQ = 4, 8, 20
# the rows of --emissions: bulkem's emission and the values per observation
EMISSIONS = {"categorical": ("categorical", 1), "gaussian1": ("gaussian", 1),
             "gaussian4": ("gaussian", 4), "poisson": ("poisson", 1)}
# hmmlearn's fastest forward-backward: its default, "log", gives the same fits 7x slower
# (dev VM, 2026-11-27: 0.28 against 2.03 fits/s; H200 machine, one core: 1.0 fits/s)
IMPLEMENTATION = "scaling"


def make_batch(n_datasets: int, seed: int = 1, emission: str = "categorical"
               ) -> list[list[np.ndarray]]:
    """Datasets of 20 sequences (lengths 50-500) from random 4-state HMMs.

    ``emission`` (a key of :data:`EMISSIONS`): categorical symbols 0..7 (arrays of shape
    ``(T,)``), Gaussian vectors (``(T, D)``: each state's means ``N(0, 2^2)``, standard
    deviations uniform on 0.5-1.5, independent dimensions) or Poisson counts (``(T,)``,
    rates ``exp(U(0, 3.5))``, 1 to 33).  Every emission has the same chains (transition
    matrices, lengths, state paths: one seed), drawn as the issue-13 batch was (its
    categorical values are the same bits); a Gaussian or Poisson emission is drawn from the
    state paths afterwards, from the same generator.
    """
    kind, dim = EMISSIONS[emission]
    rng = np.random.default_rng(seed)
    A = rng.dirichlet(np.ones(N_STATES) * 0.5, (n_datasets, N_STATES)) + np.eye(N_STATES) * 2
    A /= A.sum(axis=2, keepdims=True)
    B = rng.dirichlet(np.ones(N_SYMBOLS) * 0.5, (n_datasets, N_STATES))
    cum_a, cum_b = np.cumsum(A, axis=2), np.cumsum(B, axis=2)
    lengths = rng.integers(50, 501, (n_datasets, N_SEQ))
    ds = np.repeat(np.arange(n_datasets), N_SEQ)  # every sequence at once, step by step
    state = rng.integers(N_STATES, size=len(ds))
    x = np.empty((len(ds), 500))
    path = np.empty((len(ds), 500), dtype=np.int64)
    for t in range(500):
        u = rng.random((len(ds), 2))
        x[:, t] = (u[:, :1] > cum_b[ds, state]).sum(axis=1)
        path[:, t] = state
        state = np.minimum((u[:, 1:] > cum_a[ds, state]).sum(axis=1), N_STATES - 1)
    x = np.minimum(x, N_SYMBOLS - 1)
    at = (ds[:, None], path)  # each step's (dataset, state)
    if kind == "gaussian":
        means = rng.normal(0.0, 2.0, (n_datasets, N_STATES, dim))
        sds = rng.uniform(0.5, 1.5, (n_datasets, N_STATES, dim))
        x = means[at] + sds[at] * rng.standard_normal((len(ds), 500, dim))
    elif kind == "poisson":
        lam = np.exp(rng.uniform(0.0, 3.5, (n_datasets, N_STATES)))
        x = rng.poisson(lam[at]).astype(np.float64)
    x = x.reshape(n_datasets, N_SEQ, 500, *x.shape[2:])
    return [[x[d, k, :lengths[d, k]].copy() for k in range(N_SEQ)] for d in range(n_datasets)]


def fit_options(emission: str, n_starts: int, max_iter: int) -> dict:
    """``bulkem.fit``'s options of the benchmark's fits of an emission of :data:`EMISSIONS`."""
    kind, _ = EMISSIONS[emission]
    opts = dict(family="hmm", emission=kind, n_components=N_STATES, n_starts=n_starts,
                max_iter=max_iter, tol=0.0, accel=False, seed=1, progress=False)
    if kind == "categorical":
        opts["n_symbols"] = N_SYMBOLS
    elif kind == "gaussian":
        opts["reg_covar"] = 0.0  # hmmlearn's M-step with covars_prior=0
    return opts


def fit(data, args, emission, **kw):
    return bulkem.fit(data, **{**fit_options(emission, args.starts, args.iters), **kw})


def timed(data, args, emission, repeat, **kw):
    fit(data[:2], args, emission, n_starts=2, max_iter=2, **kw)  # compile
    best, res = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fit(data, args, emission, **kw)
        best = min(best, time.perf_counter() - t0)
    return res, best


def hmmlearn_model(emission: str, p: dict, **kw):
    """hmmlearn's model of an emission with the parameters ``p`` (bulkem's names), and the
    function that makes its ``X`` of a sequence."""
    from hmmlearn import hmm

    kind, _ = EMISSIONS[emission]
    if kind == "categorical":
        m = hmm.CategoricalHMM(N_STATES, n_features=N_SYMBOLS, implementation=IMPLEMENTATION,
                               **kw)
        m.emissionprob_ = p["emissionprob"]
    elif kind == "gaussian":
        m = hmm.GaussianHMM(N_STATES, covariance_type="diag", covars_prior=0.0,
                            implementation=IMPLEMENTATION, **kw)
        m.means_, m.covars_ = p["means"], p["vars"]
    else:
        m = hmm.PoissonHMM(N_STATES, implementation=IMPLEMENTATION, **kw)
        m.lambdas_ = np.asarray(p["lambdas"]).reshape(N_STATES, 1)
    m.startprob_, m.transmat_ = p["startprob"], p["transmat"]
    if kind == "gaussian":
        return m, lambda s: np.asarray(s, dtype=np.float64).reshape(len(s), -1)
    return m, lambda s: np.asarray(s).astype(int)[:, None]


def _hmmlearn_one(job):
    """One hmmlearn fit from a bulkem start (so that both do the same work)."""
    emission, seqs, start, iters = job
    m, as_x = hmmlearn_model(emission, start, n_iter=iters, tol=-np.inf, init_params="")
    X = np.concatenate([as_x(s) for s in seqs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X, [len(s) for s in seqs])
    return m.score(X, [len(s) for s in seqs])


def hmmlearn_rate(data, res, args, emission) -> tuple[float, float, float, int]:
    """fits/s of hmmlearn over a sample of the batch's fits, in a pool of every core and on
    one core; its agreement with bulkem; the pool's size."""
    n = min(args.hmmlearn_fits, len(res.starts))
    jobs, ours = [], []
    for d in range(n):
        ds = d % len(data)
        # the best start's starting values: the same work as any of bulkem's fits
        jobs.append((emission, data[ds], res.init_params(ds), args.iters))
        ours.append(res.summary.loglik[ds])
    # (one core: every job too, so that its datasets are those of bulkem's rates)
    rate, core, workers, ll = rates(_hmmlearn_one, jobs, per_core_jobs=len(jobs))
    rel = float(np.max(np.abs(np.array(ll) - ours) / np.abs(ours)))
    return rate, rel, core, workers


def _hmmlearn_infer(job):
    """hmmlearn's score and Viterbi decode of one dataset's sequences under one model."""
    emission, seqs, p = job
    m, as_x = hmmlearn_model(emission, p)
    t0 = time.perf_counter()
    for s in seqs:
        m.score(as_x(s))
    t1 = time.perf_counter()
    for s in seqs:
        m.decode(as_x(s))
    return t1 - t0, time.perf_counter() - t1


def inference_rows(data, res, args, gpu, rows, emission) -> list[str]:
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
        notes.append(f"{emission}: forward CUDA vs CPU max rel diff {diff:.1e}; Viterbi paths "
                     f"equal: {same}")
    k = min(args.hmmlearn_fits, len(data))
    jobs = [(emission, data[d], res.params(d)) for d in range(k)]
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


def jax_peer(data, res, args, emission) -> dict:
    """``peer_jax_hmm.py`` in its own process on ``data`` from ``res``'s starts: its JSON
    record (``fits_per_s``, the agreement with ``res``), or ``{"error": ...}``."""
    kind, _ = EMISSIONS[emission]
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # (this process holds a GPU too)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batch.npz")
        save_input(path, data, kind, res, args.starts, args.iters,
                   N_SYMBOLS if kind == "categorical" else 0)
        cmd = [args.jax_python, os.path.join(here, "peer_jax_hmm.py"), "--input", path,
               "--chunk", str(args.jax_chunk), "--repeat", str(args.jax_repeat)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = proc.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(line)
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit status {proc.returncode}: {tail}"}


def measure(emission: str, args, gpu: bool, variants: list) -> dict:
    """Every row of one emission: printed as a table of runs, returned for the summary."""
    kind, dim = EMISSIONS[emission]
    data = make_batch(args.datasets, emission=emission)
    n_obs = sum(len(s) for ds in data for s in ds)
    what = {"categorical": f"V={N_SYMBOLS}", "gaussian": f"D={dim} diagonal",
            "poisson": "counts"}[kind]
    print(f"## {emission}: {args.datasets} datasets x {N_SEQ} sequences ({n_obs:,} "
          f"observations), N={N_STATES}, {what}, {args.starts} starts, {args.iters} "
          f"iterations, tol=0")
    rows = []
    cpu_data = data[:args.cpu_datasets]
    res_cpu, s = timed(cpu_data, args, emission, 1, backend="cpu")
    cpu_rate = len(res_cpu.starts) / s
    rows.append(("bulkem CPU f64 (all cores)", len(res_cpu.starts), s, cpu_rate))
    threads = numba.get_num_threads()
    numba.set_num_threads(1)  # bulkem on one core, beside hmmlearn's one-core rate
    try:
        res_one, s_one = timed(data[:args.one_thread_datasets], args, emission, 1,
                               backend="cpu")
    finally:
        numba.set_num_threads(threads)
    one_rate = len(res_one.starts) / s_one
    rows.append(("bulkem CPU f64 (1 thread)", len(res_one.starts), s_one, one_rate))
    hl_rate, agree, hl_core, workers = hmmlearn_rate(cpu_data, res_cpu, args, emission)
    n_hl = min(args.hmmlearn_fits, len(res_cpu.starts))
    rows.append((f"hmmlearn pool ({workers} x 1 BLAS thread)", n_hl, n_hl / hl_rate, hl_rate))
    rows.append(("hmmlearn 1 core (1 BLAS thread)", n_hl, n_hl / hl_core, hl_core))
    notes = [f"{emission}: hmmlearn vs bulkem CPU, same starts and iterations: max relative "
             f"loglik difference {agree:.2e}",
             f"{emission}: one core each: bulkem CPU {one_rate:,.1f} fits/s, hmmlearn "
             f"{hl_core:.2f} fits/s: {one_rate / hl_core:.1f}x"]
    res_gpu, gpu_rate = None, None
    if gpu:
        for dtype in args.dtypes:
            res, s = timed(data, args, emission, args.repeat, backend="cuda", dtype=dtype)
            rows.append((f"bulkem CUDA {dtype}", len(res.starts), s, len(res.starts) / s))
            if dtype == "float64":
                res_gpu, gpu_rate = res, len(res.starts) / s
                sub = res.summary.loglik.to_numpy()[:args.cpu_datasets]
                ref = res_cpu.summary.loglik.to_numpy()
                notes.append(f"{emission}: CUDA vs CPU float64 best loglik: max relative "
                             f"difference {np.nanmax(np.abs(sub - ref) / np.abs(ref)):.2e}")
        for variant in variants:
            res, s = timed(data, args, emission, args.repeat, backend="cuda",
                           tuning=DEFAULT.replace(**variant))
            rows.append((f"  CUDA f64 {variant_label(variant)}", len(res.starts), s,
                         len(res.starts) / s))
    cores = os.cpu_count() or 1
    print(f"{'run':<36}{'fits':>9}{'seconds':>10}{'fits/s':>12}{'vs pool':>10}"
          f"{'vs core x' + str(cores):>14}")
    for label, n, s, rate in rows:
        print(f"{label:<36}{n:>9}{s:>10.3f}{rate:>12,.1f}{rate / hl_rate:>9,.1f}x"
              f"{rate / (hl_core * cores):>13,.1f}x")
    if res_gpu is None:
        data = cpu_data  # (inference and JAX below: the datasets that were fitted in float64)
    if args.inference:
        irows: list[tuple] = []
        notes += inference_rows(data, res_gpu or res_cpu, args, gpu, irows, emission)
        base = {name: rate for label, _, _, rate in irows for name in ("forward", "viterbi")
                if label.startswith(f"{name}: hmmlearn")}
        print(f"{'inference':<34}{'seqs':>9}{'seconds':>10}{'seqs/s':>12}{'vs hmmlearn':>13}")
        for label, n, s, rate in irows:
            name = label.split(":")[0]
            print(f"{label:<34}{n:>9}{s:>10.3f}{rate:>12,.0f}{rate / base[name]:>12,.1f}x")
    peer = None
    if emission in args.jax:
        peer = jax_peer(data, res_gpu or res_cpu, args, emission)
        if "error" not in peer:
            ref = "CUDA" if res_gpu is not None else "CPU"
            notes.append(f"{emission}: JAX peer ({peer['device']}, sequences padded to "
                         f"{peer['padded_to']}) vs bulkem {ref}, each of {peer['compared']} "
                         f"fits from the same start: final loglik max relative difference "
                         f"{peer['max_rel']:.2e} (median {peer['median_rel']:.2e}, "
                         f"{peer['over_1e-9']} above 1e-9)")
    return {"gpu": gpu_rate, "cpu": cpu_rate, "one": one_rate, "pool": hl_rate,
            "core": hl_core, "peer": peer, "notes": notes}


def summary(results: dict, args, cores: int) -> None:
    """One table: an emission a row, its rates and ratios."""
    def cell(v, width=14):
        return f"{v:>{width},.1f}" if isinstance(v, float) else f"{v:>{width}}"

    def ratio(a, b):
        return f"{a / b:>10,.1f}x" if a and b else f"{'-':>11}"

    head = ["bulkem GPU", "bulkem CPU", "bulkem 1 thr", "hl pool", "hl 1 core", "JAX peer"]
    print(f"# fits/s. hl: hmmlearn, a pool of {cores} x 1 BLAS thread and one core; bulkem "
          "GPU: CUDA float64; JAX peer: its own device (see the notes); ratios: bulkem's GPU, "
          "all cores, one thread to hmmlearn's pool, pool, one core; bulkem's GPU to the JAX "
          "peer")
    print(f"{'emission':<13}" + "".join(f"{h:>14}" for h in head)
          + "".join(f"{h:>11}" for h in ("GPU/pool", "CPU/pool", "1thr/core", "GPU/JAX")))
    for emission, r in results.items():
        peer = r["peer"]
        jax_rate = (peer["fits_per_s"] if peer and "error" not in peer
                    else "not available" if peer else "not run")
        gpu = r["gpu"] if r["gpu"] is not None else "not measured"
        print(f"{emission:<13}{cell(gpu)}{cell(r['cpu'])}{cell(r['one'])}{cell(r['pool'])}"
              f"{cell(r['core'])}{cell(jax_rate)}{ratio(r['gpu'], r['pool'])}"
              f"{ratio(r['cpu'], r['pool'])}{ratio(r['one'], r['core'])}"
              f"{ratio(r['gpu'], jax_rate if isinstance(jax_rate, float) else None)}")
    for emission, r in results.items():
        if r["peer"] and "error" in r["peer"]:
            print(f"# {emission}: JAX peer not available: {r['peer']['error']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--emissions", nargs="+", default=list(EMISSIONS), choices=list(EMISSIONS))
    ap.add_argument("--cpu-datasets", type=int, default=20, help="bulkem CPU timed on this many")
    ap.add_argument("--one-thread-datasets", type=int, default=10,
                    help="bulkem CPU on one thread timed on this many")
    ap.add_argument("--hmmlearn-fits", type=int, default=32, help="hmmlearn timed on this many")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    ap.add_argument("--inference", action="store_true",
                    help="also forward scores and Viterbi paths of every sequence")
    ap.add_argument("--jax", nargs="*", default=None, metavar="EMISSION",
                    help="also the JAX peer (peer_jax_hmm.py) of these emissions (none named: "
                         "categorical)")
    ap.add_argument("--jax-python", default=sys.executable,
                    help="the Python that runs the JAX peer (default: this one)")
    ap.add_argument("--jax-chunk", type=int, default=0,
                    help="datasets per JAX call (0: all, halved while the device runs out)")
    ap.add_argument("--jax-repeat", type=int, default=2)
    ap.add_argument("--grid", nargs="*", default=[], metavar="NAME=V1;V2",
                    help="CUDA float64 with each value of a Tuning field (NAME=V1;V2, Python "
                         "literals; old upper-case config names accepted)")
    args = ap.parse_args()
    args.jax = [] if args.jax is None else (args.jax or ["categorical"])
    unknown = sorted(set(args.jax) - set(args.emissions))
    if unknown:
        ap.error(f"--jax {' '.join(unknown)}: not among --emissions {' '.join(args.emissions)}")
    variants = grid_variants(args.grid)  # (a bad name fails now, not after the runs)
    from bulkem.engines.cuda import available

    gpu, name = available()
    cores = os.cpu_count() or 1
    print(f"# {datetime.date.today()}  cpu cores {cores}  gpu {name if gpu else 'none'}"
          f"  {args.datasets} datasets x {N_SEQ} sequences, N={N_STATES}, {args.starts} starts, "
          f"{args.iters} iterations, tol=0; emissions {' '.join(args.emissions)}")
    results = {e: measure(e, args, gpu, variants) for e in args.emissions}
    summary(results, args, cores)
    for r in results.values():
        for note in r["notes"]:
            print(f"# {note}")


if __name__ == "__main__":
    main()
