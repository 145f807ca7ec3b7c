"""Regression tests of issue 30's HMM and TMAP bugs (6-9), CPU engine.

Fixed small model shapes (2 states) so that the kernels compiled here are few.
"""

from __future__ import annotations

import warnings

import numpy as np

import bulkem


def _fit(data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid or failed datasets warn
        return bulkem.fit(data, **{"family": "hmm", "n_components": 2, "backend": "cpu",
                                   "progress": False, **kw})


# --- bug 7: a state with no expected transitions out of it ------------------------------------


def test_a_state_left_by_no_transition_keeps_a_valid_row():
    x = np.array([-0.7048807588974482, 1.9940785163787826])
    res = _fit([[x]], emission="gaussian", n_starts=4, max_iter=30, tol=1e-8, seed=1175)
    assert res.summary.status[0] == "converged"
    p = res.params(0)
    assert np.allclose(p["transmat"].sum(axis=1), 1.0, rtol=0, atol=1e-12)
    gam = res.predict_proba(0, x)
    assert np.all(np.isfinite(gam)) and np.allclose(gam.sum(axis=1), 1.0)
    assert np.isfinite(res.score(0, x))
    assert np.isclose(res.score(0, x), res.summary.loglik[0], rtol=1e-12)
    assert np.isfinite(res.decode(0, x)[0])
    seqs, states = res.sample(0, 2, 5, seed=0)
    assert len(seqs) == 2 and all(len(s) == 5 for s in seqs)
