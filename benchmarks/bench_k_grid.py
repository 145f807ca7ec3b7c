"""Cold fits over a grid of component counts on the CPU: compiled sizes against run-time sizes.

    python benchmarks/bench_k_grid.py [--family invgauss] [--ks 1,2,3,4] [--dims 1]

Runs the grid twice, each time in a fresh process with an empty numba cache (a user's first
session): ``Tuning(cpu_sizes="compiled")`` compiles a kernel per component count,
``Tuning(cpu_sizes="run-time")`` one for all of them.  Each fit is one ``bulkem.fit`` call
(20 datasets x 500 values, 10 starts, 100 iterations by default), timed whole, compilation
included; the table gives each count's time in both modes and the totals.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CODE = r'''
import json, sys, time
import numpy as np
import bulkem
from bulkem.tuning import Tuning
family, ks, mode = sys.argv[1], sys.argv[2], sys.argv[4]
dims, n_ds, n_obs = int(sys.argv[3]), int(sys.argv[5]), int(sys.argv[6])
rng = np.random.default_rng(3)
if family == "invgauss":
    data = bulkem.datasets.simulate_demo(n_ds, n_obs, seed=3)
else:
    data = [rng.normal(size=(n_obs, dims)) + rng.integers(0, 3, (n_obs, 1)) * 3.0
            for _ in range(n_ds)]
out = {}
for k in map(int, ks.split(",")):
    t0 = time.perf_counter()
    bulkem.fit(data, family=family, n_components=k, n_starts=10, max_iter=100, seed=1,
               backend="cpu", tuning=Tuning(cpu_sizes=mode))
    out[k] = time.perf_counter() - t0
print(json.dumps(out))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="invgauss")
    ap.add_argument("--ks", default="1,2,3,4")
    ap.add_argument("--dims", type=int, default=1)
    ap.add_argument("--datasets", type=int, default=20)
    ap.add_argument("--obs", type=int, default=500)
    args = ap.parse_args()
    got = {}
    for mode in ("compiled", "run-time"):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "NUMBA_CACHE_DIR": cache}
            p = subprocess.run([sys.executable, "-c", CODE, args.family, args.ks, str(args.dims),
                                mode, str(args.datasets), str(args.obs)],
                               env=env, capture_output=True, text=True)
        if p.returncode:
            print(p.stderr[-3000:])
            return 1
        got[mode] = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"{args.family}, D = {args.dims}: {args.datasets} datasets x {args.obs} values, "
          "10 starts, 100 iterations; each call cold (compilation included)")
    print("| n_components | compiled sizes (s) | run-time sizes (s) |")
    print("|---|---|---|")
    for k in got["compiled"]:
        print(f"| {k} | {got['compiled'][k]:.1f} | {got['run-time'][k]:.1f} |")
    print(f"| total | {sum(got['compiled'].values()):.1f} | {sum(got['run-time'].values()):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
