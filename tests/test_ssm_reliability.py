"""Issue 30's state-space bugs: each a regression test (CPU engine, AR(2) and local level).

* bug 3: a batch where no dataset gets a usable fit built its tables by
  reshaping an empty array and raised; now every dataset gets a status;
* bug 10: ``score`` checked new series as fit data (a variance, p steps);
* bug 11: ``kalman_loglik`` reported ``ok`` with a log-likelihood of -inf.

Plus the checks of data and arguments around them: out-of-range values get
``invalid_data`` with a message, bad arguments name the argument.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from ssm_em_reference import simulate_ar, simulate_level

import bulkem
from bulkem.models.ssm import family as ssm_family
from bulkem.models.ssm import model as ssm_model

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")


def _kw(family):
    return dict(family="ar", order=2) if family == "ar" else dict(family="local_level")


def _good(family, seed, n=30):
    rng = np.random.default_rng(seed)
    if family == "ar":
        return simulate_ar([0.5, -0.3], 1.0, 0.4, [n], rng)
    return simulate_level(1.0, 0.2, 1.0, [n], rng)


def _fit(data, family, seed, **kw):
    kw = {"n_starts": 2, "max_iter": 5, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return bulkem.fit(data, seed=seed, backend="cpu", **_kw(family), **kw)


# --- bug 3 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_batch_without_a_usable_fit_gets_statuses_and_empty_tables(family, seed):
    """Issue 30, bug 3: ``fit([np.array([1.0])], family="ar", order=2)`` raised in reshape."""
    for data in ([np.array([1.0])], [np.array([1.72, 1e-300, 1e300])]):
        res = _fit(data, family, seed)
        assert res.summary.status.tolist() == ["invalid_data"]
        assert res.summary.message[0]
        assert len(res.components) == 0 and len(res.starts) == 0
        assert list(res.components.columns) == ["dataset", "parameter", "value"]
        with pytest.raises(KeyError, match="invalid_data"):
            res.params(0)


@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_every_start_failing_gives_failed_and_empty_components(family, seed, monkeypatch):
    """Bug 3's other path: a checked dataset whose starts all fail (the scale check lifted)."""
    # Patched, not passed: SCALE_MAX is the family's domain (which data it accepts), not a
    # tuning; lifting it is the only way to reach starts that all fail on such data.
    monkeypatch.setattr(ssm_model, "SCALE_MAX", np.inf)
    res = _fit([np.array([1.72, 1e-300, 1e300])], family, seed)
    s = res.summary
    assert s.status.tolist() == ["failed"] and "all 2 starts degenerate" in s.message[0]
    assert len(res.components) == 0 and (res.starts.status != "converged").all()
    assert s.best_start[0] == -1 and np.isnan(s.loglik[0])


@pytest.mark.cuda
def test_no_usable_fit_on_cuda_too(seed, monkeypatch):
    """Bug 3 on the CUDA engine (the simulator here): an invalid batch, then a failed one."""
    from bulkem.tuning import Tuning

    one = Tuning(cuda_warps_per_block=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        res = bulkem.fit([np.array([1.0])], family="ar", order=2, backend="cuda", tuning=one)
        assert res.summary.status.tolist() == ["invalid_data"] and len(res.components) == 0
        monkeypatch.setattr(ssm_model, "SCALE_MAX", np.inf)  # (as above: the domain, lifted)
        res = bulkem.fit([np.array([1.72, 1e-300, 1e300])], family="local_level", n_starts=2,
                         max_iter=3, seed=seed, backend="cuda", tuning=one)
    assert res.backend == "cuda" and res.summary.status.tolist() == ["failed"]
    assert len(res.components) == 0


def test_a_chunk_without_a_usable_fit_does_not_stop_a_checkpointed_run(tmp_path, seed):
    """Bug 3 with ``checkpoint=``: the chunk of one bad dataset aborted the run (and resumes)."""
    pytest.importorskip("pyarrow")
    from bulkem.tuning import Tuning

    two = Tuning(checkpoint_chunk_fits=2)  # one dataset (two starts) a chunk
    data = [np.array([1.0]), _good("ar", seed)[0]]
    res = _fit(data, "ar", seed, checkpoint=tmp_path / "run", progress=False, tuning=two)
    assert res.summary.status.tolist()[0] == "invalid_data"
    assert res.summary.status[1] in ("converged", "max_iter")
    again = _fit(data, "ar", seed, checkpoint=tmp_path / "run", progress=False, tuning=two)
    assert again.summary.status.tolist() == res.summary.status.tolist()


@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_values_out_of_range_are_invalid_data_and_leave_the_rest_alone(family, seed):
    good = _good(family, seed)
    bad = {
        "huge": [np.array([1.72, 1e-300, 1e300, 0.5])],
        "tiny": [np.array([1e-300, -2e-300, 3e-301, 0.0])],
        "short": [np.array([0.5])] if family == "ar" else [np.array([])],
        "const": [np.full(6, 2.5), np.full(3, -1.0 if family == "ar" else 2.5)],
        "nan": [np.full(5, np.nan)],
        "inf": [np.array([0.1, np.inf, 0.3])],
    }
    res = _fit({"g": good, **bad}, family, seed)
    alone = _fit({"g": good}, family, seed)
    s = res.summary.set_index("dataset")
    assert (s.status[list(bad)] == "invalid_data").all()
    assert (s.message[list(bad)].str.len() > 0).all()
    assert "would overflow" in s.message["huge"] and "1e+300" in s.message["huge"]
    assert "would underflow" in s.message["tiny"]
    assert ("every series is constant" if family == "ar" else "every observed value is 2.5"
            ) in s.message["const"]
    assert s.status["g"] == alone.summary.status[0]
    assert np.array_equal(res.components.value, alone.components.value)


@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_the_fit_is_the_same_at_the_ends_of_the_scale_range(family, seed):
    """Data and starts scaled by 1e-99 / 1e99 (inside the range): the same fit, rescaled.

    (The random starts depend on the data's values: one start, given.)
    """
    y = _good(family, seed)
    init = ({"phi": [0.2, 0.1], "state_var": 0.5, "obs_var": 1.0} if family == "ar"
            else {"level0": 0.5, "state_var": 0.5, "obs_var": 1.0})
    power = {"phi": 0, "level0": 1, "state_var": 2, "obs_var": 2}  # units: c ** power
    base = _fit(y, family, seed, init=init, n_starts=1)
    for c in (1e-99, 1e99):
        scaled = {k: np.asarray(v) * c ** power[k] for k, v in init.items()}
        res = _fit([y[0] * c], family, seed, init=scaled, n_starts=1)
        assert res.summary.status[0] == base.summary.status[0]
        n = res.summary.n_obs[0]
        assert res.summary.loglik[0] + n * np.log(c) == pytest.approx(base.summary.loglik[0],
                                                                      rel=1e-9)
        a, b = res.params(0), base.params(0)
        for key, v in b.items():
            assert np.allclose(np.asarray(a[key]) / c ** power[key], v, rtol=1e-7), key


# --- bug 10 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_score_takes_any_finite_series(family, seed):
    """Issue 30, bug 10: scoring a length-1 / constant series raised 'no variance to fit'."""
    res = _fit(_good(family, seed), family, seed)
    new = [np.array([0.35]), np.array([-1.27, 0.44, -1.02]), np.full(4, 2.0),
           np.array([np.nan, 0.3])]
    got = res.score(0, new)
    ref = bulkem.kalman_loglik(new, res.state_space(0), backend="cpu")
    assert (ref.status == "ok").all()
    assert np.isfinite(got) and got == pytest.approx(ref.loglik.sum(), rel=1e-12)
    assert res.score(0, np.array([0.35])) == pytest.approx(ref.loglik[0], rel=1e-12)
    assert len(res.smooth(0, np.array([0.35]))) == 1
    with pytest.raises(ValueError, match="1 of 2 values are infinite"):
        res.score(0, [np.array([0.1, np.inf])])
    with pytest.raises(ValueError, match="series 1 cannot be scored: all 2 time steps"):
        res.score(0, [np.array([0.1]), np.array([np.nan, np.nan])])
    with pytest.raises(ValueError, match="0 steps"):
        res.score(0, [np.array([])])


# --- bug 11 ------------------------------------------------------------------------------------

def test_kalman_loglik_never_reports_ok_with_a_non_finite_loglik(seed):
    """Issue 30, bug 11: finite data at 1e200 scale gave status ok and loglik -inf."""
    model = bulkem.StateSpace.ar([0.5, -0.2], sigma2=1.0, obs_var=0.5)
    y = model.simulate(20, rng=seed)[:, 0]
    for method in ("exact", "scan"):
        out = bulkem.kalman_loglik([y, 1e200 * y, y], model, method=method, backend="cpu")
        assert out.status.tolist() == ["ok", "failed", "ok"]
        assert np.isnan(out.loglik[1]) and "-inf" in out.message[1]
        assert "Rescale" in out.message[1]
        assert out.loglik[0] == out.loglik[2] and np.isfinite(out.loglik[0])
    # the same data with the model rescaled with it: finite, and the documented shift
    c = 1e-150
    scaled = bulkem.StateSpace.ar([0.5, -0.2], sigma2=1.0 / c**2, obs_var=0.5 / c**2)
    out = bulkem.kalman_loglik([y / c], scaled, backend="cpu")
    ref = bulkem.kalman_loglik([y], model, backend="cpu")
    assert out.status[0] == "ok"
    assert out.loglik[0] == pytest.approx(ref.loglik[0] + len(y) * np.log(c), rel=1e-10)


@pytest.mark.cuda
@pytest.mark.parametrize("method", ["exact", "scan"])
def test_kalman_loglik_non_finite_is_failed_on_cuda_too(method, seed):
    """Bug 11 on the CUDA engine (the simulator here): the same statuses as the CPU's."""
    from bulkem.tuning import Tuning

    model = bulkem.StateSpace.ar([0.5, -0.3, 0.1], sigma2=1.3, obs_var=0.3)
    y = model.simulate(6, rng=seed)[:, 0]
    ys = [y, 1e200 * y, y[:4]]
    out = bulkem.kalman_loglik(ys, model, method=method, backend="cuda",
                               tuning=Tuning(kalman_cuda_threads=4))
    cpu = bulkem.kalman_loglik(ys, model, method=method, backend="cpu")
    assert out.status.tolist() == cpu.status.tolist() == ["ok", "failed", "ok"]
    assert out.message[1] == cpu.message[1]
    assert np.allclose(out.loglik[[0, 2]], cpu.loglik[[0, 2]], rtol=1e-10, atol=0)


def test_kalman_loglik_float32_values_beyond_its_range_are_invalid(seed):
    model = bulkem.StateSpace.random_walk(1, 1.0, 0.5)
    y = np.array([0.1, 1e39, 0.2])
    out = bulkem.kalman_loglik([y, np.array([0.1, 0.2])], model, dtype="float32",
                               backend="cpu")
    assert out.status.tolist() == ["invalid_data", "ok"]
    assert "float32's range" in out.message[0]


# --- arguments ---------------------------------------------------------------------------------

def test_bad_arguments_name_the_argument(seed):
    with pytest.raises(TypeError, match="phi holds non-numeric values"):
        bulkem.StateSpace.ar(["a"], 1.0)
    with pytest.raises(ValueError, match=r"phi has shape \(1, 1\)"):
        bulkem.StateSpace.ar([[0.5]], 1.0)
    with pytest.raises(ValueError, match="phi has 1 NaN or infinite"):
        bulkem.StateSpace.ar([np.nan], 1.0)
    y = [np.arange(5.0)]
    for big in (ssm_family.MAX_ORDER + 1, 10**9, 2**62, 10**30):
        with pytest.raises(ValueError, match=f"limit of {ssm_family.MAX_ORDER}"):
            bulkem.fit(y, family="ar", order=big, backend="cpu")
    y = [np.random.default_rng(seed).normal(size=20)]
    init = {"phi": [0.2, 0.1], "state_var": 1.0, "obs_var": 1.0}
    with pytest.raises(TypeError, match=r"init\['phi'\] holds non-numeric values"):
        bulkem.fit(y, family="ar", order=2, init={**init, "phi": ["a", 0.1]}, backend="cpu")
    with pytest.raises(ValueError, match=r"init\['state_var'\] must be finite; got \[nan\]"):
        bulkem.fit(y, family="ar", order=2, init={**init, "state_var": np.nan}, backend="cpu")
    model = bulkem.StateSpace.random_walk(1, 1.0, 0.5)
    with pytest.raises(ValueError, match="splash_var must be a finite number > 0; got True"):
        bulkem.kalman_loglik([np.ones(3)], model, method="splash", window=2, splash_var=True)


def test_a_2d_array_is_one_dataset_per_row(seed):
    """``fit(family="ar")`` takes equal-length series as one array, a dataset per row: the
    fits of the list of its rows."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(3, 40)).cumsum(axis=1) * 0.1 + rng.normal(size=(3, 40))
    kw = dict(family="ar", order=1, n_starts=2, max_iter=5, seed=seed, backend="cpu")
    whole = bulkem.fit(y, **kw)
    rows = bulkem.fit(list(y), **kw)
    assert whole.summary.loglik.tolist() == rows.summary.loglik.tolist()
    with pytest.raises(ValueError, match="one dataset per row"):
        bulkem.fit(y[None], **kw)


@pytest.mark.parametrize("family", ["ar", "local_level"])
def test_the_vectorised_screen_finds_every_dataset_the_check_faults(family, seed):
    """``SSMModel.pack`` runs ``check`` only where one pass over all values flags a dataset:
    its messages and observed counts must be exactly the per-dataset checks'."""
    rng = np.random.default_rng(seed)
    model = ssm_model.SSMModel(family, 2 if family == "ar" else 1)

    def s(n):
        return rng.normal(size=n)

    nan_some = s(9)
    nan_some[[1, 4]] = np.nan
    pairs = [(0, [s(8), s(6)]), (1, []), (2, [s(8), s(1)]), (3, [s(5), s(0)]),
             (4, [s(5), np.r_[s(3), np.inf]]), (5, [s(5), np.full(4, np.nan)]),
             (6, [np.zeros(6), np.zeros(3)]), (7, [np.full(6, 2.0), np.full(4, -1.0)]),
             (8, [np.full(6, 3.0), np.full(4, 3.0)]), (9, [s(6) * 1e101]),
             (10, [s(6) * 1e-101]), (11, [np.r_[5.0, 5.0 + 1e-102, 5.0]]), (12, [nan_some]),
             (13, [s(7)])]
    packed = model.pack(pairs)
    assert packed.messages == [model.check(units) for _, units in pairs]
    assert packed.n_obs.tolist() == [sum(int(np.count_nonzero(~np.isnan(u))) for u in units)
                                     for _, units in pairs]
    assert packed.messages[0] is None and packed.messages[12] is None
    assert sum(m is not None for m in packed.messages) >= 8
