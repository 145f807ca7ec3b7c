"""Bulk inverse-Gaussian fits: fits/s of the CPU and CUDA engines, side by side.

Times ``bulkem.fit`` end to end (start generation, packing, transfers and
tables included; compilation excluded by a warm-up fit), on the same batch,
CPU engine on every core and CUDA engine, checks that the two agree, and
prints a table.

    python benchmarks/bench_invgauss.py --datasets 100 --obs 2000 --starts 100 --iters 100
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import numpy as np

import bulkem
from bulkem.api import resolve_backend


def timed_fit(data, backend, args, dtype="float64", repeat=1):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = bulkem.fit(data, n_components=2, n_starts=args.starts, max_iter=args.iters, tol=0.0,
                         accel=False,
                         seed=args.seed, backend=backend, dtype=dtype, progress=False)
        dt = time.perf_counter() - t0
        if best is None or dt < best[0]:
            best = (dt, res)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=100)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=100)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpu-datasets", type=int, default=None,
                    help="time the CPU on this many datasets only (it is slow); fits/s compare")
    ap.add_argument("--float32", action="store_true", help="also time dtype='float32' on CUDA")
    args = ap.parse_args()

    data = bulkem.datasets.simulate_demo(args.datasets, args.obs, seed=args.seed)
    n_fits = args.datasets * args.starts
    small = data[:2]
    rows = []
    gpu = resolve_backend("auto") == "cuda"
    if gpu:
        bulkem.fit(small, n_starts=2, max_iter=2, seed=1, backend="cuda")  # compile
        dt, gres = timed_fit(data, "cuda", args, repeat=args.repeat)
        rows.append(("cuda float64", n_fits, dt, n_fits / dt))
        if args.float32:
            bulkem.fit(small, n_starts=2, max_iter=2, seed=1, backend="cuda", dtype="float32")
            dt32, gres32 = timed_fit(data, "cuda", args, dtype="float32", repeat=args.repeat)
            rows.append(("cuda float32", n_fits, dt32, n_fits / dt32))
    bulkem.fit(small, n_starts=2, max_iter=2, seed=1, backend="cpu")  # compile
    cpu_data = data[: args.cpu_datasets] if args.cpu_datasets else data
    dt_cpu, cres = timed_fit(cpu_data, "cpu", args, repeat=1)
    n_cpu = len(cpu_data) * args.starts
    rows.append(("cpu float64", n_cpu, dt_cpu, n_cpu / dt_cpu))

    print(f"# {datetime.date.today()}  {platform.node()}  cpu cores: {os.cpu_count()}  "
          f"batch: {args.datasets} datasets x {args.obs} values x {args.starts} starts, "
          f"{args.iters} iterations (tol=0)")
    if gpu:
        from numba import cuda
        print(f"# gpu: {cuda.get_current_device().name}")
        g = gres.starts["loglik"].to_numpy()[:n_cpu]
        c = cres.starts["loglik"].to_numpy()
        rel = np.abs(g - c) / np.abs(c)
        same = gres.starts["status"].to_numpy()[:n_cpu] == cres.starts["status"].to_numpy()
        print(f"# cpu vs cuda float64 loglik: max rel diff {np.nanmax(rel):.2e}, "
              f"same status {np.mean(same):.4f}")
        if args.float32:
            g32 = gres32.starts["loglik"].to_numpy()
            g64 = gres.starts["loglik"].to_numpy()
            r32 = np.abs(g32 - g64) / np.abs(g64)
            q = np.nanquantile(r32, [0.5, 0.99, 0.999, 1.0])
            print(f"# float32 vs float64 rel loglik diff: median {q[0]:.1e} p99 {q[1]:.1e} "
                  f"p99.9 {q[2]:.1e} max {q[3]:.1e}; share < 1e-6: {np.mean(r32 < 1e-6):.5f}")
    print(f"{'engine':<14}{'fits':>10}{'seconds':>10}{'fits/s':>14}{'vs cpu':>9}")
    base = rows[-1][3]
    for name, n, dt, rate in rows:
        print(f"{name:<14}{n:>10}{dt:>10.3f}{rate:>14,.0f}{rate / base:>9.1f}")


if __name__ == "__main__":
    main()
