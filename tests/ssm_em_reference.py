"""Slow, plain NumPy/SciPy EM of AR(p)-plus-noise and local-level models: the oracle.

Shares no code with bulkem's engines.  The E-step is the textbook filter and
smoother of :mod:`kalman_reference` (Shumway and Stoffer's lag-one
recursion); the stationary prior and its derivatives come from SciPy's
discrete Lyapunov solver (bulkem: the Yule-Walker equations), stationarity
from the companion matrix's eigenvalues (bulkem: the step-down recursion).
The update rules are bulkem's (see ``bulkem/models/ssm/em.py``), with the
same iteration semantics: the reported log-likelihood is that of the
returned parameters, ``n_iter`` counts M-steps, a fall by more than 1e-9
relative or a non-finite log-likelihood is "degenerate".  ``weights`` (one per
series, bulkem's ``fit(weights=...)``) multiply each series' log-likelihood and
statistics, and the number of series is their sum.
"""

from __future__ import annotations

import numpy as np
from kalman_reference import rts_smoother
from scipy.linalg import solve_discrete_lyapunov

MAX_HALVINGS = 30


def companion(phi):
    p = len(phi)
    F = np.zeros((p, p))
    F[0] = phi
    F[1:, :-1] = np.eye(p - 1)
    return F


def is_stationary(phi):
    return float(np.max(np.abs(np.linalg.eigvals(companion(phi))))) < 1.0


def stationary_cov(phi, s2):
    p = len(phi)
    Q = np.zeros((p, p))
    Q[0, 0] = s2
    P0 = solve_discrete_lyapunov(companion(phi), Q)
    return (P0 + P0.T) / 2


def ar_model(phi, s2, r):
    p = len(phi)
    H = np.zeros((1, p))
    H[0, 0] = 1.0
    Q = np.zeros((p, p))
    Q[0, 0] = s2
    return companion(phi), H, Q, np.array([[r]]), np.zeros(p), stationary_cov(phi, s2)


def _prior_term(phi, s2, S11, n):
    """(-n/2 log det P0 - tr(P0^{-1} S11) / 2) of the stationary prior; None if not stationary."""
    if not is_stationary(phi):
        return None
    P0 = stationary_cov(phi, s2)
    sign, logdet = np.linalg.slogdet(P0)
    if sign <= 0:
        return None
    return -0.5 * n * logdet - 0.5 * np.trace(np.linalg.solve(P0, S11))


def _prior_grad(phi, s2, S11, n):
    """Gradient in phi of the prior term, through the differentiated Lyapunov equation."""
    p = len(phi)
    F = companion(phi)
    P0 = stationary_cov(phi, s2)
    inv = np.linalg.inv(P0)
    M = inv @ S11 @ inv - n * inv
    g = np.empty(p)
    for j in range(p):
        dF = np.zeros((p, p))
        dF[0, j] = 1.0
        E = dF @ P0 @ F.T + F @ P0 @ dF.T
        dP = solve_discrete_lyapunov(F, E)
        g[j] = 0.5 * np.sum(dP * M)
    return g


def _stop(trace, it, max_iter, tol):
    ll = trace[-1]
    if not np.isfinite(ll):
        return "degenerate"
    if it > 0 and ll < trace[-2] - 1e-9 * abs(trace[-2]):
        return "degenerate"
    if it > 0 and abs(ll - trace[-2]) < tol:
        return "converged"
    if it == max_iter:
        return "max_iter"
    return None


def _weights(series, weights):
    return np.ones(len(series)) if weights is None else np.asarray(weights, dtype=float)


def ar_estep(series, phi, s2, r, weights=None):
    F, H, Q, R, m0, P0 = ar_model(phi, s2, r)
    p = len(phi)
    st = dict(ll=0.0, c00=0.0, c10=np.zeros(p), C11=np.zeros((p, p)), S11=np.zeros((p, p)),
              obs=0.0, n_obs=0, n_trans=0)
    for y, w in zip(series, _weights(series, weights), strict=True):
        sm = rts_smoother(y, F, H, Q, R, m0, P0)
        st["ll"] += w * sm["loglik"]
        ms, Ps, lag = sm["mean"], sm["cov"], sm["lag"]
        Ex = Ps + ms[:, :, None] * ms[:, None, :]  # E[x_t x_t']
        for t in range(len(y) - 1):
            st["c00"] += w * Ex[t + 1, 0, 0]
            st["c10"] += w * (lag[t][0] + ms[t + 1, 0] * ms[t])
            st["C11"] += w * Ex[t]
        st["S11"] += w * Ex[0]
        seen = ~np.isnan(y)
        st["obs"] += w * np.sum((y[seen] - ms[seen, 0]) ** 2 + Ps[seen, 0, 0])
        st["n_obs"] += w * int(seen.sum())
        st["n_trans"] += w * (len(y) - 1)
    return st


def ar_mstep(st, phi, s2, n):
    """(phi, state_var, obs_var, ok) after one M-step (see bulkem/models/ssm/em.py)."""
    p = len(phi)
    r = st["obs"] / st["n_obs"]

    def ssr(a):
        return st["c00"] - 2 * a @ st["c10"] + a @ st["C11"] @ a

    def q(a):
        pt = _prior_term(a, s2, st["S11"], n)
        return None if pt is None else -ssr(a) / (2 * s2) + pt

    q_old = q(phi)
    d = np.linalg.solve(st["C11"], st["c10"] + s2 * _prior_grad(phi, s2, st["S11"], n)) - phi
    lam = 1.0
    for _ in range(MAX_HALVINGS + 1):
        a = phi + lam * d
        qa = q(a)
        if qa is not None and qa >= q_old:
            phi = a
            break
        lam *= 0.5
    G1 = stationary_cov(phi, 1.0)
    s2 = (ssr(phi) + np.trace(np.linalg.solve(G1, st["S11"]))) / (st["n_trans"] + n * p)
    return phi, s2, r, bool(s2 > 0 and r > 0)


def ar_em(series, phi, state_var, obs_var, max_iter=100, tol=1e-6, weights=None):
    """EM of AR(p) plus noise over a dataset's series from the given start (``weights``:
    one per series).

    Returns dict with ``phi, state_var, obs_var, loglik, n_iter, status, trace``.
    """
    phi = np.array(phi, dtype=float)
    s2, r = float(state_var), float(obs_var)
    series = [np.asarray(y, dtype=float) for y in series]
    trace = []
    it = 0
    while True:
        st = ar_estep(series, phi, s2, r, weights)
        trace.append(st["ll"])
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(phi=phi, state_var=s2, obs_var=r, loglik=trace[-1], n_iter=it,
                        status=status, trace=trace)
        phi, s2, r, ok = ar_mstep(st, phi, s2, _weights(series, weights).sum())
        if not ok:
            return dict(phi=phi, state_var=s2, obs_var=r, loglik=trace[-1], n_iter=it,
                        status="degenerate", trace=trace)
        it += 1


def level_em(series, level0, state_var, obs_var, max_iter=100, tol=1e-6, weights=None):
    """EM of the local level (prior of the first level N(level0, state_var); ``weights``:
    one per series).

    Returns dict with ``level0, state_var, obs_var, loglik, n_iter, status, trace``.
    """
    mu, q, r = float(level0), float(state_var), float(obs_var)
    series = [np.asarray(y, dtype=float) for y in series]
    ws = _weights(series, weights)
    n = ws.sum()
    trace = []
    it = 0
    while True:
        ll = trans = obs = first = first2 = 0.0
        n_obs = n_trans = 0
        for y, w in zip(series, ws, strict=True):
            sm = rts_smoother(y, [[1.0]], [[1.0]], [[q]], [[r]], [mu], [[q]])
            ll += w * sm["loglik"]
            ms, Ps, lag = sm["mean"][:, 0], sm["cov"][:, 0, 0], sm["lag"][:, 0, 0]
            trans += w * np.sum(Ps[1:] + Ps[:-1] - 2 * lag + (ms[1:] - ms[:-1]) ** 2)
            first += w * ms[0]
            first2 += w * (ms[0] ** 2 + Ps[0])
            seen = ~np.isnan(y)
            obs += w * np.sum((y[seen] - ms[seen]) ** 2 + Ps[seen])
            n_obs += w * int(seen.sum())
            n_trans += w * (len(y) - 1)
        trace.append(ll)
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(level0=mu, state_var=q, obs_var=r, loglik=ll, n_iter=it, status=status,
                        trace=trace)
        mu = first / n
        q = (trans + first2 - n * mu**2) / (n_trans + n)
        r = obs / n_obs
        it += 1


def _diffuse_level_posterior(y, q, r):
    """A local level with a flat prior, by dense linear algebra (not a Kalman filter).

    From the first observed step on (the steps before it drop out), ``log p(y, x) =
    const - (x' J x - 2 b' x + y' y / r) / 2`` with ``J = D' D / q + diag(seen) / r``
    (``D`` the differences), so ``x | y ~ N(J^{-1} b, J^{-1})`` and, integrating ``x``
    against Lebesgue measure, the log-likelihood in closed form; Durbin and Koopman's
    exact diffuse value is it less ``log(2 pi) / 2`` (their ``F_inf = 1`` term).
    """
    y = np.asarray(y, dtype=float)
    y = y[int(np.argmax(~np.isnan(y))):]
    m = len(y)
    seen = ~np.isnan(y)
    D = np.diff(np.eye(m), axis=0)
    J = D.T @ D / q + np.diag(seen / r)
    b = np.where(seen, y, 0.0) / r
    cov = np.linalg.inv(J)
    mean = cov @ b
    k = int(seen.sum())
    ll = (-0.5 * k * np.log(2 * np.pi * r) - 0.5 * (m - 1) * np.log(2 * np.pi * q)
          - 0.5 * np.sum(y[seen] ** 2) / r + 0.5 * b @ mean + 0.5 * m * np.log(2 * np.pi)
          - 0.5 * np.linalg.slogdet(J)[1] - 0.5 * np.log(2 * np.pi))
    return ll, mean, cov, y, seen


def diffuse_level_loglik(series, state_var, obs_var):
    """The exact diffuse log-likelihood of series of one local level (the sum)."""
    return sum(_diffuse_level_posterior(y, state_var, obs_var)[0] for y in series)


def diffuse_level_em(series, state_var, obs_var, max_iter=100, tol=1e-6, weights=None):
    """EM of the local level with the exact diffuse prior (bulkem's ``prior="diffuse"``;
    ``weights``: one per series).

    Returns dict with ``state_var, obs_var, loglik, n_iter, status, trace``.
    """
    q, r = float(state_var), float(obs_var)
    trace = []
    it = 0
    while True:
        ll = trans = obs = 0.0
        n_obs = n_trans = 0
        for y, w in zip(series, _weights(series, weights), strict=True):
            part, mean, cov, yy, seen = _diffuse_level_posterior(y, q, r)
            ll += w * part
            v = np.diag(cov)
            trans += w * np.sum(v[1:] + v[:-1] - 2 * np.diag(cov, 1) + np.diff(mean) ** 2)
            obs += w * np.sum((yy[seen] - mean[seen]) ** 2 + v[seen])
            n_obs += w * int(seen.sum())
            n_trans += w * (len(yy) - 1)
        trace.append(ll)
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(state_var=q, obs_var=r, loglik=ll, n_iter=it, status=status,
                        trace=trace)
        q = trans / n_trans
        r = obs / n_obs
        it += 1


def simulate_ar(phi, state_var, obs_var, lengths, rng):
    """Series of AR(p) plus noise, each from the stationary law."""
    phi = np.asarray(phi, dtype=float)
    p = len(phi)
    P0 = stationary_cov(phi, state_var)
    out = []
    for n in lengths:
        x = rng.multivariate_normal(np.zeros(p), P0)
        z = np.empty(n)
        for t in range(n):
            z[t] = x[0]
            x = np.concatenate([[phi @ x + rng.normal(0, np.sqrt(state_var))], x[:-1]])
        out.append(z + rng.normal(0, np.sqrt(obs_var), n))
    return out


def simulate_level(level0, state_var, obs_var, lengths, rng):
    """Series of the local level, each starting from N(level0, state_var)."""
    out = []
    for n in lengths:
        x = level0 + np.cumsum(rng.normal(0, np.sqrt(state_var), n))
        out.append(x + rng.normal(0, np.sqrt(obs_var), n))
    return out
