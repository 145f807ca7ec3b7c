"""CUDA engine: every fit's whole EM loop on the GPU, all GPUs fed by one scheduler.

* :mod:`.compat`: what numba-cuda needs (numpy alias, simulator, exit hook);
* :mod:`.bulk`: the bulk kernel (a group of lanes per fit) and one chunk's launch;
* :mod:`.buffers`: a chunk's page-locked host and device buffers, pooled;
* :mod:`.scheduler`: chunks sized by free memory, host threads, all devices;
* :mod:`.wide`, :mod:`.large`, :mod:`.many_states`: one fit at a time over the whole
  GPU (few fits of many units, few mixture fits of many observations, HMMs of many
  states), as :mod:`bulkem.engines.select` chooses;
* :mod:`.kalman`, :mod:`.scan_warp`: the Kalman likelihoods (:func:`bulkem.kalman_loglik`).

:func:`run_fits` runs a job's bulk fits (the scheduler's).

Importing this package never fails for lack of a GPU; :func:`available`
says whether one can be used and, if not, why.
"""

from __future__ import annotations

from .compat import SIMULATED, _unload_each_library_once, available, cuda, numba_config

__all__ = ["SIMULATED", "available", "cuda", "numba_config", "run_fits",
           "_unload_each_library_once"]


def run_fits(job, progress, on_starts=None) -> None:
    """Run every fit of a :class:`bulkem.api.Job` on the GPUs, in place.

    ``on_starts()``, if given, runs in the calling thread once every start is
    drawn, while the GPUs still work.
    """
    from . import scheduler

    scheduler.run_fits(job, progress, on_starts)
