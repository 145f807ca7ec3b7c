"""Issue 18: the numbers a user meets are exact and the same everywhere.

Regression cases of the issue: a component on one point far from the rest
(the linear form of the log densities cancels), a sharp inverse-Gaussian
component, float32 fits of the one-large-dataset regime, result methods at
extreme values, and arguments whose errors must name them.  CUDA runs under
the simulator unless BULKEM_TEST_REAL_GPU=1.
"""

from __future__ import annotations

import re
import warnings

import numba
import numpy as np
import pytest
from conftest import SMALL_LARGE, demo
from reference import gauss_em, gauss_mix_logpdf, ig_em, ig_logpdf
from scipy.special import logsumexp

import bulkem
from bulkem.tuning import Tuning

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

# The first example: one value at 0, eight near -1e6.
FAR = np.array([0.0, -1.2e6, -0.8e6, -1.1e6, -0.9e6, -1.3e6, -1.0e6, -0.7e6, -1.05e6])[:, None]


def _rel(a, b):
    return np.abs(np.asarray(a, float) - np.asarray(b, float)) / np.abs(np.asarray(b, float))


@pytest.fixture(params=["bulk", "large"])
def regime(request, tuning):
    """A tuning that forces a regime, the large one with blocks, tiles and grids small enough
    for tiny data (the bulk one as it is: its kernels are the other tests')."""
    return tuning.replace(strategy=request.param,
                          **(SMALL_LARGE if request.param == "large" else {}))


def _check_logliks(res, data):
    """Every start's log-likelihood is the mixture density of its parameters, summed exactly."""
    for s in res.summary.itertuples():
        if s.status in ("failed", "invalid_data"):
            continue
        x = data[s.dataset]
        scores = res.score_samples(s.dataset, x)
        assert abs(s.loglik - scores.sum()) <= 1e-9 * np.abs(scores).sum(), s.dataset


def test_component_on_one_far_point(backend, regime):
    """The issue's case: the reported log-likelihood was -8.27 against a true -105.65."""
    n_starts = 5 if backend == "cpu" else 2
    res = bulkem.fit([FAR], family="gaussian", n_components=2, n_starts=n_starts, seed=1,
                     backend=backend, tuning=regime)
    _check_logliks(res, [FAR])
    # every start's log-likelihood against the oracle from its start
    for row in res.starts.itertuples():
        sv = res.start_values[res.start_values.start == row.start]
        ref = gauss_em(FAR, sv.weight, sv[["mean_1"]].to_numpy(), sv[["var_1"]].to_numpy())
        assert row.status == ref["status"], row.start
        assert row.n_iter == ref["n_iter"], row.start
        assert _rel(row.loglik, ref["loglik"]) < 1e-9, row.start
    if backend == "cpu":
        assert res.summary.status[0] == "converged"
        assert abs(res.summary.loglik[0] + 105.64776453795871) < 1e-9
        # a component on one point, its variance held at reg_covar, is a fit
        assert np.isclose(res.params(0)["var"].min(), 1e-6)


def test_the_first_example_from_a_sharp_start_in_every_dtype(backend, regime):
    init = {"weight": [8 / 9, 1 / 9], "mean": [[-1e6], [0.0]], "var": [[3.5e10], [1e-6]]}
    ref = gauss_em(FAR, init["weight"], init["mean"], init["var"], max_iter=4, tol=0.0)
    for dtype, rtol in (("float64", 1e-9), ("float32", 1e-5)):
        res = bulkem.fit([FAR], family="gaussian", n_components=2, n_starts=1, init=init,
                         max_iter=4, tol=0.0, backend=backend, tuning=regime, dtype=dtype)
        assert res.starts.status[0] == ref["status"], dtype
        assert _rel(res.starts.loglik[0], ref["loglik"]) < rtol, dtype
        _check_logliks(res, [FAR])  # float32: a float64 E-step at the returned parameters


def test_sharp_inverse_gaussian_component(backend, regime):
    """lambda / mu ~ 1e6 at mu = 1000: the linear terms reach ~5e8 per observation."""
    rng = np.random.default_rng(4)
    x = np.concatenate([demo(1, 40, 3)[0], 1000.0 + rng.standard_normal(8)])
    init = {"weight": [0.8, 0.2], "mu": [2.0, 1000.0], "lambda": [1.0, 1e9]}
    res = bulkem.fit([x], n_starts=1, init=init, max_iter=5, tol=0.0, backend=backend,
                     tuning=regime)
    ref = ig_em(x, init["weight"], init["mu"], init["lambda"], max_iter=5, tol=0.0)
    assert res.starts.status[0] == ref["status"]
    assert _rel(res.starts.loglik[0], ref["loglik"]) < 1e-9
    _check_logliks(res, [x])


def test_exact_and_linear_passes_agree_on_ordinary_data(backend, tuning, seed):
    """Forcing the exact pass everywhere moves ordinary fits by rounding only."""
    data = demo(2, 60, seed)
    kw = dict(n_starts=2, max_iter=10, tol=0.0, seed=seed, backend=backend, tuning=tuning)
    usual = bulkem.fit(data, **kw)
    exact = bulkem.fit(data, **{**kw, "tuning": tuning.replace(
        exact_rtol={**tuning.exact_rtol, "float64": 0.0})})
    assert np.max(_rel(exact.starts.loglik, usual.starts.loglik)) < 1e-12


def test_float32_fit_that_gives_up_in_the_large_regime_is_the_float64_fit(
        backend, regime, seed):
    """As in the bulk engines: refitted in float64 from its start (issue 18, item 4)."""
    # every float32 fit gives up; the bulk kernel refits with as many lanes as a float64
    # batch (None), not more: the same sums, so the same bits (with more lanes, rounding
    # apart: 1e-8 in these parameters)
    regime = regime.replace(decrease_rtol={**regime.decrease_rtol, "float32": -1.0},
                            cuda_lanes_per_refit=None)
    x = [np.concatenate([np.random.default_rng(seed).normal(0, 1, (30, 1)),
                         np.random.default_rng(seed + 1).normal(4, 1, (30, 1))])]
    kw = dict(family="gaussian", n_components=2, n_starts=2, max_iter=6, tol=0.0, seed=seed,
              backend=backend, tuning=regime)
    r64 = bulkem.fit(x, **kw)
    r32 = bulkem.fit(x, dtype="float32", **kw)
    assert r32.starts.equals(r64.starts)
    assert r32.components.equals(r64.components)


def test_float32_component_on_one_point_is_a_fit(backend, regime):
    """float32 statistics cannot resolve the variance of a component on one point far from
    the origin (it comes out <= 0): such a start is refitted in float64, where reg_covar
    keeps it a fit (issue 18, item 4: every start of the large regime ended 'failed')."""
    x = np.concatenate([np.random.default_rng(1).normal(0, 1, (39, 1)), [[37.3]]])
    init = {"weight": [0.5, 0.5], "mean": [[0.0], [37.3]], "var": [[1.0], [0.5]]}
    kw = dict(family="gaussian", n_components=2, n_starts=1, init=init, max_iter=8, tol=0.0,
              backend=backend, tuning=regime)
    r64 = bulkem.fit([x], **kw)
    r32 = bulkem.fit([x], dtype="float32", **kw)
    assert r64.starts.status[0] == "max_iter"
    assert r32.starts.status[0] == "max_iter"
    _check_logliks(r32, [x])


def test_same_bits_alone_beside_others_and_with_any_threads():
    """The issue's second case: a dataset big enough for the large regime gave other bits
    alone on 2 threads than beside a small dataset or on 1 thread.  The default blocks (12
    of float64, 24 of float32 in 3,000 values).  The Gaussian family, whose kernels of
    both regimes and dtypes the other tests compile (the large regime's code is the
    families')."""
    tuning = Tuning(large_min_obs=500)
    big, small = demo(1, 3000, 5)[0], demo(1, 100, 6)[0]
    n = numba.get_num_threads()
    for dtype in ("float64", "float32"):
        kw = dict(family="gaussian", n_components=2, n_starts=1, seed=3, backend="cpu",
                  max_iter=40, dtype=dtype, tuning=tuning)
        numba.set_num_threads(max(n, 2))
        try:
            alone = bulkem.fit([big], **kw)  # 1 fit < 2 threads: the large regime
            beside = bulkem.fit([big, small], **kw)
            numba.set_num_threads(1)
            single = bulkem.fit([big], **kw)
        finally:
            numba.set_num_threads(n)
        assert alone.starts.loglik[0] == beside.starts.loglik[0] == single.starts.loglik[0]
        for key in alone.params(0):
            assert np.array_equal(alone.params(0)[key], beside.params(0)[key]), key
            assert np.array_equal(alone.params(0)[key], single.params(0)[key]), key


# --- result methods at extreme values (issue 18, item 3) -------------------------------------


def test_result_methods_in_log_space_invgauss():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bulkem.fit([np.array([6000.23, 279.89, 1e300, 5.0, 7.0, 9.0])], n_components=2,
                         n_starts=3, max_iter=1, seed=1, backend="cpu")
    grid = np.array([1e-300, 1e-5, 1.0, 300.0, 6000.0, 1e50, 1e102, 1e103, 1e200, 1e300,
                     1.7e308])
    assert res.params(0)["mu"].max() > 1e290  # the extreme parameter of the issue
    s = res.score_samples(0, grid)
    assert np.all(np.isfinite(s))
    dens = res.density(0, grid)
    assert np.all(np.isfinite(dens)) and np.all(dens >= 0)
    p = res.predict_proba(0, grid)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=1), 1.0)
    assert np.array_equal(res.predict(0, grid), np.argmax(p, axis=1) + 1)
    # where the old formula is finite, the same numbers
    w, mu, lam = (res.params(0)[k] for k in ("weight", "mu", "lambda"))
    comp = np.log(w) + ig_logpdf(grid[2:5, None], mu[None], lam[None])
    assert np.allclose(s[2:5], logsumexp(comp, axis=1), rtol=1e-12)


def test_result_methods_in_log_space_gaussian():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, (50, 2)), rng.normal(5, 1, (50, 2))])
    res = bulkem.fit([x], family="gaussian", n_components=2, n_starts=3, seed=1,
                     backend="cpu")
    pts = np.array([[0, 0], [1e150, 0], [1e155, 1e155], [-1e300, 1e300],
                    [1.7e308, -1.7e308], [6, 6], [-1e160, -1e160]])
    s = res.score_samples(0, pts)
    assert np.all(np.isfinite(s)) and np.all(s[1:5] < -1e290)
    assert np.all(res.density(0, pts)[1:5] == 0)
    p = res.predict_proba(0, pts)
    assert np.all(np.isfinite(p)) and np.allclose(p.sum(axis=1), 1.0)
    assert np.array_equal(res.predict(0, pts), np.argmax(p, axis=1) + 1)
    prm = res.params(0)
    want = gauss_mix_logpdf(pts[[0, 5]], prm["weight"], prm["mean"], prm["var"])
    assert np.allclose(s[[0, 5]], want, rtol=1e-12)


# --- arguments (issue 18, item 5) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        (dict(family=["invgauss"]), ValueError, "unknown family ['invgauss']"),
        (dict(family=None), ValueError, "(family=)"),
        (dict(dtype=["float32"]), ValueError, "unknown dtype ['float32']"),
        (dict(backend=["cpu"]), ValueError, "unknown backend ['cpu']"),
        (dict(init_method=["subset"]), ValueError, "unknown init_method ['subset']"),
        (dict(strict="yes"), TypeError, "strict must be True or False"),
        (dict(progress="x"), TypeError, "progress must be True, False, None or a callable"),
        (dict(tol=np.inf), ValueError, "tol must be finite"),
        (dict(tol="a"), ValueError, "tol must be a number >= 0"),
        (dict(seed=1.5), TypeError, "seed must be an integer"),
        (dict(n_starts="3"), TypeError, "n_starts must be an integer"),
        (dict(init={"weight": [1, 1], "mu": [1, 2], "lambda": [1, -1]}), ValueError,
         "init['lambda'] must be positive"),
        (dict(init={"weight": [1, 1], "mu": [1, np.nan], "lambda": [1, 1]}), ValueError,
         "init['mu'] holds NaN"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        bulkem.fit(demo(1, 30, 1), **{"backend": "cpu", **kwargs})


def test_numpy_dtypes_are_accepted():
    data = demo(1, 40, 1)
    a = bulkem.fit(data, n_starts=1, max_iter=3, seed=1, backend="cpu", dtype=np.float32)
    b = bulkem.fit(data, n_starts=1, max_iter=3, seed=1, backend="cpu", dtype="float32")
    assert a.dtype == "float32" and a.starts.equals(b.starts)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exp_of_far_terms_is_zero_never_subnormal(dtype):
    """The E-step's exp(-a): accurate where it matters, exactly 0 for the far terms, whose
    subnormal values (and products) cost Intel CPUs a microcode assist per operation."""
    from numba import njit

    from bulkem.kernels.fastmath import EXP_CONSTS, make_math

    exp_neg, _ = make_math(dtype, njit(inline="always"))
    f = njit(lambda a, xc: exp_neg(a, xc))
    xc = np.array(EXP_CONSTS, dtype)
    tiny = np.finfo(dtype).tiny
    cut = 690.0 if dtype == np.float64 else 80.0
    for a in np.linspace(0.0, cut - 0.5, 300).astype(dtype):
        e = f(a, xc)
        assert e >= tiny and abs(e - np.exp(-np.float64(a))) <= 4e-7 * np.exp(-np.float64(a))
    for a in (cut, cut + 20.0, 1e4, np.inf):
        assert f(dtype(a), xc) == 0.0
