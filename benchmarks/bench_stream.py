"""Streaming `bulkem fit` against the in-memory bulkem.fit: wall time, peak host memory, fits/s.

Writes N inverse-Gaussian datasets of 200 values (the demo mixture) to one
Parquet file, then, each in its own process so that each peak memory is its
own (``os.wait4``'s ``ru_maxrss``):

1. in memory: ``bulkem.fit`` on the first ``--memory-datasets`` datasets (a long
   DataFrame, as the CLI reads it, and a list of arrays), timed after a
   warm-up fit that compiles the kernels;
2. the CLI's fixed cost: ``bulkem fit`` streamed over a tiny file (start-up,
   imports, kernel compilation);
3. the CLI streamed over the whole file (``--chunk-datasets``), Parquet in and
   out, checkpointing each chunk as it does by default.

It prints a table with fits/s (the streamed run's also without the fixed cost)
and the ratio to the faster in-memory form, CPU seconds (a fairer measure on a
shared machine), and checks that the streamed summary equals
the in-memory one on the datasets they share.

    python benchmarks/bench_stream.py --n-datasets 20000            # CPU, a few minutes
    python benchmarks/bench_stream.py --n-datasets 10000000 --workdir /tmp/bs   # the issue's
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def write_input(path: Path, n: int, obs: int, seed: int, block: int) -> float:
    """N datasets of the demo mixture, long form (dataset, value), in row groups of ``block``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bulkem.interop.datasets import simulate_demo

    t0 = time.perf_counter()
    schema = pa.schema([("dataset", pa.int64()), ("value", pa.float64())])
    with pq.ParquetWriter(path, schema) as w:
        for k, lo in enumerate(range(0, n, block)):
            m = min(block, n - lo)
            values = np.concatenate(simulate_demo(m, obs, seed=seed + k))
            ids = np.repeat(np.arange(lo, lo + m, dtype=np.int64), obs)
            w.write_table(pa.table({"dataset": ids, "value": values}, schema=schema))
    return time.perf_counter() - t0


def run_child(cmd: list[str], log: Path) -> tuple[float, float, float, int]:
    """Run a command; its wall time (s), CPU time (s), peak resident memory (MiB), exit code."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def in_memory_child(args: argparse.Namespace) -> None:
    """The in-memory baseline (run as a child process): prints one JSON line."""
    import pyarrow.parquet as pq

    import bulkem

    n_rows = args.memory_datasets * args.obs
    pf = pq.ParquetFile(args.child_in_memory)
    batches, got = [], 0
    for b in pf.iter_batches(batch_size=1 << 20):
        batches.append(b.to_pandas())
        got += len(batches[-1])
        if got >= n_rows:
            break
    import pandas as pd

    df = pd.concat(batches, ignore_index=True).iloc[:n_rows]
    kw = dict(n_components=args.components, n_starts=args.starts, seed=args.seed,
              backend=args.backend, progress=False)
    warm = bulkem.fit(df.iloc[: 2 * args.obs], **{**kw, "n_starts": 2, "max_iter": 2})
    out = {"backend": warm.backend}
    t0, c0 = time.perf_counter(), time.process_time()
    res = bulkem.fit(df, **kw)
    out["frame_s"], out["frame_cpu"] = time.perf_counter() - t0, time.process_time() - c0
    arrays = list(df["value"].to_numpy().reshape(args.memory_datasets, args.obs))
    t0, c0 = time.perf_counter(), time.process_time()
    bulkem.fit(arrays, **kw)
    out["list_s"], out["list_cpu"] = time.perf_counter() - t0, time.process_time() - c0
    res.summary.to_parquet(Path(args.workdir) / "in_memory_summary.parquet", index=False)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-datasets", type=int, default=20_000)
    ap.add_argument("--obs", type=int, default=200)
    ap.add_argument("--components", type=int, default=2)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--chunk-datasets", type=int, default=50_000,
                    help="datasets per streamed chunk")
    ap.add_argument("--memory-datasets", type=int, default=None,
                    help="datasets of the in-memory fit (default min(N, 1,000,000))")
    ap.add_argument("--block", type=int, default=5_000,
                    help="datasets per Parquet row group of the input")
    ap.add_argument("--workdir", default=None, help="where the files go (default a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the files (and reuse the input)")
    ap.add_argument("--child-in-memory", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_datasets is None:
        args.memory_datasets = min(args.n_datasets, 1_000_000)
    if args.child_in_memory:
        in_memory_child(args)
        return

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_stream_"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"input_{args.n_datasets}x{args.obs}.parquet"
    if src.exists() and args.keep:
        gen_s = float("nan")
    else:
        gen_s = write_input(src, args.n_datasets, args.obs, args.seed, args.block)
    tiny = work / "tiny.parquet"
    write_input(tiny, 100, args.obs, args.seed, args.block)
    common = [sys.executable, "-m", "bulkem", "fit", "--components", str(args.components),
              "--starts", str(args.starts), "--seed", str(args.seed), "--backend", args.backend,
              "--quiet"]
    me = [sys.executable, str(Path(__file__).resolve())]
    fwd = ["--obs", str(args.obs), "--components", str(args.components), "--starts",
           str(args.starts), "--seed", str(args.seed), "--backend", args.backend,
           "--memory-datasets", str(args.memory_datasets), "--workdir", str(work)]

    _, _, mem_rss, rc = run_child([*me, *fwd, "--child-in-memory", str(src)],
                                      work / "in_memory.log")
    lines = (work / "in_memory.log").read_text().strip().splitlines()
    if rc != 0:
        sys.exit("in-memory run failed:\n" + "\n".join(lines[-20:]))
    mem = json.loads(lines[-1])
    fixed_wall, fixed_cpu, fixed_rss, rc = run_child(
        [*common, str(tiny), "--chunk-datasets", "50", "--out", str(work / "tiny_fits.parquet")],
        work / "tiny.log")
    if rc != 0:
        sys.exit("tiny streamed run failed:\n" + (work / "tiny.log").read_text()[-3000:])
    out = work / "fits.parquet"
    for p in work.glob("fits*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    wall, cpu, rss, rc = run_child([*common, str(src), "--chunk-datasets", str(args.chunk_datasets),
                               "--out", str(out)], work / "stream.log")
    log = (work / "stream.log").read_text()
    if rc != 0:
        sys.exit("streamed run failed:\n" + log[-3000:])

    import pandas as pd
    import pyarrow.parquet as pq

    m = args.memory_datasets
    ref = pd.read_parquet(work / "in_memory_summary.parquet")
    got = []
    for b in pq.ParquetFile(out).iter_batches(batch_size=1 << 20):
        got.append(b.to_pandas())
        if sum(map(len, got)) >= m:
            break
    streamed = pd.concat(got, ignore_index=True).iloc[:m]
    same = ref.equals(streamed)
    out_bytes = sum(p.stat().st_size for p in work.glob("fits*.parquet"))

    fits_mem, fits = m * args.starts, args.n_datasets * args.starts
    rate_frame, rate_list = fits_mem / mem["frame_s"], fits_mem / mem["list_s"]
    rate = fits / wall
    rate_net = fits / max(wall - fixed_wall, 1e-9)
    base = max(rate_frame, rate_list)  # the ratios are to the faster in-memory form
    print(f"# bench_stream {datetime.date.today()}  {platform.node()}  "
          f"{platform.processor() or platform.machine()}  cpus={os.cpu_count()}  "
          f"backend={mem['backend']}")
    mib = src.stat().st_size / 2**20
    print(f"# {args.n_datasets:,} datasets x {args.obs} values (input {mib:,.0f} MiB, written "
          f"in {gen_s:.1f} s), {args.components} components, {args.starts} starts, "
          f"chunks of {args.chunk_datasets:,} datasets; outputs {out_bytes / 2**20:,.0f} MiB")
    print("| run | datasets | fits | wall s | CPU s | fits/s | vs in-memory (faster) "
          "| peak host MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| in-memory bulkem.fit, long DataFrame | {m:,} | {fits_mem:,} | {mem['frame_s']:.2f} "
          f"| {mem['frame_cpu']:.2f} | {rate_frame:,.0f} | {rate_frame / base:.2f} "
          f"| {mem_rss:,.0f} (process) |")
    print(f"| in-memory bulkem.fit, list of arrays | {m:,} | {fits_mem:,} | {mem['list_s']:.2f} "
          f"| {mem['list_cpu']:.2f} | {rate_list:,.0f} | {rate_list / base:.2f} "
          "| (same process) |")
    print(f"| CLI fixed cost (100 datasets: start-up, compile) | 100 | {100 * args.starts:,} | "
          f"{fixed_wall:.2f} | {fixed_cpu:.2f} | - | - | {fixed_rss:,.0f} |")
    print(f"| CLI streamed, Parquet in and out | {args.n_datasets:,} | {fits:,} | {wall:.2f} | "
          f"{cpu:.2f} | {rate:,.0f} | {rate / base:.2f} | {rss:,.0f} |")
    print(f"| CLI streamed, less the fixed cost | {args.n_datasets:,} | {fits:,} | "
          f"{wall - fixed_wall:.2f} | {cpu - fixed_cpu:.2f} | {rate_net:,.0f} | "
          f"{rate_net / base:.2f} | |")
    print(f"streamed summary == in-memory summary on the first {m:,} datasets: {same}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
