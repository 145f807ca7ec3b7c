"""Where the GPU's exact Kalman likelihood of many series spends its time, phase by phase.

    PYTHONPATH=. python3 benchmarks/profile_kalman_gpu.py [--n-series 100000] [--n-steps 1000]

On the batch of ``bench_kalman.py`` (a), with the data already on the GPU: the
whole ``kalman_cuda.exact`` call, then its phases one by one (each synchronised):
the choice of sharing series, the shared covariance recursion on the host,
the small copies, the shared-gains kernel (several block sizes) and the
copy back; and the kernels' registers and local memory per thread.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_kalman import ar10, long_models, pack, simulate_ar, simulate_rw
from numba import cuda

from bulkem import config
from bulkem.engines import kalman_cpu, kalman_cuda
from bulkem.models.ssm.plan import shared_series


def timed(fn, repeat=5):
    """Best wall time of ``fn()`` over ``repeat`` calls, the GPU synchronised around each."""
    best = np.inf
    out = None
    for _ in range(repeat):
        cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-series", type=int, default=100_000)
    ap.add_argument("--n-steps", type=int, default=1000)
    ap.add_argument("--long-steps", type=int, default=1_000_000)
    args = ap.parse_args()
    splash_profile(args.long_steps)
    model = ar10()
    y = simulate_ar(model, args.n_series, args.n_steps, seed=1)
    for dtype in ("float64", "float32"):
        profile(y, model, dtype, args.n_steps)


def splash_profile(n_steps: int) -> None:
    """The splash approximation of one long series: wall time and where the host time goes."""
    import cProfile
    import pstats

    for name, (kind, model) in long_models().items():
        y = simulate_rw(model, n_steps, 2) if kind == "rw" else simulate_ar(model, 1, n_steps, 2)[0]
        batch = pack([y], model)
        dev = kalman_cuda.to_device(batch)
        w = {"rw": 10, "ar": 11}[kind]
        kalman_cuda.splash(batch, w, 1e6, dev=dev)
        t, _ = timed(lambda b=batch, d=dev, w=w: kalman_cuda.splash(b, w, 1e6, dev=d), repeat=10)
        print(f"\n# {name}: splash (window {w}) of {n_steps:,} steps, data on the GPU: "
              f"{t * 1e3:.3f} ms (best of 10)")
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            kalman_cuda.splash(batch, w, 1e6, dev=dev)
        cuda.synchronize()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(12)


def profile(y, model, dtype: str, n_steps: int) -> None:
    """The phases of one dtype."""
    batch = pack(list(y), model, dtype)
    md = batch.models
    dev = kalman_cuda.to_device(batch)
    kalman_cuda.exact(pack(list(y[:4]), model, dtype))  # compile
    print(f"\n# {dtype}: {batch.n_series:,} AR(10) series x {n_steps:,} steps, "
          "data on the GPU (best of 5, ms)")
    t, _ = timed(lambda: kalman_cuda.exact(batch, dev=dev))
    print(f"whole exact() call                 {t * 1e3:9.3f}")
    t, sel = timed(lambda: shared_series(batch, None, 2))
    print(f"  shared_series                    {t * 1e3:9.3f}")
    Ws = np.empty(n_steps * md.nx * md.ny, batch.y.dtype)
    Ls = np.empty(n_steps * md.ny * md.ny, batch.y.dtype)
    logdets = np.empty(n_steps)
    t, _ = timed(lambda: kalman_cpu.gains(batch, n_steps, Ws, Ls, logdets))
    print(f"  gains on the host                {t * 1e3:9.3f}")
    t, _ = timed(lambda: np.setdiff1d(np.arange(batch.n_series), sel))
    print(f"  (np.setdiff1d, the old way to the rest) {t * 1e3:9.3f}")

    def small():
        ints = cuda.to_device(np.stack([sel, batch.offsets[sel], batch.lengths[sel]]))
        return ints, cuda.to_device(np.concatenate([Ws, Ls])), cuda.to_device(logdets)
    t, (ints, gains_d, ld_d) = timed(small)
    print(f"  three small to_device copies     {t * 1e3:9.3f}")
    p = kalman_cuda._programs(md.nx, md.ny, md.kind, batch.y.dtype)
    ll = cuda.device_array(batch.n_series)
    nobs = cuda.device_array(batch.n_series, np.int64)
    k = p["exact_shared"]
    nw = len(Ws)
    for threads in (64, 128, 256):
        g = (-(-len(sel) // threads), threads)
        t, _ = timed(lambda g=g: k[g](dev.y, ints[1], ints[2], 1, ints[0], dev.F[0], dev.H[0],
                                      dev.m0[0], gains_d[:nw], gains_d[nw:], ld_d, ll, nobs))
        print(f"  shared kernel, {threads:>3} threads per block  {t * 1e3:9.3f}")
    t, _ = timed(lambda: (ll.copy_to_host(), nobs.copy_to_host()))
    print(f"  copies back                      {t * 1e3:9.3f}")
    for name in ("exact_shared", "exact"):
        for cres in p[name].overloads.values():
            print(f"  {name}: {getattr(cres, 'regs_per_thread', '?')} registers, "
                  f"{getattr(cres, 'local_mem_per_thread', '?')} bytes local memory per thread")
    print(f"  (config.KALMAN_CUDA_THREADS = {config.KALMAN_CUDA_THREADS})")


if __name__ == "__main__":
    main()
