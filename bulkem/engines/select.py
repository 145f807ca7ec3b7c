"""How a batch's fits map onto the hardware: the strategies and their rules, in one place.

========================  =================================  ===========================
strategy                  when                               runs
========================  =================================  ===========================
``exact``, ``scan``,      the Kalman likelihood of a         the sequential filter, a
``splash``                ``state_space`` model              series per CPU task or GPU
                          (``method=`` names one)            thread; the filter parallel
                                                             over time; the windowed
                                                             approximation
                                                             (``cpu/kalman.py``,
                                                             ``cuda/kalman.py``)
``many_states``           an HMM of more than                the GPU: a matrix product per
                          ``tuning.hmm_many_states`` states  time step over all sequences
                          on the GPU                         (``cuda/many_states.py``)
``large``                 a few mixture fits of datasets of  every core / the whole GPU on
                          at least ``tuning.large_min_obs``  one fit at a time
                          observations                       (``cpu/large.py``,
                                                             ``cuda/large.py``)
``wide``                  a few fits of datasets of at       a thread per unit over the
                          least ``tuning.wide_min_units``    machine (``cpu/wide.py``,
                          units (sequences, runs)            ``cuda/wide.py``)
``bulk``                  everything else: many fits         a fit per CPU thread
                                                             (``cpu/bulk.py``), or the
                                                             whole EM loop of each fit in
                                                             one GPU kernel (``cuda/``)
========================  =================================  ===========================

The first rule that holds chooses (``tuning`` is the job's :class:`bulkem.tuning.Tuning`;
``tuning.strategy`` names one to take wherever it applies).  "A few fits" is fewer than
the CPU's Numba threads, or at most ``tuning.large_max_fits_cuda``
(``wide_max_fits_cuda``) on the GPU, where one warp per fit would leave most of it idle.
A job that keeps its E-step statistics (``Job.stats``: standard errors from the score)
runs the bulk strategy.  A CPU-only fit never imports ``numba.cuda``.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

STRATEGIES = ("exact", "scan", "splash", "many_states", "large", "wide", "bulk")
KALMAN = ("exact", "scan", "splash")


def _few_big_fits(job, engine: str, sizes: np.ndarray, min_size: int, max_fits_cuda: int) -> bool:
    """Few fits (see above), each of a dataset of at least ``min_size`` (``sizes[d]``)."""
    n_fits = len(job.fit_ds)
    few = n_fits <= max_fits_cuda if engine == "cuda" else n_fits < numba.get_num_threads()
    return n_fits > 0 and few and int(sizes[job.fit_ds].min()) >= min_size


def use_many_states(job, engine: str) -> bool:
    """An HMM on the GPU with more than ``tuning.hmm_many_states`` states."""
    m, tuning = job.model, job.tuning
    if engine != "cuda" or m.name != "hmm":
        return False
    if tuning.strategy not in (None, "many_states"):
        return False
    if m.n_states <= tuning.hmm_many_states and tuning.strategy is None:
        return False
    from .cuda.many_states import MAX_SYMBOLS

    if m.emission.name != "categorical" or m.K > MAX_SYMBOLS:
        raise ValueError(
            f"n_components = {m.n_states} states with {m.emission.name} emissions on the GPU: "
            f"more than tuning.hmm_many_states = {tuning.hmm_many_states} states runs on the "
            f"GPU for categorical emissions of at most {MAX_SYMBOLS} symbols; use "
            "backend='cpu', or fewer states.")
    if job.n_obs is not None and int(job.n_obs.sum()) < len(job.data.values):
        raise ValueError(
            f"n_components = {m.n_states} states on the GPU with missing observations (NaN): "
            f"more than tuning.hmm_many_states = {tuning.hmm_many_states} states runs on the "
            "GPU without missing steps; use backend='cpu', or fill the missing steps.")
    return True


def use_large(job, engine: str) -> bool:
    """A few mixture fits of datasets of at least ``tuning.large_min_obs`` observations
    (on the GPU, of a model that fits the tiled kernel's shared memory and whose M-step
    treats components apart: :func:`.cuda.large.plan`)."""
    from ..models.mixture.model import MixtureModel

    m, tuning = job.model, job.tuning
    if not isinstance(m, MixtureModel) or tuning.strategy not in (None, "large"):
        return False
    if tuning.strategy is None and not _few_big_fits(
            job, engine, job.data.dataset_sizes(), tuning.large_min_obs,
            tuning.large_max_fits_cuda):
        return False
    if engine == "cuda":
        if m.weighted:  # (the tiled kernels have no weights: the bulk engine fits them)
            return False
        from .cuda.large import plan

        return plan(m.family, m.n_components, m.n_dims, job.dtype, tuning) is not None
    return True


def use_wide(job, engine: str) -> bool:
    """A few fits of a model of units (``unit_items``), each dataset of at least
    ``tuning.wide_min_units`` units."""
    tuning = job.tuning
    if not job.model.unit_items or tuning.strategy not in (None, "wide"):
        return False
    return tuning.strategy == "wide" or _few_big_fits(
        job, engine, np.diff(job.data.groups), tuning.wide_min_units, tuning.wide_max_fits_cuda)


def choose(job, engine: str) -> str | None:
    """The strategy that runs ``job``'s fits on ``engine`` ("cpu" or "cuda"); None if no fits."""
    if not len(job.fit_ds):
        return None
    if job.model.name == "state_space":
        return job.model.method
    if job.stats is not None:  # (statistics out: the bulk engines keep them)
        return "bulk"
    if use_many_states(job, engine):
        return "many_states"
    if use_large(job, engine):
        return "large"
    if use_wide(job, engine):
        return "wide"
    return "bulk"


def run(job, engine: str, progress, on_starts: Callable[[], None] | None = None) -> str | None:
    """Run every fit of ``job`` in place with the strategy :func:`choose` picks; return it.

    ``on_starts()``, if given, is called once the starting values are drawn (the CUDA engine
    calls it while the GPU runs; the other strategies draw every start first).
    """
    strategy = choose(job, engine)
    if strategy is None:
        return None
    m = job.model
    if strategy == "large" or (m.name == "hmm" and m.n_states > job.tuning.hmm_many_states):
        # The GPU's large and many-states engines have their own EM loops, without the
        # accelerator: plain EM there, and on the CPU for the same batches (same fits).
        job.accel = 0
    if strategy in KALMAN:
        _filter(job, engine, strategy, on_starts)
        progress(len(job.fit_ds))
        return strategy
    if strategy == "bulk":
        if engine == "cuda":
            from .cuda import run_fits
        else:
            from .cpu.bulk import run_fits
        run_fits(job, progress, on_starts)
        return strategy
    job.start_in_place(on_starts)
    if strategy == "many_states":
        from .cuda.many_states import run_fits
    elif strategy == "large" and engine == "cuda":
        from .cuda.large import run_fits
    elif strategy == "large":
        from .cpu.large import run_fits
    elif engine == "cuda":
        from .cuda.wide import run_fits
    else:
        from .cpu.wide import run_fits
    if engine == "cuda":  # one fit at a time over a whole GPU: the first of the devices
        from .cuda.scheduler import cuda, devices

        with cuda.gpus[devices(job.tuning)[0]]:
            run_fits(job, progress)
    else:
        run_fits(job, progress)
    return strategy


def run_jobs(jobs: list, engine: str, progress, on_starts: list) -> list:
    """Run several jobs on the same data (a grid's sizes, one model each) in one engine run;
    return each one's strategy.

    On the GPU, jobs that all run the bulk strategy share one run of the scheduler
    (:func:`.cuda.scheduler.run_jobs`: every size's chunks on the same host threads and
    streams); otherwise each job runs as :func:`run` runs it, one after the other (on the
    CPU a grid of mixtures has one kernel for every size, ``Tuning(cpu_sizes="run-time")``).
    ``on_starts[k]()`` is called once job ``k``'s starts are drawn (on the GPU: once every
    job's are, while the GPU works).
    """
    if len(jobs) > 1 and engine == "cuda" and all(choose(j, engine) == "bulk" for j in jobs):
        from .cuda import scheduler

        scheduler.run_jobs(jobs, progress, lambda: [f() for f in on_starts])
        return ["bulk"] * len(jobs)
    return [run(job, engine, progress, f) for job, f in zip(jobs, on_starts, strict=True)]


def _filter(job, engine: str, strategy: str, on_starts: Callable[[], None] | None) -> None:
    """The Kalman likelihood of every fit (a series under a parameter set) by ``strategy``:
    ``job.loglik``, its status and, where the filter stopped, ``job.stopped_at``."""
    from ..models.ssm.linear import outcome
    from ..tuning import MAX_ITER

    if engine == "cuda":
        from .cuda import kalman
    else:
        from .cpu import kalman
    m, tuning = job.model, job.tuning
    if job.common_params is not None and len(job.common_params) == 1:
        rows = job.common_params  # one parameter set for every series: no per-fit copies
        job.init = job.params = np.broadcast_to(rows, (len(job.fit_ds), rows.shape[1]))
    else:
        job.draw_starts()
        rows = job.params = job.init  # evaluated at its parameters: the "fitted" ones
    if on_starts is not None:
        on_starts()
    def run(fits: slice):
        batch = m.batch(job.data, job.fit_ds[fits], rows if len(rows) == 1 else rows[fits],
                        job.dtype, job.n_obs)
        if strategy == "exact":
            return kalman.exact(batch, tuning=tuning)
        if strategy == "scan":
            return kalman.scan(batch, tuning=tuning)
        return kalman.splash(batch, int(m.window), m.broad_var, tuning=tuning)

    parts = [slice(0, len(job.fit_ds))]
    if engine == "cuda":  # the fits in parts of about equal values, a GPU (and thread) each
        from concurrent.futures import ThreadPoolExecutor

        from .cuda.scheduler import cuda, devices

        gpus = devices(tuning)
        sizes = np.cumsum(job.data.dataset_sizes()[job.fit_ds])
        cuts = np.searchsorted(sizes, sizes[-1] * np.arange(1, len(gpus)) / len(gpus)) \
            if len(gpus) > 1 and len(sizes) else []
        bounds = [0, *(int(c) for c in cuts), len(job.fit_ds)]
        on_gpu = [(g, slice(a, b))
                  for g, a, b in zip(gpus[:len(bounds) - 1], bounds[:-1], bounds[1:], strict=True)
                  if b > a]
        parts = [fits for _, fits in on_gpu]

        def on(k: int):
            with cuda.gpus[on_gpu[k][0]]:
                return run(parts[k])

        from .cuda.compat import SIMULATED

        if SIMULATED or len(parts) == 1:  # (the simulator: one thread, as the scheduler)
            outs = [on(k) for k in range(len(parts))]
        else:
            with ThreadPoolExecutor(len(parts)) as pool:
                outs = list(pool.map(on, range(len(parts))))
    else:
        outs = [run(parts[0])]
    for fits, out in zip(parts, outs, strict=True):
        job.loglik[fits] = out.loglik
        job.status[fits] = outcome(out.loglik, out.fail, MAX_ITER)
        if job.stopped_at is None:
            job.stopped_at = np.full(len(job.fit_ds), -1, dtype=np.int64)
        job.stopped_at[fits] = np.asarray(out.fail, dtype=np.int64)
