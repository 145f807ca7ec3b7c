"""bulkem.scale.dask on a LocalCluster: fits/s with 1, 2, ... workers against one bulkem.fit call.

Builds N inverse-Gaussian datasets (the demo mixture) as one long DataFrame,
fits it once with ``bulkem.fit`` in this process (the reference tables, on
1 and on all Numba threads), then with ``bulkem.dask.fit`` on a LocalCluster of
1, 2, ... worker processes of one thread each (``NUMBA_NUM_THREADS=1``), the
input split into ``--npartitions`` partitions that cut datasets in two (so the
shuffle by dataset is part of the time).  Every worker compiles its kernels in
a warm-up before the timing.  Prints a table with fits/s, the speed-up over one
worker and whether every table equals the single call's (sorted by dataset,
start, component; bit for bit).  ``--kill`` adds a run in which one worker
process is killed while it fits.

    python benchmarks/bench_dask.py --n-datasets 10000 --workers 1 2 --kill
    python benchmarks/bench_dask.py --cuda --workers 1 2     # LocalCUDACluster (dask-cuda)
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import signal
import threading
import time

import numpy as np
import pandas as pd

KEYS = {"summary": ["dataset"], "components": ["dataset", "component"],
        "starts": ["dataset", "start"], "start_values": ["dataset", "start", "component"]}


def _warm(backend: str) -> str:
    """Compile a worker's kernels (run on every worker before the timing)."""
    import bulkem
    from bulkem.interop.datasets import simulate_demo

    return bulkem.fit(simulate_demo(2, 50, seed=0), n_starts=2, max_iter=2, seed=1,
                      backend=backend, progress=False).backend


def same_tables(ref, tables: dict) -> bool:
    for name, keys in KEYS.items():
        a = getattr(ref, name).sort_values(keys).reset_index(drop=True)
        b = tables[name].sort_values(keys).reset_index(drop=True)
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=True)
        except AssertionError:
            return False
    return True


def run_cluster(df, ref, n_workers: int, args, kill: bool = False) -> tuple[float, bool, str]:
    import dask.dataframe as dd
    import distributed

    import bulkem

    if args.cuda:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=n_workers, dashboard_address=None,
                                   silence_logs=logging.ERROR)
    else:
        cluster = distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
            silence_logs=logging.ERROR, env={"NUMBA_NUM_THREADS": "1"})
    with cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(n_workers, timeout=300)
        backends = set(client.run(_warm, args.backend).values())
        pids = client.run(os.getpid)
        killed = []

        def killer():
            while not killed:
                for addr, keys in client.processing().items():
                    if addr in pids and any("_fit_partition" in str(k) for k in keys):
                        os.kill(pids[addr], signal.SIGKILL)
                        killed.append(addr)
                        return
                time.sleep(0.01)

        # the input on the workers before the clock starts, as read_parquet would leave it
        ddf = dd.from_pandas(df, npartitions=args.npartitions, sort=False).persist()
        distributed.wait(ddf)
        t0 = time.perf_counter()
        if kill:
            threading.Thread(target=killer, daemon=True).start()
        res = bulkem.dask.fit(ddf, n_components=args.components, n_starts=args.starts,
                              seed=args.seed, backend=args.backend)
        futures = client.compute([res.tables[name] for name in KEYS])
        tables = dict(zip(KEYS, [f.result() for f in futures], strict=True))
        wall = time.perf_counter() - t0
        note = "+".join(sorted(backends)) + (f", killed {len(killed)} worker" if kill else "")
        return wall, same_tables(ref, tables), note


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-datasets", type=int, default=10_000)
    ap.add_argument("--obs", type=int, default=200)
    ap.add_argument("--components", type=int, default=2)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--npartitions", type=int, default=8)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--cuda", action="store_true",
                    help="LocalCUDACluster (dask-cuda), one worker per GPU, backend cuda")
    ap.add_argument("--kill", action="store_true", help="also a run with a worker killed")
    args = ap.parse_args()
    if args.cuda:
        args.backend = "cuda"

    import numba

    import bulkem
    from bulkem.interop.datasets import simulate_demo

    data = simulate_demo(args.n_datasets, args.obs, seed=args.seed)
    df = pd.DataFrame({"dataset": np.repeat(np.arange(args.n_datasets), args.obs),
                       "value": np.concatenate(data)})
    kw = dict(n_components=args.components, n_starts=args.starts, seed=args.seed,
              backend=args.backend, progress=False)
    n_fits = args.n_datasets * args.starts
    rows = []
    _warm(args.backend)
    threads_all = numba.get_num_threads()
    first = None
    for threads in sorted({1, threads_all}):
        numba.set_num_threads(threads)
        t0 = time.perf_counter()
        ref = bulkem.fit(df, **kw)
        wall = time.perf_counter() - t0
        first = first or ref
        same = same_tables(first, {name: getattr(ref, name) for name in KEYS})
        rows.append((f"bulkem.fit, {threads} thread(s)", wall, same, ref.backend))
    numba.set_num_threads(threads_all)
    single = rows[-1][1]
    one_worker = None
    for w in args.workers:
        wall, same, note = run_cluster(df, ref, w, args)
        one_worker = one_worker or wall
        rows.append((f"bulkem.dask.fit, {w} worker(s)", wall, same, note))
    if args.kill:
        w = max(args.workers)
        wall, same, note = run_cluster(df, ref, w, args, kill=True)
        rows.append((f"bulkem.dask.fit, {w} worker(s), one killed", wall, same, note))

    print(f"# bench_dask {datetime.date.today()}  {platform.node()}  "
          f"{platform.processor() or platform.machine()}  cpus={os.cpu_count()}")
    print(f"# {args.n_datasets:,} datasets x {args.obs} values, {args.components} components, "
          f"{args.starts} starts ({n_fits:,} fits), {args.npartitions} input partitions")
    print("| run | wall s | fits/s | vs one bulkem.fit (all threads) | vs 1 worker "
          "| tables identical | backend |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name, wall, same, note in rows:
        vs_w = f"{one_worker / wall:.2f}" if "dask" in name else "-"
        print(f"| {name} | {wall:.2f} | {n_fits / wall:,.0f} | {single / wall:.2f} | {vs_w} | "
              f"{same} | {note} |")


if __name__ == "__main__":
    main()
