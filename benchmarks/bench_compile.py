"""Cold compile time of the mixtures' CPU runners, in fresh processes, for one or more trees.

Each figure is a fresh Python process with the on-disk kernel cache off
(``BULKEM_NO_CACHE=1``) that fits a small dataset once on the CPU engine: the
first call compiles the start kernel and the runner of that (family, M, D,
dtype); the process prints the call's wall time ("float64+float32": a float64 fit,
then a float32 one in the same process, the two calls' time; "large": the same in the
one-large-dataset regime).  Trees (source folders with a
``bulkem`` package) are measured in turn, round after round, so that a
before/after comparison shares the machine's state:

    python benchmarks/bench_compile.py . /tmp/old_tree --rounds 2
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys

CHILD = """
import time, numpy as np, bulkem
from bulkem.tuning import Tuning
fam, case = {fam!r}, {dt!r}
tuning = Tuning(strategy="large") if case.endswith("large") else Tuning()
rng = np.random.default_rng(0)
x = rng.normal(size=(200, 2)) if fam == "gaussian" else rng.wald(1.0, 3.0, 200)
t = time.perf_counter()
for dt in case.split()[0].split("+"):
    bulkem.fit([x], family=fam, n_components=2, n_starts=2, max_iter=5, backend="cpu",
               dtype=dt, progress=False, tuning=tuning)
print(time.perf_counter() - t)
"""

CASES = (("gaussian", "float64"), ("gaussian", "float32"), ("invgauss", "float32"),
         ("gaussian", "float64+float32"), ("gaussian", "float64+float32 large"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", help="folders holding a bulkem package")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--only", default="", help="only the cases whose 'family dtype' holds this")
    args = ap.parse_args()
    cases = [c for c in CASES if args.only in " ".join(c)]
    env = dict(os.environ, BULKEM_NO_CACHE="1")
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}  {platform.node()}  {os.cpu_count()} "
          "cores; seconds of the first bulkem.fit (compiles), fresh process, no disk cache")
    best: dict = {}
    for r in range(args.rounds):
        for fam, dt in cases:
            for tree in args.trees:
                env["PYTHONPATH"] = os.path.abspath(tree)
                out = subprocess.run([sys.executable, "-c", CHILD.format(fam=fam, dt=dt)],
                                     env=env, capture_output=True, text=True, check=True,
                                     cwd=tree)  # (python -c puts the working folder first)
                s = float(out.stdout.split()[-1])
                key = (fam, dt, tree)
                best[key] = min(best.get(key, s), s)
                print(f"round {r + 1}: {fam:8s} {dt}  {tree}: {s:6.1f} s", flush=True)
    print("\n| family | dtype | " + " | ".join(args.trees) + " |")
    print("|---|---|" + "---|" * len(args.trees))
    for fam, dt in cases:
        cells = " | ".join(f"{best[(fam, dt, t)]:.1f} s" for t in args.trees)
        print(f"| {fam} | {dt} | {cells} |")


if __name__ == "__main__":
    main()
