"""Slow, plain NumPy/SciPy oracles for hidden Markov models.  No code shared with the engines.

Forward-backward in log space (scipy's logsumexp), Viterbi by the textbook
recursion, and Baum-Welch with the same iteration semantics as bulkem: the
log-likelihood reported is that of the returned parameters, ``n_iter``
counts M-steps, a fall by more than 1e-9 relative or a non-finite
log-likelihood is "degenerate".
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.special import logsumexp


def log_emission(x, emission, params):
    """log b_i(x_t): array (T, N); 0 at a missing step (NaN in any dimension: skipped)."""
    x = np.asarray(x, dtype=float)
    miss = np.isnan(x.reshape(len(x), -1)).any(axis=1)
    x = np.where(np.isnan(x), 0.0, x)
    if emission == "categorical":
        with np.errstate(divide="ignore"):
            out = np.log(params["emissionprob"].T[x.astype(int)])
    elif emission == "gaussian":
        x = x.reshape(len(x), -1)
        m, v = params["means"], params["vars"]
        out = stats.norm.logpdf(x[:, None, :], m[None], np.sqrt(v)[None]).sum(axis=2)
    else:
        out = poisson_logpmf(x[:, None], params["lambdas"][None])
    out[miss] = 0.0
    return out


def poisson_logpmf(x, lam):
    """log Poisson(x; lam), accurate for huge counts too (Loader's saddle-point form).

    scipy's ``x log(lam) - lam - lgamma(x + 1)`` cancels to nothing for counts of
    1e15 (terms of 3e16); here ``-0.5 log(2 pi x) - stirlerr(x) - bd0(x, lam)``,
    the deviance ``bd0 = x log(x / lam) + lam - x`` summed as a series where x ~ lam.
    """
    x, lam = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(lam, dtype=float))
    out = stats.poisson.logpmf(x, lam)
    for k in zip(*np.nonzero(x > 1e4), strict=True):
        out[k] = _loader_logpmf(float(x[k]), float(lam[k]))
    return out


def _loader_logpmf(x, lam):
    # stirlerr(x) = lgamma(x + 1) - (x + 1/2) log x + x - log(2 pi)/2, by its series (x > 1e4)
    stirlerr = 1 / (12 * x) - 1 / (360 * x**3) + 1 / (1260 * x**5)
    if abs(x - lam) < 0.1 * (x + lam):
        v = (x - lam) / (x + lam)
        bd0 = (x - lam) * v
        ej = 2 * x * v
        for j in range(1, 1000):
            ej *= v * v
            nxt = bd0 + ej / (2 * j + 1)
            if nxt == bd0:
                break
            bd0 = nxt
    else:
        bd0 = x * np.log(x / lam) + lam - x
    return -0.5 * np.log(2 * np.pi * x) - stirlerr - bd0


def forward_backward(x, emission, params, terminating=False):
    """(loglik, gamma (T, N), xi_sum (N, N)) of one sequence, in log space."""
    lb = log_emission(x, emission, params)
    T, N = lb.shape
    with np.errstate(divide="ignore"):
        ls, la = np.log(params["startprob"]), np.log(params["transmat"])
        lexit = np.log(1.0 - params["transmat"].sum(axis=1)) if terminating else np.zeros(N)
    alpha = np.empty((T, N))
    alpha[0] = ls + lb[0]
    for t in range(1, T):
        alpha[t] = logsumexp(alpha[t - 1][:, None] + la, axis=0) + lb[t]
    beta = np.empty((T, N))
    beta[T - 1] = lexit
    for t in range(T - 2, -1, -1):
        beta[t] = logsumexp(la + (lb[t + 1] + beta[t + 1])[None, :], axis=1)
    ll = logsumexp(alpha[T - 1] + lexit)
    gamma = np.exp(alpha + beta - ll)
    xi = np.zeros((N, N))
    for t in range(T - 1):
        xi += np.exp(alpha[t][:, None] + la + (lb[t + 1] + beta[t + 1])[None, :] - ll)
    return ll, gamma, xi


def viterbi(x, emission, params):
    """(log probability, path) of the most probable state path; ties to the lowest state."""
    lb = log_emission(x, emission, params)
    T, N = lb.shape
    with np.errstate(divide="ignore"):
        ls, la = np.log(params["startprob"]), np.log(params["transmat"])
    lat = ls + lb[0]
    back = np.zeros((T, N), dtype=int)
    for t in range(1, T):
        cand = lat[:, None] + la
        back[t] = np.argmax(cand, axis=0)
        lat = cand[back[t], np.arange(N)] + lb[t]
    path = np.empty(T, dtype=int)
    path[-1] = int(np.argmax(lat))
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return float(lat.max()), path


def baum_welch(seqs, emission, params, max_iter=100, tol=1e-6, reg_covar=1e-6,
               terminating=False, update="ste", weights=None):
    """EM from the given parameters over a dataset's sequences.

    ``weights``: one per sequence (default 1): its log-likelihood and its posteriors count
    that many times, the start probabilities divide by the weights' sum.

    Returns dict with the parameters, loglik, n_iter, status and trace.
    """
    p = {k: np.array(v, dtype=float) for k, v in params.items()}
    ws = np.ones(len(seqs)) if weights is None else np.asarray(weights, dtype=float)
    trace = []
    it = 0
    while True:
        N = len(p["startprob"])
        start, trans, occ = np.zeros(N), np.zeros((N, N)), np.zeros(N)
        gam_x, gam_x2, counts, seen = 0.0, 0.0, 0.0, np.zeros(N)
        ll = 0.0
        for x, w in zip(seqs, ws, strict=True):
            lls, gamma, xi = forward_backward(x, emission, p, terminating)
            if w != 1.0:
                lls, gamma, xi = w * lls, w * gamma, w * xi
            ll += lls
            start += gamma[0]
            trans += xi
            occ += gamma.sum(axis=0)
            xs = np.asarray(x, dtype=float)
            obs = ~np.isnan(xs.reshape(len(xs), -1)).any(axis=1)  # the emissions' steps
            g, xs = gamma[obs], xs[obs]
            seen += g.sum(axis=0)
            if emission == "categorical":
                V = p["emissionprob"].shape[1]
                counts = counts + g.T @ np.eye(V)[xs.astype(int)]
            else:
                xs = xs.reshape(len(xs), -1) if emission == "gaussian" else xs[:, None]
                gam_x = gam_x + g.T @ xs
                gam_x2 = gam_x2 + g.T @ xs**2
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
        if "s" in update:
            p["startprob"] = start / ws.sum()
        if "t" in update:
            den = occ[:, None] if terminating else trans.sum(axis=1, keepdims=True)
            p["transmat"] = trans / den
        if "e" in update:
            if emission == "categorical":
                p["emissionprob"] = counts / seen[:, None]
            elif emission == "gaussian":
                mean = gam_x / seen[:, None]
                p["means"] = mean
                p["vars"] = gam_x2 / seen[:, None] - mean**2 + reg_covar
            else:
                p["lambdas"] = (gam_x / seen[:, None])[:, 0]
        it += 1


def sample(params, emission, lengths, rng):
    """Sequences drawn from a model: list of arrays (and their states)."""
    N = len(params["startprob"])
    out, states = [], []
    for T in lengths:
        s = np.empty(T, dtype=int)
        s[0] = rng.choice(N, p=params["startprob"])
        for t in range(1, T):
            s[t] = rng.choice(N, p=params["transmat"][s[t - 1]])
        if emission == "categorical":
            V = params["emissionprob"].shape[1]
            x = np.array([rng.choice(V, p=params["emissionprob"][k]) for k in s], dtype=float)
        elif emission == "gaussian":
            x = rng.normal(params["means"][s], np.sqrt(params["vars"][s]))
        else:
            x = rng.poisson(params["lambdas"][s]).astype(float)
        out.append(x)
        states.append(s)
    return out, states
