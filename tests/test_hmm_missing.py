"""Missing observations in HMM sequences (issue 34, item 4): a NaN step is marginalised
(its emission factor is 1), against the oracle that skips the emission at those steps."""

from __future__ import annotations

import numpy as np
import pytest
from reference_hmm import baum_welch, forward_backward, sample, viterbi
from test_hmm import TRUTH, _perturbed, _rel, _stack

import bulkem

# Iteration by iteration against the plain-EM oracle (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")


def _holed(emission, n_datasets, n_seq, lo, hi, seed, share=0.2):
    """Sequences of the model with a share of their steps missing (NaN; a Gaussian step
    with one coordinate missing too)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_datasets):
        seqs = sample(TRUTH[emission], emission, rng.integers(lo, hi, n_seq), rng)[0]
        for x in seqs:
            hit = rng.random(len(x)) < share
            if x.ndim == 2:
                x[hit, rng.integers(0, x.shape[1])] = np.nan
            else:
                x[hit] = np.nan
        out.append(seqs)
    return out


@pytest.mark.parametrize("emission", ["categorical", "gaussian", "poisson"])
def test_engine_matches_the_oracle_that_skips_missing_steps(backend, tuning, emission, seed):
    small = backend == "cuda"
    data = _holed(emission, 2, 3 if small else 4, 4, 12 if small else 30, seed)
    starts = _perturbed(emission, 2, seed)
    kw = dict(family="hmm", emission=emission, n_components=len(TRUTH[emission]["startprob"]),
              n_starts=2, init=_stack(starts), max_iter=6 if small else 25, tol=1e-7,
              seed=seed, backend=backend, tuning=tuning, reg_covar=1e-6)
    if emission == "categorical":
        kw["n_symbols"] = 4
    res = bulkem.fit(data, **kw)
    assert (res.summary.status != "invalid_data").all()
    for row in res.starts.itertuples():
        ref = baum_welch(data[row.dataset], emission, starts[row.start],
                         max_iter=kw["max_iter"], tol=1e-7, reg_covar=1e-6)
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    seen = [sum(int((~np.isnan(x.reshape(len(x), -1)).any(axis=1)).sum()) for x in d)
            for d in data]
    assert res.summary.n_obs.tolist() == seen  # (BIC's n: the observed steps)


def test_missing_steps_change_no_other_dataset_and_the_methods_skip_them(seed):
    full = _holed("categorical", 2, 4, 20, 40, seed, share=0.0)
    holed = _holed("categorical", 1, 4, 20, 40, seed + 1)
    kw = dict(family="hmm", emission="categorical", n_symbols=4, n_components=3, n_starts=3,
              seed=seed, backend="cpu")
    both = bulkem.fit(full + holed, **kw)
    alone = bulkem.fit(full, **kw)
    assert both.starts[both.starts.dataset < 2].reset_index(drop=True).equals(alone.starts)
    p = both.params(2)
    x = np.concatenate([holed[0][0], [np.nan, 1.0], holed[0][1]])
    assert np.isclose(both.score(2, x), forward_backward(x, "categorical", p)[0], rtol=1e-10)
    assert np.array_equal(both.decode(2, x)[1] - 1, viterbi(x, "categorical", p)[1])
    assert np.allclose(both.predict_proba(2, x), forward_backward(x, "categorical", p)[1],
                       atol=1e-10)
    # a sequence of missing steps only: its factor is 1 (the chain alone)
    gone = [np.full(5, np.nan)] + holed[0]
    res = bulkem.fit([gone], **{**kw, "init": {k: v[None] for k, v in p.items()},
                                "n_starts": 1, "max_iter": 0})
    ref = sum(forward_backward(s, "categorical", p)[0] for s in gone)
    assert np.isclose(res.summary.loglik[0], ref, rtol=1e-10)


def test_too_few_observed_steps_and_infinite_values_are_invalid():
    data = {"holes": [np.array([np.nan, np.nan, 1.0])], "inf": [np.array([1.0, np.inf, 2.0])]}
    with pytest.warns(UserWarning, match="invalid"):
        res = bulkem.fit(data, family="hmm", emission="poisson", n_components=2, n_starts=2,
                         seed=1, backend="cpu")
    s = res.summary.set_index("dataset")
    assert "too short: 1 observations (not missing), at least 2" in s.message["holes"]
    assert "infinite (NaN marks a missing one)" in s.message["inf"]
