"""Properties of HMM fits on generated batches (hypothesis).

A bounded number of examples in CI; ``BULKEM_HYPOTHESIS_EXAMPLES=2000`` runs more.  The
model shape is fixed (2 states, 3 symbols) so that no example compiles new kernels; the data
vary: the number of datasets, of sequences and their lengths, and the symbols.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import bulkem

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

EXAMPLES = int(os.environ.get("BULKEM_HYPOTHESIS_EXAMPLES", "12"))
STATUSES = {"converged", "max_iter", "failed", "invalid_data"}

sequence = st.lists(st.integers(0, 2), min_size=1, max_size=25).map(
    lambda v: np.array(v, dtype=float))
dataset = st.lists(sequence, min_size=1, max_size=4)
batch = st.lists(dataset, min_size=1, max_size=5)
KW = dict(family="hmm", emission="categorical", n_symbols=3, n_components=2, n_starts=3,
          max_iter=15, seed=5, backend="cpu", progress=False)


def fit(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid (too short) or failed datasets warn
        return bulkem.fit(data, **KW)


@hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(batch, st.randoms(use_true_random=False))
def test_hmm_tables_are_consistent(data, rnd):
    copies = [[s.copy() for s in ds] for ds in data]
    res = fit(data)
    # inputs untouched; one row per dataset, in input order; documented statuses only
    assert all(np.array_equal(a, b) for ds, cs in zip(data, copies, strict=True)
               for a, b in zip(ds, cs, strict=True))
    assert list(res.summary.dataset) == list(range(len(data)))
    assert set(res.summary.status) <= STATUSES
    assert set(res.starts.status) <= {"converged", "max_iter", "degenerate"}
    fitted = res.summary[res.summary.status.isin(["converged", "max_iter"])]
    for d in fitted.dataset:
        p = res.params(d)
        assert np.allclose(p["startprob"].sum(), 1.0)
        assert np.allclose(p["transmat"].sum(axis=1), 1.0)
        assert np.allclose(p["emissionprob"].sum(axis=1), 1.0)
        # the summary's log-likelihood is that of the returned parameters
        ll = res.score(d, data[d])
        assert np.isclose(res.summary.loglik[d], ll, rtol=1e-9, atol=1e-9)
    # a dataset's fit is the same alone and in a shuffled batch
    order = list(range(len(data)))
    rnd.shuffle(order)
    again = fit([data[k] for k in order])
    for pos, d in enumerate(order):
        a, b = res.summary.loglik[d], again.summary.loglik[pos]
        assert (np.isnan(a) and np.isnan(b)) or a == b
    d = rnd.randrange(len(data))
    alone = fit([data[d]])
    a, b = res.summary.loglik[d], alone.summary.loglik[0]
    assert (np.isnan(a) and np.isnan(b)) or a == b
