"""Tied covariances (issue 34, item 1): ``fit(family="gaussian", covariance_type="tied")``
against scikit-learn's ``GaussianMixture(covariance_type="tied")`` iteration by iteration, on
both engines and regimes (the sizes tests/test_gaussian_full.py compiles: D = 3, M = 2);
EM's properties; the free-parameter count; bad data; starting values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import SMALL_LARGE

import bulkem
from bulkem.tuning import Tuning

sklearn_mixture = pytest.importorskip("sklearn.mixture")

# Iteration by iteration against plain EM (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

COV = np.array([[1.0, 0.8, 0.1], [0.8, 1.0, 0.0], [0.1, 0.0, 0.5]])  # shared by both
MEANS = [np.zeros(3), np.array([3.0, 1.0, -2.0])]
TRI = np.tril_indices(3)
COLS = [f"cov_{p + 1}_{q + 1}" for p in range(3) for q in range(p + 1)]


def _data(n, seed):
    rng = np.random.default_rng(seed)
    k = n * 3 // 5
    return np.r_[rng.multivariate_normal(MEANS[0], COV, k),
                 rng.multivariate_normal(MEANS[1], COV, n - k)]


def _full(packed):
    """(T,) packed lower triangle -> (3, 3)."""
    out = np.zeros((3, 3))
    out[TRI] = packed
    return out + np.tril(out, -1).T


@pytest.fixture(params=["bulk", "large"])
def regime(request, backend, tuning):
    """Both regimes on the GPU (its one-large-dataset engine hands this family to the bulk
    one); the bulk one on the CPU (its one-large-dataset regime is the bulk driver over
    every core, the same M-step: a kernel of its own to compile, ~20 s, for no new path)."""
    if backend == "cpu" and request.param == "large":
        pytest.skip("the CPU's one-large-dataset regime runs the bulk pieces")
    return tuning.replace(strategy=request.param,
                          **(SMALL_LARGE if request.param == "large" else {}))


def test_k_iterations_equal_scikit_learn(backend, regime, seed):
    """Every start's log-likelihood after k iterations, and the best one's parameters (the
    GPU's one-large-dataset engine runs the M-step a component per thread: this family,
    whose M-step pools the components, runs in the bulk regime there)."""
    X = [_data(50, seed), _data(40, seed + 1)]
    k = 6
    res = bulkem.fit(X, family="gaussian", covariance_type="tied", n_components=2,
                     n_starts=2, max_iter=k, tol=0.0, seed=seed, backend=backend, tuning=regime)
    assert list(res.components.columns[-6:]) == COLS
    for row in res.starts.itertuples():
        sv = res.start_values[(res.start_values.dataset == row.dataset)
                              & (res.start_values.start == row.start)]
        cov = sv[COLS].to_numpy()
        assert (cov == cov[0]).all()  # one matrix, in each component's row
        gm = sklearn_mixture.GaussianMixture(
            2, covariance_type="tied", weights_init=sv.weight.to_numpy(),
            means_init=sv[["mean_1", "mean_2", "mean_3"]].to_numpy(),
            precisions_init=np.linalg.inv(_full(cov[0])), max_iter=k, tol=0.0, reg_covar=1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (no convergence in k iterations)
            gm.fit(X[row.dataset])
        ref = gm.score(X[row.dataset]) * len(X[row.dataset])
        assert row.n_iter == k and abs(row.loglik - ref) < 1e-8 * abs(ref), (row.loglik, ref)
        if row.start == res.summary.best_start[row.dataset]:
            got = res.params(row.dataset)
            order = np.argsort(gm.means_[:, 0])
            assert np.allclose(got["mean"], gm.means_[order], rtol=1e-7, atol=1e-9)
            for m in range(2):
                assert np.allclose(_full(got["cov"][m]), gm.covariances_, rtol=1e-7, atol=1e-9)


def test_loglik_never_decreases_a_fit_from_the_truth_stays_and_the_count(seed):
    X = _data(400, seed)
    res = bulkem.fit([X], family="gaussian", covariance_type="tied", n_components=2,
                     n_starts=2, max_iter=40, tol=0.0, seed=seed, backend="cpu", trace=True)
    step = res.trace.groupby("start").loglik.diff().dropna()
    assert (step >= -1e-10 * res.trace.loglik.abs().max()).all()
    # M - 1 weights, M D means, one covariance matrix of D (D + 1) / 2 entries
    s = res.summary.iloc[0]
    assert np.isclose(s.bic, 13 * np.log(400) - 2 * s.loglik, rtol=1e-12)
    assert np.isclose(s.aic, 2 * 13 - 2 * s.loglik, rtol=1e-12)
    big = _data(20_000, seed)
    init = {"weight": np.array([0.6, 0.4]), "mean": np.array(MEANS),
            "cov": np.array([COV[TRI]] * 2)}
    res = bulkem.fit([big], family="gaussian", covariance_type="tied", n_components=2,
                     n_starts=1, init=init, max_iter=500, tol=1e-9, backend="cpu",
                     tuning=Tuning(strategy="bulk"))  # (not the CPU's kernel over every core)
    got = res.params(0)
    assert res.summary.status[0] == "converged"
    assert np.allclose(got["weight"], init["weight"], atol=0.02)
    assert np.allclose(got["mean"], init["mean"], atol=0.05)
    assert np.allclose(got["cov"], init["cov"], atol=0.05) and (got["cov"] == got["cov"][0]).all()
    with pytest.raises(ValueError, match="'cov' is one value shared by every component"):
        bulkem.fit([big], family="gaussian", covariance_type="tied", n_components=2,
                   init=dict(init, cov=np.array([COV[TRI], 2 * COV[TRI]])), backend="cpu")


def test_bad_datasets_get_invalid_data():
    good = _data(30, 3)
    nan = good.copy()
    nan[4, 1] = np.nan
    with pytest.warns(UserWarning, match="2 of 3 datasets are invalid"):
        res = bulkem.fit({"ok": good, "nan": nan, "short": good[:5]}, family="gaussian",
                         covariance_type="tied", n_components=2, n_starts=1, max_iter=3,
                         seed=1, backend="cpu")
    s = res.summary.set_index("dataset")
    assert s.status["ok"] != "invalid_data"
    assert s.status[["nan", "short"]].eq("invalid_data").all()
    assert "1 of 30 observations has NaN or infinite" in s.message["nan"]
    assert "too short: 5 values, at least 6" in s.message["short"]


def test_the_gpu_large_engine_refuses_a_pooled_mstep():
    from bulkem.engines.cuda.large import plan
    from bulkem.models.mixture import GAUSSIAN_FULL, GAUSSIAN_TIED

    assert GAUSSIAN_TIED.coupled_mstep and not GAUSSIAN_FULL.coupled_mstep
    assert plan(GAUSSIAN_TIED, 2, 3, np.float64, Tuning()) is None
    assert plan(GAUSSIAN_FULL, 2, 3, np.float64, Tuning()) is not None


def test_standard_errors_count_the_covariance_once():
    """``se=True`` (the score, the covariance's coordinates taken once) against the inverse
    of a central-difference Hessian of a plain NumPy/SciPy log-likelihood in the same
    coordinates (log(w_1 / w_2), the means, the shared matrix's lower triangle)."""
    from scipy import stats
    from scipy.special import logsumexp

    X = _data(300, 7)
    res = bulkem.fit([X], family="gaussian", covariance_type="tied", n_components=2,
                     n_starts=2, seed=1, tol=1e-12, max_iter=1000, backend="cpu", se=True)
    p = res.params(0)
    assert res.cov(0).shape == (20, 20)  # (every stored parameter: the copies too)

    def loglik(theta):
        w = np.exp([theta[0], 0.0]) / (1.0 + np.exp(theta[0]))
        cov = _full(theta[7:])
        return logsumexp(np.log(w) + np.stack(
            [stats.multivariate_normal(theta[1 + 3 * m:4 + 3 * m], cov).logpdf(X)
             for m in range(2)], 1), axis=1).sum()

    theta = np.r_[np.log(p["weight"][0] / p["weight"][1]), p["mean"].ravel(), p["cov"][0]]
    h = 1e-4 * np.maximum(1.0, np.abs(theta))
    H = np.empty((13, 13))
    for i in range(13):
        for j in range(13):
            e_i, e_j = np.eye(13)[i] * h[i], np.eye(13)[j] * h[j]
            H[i, j] = (loglik(theta + e_i + e_j) - loglik(theta + e_i - e_j)
                       - loglik(theta - e_i + e_j) + loglik(theta - e_i - e_j)) / (4 * h[i] * h[j])
    se = np.sqrt(np.diag(np.linalg.inv(-H)))
    w = p["weight"]
    comp = res.components
    assert np.allclose(comp.se_weight, w[0] * w[1] * se[0], rtol=1e-5)
    assert np.allclose(comp[["se_mean_1", "se_mean_2", "se_mean_3"]].to_numpy().ravel(),
                       se[1:7], rtol=1e-5)
    for m in range(2):  # each component's row: the one matrix's errors
        assert np.allclose(comp[[f"se_{c}" for c in COLS]].to_numpy()[m], se[7:], rtol=1e-5)


def test_a_shared_block_has_one_set_of_free_coordinates():
    from bulkem.models.base import Axis, Block, Layout

    comp, entry = Axis("component", 3), Axis("entry", 2)
    lay = Layout([(Block("weight", (comp,), "simplex"),
                   Block("v", (comp, entry), "positive", shared=True))], exchangeable="component")
    names = list(lay.blocks)
    assert (lay.size, lay.n_free()) == (9, 2 + 2)
    p = lay.join({"weight": np.array([[0.2, 0.3, 0.5]]), "v": np.array([[[1.0, 2.0]] * 3])})
    theta = lay.to_free(p, names)
    assert np.allclose(theta[0, 2:], np.log([1.0, 2.0]))
    v = lay.split(lay.from_free(theta + 0.1, p, names))["v"]
    assert (v == v[:, :1]).all() and np.allclose(v[0, 0], np.exp(0.1) * np.array([1.0, 2.0]))
    g = np.random.default_rng(0).normal(size=(1, 9))
    assert np.allclose(np.einsum("nsp,ns->np", lay.free_jacobian(p, names), g),
                       lay.free_gradient(p, g, names))
    with pytest.raises(ValueError, match="block 'w': a shared block"):
        Layout([(Block("w", (comp,), "simplex", shared=True),)])
