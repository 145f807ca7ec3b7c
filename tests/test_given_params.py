"""A result made from given parameters (issue 32, item 4): ``fit(init=..., max_iter=0)`` is
the model of ``init``, unfitted, with every result method; ``reorder=False`` keeps the given
order of components and states."""

from __future__ import annotations

import numpy as np
import pytest
from reference import ig_logpdf
from reference_hmm import forward_backward

import bulkem

IG = {"weight": [0.3, 0.7], "mu": [2.0, 0.8], "lambda": [3.0, 5.0]}
HMM = {"startprob": [0.5, 0.5], "transmat": [[0.9, 0.1], [0.2, 0.8]],
       "emissionprob": [[0.1, 0.3, 0.6], [0.6, 0.3, 0.1]]}  # state 1 has the larger symbols


def test_mixture_of_given_parameters_scores_as_loglik_and_the_oracle(seed, backend, tuning):
    rng = np.random.default_rng(seed)
    x = [rng.wald(1.0, 3.0, 80) for _ in range(3)]
    res = bulkem.fit(x, n_components=2, n_starts=1, init=IG, max_iter=0, backend=backend,
                     tuning=tuning, reorder=False)
    ref = bulkem.loglik(x, "invgauss", IG, backend="cpu")
    assert (res.summary.status == "max_iter").all() and (res.summary.n_iter == 0).all()
    np.testing.assert_allclose(res.summary.loglik, ref.loglik, rtol=1e-12)
    np.testing.assert_array_equal(res.components.mu[:2], IG["mu"])  # the given order
    lp = np.log(IG["weight"]) + ig_logpdf(x[0][:, None], np.array(IG["mu"]),
                                          np.array(IG["lambda"]))
    z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
    np.testing.assert_allclose(res.predict_proba(0, x[0]), z, rtol=1e-10)
    sorted_ = bulkem.fit(x, n_components=2, n_starts=1, init=IG, max_iter=0, backend="cpu")
    np.testing.assert_array_equal(sorted_.components.mu[:2], sorted(IG["mu"]))


def test_hmm_of_given_parameters_decodes_in_the_given_state_order(seed):
    rng = np.random.default_rng(seed)
    seqs = [[rng.integers(0, 3, 40) for _ in range(2)] for _ in range(2)]
    kw = dict(family="hmm", emission="categorical", n_symbols=3, n_components=2, n_starts=1,
              init=HMM, max_iter=0, backend="cpu")
    res = bulkem.fit(seqs, reorder=False, **kw)
    ll = [sum(forward_backward(s, "categorical", {k: np.asarray(v) for k, v in HMM.items()})[0]
              for s in d) for d in seqs]
    np.testing.assert_allclose(res.summary.loglik, ll, rtol=1e-10)
    np.testing.assert_allclose(res.params(0)["transmat"], HMM["transmat"])
    gamma = forward_backward(seqs[0][0], "categorical",
                             {k: np.asarray(v) for k, v in HMM.items()})[1]
    np.testing.assert_allclose(res.predict_proba(0, seqs[0][0]), gamma, rtol=1e-9)
    _, path = res.decode(0, seqs[0][0])
    assert set(path) <= {1, 2}
    swapped = bulkem.fit(seqs, **kw)  # canonical order: by expected symbol, state 1 lowest
    np.testing.assert_allclose(swapped.params(0)["transmat"], [[0.8, 0.2], [0.1, 0.9]])
    np.testing.assert_allclose(swapped.summary.loglik, res.summary.loglik, rtol=1e-12)


def test_reorder_and_max_iter_are_checked():
    x = [np.linspace(0.5, 2.0, 40)]
    with pytest.raises(TypeError, match="reorder must be True or False"):
        bulkem.fit(x, reorder="no", backend="cpu")
    with pytest.raises(ValueError, match="max_iter must be >= 0"):
        bulkem.fit(x, max_iter=-1, backend="cpu")
