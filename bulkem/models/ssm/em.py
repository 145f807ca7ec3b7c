"""EM of state-space models, as pieces of the one EM driver: the Kalman smoother E-step.

Two structures, univariate observations ``y_t`` (NaN: missing):

* ``"ar"``, AR(p) observed with noise: ``z_t = phi_1 z_{t-1} + ... + phi_p
  z_{t-p} + e_t``, ``e_t ~ N(0, state_var)``; ``y_t = z_t + v_t``,
  ``v_t ~ N(0, obs_var)``.  The state is ``x_t = (z_t, ..., z_{t-p+1})``
  (companion form), the prior of every series' first state the stationary
  law ``N(0, Gamma)``, ``Gamma`` the Toeplitz matrix of the autocovariances.
* ``"local_level"``, a random walk observed with noise: ``x_{t+1} = x_t +
  w_t``, ``w_t ~ N(0, state_var)``; ``y_t = x_t + v_t``.  A random walk has
  no stationary law; two priors of the first level (``SSMModel.prior``):

  - ``"fitted"`` (the default): ``N(level0, state_var)``, ``level0`` a free
    parameter (the level one step before the first observation), so the
    prior is proper, follows the data, and the M-step stays in closed form.
    Its log-likelihood is statsmodels' with ``initialize_known(level0,
    state_var)`` and ``loglikelihood_burn = 0``.
  - ``"diffuse"``: the exact diffuse prior of Durbin and Koopman (2012, ch.
    5), a flat prior on the level, so there is no ``level0`` (params
    ``state_var, obs_var``).  Steps before a series' first observation carry
    no information under a flat prior and are dropped.  The filter starts at
    the first observed step ``f`` with the filtered level ``N(y_f,
    obs_var)``; that step adds ``-log(2 pi) / 2`` (the diffuse term
    ``-(log 2 pi + log F_inf) / 2``, ``F_inf = 1``), every later one the
    usual prediction-error term; the smoother runs back to ``f``.  This is
    statsmodels' exact diffuse log-likelihood with every term kept:
    ``UnobservedComponents(y, "llevel", use_exact_diffuse=True)`` (whose
    ``loglikelihood_burn`` is then 0).  statsmodels' *default*
    ``UnobservedComponents(y, "llevel")`` differs twice: it starts from the
    approximate diffuse prior ``N(0, 1e6)`` and burns the first observation
    (``loglikelihood_burn = 1``: its term dropped).  For the Nile data the
    maxima are -633.4646 (exact diffuse, all terms: bulkem's) and -632.538
    (statsmodels' default, near the exact diffuse value plus ``log(2 pi) / 2``).

The series of a dataset share the parameters; the lanes of a fit split its
series.  Per series the E-step runs the Kalman filter forward (the filtered
moments of each step kept in the lane's buffer), then the
Rauch-Tung-Striebel smoother backward with the lag-one covariances
(:func:`bulkem.models.ssm.kalman.make_kalman`: the same per-step functions
as :func:`bulkem.kalman_loglik`), and sums the expected sufficient
statistics of Shumway and Stoffer (1982).  A weighted model
(``fit(weights=...)``, one weight ``w >= 0`` per series) counts each series
``w`` times: its log-likelihood, its share of the statistics and of the
totals below are multiplied by ``w`` (and the M-step's number of series
``n`` is the weights' sum).

M-step (float64, closed form):

* ``obs_var = sum E[(y_t - z_t)^2] / n_obs`` (observed steps); local level:
  ``level0 = mean E[x_1]``, ``state_var`` from the expected squared steps
  and the prior term; with the diffuse prior ``state_var = sum E[(x_t -
  x_{t-1})^2] / n_trans`` over the transitions from each series' first
  observed step on (no prior term).  All exact: EM.
* AR: with the stationary prior the coefficients have no closed-form
  maximiser (the prior's covariance depends on them).  The update is the
  Shumway-Stoffer regression ``phi = C11^{-1} c10`` with the prior's gradient
  added, ``phi* = C11^{-1} (c10 + state_var * grad)`` (a step along the
  gradient of the expected log-likelihood, scaled by ``state_var C11^{-1}``,
  so its fixed points are the likelihood's stationary points), halved
  towards the old ``phi`` until it is stationary and raises the expected
  complete-data log-likelihood (at most ``Tuning.ssm_ar_max_halvings``
  times; else ``phi`` stays).  Then ``state_var`` maximises it exactly given
  ``phi``.  Every step raises the expected log-likelihood, so the
  likelihood never falls (a generalised EM), and fits stay stationary.

Layouts of one fit (``P`` the state dimension, ``PP = P * P``):

* params: AR ``phi (P), state_var, obs_var``; local level ``level0,
  state_var, obs_var`` (diffuse: ``state_var, obs_var``);
* work: the model's ``F (PP), H (P), Q (PP), R (1), m0 (P), P0 (PP)``;
* tot: observed steps, transitions (steps - 1; diffuse: from the first
  observed step) of the fit's series; weighted: each times its series' weight,
  then the weights' sum;
* stats: ``n_obs, n_trans`` (from tot; weighted, then the weights' sum), the
  M-step's scratch, then the sums
  from ``first_stat``: ``sum E[(y - z)^2]`` and, AR: ``c00 = sum E[z_{t+1}^2]``,
  ``c10 = sum E[z_{t+1} x_t] (P)``, ``C11 = sum E[x_t x_t'] (PP)`` over
  transitions, ``S11 = sum E[x_1 x_1'] (PP)`` over series; local level:
  ``sum E[(x_{t+1} - x_t)^2]``, ``sum (E[x_1] - level0)``, ``sum E[(x_1 - level0)^2]``
  (diffuse: the first only);
* buf: the filtered mean and covariance of every step, ``P + PP`` values.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...tuning import DEGENERATE_PARAM
from ..base import Pieces, Sizes
from .kalman import LOG_2PI, make_kalman
from .statespace import COMPANION, DENSE, IDENTITY

AR = "ar"
LOCAL_LEVEL = "local_level"


class EMLayout(NamedTuple):
    """Offsets of the blocks of one fit's arrays (see the module docstring)."""

    family: str
    P: int  # state dimension: the AR order, 1 for the local level
    diffuse: bool = False  # local level: the exact diffuse prior (no level0)
    weighted: bool = False  # one weight per series (the batch tuple's third array)

    @property
    def kind(self) -> int:
        if self.family == LOCAL_LEVEL:
            return IDENTITY
        return COMPANION if self.P >= 2 else DENSE

    @property
    def n_params(self) -> int:
        return self.P + 2 - self.diffuse

    @property
    def head(self) -> int:
        """Where ``state_var`` lies in params (``obs_var`` follows it)."""
        return self.n_params - 2

    # work (the model's matrices)
    @property
    def w_offsets(self) -> tuple[int, int, int, int, int, int, int]:
        """Where ``F, H, Q, R, m0, P0`` start, and the end."""
        P, PP = self.P, self.P * self.P
        wf = 0
        wh = wf + PP
        wq = wh + P
        wr = wq + PP
        wm = wr + 1
        wp = wm + P
        return wf, wh, wq, wr, wm, wp, wp + PP

    @property
    def n_scratch(self) -> int:
        P, PP = self.P, self.P * self.P
        return 7 * PP + 4 * P + 2

    @property
    def n_coef(self) -> int:
        """prepare's scratch: the Yule-Walker system and the stationarity test."""
        n1 = self.P + 1
        return n1 * n1 + 2 * n1 + 2 * self.P if self.family == AR else 0

    @property
    def n_mscratch(self) -> int:
        P, n1 = self.P, self.P + 1
        return n1 * n1 + 3 * n1 + 4 * P * P + 6 * P if self.family == AR else 0

    @property
    def n_totals(self) -> int:
        """``tot``, and the statistics copied from it before the M-step's scratch."""
        return 3 if self.weighted else 2

    @property
    def first_stat(self) -> int:
        return self.n_totals + self.n_mscratch

    @property
    def n_stats(self) -> int:
        P = self.P
        extra = 2 + P + 2 * P * P if self.family == AR else (2 if self.diffuse else 4)
        return self.first_stat + extra

    def sizes(self) -> Sizes:
        return Sizes(params=self.n_params, stats=self.n_stats, totals=self.n_totals,
                     coef=self.n_coef, work=self.w_offsets[-1], scratch=self.n_scratch,
                     buf_per_len=self.P + self.P * self.P)


def make_ar_math(P: int, jit, jit_outer=None):
    """The stationary AR(P) process's small linear algebra, compiled with ``jit``.

    Returns ``(stationary, acov, prior, chol, chol_solve)``:

    * ``stationary(phi, sd) -> bool``: every root of ``1 - phi_1 z - ... -
      phi_P z^P`` lies outside the unit circle (the Schur-Cohn step-down
      recursion: every partial autocorrelation in (-1, 1)); ``sd``: 2P scratch;
    * ``acov(phi, s2, A, piv, gam) -> ok``: the autocovariances ``gam[0..P]``
      of the process with innovation variance ``s2``, from the Yule-Walker
      equations; ``A`` ((P+1)^2) keeps their LU factors (row swaps in ``piv``);
    * ``prior(phi, s2, S11, n, grad, ws) -> (ok, logdet, tr)``: for ``n``
      series whose first states have ``sum E[x_1 x_1'] = S11``, the stationary
      prior's ``log det Gamma`` and ``tr(Gamma^{-1} S11)``; with ``grad``, the
      gradient of ``-n/2 log det Gamma - tr(Gamma^{-1} S11) / 2`` in ``phi``
      goes to ``ws[G:G+P]`` (see :func:`ms_offsets`); ``ok`` False when ``phi``
      is not stationary;
    * ``chol(L) -> (ok, logdet)``: the Cholesky factor of the symmetric P x P
      matrix in ``L``, in place; ``chol_solve(L, x)``: ``x <- (L L')^{-1} x``.
    """
    outer = jit if jit_outer is None else jit_outer
    N1 = P + 1
    PP = P * P
    oA, oPiv, oGam, oB, oL, oM, oX, oG, oSd, oCol = ms_offsets(P)[:10]

    def stationary(phi, sd):
        for i in range(P):
            sd[i] = phi[i]
        for m in range(P, 0, -1):
            k = sd[m - 1]
            if not abs(k) < 1.0:
                return False
            den = 1.0 - k * k
            for i in range(m - 1):  # the AR(m - 1) coefficients of the step-down
                sd[P + i] = (sd[i] + k * sd[m - 2 - i]) / den
            for i in range(m - 1):
                sd[i] = sd[P + i]
        return True

    def lu(A, piv):
        for k in range(N1):
            best = k
            big = abs(A[k * N1 + k])
            for i in range(k + 1, N1):
                v = abs(A[i * N1 + k])
                if v > big:
                    big = v
                    best = i
            piv[k] = best
            if not big > 0.0:
                return False
            if best != k:
                for j in range(N1):
                    v = A[k * N1 + j]
                    A[k * N1 + j] = A[best * N1 + j]
                    A[best * N1 + j] = v
            inv = 1.0 / A[k * N1 + k]
            for i in range(k + 1, N1):
                f = A[i * N1 + k] * inv
                A[i * N1 + k] = f
                for j in range(k + 1, N1):
                    A[i * N1 + j] -= f * A[k * N1 + j]
        return True

    def lu_solve(A, piv, b):
        for k in range(N1):
            j = int(piv[k])
            if j != k:
                v = b[k]
                b[k] = b[j]
                b[j] = v
        for i in range(N1):
            s = b[i]
            for j in range(i):
                s -= A[i * N1 + j] * b[j]
            b[i] = s
        for i in range(N1 - 1, -1, -1):
            s = b[i]
            for j in range(i + 1, N1):
                s -= A[i * N1 + j] * b[j]
            b[i] = s / A[i * N1 + i]

    lu_f, lu_solve_f = outer(lu), outer(lu_solve)

    def acov(phi, s2, A, piv, gam):
        # gamma(k) - sum_i phi_i gamma(|k - i|) = s2 [k == 0],  k = 0..P
        for k in range(N1):
            for j in range(N1):
                A[k * N1 + j] = 0.0
            A[k * N1 + k] = 1.0
            for i in range(1, N1):
                j = k - i if k >= i else i - k
                A[k * N1 + j] -= phi[i - 1]
            gam[k] = 0.0
        gam[0] = s2
        if not lu_f(A, piv):
            return False
        lu_solve_f(A, piv, gam)
        return True

    def chol(L):
        """Cholesky factor of the symmetric P x P matrix in L, in place (lower triangle)."""
        logdet = 0.0
        for a in range(P):
            for b in range(a + 1):
                s = L[a * P + b]
                for c in range(b):
                    s -= L[a * P + c] * L[b * P + c]
                if a == b:
                    if not s > 0.0:
                        return False, 0.0
                    d = math.sqrt(s)
                    L[a * P + a] = d
                    logdet += math.log(d)
                else:
                    L[a * P + b] = s / L[b * P + b]
        return True, 2.0 * logdet

    def chol_solve(L, x):
        for a in range(P):
            s = x[a]
            for c in range(a):
                s -= L[a * P + c] * x[c]
            x[a] = s / L[a * P + a]
        for a in range(P - 1, -1, -1):
            s = x[a]
            for c in range(a + 1, P):
                s -= L[c * P + a] * x[c]
            x[a] = s / L[a * P + a]

    stationary_f, acov_f = outer(stationary), outer(acov)
    chol_f, chol_solve_f = outer(chol), outer(chol_solve)

    def prior(phi, s2, S11, n, grad, ws):
        A = ws[oA:oA + N1 * N1]
        piv = ws[oPiv:oPiv + N1]
        gam = ws[oGam:oGam + N1]
        L = ws[oL:oL + PP]
        col = ws[oCol:oCol + P]
        if not stationary_f(phi, ws[oSd:oSd + 2 * P]):
            return False, 0.0, 0.0
        if not acov_f(phi, s2, A, piv, gam):
            return False, 0.0, 0.0
        for i in range(P):
            for j in range(P):
                L[i * P + j] = gam[i - j if i >= j else j - i]
        ok, logdet = chol_f(L)
        if not ok:
            return False, 0.0, 0.0
        tr = 0.0
        X = ws[oX:oX + PP]
        for j in range(P):  # X = Gamma^{-1} S11, column by column
            for i in range(P):
                col[i] = S11[i * P + j]
            chol_solve_f(L, col)
            tr += col[j]
            for i in range(P):
                X[i * P + j] = col[i]
        if not grad:
            return True, logdet, tr
        # d/dGamma of the prior term: M = (Gamma^{-1} S11 Gamma^{-1} - n Gamma^{-1}) / 2;
        # mu_k sums M over the k-th diagonals, since dGamma[i, j] = dgamma(|i - j|)
        M = ws[oM:oM + PP]
        for i in range(P):
            for j in range(P):
                col[j] = X[i * P + j]
            col[i] -= n
            chol_solve_f(L, col)
            for j in range(P):
                M[j * P + i] = col[j]
        mu = ws[oCol:oCol + P]
        for k in range(P):
            s = 0.0
            for i in range(P - k):
                s += M[(i + k) * P + i]
                if k > 0:
                    s += M[i * P + i + k]
            mu[k] = 0.5 * s
        b = ws[oB:oB + N1]
        g = ws[oG:oG + P]
        for j in range(1, N1):  # dgamma / dphi_j solves A dgamma = (gamma(|k - j|))_k
            for k in range(N1):
                b[k] = gam[k - j if k >= j else j - k]
            lu_solve_f(A, piv, b)
            s = 0.0
            for k in range(P):
                s += b[k] * mu[k]
            g[j - 1] = s
        return True, logdet, tr

    return stationary_f, acov_f, outer(prior), chol_f, chol_solve_f


def ms_offsets(P: int) -> tuple[int, ...]:
    """Offsets in the AR M-step's scratch of ``A, piv, gam, b, L, M, X, g, sd, col, C, d, phi``."""
    N1, PP = P + 1, P * P
    sizes = (N1 * N1, N1, N1, N1, PP, PP, PP, P, 2 * P, P, PP, P, P)
    out, o = [], 0
    for s in sizes:
        out.append(o)
        o += s
    return tuple(out)


def make_pieces(layout: EMLayout, dtype, jit, jit_outer=None, *,
                max_halvings: int) -> Pieces:
    """The driver pieces of an AR(p)-plus-noise or local-level model.

    Parameters
    ----------
    layout : EMLayout
    dtype : numpy scalar type
        Compute dtype (float64: the state-space families fit in float64 only).
    jit : callable
        The target's device-function decorator.
    jit_outer : callable, optional
        Compiles the per-series E-step, the AR prior's algebra and the M-step
        (``jit`` if None).  The CPU passes ``numba.njit(error_model="numpy")``:
        compiled once each instead of inlined where they are called (as
        :func:`bulkem.models.ssm.kalman.make_kalman`'s ``jit_outer``).
    """
    outer = jit if jit_outer is None else jit_outer
    if np.dtype(dtype) != np.float64:
        raise ValueError("state-space EM runs in float64 only")
    IS_AR = layout.family == AR
    DIFFUSE = bool(layout.diffuse)
    WEIGHTED = bool(layout.weighted)
    NT = layout.n_totals
    if DIFFUSE and IS_AR:
        raise ValueError("the exact diffuse prior is for the local level; the AR family's "
                         "prior is the stationary law")
    P = layout.P
    HEAD = layout.head  # params: state_var at HEAD, obs_var at HEAD + 1
    PP = P * P
    W = P + PP  # buffer values per step
    WF, WH, WQ, WR, WM, WP, _ = layout.w_offsets
    FIRST = layout.first_stat
    SOBS = FIRST
    SA = FIRST + 1  # AR: c00, c10, C11, S11; local level: steps, d1, d2
    SC10, SC11 = SA + 1, SA + 1 + P
    SS11 = SC11 + PP
    N1 = P + 1
    CA, CPIV, CGAM, CSD = 0, N1 * N1, N1 * N1 + N1, N1 * N1 + 2 * N1
    MAX_HALVINGS = max_halvings
    BAD = DEGENERATE_PARAM
    HALF_LOG_2PI = 0.5 * LOG_2PI
    steps = make_kalman(P, 1, layout.kind, np.float64, jit, outer)
    is_missing, predict, update = steps.is_missing, steps.predict, steps.update
    set_prior, smooth_step = steps.set_prior, steps.smooth_step
    # (built for the local level too: its pieces compile the AR branches they never take)
    stationary, acov, prior, chol, chol_solve = make_ar_math(P, jit, outer)
    oG, oC, oD, oPhi = (ms_offsets(P)[k] for k in (7, 10, 11, 12))

    if WEIGHTED:
        def weight(data, u):
            """Series ``u``'s weight (the batch tuple's third array)."""
            return data[2][u]

        def count(stats, n):
            """The M-step's number of series: the weights' sum (from :func:`complete`)."""
            return stats[2]
    else:
        def weight(data, u):
            return 1.0

        def count(stats, n):
            return n

    weight_f, count_f = jit(weight), jit(count)

    def setup(data, lo, hi, step, tot):
        y = data[0]
        units = data[1]
        u = lo
        while u < hi:
            a0 = units[u]
            n = units[u + 1] - a0
            w = weight_f(data, u)
            seen = 0
            first = n
            for t in range(n):
                if y[a0 + t] == y[a0 + t]:
                    seen += 1
                    if first == n:
                        first = t
            tot[0] += w * seen
            # diffuse: the transitions from the first observed step on (the steps before it
            # carry no information under a flat prior)
            tot[1] += w * (n - 1 - first if DIFFUSE else n - 1)
            if WEIGHTED:
                tot[2] += w
            u += step

    def fill_work(work, a, s2, r, m0, p0):
        """F, H, Q, R, m0 of the structure; P0 is the caller's (for the AR: Gamma)."""
        for k in range(PP):
            work[WF + k] = 0.0
            work[WQ + k] = 0.0
        for i in range(P):
            work[WH + i] = 0.0
            work[WM + i] = 0.0
        work[WH] = 1.0
        work[WQ] = s2
        work[WR] = r
        work[WM] = m0
        if IS_AR:
            for i in range(P):
                work[WF + i] = a[i]
            for i in range(1, P):
                work[WF + i * P + i - 1] = 1.0
        else:
            work[WF] = 1.0
            work[WP] = p0

    fill_work_f = jit(fill_work)

    def prepare(data, params, tot, coef, work):
        s2 = params[HEAD]
        r = params[HEAD + 1]
        ok = s2 > 0.0 and r > 0.0 and math.isfinite(s2) and math.isfinite(r)
        if DIFFUSE:  # (no m0, P0: the E-step starts at the first observation)
            if ok:
                fill_work_f(work, params, s2, r, 0.0, 0.0)
                return 0.0
            fill_work_f(work, params, 1.0, 1.0, 0.0, 0.0)
            return math.nan
        if not IS_AR:
            ok = ok and math.isfinite(params[0])
            fill_work_f(work, params, s2, r, params[0], s2)
            if ok:
                return 0.0
            fill_work_f(work, params, 1.0, 1.0, 0.0, 1.0)
            return math.nan
        gam = coef[CGAM:CGAM + N1]
        ok = ok and stationary(params, coef[CSD:CSD + 2 * P])
        ok = ok and acov(params, s2, coef[CA:CA + N1 * N1], coef[CPIV:CPIV + N1], gam)
        if ok:
            fill_work_f(work, params, s2, r, 0.0, 0.0)
            for i in range(P):
                for j in range(P):
                    work[WP + i * P + j] = gam[i - j if i >= j else j - i]
            return 0.0
        for i in range(P):  # a harmless model for the E-step, whose result is not used
            coef[CGAM + i] = 0.0
        fill_work_f(work, coef[CGAM:CGAM + P], 1.0, 1.0, 0.0, 0.0)
        for i in range(P):
            for j in range(P):
                work[WP + i * P + j] = 1.0 if i == j else 0.0
        return math.nan

    def series(y, a0, T, w, work, stats, sc, buf):
        """One series' log-likelihood; adds its statistics times ``w`` to ``stats``."""
        F = work[WF:WF + PP]
        H = work[WH:WH + P]
        Q = work[WQ:WQ + PP]
        R = work[WR:WR + 1]
        m = sc[0:P]
        Pc = sc[P:P + PP]
        Tm = sc[P + PP:P + 2 * PP]
        U = sc[P + 2 * PP:2 * P + 2 * PP]
        L = sc[2 * P + 2 * PP:2 * P + 2 * PP + 1]
        e = sc[2 * P + 2 * PP + 1:2 * P + 2 * PP + 2]
        o = 2 * P + 2 * PP + 2
        ms = sc[o:o + P]
        Ps = sc[o + P:o + P + PP]
        mp = sc[o + P + PP:o + 2 * P + PP]
        Pp = sc[o + 2 * P + PP:o + 2 * P + 2 * PP]
        lag = sc[o + 2 * P + 2 * PP:o + 2 * P + 3 * PP]
        G = sc[o + 2 * P + 3 * PP:o + 2 * P + 4 * PP]
        T2 = sc[o + 2 * P + 4 * PP:o + 2 * P + 5 * PP]
        if DIFFUSE:  # from the first observed step: x_f | y_f ~ N(y_f, obs_var)
            f = 0
            while f < T and is_missing(y, a0 + f):
                f += 1
            if f == T:
                return 0.0
            a0 += f
            T -= f
        else:
            set_prior(work[WM:WM + P], work[WP:WP + PP], m, Pc)
        ll = 0.0
        for t in range(T):  # filter; the filtered moments of step t at buf[t W:]
            if DIFFUSE and t == 0:
                m[0] = y[a0]
                Pc[0] = R[0]
                ll -= HALF_LOG_2PI  # Durbin-Koopman's diffuse term, F_inf = 1
            elif not is_missing(y, a0 + t):
                term, ok = update(H, R, y, a0 + t, m, Pc, U, L, e)
                if not ok:
                    return math.nan
                ll += term
            for i in range(P):
                buf[t * W + i] = m[i]
            for k in range(PP):
                buf[t * W + P + k] = Pc[k]
            if t + 1 < T:
                predict(F, Q, m, Pc, Tm)
        for i in range(P):
            ms[i] = m[i]
        for k in range(PP):
            Ps[k] = Pc[k]
        t = T - 1
        while True:  # smoothed moments of step t in ms, Ps; its statistics
            v = y[a0 + t]
            if v == v:
                d = v - ms[0]
                stats[SOBS] += w * (d * d + Ps[0])
            if t == 0:
                break
            t -= 1
            z1 = ms[0]  # of step t + 1
            v1 = Ps[0]
            mf = buf[t * W:t * W + P]
            Pf = buf[t * W + P:(t + 1) * W]
            for i in range(P):
                mp[i] = mf[i]
            for k in range(PP):
                Pp[k] = Pf[k]
            predict(F, Q, mp, Pp, Tm)
            if not smooth_step(F, mf, Pf, mp, Pp, ms, Ps, lag, G, Tm, T2):
                return math.nan
            if IS_AR:
                stats[SA] += w * (v1 + z1 * z1)
                for j in range(P):
                    stats[SC10 + j] += w * (lag[j] + z1 * ms[j])
                for i in range(P):
                    for j in range(P):
                        stats[SC11 + i * P + j] += w * (Ps[i * P + j] + ms[i] * ms[j])
            else:
                d = z1 - ms[0]
                stats[SA] += w * (v1 + Ps[0] - 2.0 * lag[0] + d * d)
        if IS_AR:  # the first state
            for i in range(P):
                for j in range(P):
                    stats[SS11 + i * P + j] += w * (Ps[i * P + j] + ms[i] * ms[j])
        elif not DIFFUSE:
            d = ms[0] - work[WM]
            stats[SA + 1] += w * d
            stats[SA + 2] += w * (d * d + Ps[0])
        return ll

    series_f = outer(series)

    def estep(data, lo, hi, step, work, stats, scratch, buf, xc):
        y = data[0]
        units = data[1]
        ll = 0.0
        u = lo
        while u < hi:
            a0 = units[u]
            w = weight_f(data, u)
            ll += w * series_f(y, a0, units[u + 1] - a0, w, work, stats, scratch, buf)
            u += step
        return ll

    def complete(data, stats, tot):
        stats[0] = tot[0]
        stats[1] = tot[1]
        if WEIGHTED:
            stats[2] = tot[2]

    def ssr(a, c00, stats):
        """sum E[(z_{t+1} - a' x_t)^2] over transitions."""
        s = c00
        for i in range(P):
            s -= 2.0 * a[i] * stats[SC10 + i]
            q = 0.0
            for j in range(P):
                q += stats[SC11 + i * P + j] * a[j]
            s += a[i] * q
        return s

    ssr_f = jit(ssr)

    def mstep(data, stats, params, n_items, reg):
        n = count_f(stats, n_items)  # series (weighted: the weights' sum)
        n_obs = stats[0]
        n_trans = stats[1]
        r = stats[SOBS] / n_obs if n_obs > 0.0 else math.nan
        if DIFFUSE:
            q = stats[SA] / n_trans if n_trans > 0.0 else math.nan
            params[0] = q
            params[1] = r
            return 0 if q > 0.0 and r > 0.0 and math.isfinite(q + r) else BAD
        if not IS_AR:
            dm = stats[SA + 1] / n
            q = (stats[SA] + stats[SA + 2] - n * dm * dm) / (n_trans + n)
            params[0] += dm
            params[1] = q
            params[2] = r
            return 0 if q > 0.0 and r > 0.0 and math.isfinite(q + r + params[0]) else BAD
        ws = stats[NT:FIRST]
        S11 = stats[SS11:SS11 + PP]
        c00 = stats[SA]
        s2 = params[P]
        ok, logdet, tr = prior(params, s2, S11, n, True, ws)
        C = ws[oC:oC + PP]
        for k in range(PP):
            C[k] = stats[SC11 + k]
        okc, _ld = chol(C)
        if ok and okc:
            q_old = -ssr_f(params, c00, stats) / (2.0 * s2) - 0.5 * (tr + n * logdet)
            d = ws[oD:oD + P]
            g = ws[oG:oG + P]
            for i in range(P):
                d[i] = stats[SC10 + i] + s2 * g[i]
            chol_solve(C, d)
            for i in range(P):
                d[i] -= params[i]
            a = ws[oPhi:oPhi + P]
            lam = 1.0
            for _h in range(MAX_HALVINGS + 1):
                for i in range(P):
                    a[i] = params[i] + lam * d[i]
                okt, logdet, tr = prior(a, s2, S11, n, False, ws)
                if okt and -ssr_f(a, c00, stats) / (2.0 * s2) - 0.5 * (tr + n * logdet) >= q_old:
                    for i in range(P):
                        params[i] = a[i]
                    break
                lam *= 0.5
        ok, logdet, tr = prior(params, 1.0, S11, n, False, ws)  # Gamma / state_var
        s2 = (ssr_f(params, c00, stats) + tr) / (n_trans + n * P)
        params[P] = s2
        params[P + 1] = r
        return 0 if ok and s2 > 0.0 and r > 0.0 and math.isfinite(s2 + r) else BAD

    return Pieces(jit(setup), jit(prepare), jit(estep), jit(complete), outer(mstep), FIRST)
