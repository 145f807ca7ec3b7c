"""The exact diffuse prior (issue 38): ``fit(family="local_level", prior="diffuse")`` and
``kalman_loglik`` of models with diffuse states, against statsmodels and a NumPy oracle.

statsmodels' exact diffuse log-likelihood with every term is
``UnobservedComponents(y, "llevel", use_exact_diffuse=True)`` (its
``loglikelihood_burn`` is then 0; the tests set it anyway); its default
``UnobservedComponents(y, "llevel")`` starts from an approximate diffuse prior and burns
the first observation, so it is another number (-632.538 at the Nile's maximum).
The oracle (``ssm_em_reference.diffuse_level_em``) is dense linear algebra on the
posterior of the levels, not a Kalman filter.  EM steps are compared one at a time
(``max_iter=1``): the same whatever the driver does between steps.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from ssm_em_reference import diffuse_level_em, diffuse_level_loglik

import bulkem
from bulkem import StateSpace
from bulkem.models.ssm.model import SSMModel
from bulkem.tuning import Tuning

sm = pytest.importorskip("statsmodels.api")
from statsmodels.tsa.statespace.initialization import Initialization  # noqa: E402
from statsmodels.tsa.statespace.kalman_filter import KalmanFilter  # noqa: E402

NILE = sm.datasets.nile.load_pandas().data["volume"].to_numpy(dtype=np.float64)
DIFFUSE = dict(family="local_level", prior="diffuse")
POINTS = [(1469.18, 15098.5), (1000.0, 20000.0), (3000.0, 9000.0)]  # (state_var, obs_var)


def _rel(a, b):
    return abs(float(a) - float(b)) / abs(float(b))


def _uc(y, burn=0):
    """statsmodels' exact diffuse local level with every term kept (params: obs, state)."""
    mod = sm.tsa.UnobservedComponents(y, "llevel", use_exact_diffuse=True,
                                      loglikelihood_burn=burn)
    assert mod.ssm.initialization.initialization_type == "diffuse"
    return mod


def _with_gaps(y):
    y = y.copy()
    y[:3] = np.nan  # leading missing steps: dropped under a flat prior
    y[[40, 41, 70]] = np.nan
    return y


def _level_data(seed, lengths):
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        y = 3.0 + np.cumsum(rng.normal(0.0, 0.5, n)) + rng.normal(0.0, 1.0, n)
        out.append(y)
    out[0][:2] = np.nan
    out[0][5] = np.nan
    return out


# --- the log-likelihood -----------------------------------------------------------------


@pytest.mark.parametrize("gaps", [False, True])
def test_loglik_is_statsmodels_exact_diffuse(gaps):
    y = _with_gaps(NILE) if gaps else NILE
    mod = _uc(y)
    for q, r in POINTS:
        ref = mod.loglike([r, q])
        got = bulkem.loglik(y, params={"state_var": q, "obs_var": r}, backend="cpu",
                            **DIFFUSE)
        assert got.status[0] == "ok" and _rel(got.loglik[0], ref) < 1e-9
        ss = StateSpace.local_level(q, r, diffuse=True)
        # the rest of the series after the diffuse phase runs on any method's engine (the
        # scan once: each method and missing pattern is a kernel to compile)
        for method in ("exact",) if gaps else ("exact", "scan"):
            tab = bulkem.kalman_loglik(y, ss, method=method, backend="cpu")
            assert tab.status[0] == "ok" and _rel(tab.loglik[0], ref) < 1e-9, method
        assert _rel(diffuse_level_loglik([y], q, r), ref) < 1e-9  # (the oracle, too)
    if not gaps:  # statsmodels burning the first step drops exactly its -log(2 pi)/2 term
        q, r = POINTS[0]
        burnt = _uc(y, burn=1).loglike([r, q])
        assert abs(burnt - (mod.loglike([r, q]) + 0.5 * math.log(2 * math.pi))) < 1e-9


def test_fit_reaches_statsmodels_maximum():
    res = bulkem.fit(NILE, n_starts=50, max_iter=5000, tol=1e-10, seed=38, backend="cpu",
                     **DIFFUSE)
    mod = _uc(NILE)
    start = mod.fit(disp=False, method="lbfgs", maxiter=1000)
    best = mod.fit(start.params, disp=False, method="nm", maxiter=5000, xtol=1e-10,
                   ftol=1e-13)
    assert best.llf >= start.llf - 1e-9
    got = res.summary.loglik[0]
    assert res.summary.status[0] == "converged"
    assert _rel(got, best.llf) < 1e-9 and round(got, 3) == -633.465
    p = res.params(0)
    assert list(p) == ["state_var", "obs_var"]  # no level0
    assert _rel(p["state_var"], best.params[1]) < 1e-3
    assert _rel(p["obs_var"], best.params[0]) < 1e-3
    assert _rel(mod.loglike([p["obs_var"], p["state_var"]]), got) < 1e-12
    # statsmodels' default (approximate diffuse, first observation burnt) is another number
    default = sm.tsa.UnobservedComponents(NILE, "llevel")
    assert default.loglikelihood_burn == 1
    assert abs(default.fit(disp=False).llf - got) > 0.9


def test_fit_with_missing_steps_reaches_statsmodels_maximum(seed):
    y = _with_gaps(NILE)
    res = bulkem.fit(y, n_starts=5, max_iter=5000, tol=1e-10, seed=seed, backend="cpu",
                     **DIFFUSE)
    mod = _uc(y)
    best = mod.fit(disp=False, method="nm", maxiter=5000, xtol=1e-10, ftol=1e-13,
                   start_params=[15000.0, 1500.0])
    assert res.summary.n_obs[0] == 94
    assert _rel(res.summary.loglik[0], best.llf) < 1e-8
    p = res.params(0)
    assert _rel(mod.loglike([p["obs_var"], p["state_var"]]), res.summary.loglik[0]) < 1e-12


# --- EM steps against the oracle --------------------------------------------------------


def _one_step_checks(res, data, init):
    """Each fit of ``res`` (max_iter=1) is one oracle EM step from its start."""
    for row in res.starts.itertuples():
        ref = diffuse_level_em(data[row.dataset], init["state_var"][row.start],
                               init["obs_var"][row.start], max_iter=1, tol=0.0)
        assert row.n_iter == 1 and _rel(row.loglik, ref["loglik"]) < 1e-10
    for s in res.summary.itertuples():
        ref = diffuse_level_em(data[s.dataset], init["state_var"][s.best_start],
                               init["obs_var"][s.best_start], max_iter=1, tol=0.0)
        p = res.params(s.dataset)
        assert _rel(p["state_var"], ref["state_var"]) < 1e-10
        assert _rel(p["obs_var"], ref["obs_var"]) < 1e-10


INIT = {"state_var": np.array([0.1, 2.0]), "obs_var": np.array([3.0, 0.3])}


def test_cpu_em_steps_are_the_oracle_s(seed):
    data = [_level_data(seed, [30, 12, 20]), _level_data(seed + 1, [25])]
    res = bulkem.fit(data, n_starts=2, init=INIT, max_iter=1, tol=0.0, backend="cpu",
                     **DIFFUSE)
    _one_step_checks(res, data, INIT)
    q, r = 0.7, 1.3  # a few steps on from one start, one at a time
    for _ in range(3):
        ref = diffuse_level_em(data[0], q, r, max_iter=1, tol=0.0)
        got = bulkem.fit([data[0]], n_starts=1, init={"state_var": q, "obs_var": r},
                         max_iter=1, tol=0.0, backend="cpu", **DIFFUSE)
        p = got.params(0)
        assert _rel(p["state_var"], ref["state_var"]) < 1e-10
        assert _rel(got.summary.loglik[0], ref["loglik"]) < 1e-10
        q, r = p["state_var"], p["obs_var"]
    full = bulkem.fit(data, n_starts=4, max_iter=3000, tol=1e-10, seed=seed, backend="cpu",
                      **DIFFUSE)
    for s in full.summary.itertuples():  # the oracle's EM, run to its end, agrees
        ref = diffuse_level_em(data[s.dataset], 1.0, 1.0, max_iter=3000, tol=1e-10)
        assert _rel(s.loglik, ref["loglik"]) < 1e-8


@pytest.mark.cuda
@pytest.mark.parametrize("lanes", [1, 2])
def test_cuda_em_steps_are_the_oracle_s_and_the_cpu_s(lanes, seed):
    data = [_level_data(seed, [12, 9]), _level_data(seed + 1, [10])]
    kw = dict(n_starts=3, init=INIT, max_iter=1, tol=0.0, seed=seed, **DIFFUSE)
    res = bulkem.fit(data, backend="cuda", **kw, tuning=Tuning(
        cuda_warps_per_block=1, cuda_lanes_per_fit_series={False: lanes, True: lanes}))
    assert res.backend == "cuda"
    for row in res.starts[res.starts.start < 2].itertuples():
        ref = diffuse_level_em(data[row.dataset], INIT["state_var"][row.start],
                               INIT["obs_var"][row.start], max_iter=1, tol=0.0)
        assert _rel(row.loglik, ref["loglik"]) < 1e-10
    cpu = bulkem.fit(data, backend="cpu", **kw)  # the random start too: the same fits
    assert np.array_equal(cpu.start_values.value, res.start_values.value)
    assert np.allclose(res.starts.loglik, cpu.starts.loglik, rtol=1e-12, atol=0)
    assert np.allclose(res.components.value, cpu.components.value, rtol=1e-12, atol=0)


# --- the model, its tables and its results ----------------------------------------------


def test_default_model_and_tables_unchanged(seed):
    fitted = SSMModel("local_level")
    assert fitted.key == ("ssm", "local_level", 1, fitted.tuning.key())  # no recompiling
    assert fitted.names == ["level0", "state_var", "obs_var"]
    diffuse = SSMModel("local_level", prior="diffuse")
    assert diffuse.key != fitted.key and diffuse.names == ["state_var", "obs_var"]
    data = [_level_data(seed, [20])]
    kw = dict(family="local_level", n_starts=2, max_iter=3, seed=seed, backend="cpu")
    a = bulkem.fit(data, **kw)
    b = bulkem.fit(data, prior="fitted", **kw)
    assert a.components.equals(b.components) and list(a.components.parameter) == [
        "level0", "state_var", "obs_var"]
    c = bulkem.fit(data, prior="diffuse", **kw)
    assert list(c.components.parameter) == ["state_var", "obs_var"]
    # the diffuse starts: the fitted prior's variances, without level0
    va = a.start_values.value.to_numpy().reshape(-1, 3)[:, 1:]
    assert np.array_equal(va, c.start_values.value.to_numpy().reshape(-1, 2))


def test_result_methods(seed):
    y = _with_gaps(NILE)
    res = bulkem.fit({"a": [y, NILE[:50]], "b": y}, n_starts=3, max_iter=500, tol=1e-8,
                     seed=seed, backend="cpu", se=True, bootstrap=4, **DIFFUSE)
    ss = res.state_space("b")
    assert ss.is_diffuse and "diffuse=1" in repr(ss)
    p = res.params("b")
    smooth = res.smooth("b")
    ref = _uc(y).smooth([p["obs_var"], p["state_var"]])
    assert np.allclose(smooth["mean"], ref.smoothed_state[0], rtol=1e-10, atol=0)
    assert np.allclose(smooth["var"], ref.smoothed_state_cov[0, 0], rtol=1e-9, atol=0)
    assert _rel(res.score("b", y), res.summary.loglik[1]) < 1e-12
    assert _rel(res.score("a", [y, NILE[:50]]), res.summary.loglik[0]) < 1e-12
    assert list(res.intervals.parameter) == ["state_var", "obs_var"] * 2
    assert (res.intervals.n_boot == 4).all()
    assert res.components.se.notna().all()
    reps = res.replicates(2, seed)
    assert len(reps) == 4 and [len(s) for s in reps[0]] == [100, 50]
    assert np.array_equal(np.isnan(reps[0][0]), np.isnan(y))  # missing where the data are
    assert not np.array_equal(reps[0][0], reps[1][0], equal_nan=True)


def test_bad_arguments_and_datasets(seed):
    y = _level_data(seed, [20])
    with pytest.raises(ValueError, match="unknown prior 'flat'"):
        bulkem.fit(y, family="local_level", prior="flat")
    with pytest.raises(ValueError, match="stationary law"):
        bulkem.fit(y, family="ar", order=1, prior="diffuse")
    with pytest.raises(ValueError, match="has a 'level0'"):
        bulkem.fit(y, init={"level0": 1.0, "state_var": 1.0, "obs_var": 1.0}, **DIFFUSE)
    with pytest.raises(ValueError, match="kalman_loglik"):
        bulkem.loglik(y[0], "state_space", StateSpace.local_level(1.0, 1.0, diffuse=True))
    with pytest.raises(ValueError, match="has no draws"):
        StateSpace.local_level(1.0, 1.0, diffuse=True).simulate(5)
    one = np.full(6, np.nan)
    one[-1] = 2.0
    with pytest.warns(UserWarning, match="invalid"):
        res = bulkem.fit({"one": [one, np.array([1.0])], "ok": y}, n_starts=1, max_iter=2,
                         backend="cpu", **DIFFUSE)
    s = res.summary.set_index("dataset")
    assert s.status["one"] == "invalid_data" and "first observed step" in s.message["one"]
    assert s.status["ok"] == "max_iter"
    a = StateSpace.local_level(1.0, 1.0, diffuse=True)
    b = StateSpace.local_level(1.0, 1.0)
    with pytest.raises(ValueError, match="different diffuse states"):
        bulkem.kalman_loglik([y[0], y[0]], [a, b], backend="cpu")


# --- kalman_loglik: models with diffuse states ------------------------------------------


def _sm_filter(Y, F, H, Q, R, mask):
    kf = KalmanFilter(k_endog=H.shape[0], k_states=F.shape[0], k_posdef=F.shape[0])
    kf.bind(np.array(Y, dtype=np.float64).reshape(len(Y), -1))
    kf["transition"], kf["design"], kf["state_cov"], kf["obs_cov"] = F, H, Q, R
    kf["selection"] = np.eye(F.shape[0])
    init = Initialization(F.shape[0])
    for i, d in enumerate(mask):
        init.set(i, "diffuse" if d else "stationary")
    kf.initialize(init)
    kf.loglikelihood_burn = 0
    return kf.loglike()


def test_kalman_loglik_diffuse_models_are_statsmodels_s(seed):
    rng = np.random.default_rng(seed)
    cases = []
    # a local linear trend: two diffuse states
    cases.append((np.array([[1.0, 1.0], [0.0, 1.0]]), np.array([[1.0, 0.0]]),
                  np.diag([1000.0, 50.0]), np.array([[15000.0]]), [True, True], NILE))
    # a diffuse level plus a stationary AR(1)
    cases.append((np.array([[1.0, 0.0], [0.0, 0.6]]), np.array([[1.0, 1.0]]),
                  np.diag([1000.0, 3000.0]), np.array([[10000.0]]), [True, False],
                  _with_gaps(NILE)))
    # two series observed together, a non-diagonal R, missing time steps (the shape of
    # tests/test_kalman.py's random walk: no kernel of its own to compile)
    Y = rng.standard_normal((60, 2)).cumsum(axis=0) + rng.standard_normal((60, 2))
    Y[[0, 7, 30]] = np.nan
    cases.append((np.eye(2), np.array([[1.0, 0.0], [0.5, 1.0]]), np.diag([0.5, 0.3]),
                  np.array([[1.0, 0.3], [0.3, 0.8]]), [True, True], Y))
    for F, H, Q, R, mask, y in cases:
        ref = _sm_filter(y, F, H, Q, R, mask)
        ss = StateSpace(F, H, Q, R, diffuse=mask)
        series = [y] if y.ndim == 2 else y  # (a 2-D array: one series of 2 values a step)
        # (the exact method only: the rest of a series runs on any engine unchanged, as
        # test_loglik_is_statsmodels_exact_diffuse checks for the local level)
        tab = bulkem.kalman_loglik(series, ss, backend="cpu")
        assert tab.status[0] == "ok", tab.message[0]
        assert _rel(tab.loglik[0], ref) < 1e-9, mask
    # one model per series, and a series whose diffuse phase takes all of it
    ss = [StateSpace.local_level(q, r, diffuse=True) for q, r in POINTS[:2]]
    tab = bulkem.kalman_loglik([NILE, np.array([np.nan, 5.0])], ss, backend="cpu")
    assert _rel(tab.loglik[0], _uc(NILE).loglike([POINTS[0][1], POINTS[0][0]])) < 1e-9
    assert tab.loglik[1] == -0.5 * math.log(2 * math.pi) and tab.n_obs[1] == 1


@pytest.mark.cuda
def test_kalman_loglik_diffuse_on_cuda():
    ss = StateSpace.local_level(*POINTS[0], diffuse=True)
    ys = [_with_gaps(NILE)[:20], NILE[:15]]
    gpu = bulkem.kalman_loglik(ys, ss, backend="cuda")
    cpu = bulkem.kalman_loglik(ys, ss, backend="cpu")
    assert np.allclose(gpu.loglik, cpu.loglik, rtol=1e-12, atol=0)
    assert isinstance(gpu, pd.DataFrame)
