"""Log-normal mixtures (issue 34, positive values): the engines against a SciPy oracle,
EM's properties, bad values and the result methods."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import forced_regime
from reference import lognormal_em, lognormal_mix_loglik
from scipy import stats

import bulkem
from bulkem.tuning import Tuning

# Iteration by iteration against the plain-EM oracle (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

W, MU, VAR = np.array([0.6, 0.4]), np.array([0.0, 2.0]), np.array([0.25, 0.09])


def _values(n, seed):
    rng = np.random.default_rng(seed)
    comp = rng.choice(2, size=n, p=W)
    return np.exp(MU[comp] + np.sqrt(VAR[comp]) * rng.standard_normal(n))


@pytest.fixture(params=["bulk", "large"])
def regime(request, tuning, backend):
    return forced_regime(request, tuning, backend, cpu_large=False)


def test_engine_matches_the_scipy_oracle(backend, regime, seed):
    data = [_values(60, seed + k) for k in range(2)]
    res = bulkem.fit(data, family="lognormal", n_starts=3, max_iter=15, tol=1e-8, seed=seed,
                     backend=backend, tuning=regime)
    for s in res.summary.itertuples():
        sv = res.start_values[(res.start_values.dataset == s.dataset)
                              & (res.start_values.start == s.best_start)]
        ref = lognormal_em(data[s.dataset], sv.weight, sv.meanlog, sv.varlog, max_iter=15,
                           tol=1e-8)
        assert res.summary.n_iter[s.dataset] == ref["n_iter"]
        assert np.isclose(s.loglik, ref["loglik"], rtol=1e-10)
        order = np.argsort(ref["meanlog"])
        got = res.params(s.dataset)
        for key in ("weight", "meanlog", "varlog"):
            assert np.allclose(got[key], ref[key][order], rtol=1e-8), key


def test_loglik_never_decreases_and_a_fit_from_the_truth_stays(seed):
    x = _values(400, seed)
    res = bulkem.fit([x], family="lognormal", n_starts=1,
                     init={"weight": [0.5, 0.5], "meanlog": [-1.0, 3.0], "varlog": [1.0, 1.0]},
                     max_iter=60, tol=0.0, backend="cpu", trace=True)
    lls = res.trace.loglik.to_numpy()
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1])) and lls[-1] > lls[0]
    big = _values(20_000, seed)
    res = bulkem.fit([big], family="lognormal", n_starts=1,
                     init={"weight": W, "meanlog": MU, "varlog": VAR}, max_iter=500, tol=1e-9,
                     backend="cpu",
                     tuning=Tuning(strategy="bulk"))  # (the large regime: a kernel of its own)
    got = res.params(0)
    assert res.summary.status[0] == "converged"
    assert res.summary.loglik[0] >= lognormal_mix_loglik(big, W, MU, VAR)
    assert np.allclose(got["weight"], W, rtol=0.05) and np.allclose(got["varlog"], VAR, rtol=0.1)
    assert np.allclose(got["meanlog"], MU, atol=0.05)


def test_bad_values_get_invalid_data_and_the_rest_is_fitted():
    good = _values(80, 1)
    data = {"zero": np.r_[good[:10], 0.0], "good": good, "neg": np.r_[good[:10], -1.0, -2.0]}
    with pytest.warns(UserWarning, match="invalid"):
        res = bulkem.fit(data, family="lognormal", n_starts=2, seed=1, backend="cpu")
    s = res.summary.set_index("dataset")
    assert list(s.status) == ["invalid_data", "converged", "invalid_data"]
    assert "1 of 11 values is <= 0" in s.message["zero"]
    assert "2 of 12 values are <= 0" in s.message["neg"]
    alone = bulkem.fit([good], family="lognormal", n_starts=2, seed=1, backend="cpu")
    assert s.loglik["good"] == alone.summary.loglik[0]


def test_result_methods_against_scipy():
    x = _values(500, 7)
    res = bulkem.fit([x], family="lognormal", n_starts=4, seed=2, backend="cpu")
    p = res.params(0)
    lp = np.log(p["weight"]) + stats.lognorm.logpdf(x[:, None], np.sqrt(p["varlog"]),
                                                    scale=np.exp(p["meanlog"]))
    z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
    assert np.allclose(res.predict_proba(0, x), z, rtol=1e-10, atol=1e-14)
    assert np.allclose(res.score_samples(0, x), np.logaddexp.reduce(lp, axis=1), rtol=1e-12)
    assert np.isclose(res.summary.loglik[0], np.logaddexp.reduce(lp, axis=1).sum(), rtol=1e-12)
    draws = res.sample(0, 4000, seed=1)
    draws = draws[0] if isinstance(draws, tuple) else draws
    assert np.all(draws > 0) and abs(np.log(draws).mean() - np.log(x).mean()) < 0.1
