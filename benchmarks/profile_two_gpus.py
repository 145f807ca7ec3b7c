"""Where a whole ``bulkem.fit`` call on every GPU of the host spends its time (issue 37).

    PYTHONPATH=. python3 benchmarks/profile_two_gpus.py [--datasets 500] [--dtype float64]

The issue-4 inverse-Gaussian batch (``--datasets`` x 2,000 values x 1,000 starts, 100
iterations): one GPU and every GPU (best of 3 after a warm-up of each), then a cProfile of
one call on every GPU, by cumulative and by own time, so that the host work that does not
shrink with a second GPU shows.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np

import bulkem
from bulkem.tuning import DEFAULT


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=500)
    ap.add_argument("--starts", type=int, default=1000)
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    data = bulkem.datasets.simulate_demo(args.datasets, 2000, 1)
    kw = dict(n_starts=args.starts, max_iter=100, tol=0.0, accel=False, seed=1,
              backend="cuda", dtype=args.dtype, progress=False)
    one = DEFAULT.replace(cuda_devices=(0,))
    for name, tuning in (("1 gpu", one), ("every gpu", DEFAULT)):
        bulkem.fit(data, tuning=tuning, **kw)
        best = np.inf
        for _ in range(3):
            t = time.perf_counter()
            bulkem.fit(data, tuning=tuning, **kw)
            best = min(best, time.perf_counter() - t)
        print(f"{name}: {best * 1e3:.1f} ms", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    bulkem.fit(data, tuning=DEFAULT, **kw)
    prof.disable()
    st = pstats.Stats(prof)
    st.sort_stats("cumulative").print_stats(args.top)
    st.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
