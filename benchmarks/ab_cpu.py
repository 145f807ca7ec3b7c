"""Same-run A/B of two source trees on the CPU engine: cold first calls and best-of-3 times.

    git archive OLD_COMMIT bulkem | (mkdir -p old_tree && tar -x -C old_tree)
    python benchmarks/ab_cpu.py old_tree .          # then: rm -rf old_tree

Each tree runs twice in a fresh process (A B, then B A), each with its own numba cache
folder: the first process of a tree compiles (its first calls are the cold first calls a
user meets), the second loads the cache.  Every workload is one ``bulkem.fit`` call on the
CPU, timed whole: the first call, then the best of three.  Workloads (public API only):

* ``ig_m2``: 100 inverse-Gaussian datasets x 2,000 values, 2 components, 100 starts,
  100 iterations, float64;
* ``ig_m3_f32``: the same datasets, 3 components, 50 starts, float32;
* ``ga_m3_d2``: 100 Gaussian datasets x 2,000 values in 2 dimensions, 3 components,
  20 starts, float64;
* ``ga_large_m8_d8_f32``: one dataset of 200,000 x 8 values, 8 components, 2 starts,
  30 iterations, float32 (the one-large-dataset regime).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CODE = r'''
import inspect, json, time
import numpy as np
import bulkem
rng = np.random.default_rng(7)
ig = bulkem.datasets.simulate_demo(100, 2000, seed=1)
ga = [np.concatenate([rng.normal(0, 1, (1200, 2)), rng.normal(3, 0.7, (800, 2))])
      for _ in range(100)]
big = [np.concatenate([rng.normal(0, 1, (120000, 8)), rng.normal(2, 0.7, (80000, 8))])]
# plain EM in both trees (a tree of fit(accel=...) accelerates by default)
kw = dict(tol=0.0, seed=1, backend="cpu",
          **({"accel": False} if "accel" in inspect.signature(bulkem.fit).parameters else {}))
calls = {
    "ig_m2": lambda: bulkem.fit(ig, n_components=2, n_starts=100, max_iter=100, **kw),
    "ig_m3_f32": lambda: bulkem.fit(ig, n_components=3, n_starts=50, max_iter=100,
                                    dtype="float32", **kw),
    "ga_m3_d2": lambda: bulkem.fit(ga, family="gaussian", n_components=3, n_starts=20,
                                   max_iter=100, **kw),
    "ga_large_m8_d8_f32": lambda: bulkem.fit(big, family="gaussian", n_components=8,
                                             n_starts=2, max_iter=30, dtype="float32", **kw),
}
out = {}
for name, call in calls.items():
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    best = []
    for _ in range(3):
        t0 = time.perf_counter()
        call()
        best.append(time.perf_counter() - t0)
    out[name] = (first, min(best))
print(json.dumps(out))
'''


def main() -> int:
    trees = sys.argv[1:3]
    if len(trees) != 2:
        print(__doc__)
        return 2
    runs: dict = {t: [] for t in trees}
    for r in range(2):
        for t in trees if r == 0 else trees[::-1]:
            name = os.path.basename(os.path.abspath(t))
            env = {**os.environ, "PYTHONPATH": os.path.abspath(t),
                   "NUMBA_CACHE_DIR": f"/tmp/ab_cpu_cache_{name}"}
            p = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True,
                               text=True, cwd="/tmp")
            if p.returncode:
                print(p.stderr[-2000:])
                return 1
            runs[t].append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(t, r, runs[t][-1], flush=True)
    a, b = trees
    print(f"| workload | A = {a}: first calls (s) | B = {b}: first calls (s) "
          "| A best (s) | B best (s) | B / A |")
    print("|---|---|---|---|---|---|")
    for w in runs[a][0]:
        fa = [round(x[w][0], 1) for x in runs[a]]
        fb = [round(x[w][0], 1) for x in runs[b]]
        ba = min(x[w][1] for x in runs[a])
        bb = min(x[w][1] for x in runs[b])
        print(f"| {w} | {fa} | {fb} | {ba:.3f} | {bb:.3f} | {bb / ba:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
