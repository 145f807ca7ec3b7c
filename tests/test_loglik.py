"""``bulkem.loglik``: every family's log-likelihood at given parameters (an EM job with an
E-step and no M-step), against the plain NumPy/SciPy oracles, on both engines.

The shapes are those the fitting tests compile (inverse Gaussian of 2 components, Gaussian
(2, 1), the HMM tests' categorical model, TMAP orders (1, 2, 3), AR(2)): no new kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
from kalman_reference import kalman_filter
from reference import gauss_mix_loglik, ig_mix_loglik
from reference_hmm import forward_backward
from reference_hmm import sample as hmm_sample
from reference_tmap import loglik as tmap_loglik
from reference_tmap import sample as tmap_sample
from ssm_em_reference import ar_model

import bulkem

IG = {"weight": np.array([0.3, 0.7]), "mu": np.array([0.7, 1.6]),
      "lambda": np.array([1.5, 3.0])}
HMM = dict(startprob=np.array([0.6, 0.3, 0.1]),
           transmat=np.array([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.2, 0.2, 0.6]]),
           emissionprob=np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1],
                                  [0.05, 0.05, 0.2, 0.7]]))
TMAP = dict(alpha=np.array([0.5, 0.3, 0.2]),
            pi=np.array([[0.6, 0.2, 0.1], [0.2, 0.5, 0.2], [0.1, 0.3, 0.5]]),
            rates=np.array([2.0, 1.0, 0.5]))


def _rel(a, b):
    return np.abs(np.asarray(a, float) - np.asarray(b, float)) / np.abs(np.asarray(b, float))


def test_mixtures_at_given_parameters_are_the_oracles(backend, tuning, seed):
    rng = np.random.default_rng(seed)
    x = [rng.wald(1.0, 2.0, n) for n in (40, 70, 90)]
    out = bulkem.loglik(x, "invgauss", IG, backend=backend, tuning=tuning)
    assert out.status.tolist() == ["ok"] * 3 and out.n_obs.tolist() == [40, 70, 90]
    ref = [ig_mix_loglik(v, IG["weight"], IG["mu"], IG["lambda"]) for v in x]
    assert _rel(out.loglik, ref).max() < 1e-10
    # one parameter set per dataset, Gaussian (2 components, 1 dimension)
    g = [rng.normal(0, 1, (n, 1)) for n in (30, 60)]
    ps = [{"weight": [0.5, 0.5], "mean": [[-1.0], [1.0]], "var": [[1.0], [2.0]]},
          {"weight": [0.2, 0.8], "mean": [[0.0], [3.0]], "var": [[0.5], [1.0]]}]
    out = bulkem.loglik(g, "gaussian", ps, backend=backend, tuning=tuning)
    ref = [gauss_mix_loglik(v, np.asarray(p["weight"]), np.asarray(p["mean"]),
                            np.asarray(p["var"])) for v, p in zip(g, ps, strict=True)]
    assert _rel(out.loglik, ref).max() < 1e-10
    stacked = {k: np.array([p[k] for p in ps]) for k in ps[0]}  # a leading axis per dataset
    again = bulkem.loglik(g, "gaussian", stacked, backend=backend, tuning=tuning)
    assert np.array_equal(again.loglik, out.loglik)


def test_sequence_models_at_given_parameters_are_the_oracles(backend, tuning, seed):
    rng = np.random.default_rng(seed)
    small = backend == "cuda"
    seqs = [hmm_sample(HMM, "categorical", rng.integers(5, 12 if small else 40, 3), rng)[0]
            for _ in range(2)]
    out = bulkem.loglik(seqs, "hmm", HMM, emission="categorical", n_symbols=4,
                        backend=backend, tuning=tuning)
    ref = [sum(forward_backward(s, "categorical", HMM)[0] for s in d) for d in seqs]
    assert out.status.tolist() == ["ok", "ok"] and _rel(out.loglik, ref).max() < 1e-10
    traces = [tmap_sample(TMAP, (1, 2, 3), 4 if small else 30, rng) for _ in range(2)]
    out = bulkem.loglik(traces, "tmap", TMAP, orders=(1, 2, 3), backend=backend,
                        tuning=tuning)
    ref = [tmap_loglik(t, TMAP, (1, 2, 3)) for t in traces]
    assert out.status.tolist() == ["ok", "ok"] and _rel(out.loglik, ref).max() < 1e-10


def test_ar_at_given_parameters_is_the_kalman_oracle(seed):
    rng = np.random.default_rng(seed)
    y = [rng.normal(size=n) for n in (50, 80)]
    y[1][[3, 10]] = np.nan
    p = {"phi": np.array([0.5, -0.3]), "state_var": 1.2, "obs_var": 0.4}
    out = bulkem.loglik(y, "ar", p, order=2, backend="cpu")
    ref = [kalman_filter(v, *ar_model(p["phi"], 1.2, 0.4))["loglik"] for v in y]
    assert out.status.tolist() == ["ok", "ok"] and _rel(out.loglik, ref).max() < 1e-10


def test_a_fit_scores_its_own_loglik_and_float32_gives_float64_numbers(seed):
    rng = np.random.default_rng(seed)
    x = [rng.wald(1.0, 2.0, 80) for _ in range(3)]
    res = bulkem.fit(x, n_components=2, n_starts=3, seed=seed, backend="cpu")
    params = [res.params(d) for d in range(3)]
    for dtype in ("float64", "float32"):
        out = bulkem.loglik(x, "invgauss", params, dtype=dtype, backend="cpu")
        assert _rel(out.loglik, res.summary.loglik).max() < 1e-9


def test_bad_datasets_get_their_rows_and_bad_parameters_raise_at_once():
    x = [np.array([1.0, 2.0, 3.0, 0.5, 0.7, 1.1]), np.array([1.0, -2.0, 3.0, 4.0, 5, 6]),
         np.array([0.4, 1.5, 2.0, 0.9, 1.3, 2.2])]
    with pytest.warns(UserWarning, match="1 of 3 datasets are invalid"):
        out = bulkem.loglik(x, "invgauss", IG, backend="cpu")
    assert out.status.tolist() == ["ok", "invalid_data", "ok"]
    assert "non-positive" in out.message[1] or "positive" in out.message[1]
    assert np.isnan(out.loglik[1]) and np.isfinite(out.loglik[[0, 2]]).all()
    with pytest.raises(ValueError, match="must be positive"):
        bulkem.loglik(x, "invgauss", {**IG, "mu": [-1.0, 1.0]}, backend="cpu")
    with pytest.raises(ValueError, match="2 parameter sets for 3 datasets"):
        bulkem.loglik(x, "invgauss", [IG, IG], backend="cpu")
    with pytest.raises(ValueError, match="every dict must have the keys"):
        bulkem.loglik(x, "invgauss", [IG, IG, {"mu": IG["mu"], **IG}], backend="cpu")
    with pytest.raises(ValueError, match="differ in shape"):
        bulkem.loglik(x, "invgauss", [IG, IG, {**IG, "mu": [1.0, 2.0, 3.0]}], backend="cpu")
    with pytest.raises(TypeError, match="params must be a dict"):
        bulkem.loglik(x, "invgauss", None, backend="cpu")


def test_state_space_family_is_the_kalman_oracle(backend, tuning, seed):
    """``family="state_space"`` (the Kalman engines on the shared Job path): the oracle, one
    parameter set per dataset, the three methods.  AR(3), the model of test_kalman.py, so
    that no new filter compiles; the AR family's E-step meets the same oracle above."""
    rng = np.random.default_rng(seed)
    n = 12 if backend == "cuda" else 60
    y = [rng.normal(size=n), rng.normal(size=n + 7)]
    y[1][[2, 5]] = np.nan
    phi = np.array([0.5, -0.3, 0.1])
    m = bulkem.StateSpace.ar(phi, 1.3, 0.3)
    assert list(m) == ["F", "H", "Q", "R", "m0", "P0"] and m["F"] is m.F  # a dict of blocks
    ref = [kalman_filter(v, *ar_model(phi, 1.3, 0.3))["loglik"] for v in y]
    out = bulkem.loglik(y, "state_space", m, backend=backend, tuning=tuning)
    assert out.status.tolist() == ["ok", "ok"] and out.n_obs.tolist() == [n, n + 5]
    assert _rel(out.loglik, ref).max() < 1e-10
    kal = bulkem.kalman_loglik(y, m, backend=backend, tuning=tuning)
    assert np.array_equal(kal.loglik, out.loglik)
    scan = bulkem.loglik(y, "state_space", m, method="scan", backend=backend, tuning=tuning)
    assert _rel(scan.loglik, ref).max() < 1e-10
    m2 = bulkem.StateSpace.ar([0.2, 0.1, 0.05], 2.0, 0.3)
    each = bulkem.loglik(y, "state_space", [m2, m], backend=backend, tuning=tuning)
    ref2 = kalman_filter(y[0], *ar_model(np.array([0.2, 0.1, 0.05]), 2.0, 0.3))["loglik"]
    assert _rel(each.loglik, [ref2, ref[1]]).max() < 1e-10
    wide = bulkem.loglik(y, "state_space", m, method="splash", window=n + 7,
                         backend=backend, tuning=tuning)  # a window over everything: exact
    assert _rel(wide.loglik, ref).max() < 1e-6


def test_state_space_family_failures_and_arguments():
    known = bulkem.StateSpace.ar([0.5, -0.3, 0.1], sigma2=1.3, obs_var=0.0,
                                 P0=np.zeros((3, 3)))  # observed exactly: S = 0 at step 0
    y = [np.array([1.0, 2.0]), np.array([np.inf, 1.0])]
    with pytest.warns(UserWarning, match="1 of 2 datasets are invalid"):
        out = bulkem.loglik(y, "state_space", known, backend="cpu")
    assert out.status.tolist() == ["failed", "invalid_data"]
    assert "not positive definite" in out.message[0] and "time step 0" in out.message[0]
    with pytest.raises(ValueError, match="evaluated, not fitted"):
        bulkem.fit(y, family="state_space")
    with pytest.raises(ValueError, match="needs window"):
        bulkem.loglik(y, "state_space", known, method="splash")
    with pytest.raises(ValueError, match=r"dim_state, dim_obs\) \[\(3, 1\)\]"):
        bulkem.loglik(y[:1], "state_space", known, n_components=2, backend="cpu")
    with pytest.raises(ValueError, match="expected F, H, Q, R"):
        bulkem.loglik(y[:1], "state_space", {"F": np.eye(3)}, backend="cpu")
