"""The BMI data (shipped with bulkem, as in mixsmsn): random starts reach the global maximum;
one poor start does not."""

from __future__ import annotations

import numpy as np
import pytest
from reference import ig_global_max

import bulkem

FIXED = {"weight": [0.5, 0.5], "mu": [0.99, 1.01], "lambda": [1.0, 1.0]}


@pytest.fixture(scope="module")
def bmi():
    return bulkem.datasets.load_bmi()


@pytest.fixture(scope="module")
def global_max(bmi):
    return ig_global_max(bmi, 2, n_starts=100, seed=0)


def _modes(res, x):
    grid = np.linspace(x.min(), x.max(), 2000)
    f = res.density(0, grid)
    return int(np.sum((f[1:-1] > f[:-2]) & (f[1:-1] > f[2:])))


def test_bmi_data_is_the_published_set(bmi):
    assert bmi.shape == (2107,) and np.all(bmi > 0)
    # the first values of the published set (mixsmsn's bmi$bmi)
    np.testing.assert_array_equal(bmi[:3], [30.94, 30.62, 25.57])


def test_bmi_is_package_data(tmp_path, monkeypatch):
    # read from the installed package, whatever the working directory
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BULKEM_BMI_CSV", raising=False)
    assert bulkem.datasets.load_bmi().shape == (2107,)
    # another file through path=
    (tmp_path / "b.csv").write_text("bmi\n20.5\n31\n")
    np.testing.assert_array_equal(bulkem.datasets.load_bmi(tmp_path / "b.csv"), [20.5, 31.0])


def test_random_starts_reach_the_global_maximum(bmi, global_max):
    ll_max, w, mu, lam = global_max
    res = bulkem.fit(bmi, n_components=2, n_starts=100, seed=1, backend="cpu")
    assert res.summary.status[0] == "converged"
    assert abs(res.summary.loglik[0] - ll_max) < 1e-3
    p = res.params(0)
    assert np.allclose(p["mu"], np.sort(mu), rtol=1e-3)
    assert _modes(res, bmi) == 2


def test_fixed_poor_start_is_nearly_unimodal_and_worse(bmi, global_max):
    res = bulkem.fit(bmi, n_components=2, n_starts=1, init=FIXED, backend="cpu")
    assert res.summary.loglik[0] < global_max[0] - 100
    mu = res.params(0)["mu"]
    assert abs(mu[1] - mu[0]) / mu.mean() < 0.01  # both components on one mode
    assert _modes(res, bmi) == 1
