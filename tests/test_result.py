"""The tables and the FitResult methods."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import demo
from reference import ig_logpdf
from scipy import integrate

import bulkem


@pytest.fixture(scope="module")
def res():
    return bulkem.fit(demo(3, 300, 11), n_starts=4, seed=5, backend="cpu")


def test_columns(res):
    assert list(res.summary.columns) == ["dataset", "n_obs", "status", "loglik", "n_iter",
                                         "converged", "best_start", "aic", "bic", "message"]
    assert list(res.components.columns) == ["dataset", "component", "weight", "mu", "lambda"]
    assert list(res.starts.columns) == ["dataset", "start", "status", "loglik", "n_iter",
                                        "message"]
    assert list(res.start_values.columns) == ["dataset", "start", "component", "weight", "mu",
                                              "lambda"]
    assert len(res.starts) == 12 and len(res.start_values) == 24


def test_components_ordered_by_mu_and_best_is_best(res):
    for d, g in res.components.groupby("dataset"):
        assert np.all(np.diff(g.mu) > 0)
        assert np.isclose(g.weight.sum(), 1.0)
        s = res.summary.set_index("dataset").loc[d]
        top = res.starts[res.starts.dataset == d].loglik.max()  # (the first within the tie
        assert top - 1e-9 * abs(top) <= s.loglik <= top  # tolerance: result.base.best_starts)
        k = 5
        assert np.isclose(s.aic, -2 * s.loglik + 2 * k)
        assert np.isclose(s.bic, -2 * s.loglik + k * np.log(s.n_obs))


def test_density_is_the_fitted_mixture(res):
    p = res.params(0)
    x = np.linspace(0.05, 8, 50)
    want = sum(w * np.exp(ig_logpdf(x, m, lam))
               for w, m, lam in zip(p["weight"], p["mu"], p["lambda"], strict=True))
    assert np.allclose(res.density(0, x), want, rtol=1e-12)
    total, _ = integrate.quad(lambda t: res.density(0, [t])[0], 0, np.inf, limit=200)
    assert abs(total - 1) < 1e-6


def test_init_params_are_the_best_starts(res):
    b = res.summary.best_start[1]
    sv = res.start_values[(res.start_values.dataset == 1) & (res.start_values.start == b)]
    assert np.array_equal(res.init_params(1)["mu"], sv.mu.to_numpy())
    with pytest.raises(KeyError, match="no such dataset"):
        res.params(99)
