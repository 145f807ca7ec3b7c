"""Slow, plain NumPy Kalman filter, RTS smoother and scan elements: the oracle.

Shares no code with bulkem's engines.  It follows the textbook equations
literally (gain by ``numpy.linalg.solve``, Joseph-form covariance update,
``scipy.stats.multivariate_normal`` for the predictive densities) with the
same conventions as bulkem: ``m0, P0`` is the prior of the first state, a
row holding any NaN is missing.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def _rows(y, d):
    y = np.asarray(y, dtype=float)
    return y.reshape(len(y), d) if y.ndim == 1 else y


def kalman_filter(y, F, H, Q, R, m0, P0):
    """Filter one series.

    Returns
    -------
    dict with ``loglik``, ``terms`` (per step, 0 where missing), ``mp, Pp``
    (predicted moments, step t given steps before it), ``mf, Pf`` (filtered).
    """
    F, H, Q, R = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (F, H, Q, R))
    y = _rows(y, H.shape[0])
    n = F.shape[0]
    T = len(y)
    m = np.asarray(m0, dtype=float).copy()
    P = np.asarray(P0, dtype=float).copy()
    out = {k: [] for k in ("mp", "Pp", "mf", "Pf", "terms")}
    for t in range(T):
        out["mp"].append(m.copy())
        out["Pp"].append(P.copy())
        if np.any(np.isnan(y[t])):
            out["terms"].append(0.0)
        else:
            S = H @ P @ H.T + R
            S = (S + S.T) / 2
            out["terms"].append(float(stats.multivariate_normal(H @ m, S).logpdf(y[t])))
            K = np.linalg.solve(S, H @ P).T  # P H^T S^-1 (S symmetric)
            m = m + K @ (y[t] - H @ m)
            IKH = np.eye(n) - K @ H
            P = IKH @ P @ IKH.T + K @ R @ K.T  # Joseph form
        out["mf"].append(m.copy())
        out["Pf"].append(P.copy())
        m = F @ m
        P = F @ P @ F.T + Q
    res = {k: np.array(v) for k, v in out.items()}
    res["loglik"] = float(np.sum(res["terms"]))
    return res


def splash_loglik(y, F, H, Q, R, m0, P0, window, broad):
    """The splash approximation, literally: for each step a fresh filter over its window.

    The window of step t is steps ``t - window + 1 .. t``; it starts from
    ``N(0, broad I)``, or from the prior ``N(m0, P0)`` where it reaches the
    series' first step.
    """
    F, H, Q, R = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (F, H, Q, R))
    y = _rows(y, H.shape[0])
    n = F.shape[0]
    total = 0.0
    for t in range(len(y)):
        start = t - window + 1
        if start <= 0:
            start, m, P = 0, np.asarray(m0, float), np.asarray(P0, float)
        else:
            m, P = np.zeros(n), broad * np.eye(n)
        f = kalman_filter(y[start:t + 1], F, H, Q, R, m, P)
        total += f["terms"][-1]
    return total


def rts_smoother(y, F, H, Q, R, m0, P0):
    """Filter, then Rauch-Tung-Striebel smoother with lag-one covariances.

    Returns
    -------
    dict with ``mean`` (T, n), ``cov`` (T, n, n), ``lag`` (T - 1, n, n),
    ``lag[t] = Cov(x_{t+1}, x_t | y)``, from the Shumway-Stoffer backward
    recursion for the lag-one covariance (not the ``Ps G^T`` shortcut that
    the engine uses), and ``loglik``.
    """
    F, H = np.atleast_2d(F), np.atleast_2d(H)
    f = kalman_filter(y, F, H, Q, R, m0, P0)
    T, n = f["mf"].shape
    ms = np.empty_like(f["mf"])
    Ps = np.empty_like(f["Pf"])
    G = np.empty((T, n, n))
    ms[-1], Ps[-1] = f["mf"][-1], f["Pf"][-1]
    for t in range(T - 2, -1, -1):
        G[t] = f["Pf"][t] @ F.T @ np.linalg.pinv(f["Pp"][t + 1])
        ms[t] = f["mf"][t] + G[t] @ (ms[t + 1] - f["mp"][t + 1])
        Ps[t] = f["Pf"][t] + G[t] @ (Ps[t + 1] - f["Pp"][t + 1]) @ G[t].T
    # Shumway and Stoffer (2017), Property 6.3: P_{T,T-1} = (I - K_T H) F P_{T-1|T-1},
    # P_{t-1,t-2} = Pf_{t-1} G_{t-2}^T + G_{t-1} (P_{t,t-1} - F Pf_{t-1}) G_{t-2}^T.
    lag = np.empty((max(T - 1, 0), n, n))
    if T >= 2:
        y2 = _rows(y, H.shape[0])
        Pp = f["Pp"][T - 1]
        if np.any(np.isnan(y2[T - 1])):
            K = np.zeros((n, H.shape[0]))
        else:
            S = H @ Pp @ H.T + np.atleast_2d(R)
            K = np.linalg.solve(S, H @ Pp).T
        lag[T - 2] = (np.eye(n) - K @ H) @ F @ f["Pf"][T - 2]
        for t in range(T - 2, 0, -1):  # lag[t - 1] = Cov(x_t, x_{t-1})
            lag[t - 1] = (f["Pf"][t] @ G[t - 1].T
                          + G[t] @ (lag[t] - F @ f["Pf"][t]) @ G[t - 1].T)
    return dict(mean=ms, cov=Ps, lag=lag, loglik=f["loglik"])


def scan_element(y_t, F, H, Q, R, first=False, m0=None, P0=None):
    """The one-step element (A, b, C, eta, J) of Saerkkae and Garcia-Fernandez (2021), eq. 32-34.

    For the first step of a series (``first``), the element of the prior
    ``N(m0, P0)`` updated with ``y_t`` (A = 0, eta = 0, J = 0).  A missing
    ``y_t`` gives the pure prediction (F, 0, Q, 0, 0).
    """
    F, H, Q, R = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (F, H, Q, R))
    n = F.shape[0]
    y_t = np.atleast_1d(np.asarray(y_t, dtype=float))
    missing = bool(np.any(np.isnan(y_t)))
    if first:
        m0, P0 = np.asarray(m0, float), np.asarray(P0, float)
        if missing:
            return np.zeros((n, n)), m0.copy(), P0.copy(), np.zeros(n), np.zeros((n, n))
        S = H @ P0 @ H.T + R
        K = np.linalg.solve(S, H @ P0).T
        return (np.zeros((n, n)), m0 + K @ (y_t - H @ m0), P0 - K @ S @ K.T, np.zeros(n),
                np.zeros((n, n)))
    if missing:
        return F.copy(), np.zeros(n), Q.copy(), np.zeros(n), np.zeros((n, n))
    S = H @ Q @ H.T + R
    K = np.linalg.solve(S, H @ Q).T
    IKH = np.eye(n) - K @ H
    Sinv = np.linalg.inv(S)
    return (IKH @ F, K @ y_t, IKH @ Q, F.T @ H.T @ Sinv @ y_t, F.T @ H.T @ Sinv @ H @ F)


def scan_combine(e1, e2):
    """Saerkkae and Garcia-Fernandez (2021), Lemma 8: element 1 (earlier) then element 2."""
    A1, b1, C1, eta1, J1 = e1
    A2, b2, C2, eta2, J2 = e2
    n = len(b1)
    I = np.eye(n)
    W = A2 @ np.linalg.inv(I + C1 @ J2)
    V = A1.T @ np.linalg.inv(I + J2 @ C1)
    return (W @ A1, W @ (b1 + C1 @ eta2) + b2, W @ C1 @ A2.T + C2,
            V @ (eta2 - J2 @ b1) + eta1, V @ J2 @ A1 + J1)


def scan_loglik(y, F, H, Q, R, m0, P0):
    """Log-likelihood through a plain sequential prefix of scan elements (not parallel).

    The filtered law of step t is the (b, C) of the prefix of elements
    1..t; the predictive density of ``y_{t+1}`` follows from it.
    """
    F, H, Q, R = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (F, H, Q, R))
    y = _rows(y, H.shape[0])
    ll = 0.0
    m, P = np.asarray(m0, float), np.asarray(P0, float)
    acc = None
    for t in range(len(y)):
        if not np.any(np.isnan(y[t])):
            S = H @ P @ H.T + R
            ll += float(stats.multivariate_normal(H @ m, (S + S.T) / 2).logpdf(y[t]))
        el = scan_element(y[t], F, H, Q, R, first=(t == 0), m0=m0, P0=P0)
        acc = el if acc is None else scan_combine(acc, el)
        m, P = F @ acc[1], F @ acc[2] @ F.T + Q
    return ll
