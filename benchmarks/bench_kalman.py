"""Kalman marginal likelihoods: many series, one long series, and the paper's Figures 5-6.

Three measurements, each beside its baseline in the same run (best of a
few repeats, compilation excluded by a warm-up call of the same shapes):

(a) ``--n-series`` AR(10) series x ``--n-steps`` steps (issue: 100,000 x
    1,000), exact log-likelihood: bulkem on the CPU cores and, when a GPU is
    usable, on the GPU (end to end through ``kalman_loglik``, and the engine
    alone on the packed batch: data already on the GPU), beside simdkalman
    (vectorised NumPy) on ``--simd-sample`` series and statsmodels' SARIMAX on
    ``--sm-sample`` series in a process pool of one worker per core, one BLAS
    thread each (``baselines.py``; its one-core rate printed beside); the
    baselines' rates are per series, so the ratio compares throughput.
    "shared" is the default path (series of one model without missing values
    share the covariance recursion);
    "per-series" forces every series through the full filter (the path of
    series with missing values).
(b) One long series (``--long-steps``, issue: 10^6) of a 2-D random walk and
    of AR(10): ``scan`` (the steady-state scan, and the full one) and ``splash``
    (window 10 / 11) on the CPU cores and the GPU against the sequential filter
    on one CPU core, with the splash error.
(c) The paper's Figures 5-6: seconds per series against the series length
    (``--lengths``, 32 .. 4,096) for a 2-D and a 10-D random walk and AR(10)
    with and without a missing observation every 20 steps (sequential on one
    core, scan and splash on the CPU cores and the GPU); and the splash
    error against the window (1 .. 20) for the random walk and AR(10).

    python benchmarks/bench_kalman.py                       # the issue's sizes
    python benchmarks/bench_kalman.py --n-series 5000 --long-steps 100000 \
        --lengths 32,256,4096                                # smaller, for a CPU
    python benchmarks/bench_kalman.py --sections a          # one section
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
import warnings

import numpy as np

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")  # small grids are by design

import numba  # noqa: E402

import bulkem  # noqa: E402
from bulkem import StateSpace  # noqa: E402
from bulkem.engines.cpu import kalman as kalman_cpu  # noqa: E402
from bulkem.models.ssm.linear import pack_series  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from baselines import rates  # noqa: E402

# An AR(10) with all roots inside the unit circle (the paper's background-noise model).
AR10_ROOTS = [0.9, -0.8, 0.7, -0.6, 0.5, -0.4, 0.3, -0.2, 0.1, 0.05]
AR10_PHI = -np.poly(AR10_ROOTS)[1:]
SPLASH_WINDOW = {"rw": 10, "ar": 11}  # the paper's choices


def ar10(obs_var: float = 0.1) -> StateSpace:
    return StateSpace.ar(AR10_PHI, sigma2=1.0, obs_var=obs_var)


def simulate_ar(model: StateSpace, n_series: int, n_steps: int, seed: int) -> np.ndarray:
    """(n_series, n_steps) draws of an AR(p) + noise model from its stationary law."""
    from scipy.signal import lfilter, lfiltic

    rng = np.random.default_rng(seed)
    p = model.dim_state
    phi = model.F[0]
    x = rng.multivariate_normal(model.m0, model.P0, size=n_series, method="cholesky")
    sd, obs_sd = np.sqrt(model.Q[0, 0]), np.sqrt(model.R[0, 0])
    a = np.r_[1.0, -phi]
    if n_series == 1:  # one long series: the recursion in scipy's compiled filter
        e = sd * rng.standard_normal(n_steps)
        z = np.empty(n_steps)
        z[0] = x[0, 0]  # the state (z_1, z_0, ..., z_{2-p}): newest first, as lfiltic wants
        z[1:] = lfilter([1.0], a, e[1:], zi=lfiltic([1.0], a, x[0]))[0]
        return (z + obs_sd * rng.standard_normal(n_steps))[None, :]
    y = np.empty((n_series, n_steps))
    for t in range(n_steps):  # vectorised over series
        y[:, t] = x[:, 0] + obs_sd * rng.standard_normal(n_series)
        new = x @ phi + sd * rng.standard_normal(n_series)
        x[:, 1:] = x[:, :p - 1]
        x[:, 0] = new
    return y


def simulate_rw(model: StateSpace, n_steps: int, seed: int) -> np.ndarray:
    """(n_steps, dim) draws of a random walk observed with noise (cumulative sums)."""
    rng = np.random.default_rng(seed)
    d = model.dim_state
    x0 = rng.multivariate_normal(model.m0, model.P0, method="cholesky")
    steps = rng.multivariate_normal(np.zeros(d), model.Q, size=n_steps - 1, method="cholesky")
    x = x0 + np.vstack([np.zeros(d), np.cumsum(steps, axis=0)])
    return x + rng.multivariate_normal(np.zeros(d), model.R, size=n_steps, method="cholesky")


def best_of(fn, repeat: int = 3, budget: float = 20.0):
    """Best wall time of up to ``repeat`` calls (fewer when one call eats the budget)."""
    best, out, spent = np.inf, None, 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
        if spent > budget:
            break
    return best, out


def one_core(fn):
    """``fn`` run with one Numba thread (no parallel region waiting for idle threads)."""

    def run():
        before = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return fn()
        finally:
            numba.set_num_threads(before)

    return run


def gpu_status() -> tuple[bool, str]:
    from bulkem.engines import cuda

    return cuda.available()


def row(*cells, widths=(48, 12, 14, 14, 14)):
    out = []
    for c, w in zip(cells, widths, strict=False):
        out.append(f"{c:<{w}}" if isinstance(c, str) else f"{c:>{w}}")
    print("  ".join(out), flush=True)


def fmt_s(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def pack(ys, model, dtype="float64"):
    """Series -> the engines' packed batch (host)."""
    pairs = [(k, np.asarray(y, float).reshape(len(y), -1)) for k, y in enumerate(ys)]
    return pack_series(pairs, [model], True, np.dtype(dtype))[0]


# --- (a) -------------------------------------------------------------------------------


def section_a(args, gpu: bool) -> None:
    n, T = args.n_series, args.n_steps
    print(f"\n(a) {n:,} AR(10) + noise series x {T:,} steps, exact log-likelihood "
          f"(CPU threads: {numba.get_num_threads()})")
    model = ar10()
    y = simulate_ar(model, n, T, seed=1)  # (n, T)
    ys = list(y)
    row("what", "time", "series/s", "vs simdkalman", "vs statsmodels")
    # baselines on samples
    k_simd = min(args.simd_sample, n)
    try:
        t_simd, ll_simd = best_of(lambda: simdkalman_loglik(y[:k_simd], model), repeat=2)
        rate_simd = k_simd / t_simd
    except ImportError:  # a pure-Python package: carry its wheel to a machine without it
        t_simd, ll_simd, rate_simd = np.nan, None, np.nan
    k_sm = min(args.sm_sample, n)
    rate_sm, core_sm, workers, ll_sm = rates(_statsmodels_one, [(y, model) for y in ys[:k_sm]])
    ll_sm = np.array(ll_sm)

    def show(what, seconds, count, ll=None):
        rate = count / seconds
        row(what, fmt_s(seconds), f"{rate:,.0f}", f"{rate / rate_simd:.2f}x",
            f"{rate / rate_sm:,.0f}x")
        if ll is not None:
            check(what, ll)

    def check(what, ll):
        k = min(k_sm, len(ll))
        rel = np.max(np.abs(ll[:k] - ll_sm[:k]) / np.abs(ll_sm[:k]))
        rel_simd = (0.0 if ll_simd is None
                    else np.max(np.abs(ll[:k_simd] - ll_simd) / np.abs(ll_simd)))
        if rel > 1e-8:
            print(f"   !! {what}: differs from statsmodels by {rel:.2e} (relative)")
        if rel_simd > 1e-6:
            print(f"   !! {what}: differs from simdkalman by {rel_simd:.2e} (relative)")

    if ll_simd is None:
        row("simdkalman", "not installed (pip install simdkalman)", "", "")
    else:
        show(f"simdkalman, {k_simd:,} series (vectorised NumPy)", t_simd, k_simd)
    show(f"statsmodels SARIMAX, {k_sm} series, pool of {workers}", k_sm / rate_sm, k_sm)
    show("statsmodels SARIMAX, one core (1 BLAS thread)", 1 / core_sm, 1)
    # bulkem CPU
    small = pack(ys[:4], model)
    kalman_cpu.exact(small)
    kalman_cpu.exact(small, shared=False)
    bulkem.kalman_loglik(ys[:4], model, backend="cpu")
    t, out = best_of(lambda: bulkem.kalman_loglik(ys, model, backend="cpu"), repeat=1)
    show("bulkem CPU, end to end (kalman_loglik)", t, n, out.loglik.to_numpy())
    t, out = best_of(lambda: bulkem.kalman_loglik(y, model, backend="cpu"), repeat=2)
    show("bulkem CPU, end to end from one (n, T) array", t, n, out.loglik.to_numpy())
    batch = pack(ys, model)
    t, out = best_of(lambda: kalman_cpu.exact(batch))
    show("bulkem CPU engine, shared gains", t, n, out.loglik)
    t, out = best_of(lambda: kalman_cpu.exact(batch, shared=False), repeat=2)
    show("bulkem CPU engine, per-series covariances", t, n, out.loglik)
    batch32 = pack(ys, model, "float32")
    kalman_cpu.exact(pack(ys[:4], model, "float32"))
    t, out = best_of(lambda: kalman_cpu.exact(batch32))
    show("bulkem CPU engine, shared gains, float32", t, n)
    if not gpu:
        row("bulkem GPU", "not measured yet (no usable GPU)", "", "")
        return
    from bulkem.engines.cuda import kalman as kalman_cuda

    kalman_cuda.exact(small)
    kalman_cuda.exact(small, shared=False)
    bulkem.kalman_loglik(ys[:4], model, backend="cuda")
    t, out = best_of(lambda: bulkem.kalman_loglik(ys, model, backend="cuda"), repeat=1)
    show("bulkem GPU, end to end (kalman_loglik)", t, n, out.loglik.to_numpy())
    t, out = best_of(lambda: bulkem.kalman_loglik(y, model, backend="cuda"), repeat=3)
    show("bulkem GPU, end to end from one (n, T) array", t, n, out.loglik.to_numpy())
    t, out = best_of(lambda: kalman_cuda.exact(batch))
    show("bulkem GPU engine, host batch (copies included)", t, n, out.loglik)
    dev = kalman_cuda.to_device(batch)
    t, out = best_of(lambda: kalman_cuda.exact(batch, dev=dev), repeat=5)
    show("bulkem GPU engine, data on GPU, shared gains", t, n, out.loglik)
    t, out = best_of(lambda: kalman_cuda.exact(batch, dev=dev, shared=False), repeat=3)
    show("bulkem GPU engine, data on GPU, per-series cov.", t, n, out.loglik)
    kalman_cuda.exact(pack(ys[:4], model, "float32"))
    kalman_cuda.exact(pack(ys[:4], model, "float32"), shared=False)
    dev32 = kalman_cuda.to_device(batch32)
    t, _ = best_of(lambda: kalman_cuda.exact(batch32, dev=dev32), repeat=5)
    show("bulkem GPU engine, data on GPU, shared, float32", t, n)
    t, _ = best_of(lambda: kalman_cuda.exact(batch32, dev=dev32, shared=False), repeat=3)
    show("bulkem GPU engine, data on GPU, per-series, f32", t, n)


def simdkalman_loglik(y: np.ndarray, model: StateSpace) -> np.ndarray:
    import simdkalman

    kf = simdkalman.KalmanFilter(state_transition=model.F, process_noise=model.Q,
                                 observation_model=model.H, observation_noise=model.R)
    res = kf.compute(y, 0, initial_value=model.m0, initial_covariance=model.P0, smoothed=False,
                     filtered=False, states=False, covariances=False, observations=False,
                     log_likelihood=True)
    # simdkalman leaves out the constant -1/2 log(2 pi) of each observed value
    n_obs = np.sum(~np.isnan(y), axis=-1)
    return np.asarray(res.log_likelihood) - 0.5 * np.log(2 * np.pi) * n_obs


def _statsmodels_one(job) -> float:
    """statsmodels' log-likelihood of one series (a pool worker's job)."""
    y, model = job
    return float(statsmodels_loglik([y], model)[0])


def statsmodels_loglik(ys, model: StateSpace) -> np.ndarray:
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    phi = model.F[0]
    params = np.r_[phi, model.R[0, 0], model.Q[0, 0]]
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for y in ys:  # SARIMAX's stationary prior: the same law as ar10()'s
            mod = SARIMAX(y, order=(len(phi), 0, 0), trend="n", measurement_error=True)
            out.append(mod.loglike(params))
    return np.array(out)


# --- (b) -------------------------------------------------------------------------------


def long_models():
    return {"RW 2-D": ("rw", StateSpace.random_walk(2, q=0.1, r=1.0)),
            "AR(10)": ("ar", ar10())}


def section_b(args, gpu: bool) -> None:
    T = args.long_steps
    print(f"\n(b) one long series of {T:,} steps (CPU threads: {numba.get_num_threads()})")
    row("what", "time", "vs 1 core seq.", "splash error")
    for name, (kind, model) in long_models().items():
        y = simulate_rw(model, T, 2) if kind == "rw" else simulate_ar(model, 1, T, 2)[0]
        batch = pack([y], model)
        w = SPLASH_WINDOW[kind]
        kalman_cpu.exact(pack([y[:50]], model))
        kalman_cpu.scan(pack([y[:5000]], model))
        kalman_cpu.splash(pack([y[:50]], model), w, 1e6)
        t_seq, ref = best_of(one_core(lambda b=batch: kalman_cpu.exact(b)), repeat=2)
        exact_ll = ref.loglik[0]
        row(f"{name}: sequential filter, 1 CPU core", fmt_s(t_seq), "1.0x", "")
        t, out = best_of(lambda b=batch: kalman_cpu.scan(b), repeat=2)
        row(f"{name}: scan (steady state), CPU cores", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.2e}")
        t, out = best_of(lambda b=batch: kalman_cpu.scan(b, shared=False), repeat=2)
        row("  ... full scan (covariances in every element)", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.2e}")
        t, out = best_of(lambda b=batch, w=w: kalman_cpu.splash(b, w, 1e6), repeat=2)
        row(f"{name}: splash (window {w}), CPU cores", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.3g}")
        t, out = best_of(lambda b=batch, w=w: kalman_cpu.splash(b, w, 1e6, shared=False),
                         repeat=2)
        row("  ... every window its own covariances", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.3g}")
        if not gpu:
            row(f"{name}: scan / splash on the GPU", "not measured yet (no usable GPU)", "", "")
            continue
        from bulkem.engines.cuda import kalman as kalman_cuda

        small = pack([y[:5000]], model)
        kalman_cuda.scan(small)
        kalman_cuda.scan(small, shared=False)
        kalman_cuda.splash(small, w, 1e6)
        dev = kalman_cuda.to_device(batch)
        t, out = best_of(lambda b=batch, d=dev: kalman_cuda.scan(b, dev=d), repeat=5)
        row(f"{name}: scan (steady state), GPU, data there", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.2e}")
        t, out = best_of(lambda b=batch: kalman_cuda.scan(b), repeat=3)
        row("  ... whole call (copy, gains, plan)", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.2e}")
        for c0, c in ((32, 32), (64, 16), (128, 32), (256, 32), (512, 32)):  # chunks tried
            t, out = best_of(lambda b=batch, d=dev, c0=c0, c=c: kalman_cuda.scan(
                b, chunk0=c0, chunk=c, dev=d), repeat=3)
            row(f"  ... chunks of {c0} steps, {c} elements", fmt_s(t), f"{t_seq / t:.1f}x",
                f"{out.loglik[0] - exact_ll:+.2e}")
        t, out = best_of(lambda b=batch, d=dev: kalman_cuda.scan(b, dev=d, shared=False),
                         repeat=3)
        row("  ... full scan (covariances in every element)", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.2e}")
        t, out = best_of(lambda b=batch, d=dev, w=w: kalman_cuda.splash(b, w, 1e6, dev=d),
                         repeat=5)
        row(f"{name}: splash (window {w}), GPU, data there", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.3g}")
        t, out = best_of(lambda b=batch, d=dev, w=w: kalman_cuda.splash(b, w, 1e6, dev=d,
                                                                      shared=False), repeat=3)
        row("  ... every window its own covariances", fmt_s(t), f"{t_seq / t:.1f}x",
            f"{out.loglik[0] - exact_ll:+.3g}")
        t, out = best_of(lambda b=batch: kalman_cuda.exact(b), repeat=1)  # slow: one thread
        row(f"{name}: sequential filter, 1 GPU thread", fmt_s(t), f"{t_seq / t:.2f}x",
            f"{out.loglik[0] - exact_ll:+.2e}")


# --- (c) -------------------------------------------------------------------------------


def fig_models():
    return {"RW 2-D": ("rw", StateSpace.random_walk(2, q=0.1, r=1.0)),
            "RW 10-D": ("rw", StateSpace.random_walk(10, q=0.1, r=1.0)),
            "AR(10)": ("ar", ar10()),
            "AR(10), missing 1/20": ("ar", ar10())}


def _call(engine: str, method: str, batch, window: int):
    """A call of one engine's method on ``batch`` (the CPU's sequential one on one core)."""
    mod = kalman_cpu
    if engine == "cuda":
        from bulkem.engines.cuda import kalman as mod
    if method.endswith("seq."):
        fn = one_core if engine == "cpu" else (lambda f: f)
        return fn(lambda: mod.exact(batch, shared=False))
    if method == "scan":
        return lambda: mod.scan(batch)
    return lambda: mod.splash(batch, window, 1e6)


def section_c(args, gpu: bool) -> None:
    lengths = [int(v) for v in args.lengths.split(",")]
    print("\n(c) Figure 5: seconds per series against its length (one series per call)")
    engines = [("cpu", "1-core seq."), ("cpu", "scan"), ("cpu", "splash")]
    if gpu:
        engines += [("cuda", "seq."), ("cuda", "scan"), ("cuda", "splash")]
    head = ["model", "T"] + [f"{'CPU' if e == 'cpu' else 'GPU'} {m}" for e, m in engines]
    print("  ".join(f"{h:<22}" if i == 0 else f"{h:>14}" for i, h in enumerate(head)))
    for name, (kind, model) in fig_models().items():
        w = SPLASH_WINDOW[kind]
        y_all = (simulate_rw(model, max(lengths), 3) if kind == "rw"
                 else simulate_ar(model, 1, max(lengths), 3)[0])
        if "missing" in name:
            y_all = y_all.copy()
            y_all[::20] = np.nan
        for T in lengths:
            batch = pack([y_all[:T]], model)
            cells = []
            for eng, meth in engines:
                fn = _call(eng, meth, batch, w)
                fn()  # warm-up (compiles at the first length)
                t, _ = best_of(fn, repeat=5, budget=2.0)
                cells.append(fmt_s(t))
            print("  ".join([f"{name:<22}", f"{T:>14}"] + [f"{c:>14}" for c in cells]),
                  flush=True)
    print("\n(c) Figure 6: splash error |splash - exact| against the window "
          f"(T = {args.error_steps:,}, CPU engine)")
    models = {"RW 2-D": fig_models()["RW 2-D"], "AR(10)": fig_models()["AR(10)"]}
    print(f"{'window':>8}" + "".join(f"{name + ' abs.':>18}{name + ' rel.':>16}"
                                       for name in models))
    data = {}
    for name, (kind, model) in models.items():
        y = (simulate_rw(model, args.error_steps, 4) if kind == "rw"
             else simulate_ar(model, 1, args.error_steps, 4)[0])
        batch = pack([y], model)
        data[name] = (batch, kalman_cpu.exact(batch).loglik[0])
    for w in range(1, 21):
        cells = []
        for name in models:
            batch, exact_ll = data[name]
            err = abs(kalman_cpu.splash(batch, w, 1e6).loglik[0] - exact_ll)
            cells.append(f"{err:>18.3e}{err / abs(exact_ll):>16.2e}")
        print(f"{w:>8}" + "".join(cells), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="abc", help="which of a, b, c to run (default abc)")
    ap.add_argument("--n-series", type=int, default=100_000)
    ap.add_argument("--n-steps", type=int, default=1_000)
    ap.add_argument("--simd-sample", type=int, default=2_000,
                    help="series given to simdkalman (its rate is per series)")
    ap.add_argument("--sm-sample", type=int, default=128,
                    help="series of the statsmodels pool")
    ap.add_argument("--long-steps", type=int, default=1_000_000)
    ap.add_argument("--lengths", default="32,64,128,256,512,1024,2048,4096")
    ap.add_argument("--error-steps", type=int, default=4096)
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu"],
                    help="cpu: skip the GPU rows even when a GPU is usable")
    args = ap.parse_args()
    gpu, found = gpu_status() if args.backend == "auto" else (False, "skipped (--backend cpu)")
    print(f"bench_kalman  {datetime.datetime.now():%Y-%m-%d %H:%M}  {platform.node()}  "
          f"{platform.processor() or platform.machine()}  numba {numba.__version__}  "
          f"GPU: {found}")
    if "a" in args.sections:
        section_a(args, gpu)
    if "b" in args.sections:
        section_b(args, gpu)
    if "c" in args.sections:
        section_c(args, gpu)


if __name__ == "__main__":
    main()
