"""Does the order of a dataset's sequences change the GPU's HMM rate? (issue 33)

A fit's lanes (``Tuning.cuda_lanes_per_fit_units``, 2) take its sequences in turn and
wait for each other at the end of each; sequences of lengths 50-500 in random order make
a pair's time the longer one's (E[max] / E[len] = 1.27 for uniform lengths).  The issue-13
batch (``bench_hmm.make_batch``) fitted as drawn and with each dataset's sequences sorted
by length (the user's call): fits/s of each whole call, best of ``--repeat``, with the
engines' part of that call (starts, packing, kernels: ``timing.engine_seconds``).  Since
d1a9f65 the CUDA engine stores each dataset's sequences by length itself
(:meth:`bulkem.data.Ragged.units_by_length`): both rows should then be alike; run an older
tree beside it for the A/B (``PYTHONPATH=old python old/benchmarks/exp_unit_order.py``).

    python benchmarks/exp_unit_order.py --datasets 1000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_hmm import fit_options, make_batch
from timing import engine_seconds

import bulkem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--emission", default="categorical")
    args = ap.parse_args()
    data = make_batch(args.datasets, emission=args.emission)
    by_len = [sorted(d, key=len) for d in data]
    opts = {**fit_options(args.emission, args.starts, args.iters), "backend": args.backend}
    engine = engine_seconds()
    bulkem.fit(data[:2], **{**opts, "n_starts": 2, "max_iter": 2})  # compile
    n = args.datasets * args.starts
    print("| order | fits/s | whole call, best s | engines s (that call) | mean loglik |\n"
          "|---|---|---|---|---|")
    for name, d in (("as drawn", data), ("sorted by length", by_len), ("as drawn", data)):
        best, best_engine = np.inf, np.inf
        for _ in range(args.repeat):
            engine[0] = 0.0
            t0 = time.perf_counter()
            res = bulkem.fit(d, **opts)
            t = time.perf_counter() - t0
            if t < best:
                best, best_engine = t, engine[0]
        print(f"| {name} | {n / best:,.0f} | {best:.3f} | {best_engine:.3f} | "
              f"{res.summary.loglik.mean():.6f} |", flush=True)


if __name__ == "__main__":
    main()
