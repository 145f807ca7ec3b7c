"""Issue-4 speed study: CUDA kernel variants, scheduler, ragged batches, several GPUs.

Prints, in one run on one machine: fits/s of the CPU engine on every core and of
the CUDA engine (one GPU, all GPUs), float64 and float32, the agreement between
them, a breakdown of the end-to-end time, the gain of grouping ragged batches by
size, and the cost of the progress bar.  Everything is timed end to end through
``bulkem.fit`` (compilation excluded by a warm-up).

    python benchmarks/bench_speed.py                       # the issue-4 batch
    python benchmarks/bench_speed.py --variants            # also kernel variants
    python benchmarks/bench_speed.py --grid "cuda_max_registers=64;None"

Every variant is a :class:`bulkem.tuning.Tuning` passed to ``bulkem.fit(..., tuning=...)``;
``--grid`` names its fields, or their old ``bulkem.config`` names in upper case
(``tuning_args.py``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import numpy as np

import bulkem
from bulkem import api
from bulkem.engines.cpu import bulk as cpu_engine
from bulkem.tuning import DEFAULT

sys.path.insert(0, os.path.dirname(__file__))
from tuning_args import grid_variants, variant_label  # noqa: E402

ROWS: list[tuple] = []
LANES: list[tuple] = []


def fit(data, args, **kw):
    base = dict(n_components=2, n_starts=args.starts, max_iter=args.iters, tol=0.0,
                accel=False, seed=1,
                progress=False)
    return bulkem.fit(data, **{**base, **kw})


def timed(label, data, args, repeat=None, **kw):
    fit(data[:2], args, n_starts=2, max_iter=2, **kw)  # compile this variant
    best, res = np.inf, None
    for _ in range(repeat or args.repeat):
        t0 = time.perf_counter()
        res = fit(data, args, **kw)
        best = min(best, time.perf_counter() - t0)
    n = len(res.starts)
    ROWS.append((label, n, best, n / best))
    return res, best


ONE_GPU = DEFAULT.replace(cuda_devices=(0,))  # GPU 0 alone (cuda_devices=None: every GPU)


def best_diff(a, b) -> float:
    """Largest relative difference of the datasets' best log-likelihoods (a's datasets)."""
    x = a.summary.loglik.to_numpy()
    y = b.summary.loglik.to_numpy()[: len(x)]
    return float(np.nanmax(np.abs(y - x) / np.abs(x)))


def breakdown(data, args, dtype, tuning=None):
    """Milliseconds in the job (keys, features), the engine and the tables.

    The engine's time includes drawing the starts and packing, chunk by chunk,
    and the tables' parts that need the starts only (``before_fits``), built
    while the GPU runs (shown apart as well).
    """
    from bulkem.engines import cuda as cuda_engine
    from bulkem.result import FitResult

    spent = {"job": 0.0, "engine": 0.0, "before_fits (in engine)": 0.0, "tables": 0.0}
    orig = (api.make_job, cuda_engine.run_fits, FitResult.assemble,
            FitResult.before_fits)

    def wrap(name, fn):
        def inner(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0
        return inner

    api.make_job = wrap("job", orig[0])
    cuda_engine.run_fits = wrap("engine", orig[1])
    FitResult.assemble = classmethod(wrap("tables", orig[2].__func__))
    FitResult.before_fits = staticmethod(wrap("before_fits (in engine)", orig[3]))
    try:
        t0 = time.perf_counter()
        fit(data, args, backend="cuda", dtype=dtype, tuning=tuning)
        total = time.perf_counter() - t0
    finally:
        api.make_job, cuda_engine.run_fits = orig[0], orig[1]
        FitResult.assemble = orig[2]
        FitResult.before_fits = staticmethod(orig[3])
    parts = "  ".join(f"{k} {v * 1e3:.1f} ms" for k, v in spent.items())
    print(f"# breakdown {dtype}: total {total * 1e3:.1f} ms: {parts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=100)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--starts", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--cpu-datasets", type=int, default=10, help="CPU timed on this many")
    ap.add_argument("--variants", action="store_true", help="kernel variants")
    ap.add_argument("--ragged", action="store_true", help="ragged batch, grouped or not")
    ap.add_argument("--progress", action="store_true", help="cost of progress reporting")
    ap.add_argument("--sched", action="store_true", help="streams and chunks per stream")
    ap.add_argument("--lanes", action="store_true", help="lanes per fit, float32 block")
    ap.add_argument("--host", action="store_true", help="pageable instead of page-locked buffers")
    ap.add_argument("--grid", nargs="*", default=[], metavar="NAME=V1;V2",
                    help="time f64 and f32 with each value of a Tuning field (NAME=V1;V2, "
                         "Python literals; old upper-case config names accepted); A=1+B=4 "
                         "sets both at once")
    ap.add_argument("--repeat", type=int, default=3, help="runs per timing; the best is kept")
    args = ap.parse_args()
    grid_variants(args.grid)  # (a bad name fails now, not after the other runs)

    from numba import cuda

    data = bulkem.datasets.simulate_demo(args.datasets, args.obs, seed=1)
    gpus = len(cuda.gpus) if cuda.is_available() else 0
    name = getattr(cuda.get_current_device(), "name", "simulator") if gpus else "none"
    print(f"# {datetime.date.today()}  cpu cores {os.cpu_count()}  gpus {gpus} ({name})"
          f"  batch {args.datasets} x "
          f"{args.obs} values x {args.starts} starts, {args.iters} iterations, tol=0")

    res_cpu, _ = timed("cpu f64 (all cores)", data[: args.cpu_datasets], args, repeat=1,
                       backend="cpu")
    if gpus:
        gpu_runs(data, args, res_cpu, gpus)
    print(f"{'run':<28}{'fits':>9}{'seconds':>10}{'fits/s':>14}{'vs cpu':>9}")
    base = ROWS[0][3]
    for label, n, dt, rate in ROWS:
        print(f"{label:<28}{n:>9}{dt:>10.4f}{rate:>14,.0f}{rate / base:>9.1f}")
    rates = {label: rate for label, _, _, rate in ROWS}
    for dtype in ("f64", "f32"):
        one = rates.get(f"cuda {dtype} 1 gpu")
        for label, rate in rates.items():
            if one and label.startswith(f"cuda {dtype} ") and label.endswith(" gpus"):
                print(f"# {label} vs 1 gpu: {rate / one:.2f}x")


def f32_agreement(label, r32, r64) -> None:
    """The distribution of |float32 - float64| / |float64| over starts, and the share
    within 1e-6: over all starts, and over starts degenerate in neither precision."""
    a, b = r32.starts.loglik.to_numpy(), r64.starts.loglik.to_numpy()
    rel = np.abs(a - b) / np.abs(b)
    q = np.quantile(rel, [0.5, 0.9, 0.99, 0.999, 1.0])
    usable = ((r32.starts.status != "degenerate") & (r64.starts.status != "degenerate")).to_numpy()
    close = rel < 1e-6
    print(f"# {label} rel loglik diff: median {q[0]:.1e}  p90 {q[1]:.1e}  p99 {q[2]:.1e}  "
          f"p99.9 {q[3]:.1e}  max {q[4]:.1e};  share < 1e-6: {np.mean(close):.5f}; "
          f"over the {usable.sum()} starts degenerate in neither: {np.mean(close[usable]):.5f}; "
          f"misses degenerate in one or both: {np.sum(~close & ~usable)} of {np.sum(~close)}")


def lanes_runs(data, args) -> None:
    """Lanes per fit (and float32 E-step block), at tol=0 and at tol=1e-6 (fits stop apart,
    at most 10 x --iters iterations, on a fifth of the datasets)."""
    conv = argparse.Namespace(**{**vars(args), "iters": 10 * args.iters})
    few = data[: max(1, len(data) // 5)]
    for lanes in (32, 16, 8, 4):
        tuning = ONE_GPU.replace(cuda_lanes_per_fit=lanes,
                                 cuda_lanes_per_fit_tol0={"float64": lanes, "float32": lanes})
        timed(f"f64 lanes={lanes}", data, args, backend="cuda", tuning=tuning)
        timed(f"f64 lanes={lanes} tol=1e-6", few, conv, backend="cuda", tol=1e-6, tuning=tuning)
        for block in (32, 128):
            blocked = tuning.replace(estep_block_obs={**tuning.estep_block_obs, "float32": block})
            r = timed(f"f32 lanes={lanes} block={block}", data, args, backend="cuda",
                      dtype="float32", tuning=blocked)[0]
            LANES.append((lanes, block, r))


def gpu_runs(data, args, res_cpu, gpus) -> None:
    r64, _ = timed("cuda f64 1 gpu", data, args, backend="cuda", tuning=ONE_GPU)
    r32, _ = timed("cuda f32 1 gpu", data, args, backend="cuda", dtype="float32", tuning=ONE_GPU)
    if gpus > 1:
        timed(f"cuda f64 {gpus} gpus", data, args, backend="cuda")
        timed(f"cuda f32 {gpus} gpus", data, args, backend="cuda", dtype="float32")
    if args.variants:
        for wpb in (4, 8):
            for regs in (None, 64):
                tuning = ONE_GPU.replace(cuda_warps_per_block=wpb, cuda_max_registers=regs)
                timed(f"f64 wpb={wpb} regs={regs}", data, args, backend="cuda", tuning=tuning)
                timed(f"f32 wpb={wpb} regs={regs}", data, args, backend="cuda",
                      dtype="float32", tuning=tuning)
    if args.lanes:
        lanes_runs(data, args)
    breakdown(data, args, "float64", ONE_GPU)
    breakdown(data, args, "float32", ONE_GPU)

    n_cpu = len(res_cpu.starts)
    c, g = res_cpu.starts.loglik.to_numpy(), r64.starts.loglik.to_numpy()[:n_cpu]
    sc, sg = res_cpu.starts.status.to_numpy(), r64.starts.status.to_numpy()[:n_cpu]
    same = sc == sg
    rel = np.abs(g - c) / np.abs(c)
    usable = same & (sc != "degenerate")
    print(f"# cpu vs cuda f64: max rel loglik diff {np.max(rel):.2e}, over starts with the same "
          f"non-degenerate status {np.max(rel[usable]):.2e}; same status {np.mean(same):.5f}; "
          f"differing (cpu, cuda): {list(zip(sc[~same], sg[~same], strict=True))[:5]}; "
          f"best fits' max rel diff {best_diff(res_cpu, r64):.2e}")
    f32_agreement("f32 vs f64", r32, r64)

    if args.sched:
        for streams, chunks, flight in ((2, 1, 1), (2, 1, 2), (2, 2, 2), (2, 4, 2), (1, 4, 2),
                                        (2, 8, 2), (4, 2, 2)):
            tuning = ONE_GPU.replace(cuda_host_threads=streams, cuda_chunks_per_stream=chunks,
                                     cuda_chunks_in_flight=flight, cuda_min_chunk_fits=4096)
            name = f"threads={streams} chunks={chunks} flight={flight}"
            timed(f"f64 {name}", data, args, backend="cuda", tuning=tuning)
            timed(f"f32 {name}", data, args, backend="cuda", dtype="float32", tuning=tuning)
    for lanes, block, r in LANES:
        f32_agreement(f"f32 lanes={lanes} block={block} vs f64", r, r64)
    for variant in grid_variants(args.grid):
        label = variant_label(variant)
        tuning = ONE_GPU.replace(**variant)  # (a variant may set cuda_devices=None: all GPUs)
        timed(f"f64 {label}", data, args, backend="cuda", tuning=tuning)
        r = timed(f"f32 {label}", data, args, backend="cuda", dtype="float32", tuning=tuning)[0]
        f32_agreement(f"f32 {label} vs f64", r, r64)
    if args.host:
        tuning = ONE_GPU.replace(cuda_pinned_max_bytes=0)
        timed("f64 pageable buffers", data, args, backend="cuda", tuning=tuning)
        timed("f32 pageable buffers", data, args, backend="cuda", dtype="float32", tuning=tuning)
    if args.progress:
        timed("f64 progress=False", data, args, backend="cuda", tuning=ONE_GPU)
        timed("f64 progress=callback", data, args, backend="cuda",
              progress=lambda done, total: None, tuning=ONE_GPU)
    if args.ragged:
        rng = np.random.default_rng(2)
        sizes = rng.integers(100, 14_001, 400)
        rag = [np.abs(rng.wald(np.where(rng.random(n) < 0.3, 1.0, 3.0), 1.0)) + 1e-3
               for n in sizes]
        rargs = argparse.Namespace(**{**vars(args), "starts": 50})
        timed("ragged f64 input order", rag, rargs, backend="cuda",
              tuning=ONE_GPU.replace(cuda_group_by_size=False))
        timed("ragged f64 grouped", rag, rargs, backend="cuda",
              tuning=ONE_GPU.replace(cuda_group_by_size=True))


if __name__ == "__main__":
    del cpu_engine  # imported so that its compile is not in the first CUDA timing
    main()
