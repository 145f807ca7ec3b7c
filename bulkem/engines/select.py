"""How a batch's fits map onto the hardware: the strategies, chosen in one place.

========================  =================================  ===========================
strategy                  when                               runs
========================  =================================  ===========================
``many_states``           an HMM of more than                the GPU: a matrix product per
                          ``config.HMM_MANY_STATES`` states  time step over all sequences
                          on the GPU                         (``models/hmm/many.py``)
``large``                 a few mixture fits of datasets of  every core / the whole GPU on
                          at least ``config.LARGE_MIN_OBS``  one fit at a time
                          observations                       (``models/mixture/wide.py``)
``wide``                  a few fits of datasets of many     a thread per unit over the
                          units (sequences, runs)            machine (``engines/wide.py``)
``bulk``                  everything else: many fits         a fit per CPU thread
                                                             (``engines/cpu.py``), or the
                                                             whole EM loop of each fit in
                                                             one GPU kernel (``cuda/``)
========================  =================================  ===========================

The first rule that holds chooses.  Each rule lives beside its engine; this module only
orders them.  A CPU-only fit never imports ``numba.cuda``.
"""

from __future__ import annotations

from collections.abc import Callable

STRATEGIES = ("many_states", "large", "wide", "bulk")


def choose(job, engine: str) -> str | None:
    """The strategy that runs ``job``'s fits on ``engine`` ("cpu" or "cuda"); None if no fits."""
    if not len(job.fit_ds):
        return None
    from ..models.mixture import wide as large
    from . import wide

    if engine == "cuda":
        from ..models.hmm import many

        if many.use_many_states(job, engine):
            return "many_states"
    if large.use_large(job, engine):
        return "large"
    if wide.use_wide(job, engine):
        return "wide"
    return "bulk"


def run(job, engine: str, progress, on_starts: Callable[[], None] | None = None) -> str | None:
    """Run every fit of ``job`` in place with the strategy :func:`choose` picks; return it.

    ``on_starts()``, if given, is called once the starting values are drawn (the CUDA engine
    calls it while the GPU runs).
    """
    strategy = choose(job, engine)
    if strategy == "many_states":
        from ..models.hmm import many

        many.run_fits(job, progress, on_starts)
    elif strategy == "large":
        from ..models.mixture import wide as large

        large.run_fits(job, progress, engine, on_starts)
    elif strategy == "wide":
        from . import wide

        wide.run_fits(job, progress, engine, on_starts)
    elif strategy == "bulk":
        if engine == "cuda":
            from . import cuda as eng
        else:
            from . import cpu as eng
        eng.run_fits(job, progress, on_starts)
    return strategy
