"""Slow, plain NumPy/SciPy oracles.  They share no code with bulkem's engines.

The inverse-Gaussian mixture EM here follows the issue's equations literally
(density from scipy.stats, responsibilities by scipy's logsumexp, lambda
updated with the old mu) with the same iteration semantics as bulkem: the
log-likelihood reported is that of the returned parameters, ``n_iter``
counts M-steps.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, stats
from scipy.special import logsumexp


def _stop(trace, it, max_iter, tol):
    """Status of an EM run whose latest E-step gave trace[-1], or None to go on."""
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


def ig_logpdf(x, mu, lam):
    """log density of IG(mu, lambda) via scipy.stats.invgauss (mean mu, shape lambda)."""
    return stats.invgauss.logpdf(x, mu / lam, scale=lam)


def ig_mix_loglik(x, w, mu, lam):
    """Total log-likelihood of a mixture."""
    comp = np.log(w)[None, :] + ig_logpdf(np.asarray(x)[:, None], mu[None, :], lam[None, :])
    return float(np.sum(logsumexp(comp, axis=1)))


def ig_em(x, w, mu, lam, max_iter=100, tol=1e-6, weights=None):
    """EM for an inverse-Gaussian mixture from the given start (``weights``: one per value,
    each value's log density and responsibilities counted that many times).

    Returns
    -------
    dict with keys weight, mu, lambda, loglik, n_iter, status ("converged",
    "max_iter" or "degenerate"), trace (log-likelihood per E-step)
    """
    x = np.asarray(x, dtype=float)
    w, mu, lam = (np.array(a, dtype=float) for a in (w, mu, lam))
    wts = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=float)
    trace = []
    it = 0
    while True:
        comp = np.log(w)[None, :] + ig_logpdf(x[:, None], mu[None, :], lam[None, :])
        lse = logsumexp(comp, axis=1)
        ll = float((wts * lse).sum())
        trace.append(ll)
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(weight=w, mu=mu, **{"lambda": lam}, loglik=ll, n_iter=it,
                        status=status, trace=trace)
        r = np.exp(comp - lse[:, None]) * wts[:, None]
        s0 = r.sum(axis=0)
        new_mu = (r * x[:, None]).sum(axis=0) / s0
        dev = (x[:, None] - mu[None, :]) ** 2 / (mu[None, :] ** 2 * x[:, None])
        lam = s0 / (r * dev).sum(axis=0)
        mu = new_mu
        w = s0 / wts.sum()
        it += 1


def ig_global_max(x, n_components, n_starts=200, seed=0):
    """The global maximum of the mixture likelihood, found independently.

    Oracle EM from many starts drawn by NumPy (random means from the data,
    moment-based shapes), then a direct quasi-Newton polish of the best fit
    over unconstrained parameters (log weights via softmax, log mu, log lambda).

    Returns
    -------
    (loglik, weight, mu, lambda)
    """
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    var = x.var()
    best = None
    for _ in range(n_starts):
        mu = np.sort(rng.choice(x, n_components, replace=False))
        lam = mu**3 / (var * rng.uniform(0.05, 1.0, n_components))
        w = rng.dirichlet(np.ones(n_components))
        fit = ig_em(x, w, mu, lam, max_iter=2000, tol=1e-10)
        if fit["status"] != "degenerate" and (best is None or fit["loglik"] > best["loglik"]):
            best = fit

    def unpack(theta):
        a = np.concatenate([[0.0], theta[: n_components - 1]])
        w = np.exp(a - logsumexp(a))
        m = n_components
        return w, np.exp(theta[m - 1 : 2 * m - 1]), np.exp(theta[2 * m - 1 :])

    def negll(theta):
        return -ig_mix_loglik(x, *unpack(theta))

    order = np.argsort(best["mu"])
    w, mu, lam = best["weight"][order], best["mu"][order], best["lambda"][order]
    theta0 = np.concatenate([np.log(w[1:] / w[0]), np.log(mu), np.log(lam)])
    res = optimize.minimize(negll, theta0, method="BFGS", options={"gtol": 1e-8})
    theta = res.x if -res.fun >= best["loglik"] else theta0
    w, mu, lam = unpack(theta)
    return ig_mix_loglik(x, w, mu, lam), w, mu, lam


# --- diagonal Gaussian mixtures (issue 5) ---------------------------------
#
# Density from scipy.stats.norm per dimension; the M-step is written out from
# the EM equations with scikit-learn's conventions (n_k = sum r + 10 eps,
# var = E_r[x^2] - mean^2 + reg_covar with the new mean).  Same iteration
# semantics as ig_em.

GAUSS_MIN_MASS = 1e-8  # a component with less summed responsibility has collapsed
GAUSS_VAR_RTOL = 1e-12  # ... as has one whose variance is below this times its mean square


def gauss_logpdf(x, mean, var):
    """log N(x | mean, diag(var)) of each point and component: x (n, D), mean/var (M, D)."""
    x = np.asarray(x, dtype=float).reshape(len(x), -1)
    mean, var = np.atleast_2d(mean), np.atleast_2d(var)
    return stats.norm.logpdf(x[:, None, :], mean[None], np.sqrt(var)[None]).sum(axis=2)


def gauss_mix_logpdf(x, w, mean, var):
    """Log mixture density at each point."""
    return logsumexp(np.log(w)[None, :] + gauss_logpdf(x, mean, var), axis=1)


def gauss_mix_loglik(x, w, mean, var):
    """Total log-likelihood of a diagonal Gaussian mixture."""
    return float(np.sum(gauss_mix_logpdf(x, w, mean, var)))


def gauss_em(x, w, mean, var, max_iter=100, tol=1e-6, reg_covar=1e-6, weights=None):
    """EM for a diagonal Gaussian mixture from the given start (``weights``: one per value,
    each value's log density and responsibilities counted that many times).

    Returns
    -------
    dict with keys weight (M,), mean (M, D), var (M, D), loglik, n_iter,
    status ("converged", "max_iter" or "degenerate"), trace
    """
    x = np.asarray(x, dtype=float).reshape(len(x), -1)
    w = np.array(w, dtype=float)
    mean = np.array(mean, dtype=float).reshape(len(w), -1)
    var = np.array(var, dtype=float).reshape(len(w), -1)
    wts = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=float)
    trace = []
    it = 0
    while True:
        comp = np.log(w)[None, :] + gauss_logpdf(x, mean, var)
        lse = logsumexp(comp, axis=1)
        ll = float((wts * lse).sum())
        trace.append(ll)
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(weight=w, mean=mean, var=var, loglik=ll, n_iter=it, status=status,
                        trace=trace)
        r = np.exp(comp - lse[:, None]) * wts[:, None]
        s0 = r.sum(axis=0)
        nk = s0 + 10 * np.finfo(float).eps
        new_mean = (r.T @ x) / nk[:, None]
        mean2 = (r.T @ x**2) / nk[:, None]
        new_var = mean2 - new_mean**2 + reg_covar
        if np.any(s0 < GAUSS_MIN_MASS) or np.any(new_var <= GAUSS_VAR_RTOL * mean2):
            return dict(weight=w, mean=mean, var=var, loglik=ll, n_iter=it,
                        status="degenerate", trace=trace)
        w, mean, var = s0 / wts.sum(), new_mean, new_var
        it += 1


def poisson_mix_loglik(x, w, rate):
    """Total log-likelihood of a Poisson mixture (scipy.stats.poisson)."""
    comp = np.log(w)[None, :] + stats.poisson.logpmf(np.asarray(x)[:, None], rate[None, :])
    return float(np.sum(logsumexp(comp, axis=1)))


def poisson_em(x, w, rate, max_iter=100, tol=1e-6):
    """EM for a Poisson mixture from the given start (the textbook updates: weight = mean
    responsibility, rate = responsibility-weighted mean); as :func:`ig_em`."""
    x = np.asarray(x, dtype=float)
    w, rate = np.array(w, dtype=float), np.array(rate, dtype=float)
    trace = []
    it = 0
    while True:
        comp = np.log(w)[None, :] + stats.poisson.logpmf(x[:, None], rate[None, :])
        lse = logsumexp(comp, axis=1)
        trace.append(float(lse.sum()))
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(weight=w, rate=rate, loglik=trace[-1], n_iter=it, status=status,
                        trace=trace)
        r = np.exp(comp - lse[:, None])
        s0 = r.sum(axis=0)
        rate = (r * x[:, None]).sum(axis=0) / s0
        w = s0 / len(x)
        it += 1


def lognormal_mix_loglik(x, w, meanlog, varlog):
    """Total log-likelihood of a log-normal mixture (scipy.stats.lognorm)."""
    comp = np.log(w)[None, :] + stats.lognorm.logpdf(np.asarray(x)[:, None], np.sqrt(varlog),
                                                     scale=np.exp(meanlog))
    return float(np.sum(logsumexp(comp, axis=1)))


def lognormal_em(x, w, meanlog, varlog, max_iter=100, tol=1e-6, reg_covar=1e-6):
    """EM for a log-normal mixture from the given start: the Gaussian updates of ``log x``
    (scikit-learn's, as :func:`gauss_em`), each E-step's log-likelihood from
    scipy.stats.lognorm."""
    y = np.log(np.asarray(x, dtype=float))
    w, mu, var = (np.array(a, dtype=float) for a in (w, meanlog, varlog))
    trace = []
    it = 0
    while True:
        comp = np.log(w)[None, :] + stats.lognorm.logpdf(np.exp(y)[:, None], np.sqrt(var),
                                                         scale=np.exp(mu))
        lse = logsumexp(comp, axis=1)
        trace.append(float(lse.sum()))
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(weight=w, meanlog=mu, varlog=var, loglik=trace[-1], n_iter=it,
                        status=status, trace=trace)
        r = np.exp(comp - lse[:, None])
        s0 = r.sum(axis=0)
        nk = s0 + 10 * np.finfo(float).eps
        mu = (r * y[:, None]).sum(axis=0) / nk
        var = (r * y[:, None] ** 2).sum(axis=0) / nk - mu**2 + reg_covar
        w = s0 / len(y)
        it += 1


def gamma_mix_loglik(x, w, shape, rate):
    """Total log-likelihood of a gamma mixture (scipy.stats.gamma)."""
    comp = np.log(w)[None, :] + stats.gamma.logpdf(np.asarray(x)[:, None], shape,
                                                   scale=1.0 / np.asarray(rate))
    return float(np.sum(logsumexp(comp, axis=1)))


def gamma_em(x, w, shape, rate, max_iter=100, tol=1e-6):
    """EM for a gamma mixture from the given start: each component's weighted maximum
    likelihood, the shape from ``log a - digamma(a) = log(mean) - mean(log x)`` by
    scipy's brentq, the rate ``a / mean``; as :func:`ig_em`."""
    from scipy.special import digamma

    x = np.asarray(x, dtype=float)
    w, shape, rate = (np.array(a, dtype=float) for a in (w, shape, rate))
    trace = []
    it = 0
    while True:
        comp = np.log(w)[None, :] + stats.gamma.logpdf(x[:, None], shape, scale=1.0 / rate)
        lse = logsumexp(comp, axis=1)
        trace.append(float(lse.sum()))
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(weight=w, shape=shape, rate=rate, loglik=trace[-1], n_iter=it,
                        status=status, trace=trace)
        r = np.exp(comp - lse[:, None])
        s0 = r.sum(axis=0)
        mean = (r * x[:, None]).sum(axis=0) / s0
        s = np.log(mean) - (r * np.log(x)[:, None]).sum(axis=0) / s0
        shape = np.array([optimize.brentq(lambda a, v=v: np.log(a) - digamma(a) - v,
                                          1e-8, 1e12, xtol=1e-14, rtol=1e-15) for v in s])
        rate = shape / mean
        w = s0 / len(x)
        it += 1


def negbinom_mix_loglik(x, w, size, mu):
    """Total log-likelihood of a negative binomial mixture (scipy.stats.nbinom, ``n = size``,
    ``p = size / (size + mu)``)."""
    size, mu = np.asarray(size, dtype=float), np.asarray(mu, dtype=float)
    comp = np.log(w)[None, :] + stats.nbinom.logpmf(np.asarray(x)[:, None], size[None, :],
                                                    (size / (size + mu))[None, :])
    return float(np.sum(logsumexp(comp, axis=1)))


def negbinom_em(x, w, size, mu, max_iter=100, tol=1e-6, weights=None):
    """EM for a negative binomial mixture from the given start, after Adamidis (1999): the
    latent Poisson count ``Y`` of logarithmic summands has ``E[Y | x] = size (digamma(size +
    x) - digamma(size))``; the M-step takes ``mu`` the weighted mean and ``u = log(1 + mu /
    size)`` from ``(exp(u) - 1) / u = sum t x / sum t E[Y | x]`` by scipy's brentq, ``size =
    (sum t E[Y | x] / sum t) / u``; as :func:`ig_em`.  ``weights``: one per value, each
    value counted that many times."""
    from scipy.special import digamma

    x = np.asarray(x, dtype=float)
    v = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    w, size, mu = (np.array(a, dtype=float) for a in (w, size, mu))
    trace = []
    it = 0
    while True:
        comp = np.log(w)[None, :] + stats.nbinom.logpmf(x[:, None], size, size / (size + mu))
        lse = logsumexp(comp, axis=1)
        trace.append(float((v * lse).sum()))
        status = _stop(trace, it, max_iter, tol)
        if status:
            return dict(weight=w, size=size, mu=mu, loglik=trace[-1], n_iter=it,
                        status=status, trace=trace)
        r = v[:, None] * np.exp(comp - lse[:, None])
        s0 = r.sum(axis=0)
        s1 = (r * x[:, None]).sum(axis=0)
        ey = size[None, :] * (digamma(size[None, :] + x[:, None]) - digamma(size[None, :]))
        s2 = (r * ey).sum(axis=0)
        u = np.array([optimize.brentq(lambda t, k=k: np.expm1(t) / t - k, 1e-300,
                                      2 * np.log(k) + 2, xtol=1e-300, rtol=1e-15)
                      for k in s1 / s2])
        mu = s1 / s0
        size = s2 / s0 / u
        w = s0 / v.sum()
        it += 1


def negbinom_global_max(x, n_components, starts):
    """The largest log-likelihood scipy's L-BFGS-B finds from the given starts ``(w, size,
    mu)`` over (logit weights, log size, log mu): a maximum found with no EM at all."""
    x = np.asarray(x, dtype=float)
    M = n_components

    def neg(theta):
        a = np.r_[0.0, theta[:M - 1]]
        w = np.exp(a - logsumexp(a))
        return -negbinom_mix_loglik(x, w, np.exp(theta[M - 1:2 * M - 1]), np.exp(theta[2 * M - 1:]))

    best = None
    for w, size, mu in starts:
        t0 = np.r_[np.log(w[1:] / w[0]), np.log(size), np.log(mu)]
        r = optimize.minimize(neg, t0, method="L-BFGS-B", options=dict(maxiter=5000, ftol=1e-15,
                                                                         gtol=1e-10))
        if best is None or r.fun < best.fun:
            best = r
    return -best.fun, best.x
