"""Gamma mixtures (issue 34, positive values): the engines against a SciPy oracle, EM's
properties, the shape's Newton solve, bad values and the result methods."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import forced_regime
from reference import gamma_em, gamma_mix_loglik
from scipy import stats

import bulkem
from bulkem.tuning import Tuning

# Iteration by iteration against the plain-EM oracle (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

W, SHAPE, RATE = np.array([0.6, 0.4]), np.array([2.0, 20.0]), np.array([1.0, 2.0])


def _values(n, seed):
    rng = np.random.default_rng(seed)
    comp = rng.choice(2, size=n, p=W)
    return rng.gamma(SHAPE[comp], 1.0 / RATE[comp])


@pytest.fixture(params=["bulk", "large"])
def regime(request, tuning, backend):
    return forced_regime(request, tuning, backend, cpu_large=False)


def test_engine_matches_the_scipy_oracle(backend, regime, seed):
    data = [_values(60, seed + k) for k in range(2)]
    res = bulkem.fit(data, family="gamma", n_starts=3, max_iter=15, tol=1e-8, seed=seed,
                     backend=backend, tuning=regime)
    for s in res.summary.itertuples():
        sv = res.start_values[(res.start_values.dataset == s.dataset)
                              & (res.start_values.start == s.best_start)]
        ref = gamma_em(data[s.dataset], sv.weight, sv["shape"], sv.rate, max_iter=15, tol=1e-8)
        assert res.summary.n_iter[s.dataset] == ref["n_iter"]
        assert np.isclose(s.loglik, ref["loglik"], rtol=1e-10)
        order = np.argsort(ref["shape"] / ref["rate"])
        got = res.params(s.dataset)
        for key in ("weight", "shape", "rate"):
            assert np.allclose(got[key], ref[key][order], rtol=1e-8), key


@pytest.mark.parametrize("shape", [1e-3, 0.05, 0.7, 3.3, 150.0, 1e5])
def test_one_component_is_the_maximum_likelihood_fit(shape):
    """The M-step's shape (Newton on log a, digamma by series) over small and large
    shapes, against scipy.stats.gamma.fit."""
    x = np.random.default_rng(5).gamma(shape, 2.0, 3000)
    x = x[x > 0]
    res = bulkem.fit([x], family="gamma", n_components=1, n_starts=1, seed=1, backend="cpu")
    a, _, scale = stats.gamma.fit(x, floc=0, method="MLE")
    got = res.params(0)
    assert np.isclose(got["shape"][0], a, rtol=1e-6) and np.isclose(got["rate"][0], 1 / scale,
                                                                    rtol=1e-6)
    # the log-likelihood, summed exactly (scipy's logpdf loses ~1e-7 at the shape 1e-3)
    ll = math.fsum(a * math.log(1 / scale) - math.lgamma(a) + (a - 1) * math.log(v) - v / scale
                   for v in x)
    assert res.summary.loglik[0] >= ll - 1e-12 * abs(ll)


def test_loglik_never_decreases_and_a_fit_from_the_truth_stays(seed):
    x = _values(400, seed)
    res = bulkem.fit([x], family="gamma", n_starts=1,
                     init={"weight": [0.5, 0.5], "shape": [1.0, 5.0], "rate": [1.0, 0.5]},
                     max_iter=60, tol=0.0, backend="cpu", trace=True)
    lls = res.trace.loglik.to_numpy()
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1])) and lls[-1] > lls[0]
    big = _values(20_000, seed)
    res = bulkem.fit([big], family="gamma", n_starts=1,
                     init={"weight": W, "shape": SHAPE, "rate": RATE}, max_iter=500, tol=1e-9,
                     backend="cpu", tuning=Tuning(strategy="bulk"))  # (large: its own kernel)
    got = res.params(0)
    assert res.summary.status[0] == "converged"
    assert res.summary.loglik[0] >= gamma_mix_loglik(big, W, SHAPE, RATE)
    for key, want in (("weight", W), ("shape", SHAPE), ("rate", RATE)):
        assert np.allclose(got[key], want, rtol=0.1), key


def test_bad_values_get_invalid_data_and_the_rest_is_fitted():
    good = _values(80, 1)
    data = {"zero": np.r_[good[:10], 0.0], "good": good, "same": np.full(12, 3.0)}
    with pytest.warns(UserWarning):
        res = bulkem.fit(data, family="gamma", n_starts=2, seed=1, backend="cpu")
    s = res.summary.set_index("dataset")
    assert list(s.status) == ["invalid_data", "converged", "failed"]
    assert "1 of 11 values is <= 0" in s.message["zero"]
    alone = bulkem.fit([good], family="gamma", n_starts=2, seed=1, backend="cpu")
    assert s.loglik["good"] == alone.summary.loglik[0]


def test_result_methods_against_scipy():
    x = _values(500, 7)
    res = bulkem.fit([x], family="gamma", n_starts=4, seed=2, backend="cpu")
    p = res.params(0)
    lp = np.log(p["weight"]) + stats.gamma.logpdf(x[:, None], p["shape"], scale=1 / p["rate"])
    z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
    assert np.allclose(res.predict_proba(0, x), z, rtol=1e-10, atol=1e-14)
    assert np.allclose(res.score_samples(0, x), np.logaddexp.reduce(lp, axis=1), rtol=1e-12)
    assert np.isclose(res.summary.loglik[0], np.logaddexp.reduce(lp, axis=1).sum(), rtol=1e-12)
    draws = res.sample(0, 4000, seed=1)
    draws = draws[0] if isinstance(draws, tuple) else draws
    assert np.all(draws > 0) and abs(draws.mean() - x.mean()) < 0.1 * x.mean()
