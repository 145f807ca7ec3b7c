"""``fit(se=True)``: standard errors from the observed information (numerical Hessian in
unconstrained coordinates, of the log-likelihood or from the score by Fisher's identity;
the delta method back), against oracles that share no code with it: a plain NumPy Hessian
of the inverse-Gaussian and gamma mixtures' log-likelihoods in their natural parameters,
of a categorical HMM's, and statsmodels' SARIMAX for AR(2) plus noise; each model's score
against differences of its log-likelihood."""

from __future__ import annotations

import numpy as np
import pytest
from reference import ig_mix_loglik

import bulkem
from bulkem.tuning import Tuning


def _numpy_se(f, x0):
    """Standard errors from the inverse of minus the central-difference Hessian of f at x0."""
    P = len(x0)
    h = 1e-4 * np.maximum(1.0, np.abs(x0))
    H = np.empty((P, P))
    for i in range(P):
        for j in range(P):
            ei, ej = np.eye(P)[i] * h[i], np.eye(P)[j] * h[j]
            H[i, j] = (f(x0 + ei + ej) - f(x0 + ei - ej) - f(x0 - ei + ej)
                       + f(x0 - ei - ej)) / (4 * h[i] * h[j])
    return np.sqrt(np.diag(np.linalg.inv(-H)))


def test_mixture_standard_errors_are_the_numpy_oracles(seed):
    rng = np.random.default_rng(seed)
    x = [np.concatenate([rng.wald(0.5, 4.0, 300), rng.wald(3.0, 20.0, 200)]) for _ in range(2)]
    res = bulkem.fit(x, n_components=2, n_starts=5, seed=seed, max_iter=5000, tol=1e-11,
                     backend="cpu", se=True)
    assert (res.summary.status == "converged").all()  # at the maximum: invariance holds
    for d in range(2):
        p = res.params(d)

        def f(v, xd=x[d]):  # natural parameters: w_1, mu_1, lambda_1, mu_2, lambda_2
            return ig_mix_loglik(xd, np.array([v[0], 1 - v[0]]), v[[1, 3]], v[[2, 4]])

        x0 = np.array([p["weight"][0], p["mu"][0], p["lambda"][0], p["mu"][1],
                       p["lambda"][1]])
        ref = _numpy_se(f, x0)
        c = res.components[res.components.dataset == d]
        got = np.array([c.se_weight.iloc[0], c.se_mu.iloc[0], c.se_lambda.iloc[0],
                        c.se_mu.iloc[1], c.se_lambda.iloc[1]])
        assert np.allclose(got, ref, rtol=2e-3), (got, ref)
        assert np.isclose(c.se_weight.iloc[0], c.se_weight.iloc[1], rtol=1e-12)  # w_2 = 1 - w_1
        cov = res.cov(d)
        assert list(cov.columns) == ["weight_1", "mu_1", "lambda_1", "weight_2", "mu_2",
                                     "lambda_2"]
        assert np.isclose(np.sqrt(cov.loc["mu_2", "mu_2"]), c.se_mu.iloc[1])


def test_ar_standard_errors_are_statsmodels_numerical_observed_information(seed):
    """statsmodels' ``cov_type="approx"`` (the numerical Hessian of its log-likelihood in its
    natural parameters) at bulkem's fit. (Its ``"oim"`` is Harvey's analytic formula, which
    leaves out a term of the observed information: about 10% apart on this series.)"""
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(seed)
    truth = bulkem.StateSpace.ar([0.5, -0.3], sigma2=1.0, obs_var=0.5)
    y = truth.simulate(400, rng)[:, 0]
    res = bulkem.fit([y], family="ar", order=2, n_starts=10, max_iter=3000, tol=1e-11,
                     seed=seed, backend="cpu", se=True)
    p = res.params(0)
    mod = sm.tsa.SARIMAX(y, order=(2, 0, 0), measurement_error=True, trend="n")
    # statsmodels' order: ar.L1, ar.L2, var.measurement, sigma2
    ours = np.array([p["phi"][0], p["phi"][1], p["obs_var"], p["state_var"]])
    fitted = mod.smooth(ours, cov_type="approx")
    assert np.isclose(fitted.llf, res.summary.loglik[0], rtol=1e-8)
    se = res.components.set_index("parameter")["se"]
    got = np.array([se["phi_1"], se["phi_2"], se["obs_var"], se["state_var"]])
    assert res.summary.status[0] == "converged"
    assert np.allclose(got, fitted.bse, rtol=1e-3), (got, fitted.bse)


def test_standard_errors_at_a_boundary_are_nan_with_a_message():
    """A Gaussian component sitting on one repeated value: its variance is held at
    reg_covar, a boundary where the information says nothing; NaN and a message."""
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(0, 1, (200, 1)), np.full((30, 1), 5.0)])
    res = bulkem.fit([X], family="gaussian", n_components=2, n_starts=4, seed=2,
                     backend="cpu", se=True)
    assert res.components.se_var_1.isna().all()
    assert "standard errors NaN" in res.summary.message[0]
    # beside fits off the boundary (evaluated alone, the boundary's dataset skipped): theirs
    # are those of a batch without it
    Y, Z = rng.normal(0, 1, (150, 1)), np.concatenate([rng.normal(0, 1, (100, 1)),
                                                       rng.normal(4, 1, (100, 1))])
    kw = dict(family="gaussian", n_components=2, n_starts=4, seed=2, backend="cpu", se=True)
    mixed, alone = bulkem.fit([Y, X, Z], **kw), bulkem.fit([Y, Z], **kw)
    se = [c for c in mixed.components.columns if c.startswith("se_")]
    got = mixed.components[mixed.components.dataset != 1][se].to_numpy()
    assert np.array_equal(got, alone.components[se].to_numpy(), equal_nan=True)
    assert np.isfinite(got).any()
    with pytest.raises(ValueError, match="se=True"):
        bulkem.fit([X], family="gaussian", n_components=2, n_starts=2, seed=2,
                   backend="cpu").cov(0)


def _hmm_loglik(seqs, trans, emis, start):
    """Scaled forward log-likelihood of categorical sequences under many parameter sets at
    once: ``trans`` (Q, N, N), ``emis`` (Q, N, V), ``start`` (N,) -> (Q,)."""
    total = np.zeros(len(trans))
    for x in seqs:
        a = start[None] * emis[:, :, x[0]]
        for t in range(1, len(x)):
            c = a.sum(axis=1, keepdims=True)
            total += np.log(c[:, 0])
            a = np.einsum("qi,qij->qj", a / c, trans) * emis[:, :, x[t]]
        total += np.log(a.sum(axis=1))
    return total


def test_hmm_standard_errors_are_the_numpy_oracles():
    """A categorical HMM at an interior maximum (startprob held, as ``params="te"``; a fixed
    seed whose maximum has no probability near 0): the standard errors of transmat and
    emissionprob equal those of a plain NumPy Hessian of a forward log-likelihood in the
    natural free coordinates (each row less its last entry)."""
    from reference_hmm import sample as hmm_sample

    truth = dict(startprob=np.array([0.4, 0.3, 0.3]),
                 transmat=np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]),
                 emissionprob=np.array([[0.55, 0.15, 0.15, 0.15], [0.15, 0.55, 0.15, 0.15],
                                        [0.15, 0.15, 0.15, 0.55]]))
    seqs = hmm_sample(truth, "categorical", [400] * 8, np.random.default_rng(2))[0]
    res = bulkem.fit([seqs], family="hmm", emission="categorical", n_symbols=4,
                     n_components=3, n_starts=1, init=truth, params="te", max_iter=20000,
                     tol=1e-11, backend="cpu", se=True)
    assert res.summary.status[0] == "converged" and res.summary.message[0] == ""
    p = res.params(0)
    x0 = np.concatenate([p["transmat"][:, :-1].ravel(), p["emissionprob"][:, :-1].ravel()])
    P = len(x0)
    h = 1e-4 * np.maximum(1.0, np.abs(x0))
    pts = [x0 + si * h[i] * np.eye(P)[i] + sj * h[j] * np.eye(P)[j]
           for i in range(P) for j in range(P) for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1))]
    v = np.array(pts)
    trans = v[:, :6].reshape(-1, 3, 2)
    emis = v[:, 6:].reshape(-1, 3, 3)
    trans = np.concatenate([trans, 1 - trans.sum(axis=2, keepdims=True)], axis=2)
    emis = np.concatenate([emis, 1 - emis.sum(axis=2, keepdims=True)], axis=2)
    f = _hmm_loglik([s.astype(int) for s in seqs], trans, emis, p["startprob"])
    c = f.reshape(P, P, 4)
    H = (c[:, :, 0] - c[:, :, 1] - c[:, :, 2] + c[:, :, 3]) / (4 * h[:, None] * h[None, :])
    ref = np.sqrt(np.diag(np.linalg.inv(-H)))
    comp, trans_table = res.components, res.transitions
    assert (comp.se_startprob == 0).all()  # held, not estimated
    got_t = trans_table.se_prob.to_numpy().reshape(3, 3)[:, :2].ravel()
    got_e = comp[[f"se_prob_{v}" for v in range(3)]].to_numpy().ravel()
    assert np.allclose(np.concatenate([got_t, got_e]), ref, rtol=2e-3)


def _score_cases():
    rng = np.random.default_rng(5)
    two = np.concatenate([rng.gamma(2.0, 1.0, 60), rng.gamma(12.0, 1.0, 60)])
    seqs = [rng.poisson(rng.choice([1.0, 6.0], 30)).astype(float) for _ in range(3)]
    yield "invgauss", [two], {}
    yield "gaussian", [np.stack([two, rng.normal(0, 1, 120)], axis=1)], {}
    three = np.stack([two, 0.5 * two + rng.normal(0, 2, 120), rng.normal(0, 1, 120)], axis=1)
    yield "gaussian", [three], dict(covariance_type="spherical")  # (D = 3: the other tests'
    yield "gaussian", [three], dict(covariance_type="full")  # kernels, no compile of its own)
    yield "poisson", [np.round(two)], {}
    yield "lognormal", [two], {}
    yield "gamma", [two], {}
    yield "hmm", [seqs], dict(emission="poisson")
    yield "hmm", [[np.minimum(s, 2) for s in seqs]], dict(emission="categorical", n_symbols=3)
    yield "hmm", [[s + rng.normal(0, 1, len(s)) for s in seqs]], dict(emission="gaussian")


@pytest.mark.parametrize("family,data,kw", list(_score_cases()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_each_models_score_is_the_gradient_of_its_log_likelihood(family, data, kw):
    """Fisher's identity, each model's ``score`` hook: from the E-step's statistics at
    parameters off the maximum (a start after 2 iterations), mapped to the free
    coordinates, it equals central differences of the engine's log-likelihood there."""
    from bulkem import api
    from bulkem.fitting import information

    res = bulkem.fit(data, family=family, n_components=2, n_starts=1, seed=2, max_iter=2,
                     tol=0.0, backend="cpu", **kw)
    model, packed = res._model, res._packed
    assert model.has_score
    lay, free = model.params_layout, model.free_blocks()
    p0 = res._best[next(iter(res._best))][0][None]
    theta = lay.to_free(p0, free)
    h = information.steps(theta)
    pts = np.concatenate([theta[:, None], information.score_points(theta, h)], axis=1)[0]
    params = lay.from_free(pts, np.repeat(p0, len(pts), axis=0), free)
    job = api.evaluate(model, packed, params[None], "cpu", np.dtype(np.float64), stats=True)
    got = lay.free_gradient(params[:1], model.score(params[:1], job.stats[:1]), free)[0]
    ref = (job.loglik[1::2] - job.loglik[2::2]) / (2 * h[0])
    assert np.allclose(got, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max()), (got, ref)


@pytest.mark.cuda
def test_the_cuda_engine_gives_the_cpu_engines_standard_errors():
    from conftest import SIMULATED

    from bulkem.tuning import Tuning

    tuning = (Tuning(cuda_warps_per_block=2, cuda_lanes_per_fit=4,
                     cuda_lanes_per_fit_tol0={"float64": 4, "float32": 4},
                     cuda_lanes_per_refit=None) if SIMULATED else Tuning())
    rng = np.random.default_rng(4)
    x = [np.concatenate([rng.wald(0.5, 4.0, 60), rng.wald(3.0, 20.0, 40)]) for _ in range(2)]
    kw = dict(n_components=2, n_starts=2, seed=3, max_iter=200, tol=1e-10, se=True)
    cpu = bulkem.fit(x, backend="cpu", **kw)
    gpu = bulkem.fit(x, backend="cuda", tuning=tuning, **kw)
    cols = ["se_weight", "se_mu", "se_lambda"]
    assert np.allclose(gpu.components[cols], cpu.components[cols], rtol=1e-5)
    seqs = [[rng.poisson(rng.choice([1.0, 6.0], 20)).astype(float) for _ in range(3)]]
    kw = dict(family="hmm", emission="poisson", n_components=2, n_starts=1, seed=3,
              max_iter=50, se=True)  # (the statistics of a fit's lanes: the totals)
    cpu = bulkem.fit(seqs, backend="cpu", **kw)
    gpu = bulkem.fit(seqs, backend="cuda", **kw)
    assert np.allclose(gpu.components.se_lambda, cpu.components.se_lambda, rtol=1e-5)
    assert np.allclose(gpu.transitions.se_prob, cpu.transitions.se_prob, rtol=1e-5)


def test_a_checkpointed_fit_keeps_its_standard_errors_and_covariances(tmp_path):
    """The covariances are a table (one row per dataset and pair of parameters), so a run in
    chunks joins and resumes them like the other tables."""
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(5)
    x = [np.concatenate([rng.wald(0.5, 4.0, 80), rng.wald(3.0, 20.0, 60)]) for _ in range(3)]
    kw = dict(n_components=2, n_starts=2, seed=4, backend="cpu", se=True)
    whole = bulkem.fit(x, **kw)
    chunked = bulkem.fit(x, checkpoint=tmp_path / "run", **kw,
                         tuning=Tuning(checkpoint_chunk_fits=2))
    cols = ["se_weight", "se_mu", "se_lambda"]
    assert np.array_equal(chunked.components[cols], whole.components[cols])
    for d in range(3):
        assert chunked.cov(d).equals(whole.cov(d))
    assert list(whole.cov(1).columns) == ["weight_1", "mu_1", "lambda_1", "weight_2", "mu_2",
                                          "lambda_2"]
