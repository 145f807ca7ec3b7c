"""When each host thread of the CUDA scheduler draws, packs, launches and waits.

    python benchmarks/trace_scheduler.py [--chunks 1 2 4] [--dtype float64]

Runs ``bulkem.fit`` on the issue-4 batch with the scheduler's steps wrapped
in timers, and prints, per run, each step's start and end (ms from the call)
by thread, so that the gaps where the GPU waits for the host show.  Each run's
settings (``--chunks``: ``Tuning.cuda_chunks_per_stream``; ``--lanes``:
``Tuning.cuda_lanes_per_fit_tol0``) are a :class:`bulkem.tuning.Tuning` passed to
``bulkem.fit``; the timers wrap functions of bulkem's modules.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import resource
import threading
import time
from collections import defaultdict

import numpy as np

import bulkem
from bulkem import api, models
from bulkem.engines import select
from bulkem.engines.cuda import buffers, scheduler
from bulkem.engines.cuda import bulk as cuda_engine
from bulkem.result import MixtureResult as FitResult
from bulkem.tuning import DEFAULT

_devicearray = cuda_engine.cuda.cudadrv.devicearray
DeviceNDArray = getattr(_devicearray, "DeviceNDArray", None) or _devicearray.FakeCUDAArray  # (sim.)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--lanes", type=int, default=None,
                    help="lanes per fit (default: Tuning.cuda_lanes_per_fit_tol0)")
    ap.add_argument("--datasets", type=int, default=100)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=100)
    args = ap.parse_args()
    base = DEFAULT
    if args.lanes:  # the runs use tol=0
        base = base.replace(cuda_lanes_per_fit_tol0={"float64": args.lanes,
                                                     "float32": args.lanes})
    data = bulkem.datasets.simulate_demo(args.datasets, args.obs, seed=1)
    kw = dict(n_starts=args.starts, max_iter=args.iters, tol=0.0,
              accel=False, seed=1, backend="cuda",
              dtype=args.dtype, progress=False)
    events: list[tuple] = []
    t_zero = [0.0]

    def wrap(obj, name, label):
        fn = getattr(obj, name)

        def inner(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                events.append((threading.current_thread().name, label, t0,
                               time.perf_counter()))
        setattr(obj, name, inner)

    wrap(api.Job, "draw_starts", "draw")
    wrap(scheduler, "pack", "pack")
    wrap(cuda_engine, "launch", "launch")
    wrap(cuda_engine, "finish", "finish")
    wrap(api, "make_job", "job")
    wrap(api, "resolve_backend", "backend")
    wrap(scheduler, "plan_chunks", "plan")
    wrap(scheduler, "_budget", "budget")
    wrap(select, "use_large", "use_large")
    wrap(cuda_engine.cuda, "device_array", "alloc")
    wrap(buffers, "take", "buffer")
    wrap(buffers, "_views", "views")
    wrap(DeviceNDArray, "copy_to_device", "h2d")
    wrap(DeviceNDArray, "copy_to_host", "d2h")
    wrap(api.Job, "kernel_data", "kernel_data")
    kernel_of = cuda_engine.kernel

    def timed_kernel(*a, **k):  # the launch itself: argument marshalling and the driver call
        kernel = kernel_of(*a, **k)

        class Timed:
            def __getitem__(self, conf):
                run = kernel[conf]

                def call(*args):
                    t0 = time.perf_counter()
                    try:
                        return run(*args)
                    finally:
                        events.append((threading.current_thread().name, "kernel", t0,
                                       time.perf_counter()))
                return call
        return Timed()
    cuda_engine.kernel = timed_kernel
    wrap(FitResult, "assemble", "tables")
    wrap(FitResult, "before_fits", "before_fits")
    for chunks in args.chunks:
        tuning = base.replace(cuda_chunks_per_stream=chunks, cuda_min_chunk_fits=4096)
        bulkem.fit(data[:2], **{**kw, "n_starts": 2, "max_iter": 2}, tuning=tuning)
        for _ in range(2):
            events.clear()
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t_zero[0] = time.perf_counter()
            bulkem.fit(data, **kw, tuning=tuning)
            total = (time.perf_counter() - t_zero[0]) * 1e3
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
            by = defaultdict(list)
            for th, label, a, b in sorted(events, key=lambda e: e[2]):
                by[th].append(f"{label} {(a - t_zero[0]) * 1e3:.1f}-{(b - t_zero[0]) * 1e3:.1f}")
            print(f"chunks/stream {chunks}: total {total:.1f} ms, {faults} page faults")
            for th, items in by.items():
                print(f"  {th:<12} " + ", ".join(items))
    # what the tables cost on this host, by function
    fam = models.get("invgauss")
    pairs = fam.read(data, "dataset", "value", {})
    model = dataclasses.replace(fam.model(pairs, 2, {}), tuning=base)
    packed = model.pack(pairs)
    job = api.make_job(model, packed, args.starts, 1, None, np.dtype(args.dtype), args.iters, 0.0)
    job.draw_starts()
    job.params[:] = job.init
    job.status[:] = 1
    prof = cProfile.Profile()
    prof.enable()
    sv = FitResult.before_fits(model, packed, job, args.starts)
    FitResult.assemble(model, packed, job, args.starts, 1, "cuda", args.dtype, 0.0, sv)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)

if __name__ == "__main__":
    main()
