"""What a model supplies to the one EM driver (:mod:`bulkem.fitting.driver`).

A fit is one (dataset, start).  A dataset is a set of *items*, the grain at
which the lanes sharing a fit split the E-step: the observations of a
mixture dataset, the sequences of a hidden-Markov dataset.  The driver knows
nothing about the model: it loops, reduces across lanes, stops and redoes
float32 failures; the model supplies small compiled pieces (:class:`Pieces`)
and their array sizes (:class:`Sizes`).

Every piece is plain Python written once and compiled for a
:class:`bulkem.kernels.target.Target` (CPU or GPU).  Pieces may use scalar
arithmetic, the ``math`` module, 1-D array indexing and tuples; model
dimensions (components, states, symbols) are compile-time constants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Sizes(NamedTuple):
    """Lengths of one fit's arrays (each allocated per lane by the engines).

    Attributes
    ----------
    params : int
        The parameter vector (float64).
    stats : int
        Sufficient statistics (float64), summed over the fit's lanes.
    totals : int
        Per-fit constants computed once before the iterations (float64).
    coef : int
        Per-iteration float64 coefficients.
    work : int
        Per-iteration coefficients in the compute dtype.
    scratch : int
        Per-lane E-step scratch in the compute dtype.
    buf_per_len : int
        Per-lane buffer, in values of the compute dtype per observation of
        the longest item (0: none).  Sequence models keep their forward
        vectors there; the CPU allocates it per fit, the GPU in global memory.
    """

    params: int
    stats: int
    totals: int
    coef: int
    work: int
    scratch: int
    buf_per_len: int = 0


class Pieces(NamedTuple):
    """A model's compiled E-step and M-step, for one compute dtype and target.

    ``data`` is the model's tuple of batch arrays (:meth:`Model.kernel_data`),
    ``lo, hi`` a dataset's items; a lane takes items ``lo, lo + step, ... < hi``.

    Attributes
    ----------
    setup : callable
        ``setup(data, lo, hi, step, tot)``: adds this lane's part of the
        per-fit constants to ``tot`` (the driver sums ``tot`` over lanes).
    prepare : callable
        ``prepare(params, tot, coef, work) -> base``: the iteration's
        coefficients from the parameters; returns the part of the
        log-likelihood that follows from ``tot`` (NaN if a coefficient is
        not finite).  May reorder exchangeable components of ``params``.
    estep : callable
        ``estep(data, lo, hi, step, work, stats, scratch, buf, xc) -> ll``:
        adds this lane's items' expected statistics to ``stats[first_stat:]``
        and returns their log-likelihood (``xc``: ``EXP_CONSTS``).
    complete : callable
        ``complete(stats, tot)``: the statistics before ``first_stat``, after
        the reduction (or nothing).
    mstep : callable
        ``mstep(stats, params, n, reg) -> status`` (0: ok), ``n`` the
        dataset's number of items, ``reg`` the model's regularisation.
    first_stat : int
        The first statistic the E-step sums.
    """

    setup: Callable
    prepare: Callable
    estep: Callable
    complete: Callable
    mstep: Callable
    first_stat: int = 0
