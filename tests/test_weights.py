"""Observation weights of the mixture families (``fit(weights=...)``, issue 34 item 2): the
engines against the oracles' weighted EM, integer weights against repeated values, a weight
of 0 against the value left out, bad weights and bad arguments.

Kernels: the weighted Gaussian (any M and D: run-time sizes in the test command) and the
weighted inverse Gaussian, float64, bulk; the CPU's large regime and float32 run under the
simulator or on the CPU where noted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import assert_same_tables
from reference import gauss_em, ig_em

import bulkem

# Iteration by iteration against plain-EM oracles (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")


def _gauss(seed, n=120, D=2):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    centres = np.array([[-2.0] * D, [2.5] * D])
    return centres[labels] + rng.normal(size=(n, D))


def _ig(seed, n=120):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.wald(1.0, 5.0, n // 2), rng.wald(4.0, 20.0, n - n // 2)])


def _weights(seed, n, zeros=True):
    """Fractional weights, some 0."""
    rng = np.random.default_rng(seed + 1)
    w = rng.uniform(0.2, 3.0, n)
    if zeros:
        w[rng.choice(n, n // 10, replace=False)] = 0.0
    return w


def _rel(a, b):
    return abs(a - b) / abs(b)


def test_weighted_gaussian_is_the_oracles_weighted_em(backend, tuning, seed):
    x = [_gauss(seed), _gauss(seed + 7, n=90)]
    w = [_weights(seed, len(x[0])), _weights(seed + 3, len(x[1]))]
    res = bulkem.fit(x, family="gaussian", n_components=2, n_starts=2, max_iter=8, tol=0.0,
                     seed=seed, backend=backend, tuning=tuning, weights=w)
    assert (res.summary.status == "max_iter").all()
    np.testing.assert_allclose(res.summary.sum_weights, [wk.sum() for wk in w], rtol=1e-12)
    np.testing.assert_array_equal(res.summary.n_obs, [(wk > 0).sum() for wk in w])
    for row in res.starts.itertuples():
        sv = res.start_values[(res.start_values.dataset == row.dataset)
                              & (res.start_values.start == row.start)]
        ref = gauss_em(x[row.dataset], sv.weight.to_numpy(), sv[["mean_1", "mean_2"]].to_numpy(),
                       sv[["var_1", "var_2"]].to_numpy(), max_iter=8, tol=0.0,
                       weights=w[row.dataset])
        assert row.n_iter == ref["n_iter"] and _rel(row.loglik, ref["loglik"]) < 1e-9


def test_weighted_inverse_gaussian_is_the_oracles_weighted_em(backend, tuning, seed):
    x = [_ig(seed), _ig(seed + 5, n=80)]
    w = [_weights(seed, len(x[0])), _weights(seed + 2, len(x[1]), zeros=False)]
    res = bulkem.fit(x, n_components=2, n_starts=2, max_iter=8, tol=0.0, seed=seed,
                     backend=backend, tuning=tuning, weights=w, trace=True)
    for row in res.starts.itertuples():
        sv = res.start_values[(res.start_values.dataset == row.dataset)
                              & (res.start_values.start == row.start)]
        ref = ig_em(x[row.dataset], sv.weight.to_numpy(), sv.mu.to_numpy(),
                    sv["lambda"].to_numpy(), max_iter=8, tol=0.0, weights=w[row.dataset])
        assert row.n_iter == ref["n_iter"] and _rel(row.loglik, ref["loglik"]) < 1e-9
    assert (res.trace.groupby(["dataset", "start"]).loglik.diff().dropna() > -1e-9).all()


def test_integer_weights_fit_as_repeated_values(seed):
    """From the same start, weights 0..3 give the fit of the values repeated that often."""
    rng = np.random.default_rng(seed)
    x = _gauss(seed, n=100)
    w = rng.integers(0, 4, len(x)).astype(float)
    init = {"weight": [0.5, 0.5], "mean": [[-1.0, -1.0], [1.0, 1.0]], "var": [[1.0, 1.0]] * 2}
    kw = dict(family="gaussian", n_components=2, n_starts=1, max_iter=10, tol=0.0, init=init,
              backend="cpu", seed=seed)
    a = bulkem.fit([x], weights=[w], **kw)
    b = bulkem.fit([np.repeat(x, w.astype(int), axis=0)], **kw)
    assert _rel(a.summary.loglik[0], b.summary.loglik[0]) < 1e-12
    assert a.summary.n_iter[0] == b.summary.n_iter[0]
    assert a.summary.sum_weights[0] == b.summary.n_obs[0]
    assert abs(a.summary.bic[0] - b.summary.bic[0]) < 1e-9 * abs(b.summary.bic[0])
    cols = ["weight", "mean_1", "mean_2", "var_1", "var_2"]
    np.testing.assert_allclose(a.components[cols], b.components[cols], rtol=1e-10)


def test_a_zero_weight_leaves_its_value_out(seed):
    """The same tables, bit for bit, as the values of weight 0 removed (their starts too)."""
    x = _ig(seed)
    w = _weights(seed, len(x))
    kw = dict(n_components=2, n_starts=3, max_iter=20, seed=seed, backend="cpu")
    assert_same_tables(bulkem.fit([x], weights=[w], **kw),
                       bulkem.fit([x[w > 0]], weights=[w[w > 0]], **kw))


def test_bad_weights_fault_their_dataset_only(seed):
    x = [_ig(seed), _ig(seed + 1), _ig(seed + 2)]
    w = [np.ones(len(v)) for v in x]
    w[1][3] = np.nan
    w[2][:2] = -1.0
    with pytest.warns(UserWarning, match="invalid"):
        res = bulkem.fit(x, n_components=2, n_starts=2, max_iter=5, seed=seed, backend="cpu",
                         weights=w)
    assert list(res.summary.status[1:]) == ["invalid_data"] * 2
    assert res.summary.status[0] in ("converged", "max_iter")
    assert "1 of 120 weights are NaN or infinite" in res.summary.message[1]
    assert "2 of 120 weights are negative" in res.summary.message[2]


def test_weights_that_do_not_line_up_raise_at_once(seed):
    x = [_ig(seed), _ig(seed + 1, n=60)]
    fit = dict(n_components=2, n_starts=1, backend="cpu")
    with pytest.raises(ValueError, match="has 60 values but 59 weights"):
        bulkem.fit(x, weights=[np.ones(120), np.ones(59)], **fit)
    with pytest.raises(ValueError, match="1 dataset.* for 2 dataset"):
        bulkem.fit(x, weights=[np.ones(120)], **fit)
    with pytest.raises(ValueError, match="names a column"):
        bulkem.fit(x, weights="w", **fit)
    with pytest.raises(ValueError, match="one weight per sequence"):  # (per sequence)
        bulkem.fit([np.arange(20.0) % 3], family="hmm", emission="categorical",
                   weights=[np.ones(20)], **fit)
    with pytest.raises(ValueError, match="no entry for dataset"):
        bulkem.fit({"a": x[0], "b": x[1]}, weights={"a": np.ones(120)}, **fit)


def test_a_weight_column_of_a_long_frame(seed):
    """``weights="w"`` reads a column (left out of a vector family's value columns); a dict
    of weights goes by key."""
    x = _gauss(seed, n=80)
    w = _weights(seed, 80)
    frame = pd.DataFrame({"dataset": "a", "x": x[:, 0], "y": x[:, 1], "w": w})
    kw = dict(family="gaussian", n_components=2, n_starts=2, max_iter=10, seed=seed,
              backend="cpu")
    by_col = bulkem.fit(frame, weights="w", **kw)
    assert by_col.n_dims == 2
    by_dict = bulkem.fit({"a": x}, weights={"a": w}, **kw)
    assert_same_tables(by_col, by_dict)


def test_a_checkpointed_fit_hands_each_chunk_its_weights(tmp_path, seed):
    """Weights per dataset (a list, a dict) and a column of a long frame, fitted in chunks
    of one dataset: the in-memory fit's tables; other weights are other data; Dask and
    streaming take a column only."""
    from bulkem.tuning import Tuning

    x = [_ig(seed + k, n=60) for k in range(3)]
    w = [_weights(seed + k, 60) for k in range(3)]
    kw = dict(n_starts=2, max_iter=10, seed=seed, backend="cpu", progress=False,
              tuning=Tuning(checkpoint_chunk_fits=2))  # one dataset a chunk
    ref = bulkem.fit(x, weights=w, **kw)
    assert_same_tables(ref, bulkem.fit(x, weights=w, checkpoint=tmp_path / "a", **kw))
    assert_same_tables(ref, bulkem.fit(x, weights=w, checkpoint=tmp_path / "a", **kw))  # read
    keyed = bulkem.fit(dict(enumerate(x)), weights=dict(enumerate(w)),
                       checkpoint=tmp_path / "b", **kw)
    assert_same_tables(ref, keyed)
    frame = pd.DataFrame({"dataset": np.repeat(np.arange(3), 60), "value": np.concatenate(x),
                          "w": np.concatenate(w)})
    by_col = bulkem.fit(frame, weights="w", checkpoint=tmp_path / "c", **kw)
    np.testing.assert_array_equal(by_col.summary.loglik, ref.summary.loglik)
    with pytest.raises(ValueError, match="other"):
        bulkem.fit(x, weights=[v + 1 for v in w], checkpoint=tmp_path / "a", **kw)
    with pytest.raises(ValueError, match="pass the column's name"):
        bulkem.scale.combine.check_splittable({"weights": w})


def test_loglik_at_given_parameters_takes_weights(seed):
    x = [_ig(seed), _ig(seed + 1)]
    w = [_weights(seed, 120), _weights(seed + 4, 120)]
    p = {"weight": [0.5, 0.5], "mu": [1.0, 4.0], "lambda": [5.0, 20.0]}
    out = bulkem.loglik(x, "invgauss", p, backend="cpu", weights=w)
    for k in range(2):
        ref = ig_em(x[k], p["weight"], p["mu"], p["lambda"], max_iter=0, weights=w[k])
        assert _rel(out.loglik[k], ref["loglik"]) < 1e-12


def test_the_cpu_large_regime_gives_the_bulk_bits(seed):
    """A weighted fit over every core (blocks in parallel, added in order) is the bulk
    engine's fit, bit for bit; so is one tile at a time."""
    from conftest import SMALL_LARGE

    from bulkem.tuning import Tuning

    x = [_gauss(seed, n=300, D=2)]
    w = [_weights(seed, 300)]
    kw = dict(family="gaussian", n_components=3, n_starts=2, max_iter=15, seed=seed,
              backend="cpu", weights=w)
    small = Tuning(**SMALL_LARGE)
    assert_same_tables(bulkem.fit(x, tuning=small.replace(strategy="bulk"), **kw),
                       bulkem.fit(x, tuning=small.replace(strategy="large"), **kw))


def test_standard_errors_and_icl_of_integer_weights_are_the_repeated_values(seed):
    """Frequency weights: the standard errors (the weighted likelihood's information) and a
    grid's ICL (the entropy weighted) are those of the values repeated."""
    rng = np.random.default_rng(seed)
    x = _ig(seed)
    w = rng.integers(1, 4, len(x)).astype(float)
    init = {"weight": [0.5, 0.5], "mu": [1.0, 4.0], "lambda": [5.0, 20.0]}
    kw = dict(n_components=2, n_starts=1, max_iter=200, tol=1e-10, init=init, backend="cpu",
              seed=seed)
    a = bulkem.fit([x], weights=[w], se=True, **kw)
    b = bulkem.fit([np.repeat(x, w.astype(int))], se=True, **kw)
    cols = ["se_weight", "se_mu", "se_lambda"]
    np.testing.assert_allclose(a.components[cols], b.components[cols], rtol=1e-6)
    grid = dict(n_components=[1, 2], n_starts=2, seed=seed, backend="cpu", criterion="icl",
                tol=1e-10, max_iter=500)
    ga = bulkem.fit([x], weights=[w], **grid)
    gb = bulkem.fit([np.repeat(x, w.astype(int))], **grid)
    np.testing.assert_allclose(ga.selection.icl, gb.selection.icl, rtol=1e-8)


def test_weighted_float32_fits_are_the_float64_ones(backend, tuning, seed):
    """float32 sums component 0's statistics from the weighted totals (``fused``): its fits
    reach the float64 ones, and the returned log-likelihood is float64's at its parameters."""
    if backend == "cpu":
        pytest.skip("on the GPU's kernels (the CPU's float32 and weighted passes are each "
                    "tested; a kernel of both would cost the test command ~35 s)")
    x = [_ig(seed, n=80)]
    w = [_weights(seed, 80)]
    kw = dict(n_components=2, n_starts=2, max_iter=200, tol=1e-8, seed=seed, backend=backend,
              tuning=tuning, weights=w)
    a = bulkem.fit(x, dtype="float32", **kw)
    b = bulkem.fit(x, **kw)
    np.testing.assert_allclose(a.summary.loglik, b.summary.loglik, rtol=1e-6)
    p = {k: a.params(0)[k] for k in ("weight", "mu", "lambda")}
    ref = ig_em(x[0], p["weight"], p["mu"], p["lambda"], max_iter=0, weights=w[0])
    assert _rel(a.summary.loglik[0], ref["loglik"]) < 1e-12
