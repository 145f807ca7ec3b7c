"""Slow, plain NumPy/SciPy oracles for TMAPs with Erlang branches.  No code shared with bulkem.

* :func:`forward_backward`: one run's forward and backward vectors in the
  paper's normal form (a mantissa vector whose sum lies in [0.5, 1) and an
  integer power-of-two exponent, eqs 24-26), the posteriors of eqs 19-20 and
  the run's log-likelihood (eq. 30);
* :func:`em`: the EM of eqs 21-23 over a trace's runs, with bulkem's
  iteration semantics (the log-likelihood reported is that of the returned
  parameters, ``n_iter`` counts M-steps, a fall by more than 1e-9 relative
  or a non-finite log-likelihood is "degenerate", a branch with no mass left
  is "degenerate");
* :func:`matrix_loglik`: a run's log-likelihood by the matrix form (2)/(8)
  with scipy's ``expm`` on the equivalent phase-level TMAP ``(alpha, D0, D1)``;
* :func:`matrix_moments`: eqs 1-7 on the phase-level matrices;
* :func:`sample`: runs drawn one value at a time.

Conventions: ``a[k]`` (k = 0..K-1) is the forward vector before value
``k + 1`` (``a[0] = alpha``, ``a[k] = (a[k-1] * f(x_k)) Pi``); ``b[k]``
(k = 1..K) the backward vector from value ``k`` on, its density included
(``b[K] = f(x_K) * d``, ``b[k] = f(x_k) * (Pi b[k+1])``); the run's
likelihood is ``a[k-1] . b[k]`` for any k.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.linalg import expm


def densities(x, rates, orders):
    """f_i(x_k): array (K, R), from scipy's gamma distribution."""
    x = np.asarray(x, dtype=float)
    return np.exp(stats.gamma.logpdf(x[:, None], a=np.asarray(orders, float)[None],
                                     scale=1.0 / np.asarray(rates, float)[None]))


def _normal(v):
    """(mantissa vector, exponent) with the mantissa's sum in [0.5, 1)."""
    _, e = np.frexp(v.sum())
    return np.ldexp(v, -e), int(e)


def forward_backward(x, p, orders):
    """One run: (loglik, q (K, R), q2 (R, R) summed over k, start posterior (R,))."""
    alpha, pi, rates = p["alpha"], p["pi"], p["rates"]
    d = 1.0 - pi.sum(axis=1)
    f = densities(x, rates, orders)
    K, R = f.shape
    am = np.empty((K, R))  # mantissas of a[0..K-1]
    ae = np.empty(K, dtype=np.int64)
    am[0], ae[0] = _normal(alpha)
    for k in range(1, K):
        m, e = _normal((am[k - 1] * f[k - 1]) @ pi)
        am[k], ae[k] = m, ae[k - 1] + e
    bm = np.empty((K, R))  # mantissas of b[1..K] (row k-1 is b[k])
    be = np.empty(K, dtype=np.int64)
    bm[K - 1], be[K - 1] = _normal(f[K - 1] * d)
    for k in range(K - 2, -1, -1):
        m, e = _normal(f[k] * (pi @ bm[k + 1]))
        bm[k], be[k] = m, be[k + 1] + e
    lm = am[0] @ bm[0]  # a[0] . b[1] in normal form: (mantissa, exponent)
    le = ae[0] + be[0]
    ll = np.log(lm) + le * np.log(2.0)
    # q_i[k] = a_i[k-1] b_i[k] / L: mantissas times 2^(exponents - L's exponent)
    q = am * bm * np.ldexp(1.0, (ae + be - le))[:, None] / lm
    q2 = np.zeros((R, R))
    for k in range(K - 1):
        scale = np.ldexp(1.0, int(ae[k] + be[k + 1] - le)) / lm
        q2 += (am[k] * f[k])[:, None] * pi * bm[k + 1][None, :] * scale
    return float(ll), q, q2, q[0]


def loglik(runs, p, orders):
    return sum(forward_backward(x, p, orders)[0] for x in runs)


def em(runs, params, orders, max_iter=100, tol=1e-6, update="ste"):
    """EM from the given parameters over a trace's runs (eqs 21-23).

    Returns dict with the parameters, loglik, n_iter, status and trace.
    """
    p = {k: np.array(v, dtype=float) for k, v in params.items()}
    r = np.asarray(orders, dtype=float)
    trace = []
    it = 0
    while True:
        R = len(p["alpha"])
        occ, sx, xi, start = np.zeros(R), np.zeros(R), np.zeros((R, R)), np.zeros(R)
        ll = 0.0
        for x in runs:
            lr, q, q2, q0 = forward_backward(x, p, orders)
            ll += lr
            occ += q.sum(axis=0)
            sx += q.T @ np.asarray(x, dtype=float)
            xi += q2
            start += q0
        trace.append(ll)
        status = None
        if not np.isfinite(ll):
            status = "degenerate"
        elif it > 0 and ll < trace[-2] - 1e-9 * abs(trace[-2]):
            status = "degenerate"
        elif it > 0 and abs(ll - trace[-2]) < tol:
            status = "converged"
        elif it == max_iter:
            status = "max_iter"
        if status:
            return dict(p, loglik=ll, n_iter=it, status=status, trace=trace)
        if np.any(occ < 1e-8):
            return dict(p, loglik=ll, n_iter=it, status="degenerate", trace=trace)
        if "s" in update:
            p["alpha"] = start / len(runs)  # (23)
        if "t" in update:
            p["pi"] = xi / occ[:, None]  # (22): the denominator runs to K
        if "e" in update:
            p["rates"] = r * occ / sx  # (21)
        it += 1


def phase_tmap(p, orders):
    """The equivalent phase-level TMAP: (alpha, D0, D1, d) with r_i phases for branch i."""
    alpha, pi, rates = (np.asarray(p[k], float) for k in ("alpha", "pi", "rates"))
    orders = [int(r) for r in orders]
    first = np.concatenate([[0], np.cumsum(orders)[:-1]])
    last = first + np.asarray(orders) - 1
    n = int(sum(orders))
    D0 = np.zeros((n, n))
    D1 = np.zeros((n, n))
    a = np.zeros(n)
    d = np.zeros(n)
    for i, r in enumerate(orders):
        a[first[i]] = alpha[i]
        for k in range(r):
            D0[first[i] + k, first[i] + k] = -rates[i]
            if k + 1 < r:
                D0[first[i] + k, first[i] + k + 1] = rates[i]
        for j in range(len(orders)):
            D1[last[i], first[j]] = rates[i] * pi[i, j]
        d[last[i]] = rates[i] * (1.0 - pi[i].sum())
    return a, D0, D1, d


def matrix_loglik(x, p, orders):
    """log(alpha e^{D0 x_1} D1 ... e^{D0 x_K} d) (eq. 8 for one run), by expm."""
    a, D0, D1, d = phase_tmap(p, orders)
    v = a
    for k, xk in enumerate(x):
        v = v @ expm(D0 * xk)
        v = v @ (D1 if k + 1 < len(x) else np.diag(d))
    return float(np.log(v.sum()))


def matrix_moments(p, orders):
    """E(K) (1), E(X) (5), Corr(X_1, X_2 | K >= 2) (6, 7 with k = 1), on phase matrices."""
    a, D0, D1, d = phase_tmap(p, orders)
    n = len(a)
    one = np.ones(n)
    U = np.linalg.inv(-D0)
    P = U @ D1
    N = np.linalg.inv(np.eye(n) - P)
    ek = a @ N @ one
    ex = a @ N @ U @ one / ek
    p2 = a @ P @ one
    e1, e11 = a @ U @ one, 2 * a @ U @ U @ one
    e2, e22 = a @ P @ U @ one / p2, 2 * a @ P @ U @ U @ one / p2
    e12 = a @ U @ P @ U @ one / p2
    corr = (e12 - e1 * e2) / np.sqrt((e11 - e1**2) * (e22 - e2**2))
    return {"mean_run_length": ek, "mean_interarrival": ex, "corr_x1_x2": corr}


def sample(p, orders, n_runs, rng):
    """Runs drawn one value at a time: list of arrays."""
    alpha, pi, rates = p["alpha"], p["pi"], p["rates"]
    R = len(alpha)
    nxt = np.concatenate([pi, 1.0 - pi.sum(axis=1, keepdims=True)], axis=1)
    runs = []
    for _ in range(n_runs):
        b = rng.choice(R, p=alpha)
        run = []
        while b < R:
            run.append(rng.gamma(orders[b], 1.0 / rates[b]))
            b = rng.choice(R + 1, p=nxt[b] / nxt[b].sum())
        runs.append(np.array(run))
    return runs
