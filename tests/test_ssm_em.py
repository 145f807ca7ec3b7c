"""EM fits of state-space models (family="ar", "local_level"): engines against the oracle.

Three compiled models keep the CPU engine's compile time down: AR(2)
(companion), AR(1) (a 1 x 1 dense transition, oracle test only) and the
local level.  CUDA runs under the simulator on tiny series, with one and two
lanes per fit (two: the lanes split a dataset's series and sum their
statistics).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kalman_reference import rts_smoother
from ssm_em_reference import ar_em, level_em, simulate_ar, simulate_level

import bulkem
from bulkem.models.ssm.model import ar_radius
from bulkem.tuning import Tuning

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

AR2 = dict(phi=[0.5, -0.3], state_var=1.0, obs_var=0.4)
LEVEL = dict(level0=1.0, state_var=0.2, obs_var=1.0)
INIT = {
    "ar": {"phi": np.array([[0.2, 0.1], [-0.3, 0.2]]), "state_var": np.array([0.5, 2.0]),
           "obs_var": np.array([1.0, 0.2])},
    "ar1": {"phi": np.array([[0.3], [-0.5]]), "state_var": np.array([0.5, 2.0]),
            "obs_var": np.array([1.0, 0.2])},
    "local_level": {"level0": np.array([0.0, 2.0]), "state_var": np.array([0.5, 0.05]),
                    "obs_var": np.array([0.5, 2.0])},
}


def _data(family, lengths, seed):
    """Datasets of series of the family's true model; a few missing steps in the first."""
    rng = np.random.default_rng(seed)
    out = []
    for lens in lengths:
        if family == "local_level":
            out.append(simulate_level(LEVEL["level0"], 0.2, 1.0, lens, rng))
        elif family == "ar1":
            out.append(simulate_ar([0.7], 1.0, 0.5, lens, rng))
        else:
            out.append(simulate_ar(AR2["phi"], 1.0, 0.4, lens, rng))
    y = out[0][0]
    y[[k for k in (1, 2, 5) if k < len(y)]] = np.nan
    return out


def _kw(family):
    if family == "ar":
        return dict(family="ar", order=2)
    if family == "ar1":
        return dict(family="ar", order=1)
    return dict(family="local_level")


def _oracle(family, series, start, **kw):
    if family == "local_level":
        return level_em(series, start["level0"], start["state_var"], start["obs_var"], **kw)
    return ar_em(series, start["phi"], start["state_var"], start["obs_var"], **kw)


def _start(family, k):
    return {key: v[k] for key, v in INIT[family].items()}


def _rel(a, b):
    return np.abs(np.asarray(a, float) - np.asarray(b, float)) / np.abs(np.asarray(b, float))


def _check_against_oracle(res, data, family, max_iter, tol):
    for row in res.starts.itertuples():
        ref = _oracle(family, data[row.dataset], _start(family, row.start), max_iter=max_iter,
                      tol=tol)
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    for s in res.summary.itertuples():
        ref = _oracle(family, data[s.dataset], _start(family, s.best_start), max_iter=max_iter,
                      tol=tol)
        got = res.params(s.dataset)
        for key, v in got.items():
            assert np.allclose(v, ref[key], rtol=1e-7, atol=1e-10), key


@pytest.mark.parametrize("family", ["ar", "ar1", "local_level"])
def test_cpu_matches_oracle_from_given_starts(family, seed):
    data = _data(family, [[40, 25], [30]], seed)
    res = bulkem.fit(data, n_starts=2, init=INIT[family], max_iter=30, tol=1e-8, seed=seed,
                     backend="cpu", **_kw(family))
    assert list(res.components.columns) == ["dataset", "parameter", "value"]
    _check_against_oracle(res, data, family, 30, 1e-8)


@pytest.mark.cuda
@pytest.mark.parametrize("lanes", [1, 2])
@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_cuda_matches_oracle_and_cpu(family, lanes, seed):
    data = _data(family, [[12, 9], [10]], seed)
    kw = dict(n_starts=3, init=INIT[family], max_iter=4, tol=1e-8, seed=seed, **_kw(family))
    res = bulkem.fit(data, backend="cuda", **kw, tuning=Tuning(
        cuda_warps_per_block=1, cuda_lanes_per_fit_series={False: lanes, True: lanes}))
    assert res.backend == "cuda"
    user = res.starts[res.starts.start < 2]
    for row in user.itertuples():
        ref = _oracle(family, data[row.dataset], _start(family, row.start), max_iter=4,
                      tol=1e-8)
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    cpu = bulkem.fit(data, backend="cpu", **kw)  # the random start too: the same fits
    assert np.array_equal(cpu.start_values.value, res.start_values.value)
    assert np.all(_rel(res.starts.loglik, cpu.starts.loglik) < 1e-9)
    assert np.allclose(res.components.value, cpu.components.value, rtol=1e-9, atol=0)


@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_loglik_never_decreases_and_truth_stays(family, seed):
    data = _data(family, [[300] * 4], seed)
    kw = dict(n_starts=1, backend="cpu", **_kw(family))
    start = _start(family, 0)
    lls = [bulkem.fit(data, init=start, max_iter=k, tol=0.0, **kw).summary.loglik[0]
           for k in range(1, 9)]
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1]))
    truth = AR2 if family == "ar" else LEVEL
    at_truth = bulkem.fit(data, init=truth, max_iter=1, tol=0.0, **kw).summary.loglik[0]
    res = bulkem.fit(data, init=truth, max_iter=300, tol=1e-9, **kw)
    assert res.summary.loglik[0] >= at_truth
    got = res.params(0)
    for key, v in truth.items():  # 1,200 observations: the estimate stays near the truth
        assert np.allclose(got[key], v, rtol=0.35, atol=0.15), (key, got[key], v)


def test_statsmodels_loglik_at_the_fitted_parameters(seed):
    sm = pytest.importorskip("statsmodels.api")
    ar = _data("ar", [[60, 45]], seed)
    res = bulkem.fit(ar, family="ar", order=2, n_starts=3, max_iter=40, seed=seed,
                     backend="cpu")
    p = res.params(0)
    total = 0.0
    for y in ar[0]:
        mod = sm.tsa.SARIMAX(y, order=(2, 0, 0), measurement_error=True, trend="n")
        assert mod.param_names[2:] == ["var.measurement_error", "sigma2"]
        total += mod.loglike(np.r_[p["phi"], p["obs_var"], p["state_var"]])
    assert _rel(total, res.summary.loglik[0]) < 1e-8
    lv = _data("local_level", [[50, 35]], seed)
    res = bulkem.fit(lv, family="local_level", n_starts=3, max_iter=40, seed=seed,
                     backend="cpu")
    p = res.params(0)
    total = 0.0
    for y in lv[0]:
        mod = sm.tsa.UnobservedComponents(y, "llevel")
        mod.ssm.initialize_known(np.array([p["level0"]]), np.array([[p["state_var"]]]))
        mod.loglikelihood_burn = mod.ssm.loglikelihood_burn = 0  # (set for its diffuse start)
        total += mod.loglike(np.r_[p["obs_var"], p["state_var"]])
    assert _rel(total, res.summary.loglik[0]) < 1e-8


def test_random_starts_depend_on_seed_dataset_and_start_only(seed):
    data = _data("ar", [[40], [30, 20], [25]], seed)
    kw = dict(family="ar", order=2, n_starts=4, max_iter=3, seed=seed, backend="cpu")
    a = bulkem.fit(data, **kw)
    b = bulkem.fit({f"d{k}": data[k] for k in (2, 0, 1)}, **kw)
    for k in range(3):
        va = a.start_values[a.start_values.dataset == k].value.to_numpy()
        vb = b.start_values[b.start_values.dataset == f"d{k}"].value.to_numpy()
        assert np.array_equal(va, vb)
    phi = a.start_values[a.start_values.parameter.str.startswith("phi")].value
    assert np.all(ar_radius(phi.to_numpy().reshape(-1, 2)) < 1.0)  # every start stationary
    assert np.all(a.starts.ar_radius < 1.0)
    c = bulkem.fit(data, **{**kw, "seed": seed + 1})
    assert not np.array_equal(a.start_values.value, c.start_values.value)


def test_input_forms_give_the_same_fits(seed):
    data = _data("local_level", [[20, 15], [25]], seed)
    kw = dict(family="local_level", n_starts=2, max_iter=5, seed=seed, backend="cpu")
    ref = bulkem.fit(data, **kw).summary.loglik.to_numpy()
    rows = [(d, s, v) for d, ds in enumerate(data) for s, y in enumerate(ds) for v in y]
    long = pd.DataFrame(rows, columns=["dataset", "series", "value"])
    assert np.array_equal(bulkem.fit(long, **kw).summary.loglik, ref)
    by_step = long.iloc[np.argsort(long.groupby(["dataset", "series"]).cumcount(), kind="stable")]
    assert np.array_equal(bulkem.fit(by_step, **kw).summary.loglik, ref)  # series' rows apart
    one = [pd.DataFrame({"id": d, "y": y}) for d, y in enumerate([data[0][0], data[1][0]])]
    got = bulkem.fit(pd.concat(one), dataset_col="id", value_col="y", **kw)  # no series column
    assert np.array_equal(got.summary.loglik, bulkem.fit([data[0][0], data[1][0]],
                                                         **kw).summary.loglik)
    assert bulkem.fit(data[1][0], **kw).summary.loglik[0] == ref[1]  # one array: one dataset
    assert list(bulkem.fit({"a": data[0], "b": data[1]}, **kw).summary.dataset) == ["a", "b"]


def test_result_methods(seed):
    data = _data("ar", [[50, 30]], seed)
    res = bulkem.fit(data, family="ar", order=2, n_starts=2, max_iter=20, seed=seed,
                     backend="cpu")
    m = res.state_space(0)
    sm = res.smooth(0, 0)
    ref = rts_smoother(data[0][0], m.F, m.H, m.Q, m.R, m.m0, m.P0)
    assert list(sm.columns) == ["step", "y", "mean", "var"]
    assert np.allclose(sm["mean"], ref["mean"][:, 0], rtol=1e-9, atol=1e-12)
    assert np.allclose(sm["var"], ref["cov"][:, 0, 0], rtol=1e-9)
    assert np.isclose(res.score(0, data[0]), res.summary.loglik[0], rtol=1e-12)
    new = data[0][1][:10]
    assert np.isclose(res.score(0, new), ref_ll := rts_smoother(new, m.F, m.H, m.Q, m.R, m.m0,
                                                                m.P0)["loglik"], rtol=1e-10)
    assert np.allclose(res.smooth(0, new)["mean"], rts_smoother(
        new, m.F, m.H, m.Q, m.R, m.m0, m.P0)["mean"][:, 0], rtol=1e-9, atol=1e-12)
    assert ref_ll < 0
    again = bulkem.fit(data, family="ar", order=2, n_starts=1, init=res.params(0),
                       max_iter=1, backend="cpu")  # params() is the init form
    assert np.array_equal(again.start_values.value, res.components.value)
    with pytest.raises(IndexError, match="has 2 series"):
        res.smooth(0, 5)
    lv = bulkem.fit(_data("local_level", [[30]], seed), family="local_level", n_starts=2,
                    max_iter=10, seed=seed, backend="cpu")
    m = lv.state_space(0)
    assert m.m0[0] == lv.params(0)["level0"] and m.P0[0, 0] == lv.params(0)["state_var"]
    assert len(lv.smooth(0)) == 30 and "ar_radius" not in lv.summary


def test_bad_series_get_their_status(seed):
    good = _data("ar", [[30], [25]], seed)
    bad = {
        "short": [np.array([0.5])],
        "missing": [np.full(10, np.nan)],
        "inf": [np.r_[good[0][0][:10], np.inf]],
        "mixed": [good[1][0], np.array([1.0])],
        "zero": [np.zeros(8)],
    }
    batch = {"g0": good[0], **bad, "g1": good[1]}
    with pytest.warns(UserWarning, match="5 of 7 datasets are invalid"):
        res = bulkem.fit(batch, family="ar", order=2, n_starts=2, max_iter=5, seed=seed,
                         backend="cpu")
    s = res.summary.set_index("dataset")
    assert list(s.status[["g0", "g1"]]) == ["max_iter", "max_iter"]
    assert (s.status[list(bad)] == "invalid_data").all()
    assert "too short: 1 steps, at least 2 needed" in s.message["short"]
    assert "all 10 steps are missing" in s.message["missing"]
    assert "1 of 11 values are infinite" in s.message["inf"]
    assert "series 1 is too short" in s.message["mixed"]
    assert "every observed value is 0" in s.message["zero"]
    assert s.n_obs["missing"] == 0 and s.n_obs["g0"] == 27  # observed steps
    with pytest.raises(ValueError, match="strict=True"):
        bulkem.fit(batch, family="ar", order=2, n_starts=1, strict=True, backend="cpu")


def test_bad_arguments_raise(seed):
    y = _data("ar", [[30]], seed)
    with pytest.raises(TypeError, match="needs order=p"):
        bulkem.fit(y, family="ar")
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="order must be an integer >= 1"):
            bulkem.fit(y, family="ar", order=bad)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        bulkem.fit(y, family="local_level", order=2)
    with pytest.raises(ValueError, match="dtype='float32' is not available"):
        bulkem.fit(y, family="ar", order=2, dtype="float32")
    with pytest.raises(ValueError, match="not stationary"):
        bulkem.fit(y, family="ar", order=2, init={"phi": [1.2, 0.1], "state_var": 1.0,
                                                   "obs_var": 1.0})
    with pytest.raises(ValueError, match="must be positive"):
        bulkem.fit(y, family="ar", order=2, init={"phi": [0.2, 0.1], "state_var": -1.0,
                                                   "obs_var": 1.0})
    with pytest.raises(ValueError, match=r"expected \(2,\)"):
        bulkem.fit(y, family="ar", order=2, init={"phi": [0.2], "state_var": 1.0,
                                                   "obs_var": 1.0})
    with pytest.raises(ValueError, match="init_method"):
        bulkem.fit(y, family="ar", order=2, init_method="subset")
    with pytest.raises(ValueError, match="one dataset per row"):  # (2-D: a dataset per row)
        bulkem.fit(np.zeros((2, 3, 20)), family="local_level")


def test_near_unit_root_is_reported(seed):
    rng = np.random.default_rng(seed)
    walk = [np.cumsum(rng.normal(size=400))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bulkem.fit(walk, family="ar", order=1, n_starts=2, max_iter=200, seed=seed,
                         backend="cpu", tuning=Tuning(ssm_ar_radius_warn=0.95))
    assert res.summary.ar_radius[0] < 1.0
    assert res.summary.ar_radius[0] >= 0.95
    assert "near the unit circle" in res.summary.message[0]


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(["ar", "local_level"]),
       lengths=st.lists(st.integers(2, 25), min_size=1, max_size=3),
       missing=st.floats(0.0, 0.4), data_seed=st.integers(0, 2**31 - 1),
       start=st.integers(0, 1))
def test_property_engine_is_the_oracle_and_never_falls(family, lengths, missing, data_seed,
                                                        start):
    """Random ragged datasets with missing steps: each iteration as the oracle's, rising."""
    rng = np.random.default_rng(data_seed)
    series = (simulate_level(1.0, 0.2, 1.0, lengths, rng) if family == "local_level"
              else simulate_ar(AR2["phi"], 1.0, 0.4, lengths, rng))
    for y in series:  # missing steps anywhere but the first two (the data must vary)
        y[2:][rng.random(len(y) - 2) < missing] = np.nan
    init = _start(family, start)
    ref = _oracle(family, series, init, max_iter=4, tol=0.0)
    assert np.all(np.diff(ref["trace"]) >= -1e-9 * np.abs(ref["trace"][:-1]))
    for k in (1, 4):
        res = bulkem.fit([series], n_starts=1, init=init, max_iter=k, tol=0.0, backend="cpu",
                         **_kw(family))
        row = res.starts.iloc[0]
        if ref["status"] == "degenerate" and ref["n_iter"] < k:
            assert row.status == "degenerate"
            continue
        assert _rel(row.loglik, ref["trace"][k]) < 1e-9
        if family == "ar":
            assert ar_radius(res.params(0)["phi"])[0] < 1.0
