"""Poisson mixtures (issue 34, counts): the engines against a SciPy oracle, EM's
properties, bad counts, a component of zeros, and the result methods."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import forced_regime
from reference import poisson_em, poisson_mix_loglik
from scipy import stats

import bulkem
from bulkem.tuning import Tuning

# Iteration by iteration against the plain-EM oracle (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

W, RATE = np.array([0.6, 0.4]), np.array([2.0, 15.0])


def _counts(n, seed, w=W, rate=RATE):
    rng = np.random.default_rng(seed)
    comp = rng.choice(len(w), size=n, p=w)
    return rng.poisson(rate[comp]).astype(float)


@pytest.fixture(params=["bulk", "large"])
def regime(request, tuning, backend):
    return forced_regime(request, tuning, backend, cpu_large=False)


def test_engine_matches_the_scipy_oracle(backend, regime, seed):
    data = [_counts(60, seed + k) for k in range(2)]
    res = bulkem.fit(data, family="poisson", n_starts=3, max_iter=15, tol=1e-8, seed=seed,
                     backend=backend, tuning=regime)
    for s in res.summary.itertuples():
        sv = res.start_values[(res.start_values.dataset == s.dataset)
                              & (res.start_values.start == s.best_start)]
        ref = poisson_em(data[s.dataset], sv.weight, sv.rate, max_iter=15, tol=1e-8)
        assert res.summary.n_iter[s.dataset] == ref["n_iter"]
        assert np.isclose(s.loglik, ref["loglik"], rtol=1e-10)
        order = np.argsort(ref["rate"])
        got = res.params(s.dataset)
        assert np.allclose(got["weight"], ref["weight"][order], rtol=1e-8)
        assert np.allclose(got["rate"], ref["rate"][order], rtol=1e-8)


def test_loglik_never_decreases_and_a_fit_from_the_truth_stays(seed):
    x = _counts(400, seed)
    res = bulkem.fit([x], family="poisson", n_starts=1, init={"weight": [0.5, 0.5],
                                                              "rate": [1.0, 30.0]},
                     max_iter=60, tol=0.0, backend="cpu", trace=True)
    lls = res.trace.loglik.to_numpy()
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1])) and lls[-1] > lls[0]
    big = _counts(20_000, seed)
    res = bulkem.fit([big], family="poisson", n_starts=1, init={"weight": W, "rate": RATE},
                     max_iter=500, tol=1e-9, backend="cpu",
                     tuning=Tuning(strategy="bulk"))  # (the large regime: a kernel of its own)
    got = res.params(0)
    assert res.summary.status[0] == "converged"
    assert res.summary.loglik[0] >= poisson_mix_loglik(big, W, RATE)
    assert np.allclose(got["weight"], W, rtol=0.05) and np.allclose(got["rate"], RATE, rtol=0.05)


def test_bad_counts_get_invalid_data_and_the_rest_is_fitted():
    good = _counts(80, 1)
    data = {"neg": np.array([1.0, -2.0, 3.0, 4.0, 5.0, 6.0]), "good": good,
            "frac": np.array([1.0, 2.5, 3.0, 4.0, 5.0, 6.0]), "nan": np.r_[good[:10], np.nan]}
    with pytest.warns(UserWarning, match="invalid"):
        res = bulkem.fit(data, family="poisson", n_starts=2, seed=1, backend="cpu")
    s = res.summary.set_index("dataset")
    assert list(s.status) == ["invalid_data", "converged", "invalid_data", "invalid_data"]
    assert "1 of 6 values is negative" in s.message["neg"]
    assert "1 of 6 values is not a whole number" in s.message["frac"]
    assert "NaN" in s.message["nan"]
    alone = bulkem.fit([good], family="poisson", n_starts=2, seed=1, backend="cpu")
    assert s.loglik["good"] == alone.summary.loglik[0]


def test_a_component_of_zeros_is_held_at_the_smallest_rate_without_standard_errors():
    rng = np.random.default_rng(4)
    x = np.concatenate([np.zeros(150), rng.poisson(40.0, 150)]).astype(float)
    res = bulkem.fit([x], family="poisson", n_starts=5, seed=3, backend="cpu", se=True)
    got = res.params(0)
    assert got["rate"][0] == bulkem.models.mixture.poisson.MIN_POISSON_RATE
    assert np.isclose(res.summary.loglik[0], poisson_mix_loglik(x, got["weight"], got["rate"]),
                      rtol=1e-10)
    assert res.components.se_rate.isna().all()
    assert "boundary" in res.summary.message[0]


def test_result_methods_and_standard_errors_against_numpy():
    x = _counts(500, 7)
    res = bulkem.fit([x], family="poisson", n_starts=4, seed=2, backend="cpu", se=True)
    p = res.params(0)
    lp = np.log(p["weight"]) + stats.poisson.logpmf(x[:, None], p["rate"])
    z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
    assert np.allclose(res.predict_proba(0, x), z, rtol=1e-10, atol=1e-14)
    assert np.allclose(res.score_samples(0, x), np.logaddexp.reduce(lp, axis=1), rtol=1e-12)
    draws = res.sample(0, 2000, seed=1)
    draws = draws[0] if isinstance(draws, tuple) else draws
    assert np.all(draws == np.round(draws)) and abs(draws.mean() - x.mean()) < 1.0

    def ll(theta):  # (logit weight, log rates), the unconstrained coordinates
        w1 = 1 / (1 + np.exp(-theta[0]))
        return poisson_mix_loglik(x, np.array([w1, 1 - w1]), np.exp(theta[1:]))

    t0 = np.r_[np.log(p["weight"][0] / p["weight"][1]), np.log(p["rate"])]
    h = 1e-4
    H = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            e_i, e_j = np.eye(3)[i] * h, np.eye(3)[j] * h
            H[i, j] = (ll(t0 + e_i + e_j) - ll(t0 + e_i - e_j) - ll(t0 - e_i + e_j)
                       + ll(t0 - e_i - e_j)) / (4 * h * h)
    w1 = p["weight"][0]
    J = np.diag([w1 * (1 - w1), *p["rate"]])
    se = np.sqrt(np.diag(J @ np.linalg.inv(-H) @ J.T))
    c = res.components
    assert np.allclose(c.se_weight.iloc[0], se[0], rtol=2e-3)
    assert np.allclose(c.se_rate, se[1:], rtol=2e-3)
