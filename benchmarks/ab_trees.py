"""Same-run A/B of two source trees of bulkem on five workloads, alternating, in one table.

    git archive OLD_COMMIT | (mkdir -p old_tree && tar -x -C old_tree)
    python benchmarks/ab_trees.py old_tree . --rounds 3

Each tree runs in its own long-lived worker process (``PYTHONPATH=<tree>``): the workers
compile every workload once (side by side), then time one round each in turn, in the
order A B, B A, A B... (neither always goes first), so that both see the same machine
state.  A round times each workload's whole ``bulkem.fit`` / ``kalman_loglik`` call once
(compilation excluded).  The table gives each
tree's median seconds, the ratio B / A and the spread of the rounds.  The workloads use
the public API only, so any two trees of the package can be compared:

* ``ig_bulk``: 100 inverse-Gaussian datasets x 2,000 values x 1,000 starts, 100 iterations;
* ``hmm_bulk``: 2,000 datasets of 20 categorical sequences (8 symbols, ~50 steps), 4 states,
  10 starts, 100 iterations;
* ``kalman_exact``: the exact Kalman likelihood of 20,000 AR(2)-plus-noise series x 500 steps;
* ``tmap_table1``: one trace of 10^6 runs (the TMAP paper's Table 1), orders (1, 2, 3),
  100 iterations;
* ``gauss_large``: one dataset of 230,400 x 32 values, 32 components, 6 starts, float32,
  100 iterations (the CUDA EM paper's largest problem).

``--small`` shrinks every workload (for a CPU check of the script itself).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = ("ig_bulk", "hmm_bulk", "kalman_exact", "tmap_table1", "gauss_large")


def _inputs(small: bool) -> dict:
    import numpy as np

    import bulkem

    rng = np.random.default_rng(7)
    k = 20 if small else 1
    ig = bulkem.datasets.simulate_demo(100 // k if not small else 4, 2000 // k, seed=1)
    hmm = [[rng.integers(0, 8, int(rng.integers(30, 70))).astype(float) for _ in range(20)]
           for _ in range(2000 // (k * 10) if small else 2000)]
    ar = bulkem.StateSpace.ar([0.6, -0.2], sigma2=1.0, obs_var=0.5)
    ys = [ar.simulate(500 // k, rng=s)[:, 0] for s in range(20_000 // (k * 20) if small
                                                             else 20_000)]
    trace = bulkem.datasets.simulate_tmap(10**6 // (k * 50) if small else 10**6, seed=3)
    n, d, m = (2000, 4, 4) if small else (230_400, 32, 32)
    centres = rng.normal(0, 3, (m, d))
    gauss = centres[rng.integers(0, m, n)] + rng.normal(size=(n, d))
    return dict(ig=ig, hmm=hmm, ar=ar, ys=ys, trace=trace, gauss=[gauss])


def _calls(inputs: dict, backend: str, small: bool) -> dict:
    import inspect

    import bulkem

    # plain EM in both trees (a tree of fit(accel=...) accelerates by default)
    plain = {"accel": False} if "accel" in inspect.signature(bulkem.fit).parameters else {}
    it = 10 if small else 100
    return {
        "ig_bulk": lambda: bulkem.fit(inputs["ig"], n_components=2,
                                      n_starts=10 if small else 1000, max_iter=it, tol=0.0, **plain,
                                      seed=1, backend=backend, progress=False),
        "hmm_bulk": lambda: bulkem.fit(inputs["hmm"], family="hmm", emission="categorical",
                                       n_symbols=8, n_components=4, n_starts=10, max_iter=it,
                                       tol=0.0, **plain, seed=1, backend=backend, progress=False),
        "kalman_exact": lambda: bulkem.kalman_loglik(inputs["ys"], inputs["ar"],
                                                     method="exact", backend=backend),
        "tmap_table1": lambda: bulkem.fit(inputs["trace"], family="tmap", orders=(1, 2, 3),
                                          n_starts=1, max_iter=it, tol=0.0, **plain, seed=1,
                                          backend=backend, progress=False),
        "gauss_large": lambda: bulkem.fit(inputs["gauss"], family="gaussian",
                                          n_components=4 if small else 32, n_starts=6,
                                          max_iter=it, tol=0.0, **plain, seed=1, dtype="float32",
                                          backend=backend, progress=False),
    }


def worker(backend: str, small: bool, only: list[str]) -> None:
    """Read commands from stdin: ``warm`` (compile: each call once), ``run`` (time each
    call once, print a JSON line), ``quit``."""
    import bulkem

    inputs = _inputs(small)
    calls = {k: v for k, v in _calls(inputs, backend, small).items() if k in only}
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            return
        out = {"tree": os.path.dirname(os.path.dirname(os.path.abspath(bulkem.__file__)))}
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            out[name] = time.perf_counter() - t0
        print(json.dumps({"cmd": cmd, **out}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs=2, help="tree A (the baseline) and tree B")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--only", default=",".join(WORKLOADS),
                    help="comma list of workloads to time (default: all)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.backend, args.small, args.only.split(","))
        return 0
    here = os.path.abspath(__file__)
    procs = []
    for tree in args.trees:
        env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
        cmd = [sys.executable, here, *args.trees, "--worker", "--backend", args.backend,
               "--only", args.only]
        procs.append(subprocess.Popen(cmd + (["--small"] if args.small else []), env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      cwd=os.path.abspath(tree)))
    t0 = time.perf_counter()
    for p in procs:  # both compile at once (CPU work), then wait for both
        p.stdin.write("warm\n")
        p.stdin.flush()
    warm = [json.loads(p.stdout.readline()) for p in procs]
    print(f"warm-up (compile + one call each, side by side): {time.perf_counter() - t0:.0f} s",
          flush=True)
    workloads = [w for w in WORKLOADS if w in args.only.split(",")]
    times = {tree: {w: [] for w in workloads} for tree in args.trees}
    pairs = list(zip(args.trees, procs, strict=True))
    for r in range(args.rounds):
        for tree, p in (pairs if r % 2 == 0 else pairs[::-1]):
            p.stdin.write("run\n")
            p.stdin.flush()
            got = json.loads(p.stdout.readline())
            for w in workloads:
                times[tree][w].append(got[w])
            print(f"round {r + 1} {tree}: " + ", ".join(f"{w} {got[w]:.3f}" for w in workloads),
                  flush=True)
    for p in procs:
        p.stdin.write("quit\n")
        p.stdin.flush()
        p.wait()
    a, b = args.trees
    print(f"\n| workload | A = {a} (s, median) | B = {b} (s, median) | B / A | rounds "
          "(A; B) |\n|---|---|---|---|---|")
    for w in workloads:
        ma, mb = statistics.median(times[a][w]), statistics.median(times[b][w])
        spread = "; ".join(", ".join(f"{x:.3f}" for x in times[t][w]) for t in (a, b))
        print(f"| {w} | {ma:.3f} | {mb:.3f} | {mb / ma:.3f} | {spread} |")
    print("\nfirst calls (compile included): " + "; ".join(
        f"{t['tree']}: " + ", ".join(f"{w} {t[w]:.1f}" for w in workloads) for t in warm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
