"""The diagonal Gaussian family: both engines and both regimes against the oracle and scikit-learn.

CUDA runs under the simulator unless BULKEM_TEST_REAL_GPU=1, so its inputs
are tiny; the large regime is forced with small tiles, blocks and chunks so
that tiny data still spans several of each.
"""

from __future__ import annotations

import re
import warnings
from types import SimpleNamespace

import numba
import numpy as np
import pandas as pd
import pytest
from conftest import SMALL_LARGE, assert_starts_match_ig_oracle, demo
from reference import gauss_em, gauss_logpdf, gauss_mix_logpdf, ig_logpdf

import bulkem
from bulkem import models
from bulkem.data import Ragged
from bulkem.engines import select
from bulkem.models.mixture import gaussian
from bulkem.tuning import DEGENERATE_COLLAPSE, Tuning

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")


def _rel(a, b):
    return np.abs(np.asarray(a, float) - np.asarray(b, float)) / np.abs(np.asarray(b, float))


def _data(n, n_dims, seed, n_comp=2):
    """A well-separated diagonal Gaussian mixture sample of shape (n, n_dims)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 4.0, (n_comp, n_dims))
    scales = rng.uniform(0.5, 1.5, (n_comp, n_dims))
    labels = rng.integers(0, n_comp, n)
    return centres[labels] + scales[labels] * rng.normal(size=(n, n_dims))


@pytest.fixture(params=["bulk", "large"])
def regime(request, tuning):
    """A tuning that forces a regime, the large one with tiles, blocks and chunks small
    enough for tiny data (the bulk one as it is: its kernels are the other tests')."""
    return tuning.replace(strategy=request.param,
                          **(SMALL_LARGE if request.param == "large" else {}))


def _start(res, dataset, start):
    sv = res.start_values[(res.start_values.dataset == dataset) & (res.start_values.start == start)]
    D = res.n_dims
    return (sv.weight.to_numpy(), sv[[f"mean_{d + 1}" for d in range(D)]].to_numpy(),
            sv[[f"var_{d + 1}" for d in range(D)]].to_numpy())


def test_engine_matches_oracle(backend, regime, seed):
    data = [_data(40, 1, seed), _data(36, 1, seed + 1)]  # (the FAR tests' kernels: D = 1)
    kw = dict(family="gaussian", n_components=2, n_starts=2, max_iter=8, tol=1e-7, seed=seed)
    res = bulkem.fit(data, backend=backend, tuning=regime, **kw)
    assert res.backend == backend and res.n_dims == 1
    for row in res.starts.itertuples():
        ref = gauss_em(data[row.dataset], *_start(res, row.dataset, row.start), max_iter=8,
                       tol=1e-7)
        assert row.status == ref["status"]
        assert row.n_iter == ref["n_iter"]
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    for s in res.summary.itertuples():
        ref = gauss_em(data[s.dataset], *_start(res, s.dataset, s.best_start), max_iter=8,
                       tol=1e-7)
        order = np.argsort(ref["mean"][:, 0])
        got = res.params(s.dataset)
        for key in ("weight", "mean", "var"):
            assert np.all(_rel(got[key], ref[key][order]) < 1e-8), key


def _sklearn_loglik(x, w, mean, var, k, reg_covar):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(len(w), covariance_type="diag", weights_init=w, means_init=mean,
                         precisions_init=1.0 / var, max_iter=k, tol=0.0, reg_covar=reg_covar,
                         init_params="random_from_data", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gm.fit(x)
    return gm.score(x) * len(x), gm


def test_matches_sklearn_from_the_same_start(backend, regime):
    pytest.importorskip("sklearn")
    small = backend == "cuda"
    x = _data(48 if small else 300, 2, 7, n_comp=3)
    rng = np.random.default_rng(3)
    w = np.array([0.2, 0.3, 0.5])
    mean = x[rng.choice(len(x), 3, replace=False)]
    var = np.tile(x.var(axis=0), (3, 1)) * [[0.5], [1.0], [2.0]]
    init = {"weight": w, "mean": mean, "var": var}
    for k in (1, 3) if small else (1, 4, 25):
        for reg in (1e-6, 1e-2):
            want, gm = _sklearn_loglik(x, w, mean, var, k, reg)
            res = bulkem.fit([x], family="gaussian", n_components=3, n_starts=1, init=init,
                             max_iter=k, tol=0.0, reg_covar=reg, backend=backend, tuning=regime)
            assert res.summary.n_iter[0] == k
            assert _rel(res.summary.loglik[0], want) < 1e-8, (k, reg)
            got = res.params(0)
            order = np.argsort(gm.means_[:, 0])
            assert np.all(_rel(got["mean"], gm.means_[order]) < 1e-8)
            assert np.all(_rel(got["var"], gm.covariances_[order]) < 1e-8)
            assert np.all(_rel(got["weight"], gm.weights_[order]) < 1e-8)


def test_loglik_never_decreases(backend, regime, seed):
    x = _data(50, 2, seed, n_comp=3)
    init = {"weight": [0.3, 0.3, 0.4], "mean": x[:3], "var": np.ones((3, 2))}
    iters = range(1, 9) if backend == "cpu" else (1, 3, 5)
    lls = [bulkem.fit([x], family="gaussian", n_components=3, n_starts=1, init=init,
                      max_iter=k, tol=0.0, backend=backend, tuning=regime).summary.loglik[0]
           for k in iters]
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1]))
    assert lls[-1] > lls[0]


def test_float32_close_to_float64(backend, regime, seed):
    data = [_data(40, 1, seed)]
    kw = dict(family="gaussian", n_components=2, n_starts=2, max_iter=6, tol=0.0, seed=seed,
              backend=backend, tuning=regime)
    r64 = bulkem.fit(data, **kw)
    r32 = bulkem.fit(data, dtype="float32", **kw)
    assert np.max(_rel(r32.starts.loglik, r64.starts.loglik)) < 1e-4


def test_large_regime_runs_the_invgauss_family_too(backend, regime, seed):
    """The large engine is family-generic: the inverse-Gaussian family against its oracle."""
    data = demo(1, 45, seed)
    res = bulkem.fit(data, n_starts=2, max_iter=6, tol=1e-7, seed=seed, backend=backend,
                     tuning=regime)
    assert_starts_match_ig_oracle(res, data, max_iter=6, tol=1e-7)


def test_collapsed_component_is_degenerate_never_a_fit(backend, regime):
    x = _data(40, 1, 1)
    far = {"weight": [0.5, 0.5], "mean": [x.mean(axis=0), [1e4]], "var": np.ones((2, 1))}
    with pytest.warns(UserWarning, match="no usable start"):
        res = bulkem.fit([x], family="gaussian", n_components=2, n_starts=1, init=far,
                         max_iter=5, backend=backend, tuning=regime)
    ref = gauss_em(x, far["weight"], far["mean"], far["var"], max_iter=5)
    assert ref["status"] == "degenerate"
    assert res.starts.status[0] == "degenerate"
    assert "collapsed" in res.starts.message[0]
    assert res.summary.status[0] == "failed" and len(res.components) == 0


def test_component_on_one_point_without_floor_is_degenerate(backend, regime):
    x = np.concatenate([_data(39, 1, 1, n_comp=1) * 0.1, [[20.0]]])
    init = {"weight": [0.5, 0.5], "mean": [[0.0], [20.0]], "var": [[1.0], [1e-4]]}
    ref = gauss_em(x, init["weight"], init["mean"], init["var"], max_iter=5, reg_covar=0.0)
    assert ref["status"] == "degenerate" and ref["n_iter"] == 0
    kw = dict(family="gaussian", n_components=2, n_starts=1, init=init, max_iter=5,
              backend=backend, tuning=regime)
    with pytest.warns(UserWarning, match="no usable start"):
        res = bulkem.fit([x], reg_covar=0.0, **kw)
    assert (res.starts.status[0], res.starts.n_iter[0]) == ("degenerate", 0)
    assert res.summary.status[0] == "failed"
    floored = bulkem.fit([x], reg_covar=1e-6, **kw)  # the floor keeps it a fit
    assert floored.starts.status[0] != "degenerate"
    assert np.isclose(floored.params(0)["var"][1], 1e-6, rtol=1e-6).all()


def test_mstep_flags_empty_and_zero_variance_components():
    D = 2
    stats = np.array([5.0, 10.0, 5.0, 20.0, 5.0])  # n_k = 5: mean (2, 1), E[x^2] = (4, 1)
    params = np.zeros(5)
    assert gaussian.mstep(stats, params, 1, D, 5.0, 0.0) == DEGENERATE_COLLAPSE
    assert gaussian.mstep(stats, params, 1, D, 5.0, 1e-6) == 0
    assert np.allclose(params, [1.0, 2.0, 1.0, 1e-6, 1e-6])
    assert gaussian.mstep(np.zeros(5), params, 1, D, 5.0, 1e-6) == DEGENERATE_COLLAPSE


def test_input_forms_agree():
    x0, x1 = _data(30, 2, 1), _data(35, 2, 2)  # (M = 3, D = 2: the other tests' kernel)
    kw = dict(family="gaussian", n_components=3, n_starts=3, max_iter=20, seed=4, backend="cpu")
    base = bulkem.fit([x0, x1], **kw)
    frame = pd.concat([pd.DataFrame(x, columns=["a", "b"]).assign(dataset=k)
                       for k, x in (("p", x0), ("q", x1))])
    forms = {
        "dict": {"p": x0, "q": x1},
        "frame": frame,
        "frame cols": frame.assign(junk=0.0),
    }
    for name, data in forms.items():
        extra = {"value_col": ["a", "b"]} if name == "frame cols" else {}
        res = bulkem.fit(data, **kw, **extra)
        assert list(res.summary.dataset) == ["p", "q"], name
        assert np.array_equal(res.starts.loglik, base.starts.loglik), name
    stack = np.stack([x0[:30], x1[:30]])
    res = bulkem.fit(stack, **kw)
    assert len(res.summary) == 2
    assert res.summary.loglik[0] == base.summary.loglik[0]
    one = bulkem.fit(x0, **kw)
    assert len(one.summary) == 1 and one.summary.loglik[0] == base.summary.loglik[0]


def test_one_dimensional_data_is_d_equals_1():
    x = _data(60, 1, 5)[:, 0]
    res = bulkem.fit([x], family="gaussian", n_components=2, n_starts=2, max_iter=10, tol=0.0,
                     seed=1, backend="cpu")
    assert res.n_dims == 1
    assert list(res.components.columns) == ["dataset", "component", "weight", "mean_1", "var_1"]
    sv = _start(res, 0, 0)
    ref = gauss_em(x, *sv, max_iter=10, tol=0.0)
    assert _rel(res.starts.loglik[0], ref["loglik"]) < 1e-9
    assert bulkem.fit([x[:, None]], family="gaussian", n_components=2, n_starts=2, max_iter=10,
                      tol=0.0, seed=1, backend="cpu").starts.equals(res.starts)


def test_bad_datasets_get_their_own_status(backend, tuning):
    good = _data(30, 2, 3)
    nan = good.copy()
    nan[4, 1] = np.nan
    data = {"ok": good, "nan": nan, "short": good[:5], "empty": np.empty((0, 2))}
    with pytest.warns(UserWarning, match="3 of 4 datasets are invalid"):
        res = bulkem.fit(data, family="gaussian", n_components=2, n_starts=1, max_iter=3,
                         seed=1, backend=backend, tuning=tuning)
    s = res.summary.set_index("dataset")
    assert s.status["ok"] != "invalid_data"
    assert s.status[["nan", "short", "empty"]].eq("invalid_data").all()
    assert "1 of 30 observations has NaN or infinite" in s.message["nan"]
    assert "too short: 5 values, at least 6" in s.message["short"]
    with pytest.raises(ValueError, match="invalid dataset"):
        bulkem.fit(data, family="gaussian", n_components=2, strict=True, backend=backend,
                   tuning=tuning)


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        (dict(reg_covar=-1.0), ValueError, "reg_covar must be a finite number >= 0"),
        (dict(reg_covar=np.inf), ValueError, "reg_covar must be a finite number >= 0"),
        (dict(init_method="kmeans"), ValueError, "unknown init_method 'kmeans'"),
        (dict(family="invgauss", init_method="kmeans++"), ValueError,
         "init_method='kmeans++' is not available for the 'invgauss' family"),
        (dict(init={"weight": [1, 1], "mean": [[0, 0], [1, 1]], "var": [[1, 1], [0, 1]]}),
         ValueError, "init['var'] must be positive"),
        (dict(init={"weight": [1, 1], "mean": [0, 1], "var": [[1, 1], [1, 1]]}),
         ValueError, "init['mean'] has shape (2,); expected (2, 2)"),
        (dict(init={"weight": [1, 1], "mu": [0, 1], "lambda": [1, 1]}), ValueError,
         "init has keys"),
    ],
)
def test_bad_arguments_raise_at_once(kwargs, exc, words):
    kw = {"family": "gaussian", "n_components": 2, "backend": "cpu", **kwargs}
    if kw["family"] == "invgauss":
        data = demo(1, 30, 1)
    else:
        data = [_data(30, 2, 1)]
    with pytest.raises(exc, match=re.escape(words)):
        bulkem.fit(data, **kw)


def test_datasets_must_share_dimensions():
    with pytest.raises(ValueError, match="dataset 1 has 3 dimensions but dataset 0 has 2"):
        bulkem.fit([_data(30, 2, 1), _data(30, 3, 1)], family="gaussian", backend="cpu")


def test_kmeanspp_reproducible_and_independent_of_batch_order(seed):
    data = [_data(50 + 5 * k, 2, seed + k, n_comp=3) for k in range(4)]
    kw = dict(family="gaussian", n_components=3, n_starts=4, max_iter=5, seed=seed,
              backend="cpu")
    base = bulkem.fit(data, **kw)
    assert base.start_values.equals(bulkem.fit(data, **kw).start_values)
    rev = bulkem.fit(data[::-1], **kw)
    cols = [c for c in base.start_values.columns if c != "dataset"]
    for k in range(4):
        a = base.start_values[base.start_values.dataset == k][cols].to_numpy()
        b = rev.start_values[rev.start_values.dataset == 3 - k][cols].to_numpy()
        assert np.array_equal(a, b)
    other = bulkem.fit(data, **{**kw, "seed": seed + 1})
    assert not other.start_values.equals(base.start_values)
    # means are observations, weights equal, the starts of a dataset differ
    for k, x in enumerate(data):
        sv = base.start_values[base.start_values.dataset == k]
        means = sv[["mean_1", "mean_2"]].to_numpy()
        assert all((x == m).all(axis=1).any() for m in means)
        assert np.allclose(sv.weight, 1 / 3)
        assert (sv[["var_1", "var_2"]].to_numpy() > 0).all()
        assert len({tuple(np.sort(g.mean_1)) for _, g in sv.groupby("start")}) > 1
    # k-means++ is the Gaussian default; subset starts are available
    sub = bulkem.fit(data, init_method="subset", **kw)
    assert not sub.start_values.equals(base.start_values)


def test_kmeanspp_spreads_the_centres():
    """Three far-apart clumps: k-means++ puts one centre in each (with high probability)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 0.1, (30, 2)) for c in (0.0, 50.0, 100.0)])
    res = bulkem.fit([x], family="gaussian", n_components=3, n_starts=10, max_iter=1, seed=2,
                     backend="cpu")
    clumps = np.round(res.start_values[["mean_1"]].to_numpy() / 50).astype(int)
    per_start = clumps.reshape(10, 3)
    assert np.mean([len(set(s)) == 3 for s in per_start]) >= 0.8


def test_kmeanspp_of_a_large_dataset_works_on_a_sample():
    """Beyond Tuning.kmeans_sample_obs observations the seeding uses a drawn sample.

    Datasets up to the sample size keep their starts; a larger one gets
    centres among its observations, the same alone and in a batch, and the
    far-apart clumps are still found.
    """
    rng = np.random.default_rng(4)
    big = np.concatenate([rng.normal(c, 0.1, (100, 2)) for c in (0.0, 50.0, 100.0)])
    small = _data(40, 2, 5, n_comp=3)
    kw = dict(family="gaussian", n_components=3, n_starts=6, max_iter=1, seed=3, backend="cpu")
    full = bulkem.fit([small, big], **kw).start_values
    kw["tuning"] = Tuning(kmeans_sample_obs=60, kmeans_sample_per_component=2)
    both = bulkem.fit([small, big], **kw).start_values
    cols = [c for c in both.columns if c != "dataset"]
    assert both[both.dataset == 0].equals(full[full.dataset == 0])  # 40 <= 60: all rows
    sampled = both[both.dataset == 1][cols].to_numpy()
    assert not np.array_equal(sampled, full[full.dataset == 1][cols].to_numpy())
    alone = bulkem.fit([big], **kw).start_values
    assert np.array_equal(alone[cols].to_numpy(), sampled)
    means = both[both.dataset == 1][["mean_1", "mean_2"]].to_numpy()
    assert all((big == m).all(axis=1).any() for m in means)
    clumps = np.round(means[:, 0] / 50).astype(int).reshape(6, 3)
    assert np.mean([len(set(s)) == 3 for s in clumps]) >= 0.8
    kw["tuning"] = Tuning(kmeans_sample_obs=10**12)  # (no allocation of that size)
    assert bulkem.fit([small, big], **kw).start_values.equals(full)


def test_tables_and_params_shapes():
    x = _data(80, 2, 8, n_comp=3)  # M = 3 x D = 2: a transposed shape shows (the (3, 2) kernel)
    res = bulkem.fit({"a": x}, family="gaussian", n_components=3, n_starts=3, seed=1,
                     backend="cpu")
    means = [f"mean_{d}" for d in (1, 2)]
    vars_ = [f"var_{d}" for d in (1, 2)]
    assert list(res.components.columns) == ["dataset", "component", "weight", *means, *vars_]
    assert list(res.start_values.columns) == ["dataset", "start", "component", "weight",
                                              *means, *vars_]
    assert np.all(np.diff(res.components.mean_1) > 0)
    p = res.params("a")
    assert p["weight"].shape == (3,) and p["mean"].shape == (3, 2) and p["var"].shape == (3, 2)
    k = 3 * (1 + 2 * 2) - 1
    s = res.summary.iloc[0]
    assert np.isclose(s.aic, -2 * s.loglik + 2 * k)
    again = bulkem.fit({"a": x}, family="gaussian", n_components=3, n_starts=1, init=p,
                       max_iter=1, tol=0.0, backend="cpu")
    assert again.summary.loglik[0] >= s.loglik - 1e-9 * abs(s.loglik)


def test_score_samples_predict_proba_predict_against_the_oracle():
    x = _data(120, 2, 9, n_comp=2)
    res = bulkem.fit([x], family="gaussian", n_components=2, n_starts=3, seed=1, backend="cpu")
    p = res.params(0)
    pts = np.array([[0.0, 0.0], [3.0, -2.0], [-5.0, 4.0], [10.0, 10.0]])
    want = gauss_mix_logpdf(pts, p["weight"], p["mean"], p["var"])
    assert np.allclose(res.score_samples(0, pts), want, rtol=1e-12)
    assert np.allclose(res.density(0, pts), np.exp(want), rtol=1e-12)
    assert _rel(res.score_samples(0, x).sum(), res.summary.loglik[0]) < 1e-12
    comp = np.log(p["weight"]) + gauss_logpdf(pts, p["mean"], p["var"])
    proba = np.exp(comp - comp.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    assert np.allclose(res.predict_proba(0, pts), proba, rtol=1e-10, atol=1e-300)
    assert np.array_equal(res.predict(0, pts), np.argmax(comp, axis=1) + 1)
    with pytest.raises(ValueError, match=re.escape("expected (n, 2)")):
        res.score_samples(0, [1.0, 2.0, 3.0])


def test_score_samples_generic_over_families():
    data = demo(1, 200, 3)
    res = bulkem.fit(data, n_starts=3, seed=1, backend="cpu")
    p = res.params(0)
    pts = np.array([0.3, 1.0, 2.5, 6.0])
    comp = np.log(p["weight"]) + ig_logpdf(pts[:, None], p["mu"][None], p["lambda"][None])
    assert np.allclose(res.score_samples(0, pts), np.log(np.exp(comp).sum(axis=1)), rtol=1e-10)
    assert np.allclose(res.predict_proba(0, pts).sum(axis=1), 1.0)
    assert np.array_equal(res.predict(0, pts), np.argmax(comp, axis=1) + 1)


def test_regime_choice():
    fam = models.get("gaussian")
    tuning = Tuning(large_min_obs=1000, large_max_fits_cuda=8)

    def job(n_fits, n_obs, M=3, D=4, dtype=np.float32):
        return SimpleNamespace(model=models.MixtureModel(fam, M, D), dtype=np.dtype(dtype),
                               fit_ds=np.zeros(n_fits, np.int64), tuning=tuning,
                               data=Ragged.flat(np.zeros(n_obs), np.array([0, n_obs])))

    assert select.use_large(job(1, 1000), "cuda")
    assert not select.use_large(job(1, 999), "cuda")
    assert select.use_large(job(8, 10**6), "cuda")
    assert not select.use_large(job(9, 10**6), "cuda")
    # coefficients beyond shared memory: the tiles read them from global memory
    assert select.use_large(job(1, 10**6, M=64, D=64, dtype=np.float64), "cuda")
    threads = numba.get_num_threads()
    assert select.use_large(job(threads - 1, 10**6), "cpu") == (threads > 1)
    assert not select.use_large(job(threads, 10**6), "cpu")
    assert not select.use_large(job(0, 10**6), "cpu")


def test_tiled_estep_gives_the_bits_of_one_observation_at_a_time(seed):
    """Tuning.cpu_tile_obs changes the loops' shape only: the same fits, bit for bit.

    The default tile (the other tests' kernels) against none, for the Gaussian
    family in D = 2, which has its own ``logdens_tile`` and ``accum_tile`` with a loop
    over the dimensions.  (The inverse-Gaussian family's tiles, its own ``accum_tile`` and
    the generic tile of its ``logdens``, are left out: their untiled kernel cost the test
    command ~35 s; its oracle tests check those tiles' fits to 1e-9.)  Blocks of 100
    observations (a run-time value) end inside tiles of 64, so a tile holds the end of one
    block and the start of the next (the 300-observation datasets).
    """
    blocks = {"float64": 100, "float32": 100}
    cases = [("gaussian", 3, [_data(300, 2, seed, n_comp=3), _data(41, 2, seed + 1, n_comp=3)])]
    for family, n_components, x in cases:
        kw = dict(family=family, n_components=n_components, n_starts=3, max_iter=30, seed=seed,
                  backend="cpu")
        fits = [bulkem.fit(x, tuning=Tuning(cpu_tile_obs=tile, estep_block_obs=blocks), **kw)
                for tile in (0, Tuning().cpu_tile_obs)]
        assert fits[1].starts.equals(fits[0].starts), family
        assert fits[1].components.equals(fits[0].components), family


def test_block_sizes_are_run_time_values_that_compile_no_kernel():
    """The E-step's blocks and the exact pass's threshold (mixtures) and the chain's blocks of
    units (HMM, TMAP) are read at run time: a tuning that changes only them keys the same
    kernels."""
    other = Tuning(estep_block_obs={"float64": 7, "float32": 5}, wide_cpu_chunk_units=3,
                   exact_rtol={"float64": 0.0, "float32": 0.0})
    assert other.key() == Tuning().key() and other.key("cuda") == Tuning().key("cuda")


def test_run_time_sizes_share_one_cpu_kernel_and_give_the_compiled_bits(seed):
    """With ``Tuning(cpu_sizes="run-time")`` one CPU kernel per family, dtype and regime
    serves every number of components and dimensions (read from the batch tuple): the
    fits of M = 2, D = 2 are those of the kernel with the sizes compiled in (the
    default for users; the test command runs the other tests with run-time sizes,
    ``BULKEM_CPU_SIZES``), bit for bit, and a fit of M = 3 after them in the same kernel
    is the fit the oracle gives.  (The bulk regime only: the large regime reads its sizes
    from the same batch tuple, and its own run-time kernel would cost the test command
    ~25 s.)"""
    from bulkem.engines.cpu import bulk

    run_time = Tuning(cpu_sizes="run-time")
    compiled = Tuning(cpu_sizes="compiled")
    keys = {models.MixtureModel(gaussian.FAMILY, m, d, run_time).cpu_key
            for m, d in [(1, 1), (2, 2), (3, 1)]}
    assert len(keys) == 1
    assert models.MixtureModel(gaussian.FAMILY, 2, 2, compiled).cpu_key != keys.pop()
    x = [_data(200, 2, seed, n_comp=3)]
    kw = dict(family="gaussian", n_starts=2, max_iter=6, tol=0.0, seed=seed, backend="cpu")
    two = [bulkem.fit(x, n_components=2, tuning=t.replace(strategy="bulk"), **kw)
           for t in (compiled, run_time)]
    assert two[1].starts.equals(two[0].starts) and two[1].components.equals(two[0].components)
    before = set(bulk._runners)
    res = bulkem.fit(x, n_components=3, tuning=run_time.replace(strategy="bulk"), **kw)
    assert set(bulk._runners) == before  # (M = 3: the kernel of M = 2)
    for row in res.starts.itertuples():
        ref = gauss_em(x[0], *_start(res, 0, row.start), max_iter=6, tol=0.0)
        assert row.n_iter == ref["n_iter"] and _rel(row.loglik, ref["loglik"]) < 1e-9


def test_the_environment_sets_the_default_cpu_sizes(monkeypatch):
    """``BULKEM_CPU_SIZES`` gives the default of ``Tuning.cpu_sizes``; a bad value raises."""
    monkeypatch.setenv("BULKEM_CPU_SIZES", "run-time")
    assert Tuning().cpu_sizes == "run-time"
    monkeypatch.setenv("BULKEM_CPU_SIZES", "compiled")
    assert Tuning().cpu_sizes == "compiled"
    monkeypatch.setenv("BULKEM_CPU_SIZES", "fast")
    with pytest.raises(ValueError, match="BULKEM_CPU_SIZES"):
        Tuning()


def test_large_cpu_regime_gives_the_bits_of_the_bulk_engine(seed):
    """One canonical order: blocks of estep_block_obs added in order, in both regimes (and
    the float32 fits near the float64 ones).

    The default blocks and the other tests' kernels (M = 3, D = 2 in float64; M = 2, D = 1
    in both dtypes): 600 observations are two full float64 blocks of 256 and a part, and
    four full float32 blocks and a part (127 observations a block with M = 2).
    """
    default = Tuning()
    cases = [("float64", 3, _data(600, 2, seed, n_comp=3))]
    cases += [(dtype, 2, _data(600, 1, seed)) for dtype in ("float64", "float32")]
    logliks = []
    for dtype, n_components, x in cases:
        kw = dict(family="gaussian", n_components=n_components, n_starts=2, max_iter=15,
                  tol=0.0, seed=seed, backend="cpu", dtype=dtype)
        bulk = bulkem.fit([x], tuning=default.replace(strategy="bulk"), **kw)
        large = bulkem.fit([x], tuning=default.replace(strategy="large"), **kw)
        assert large.starts.equals(bulk.starts), dtype
        assert large.components.equals(bulk.components), dtype
        logliks.append(bulk.starts.loglik)
        n = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            assert bulkem.fit([x], tuning=default.replace(strategy="large"), **kw).starts.equals(
                bulk.starts), dtype
        finally:
            numba.set_num_threads(n)
    assert np.max(_rel(logliks[2], logliks[1])) < 1e-4
