"""What the host steps of one issue-4 ``bulkem.fit`` cost on this machine, without a GPU.

    python benchmarks/host_costs.py [--repeat 7] [--pause 0.05]

Runs the host side of the CUDA path in the order ``fit`` runs it (validation
and packing, the job and its dataset keys, the starts, a first chunk's plan
and gather/features, the tables), ``--repeat`` times with a pause between
runs, and prints each step's median and best time and its page faults, so
that hosts where these steps are slow, and why, show.
"""

from __future__ import annotations

import argparse
import resource
import time

import numba
import numpy as np

import bulkem
from bulkem import api, models
from bulkem.engines.cuda import scheduler
from bulkem.result import MixtureResult as FitResult


def one_run(data, fam, dtype: str) -> list[tuple[str, float, int]]:
    steps = []
    clock = [time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt]

    def mark(label: str) -> None:
        now, faults = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        steps.append((label, now - clock[0], faults - clock[1]))
        clock[:] = [time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt]

    pairs = fam.read(data, "dataset", "value", {})
    model = fam.model(pairs, 2, {})
    packed = model.pack(pairs)
    mark("validate+pack")
    job = api.make_job(model, packed, 1000, 1, None, np.dtype(dtype), 100, 0.0)
    mark("job (keys)")
    job.draw_starts()
    mark("draw starts")
    first, counts = scheduler._fit_ranges(job)
    chunk = scheduler.plan_chunks(job, np.arange(25), 1 << 40, 10**6, (first, counts))[0]
    mark("plan 25 ds")
    scheduler.pack(job, chunk)
    mark("pack chunk")
    scheduler.pack(job, chunk)
    mark("pack again")
    early = FitResult.before_fits(model, packed, job, 1000)
    mark("before_fits")
    job.params[:] = job.init
    job.status[:] = 1
    job.loglik[:] = -1.0
    mark("(fake fits)")
    FitResult.assemble(model, packed, job, 1000, 1, "cuda", dtype, 0.0, early)
    mark("assemble")
    return steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--pause", type=float, default=0.05, help="seconds between runs")
    args = ap.parse_args()
    data = bulkem.datasets.simulate_demo(100, 2000, seed=1)
    fam = models.get("invgauss")
    for dtype in ("float64", "float32"):
        one_run(data, fam, dtype)  # compile, warm up
        runs = []
        for _ in range(args.repeat):
            runs.append(one_run(data, fam, dtype))
            time.sleep(args.pause)
        print(f"-- {dtype}  (numba {numba.threading_layer()}, {numba.get_num_threads()} threads)")
        print(f"{'step':<14} {'median ms':>9} {'best ms':>8} {'faults':>7}")
        for k, (label, _, _) in enumerate(runs[0]):
            t = np.array([r[k][1] for r in runs]) * 1e3
            faults = int(np.median([r[k][2] for r in runs]))
            print(f"{label:<14} {np.median(t):9.2f} {t.min():8.2f} {faults:7d}")


if __name__ == "__main__":
    main()
