"""What a model family supplies to the shared EM driver.

A family is a small set of hooks.  The per-observation and per-iteration
hooks (``coef``, ``logdens``, ``accum``, ``mstep``) are plain Python
functions, written once and compiled twice: with ``numba.njit`` for the CPU
engine and as CUDA device functions for the GPU engine (see
:mod:`bulkem.engines.driver`).  They may use only scalar arithmetic, the
``math`` module and 1-D array indexing, so that both compilers accept them.

Layouts (``M`` components, ``D`` dimensions):

* ``params`` of one fit: ``M`` blocks of ``per_component(D)`` values, block
  ``l`` starting with the weight of component ``l``.
* ``feat``: the per-observation features of the whole batch, feature ``f`` of
  observation ``i`` at ``feat[f * stride + i]`` (structure of arrays, so that
  neighbouring GPU threads read neighbouring addresses).
* ``coef`` and ``stats`` of one fit: ``M`` blocks of ``n_coef(M, D) / M`` and
  ``n_stats(M, D) / M`` values, block ``l`` belonging to component ``l``.

What the engines rely on besides the signatures:

* the hooks treat components independently, so an engine may call ``coef``
  and ``mstep`` on one component's blocks (slices) with ``M = 1``;
* ``accum(stats, m, r, ...)`` adds ``r`` times a vector of per-observation
  statistics to block ``m`` and touches nothing else, so that calling it with
  ``r = 1`` on a zeroed array gives that vector (the one-large-dataset CUDA
  engine stores it per observation of a tile, block ``m`` = row of the tile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Family:
    """A model family: its sizes, its compiled-twice hooks and host helpers.

    Attributes
    ----------
    name : str
    ndim : int
        1 if observations are scalars, 2 if they are vectors.
    per_component : callable
        ``per_component(D) -> int``: parameters per component, weight included.
    n_coef, n_stats : callable
        ``f(M, D) -> int``: sizes of the per-iteration coefficient array and of
        the sufficient-statistics array of one fit.
    n_features : callable
        ``n_features(D) -> int``: per-observation features stored for the kernels.
    subset_size : callable
        ``subset_size(D) -> int``: observations drawn per component by a
        random-subset start.
    min_obs : callable
        ``min_obs(M, D) -> int``: fewest observations a dataset may have.
    n_free : callable
        ``n_free(M, D) -> int``: free parameters, for AIC and BIC.
    check : callable
        ``check(values, M) -> str | None``: why a dataset cannot be fitted.
    features : callable
        ``features(values) -> ndarray (n_features, n_obs)``.
    obs_const : callable
        ``obs_const(values) -> ndarray (n_obs,)``: the part of the log density
        shared by all components, left out of ``logdens`` and added once.
    coef, logdens, accum, mstep : callable
        The compiled-twice hooks; see :mod:`bulkem.engines.driver`.
    subset_init : numba dispatcher
        ``subset_init(x, idx, out)``: starting parameters from the
        observations ``x[idx[l]]`` drawn for each component ``l``.
    log_components : callable
        ``log_components(values, params, M) -> ndarray (n_obs, M)``: host
        NumPy ``log(w_l p_l(x_i))``, for densities and scoring.
    param_columns : callable
        ``param_columns(params, M, D) -> dict``: table columns, one row per
        (fit, component), from ``params`` of shape (n_fits, n_params).
    order_key : callable
        ``order_key(params, M, D) -> ndarray (n_fits, M)``: components are
        listed in increasing order of this key.
    init_shapes : callable
        ``init_shapes(M, D) -> dict``: the keys of user starting values, in
        parameter order, and the shape each takes for one start.
    centre_init : numba dispatcher or None
        ``centre_init(x, centres, out)``: starting parameters from the
        k-means++ centres ``x[centres[l]]``; None if the family offers no
        k-means++ starts.
    default_init : str
        The ``init_method`` used when :func:`bulkem.fit` is given none.
    linear_logdens : bool
        True when ``logdens(c, m, ...)`` is ``sum_k c[S m + k] g_k`` with
        ``g`` the statistics vector that ``accum`` adds (``r = 1``) and
        ``S = n_coef / M = n_stats / M``: the log density is linear in the
        sufficient statistics, as for an exponential family in natural
        parameters.  The one-large-dataset CUDA engine then computes a tile's
        log densities as a matrix product; families without it run in the
        bulk regime there.
    """

    name: str
    ndim: int
    per_component: Callable
    n_coef: Callable
    n_stats: Callable
    n_features: Callable
    subset_size: Callable
    min_obs: Callable
    n_free: Callable
    check: Callable
    features: Callable
    obs_const: Callable
    coef: Callable
    logdens: Callable
    accum: Callable
    mstep: Callable
    subset_init: Callable
    log_components: Callable
    param_columns: Callable
    order_key: Callable
    init_shapes: Callable
    centre_init: Callable | None = None
    default_init: str = "subset"
    linear_logdens: bool = False

    def read(self, datasets, dataset_col: str, value_col, options: dict) -> list:
        """Any accepted input form -> ``(identifier, array)`` pairs (``data.as_datasets``)."""
        from ...data import as_datasets

        if options:
            raise TypeError(
                f"unexpected keyword argument(s) {sorted(options)} for the {self.name!r} family; "
                "mixture families take none beyond bulkem.fit's own."
            )
        return as_datasets(datasets, self.ndim, dataset_col, value_col)

    def model(self, pairs: list, n_components: int, options: dict):
        """The :class:`~bulkem.models.mixture.MixtureModel` of ``n_components`` for these data."""
        from .model import MixtureModel

        n_dims = 1 if self.ndim == 1 else pairs[0][1].shape[1]
        return MixtureModel(self, n_components, n_dims)

    def n_params(self, n_components: int, n_dims: int = 1) -> int:
        """Length of one fit's parameter vector."""
        return n_components * self.per_component(n_dims)

    def log_density(self, values: np.ndarray, params: np.ndarray, n_components: int) -> np.ndarray:
        """Log of the fitted mixture density at each value (host NumPy)."""
        lc = self.log_components(values, params, n_components)
        top = np.max(lc, axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):
            return (top + np.log(np.sum(np.exp(lc - top), axis=1, keepdims=True)))[:, 0]
