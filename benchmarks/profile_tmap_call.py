"""Where a TMAP Table-1 call's time goes: the whole call, then cProfile's largest entries.

    python benchmarks/profile_tmap_call.py [--runs 1000000] [--backend cuda] [--iters 30]

One trace of ``--runs`` runs (the paper's Table 1, ``simulate_tmap``) as a long DataFrame,
orders (1, 2, 3), one start, plain EM for ``--iters`` iterations, the wide regime; the
kernels compiled first on a small trace.  Prints the median of five whole calls and the
EM loop's seconds (``engines.cuda.wide.last_cuda_loop`` on the GPU), then a cProfile of
one more call sorted by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
import warnings

import bulkem
from bulkem.interop.datasets import simulate_tmap
from bulkem.tuning import DEFAULT


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--dtype", default="float64")
    args = ap.parse_args()
    wide = DEFAULT.replace(strategy="wide")
    df = simulate_tmap(args.runs, seed=1)
    warnings.simplefilter("ignore")
    kw = dict(family="tmap", n_starts=1, max_iter=args.iters, tol=0.0, accel=False, seed=1,
              backend=args.backend, dtype=args.dtype, progress=False, tuning=wide)
    bulkem.fit([simulate_tmap(300, seed=99, as_frame=False)], **{**kw, "max_iter": 2})
    times, loops = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        bulkem.fit(df, **kw)
        times.append(time.perf_counter() - t0)
        if args.backend == "cuda":
            from bulkem.engines.cuda import wide as cuda_wide

            loops.append(cuda_wide.last_cuda_loop["seconds"])
    loop = f", EM loop {1e3 * statistics.median(loops):.1f} ms" if loops else ""
    print(f"{len(df)} values, {args.backend} {args.dtype}, {args.iters} iterations: whole call "
          f"median {1e3 * statistics.median(times):.1f} ms (best {1e3 * min(times):.1f}){loop}")
    pr = cProfile.Profile()
    pr.enable()
    bulkem.fit(df, **kw)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
