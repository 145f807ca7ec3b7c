"""The paper's "splash" approximation of the predictive densities, one time step at a time.

Lin, Moore and Russell, "GPU-Based Parallel Kalman Filter" (Algorithm 2):
the predictive density of ``y_t`` is computed by a short Kalman filter over
the last ``window`` steps ``t - window + 1 .. t`` only, started from a broad
prior (zero mean, covariance ``broad * I``: the paper's stand-in for an
infinite variance) at step ``t - window + 1``.  Every step is independent of
the others, so all run in parallel; the approximation assumes that
observations more than ``window - 1`` steps back carry little information
about ``y_t``.  Where the window reaches the start of the series, the filter
starts from the model's own prior there instead, so those steps are exact,
and a window at least as long as the series gives the exact likelihood.

Every window that starts from the broad prior and holds no missing value
runs the same covariance recursion (it does not depend on the data), so
with one model for all series it is computed once, for ``window`` steps
(``kalman.gains_range`` from ``N(0, broad I)``), and such a window runs the
mean recursion only (``splash_point_shared``): for AR(10), about a seventh
of the arithmetic, and the same numbers.  The paper's optimised CPU code
skipped the covariance in a similar way, once it had converged.
"""

from __future__ import annotations

from typing import NamedTuple

from .kalman import KalmanSteps


class SplashSteps(NamedTuple):
    """The compiled splash functions (see :func:`make_splash`)."""

    point: object
    point_shared: object


def make_splash(nx: int, ny: int, dtype, jit, steps: KalmanSteps) -> SplashSteps:
    """Build the splash functions (``jit``: the engine's ``jit_outer``; they loop).

    Returns
    -------
    SplashSteps
        * ``point(F, H, Q, R, m0, P0, y, lo, t, window, broad, m, P, T, U, L, e)
          -> (loglik term, observed, ok)``: the approximate ``log p(y_t |
          y_{t-window+1} .. y_{t-1})`` of step ``t`` of the series that starts at
          row ``lo`` (0 when ``y_t`` is missing: ``observed`` False); ``ok``
          False if an innovation covariance was not positive definite.
          Scratch as for :func:`bulkem.models.ssm.kalman.make_kalman`.
        * ``point_shared(F, H, y, lo, t, window, m, t_, U, L, e, Ws, Ls, logdets)
          -> (loglik term, observed, done)``: the same from the shared
          covariance recursion of a window (``Ws, Ls, logdets`` from
          ``gains_range`` over ``window`` steps from ``N(0, broad I)``);
          ``done`` False when the window reaches the series' start or holds a
          missing value before ``t``: then use ``point``.
    """
    NX = nx
    NY = ny
    ZERO = dtype(0.0)
    NYY = ny * ny
    is_missing, predict, update, gain, innovation, loglik_term, set_prior = (
        steps.is_missing, steps.predict, steps.update, steps.gain, steps.innovation,
        steps.loglik_term, steps.set_prior)
    predict_mean, filter_mean_range = steps.predict_mean, steps.filter_mean_range

    def splash_point(F, H, Q, R, m0, P0, y, lo, t, window, broad, m, P, T, U, L, e):
        start = t - window + 1
        if start <= lo:
            start = lo
            set_prior(m0, P0, m, P)
        else:
            for i in range(NX):
                m[i] = ZERO
                for j in range(NX):
                    P[i * NX + j] = broad if i == j else ZERO
        for k in range(start, t):
            if not is_missing(y, k * NY):
                term, ok = update(H, R, y, k * NY, m, P, U, L, e)
                if not ok:
                    return 0.0, False, False
            predict(F, Q, m, P, T)
        if is_missing(y, t * NY):
            return 0.0, False, True
        logdet, ok = gain(H, R, P, U, L)
        if not ok:
            return 0.0, True, False
        quad = innovation(H, y, t * NY, m, L, e)
        return loglik_term(logdet, quad), True, True

    def point_shared(F, H, y, lo, t, window, m, t_, U, L, e, Ws, Ls, logdets):
        start = t - window + 1
        if start <= lo:
            return 0.0, False, False
        if is_missing(y, t * NY):
            return 0.0, False, True
        for k in range(start, t):
            if is_missing(y, k * NY):
                return 0.0, False, False
        for i in range(NX):
            m[i] = ZERO
        if window > 1:
            filter_mean_range(F, H, y, start, window - 1, 1, 0, window - 1, m, t_, U, L, e, Ws,
                              Ls, logdets)
            predict_mean(F, m, t_)
        last = window - 1
        for j in range(NYY):
            L[j] = Ls[last * NYY + j]
        quad = innovation(H, y, t * NY, m, L, e)
        return loglik_term(logdets[last], quad), True, True

    return SplashSteps(jit(splash_point), jit(point_shared))
