"""Same-run A/B of two source trees on the CPU engine, alternating, in one table.

    git archive OLD_COMMIT | (mkdir -p old_tree && tar -x -C old_tree)
    python benchmarks/ab_cpu.py old_tree . --rounds 3

Each round runs each tree in a fresh process (``PYTHONPATH=<tree>``; the kernels come from
the tree's disk cache after its first round), which fits every workload once to compile it,
then times each workload's whole ``bulkem.fit`` call once.  The order alternates (A B, B A,
...).  The table gives each tree's median seconds, the ratio B / A, and whether both trees
gave the same summed log-likelihood (the same bits, for a change meant to keep them):

* ``ig_f64`` / ``ig_f32``: 400 inverse-Gaussian datasets x 1,000 values, 2 components,
  20 starts, 100 iterations, float64 / float32;
* ``ga_bulk``: 200 Gaussian datasets x 2,000 x 8 values, 3 components, 4 starts, 50 iterations;
* ``ga_large_f32``: one Gaussian dataset of 200,000 x 8 values, 8 components, one start,
  30 iterations, float32, in the one-large-dataset regime.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, time
import numpy as np
import bulkem
from bulkem.tuning import Tuning

ig = bulkem.datasets.simulate_demo(400, 1000, seed=1)
rng = np.random.default_rng(0)
g = [rng.normal(size=(200_000, 8)) + rng.integers(0, 4, (200_000, 1)) * 3]
kw = dict(tol=0.0, seed=1, backend="cpu", progress=False)
calls = {
    "ig_f64": lambda: bulkem.fit(ig, n_components=2, n_starts=20, max_iter=100, **kw),
    "ig_f32": lambda: bulkem.fit(ig, n_components=2, n_starts=20, max_iter=100,
                                 dtype="float32", **kw),
    "ga_bulk": lambda: bulkem.fit([x[:2000] for x in g] * 200, family="gaussian",
                                  n_components=3, n_starts=4, max_iter=50, **kw),
    "ga_large_f32": lambda: bulkem.fit(g, family="gaussian", n_components=8, n_starts=1,
                                       max_iter=30, dtype="float32",
                                       tuning=Tuning(strategy="large"), **kw),
}
for f in calls.values():
    f()
out = {}
for k, f in calls.items():
    t = time.perf_counter()
    r = f()
    out[k] = [time.perf_counter() - t, float(r.summary.loglik.sum())]
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs=2, help="folders holding a bulkem package: A B")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    runs: dict = {t: [] for t in args.trees}
    for r in range(args.rounds):
        for tree in args.trees if r % 2 == 0 else args.trees[::-1]:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                                 text=True, cwd=tree)  # (python -c puts the folder first)
            if out.returncode:
                print(out.stderr[-3000:])
                return 1
            runs[tree].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1}: {tree}: {runs[tree][-1]}", flush=True)
    a, b = args.trees
    print(f"\n| workload | {a} median s | {b} median s | B / A | same log-likelihood |")
    print("|---|---|---|---|---|")
    for k in runs[a][0]:
        ma = statistics.median(x[k][0] for x in runs[a])
        mb = statistics.median(x[k][0] for x in runs[b])
        same = runs[a][0][k][1] == runs[b][0][k][1]
        print(f"| {k} | {ma:.3f} | {mb:.3f} | {mb / ma:.3f} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
