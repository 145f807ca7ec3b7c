"""Fair CPU baselines: reference libraries in a process pool, one BLAS thread per worker.

A worker that keeps NumPy's whole BLAS thread pool contends with every other worker for
the cores: hmmlearn in a pool of 16 such workers ran 13 fits/s on a 16-core machine, where
one worker on one core with one BLAS thread ran 6.5-6.8 (2026-11-27).  Every pooled baseline
goes through :func:`rates`, which also times the same jobs one after another on one core,
so that the per-core rate is printed beside the pool's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor


def one_blas_thread() -> None:
    """Limit every BLAS/OpenMP pool of this process to one thread (a pool's initializer)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers each use one BLAS thread."""
    return ProcessPoolExecutor(workers, initializer=one_blas_thread)


def rates(fn: Callable, jobs: Sequence, workers: int | None = None,
          per_core_jobs: int = 4) -> tuple[float, float, int, list]:
    """Jobs per second of ``fn`` over ``jobs``: in a pool of ``workers`` (every core by
    default) and one at a time on one core (the first ``per_core_jobs``).

    Returns
    -------
    pool_rate, core_rate : float
        Jobs per second of the pool, and of one worker alone.
    workers : int
        The pool's size.
    results : list
        ``fn(job)`` for every job, in order.
    """
    workers = min(workers or os.cpu_count() or 1, len(jobs))
    with pool(1) as one:
        one.submit(fn, jobs[0]).result()  # imports and first-call costs, not timed
        t0 = time.perf_counter()
        k = max(1, min(per_core_jobs, len(jobs)))
        list(one.map(fn, jobs[:k]))
        core_rate = k / (time.perf_counter() - t0)
    with pool(workers) as many:
        list(many.map(fn, jobs[:workers]))  # every worker started and warm
        t0 = time.perf_counter()
        results = list(many.map(fn, jobs))
        pool_rate = len(jobs) / (time.perf_counter() - t0)
    return pool_rate, core_rate, workers, results
