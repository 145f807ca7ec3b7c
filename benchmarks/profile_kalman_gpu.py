"""Where the GPU's exact Kalman likelihood of many series spends its time, phase by phase.

    PYTHONPATH=. python3 benchmarks/profile_kalman_gpu.py [--n-series 100000] [--n-steps 1000]

On the batch of ``bench_kalman.py`` (a), with the data already on the GPU: the
whole ``kalman_cuda.exact`` call, then its phases one by one (each synchronised):
the choice of sharing series, the shared covariance recursion on the host,
the small copies, the time-major copy, the shared-gains kernel (time-major
and series-major, several block sizes) and the copy back; and the kernels'
registers and local memory per thread.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_kalman import ar10, pack, simulate_ar
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
    args = ap.parse_args()
    model = ar10()
    y = simulate_ar(model, args.n_series, args.n_steps, seed=1)
    for dtype in ("float64", "float32"):
        profile(y, model, dtype, args.n_steps)


def profile(y, model, dtype: str, n_steps: int) -> None:
    """The phases of one dtype."""
    batch = pack(list(y), model, dtype)
    md = batch.models
    dev = kalman_cuda.to_device(batch)
    kalman_cuda.exact(pack(list(y[:4]), model, dtype))  # compile
    kalman_cuda.exact(pack(list(y[:4]), model, dtype), time_major=False)
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
    print(f"  setdiff1d                        {t * 1e3:9.3f}")

    def small():
        return [cuda.to_device(a) for a in (sel, np.arange(len(sel)), batch.lengths[sel],
                                            Ws, Ls, logdets)]
    t, (sel_d, start_d, len_d, Ws_d, Ls_d, ld_d) = timed(small)
    print(f"  six small to_device copies       {t * 1e3:9.3f}")
    p = kalman_cuda._programs(md.nx, md.ny, md.kind, batch.y.dtype)
    y_tm = cuda.device_array(len(sel) * n_steps * md.ny, batch.y.dtype)
    grid = kalman_cuda._grid(len(y_tm))
    t, _ = timed(lambda: p["time_major"][grid](dev.y, dev.offsets, sel_d, n_steps, y_tm))
    print(f"  time-major copy kernel           {t * 1e3:9.3f}")
    ll = cuda.device_array(batch.n_series)
    nobs = cuda.device_array(batch.n_series, np.int64)
    k = p["exact_shared"]
    for threads in (64, 128, 256):
        g = (-(-len(sel) // threads), threads)
        t, _ = timed(lambda g=g: k[g](y_tm, start_d, len_d, len(sel), sel_d, dev.F[0],
                                      dev.H[0], dev.m0[0], Ws_d, Ls_d, ld_d, ll, nobs))
        print(f"  shared kernel, time-major, {threads:>3} threads per block  {t * 1e3:9.3f}")
    offs_d = cuda.to_device(batch.offsets[sel])
    g = kalman_cuda._grid(len(sel))
    t, _ = timed(lambda: k[g](dev.y, offs_d, len_d, 1, sel_d, dev.F[0], dev.H[0], dev.m0[0],
                              Ws_d, Ls_d, ld_d, ll, nobs))
    print(f"  shared kernel, series-major      {t * 1e3:9.3f}")
    t, _ = timed(lambda: (ll.copy_to_host(), nobs.copy_to_host()))
    print(f"  copies back                      {t * 1e3:9.3f}")
    for name in ("exact_shared", "exact", "time_major"):
        kern = p[name]
        for sig in kern.overloads:
            print(f"  {name}: {kern.get_regs_per_thread(sig)} registers, "
                  f"{kern.get_local_mem_per_thread(sig)} bytes local memory per thread")
    print(f"  (config.KALMAN_CUDA_THREADS = {config.KALMAN_CUDA_THREADS})")


if __name__ == "__main__":
    main()
