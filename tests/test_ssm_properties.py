"""Properties of state-space fits and of ``kalman_loglik`` on generated batches (hypothesis).

A bounded number of examples in CI; ``BULKEM_HYPOTHESIS_EXAMPLES=2000`` runs more.  The
shapes are fixed (AR(2) and the local level, CPU engine; ``kalman_loglik`` with the same
two models) so that no example compiles new kernels; the data vary: the number of
datasets, of series and their lengths, missing steps, and bad datasets among good ones
(all missing, too short, constant, values of 1e300 or at a 1e-300 scale, infinite).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from kalman_reference import kalman_filter
from ssm_em_reference import simulate_ar, simulate_level

import bulkem
from bulkem.models.ssm.model import ar_radius

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

EXAMPLES = int(os.environ.get("BULKEM_HYPOTHESIS_EXAMPLES", "10"))
SETTINGS = dict(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=list(hypothesis.HealthCheck))
FITTED = {"converged", "max_iter"}
STATUSES = FITTED | {"failed", "invalid_data"}

# A dataset: (kind, series lengths, seed, share of missing steps).  "good" and "scaled"
# (x 1e50, or a 1e-300 value inside: still valid) are fitted; the other kinds are invalid.
BAD = ("all_nan", "short", "constant", "huge", "tiny", "inf")
KINDS = ("good", "good", "good", "scaled", *BAD)
dataset = st.tuples(st.sampled_from(KINDS), st.lists(st.integers(3, 25), min_size=1, max_size=3),
                    st.integers(0, 2**32 - 1), st.floats(0.0, 0.3))
batch = st.lists(dataset, min_size=1, max_size=5)


def _kw(family):
    return dict(family="ar", order=2) if family == "ar" else dict(family="local_level")


def make_dataset(family, spec):
    kind, lengths, seed, missing = spec
    rng = np.random.default_rng(seed)
    series = (simulate_ar([0.5, -0.3], 1.0, 0.4, lengths, rng) if family == "ar"
              else simulate_level(1.0, 0.2, 1.0, lengths, rng))
    for y in series:  # missing steps anywhere but the first two (the data must vary)
        y[2:][rng.random(len(y) - 2) < missing] = np.nan
    k = int(rng.integers(len(series)))
    y = series[k]
    where = 1 + int(rng.integers(len(y) - 1))  # an observed step... or a missing one
    if kind == "scaled":
        if rng.random() < 0.5:
            series = [s * 1e50 for s in series]
        else:
            y[where] = 1e-300
    elif kind == "all_nan":
        series[k] = np.full(len(y), np.nan)
    elif kind == "short":  # fewer steps than the state (AR(2)); no step (local level)
        series[k] = y[:1] if family == "ar" else y[:0]
    elif kind == "constant":  # (AR: each series its own constant, 0 or not)
        c = [0.0 if rng.random() < 0.3 else float(rng.normal())] * len(series)
        if family == "ar":
            c = [c[0], *rng.normal(size=len(series) - 1)]
        series = [np.where(np.isnan(s), np.nan, v) for s, v in zip(series, c, strict=True)]
    elif kind == "huge":
        y[0] = 1e300 * rng.choice([-1.0, 1.0])
    elif kind == "tiny":
        series = [s * 1e-300 for s in series]
    elif kind == "inf":
        y[where] = np.inf * rng.choice([-1.0, 1.0])
    return series


def fit(data, family):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid or failed datasets warn
        return bulkem.fit(data, n_starts=2, max_iter=8, seed=5, backend="cpu", progress=False,
                          **_kw(family))


@hypothesis.settings(**SETTINGS)
@hypothesis.given(family=st.sampled_from(["ar", "local_level"]), specs=batch)
def test_fits_give_every_dataset_a_status_and_bad_ones_change_nothing(family, specs):
    data = {j: make_dataset(family, spec) for j, spec in enumerate(specs)}
    res = fit(data, family)
    s = res.summary
    assert list(s.dataset) == list(data)
    assert set(s.status) <= STATUSES
    bad = [j for j, spec in enumerate(specs) if spec[0] in BAD]
    good = [j for j in data if j not in bad]
    for j in bad:
        assert s.status[j] == "invalid_data" and s.message[j], (specs[j], s.message[j])
    for j in good:
        assert s.status[j] != "invalid_data", (specs[j], s.message[j])
    for row in s.itertuples():
        starts = res.starts[res.starts.dataset == row.dataset]
        if row.status in FITTED:
            # the best start is a fitted one, the best of them; never a failed start
            ok = starts[starts.status.isin(FITTED)]
            best = starts[starts.start == row.best_start].iloc[0]
            assert best.status in FITTED and best.loglik == ok.loglik.max() == row.loglik
            p = res.params(row.dataset)
            assert all(np.all(np.isfinite(v)) for v in p.values())
            assert p["state_var"] > 0 and p["obs_var"] > 0
            if family == "ar":
                assert ar_radius(p["phi"])[0] < 1.0
            # the summary's log-likelihood is that of the returned parameters
            assert np.isclose(res.score(row.dataset, data[row.dataset]), row.loglik,
                              rtol=1e-9, atol=0)
            new = [np.array([0.35]), np.full(3, 2.0), np.array([np.nan, -1.0])]
            assert np.isfinite(res.score(row.dataset, new))
        else:
            assert row.best_start == -1 and np.isnan(row.loglik) and row.message
            assert not (res.components.dataset == row.dataset).any()
    # the bad datasets change nothing for the others
    if bad and good:
        alone = fit({j: data[j] for j in good}, family)
        a = s.set_index("dataset").loc[good]
        b = alone.summary.set_index("dataset")
        assert list(a.status) == list(b.status)
        assert np.array_equal(a.loglik.to_numpy(), b.loglik.to_numpy(), equal_nan=True)
        assert np.array_equal(res.components.value.to_numpy(),
                              alone.components.value.to_numpy())


# --- kalman_loglik ---------------------------------------------------------------------------

MODELS = {"ar": bulkem.StateSpace.ar([0.5, -0.3], sigma2=1.0, obs_var=0.4),
          "local_level": bulkem.StateSpace([[1.0]], [[1.0]], [[0.2]], [[1.0]], [1.0], [[0.2]])}
# One series: (kind, length, seed, share missing); "far" (x 1e200: a log-likelihood below
# float64's range) must be "failed", never "ok" with -inf.
SERIES_KINDS = ("good", "good", "good", "speck", "far", "big_value", "empty", "all_nan", "inf")
series = st.tuples(st.sampled_from(SERIES_KINDS), st.integers(1, 30),
                   st.integers(0, 2**32 - 1), st.floats(0.0, 0.5))
series_batch = st.lists(series, min_size=1, max_size=6)
EXPECT = {"empty": "invalid_data", "all_nan": "invalid_data", "inf": "invalid_data",
          "far": "failed", "big_value": "failed"}


def make_series(name, spec):
    kind, n, seed, missing = spec
    rng = np.random.default_rng(seed)
    m = MODELS[name]
    y = m.simulate(n, rng=rng)[:, 0]
    k = int(rng.integers(n))
    gone = rng.random(n) < missing
    gone[k] = False  # one observed step at least
    y[gone] = np.nan
    if kind == "speck":
        y[k] = 1e-300
    elif kind == "far":
        y = np.where(np.isnan(y), np.nan, 1e200 * (np.nan_to_num(y) + 0.5))
        y[k] = 1e200
    elif kind == "big_value":
        y[k] = 1e300
    elif kind == "empty":
        y = y[:0]
    elif kind == "all_nan":
        y[:] = np.nan
    elif kind == "inf":
        y[k] = -np.inf
    return y


@hypothesis.settings(**SETTINGS)
@hypothesis.given(name=st.sampled_from(sorted(MODELS)), method=st.sampled_from(["exact", "scan"]),
                  specs=series_batch)
def test_kalman_loglik_statuses_and_values(name, method, specs):
    model = MODELS[name]
    ys = [make_series(name, spec) for spec in specs]
    out = bulkem.kalman_loglik(ys, model, method=method, backend="cpu")
    assert len(out) == len(ys) and set(out.status) <= {"ok", "invalid_data", "failed"}
    ok = out.status == "ok"
    assert np.all(np.isfinite(out.loglik[ok]))  # never "ok" with a non-finite value
    assert out.loglik[~ok].isna().all() and (out.message[~ok].str.len() > 0).all()
    for j, (spec, y) in enumerate(zip(specs, ys, strict=True)):
        want = EXPECT.get(spec[0], "ok")
        assert out.status[j] == want, (spec, out.message[j])
        if want == "ok":
            ref = kalman_filter(y, model.F, model.H, model.Q, model.R, model.m0, model.P0)
            assert out.loglik[j] == pytest.approx(ref["loglik"], rel=1e-9)
    # the other series change nothing for the good ones
    good = [j for j, spec in enumerate(specs) if spec[0] not in EXPECT]
    if good and len(good) < len(ys):
        alone = bulkem.kalman_loglik([ys[j] for j in good], model, method=method,
                                     backend="cpu")
        assert (alone.status == "ok").all()
        assert np.allclose(alone.loglik, out.loglik[good], rtol=1e-10, atol=0)
