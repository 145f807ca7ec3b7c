"""``fit(bootstrap=B)``: parametric-bootstrap percentile intervals of the mixtures (issue 32),
their coverage on simulated data, and ``sample``."""

from __future__ import annotations

import os

import numba
import numpy as np
import pytest

import bulkem

TRUTH = {"weight_1": 0.4, "mu_1": 1.0, "lambda_1": 8.0, "weight_2": 0.6, "mu_2": 4.0,
         "lambda_2": 30.0}


def _draw(n_datasets, n_obs, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_datasets):
        first = rng.random(n_obs) < TRUTH["weight_1"]
        out.append(np.where(first, rng.wald(TRUTH["mu_1"], TRUTH["lambda_1"], n_obs),
                            rng.wald(TRUTH["mu_2"], TRUTH["lambda_2"], n_obs)))
    return out


def _coverage(n_datasets, n_obs, B, seed, level=0.9):
    x = _draw(n_datasets, n_obs, seed)
    res = bulkem.fit(x, n_components=2, n_starts=3, max_iter=300, seed=seed, backend="cpu",
                     bootstrap=B, bootstrap_level=level)
    iv = res.intervals
    iv = iv.assign(truth=iv.parameter.map(TRUTH))
    return ((iv.lower <= iv.truth) & (iv.truth <= iv.upper)).groupby(iv.parameter).mean(), res


def test_intervals_table_is_deterministic_and_holds_the_estimates(seed):
    x = _draw(3, 200, seed)
    kw = dict(n_components=2, n_starts=2, seed=seed, backend="cpu", bootstrap=8)
    res = bulkem.fit(x, **kw)
    iv = res.intervals
    assert list(iv.columns) == ["dataset", "parameter", "estimate", "lower", "upper", "n_boot"]
    assert iv.parameter.tolist()[:6] == list(TRUTH)
    assert (iv.n_boot == 8).all() and (iv.lower <= iv.upper).all()
    c = res.components
    assert np.array_equal(iv[iv.parameter == "mu_2"].estimate, c[c.component == 2].mu)
    again = bulkem.fit(x, **kw)
    assert again.intervals.equals(iv)
    threads = numba.get_num_threads()  # the replicates drawn on one thread, not on several
    try:
        numba.set_num_threads(1)
        assert bulkem.fit(x, **kw).intervals.equals(iv)
    finally:
        numba.set_num_threads(threads)
    narrow = bulkem.fit(x, bootstrap_level=0.5, **kw).intervals
    assert (narrow.upper - narrow.lower <= iv.upper - iv.lower + 1e-12).all()


def test_ninety_percent_intervals_cover_the_truth_about_ninety_percent(seed):
    """A small version of the coverage check (the long one: BULKEM_LONG_TESTS=1)."""
    cover, _ = _coverage(60, 400, 60, seed)
    assert ((cover > 0.7) & (cover <= 1.0)).all(), cover


@pytest.mark.skipif(not os.environ.get("BULKEM_LONG_TESTS"), reason="long: BULKEM_LONG_TESTS=1")
def test_coverage_on_a_thousand_datasets(seed):
    cover, _ = _coverage(1000, 400, 200, seed)
    assert ((cover >= 0.85) & (cover <= 0.95)).all(), cover


def test_sample_draws_from_the_fitted_mixture(seed):
    x = _draw(1, 300, seed)
    res = bulkem.fit(x, n_components=2, n_starts=3, seed=seed, backend="cpu")
    p = res.params(0)
    values, comp = res.sample(0, 200_000, seed=1)
    assert values.shape == (200_000,) and set(np.unique(comp)) == {1, 2}
    assert np.isclose(np.mean(comp == 1), p["weight"][0], atol=5e-3)
    assert np.isclose(values[comp == 2].mean(), p["mu"][1], rtol=5e-3)
    X = [np.random.default_rng(seed).normal(size=(100, 2))]
    # (M = 3, D = 2: the other tests' kernel)
    g = bulkem.fit(X, family="gaussian", n_components=3, n_starts=1, backend="cpu")
    v, _ = g.sample(0, 50_000, seed=2)
    assert v.shape == (50_000, 2)
    q = g.params(0)
    assert np.allclose(v.mean(axis=0), q["weight"] @ q["mean"], atol=0.03)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_components=[1, 2], bootstrap=5), r"bootstrap= with a grid of sizes"),
    (dict(bootstrap=-1), r"bootstrap must be >= 0"),
    (dict(bootstrap=5, bootstrap_level=1.0), r"bootstrap_level must be a number between 0"),
    (dict(bootstrap=5, checkpoint="unused"), r"bootstrap= is fitted in memory"),
])
def test_bootstrap_arguments_are_checked_at_once(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bulkem.fit([np.linspace(0.5, 2.0, 40)], backend="cpu", **kwargs)


def test_bootstrap_of_a_batch_without_a_fit_is_an_empty_table():
    with pytest.warns(UserWarning):
        res = bulkem.fit([np.ones(50)], n_components=2, n_starts=2, bootstrap=5, backend="cpu")
    assert res.intervals.empty and list(res.intervals.columns)[-1] == "n_boot"


def test_hmm_and_tmap_replicates_have_the_datasets_sizes_and_give_intervals(seed):
    from reference_tmap import sample as tmap_sample

    rng = np.random.default_rng(seed)
    seqs = [[rng.integers(0, 4, n) for n in (30, 45)] for _ in range(2)]
    hmm = bulkem.fit(seqs, family="hmm", emission="categorical", n_symbols=4, n_components=2,
                     n_starts=2, seed=seed, max_iter=10, backend="cpu", bootstrap=4)
    reps = hmm.replicates(3, seed)
    assert len(reps) == 6 and all([len(s) for s in r] == [30, 45] for r in reps)
    assert all(set(np.unique(np.concatenate(r))) <= {0.0, 1.0, 2.0, 3.0} for r in reps)
    iv = hmm.intervals
    assert len(iv) == 2 * hmm._model.params_layout.size and (iv.n_boot == 4).all()
    assert iv.parameter.tolist()[:3] == ["startprob_1", "startprob_2", "transmat_1_1"]

    p = {"alpha": np.array([0.5, 0.3, 0.2]),
         "pi": np.array([[0.2, 0.2, 0.1], [0.1, 0.3, 0.1], [0.2, 0.1, 0.2]]),
         "rates": np.array([1.0, 3.0, 6.0])}
    runs = [tmap_sample(p, (1, 2, 3), 50, np.random.default_rng(seed + k)) for k in range(2)]
    tm = bulkem.fit(runs, family="tmap", orders=(1, 2, 3), n_starts=2, seed=seed, max_iter=10,
                    backend="cpu", bootstrap=3)
    assert [len(r) for r in tm.replicates(2, seed)] == [50, 50, 50, 50]
    assert tm.intervals.trace.tolist()[:1] == [0] and (tm.intervals.n_boot == 3).all()


def test_the_hmm_sampler_has_the_models_stationary_emissions():
    from bulkem.result.hmm import _draw

    rng = np.random.default_rng(1)
    seqs = [[rng.integers(0, 3, 40) for _ in range(2)]]
    res = bulkem.fit(seqs, family="hmm", emission="categorical", n_symbols=3, n_components=2,
                     n_starts=1, seed=1, max_iter=3, backend="cpu")
    p = res._model.as_dict(res._best[0][0])
    x = _draw(res._model, p, np.array([200_000]), np.random.default_rng(2))[0]
    stationary = np.linalg.matrix_power(p["transmat"], 500)[0] @ p["emissionprob"]
    np.testing.assert_allclose(np.bincount(x.astype(int), minlength=3) / len(x), stationary,
                               atol=6e-3)


def test_state_space_replicates_keep_lengths_and_gaps_and_the_ar_moments(seed):
    from bulkem import StateSpace
    from bulkem.result.ssm import _simulate

    y = _simulate(StateSpace.ar([0.6, -0.2], 1.0, 0.5), np.array([200_000]),
                  np.random.default_rng(seed))[0]
    rho1 = 0.6 / 1.2
    var_z = 1.0 / (1 - 0.6 * rho1 - (-0.2) * (0.6 * rho1 - 0.2))
    assert np.isclose(y.var(), var_z + 0.5, rtol=0.02)  # the AR variance plus the noise's
    assert np.isclose(np.mean(y[1:] * y[:-1]), rho1 * var_z, rtol=0.03)
    rng = np.random.default_rng(seed)
    series = [[np.convolve(rng.standard_normal(n), [1.0, 0.6], "same") for n in (80, 60)]
              for _ in range(2)]
    series[0][1][7] = np.nan
    res = bulkem.fit(series, family="ar", order=1, n_starts=2, seed=seed, max_iter=20,
                     backend="cpu", bootstrap=3)
    reps = res.replicates(2, seed)
    assert [[len(s) for s in r] for r in reps] == [[80, 60]] * 4
    assert np.isnan(reps[0][1][7]) and np.isfinite(reps[2][1]).all()
    assert list(res.intervals.parameter[:3]) == ["phi_1", "state_var", "obs_var"]
