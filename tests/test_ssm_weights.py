"""Series weights of the state-space families (``fit(weights=...)``, one weight per series):
the weighted CPU fit against the oracle's weighted EM, integer weights against repeated
series (CPU, and CUDA under the simulator), a weight of 0 against the series left out, the
weighted log-likelihood, bad weights and weights that do not line up with the datasets.

One compiled model, AR(2) (the weighted kernel, and the unweighted one of
tests/test_ssm_em.py), on short series: the weighted pieces differ from the unweighted
ones in the weight of each series only, shared by the local level's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ssm_em_reference import ar_em, simulate_ar

import bulkem
from bulkem.tuning import Tuning

# Iteration by iteration against the plain-EM oracle (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

KW = dict(family="ar", order=2)
INIT = {"phi": np.array([[0.2, 0.1], [-0.3, 0.2]]), "state_var": np.array([0.5, 2.0]),
        "obs_var": np.array([1.0, 0.2])}


def _series(seed, lengths):
    """Series of AR(2) plus noise; a few missing steps in the first."""
    out = simulate_ar([0.5, -0.3], 1.0, 0.4, lengths, np.random.default_rng(seed))
    out[0][[1, 2, 5]] = np.nan
    return out


def _start(k):
    return {key: v[k] for key, v in INIT.items()}


def _rel(a, b):
    return np.abs(np.asarray(a, float) - np.asarray(b, float)) / np.abs(np.asarray(b, float))


def test_weighted_fit_is_the_oracles_weighted_em(seed):
    data = [_series(seed, [30, 22, 26]), _series(seed + 1, [25, 18])]
    w = [np.array([0.5, 2.25, 1.3]), np.array([3.0, 0.7])]
    res = bulkem.fit(data, n_starts=2, init=INIT, max_iter=6, tol=0.0, seed=seed,
                     backend="cpu", weights=w, **KW)
    n_obs = [[np.sum(~np.isnan(y)) for y in d] for d in data]
    np.testing.assert_array_equal(res.summary.n_obs, [sum(n) for n in n_obs])
    np.testing.assert_allclose(res.summary.sum_weights,
                               [wk @ nk for wk, nk in zip(w, n_obs, strict=True)], rtol=1e-14)
    for row in res.starts.itertuples():
        st = _start(row.start)
        ref = ar_em(data[row.dataset], st["phi"], st["state_var"], st["obs_var"], max_iter=6,
                    tol=0.0, weights=w[row.dataset])
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    for s in res.summary.itertuples():
        st = _start(s.best_start)
        ref = ar_em(data[s.dataset], st["phi"], st["state_var"], st["obs_var"], max_iter=6,
                    tol=0.0, weights=w[s.dataset])
        for key, v in res.params(s.dataset).items():
            np.testing.assert_allclose(v, ref[key], rtol=1e-8, atol=1e-12, err_msg=key)
        # BIC's number of observations: the weighted observed steps (4 free parameters)
        assert s.bic == pytest.approx(-2 * s.loglik + 4 * np.log(s.sum_weights), rel=1e-12)


def test_integer_weights_fit_as_repeated_series(seed):
    data = _series(seed, [28, 20, 24])
    counts = np.array([2, 1, 3])
    kw = dict(n_starts=2, init=INIT, max_iter=12, tol=0.0, seed=seed, backend="cpu", **KW)
    weighted = bulkem.fit([data], weights=[counts.astype(float)], **kw)
    repeated = bulkem.fit([[y for y, c in zip(data, counts, strict=True) for _ in range(c)]],
                          **kw)
    assert np.all(_rel(weighted.starts.loglik, repeated.starts.loglik) < 1e-10)
    np.testing.assert_allclose(weighted.start_values.value, repeated.start_values.value)
    np.testing.assert_allclose(weighted.components.value, repeated.components.value,
                               rtol=1e-8, atol=1e-12)
    assert weighted.summary.bic[0] == pytest.approx(repeated.summary.bic[0], rel=1e-10)


def test_weight_zero_is_the_series_left_out(seed):
    """Random starts too: the series' values and the starts' keys are the others'."""
    a, b = _series(seed, [26, 19, 23]), _series(seed + 2, [21, 24])
    kw = dict(n_starts=3, max_iter=20, seed=seed, backend="cpu", **KW)
    with_zero = bulkem.fit({"a": a, "b": b}, weights={"a": [1.5, 0.0, 2.0], "b": [1.0, 0.5]},
                           **kw)
    without = bulkem.fit({"a": [a[0], a[2]], "b": b}, weights={"a": [1.5, 2.0], "b": [1.0, 0.5]},
                         **kw)
    for name in ("summary", "components", "starts", "start_values"):
        pd.testing.assert_frame_equal(getattr(with_zero, name), getattr(without, name),
                                      check_exact=True)


def test_weighted_loglik_is_the_weighted_sum_of_the_series(seed):
    data = _series(seed, [27, 21, 25])
    p = {"phi": [0.4, -0.2], "state_var": 0.9, "obs_var": 0.5}
    w = np.array([0.25, 2.0, 1.5])
    one = bulkem.loglik(data, "ar", p, order=2, backend="cpu")  # one dataset per series
    weighted = bulkem.loglik([data], "ar", p, order=2, backend="cpu", weights=[w])
    assert weighted.status[0] == "ok"
    assert _rel(weighted.loglik[0], w @ one.loglik.to_numpy()) < 1e-12


def test_bad_weights_fault_their_dataset_only(seed):
    data = [_series(seed + k, [20, 22]) for k in range(4)]
    w = [[1.0, np.nan], [0.0, -2.0], [np.inf, 1.0], [1.0, 2.0]]  # (series as given)
    with pytest.warns(UserWarning, match="3 of 4 datasets are invalid"):
        res = bulkem.fit(data, n_starts=1, init={k: v[:1] for k, v in INIT.items()},
                         max_iter=3, tol=0.0, backend="cpu", weights=w, **KW)
    s = res.summary
    assert list(s.status) == ["invalid_data"] * 3 + ["max_iter"]
    assert s.message[0].startswith("series 1: weight nan (weights must be finite and >= 0")
    assert s.message[1].startswith("series 1: weight -2")
    assert s.message[2].startswith("series 0: weight inf")
    assert np.isnan(s.sum_weights[:3]).all() and s.sum_weights[3] > 0


def test_weights_that_do_not_line_up_raise(seed, tmp_path):
    data = [_series(seed, [20, 22]), _series(seed + 1, [20])]
    fit = dict(n_starts=1, backend="cpu", **KW)
    with pytest.raises(ValueError, match=r"weights holds 1 entries for 2 dataset\(s\)"):
        bulkem.fit(data, weights=[[1.0, 2.0]], **fit)
    with pytest.raises(ValueError, match=r"0 has 2 series but its weights have shape \(3,\)"):
        bulkem.fit(data, weights=[[1.0, 2.0, 3.0], [1.0]], **fit)
    with pytest.raises(ValueError, match=r"no entry for dataset\(s\) \['b'\]"):
        bulkem.fit({"a": data[0], "b": data[1]}, weights={"a": [1.0, 2.0]}, **fit)
    with pytest.raises(ValueError, match="names a column, but datasets is a .*not a DataFrame"):
        bulkem.fit(data, weights="w", **fit)
    ok = [[1.0, 2.0], 3.0]  # (checkpointed: each chunk gets its datasets' weights)
    a = bulkem.fit(data, weights=ok, max_iter=3, seed=seed, **fit)
    b = bulkem.fit(data, weights=ok, max_iter=3, seed=seed, checkpoint=tmp_path / "run", **fit)
    pd.testing.assert_frame_equal(a.summary, b.summary)


def test_weight_column_of_a_long_frame(seed):
    data = _series(seed, [20, 23, 18])
    w = np.array([1.5, 0.5, 2.0])
    frame = pd.DataFrame({"dataset": "x", "series": np.repeat([0, 1, 2], [20, 23, 18]),
                          "value": np.concatenate(data), "w": np.repeat(w, [20, 23, 18])})
    kw = dict(n_starts=1, init={k: v[:1] for k, v in INIT.items()}, max_iter=3, tol=0.0,
              backend="cpu", **KW)
    by_col = bulkem.fit(frame, weights="w", **kw)
    by_list = bulkem.fit({"x": data}, weights={"x": w}, **kw)
    pd.testing.assert_frame_equal(by_col.components, by_list.components, check_exact=True)
    frame.loc[3, "w"] = 9.0
    with pytest.raises(ValueError, match="not constant within dataset 'x', series 0"):
        bulkem.fit(frame, weights="w", **kw)


@pytest.mark.cuda
def test_cuda_integer_weights_fit_as_repeated_series(seed):
    """Two lanes per fit split the series and sum their weighted statistics and totals."""
    data = _series(seed, [9, 8, 10])
    counts = np.array([2, 1, 3])
    kw = dict(n_starts=2, init=INIT, max_iter=3, tol=0.0, seed=seed, **KW)
    res = bulkem.fit([data], backend="cuda", weights=[counts.astype(float)], **kw,
                     tuning=Tuning(cuda_warps_per_block=1,
                                   cuda_lanes_per_fit_series={False: 2, True: 2}))
    assert res.backend == "cuda"
    repeated = bulkem.fit([[y for y, c in zip(data, counts, strict=True) for _ in range(c)]],
                          backend="cpu", **kw)
    assert np.all(_rel(res.starts.loglik, repeated.starts.loglik) < 1e-10)
    np.testing.assert_allclose(res.components.value, repeated.components.value, rtol=1e-8,
                               atol=1e-12)
