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
"""

from __future__ import annotations

from .kalman import KalmanSteps


def make_splash(nx: int, ny: int, dtype, jit, steps: KalmanSteps):
    """Build ``splash_point`` (``jit``: the engine's ``jit_outer``; it loops).

    Returns
    -------
    callable
        ``splash_point(F, H, Q, R, m0, P0, y, lo, t, window, broad, m, P, T, U, L, e)
        -> (loglik term, observed, ok)``: the approximate ``log p(y_t | y_{t-window+1}
        .. y_{t-1})`` of step ``t`` of the series that starts at row ``lo``
        (0 when ``y_t`` is missing: ``observed`` False); ``ok`` False if an
        innovation covariance was not positive definite.  Scratch as for
        :func:`bulkem.models.ssm.kalman.make_kalman`.
    """
    NX = nx
    NY = ny
    ZERO = dtype(0.0)
    is_missing, predict, update, gain, innovation, loglik_term, set_prior = (
        steps.is_missing, steps.predict, steps.update, steps.gain, steps.innovation,
        steps.loglik_term, steps.set_prior)

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

    return jit(splash_point)
