"""Where the CUDA engine's time goes on the issue-4 batch: host phases, copies, kernel.

    python benchmarks/profile_engine.py [--datasets 100] [--starts 1000]

Builds the job as ``bulkem.fit`` does, then times, for float64 and float32:
the job (dataset keys and features), the starts (on all cores), one
whole-batch launch split into packing, host-to-device copies, the kernel
alone (CUDA events) and device-to-host copies, the scheduler's run (starts
drawn and packed chunk by chunk, streams, threads), the tables' parts that
need the starts only (``FitResult.before_fits``, which ``bulkem.fit`` builds
while the GPU runs) and the other tables.  ``--set NAME=VALUE`` changes a field of
the :class:`bulkem.tuning.Tuning` it all runs with (the model's ``tuning``; ``NAME`` the
field or its old ``bulkem.config`` name in upper case, ``tuning_args.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import numpy as np
from numba import cuda

import bulkem
from bulkem import api, models
from bulkem.engines.cuda import bulk, scheduler
from bulkem.kernels.fastmath import EXP_CONSTS
from bulkem.result import MixtureResult
from bulkem.tuning import DEFAULT, Tuning

sys.path.insert(0, os.path.dirname(__file__))
from tuning_args import from_items  # noqa: E402


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def profile(data, args, dtype: str, tuning: Tuning = DEFAULT) -> None:
    fam = models.get("invgauss")
    bulkem.fit(data[:2], n_starts=2, max_iter=2, tol=0.0, accel=False, backend="cuda", dtype=dtype,
               tuning=tuning)  # compile
    t0 = time.perf_counter()
    pairs = fam.read(data, "dataset", "value", {})
    model = dataclasses.replace(fam.model(pairs, 2, {}), tuning=tuning)
    packed = model.pack(pairs)
    t_data = ms(t0)
    t0 = time.perf_counter()
    job = api.make_job(model, packed, args.starts, 1, None, np.dtype(dtype), args.iters, 0.0)
    t_job = ms(t0)
    t0 = time.perf_counter()
    job.draw_starts()
    t_starts = ms(t0)
    # one launch of the whole batch, phase by phase
    chunk = scheduler.Chunk(np.arange(len(data)), np.arange(len(job.fit_ds)), job.fit_ds.copy())
    t0 = time.perf_counter()
    scheduler.pack(job, chunk)
    t_pack = ms(t0)
    lanes = bulk.lanes_per_fit(0.0, dtype, model)
    kernel = bulk.kernel(model, np.dtype(dtype), lanes)
    stream = cuda.stream()
    t0 = time.perf_counter()
    feat, stride = chunk.data64
    dev = [cuda.to_device(a, stream=stream) for a in
           (feat, chunk.offsets, chunk.fit_ds, chunk.const, job.init[chunk.fits],
            feat.astype(dtype))]
    n = len(chunk.fits)
    status = cuda.to_device(np.full(n, -1, np.int32), stream=stream)
    n_iter = cuda.device_array(n, np.int32, stream=stream)
    loglik = cuda.device_array(n, np.float64, stream=stream)
    stream.synchronize()
    t_h2d = ms(t0)
    feat64, offsets, fit_ds, const, params, feat = dev
    fpb = bulk._fits_per_block(lanes, tuning)
    start, stop = cuda.event(), cuda.event()
    t0 = time.perf_counter()
    start.record(stream)
    kernel[(n + fpb - 1) // fpb, bulk._block_threads(lanes, tuning), stream](
        (feat, stride), (feat64, stride), offsets, fit_ds, const, params, status, n_iter, loglik,
        EXP_CONSTS, job.max_iter, job.tol, job.drop_rtol, job.reg,
        cuda.device_array(0, np.int64), cuda.device_array(0, np.int32),  # (no refits here)
        cuda.device_array((0, 1), np.float64), cuda.device_array((n, 0), np.float64), job.accel)
    stop.record(stream)
    stop.synchronize()
    t_kernel_wall = ms(t0)
    t_kernel = start.elapsed_time(stop)
    t0 = time.perf_counter()
    _ = [a.copy_to_host(stream=stream) for a in (params, status, n_iter, loglik)]
    stream.synchronize()
    t_d2h = ms(t0)
    # the scheduler's whole run, then the tables
    job2 = api.make_job(model, packed, args.starts, 1, None, np.dtype(dtype), args.iters, 0.0)
    t0 = time.perf_counter()
    scheduler.run_fits(job2, bulkem.fitting.progress.Progress(False, len(job2.fit_ds)))
    t_sched = ms(t0)
    t0 = time.perf_counter()
    sv = MixtureResult.before_fits(model, packed, job2, args.starts)
    t_sv = ms(t0)
    t0 = time.perf_counter()
    MixtureResult.assemble(model, packed, job2, args.starts, 1, "cuda", dtype, 0.0, sv)
    t_tables = ms(t0)
    fits = len(job.fit_ds)
    print(f"{dtype}: data {t_data:.1f} ms | job (keys, features) {t_job:.1f} | starts (all "
          f"cores) {t_starts:.1f} | one launch: "
          f"pack {t_pack:.1f}, copies in {t_h2d:.1f}, kernel {t_kernel:.1f} "
          f"(wall {t_kernel_wall:.1f}, {fits / t_kernel * 1e3:,.0f} fits/s), copies out "
          f"{t_d2h:.1f} | scheduler run (starts, pack, copies, kernels) {t_sched:.1f} | "
          f"before_fits {t_sv:.1f} | other tables {t_tables:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=100)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a Tuning field to run with, e.g. cuda_max_registers=None (or the "
                         "old upper-case config name, CUDA_MAX_REGISTERS=None)")
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    args = ap.parse_args()
    tuning = from_items(args.set)
    data = bulkem.datasets.simulate_demo(args.datasets, args.obs, seed=1)
    for dtype in args.dtypes:
        for _ in range(2):
            profile(data, args, dtype, tuning)


if __name__ == "__main__":
    main()
