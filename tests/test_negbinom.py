"""Negative binomial mixtures (issue 34, overdispersed counts): the engines against a SciPy
oracle of the same EM, the maximum against a direct optimiser, EM's properties, bad counts,
counts no more spread than a Poisson's, float32, weights, and the result methods."""

from __future__ import annotations

import numpy as np
import pytest
from reference import negbinom_em, negbinom_global_max, negbinom_mix_loglik
from scipy import stats

import bulkem
from bulkem.models.mixture.negbinom import MAX_NB_SIZE, MIN_NB_MEAN

# Iteration by iteration against the plain-EM oracle (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

W, SIZE, MU = np.array([0.6, 0.4]), np.array([2.0, 6.0]), np.array([3.0, 40.0])


def _counts(n, seed, w=W, size=SIZE, mu=MU):
    rng = np.random.default_rng(seed)
    comp = rng.choice(len(w), size=n, p=w)
    return rng.negative_binomial(size[comp], size[comp] / (size[comp] + mu[comp])).astype(float)


def test_engine_matches_the_scipy_oracle(backend, tuning, seed):
    data = [_counts(60, seed + k) for k in range(2)]
    res = bulkem.fit(data, family="negbinom", n_starts=3, max_iter=15, tol=1e-8, seed=seed,
                     backend=backend, tuning=tuning.replace(strategy="bulk"))
    for s in res.summary.itertuples():
        sv = res.start_values[(res.start_values.dataset == s.dataset)
                              & (res.start_values.start == s.best_start)]
        ref = negbinom_em(data[s.dataset], sv.weight, sv["size"], sv.mu, max_iter=15, tol=1e-8)
        assert res.summary.n_iter[s.dataset] == ref["n_iter"]
        assert np.isclose(s.loglik, ref["loglik"], rtol=1e-10)
        order = np.argsort(ref["mu"])
        got = res.params(s.dataset)
        for name in ("weight", "size", "mu"):
            assert np.allclose(got[name], ref[name][order], rtol=1e-8), name


def test_loglik_never_decreases_and_the_fit_is_the_maximum(seed):
    x = _counts(400, seed)
    res = bulkem.fit([x], family="negbinom", n_starts=1,
                     init={"weight": [0.5, 0.5], "size": [1.0, 1.0], "mu": [1.0, 60.0]},
                     max_iter=60, tol=0.0, backend="cpu", trace=True)
    lls = res.trace.loglik.to_numpy()
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1])) and lls[-1] > lls[0]
    # accelerated EM to convergence from a few starts, against L-BFGS-B on the likelihood
    fit = bulkem.fit([x], family="negbinom", n_starts=8, seed=seed, tol=1e-10, max_iter=2000,
                     accel=True, backend="cpu")
    assert fit.summary.status[0] == "converged"
    got = fit.params(0)
    best, _ = negbinom_global_max(x, 2, [(W, SIZE, MU), (got["weight"], got["size"], got["mu"])])
    assert fit.summary.loglik[0] >= best - 1e-6 * abs(best)
    assert np.isclose(fit.summary.loglik[0],
                      negbinom_mix_loglik(x, got["weight"], got["size"], got["mu"]), rtol=1e-12)
    assert np.allclose(got["mu"], MU, rtol=0.3) and np.allclose(got["weight"], W, atol=0.1)


def test_bad_counts_get_invalid_data_and_the_rest_is_fitted():
    good = _counts(80, 1)
    data = {"neg": np.array([1.0, -2.0, 3.0, 4.0, 5.0, 6.0]), "good": good,
            "frac": np.array([1.0, 2.5, 3.0, 4.0, 5.0, 6.0]), "nan": np.r_[good[:10], np.nan]}
    with pytest.warns(UserWarning, match="invalid"):
        res = bulkem.fit(data, family="negbinom", n_starts=2, seed=1, backend="cpu")
    s = res.summary.set_index("dataset")
    assert list(s.status.drop("good")) == ["invalid_data"] * 3
    assert s.status["good"] in ("converged", "max_iter")  # (plain EM here: 100 iterations)
    assert "1 of 6 values is negative (the negative binomial family" in s.message["neg"]
    assert "1 of 6 values is not a whole number" in s.message["frac"]
    assert "NaN" in s.message["nan"]
    alone = bulkem.fit([good], family="negbinom", n_starts=2, seed=1, backend="cpu")
    assert s.loglik["good"] == alone.summary.loglik[0]


def test_poisson_counts_and_a_component_of_zeros_reach_the_bounds():
    rng = np.random.default_rng(4)
    x = np.concatenate([np.zeros(150), rng.poisson(40.0, 150)]).astype(float)
    res = bulkem.fit([x], family="negbinom", n_starts=5, seed=3, backend="cpu", se=True,
                     max_iter=3000, tol=1e-9)
    got = res.params(0)
    assert got["mu"][0] == MIN_NB_MEAN
    # the Poisson counts: the size grows towards MAX_NB_SIZE, the Poisson's likelihood
    assert got["size"][1] > 100
    pois = np.log(0.5) * 300 + stats.poisson.logpmf(x[150:], x[150:].mean()).sum()
    assert res.summary.loglik[0] >= pois - 1e-3 * abs(pois)
    assert res.components.se_mu.isna().all()
    assert "boundary" in res.summary.message[0]
    ones = np.r_[np.zeros(20), np.ones(20)]  # no more spread than a Poisson: the cap
    one = bulkem.fit([ones], family="negbinom", n_components=1, n_starts=1, backend="cpu")
    assert one.params(0)["size"][0] == MAX_NB_SIZE
    assert np.isclose(one.params(0)["mu"][0], 0.5)


def test_float32_and_weights_on_the_cuda_engine(backend, tuning):
    """float32 (every component summed: their statistics depend on their own sizes) and
    weights, both through the exact pass's ``accum_at``; on the CUDA engine, which runs the
    CPU's pass code (under the simulator: no kernel of their own to compile here)."""
    if backend == "cpu":
        pytest.skip("the CPU's float32 and weighted kernels would cost the test command ~30 s "
                    "each; they run the pass code the CUDA engine runs")
    x = _counts(60, 5)
    init = {"weight": [0.5, 0.5], "size": [1.0, 3.0], "mu": [2.0, 30.0]}
    kw = dict(family="negbinom", n_starts=1, max_iter=4, tol=0.0, backend="cuda",
              tuning=tuning.replace(strategy="bulk"), init=init)
    a = bulkem.fit([x], **kw)
    b = bulkem.fit([x], dtype="float32", **kw)
    ref = negbinom_em(x, init["weight"], init["size"], init["mu"], max_iter=4, tol=0.0)
    assert np.isclose(a.summary.loglik[0], ref["loglik"], rtol=1e-10)
    assert np.isclose(b.summary.loglik[0], ref["loglik"], rtol=1e-5)
    w = np.arange(len(x)) % 3  # 0, 1, 2: integer weights = values repeated, 0 left out
    c = bulkem.fit([x], weights=[w], **kw)
    ref = negbinom_em(x, init["weight"], init["size"], init["mu"], max_iter=4, tol=0.0,
                      weights=w)
    assert np.isclose(c.summary.loglik[0], ref["loglik"], rtol=1e-10)
    for name in ("weight", "size", "mu"):
        assert np.allclose(c.params(0)[name], ref[name], rtol=1e-8)


def test_result_methods_and_standard_errors_against_numpy():
    x = _counts(500, 7)
    res = bulkem.fit([x], family="negbinom", n_starts=4, seed=2, backend="cpu", se=True,
                     tol=1e-10, max_iter=2000)
    p = res.params(0)
    lp = np.log(p["weight"]) + stats.nbinom.logpmf(x[:, None], p["size"],
                                                   p["size"] / (p["size"] + p["mu"]))
    z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
    assert np.allclose(res.predict_proba(0, x), z, rtol=1e-10, atol=1e-14)
    assert np.allclose(res.score_samples(0, x), np.logaddexp.reduce(lp, axis=1), rtol=1e-12)
    draws = res.sample(0, 4000, seed=1)
    draws = draws[0] if isinstance(draws, tuple) else draws
    assert np.all(draws == np.round(draws)) and abs(draws.mean() - x.mean()) < 2.0

    def ll(theta):  # (logit weight, log sizes, log means), the unconstrained coordinates
        w1 = 1 / (1 + np.exp(-theta[0]))
        return negbinom_mix_loglik(x, np.array([w1, 1 - w1]), np.exp(theta[1:3]),
                                   np.exp(theta[3:]))

    t0 = np.r_[np.log(p["weight"][0] / p["weight"][1]), np.log(p["size"]), np.log(p["mu"])]
    h = 1e-4
    H = np.empty((5, 5))
    for i in range(5):
        for j in range(5):
            e_i, e_j = np.eye(5)[i] * h, np.eye(5)[j] * h
            H[i, j] = (ll(t0 + e_i + e_j) - ll(t0 + e_i - e_j) - ll(t0 - e_i + e_j)
                       + ll(t0 - e_i - e_j)) / (4 * h * h)
    w1 = p["weight"][0]
    J = np.diag([w1 * (1 - w1), *p["size"], *p["mu"]])
    se = np.sqrt(np.diag(J @ np.linalg.inv(-H) @ J.T))
    c = res.components
    assert np.allclose(c.se_weight.iloc[0], se[0], rtol=2e-3)
    assert np.allclose(c.se_size, se[1:3], rtol=2e-3)
    assert np.allclose(c.se_mu, se[3:], rtol=2e-3)
