"""Covariance types (issue 34, item 1): ``fit(family="gaussian", covariance_type="full")``
and ``"spherical"`` against scikit-learn's ``GaussianMixture`` of the same type iteration by
iteration, on both engines and regimes; EM's properties; bad data; the result methods
against SciPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import SMALL_LARGE
from scipy import stats

import bulkem
from bulkem.tuning import Tuning

sklearn_mixture = pytest.importorskip("sklearn.mixture")

# Iteration by iteration against plain EM (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

COVS = [np.array([[1.0, 0.8, 0.1], [0.8, 1.0, 0.0], [0.1, 0.0, 0.5]]),
        np.array([[0.5, -0.3, 0.0], [-0.3, 0.8, 0.2], [0.0, 0.2, 0.4]])]
MEANS = [np.zeros(3), np.array([4.0, 1.0, -2.0])]


def _data(n, D, seed):
    rng = np.random.default_rng(seed)
    k = n * 3 // 5
    return np.r_[rng.multivariate_normal(MEANS[0][:D], COVS[0][:D, :D], k),
                 rng.multivariate_normal(MEANS[1][:D], COVS[1][:D, :D], n - k)]


def _full(packed, D):
    """(M, T) packed lower triangles -> (M, D, D)."""
    lo = np.tril_indices(D)
    out = np.zeros((len(packed), D, D))
    out[:, lo[0], lo[1]] = packed
    return out + np.swapaxes(np.tril(out, -1), 1, 2)


def _start(res, d, s, D):
    sv = res.start_values[(res.start_values.dataset == d) & (res.start_values.start == s)]
    tri = [f"cov_{p + 1}_{q + 1}" for p in range(D) for q in range(p + 1)]
    return (sv.weight.to_numpy(), sv[[f"mean_{p + 1}" for p in range(D)]].to_numpy(),
            _full(sv[tri].to_numpy(), D))


@pytest.fixture(params=["bulk", "large"])
def regime(request, tuning, backend):
    if backend == "cpu" and request.param == "large":
        pytest.skip("the CPU's large regime runs the bulk engine's hooks (its own code is "
                    "tested with the diagonal Gaussian, inverse Gaussian and weighted "
                    "families): a kernel of its own would cost the test command ~45 s")
    return tuning.replace(strategy=request.param,
                          **(SMALL_LARGE if request.param == "large" else {}))


@pytest.mark.parametrize("D", [3])  # (the triangle's order needs D > 2; one size: one compile)
def test_k_iterations_equal_scikit_learn(backend, regime, D, seed):
    X = [_data(50, D, seed), _data(40, D, seed + 1)]
    k = 6
    res = bulkem.fit(X, family="gaussian", covariance_type="full", n_components=2,
                     n_starts=2, max_iter=k, tol=0.0, seed=seed, backend=backend, tuning=regime)
    for row in res.starts.itertuples():
        w, mu, cov = _start(res, row.dataset, row.start, D)
        gm = sklearn_mixture.GaussianMixture(2, covariance_type="full", weights_init=w,
                                             means_init=mu,
                                             precisions_init=np.linalg.inv(cov), max_iter=k,
                                             tol=0.0, reg_covar=1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (no convergence in k iterations)
            gm.fit(X[row.dataset])
        ref = gm.score(X[row.dataset]) * len(X[row.dataset])
        assert row.n_iter == k and abs(row.loglik - ref) < 1e-8 * abs(ref), (row.loglik, ref)
    for s in res.summary.itertuples():
        w, mu, cov = _start(res, s.dataset, s.best_start, D)
        gm = sklearn_mixture.GaussianMixture(2, covariance_type="full", weights_init=w,
                                             means_init=mu,
                                             precisions_init=np.linalg.inv(cov), max_iter=k,
                                             tol=0.0, reg_covar=1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gm.fit(X[s.dataset])
        order = np.argsort(gm.means_[:, 0])
        got = res.params(s.dataset)
        assert np.allclose(got["mean"], gm.means_[order], rtol=1e-7, atol=1e-9)
        assert np.allclose(_full(got["cov"], D), gm.covariances_[order], rtol=1e-7, atol=1e-9)


def test_loglik_never_decreases_and_a_fit_from_the_truth_stays(seed):
    X = _data(400, 3, seed)
    res = bulkem.fit([X], family="gaussian", covariance_type="full", n_components=2,
                     n_starts=2, max_iter=40, tol=0.0, seed=seed, backend="cpu", trace=True)
    step = res.trace.groupby("start").loglik.diff().dropna()
    assert (step >= -1e-10 * res.trace.loglik.abs().max()).all()
    big = _data(20_000, 3, seed)
    tri = np.tril_indices(3)
    init = {"weight": np.array([0.6, 0.4]), "mean": np.array(MEANS),
            "cov": np.array([c[tri] for c in COVS])}
    res = bulkem.fit([big], family="gaussian", covariance_type="full", n_components=2,
                     n_starts=1, init={k: v[None] for k, v in init.items()}, max_iter=500,
                     tol=1e-9, backend="cpu",
                     tuning=Tuning(strategy="bulk"))  # (the large regime: its own kernel)
    got = res.params(0)
    assert res.summary.status[0] == "converged"
    assert np.allclose(got["weight"], init["weight"], atol=0.02)
    assert np.allclose(got["cov"], init["cov"], atol=0.05)


def test_collinear_data_fail_alone_and_the_methods_match_scipy():
    rng = np.random.default_rng(3)
    t = rng.normal(size=60)
    flat = np.c_[t, 2 * t, -t]  # every point on a line: no positive-definite covariance
    good = _data(300, 3, 4)  # (D = 3: the other tests' kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bulkem.fit([good, flat], family="gaussian", covariance_type="full",
                         n_components=2, n_starts=3, seed=1, backend="cpu", reg_covar=0.0)
    assert res.summary.status[1] == "failed" and res.summary.status[0] == "converged"
    alone = bulkem.fit([good], family="gaussian", covariance_type="full", n_components=2,
                       n_starts=3, seed=1, backend="cpu", reg_covar=0.0)
    assert res.summary.loglik[0] == alone.summary.loglik[0]
    p = res.params(0)
    cov = _full(p["cov"], 3)
    lp = np.log(p["weight"]) + np.stack(
        [stats.multivariate_normal(p["mean"][m], cov[m]).logpdf(good) for m in range(2)], 1)
    assert np.allclose(res.score_samples(0, good), np.logaddexp.reduce(lp, axis=1), rtol=1e-10)
    z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
    assert np.allclose(res.predict_proba(0, good), z, atol=1e-12)
    draws = res.sample(0, 5000, seed=2)
    draws = draws[0] if isinstance(draws, tuple) else draws
    assert draws.shape == (5000, 3) and abs(np.corrcoef(draws.T)[0, 1]
                                            - np.corrcoef(good.T)[0, 1]) < 0.05
    assert list(res.components.columns[-3:]) == ["cov_3_1", "cov_3_2", "cov_3_3"]


@pytest.mark.parametrize("D", [3])
def test_spherical_k_iterations_equal_scikit_learn(backend, regime, D, seed):
    X = [_data(50, D, seed), _data(40, D, seed + 1)]
    k = 6
    res = bulkem.fit(X, family="gaussian", covariance_type="spherical", n_components=2,
                     n_starts=2, max_iter=k, tol=0.0, seed=seed, backend=backend, tuning=regime)
    assert list(res.components.columns[-2:]) == [f"mean_{D}", "var"]
    for row in res.starts.itertuples():
        sv = res.start_values[(res.start_values.dataset == row.dataset)
                              & (res.start_values.start == row.start)]
        gm = sklearn_mixture.GaussianMixture(
            2, covariance_type="spherical", weights_init=sv.weight.to_numpy(),
            means_init=sv[[f"mean_{p + 1}" for p in range(D)]].to_numpy(),
            precisions_init=1.0 / sv["var"].to_numpy(), max_iter=k, tol=0.0, reg_covar=1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gm.fit(X[row.dataset])
        ref = gm.score(X[row.dataset]) * len(X[row.dataset])
        assert row.n_iter == k and abs(row.loglik - ref) < 1e-8 * abs(ref), (row.loglik, ref)
        if row.start == res.summary.best_start[row.dataset]:
            got = res.params(row.dataset)
            order = np.argsort(gm.means_[:, 0])
            assert np.allclose(got["var"], gm.covariances_[order], rtol=1e-7)


def test_covariance_type_is_checked():
    X = [_data(50, 2, 1)]
    with pytest.raises(ValueError, match="covariance_type='banana': expected one of 'diag', "
                                         "'full', 'tied', 'spherical'"):
        bulkem.fit(X, family="gaussian", covariance_type="banana", backend="cpu")
    with pytest.raises(TypeError, match="covariance_type"):
        bulkem.fit([np.ones(10)], family="invgauss", covariance_type="full", backend="cpu")


# The GPU's tiled kernel reading the coefficients and the reduction's statistics from global
# memory, as for D = M = 32 (here shared memory is made too small for them); one warp per
# block, as the simulator runs a Python thread per CUDA thread
GLOBAL_LARGE = dict(SMALL_LARGE, large_cuda_shared_bytes=400,
                    large_cuda_threads_global={"float64": 32, "float32": 32})


def test_the_gpu_tiles_read_a_big_model_from_global_memory():
    """D = M = 32 (17,952 coefficients, 143 KiB in float64) leaves no shared memory for a
    tile: the large regime's kernels read the coefficients and statistics from global
    memory; a small model keeps them in shared memory; GLOBAL_LARGE forces the first."""
    from bulkem.engines.cuda.large import plan
    from bulkem.models.mixture.gaussian_full import FAMILY

    big = plan(FAMILY, 32, 32, np.float64, Tuning())
    assert (big["coef_shared"], big["stats_shared"], big["tile"]) == (False, False, 8)
    assert big["threads"] == 256 and plan(FAMILY, 32, 32, np.float32, Tuning())["threads"] == 128
    small = plan(FAMILY, 2, 3, np.float64, Tuning())
    assert small["coef_shared"] and small["stats_shared"] and small["tile"] == 64
    forced = plan(FAMILY, 2, 3, np.float64, Tuning(**GLOBAL_LARGE))
    assert not forced["coef_shared"] and not forced["stats_shared"] and forced["tile"] >= 1


@pytest.mark.cuda
def test_global_memory_tiles_fit_as_the_cpu_engine(seed):

    X = [_data(30, 3, seed)]
    kw = dict(family="gaussian", covariance_type="full", n_components=2, n_starts=2,
              max_iter=4, tol=0.0, seed=seed)
    gpu = bulkem.fit(X, backend="cuda", tuning=Tuning(strategy="large", **GLOBAL_LARGE), **kw)
    cpu = bulkem.fit(X, backend="cpu", **kw)
    assert (gpu.starts.n_iter == 4).all()
    assert np.allclose(gpu.starts.loglik, cpu.starts.loglik, rtol=1e-10, atol=0)
    for name, v in cpu.params(0).items():
        assert np.allclose(gpu.params(0)[name], v, rtol=1e-8, atol=1e-10), name


@pytest.mark.cuda
def test_a_fit_too_big_for_a_gpu_thread_says_so():
    """D = 32, M = 32: 17,952 parameters a fit, beyond a GPU thread's local memory."""
    X = [np.random.default_rng(0).normal(size=(100, 32))]
    with pytest.raises(ValueError, match="local memory per GPU thread.*backend='cpu'"):
        bulkem.fit(X, family="gaussian", covariance_type="full", n_components=32, n_starts=1,
                   max_iter=1, backend="cuda")
