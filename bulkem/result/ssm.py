"""What can be computed from a state-space fit: the fitted model, smoothed signals, scores."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..tuning import MAX_ITER
from .base import FitResult, per_dataset, seeded_draws


class SSMResult(FitResult):
    """Result of :func:`bulkem.fit` with ``family="ar"`` or ``family="local_level"``.

    The tables of :class:`FitResult`, with ``components`` one row per
    (dataset, parameter) of the best start: ``dataset, parameter, value``,
    the parameters ``phi_1 .. phi_p, state_var, obs_var`` (AR) or ``level0,
    state_var, obs_var`` (local level; ``state_var, obs_var`` with
    ``prior="diffuse"``), in that order (``start_values`` the same per
    start).  ``summary.n_obs`` counts the observed (not missing)
    steps.  For the AR family, ``summary`` and ``starts`` also have
    ``ar_radius``: the spectral radius of the fitted companion matrix (the
    largest modulus of the inverse AR roots; < 1 is stationary).  Fits
    are stationary by construction (the prior is the stationary law), so a
    radius near 1 means the data pull towards a unit root: ``summary.message``
    says so from ``Tuning.ssm_ar_radius_warn`` on.
    """

    @classmethod
    def assemble(cls, model, packed, job, n_starts, seed, backend, dtype, elapsed,
                 early: dict | None = None) -> SSMResult:
        res = super().assemble(model, packed, job, n_starts, seed, backend, dtype, elapsed,
                               early)
        if model.family != "ar":
            return res
        from ..models.ssm.model import ar_radius

        rad = ar_radius(job.params[:, :model.order])
        done = job.status <= MAX_ITER
        res.starts["ar_radius"] = np.where(done, rad, np.nan)
        s = res.summary
        best = np.full(len(s), np.nan)
        for j, d in enumerate(s["dataset"]):
            if d in res._best:
                best[j] = ar_radius(res._best[d][0][:model.order])[0]
        s["ar_radius"] = best
        near = best >= job.tuning.ssm_ar_radius_warn
        if near.any():
            note = (" near the unit circle: the stationary prior holds the fit inside; the "
                    "data may not be stationary (try family='local_level')")
            msg = s["message"].to_numpy(dtype=object).copy()
            for j in np.flatnonzero(near):
                msg[j] = "; ".join(x for x in (msg[j], f"ar_radius {best[j]:.6g}{note}") if x)
            s["message"] = msg
        return res

    # --- the fitted model -----------------------------------------------------------------

    can_resample = True

    def replicates(self, B: int, seed: int) -> list:
        """:meth:`FitResult.replicates`: ``B`` sets of series of each fitted dataset's
        lengths, missing where its series are, drawn from its fitted state-space model.

        With ``prior="diffuse"`` (a flat prior: no draws of the first level) each series
        starts, at its first observed step, from its smoothed level there
        (``E[x_f | y]`` under the fitted model, the same in every replicate); the steps
        before it are missing, as in the data."""
        data = self._packed.data

        def draw(item, rng):
            v, k = item
            ss = self._model.state_space(self._model.as_dict(self._best[v][0]))
            units = range(data.groups[k], data.groups[k + 1])
            given = [data.values[data.units[u]:data.units[u + 1]] for u in units]
            if ss.is_diffuse:
                drawn = _simulate_from_first(ss, given, B, rng)
            else:
                drawn = _simulate(ss, np.tile([len(y) for y in given], B), rng)
            return [[np.where(np.isnan(y), np.nan, x)
                     for y, x in zip(given, drawn[b * len(given):], strict=False)]
                    for b in range(B)]

        return seeded_draws(draw, self._valid_index().items(), seed)

    @per_dataset
    def state_space(self, dataset: Any):
        """The dataset's fitted model as a :class:`bulkem.StateSpace` (with its prior).

        Usable with :func:`bulkem.kalman_loglik`.  AR: ``StateSpace.ar(phi,
        state_var, obs_var)`` with the stationary prior; local level: ``x_1 ~
        N(level0, state_var)``, or with ``prior="diffuse"``
        ``StateSpace.local_level(state_var, obs_var, diffuse=True)``.
        """
        return self._model.state_space(self.params(dataset))

    def _series(self, dataset: Any, series: Any) -> np.ndarray:
        if isinstance(series, (int, np.integer)) and not isinstance(series, bool):
            packed = self._packed
            pos = next((i for i, k in enumerate(packed.ids) if k == dataset), None)
            where = np.flatnonzero(packed.valid == pos) if pos is not None else []
            if not len(where):
                self._get(dataset)  # raises, saying why
            data = packed.data
            g = data.groups[where[0]]
            n = data.groups[where[0] + 1] - g
            if not 0 <= series < n:
                raise IndexError(f"dataset {dataset!r} has {n} series; got series = {series}.")
            return data.values[data.units[g + series]:data.units[g + series + 1]]
        return self._new(series)

    def _new(self, series: Any) -> np.ndarray:
        """New observations of one series, checked for what the filter needs.

        Any 1-D series of finite values or NaN (missing) with at least one
        step: scoring and smoothing under a fitted model need no variance of
        the data, nor as many steps as the state has values.
        """
        try:
            y = np.asarray(series, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"series holds non-numeric values ({err}); expected a 1-D array of "
                            "numbers (NaN for a missing step).") from None
        if y.ndim != 1:
            raise ValueError(f"series has shape {y.shape}; expected a 1-D array, or the "
                             "position of one of the dataset's series.")
        if not len(y):
            raise ValueError("series has 0 steps; expected at least 1.")
        inf = int(np.count_nonzero(np.isinf(y)))
        if inf:
            raise ValueError(f"series: {inf} of {len(y)} values are infinite; expected finite "
                             "numbers, or NaN for a missing step.")
        return y

    @per_dataset
    def smooth(self, dataset: Any, series: Any = 0) -> pd.DataFrame:
        """The smoothed signal (``z_t`` of the AR process, or the level) of one series.

        Parameters
        ----------
        dataset : identifier
            As in ``summary["dataset"]``: whose best fit to use.
        series : int or array-like
            The position of one of the dataset's series (default the first), or
            new observations (1-D, NaN for a missing step).

        Returns
        -------
        pandas.DataFrame
            One row per step: ``step`` (from 0), ``y`` (the observation, NaN if
            missing), ``mean`` and ``var``: ``E[z_t | y]`` and ``Var(z_t | y)``
            under the fitted model, given the whole series.  With ``prior="diffuse"``
            the steps before the first observed one ``f`` have the level at ``f`` less
            the random walk's steps: its mean, and its variance plus ``(f - t)
            state_var``.
        """
        from ..engines.cpu import kalman as kalman_cpu

        y = self._series(dataset, series)
        ss = self.state_space(dataset)
        if ss.is_diffuse:
            mean, var = _smooth_diffuse_level(y, ss)
            return pd.DataFrame({"step": np.arange(len(y)), "y": y, "mean": mean, "var": var})
        out = kalman_cpu.smooth(y, ss)
        if out is None:
            raise ValueError("the smoother failed: an innovation or predicted covariance was "
                             "not positive definite.")
        n, ms, Ps = len(y), out["mean"], out["cov"]
        return pd.DataFrame({"step": np.arange(n), "y": y, "mean": ms[:, 0], "var": Ps[:, 0, 0]})

    @per_dataset
    def score(self, dataset: Any, series: Any) -> float:
        """Log-likelihood of series under a dataset's fitted model (their sum).

        Parameters
        ----------
        dataset : identifier
            As in ``summary["dataset"]``.
        series : array-like or list of array-like
            One series (1-D, NaN for a missing step) or a list of series; any
            length from one step, constant or not.

        Returns
        -------
        float
            The sum of the series' log marginal likelihoods
            (:func:`bulkem.kalman_loglik` under :meth:`state_space`).

        Raises
        ------
        ValueError
            For a series with infinite values, no step or no observed step,
            or whose log-likelihood is not a finite number (the message says
            which series and why).
        """
        from ..engines.cpu import kalman as kalman_cpu
        from ..models.ssm.linear import pack_series
        from ..models.ssm.plan import not_finite, not_positive_definite
        from ..models.ssm.statespace import StateSpace

        many = isinstance(series, (list, tuple)) and len(series) and not np.isscalar(series[0])
        ys = [self._new(s) for s in series] if many else [self._new(series)]
        ss = self.state_space(dataset)
        models, first = [ss], 0.0
        if ss.is_diffuse:  # a flat first level: each series given its first observed step
            p = self.params(dataset)
            sv, ov = float(p["state_var"]), float(p["obs_var"])
            rest, models = [], []
            for k, y in enumerate(ys):
                seen = np.flatnonzero(~np.isnan(y))
                if not len(seen):
                    raise ValueError(f"series {k} cannot be scored: no observed step")
                rest.append(y[seen[0] + 1:])
                models.append(StateSpace.local_level(sv, ov, level0=y[seen[0]],
                                                     level_var=ov + sv))
            first = -0.5 * math.log(2.0 * math.pi) * len(ys)
            ys = rest
        # (after the first observed step a series may have none left: its term is the first's)
        keep = [k for k, y in enumerate(ys) if np.any(~np.isnan(y))] if first else range(len(ys))
        if not keep:
            return first
        pairs = [(k, ys[k].reshape(-1, 1)) for k in keep]
        one = len(models) == 1
        batch, messages, _ = pack_series(pairs, models if one else [models[k] for k in keep],
                                         one, np.float64)
        for (k, _), why in zip(pairs, messages, strict=True):
            if why is not None:
                raise ValueError(f"series {k} cannot be scored: {why}")
        out = kalman_cpu.exact(batch)  # (the engine of bulkem.kalman_loglik(..., backend="cpu"))
        for j, (k, y) in enumerate(pairs):
            if out.fail[j] >= 0:
                why = not_positive_definite(int(out.fail[j]))
                raise ValueError(f"series {k} cannot be scored: {why}")
            if not np.isfinite(out.loglik[j]):
                why = not_finite(out.loglik[j], y[:, 0], "float64")
                raise ValueError(f"series {k} cannot be scored: {why}")
        return first + float(out.loglik.sum())


def _root(S: np.ndarray) -> np.ndarray:
    """A square root ``L L^T = S`` of a covariance that may be singular (an AR state's)."""
    w, V = np.linalg.eigh(np.asarray(S, dtype=np.float64))
    return V * np.sqrt(np.clip(w, 0.0, None))


def _simulate(ss, lengths: np.ndarray, rng: np.random.Generator,
              x0: np.ndarray | None = None) -> list[np.ndarray]:
    """Series of the given lengths from one linear-Gaussian model, all stepped together:
    ``x_1 ~ N(m0, P0)`` (or ``x_1 = x0``, shape (n, dim_state)), ``x_t = F x_{t-1} + w_t``,
    ``y_t = H x_t + v_t`` (1-D series for one observed dimension)."""
    F, H = np.asarray(ss["F"], np.float64), np.asarray(ss["H"], np.float64)
    LQ, LR, LP = _root(ss["Q"]), _root(ss["R"]), _root(ss["P0"])
    n, T, S, O = len(lengths), int(lengths.max(initial=0)), F.shape[0], H.shape[0]
    y = np.empty((n, T, O))
    if x0 is None:
        x = np.asarray(ss["m0"], np.float64) + rng.standard_normal((n, S)) @ LP.T
    else:
        x = np.array(x0, dtype=np.float64)
    for t in range(T):
        if t:
            x = x @ F.T + rng.standard_normal((n, S)) @ LQ.T
        y[:, t] = x @ H.T + rng.standard_normal((n, O)) @ LR.T
    return [y[i, :lengths[i], 0] if O == 1 else y[i, :lengths[i]] for i in range(n)]


def _smooth_diffuse_level(y: np.ndarray, ss) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed means and variances of a local level with a flat prior (``ss`` diffuse).

    From the first observed step ``f`` the filtered level is ``N(y_f, obs_var)``: the
    proper prior ``N(y_f, obs_var)`` at ``f`` with ``y_f`` left out gives the same filter,
    so the engines' smoother runs from there; before ``f`` the level is the one at ``f``
    less the random walk's steps.
    """
    from ..engines.cpu import kalman as kalman_cpu
    from ..models.ssm.statespace import StateSpace

    seen = np.flatnonzero(~np.isnan(y))
    if not len(seen):
        raise ValueError("the series has no observed step: under the diffuse (flat) prior its "
                         "level is unknown.")
    f = int(seen[0])
    q, r = float(ss.Q[0, 0]), float(ss.R[0, 0])
    rest = np.array(y[f:], dtype=np.float64)
    first = rest[0]
    rest[0] = np.nan
    out = kalman_cpu.smooth(rest, StateSpace.local_level(q, r, first, r))
    if out is None:
        raise ValueError("the smoother failed: an innovation or predicted covariance was "
                         "not positive definite.")
    mean, var = np.empty(len(y)), np.empty(len(y))
    mean[f:], var[f:] = out["mean"][:, 0], out["cov"][:, 0, 0]
    mean[:f] = mean[f]
    var[:f] = var[f] + q * np.arange(f, 0, -1)
    return mean, var


def _simulate_from_first(ss, given: list, B: int, rng: np.random.Generator) -> list:
    """``B`` replicates of the series ``given`` under a diffuse local level: each from its
    first observed step on, starting at its smoothed level there; NaN before it."""
    firsts = np.array([int(np.argmax(~np.isnan(y))) for y in given])
    levels = np.array([_smooth_diffuse_level(y, ss)[0][f] for y, f in zip(given, firsts,
                                                                          strict=True)])
    lengths = np.array([len(y) for y in given]) - firsts
    drawn = _simulate(ss, np.tile(lengths, B), rng, np.tile(levels, B)[:, None])
    lead = np.tile(firsts, B)
    return [np.r_[np.full(k, np.nan), x] for k, x in zip(lead, drawn, strict=True)]
