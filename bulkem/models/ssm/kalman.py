"""The Kalman filter and Rauch-Tung-Striebel smoother steps, written once.

:func:`make_kalman` builds the per-step functions for one state dimension
``NX``, observation dimension ``NY``, structure of ``F`` and compute dtype,
from plain Python on 1-D arrays and scalars.  The engines compile them with
``numba.njit(inline="always")`` (CPU) or as CUDA device functions (GPU);
``jit=lambda f: f`` gives plain Python (slow; for debugging).  The
dimensions are compile-time constants, so the loops unroll and a GPU thread
keeps its state in registers or local memory.

Layouts: matrices are row-major in 1-D arrays (``P[i * NX + j]``), ``H`` is
``NY x NX``, ``R`` is ``NY x NY``; a series' observations are the rows of a
1-D array, observation ``t`` at ``y[yo + a]``, ``a < NY``, with ``yo = NY * t``.
A row holding any NaN is missing as a whole: the update is skipped.

The update uses the Cholesky factor ``L`` of the innovation covariance
``S = H P H^T + R``::

    W = P H^T L^{-T}          (NX x NY; the gain is K = W L^{-1})
    v = L^{-1} (y - H m)
    m <- m + W v,   P <- P - W W^T
    log N(y; H m, S) = -NY/2 log(2 pi) - sum_a log L_aa - v.v / 2

which keeps ``P`` symmetric by construction and costs one small Cholesky.
Every function works in place on the arrays it is given; the scratch arrays
it needs are arguments, so that a GPU kernel can allocate them as local
arrays of compile-time size.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .statespace import COMPANION, IDENTITY

LOG_2PI = math.log(2.0 * math.pi)


class KalmanSteps(NamedTuple):
    """The compiled per-step functions (see :func:`make_kalman` for their signatures)."""

    is_missing: object
    predict: object
    predict_mean: object
    gain: object
    innovation: object
    correct: object
    correct_mean: object
    loglik_term: object
    update: object
    set_prior: object
    filter_range: object
    gains_range: object
    filter_mean_range: object
    smooth_step: object


def make_kalman(nx: int, ny: int, kind: int, dtype, jit, jit_outer=None) -> KalmanSteps:
    """Build the Kalman filter and smoother steps.

    Parameters
    ----------
    nx, ny : int
        State and observation dimensions (compile-time constants).
    kind : int
        Structure of ``F`` (``statespace.DENSE``, ``IDENTITY`` or ``COMPANION``).
    dtype : numpy scalar type
        Compute dtype of states and covariances; log-likelihood terms are
        returned in float64.
    jit : callable
        Compiles a per-step function (``numba.njit(inline="always")``, a
        CUDA device decorator, or the identity).
    jit_outer : callable, optional
        Compiles the functions that loop over steps (``filter_range``,
        ``gains_range``, ``filter_mean_range``, ``smooth_step``); ``jit`` if
        None.  The CPU engine passes ``numba.njit(error_model="numpy")``:
        called once per series or chunk, each then compiles once for all the
        engine's parallel loops, with the per-step functions inlined into it
        (measured, AR(3): half the compile time of inlining everything into
        every loop, the same speed; with Python's error model, whose
        division-by-zero checks the parallel loops leave out, 3-4x slower).

    Returns
    -------
    KalmanSteps
        With, for arrays in the layouts of the module docstring
        (``T``: NX*NX scratch, ``U``: NX*NY, ``L``: NY*NY, ``e``: NY, ``t``: NX):

        * ``is_missing(y, yo) -> bool``: the row holds a NaN;
        * ``predict(F, Q, m, P, T)``: ``m <- F m``, ``P <- F P F^T + Q``;
        * ``predict_mean(F, m, t)``: ``m <- F m``;
        * ``gain(H, R, P, U, L) -> (logdet, ok)``: ``L`` the Cholesky factor of
          ``S``, ``U <- W``, ``logdet = sum log L_aa``; ``ok`` False if ``S`` is
          not positive definite;
        * ``innovation(H, y, yo, m, L, e) -> quad``: ``e <- v``, returns ``v.v``;
        * ``correct(m, P, U, e)``: ``m <- m + W v``, ``P <- P - W W^T``;
        * ``correct_mean(m, U, e)``: ``m <- m + W v``;
        * ``loglik_term(logdet, quad) -> float64``;
        * ``update(H, R, y, yo, m, P, U, L, e) -> (loglik term, ok)``: the three above;
        * ``set_prior(m0, P0, m, P)``: copy the prior in;
        * ``filter_range(F, H, Q, R, y, lo, n, stride, m, P, T, U, L, e) -> (loglik,
          n_obs, fail)``: from the predicted ``m, P`` of the first, filter ``n``
          steps, the rows ``lo, lo + stride, ...`` of ``y`` (``stride`` 1 for a
          series stored row after row, the number of series for a time-major
          batch), missing rows skipped; ``fail`` is the step ``k < n`` whose
          ``S`` was not positive definite, or -1;
        * ``gains_range(F, H, Q, R, n_steps, m, P, T, U, L, Ws, Ls, logdets) -> fail``:
          from the prior ``m, P``, the covariance part of ``n_steps`` steps with
          every observation present, which does not depend on the data: step
          ``t``'s ``W`` at ``Ws[t * NX * NY:]``, ``L`` at ``Ls[t * NY * NY:]``,
          ``logdet`` at ``logdets[t]``; series of one model without missing
          values share them;
        * ``filter_mean_range(F, H, y, lo, n, stride, k0, kmax, m, t, U, L, e, Ws, Ls,
          logdets) -> (loglik, n_obs)``: the mean part of ``filter_range`` with
          those shared gains (step ``k`` uses entry ``min(k0 + k, kmax)``: ``k0``
          the first step's place in its series, ``kmax`` the last entry, which
          the steady-state scan keeps for every later step); the same
          arithmetic, so the same numbers;
        * ``smooth_step(F, mf, Pf, mp, Pp, ms, Ps, lag, G, T, L) -> ok``: one RTS
          step, see below.
    """
    jit_outer = jit if jit_outer is None else jit_outer
    NX = nx
    NY = ny
    NXX = nx * nx
    NXY = nx * ny
    NYY = ny * ny
    KIND = kind
    ZERO = dtype(0.0)
    CONST = 0.5 * ny * LOG_2PI
    # A pivot of the smoother's Cholesky of P_{t+1|t} below this times the
    # largest diagonal entry is a direction without variance (pure AR
    # processes): the smoother gain gets no component along it.
    TINY = dtype(np.finfo(dtype).eps * 16)

    def is_missing(y, yo):
        for a in range(NY):
            v = y[yo + a]
            if v != v:
                return True
        return False

    def predict(F, Q, m, P, T):
        if KIND == IDENTITY:
            for k in range(NXX):
                P[k] += Q[k]
        elif KIND == COMPANION:
            # F = [phi^T; I 0]: the state shifts down, its first value is phi.m
            s = ZERO
            for k in range(NX):
                s += F[k] * m[k]
            for i in range(NX - 1, 0, -1):
                m[i] = m[i - 1]
            m[0] = s
            for j in range(NX):  # T[j] = (phi^T P)_j, from the old P
                s = ZERO
                for k in range(NX):
                    s += F[k] * P[k * NX + j]
                T[j] = s
            for i in range(NX - 1, 0, -1):  # P[i, j] <- P[i-1, j-1], bottom-right first
                for j in range(NX - 1, 0, -1):
                    P[i * NX + j] = P[(i - 1) * NX + j - 1] + Q[i * NX + j]
            s = ZERO
            for j in range(NX):
                s += T[j] * F[j]
            P[0] = s + Q[0]
            for j in range(1, NX):
                v = T[j - 1]
                P[j] = v + Q[j]
                P[j * NX] = v + Q[j * NX]
        else:
            for i in range(NX):  # T = F P
                for j in range(NX):
                    s = ZERO
                    for k in range(NX):
                        s += F[i * NX + k] * P[k * NX + j]
                    T[i * NX + j] = s
            for i in range(NX):  # P = T F^T + Q, upper triangle mirrored
                for j in range(i, NX):
                    s = ZERO
                    for k in range(NX):
                        s += T[i * NX + k] * F[j * NX + k]
                    s += Q[i * NX + j]
                    P[i * NX + j] = s
                    P[j * NX + i] = s
            for i in range(NX):  # m = F m, through the first column of T
                s = ZERO
                for k in range(NX):
                    s += F[i * NX + k] * m[k]
                T[i] = s
            for i in range(NX):
                m[i] = T[i]

    def predict_mean(F, m, t):
        if KIND == IDENTITY:
            return
        if KIND == COMPANION:
            s = ZERO
            for k in range(NX):
                s += F[k] * m[k]
            for i in range(NX - 1, 0, -1):
                m[i] = m[i - 1]
            m[0] = s
            return
        for i in range(NX):
            s = ZERO
            for k in range(NX):
                s += F[i * NX + k] * m[k]
            t[i] = s
        for i in range(NX):
            m[i] = t[i]

    def gain(H, R, P, U, L):
        for i in range(NX):  # U = P H^T
            for a in range(NY):
                s = ZERO
                for k in range(NX):
                    s += P[i * NX + k] * H[a * NX + k]
                U[i * NY + a] = s
        for a in range(NY):  # S = H U + R, lower triangle, into L
            for b in range(a + 1):
                s = R[a * NY + b]
                for k in range(NX):
                    s += H[a * NX + k] * U[k * NY + b]
                L[a * NY + b] = s
        logdet = 0.0
        for a in range(NY):  # Cholesky in place
            for b in range(a + 1):
                s = L[a * NY + b]
                for c in range(b):
                    s -= L[a * NY + c] * L[b * NY + c]
                if b == a:
                    if not s > ZERO:
                        return logdet, False
                    d = math.sqrt(s)
                    L[a * NY + a] = d
                    logdet += math.log(d)
                else:
                    L[a * NY + b] = s / L[b * NY + b]
        for i in range(NX):  # W = U L^{-T}: each row solves L w = u
            for a in range(NY):
                s = U[i * NY + a]
                for c in range(a):
                    s -= L[a * NY + c] * U[i * NY + c]
                U[i * NY + a] = s / L[a * NY + a]
        return logdet, True

    def innovation(H, y, yo, m, L, e):
        quad = ZERO
        for a in range(NY):  # v = L^{-1} (y - H m)
            s = y[yo + a]
            for k in range(NX):
                s -= H[a * NX + k] * m[k]
            for c in range(a):
                s -= L[a * NY + c] * e[c]
            s = s / L[a * NY + a]
            e[a] = s
            quad += s * s
        return quad

    def correct_mean(m, U, e):
        for i in range(NX):
            s = m[i]
            for a in range(NY):
                s += U[i * NY + a] * e[a]
            m[i] = s

    def correct_cov(P, U):
        for i in range(NX):
            for j in range(i, NX):
                s = P[i * NX + j]
                for a in range(NY):
                    s -= U[i * NY + a] * U[j * NY + a]
                P[i * NX + j] = s
                P[j * NX + i] = s

    correct_mean_f, correct_cov_f = jit(correct_mean), jit(correct_cov)

    def correct(m, P, U, e):
        correct_mean_f(m, U, e)
        correct_cov_f(P, U)

    def loglik_term(logdet, quad):
        return -CONST - logdet - 0.5 * quad

    gain_f, innovation_f, correct_f = jit(gain), jit(innovation), jit(correct)
    loglik_term_f = jit(loglik_term)

    def update(H, R, y, yo, m, P, U, L, e):
        logdet, ok = gain_f(H, R, P, U, L)
        if not ok:
            return 0.0, False
        quad = innovation_f(H, y, yo, m, L, e)
        correct_f(m, P, U, e)
        return loglik_term_f(logdet, quad), True

    def set_prior(m0, P0, m, P):
        for i in range(NX):
            m[i] = m0[i]
        for k in range(NXX):
            P[k] = P0[k]

    is_missing_f, predict_f, predict_mean_f = jit(is_missing), jit(predict), jit(predict_mean)
    update_f = jit(update)

    def filter_range(F, H, Q, R, y, lo, n, stride, m, P, T, U, L, e):
        ll = 0.0
        n_obs = 0
        for k in range(n):
            yo = (lo + k * stride) * NY
            if not is_missing_f(y, yo):
                term, ok = update_f(H, R, y, yo, m, P, U, L, e)
                if not ok:
                    return ll, n_obs, k
                ll += term
                n_obs += 1
            if k + 1 < n:
                predict_f(F, Q, m, P, T)
        return ll, n_obs, -1

    def gains_range(F, H, Q, R, n_steps, m, P, T, U, L, Ws, Ls, logdets):
        for t in range(n_steps):
            logdet, ok = gain_f(H, R, P, U, L)
            if not ok:
                return t
            for k in range(NXY):
                Ws[t * NXY + k] = U[k]
            for k in range(NYY):
                Ls[t * NYY + k] = L[k]
            logdets[t] = logdet
            correct_cov_f(P, U)
            predict_f(F, Q, m, P, T)
        return -1

    def filter_mean_range(F, H, y, lo, n, stride, k0, kmax, m, t_, U, L, e, Ws, Ls, logdets):
        ll = 0.0
        n_obs = 0
        for k in range(n):
            yo = (lo + k * stride) * NY
            if not is_missing_f(y, yo):
                g = min(k0 + k, kmax)
                for j in range(NXY):
                    U[j] = Ws[g * NXY + j]
                for j in range(NYY):
                    L[j] = Ls[g * NYY + j]
                quad = innovation_f(H, y, yo, m, L, e)
                correct_mean_f(m, U, e)
                ll += loglik_term_f(logdets[g], quad)
                n_obs += 1
            if k + 1 < n:
                predict_mean_f(F, m, t_)
        return ll, n_obs

    def smooth_step(F, mf, Pf, mp, Pp, ms, Ps, lag, G, T, L):
        """One RTS step: from the smoothed (ms, Ps) of t + 1 to those of t, in place.

        In: the filtered ``mf, Pf`` of step t, the predicted ``mp, Pp`` of
        step t + 1 (``F mf``, ``F Pf F^T + Q``) and the smoothed ``ms, Ps`` of
        step t + 1.  Out: ``ms, Ps`` the smoothed moments of step t, ``lag``
        the lag-one covariance ``Cov(x_{t+1}, x_t | y_1..T) = Ps_{t+1} G^T``,
        ``G`` holding ``G^T``, where ``G = Pf F^T Pp^{-1}`` is the smoother
        gain.  Scratch ``T`` and ``L`` (NX*NX each).  Returns False if ``Pp``
        has a negative pivot (not positive semi-definite).
        """
        big = ZERO  # Cholesky of Pp in L; zero pivots (no variance) kept as zero columns
        for i in range(NX):
            if Pp[i * NX + i] > big:
                big = Pp[i * NX + i]
        for a in range(NX):
            for b in range(a + 1):
                s = Pp[a * NX + b]
                for c in range(b):
                    s -= L[a * NX + c] * L[b * NX + c]
                if b == a:
                    if s < -TINY * big:
                        return False
                    L[a * NX + a] = math.sqrt(s) if s > TINY * big else ZERO
                elif L[b * NX + b] > ZERO:
                    L[a * NX + b] = s / L[b * NX + b]
                else:
                    L[a * NX + b] = ZERO
        for i in range(NX):  # T = F Pf
            for j in range(NX):
                s = ZERO
                for k in range(NX):
                    s += F[i * NX + k] * Pf[k * NX + j]
                T[i * NX + j] = s
        for j in range(NX):  # G^T = Pp^{-1} T, column by column (forward, then backward)
            for a in range(NX):
                s = T[a * NX + j]
                for c in range(a):
                    s -= L[a * NX + c] * G[c * NX + j]
                G[a * NX + j] = s / L[a * NX + a] if L[a * NX + a] > ZERO else ZERO
            for a in range(NX - 1, -1, -1):
                s = G[a * NX + j]
                for c in range(a + 1, NX):
                    s -= L[c * NX + a] * G[c * NX + j]
                G[a * NX + j] = s / L[a * NX + a] if L[a * NX + a] > ZERO else ZERO
        for i in range(NX):  # lag = Ps G^T (Ps of t + 1, before it is overwritten)
            for j in range(NX):
                s = ZERO
                for k in range(NX):
                    s += Ps[i * NX + k] * G[k * NX + j]
                lag[i * NX + j] = s
        for i in range(NX):  # T = (Ps - Pp) G^T
            for j in range(NX):
                s = ZERO
                for k in range(NX):
                    s += (Ps[i * NX + k] - Pp[i * NX + k]) * G[k * NX + j]
                T[i * NX + j] = s
        for i in range(NX):  # Ps = Pf + G T, upper triangle mirrored
            for j in range(i, NX):
                s = Pf[i * NX + j]
                for k in range(NX):
                    s += G[k * NX + i] * T[k * NX + j]
                Ps[i * NX + j] = s
                Ps[j * NX + i] = s
        for i in range(NX):  # ms = mf + G (ms - mp), through the first row of T
            s = mf[i]
            for k in range(NX):
                s += G[k * NX + i] * (ms[k] - mp[k])
            T[i] = s
        for i in range(NX):
            ms[i] = T[i]
        return True

    return KalmanSteps(is_missing_f, predict_f, predict_mean_f, gain_f, innovation_f,
                       correct_f, correct_mean_f, loglik_term_f, update_f, jit(set_prior),
                       jit_outer(filter_range), jit_outer(gains_range),
                       jit_outer(filter_mean_range), jit_outer(smooth_step))
