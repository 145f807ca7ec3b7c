"""The engines' time inside a whole call, for the benchmarks that print both."""

from __future__ import annotations

import time


def engine_seconds() -> list[float]:
    """Wrap ``bulkem.engines.select.run_jobs`` (starts, packing per chunk, kernels) so that
    its wall time is added to the returned one-item list; set ``[0]`` to 0 before a call."""
    from bulkem.engines import select

    run_jobs = select.run_jobs
    spent = [0.0]

    def timed(*args, **kw):
        t = time.perf_counter()
        try:
            return run_jobs(*args, **kw)
        finally:
            spent[0] += time.perf_counter() - t

    select.run_jobs = timed
    return spent
