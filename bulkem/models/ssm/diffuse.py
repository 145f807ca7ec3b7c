"""The exact diffuse initialisation of :func:`bulkem.kalman_loglik` (Durbin and Koopman).

A :class:`~.statespace.StateSpace` with ``diffuse`` states has the prior ``x_1 ~ N(m0,
P* + kappa P_inf)``, ``P_inf`` the diagonal of the diffuse mask, and its exact diffuse
log-likelihood is the limit as ``kappa -> inf`` of the log-likelihood plus ``(rank P_inf /
2) log kappa`` (Durbin and Koopman 2012, section 5.2 and 7.2.2).  It is computed in two
parts:

* the *diffuse phase*, here in NumPy, every series at once: the univariate exact diffuse
  filter of Koopman and Durbin (2000) (DK 2012, section 6.4: one observed value at a time,
  after ``y <- L^{-1} y``, ``H <- L^{-1} H`` with ``R = L L'`` when ``R`` is not diagonal),
  which carries ``a, P*, P_inf``.  A value with ``F_inf = z' P_inf z > TOL`` adds ``-(log
  2 pi + log F_inf) / 2``; one with ``F_inf`` at most ``TOL`` the usual ``-(log 2 pi + log
  F* + v^2 / F*) / 2``.  At the start of each step the phase ends once ``P_inf`` is zero
  (its squared Frobenius norm at most ``TOL``): one step for the local level, about
  ``dim_state`` steps in general, more with missing values;
* the rest of every series, from the step where its phase ended, by any engine of
  :func:`bulkem.kalman_loglik` (exact, scan, splash; CPU or GPU), under the proper prior
  ``N(a, P*)`` the phase ended with: the engines are not changed.

This is statsmodels' exact diffuse filter (``initialization="diffuse"``, its default
tolerance ``1e-10``) and its log-likelihood with every term kept (``loglikelihood_burn =
0``, statsmodels' default with ``use_exact_diffuse=True``).  One difference at the edge:
where ``F_inf`` and ``F*`` are both zero statsmodels skips the value; here the series gets
status ``failed`` (the innovation variance is not positive), as the engines' filter does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ...data import Packed, Ragged
from ...tuning import DEGENERATE_NONFINITE, MAX_ITER, NOT_POSITIVE_DEFINITE
from .statespace import BLOCKS, StateSpace

# statsmodels' tolerance_diffuse: an F_inf above it is a diffuse update; a P_inf whose
# squared Frobenius norm is at most it ends the diffuse phase.  (Scale-free for P_inf,
# which starts at the identity on the diffuse states.)
TOL = 1e-10
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Phase(NamedTuple):
    """The diffuse phase of every series (``n`` series, state dimension ``nx``).

    Attributes
    ----------
    loglik : ndarray of shape (n,)
        The sum of its terms.
    step : ndarray of shape (n,)
        The first step after it (from 0; the series' length when the phase took it all).
    m : ndarray of shape (n, nx)
        The predicted mean of that step.
    P : ndarray of shape (n, nx, nx)
        Its predicted (proper) covariance ``P*``.
    fail : ndarray of shape (n,)
        The step whose innovation variance was not positive (status ``failed``), else -1.
    """

    loglik: np.ndarray
    step: np.ndarray
    m: np.ndarray
    P: np.ndarray
    fail: np.ndarray


class Evaluated(NamedTuple):
    """What :func:`evaluate` gives :func:`bulkem.kalman_loglik` (a :class:`~bulkem.api.Job`'s
    outputs): per series its log-likelihood, status code and the step where it failed."""

    loglik: np.ndarray
    status: np.ndarray
    stopped_at: np.ndarray


def common_mask(models: Sequence[StateSpace]) -> np.ndarray | None:
    """The diffuse mask of a batch's models: None if no state of any is diffuse.

    Raises
    ------
    ValueError
        If the models' masks differ.
    """
    masks = {tuple(m.diffuse.tolist()) for m in models}
    if len(masks) > 1:
        raise ValueError(f"the models have different diffuse states ({sorted(masks)}); every "
                         "model of a batch needs the same ones. Run the groups separately.")
    mask = np.array(masks.pop(), dtype=bool)
    return mask if mask.any() else None


def _whiten(H: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(H*, r*, L)`` of models (k, ny, nx), (k, ny, ny): with ``R`` diagonal, ``H`` and its
    diagonal (``L`` None); else ``L^{-1} H``, ones and ``L`` (``R = L L'``)."""
    ny = R.shape[1]
    off = R - R * np.eye(ny)
    if not np.any(off):
        return H, np.diagonal(R, axis1=1, axis2=2).copy(), None
    try:
        L = np.linalg.cholesky(R)
    except np.linalg.LinAlgError:
        raise ValueError("the exact diffuse filter takes the observations one value at a time, "
                         "which needs R diagonal or positive definite (R = L L'); this R is "
                         "neither. Make R positive definite, or give the model a proper prior "
                         "(diffuse=False with m0, P0).") from None
    return np.linalg.solve(L, H), np.ones((len(R), ny)), L


def _of(A: np.ndarray, live: np.ndarray, one: bool) -> np.ndarray:
    """The models of the series ``live``: ``A`` itself where one model serves every series."""
    return A if one else A[live]


def phase(values: np.ndarray, units: np.ndarray, F: np.ndarray, H: np.ndarray,
          Q: np.ndarray, R: np.ndarray, m0: np.ndarray, P0: np.ndarray,
          mask: np.ndarray) -> Phase:
    """Run the exact diffuse filter over every series until its diffuse phase ends.

    Parameters
    ----------
    values : ndarray of shape (n_steps_total, ny)
        Every series' observations, one after the other (NaN: missing; a row with any
        NaN is missing as a whole, as for the engines).
    units : ndarray of shape (n + 1,)
        Where each series starts in ``values``.
    F, Q, P0 : ndarray of shape (k, nx, nx)
    H : ndarray of shape (k, ny, nx)
    R : ndarray of shape (k, ny, ny)
    m0 : ndarray of shape (k, nx)
        The model of every series (``k = 1``) or of each (``k = n``).
    mask : ndarray of shape (nx,)
        The diffuse states.

    Returns
    -------
    Phase
    """
    n = len(units) - 1
    nx = F.shape[1]
    lengths = np.diff(units)
    one = len(F) == 1
    Hw, rw, Lw = _whiten(H, R)
    logdet_l = np.zeros(len(R)) if Lw is None else np.log(
        np.diagonal(Lw, axis1=1, axis2=2)).sum(axis=1)
    a = np.broadcast_to(m0, (n, nx)).copy()
    Ps = np.broadcast_to(P0, (n, nx, nx)).copy()
    Pi = np.broadcast_to(np.diag(mask.astype(np.float64)), (n, nx, nx)).copy()
    a[:, mask] = 0.0
    Ps[:, mask, :] = 0.0
    Ps[:, :, mask] = 0.0
    ll = np.zeros(n)
    step = lengths.copy()
    fail = np.full(n, -1, dtype=np.int64)
    live = np.arange(n)
    t = 0
    while len(live):
        ended = (np.einsum("kij,kij->k", Pi[live], Pi[live]) <= TOL) | (t >= lengths[live])
        step[live[ended]] = np.minimum(t, lengths[live[ended]])
        live = live[~ended]
        if not len(live):
            break
        y = values[units[live] + t]
        seen = ~np.isnan(y).any(axis=1)
        if Lw is not None:
            y = np.linalg.solve(_of(Lw, live, one), y[..., None])[..., 0]
            ll[live[seen]] -= logdet_l[0] if one else logdet_l[live[seen]]
        ai, Psi, Pii = a[live], Ps[live], Pi[live]
        H_ = np.broadcast_to(_of(Hw, live, one), (len(live),) + Hw.shape[1:])
        r_ = _of(rw, live, one)
        bad = np.zeros(len(live), dtype=bool)
        for j in range(y.shape[1]):  # one observed value at a time
            z = H_[:, j]
            rj = np.broadcast_to(r_[..., j], (len(live),))
            v = np.where(seen, y[:, j] - np.einsum("ki,ki->k", z, ai), 0.0)
            Mi = np.einsum("kij,kj->ki", Pii, z)
            Ms = np.einsum("kij,kj->ki", Psi, z)
            Fi = np.einsum("ki,ki->k", z, Mi)
            Fs = np.einsum("ki,ki->k", z, Ms) + rj
            dif = seen & ~bad & (Fi > TOL)
            reg = seen & ~bad & ~dif & (Fs > 0.0)
            bad |= seen & ~dif & ~reg
            if dif.any():
                fi, fs = Fi[dif, None, None], Fs[dif, None, None]
                mi, ms = Mi[dif, :, None], Ms[dif, :, None]
                mimi = mi * mi.transpose(0, 2, 1)
                cross = ms * mi.transpose(0, 2, 1)
                ai[dif] += Mi[dif] * (v[dif] / Fi[dif])[:, None]
                Psi[dif] += mimi * (fs / (fi * fi)) - (cross + cross.transpose(0, 2, 1)) / fi
                Pii[dif] -= mimi / fi
                ll[live[dif]] -= HALF_LOG_2PI + 0.5 * np.log(Fi[dif])
            if reg.any():
                fs, ms = Fs[reg], Ms[reg]
                ai[reg] += ms * (v[reg] / fs)[:, None]
                Psi[reg] -= ms[:, :, None] * ms[:, None, :] / fs[:, None, None]
                ll[live[reg]] -= HALF_LOG_2PI + 0.5 * (np.log(fs) + v[reg] ** 2 / fs)
        fail[live[bad]] = t
        F_ = _of(F, live, one)
        a[live] = np.einsum("kij,kj->ki", np.broadcast_to(F_, (len(live), nx, nx)), ai)
        Ps[live] = F_ @ Psi @ F_.transpose(0, 2, 1) + _of(Q, live, one)
        Pi[live] = F_ @ Pii @ F_.transpose(0, 2, 1)
        Ps[live] = (Ps[live] + Ps[live].transpose(0, 2, 1)) / 2
        live = live[~bad]
        t += 1
    return Phase(ll, step, a, Ps, fail)


def evaluate(lg, packed: Packed, params: np.ndarray, engine: str, dtype: np.dtype, *,
             mask: np.ndarray, run: Callable) -> Evaluated:
    """The exact diffuse log-likelihood of the valid series of ``packed``.

    :func:`phase` on the CPU, then ``run`` (:func:`bulkem.api.evaluate`) over the rest of
    every series whose rest has an observed step, with the model ``lg`` (its method) on
    ``engine``, each series under its own prior ``N(a, P*)``.

    Parameters
    ----------
    lg : LinearGaussian
    packed : Packed
        The series (one per dataset), as ``lg.pack`` made them.
    params : ndarray of shape (1 or n_valid, 1, n_params)
        The model of every valid series, or of each (rows of ``lg.rows``).
    mask : ndarray of shape (dim_state,)
        The diffuse states (:func:`common_mask`).
    """
    data = packed.data
    rows = np.asarray(params[:, 0], dtype=np.float64)
    parts = lg.params_layout.split(rows)
    nx, ny = lg.dim_state, lg.dim_obs
    k = len(rows)
    values = np.asarray(data.values, dtype=np.float64).reshape(-1, ny)
    units = data.units
    ph = phase(values, units, parts["F"].reshape(k, nx, nx), parts["H"].reshape(k, ny, nx),
               parts["Q"].reshape(k, nx, nx), parts["R"].reshape(k, ny, ny),
               parts["m0"].reshape(k, nx), parts["P0"].reshape(k, nx, nx), mask)
    n = len(units) - 1
    ll = ph.loglik.copy()
    status = np.full(n, MAX_ITER, dtype=np.int32)
    stopped = ph.fail.copy()
    status[stopped >= 0] = NOT_POSITIVE_DEFINITE
    lo, hi = units[:-1] + ph.step, units[1:]
    seen = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(~np.isnan(values).any(axis=1), out=seen[1:])
    left = seen[hi] - seen[lo]  # observed steps after the phase
    rest = np.flatnonzero((stopped < 0) & (left > 0))
    if len(rest):
        lens = hi[rest] - lo[rest]
        sub = np.zeros(len(rest) + 1, dtype=np.int64)
        np.cumsum(lens, out=sub[1:])
        idx = np.repeat(lo[rest] - sub[:-1], lens) + np.arange(sub[-1])
        tail = Packed(list(range(len(rest))), left[rest], [None] * len(rest),
                      np.arange(len(rest), dtype=np.int64),
                      Ragged.flat(data.values.reshape(-1, ny)[idx], sub))
        model_of = np.zeros(len(rest), dtype=np.int64) if k == 1 else rest
        new = {b: parts[b].reshape(k, -1)[model_of] for b in BLOCKS}
        new["m0"] = ph.m[rest]
        new["P0"] = ph.P[rest].reshape(len(rest), -1)
        rest_rows = np.concatenate([new[b] for b in BLOCKS], axis=1)
        job = run(lg, tail, rest_rows[:, None], engine, dtype)
        ll[rest] += job.loglik
        status[rest] = job.status
        st = np.asarray(job.stopped_at) if job.stopped_at is not None else np.full(len(rest),
                                                                                    -1)
        stopped[rest] = np.where(st >= 0, st + ph.step[rest], -1)
    status[(status == MAX_ITER) & ~np.isfinite(ll)] = DEGENERATE_NONFINITE
    return Evaluated(ll, status, stopped)
