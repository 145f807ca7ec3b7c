"""What a mixture's component family supplies: the hooks behind the mixture's driver pieces.

A family is a small set of hooks.  The per-observation and per-iteration
hooks (``coef``, ``logdens``, ``accum``, ``mstep``) are plain Python
functions, written once and compiled twice: with ``numba.njit`` for the CPU
engine and as CUDA device functions for the GPU engine.  The mixture model
(:mod:`.model`, :mod:`.fused`) builds the pieces of the one EM driver
(:mod:`bulkem.fitting.driver`) from them; the one-large-dataset CUDA engine
(:mod:`bulkem.engines.cuda.large`) calls them in its own kernels.  They may
use only scalar arithmetic, the ``math`` module and 1-D array indexing, so
that both compilers accept them.

Layouts (``M`` components, ``D`` dimensions):

* ``params`` of one fit: ``M`` records of ``per_component(D)`` values, record
  ``l`` holding the blocks of component ``l`` (``blocks``), its weight first.
* ``feat``: the per-observation features of the whole batch, feature ``f`` of
  observation ``i`` at ``feat[f * stride + i]`` (structure of arrays, so that
  neighbouring GPU threads read neighbouring addresses).
* ``coef`` and ``stats`` of one fit: ``M`` blocks of ``n_coef(M, D) / M`` and
  ``n_stats(M, D) / M`` values, block ``l`` belonging to component ``l``.

What the engines rely on besides the signatures:

* the hooks treat components independently, so an engine may call ``coef``
  and ``mstep`` on one component's blocks (slices) with ``M = 1``, unless the
  family's ``coupled_mstep`` (a tied covariance: its M-step pools every
  component's statistics), which the engines that slice refuse (the
  one-large-dataset CUDA engine runs such a family in the bulk regime);
* ``accum(stats, m, r, ...)`` adds ``r`` times a vector of per-observation
  statistics to block ``m`` and touches nothing else, so that calling it with
  ``r = 1`` on a zeroed array gives that vector (the one-large-dataset CUDA
  engine stores it per observation of a tile, block ``m`` = row of the tile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# A log density below the float64 range is reported as minus this (its density is 0).
LOG_DENSITY_FLOOR = float(np.finfo(np.float64).max)


@dataclass(frozen=True)
class Family:
    """A model family: its sizes, its compiled-twice hooks and host helpers.

    Attributes
    ----------
    name : str
    ndim : int
        1 if observations are scalars, 2 if they are vectors.
    per_component : callable
        ``per_component(D) -> int``: parameters per component, weight included (the
        length of one record of ``blocks``; a plain function the kernels compile).
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
    check : callable
        ``check(values, M) -> str | None``: why a dataset cannot be fitted.
    outside : callable or None
        ``outside(values) -> mask``: the finite values ``check`` refuses (host NumPy, one
        flag per value: every dataset's at once, the vectorised screen of
        :meth:`MixtureModel.pack`); None: ``check`` refuses no finite value (only
        datasets too short or holding NaN or infinite values).
    features : callable
        ``features(values) -> ndarray (n_features, n_obs)``.
    obs_const : callable
        ``obs_const(values) -> ndarray (n_obs,)``: the part of the log density
        shared by all components, left out of ``logdens`` and added once.
    coef, logdens, accum, mstep : callable
        The compiled-twice hooks; see the module docstring.
    subset_init : numba dispatcher
        ``subset_init(x, idx, out)``: starting parameters from the
        observations ``x[idx[l]]`` drawn for each component ``l``.
    draw : callable, optional
        ``draw(records (M, per_component), components (n,), rng) -> values``: one value
        from each given component (host NumPy), for :meth:`sample` and the bootstrap.
    log_terms : callable
        ``log_terms(values, params, M) -> (base, logq)``, each an ndarray
        (n_obs, M), ``params`` one fit's (M P,) or a row per value (n_obs, M P):
        host NumPy ``log(w_l p_l(x_i)) = base - exp(logq)``, with
        ``base`` the normalising terms and ``logq`` the log of the centred,
        scaled quadratic term, both free of overflow (see
        :meth:`log_components`).
    order_key : callable
        ``order_key(params, M, D) -> ndarray (n_fits, M)``: components are
        listed in increasing order of this key.
    blocks : callable
        ``blocks(M, D) -> tuple of Block``: the parameter blocks of a component, in
        record order (:class:`bulkem.models.base.Block`, first axis ``component``):
        their names are the keys of user starting values and of ``FitResult.params``,
        their constraints give the free-parameter count and the values that must be
        positive.
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
    exact_coef, exact_logdens : callable
        Compiled-twice hooks of the exact pass (:mod:`.fused`):
        ``exact_coef(params, M, D, c)`` writes ``n_coef / M`` values per
        component, ``exact_logdens(c, m, D, feat, stride, i)`` returns
        ``log(w_m p_m(x_i))`` (less ``obs_const``) evaluated in centred,
        scaled form, accurate to a few rounding errors of its own size
        whatever the parameters.
    coef_bound : callable
        Compiled-twice ``coef_bound(c, tot, m, D) -> float``: an upper bound
        of ``sum_i sum_k |c[m, k] g_k(x_i)|`` (``c`` the linear coefficients)
        from the totals ``tot[k] = sum_i g_k(x_i)``: how large the linear
        form's terms get (:func:`.fused.make_bound`).
    logdens_tile, exact_logdens_tile : callable or None
        CPU hooks ``f(c, m, D, X, T, n, v)``: ``v[m T + t]`` = ``logdens``
        (``exact_logdens``) of observation ``t < n`` of a tile ``X[f T + t]``,
        with the same operations in the same order, written so that the loop
        over ``t`` is innermost and vectorises (:func:`.fused.make_pass`,
        ``tile``); None: the per-observation hooks in a loop, enough when
        they have no loop of their own.
    variants : dict
        ``fit(covariance_type=...)``: the family of each covariance type (the Gaussian's
        ``"diag"``, itself, ``"full"``, ``"tied"`` and ``"spherical"``); empty: the option
        is refused.
    coupled_mstep : bool
        ``mstep`` reads every component's statistics to write each component's parameters
        (a covariance shared by the components): it must run on the whole fit (``M``
        components at once), never on one component's slice.
    discrete : bool
        Values are counts (densities are probabilities at the integers: plots draw them
        there).
    reg_floored : str or None
        The block the M-step floors at ``reg_covar`` (the Gaussian's variances): a fit
        there is on its boundary.
    floors : tuple of (str, float)
        Blocks whose M-step holds values at a floor (a Poisson rate of a component of
        zeros): a fit there is on its boundary (no standard errors).
    score : callable or None
        Host NumPy ``score(params (n, M P), stats (n, n_stats), M, D) -> (n, M P)``: the
        gradient with respect to the parameters, at ``params``, of ``sum_m c_m(params) .
        stats_m`` (``c`` the linear coefficients, ``stats`` the E-step's at ``params``):
        by Fisher's identity the score of the log-likelihood (``Model.score``).  None:
        standard errors from log-likelihood values (:mod:`bulkem.fitting.information`).
    accum_tile : callable or None
        CPU hook ``accum_tile(P, R, M, D, X, T, t0, t1)``: adds ``accum``
        of the tile's observations ``t0 <= t < t1`` with weight ``R[t M + m]``
        for every component ``m < M`` to ``P``, laid out by
        statistic (``P[k M + m]``), each sum taking the observations in order
        with ``accum``'s operations (the same bits), the loop over the
        components innermost.  None: the CPU takes observations one at a time
        (``make_pass`` without ``tile``).
    accum_at : callable or None
        Compiled-twice ``accum_at(stats, m, r, D, feat, stride, i, c)``: as ``accum``, for a
        family whose statistics depend on the current parameters, read from the exact
        coefficients ``c`` (``exact_coef``): an E-step with a latent variable beside the
        component (the negative binomial's Poisson count of logarithmic summands).  Such a
        family needs no linear form: every E-step is the exact pass, summing every
        component's statistics (``accum`` then only gives the totals); no CPU tiles
        (``accum_tile`` None), no one-large-dataset CUDA engine.
    """

    name: str
    ndim: int
    per_component: Callable
    n_coef: Callable
    n_stats: Callable
    n_features: Callable
    subset_size: Callable
    min_obs: Callable
    check: Callable
    features: Callable
    obs_const: Callable
    coef: Callable
    logdens: Callable
    accum: Callable
    mstep: Callable
    subset_init: Callable
    log_terms: Callable
    order_key: Callable
    blocks: Callable
    centre_init: Callable | None = None
    draw: Callable | None = None
    default_init: str = "subset"
    linear_logdens: bool = False
    exact_coef: Callable | None = None
    exact_logdens: Callable | None = None
    coef_bound: Callable | None = None
    logdens_tile: Callable | None = None
    exact_logdens_tile: Callable | None = None
    accum_tile: Callable | None = None
    accum_at: Callable | None = None
    score: Callable | None = None
    outside: Callable | None = None
    floors: tuple = ()
    reg_floored: str | None = None
    discrete: bool = False
    coupled_mstep: bool = False
    variants: dict = field(default_factory=dict, hash=False, compare=False)

    def read(self, datasets, dataset_col: str, value_col, options: dict) -> list:
        """Any accepted input form -> ``(identifier, array)`` pairs (``data.as_datasets``)."""
        from ...data import as_datasets

        self._variant(options)
        return as_datasets(datasets, self.ndim, dataset_col, value_col)

    def model(self, pairs: list, n_components: int, options: dict):
        """The :class:`~bulkem.models.mixture.MixtureModel` of ``n_components`` for these data
        (of the family of ``options["covariance_type"]`` where the family has variants)."""
        from .model import MixtureModel

        n_dims = 1 if self.ndim == 1 else pairs[0][1].shape[1]
        return MixtureModel(self._variant(options), n_components, n_dims)

    def _variant(self, options: dict) -> Family:
        """The family that ``options`` ask for: this one, or a covariance type's."""
        extra = sorted(set(options) - ({"covariance_type"} if self.variants else set()))
        if extra:
            raise TypeError(
                f"unexpected keyword argument(s) {extra} for the {self.name!r} family; "
                + (f"it takes covariance_type ({', '.join(map(repr, self.variants))})."
                   if self.variants else "mixture families take none beyond bulkem.fit's own."))
        kind = options.get("covariance_type")
        if kind is None:
            return self
        if kind not in self.variants:
            raise ValueError(f"covariance_type={kind!r}: expected one of "
                             f"{', '.join(map(repr, self.variants))}.")
        return self.variants[kind]

    def n_params(self, n_components: int, n_dims: int = 1) -> int:
        """Length of one fit's parameter vector."""
        return n_components * self.per_component(n_dims)

    def log_components(self, values: np.ndarray, params: np.ndarray, n_components: int
                       ) -> np.ndarray:
        """``log(w_l p_l(x_i))`` of shape (n_obs, M) (host NumPy); -inf where it underflows."""
        base, logq = self.log_terms(values, params, n_components)
        with np.errstate(over="ignore", invalid="ignore"):
            return base - np.exp(logq)

    def log_density(self, values: np.ndarray, params: np.ndarray, n_components: int) -> np.ndarray:
        """Log of the fitted mixture density at each value (host NumPy).

        Finite everywhere: a point whose log density lies below the float64
        range (beyond ~1e154 standard deviations) gets ``-LOG_DENSITY_FLOOR``.
        """
        lc = self.log_components(values, params, n_components)
        top = np.max(lc, axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            safe = np.where(np.isfinite(top), top, 0.0)
            out = (top + np.log(np.sum(np.exp(lc - safe), axis=1, keepdims=True)))[:, 0]
        return np.where(np.isnan(out) | (out < -LOG_DENSITY_FLOOR), -LOG_DENSITY_FLOOR, out)

    def sample(self, params: np.ndarray, n_components: int, n: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` values drawn from one fit's mixture (host NumPy), and each one's component
        (from 0): ``(values (n,) or (n, D), components (n,))``."""
        if self.draw is None:
            raise NotImplementedError(f"the {self.name!r} family has no sampler")
        p = np.asarray(params, dtype=np.float64).reshape(n_components, -1)
        w = np.clip(p[:, 0], 0.0, None)
        comp = rng.choice(n_components, size=int(n), p=w / w.sum())
        return self.draw(p, comp, rng), comp

    def proba(self, values: np.ndarray, params: np.ndarray, n_components: int) -> np.ndarray:
        """Posterior probabilities of the components at each value (rows sum to 1).

        Where every component's log density underflows, the limit: the
        components with the smallest quadratic term share the point in
        proportion to their normalising terms.
        """
        base, logq = self.log_terms(values, params, n_components)
        with np.errstate(over="ignore", invalid="ignore"):
            lc = base - np.exp(logq)
            top = np.max(lc, axis=1, keepdims=True)
            e = np.exp(lc - np.where(np.isfinite(top), top, 0.0))
            lost = ~np.isfinite(top[:, 0])
            if lost.any():  # every density underflowed: the limit by (logq, base)
                lq = np.where(np.isnan(logq[lost]), np.inf, logq[lost])
                near = lq == lq.min(axis=1, keepdims=True)
                b = np.where(near, base[lost], -np.inf)
                bt = b.max(axis=1, keepdims=True)
                e[lost] = np.where(near, np.exp(b - np.where(np.isfinite(bt), bt, 0.0)), 0.0)
                bad = ~np.isfinite(e[lost].sum(axis=1)) | (e[lost].sum(axis=1) == 0)
                if bad.any():  # undefined everywhere (e.g. x <= 0): equal shares
                    rows = np.flatnonzero(lost)[bad]
                    e[rows] = 1.0
            return e / e.sum(axis=1, keepdims=True)
