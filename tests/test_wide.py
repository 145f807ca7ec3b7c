"""The wide regime (few fits, many units) for any model of units: the deal, the rule, HMMs."""

from __future__ import annotations

import numpy as np
import pytest
from reference_hmm import baum_welch, sample

import bulkem
import bulkem.models.tmap  # (bulkem imports its submodules lazily)
from bulkem import config
from bulkem.engines.cuda.wide import deal, thread_loads

HMM = dict(startprob=np.array([0.6, 0.4]), transmat=np.array([[0.8, 0.2], [0.3, 0.7]]),
           emissionprob=np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]))


@pytest.mark.parametrize("n_threads", [1, 7, 64, 1000])
def test_deal_is_a_balanced_permutation(n_threads):
    lengths = np.random.default_rng(0).geometric(1 / 8.8, 5000)
    order = deal(lengths, n_threads)
    assert np.array_equal(np.sort(order), np.arange(5000))
    pos = np.arange(5000)
    counts = np.bincount(pos % n_threads, minlength=n_threads)
    assert counts.max() - counts.min() <= 1  # every thread the same number of units (+- 1)
    loads = thread_loads(lengths, order, n_threads)
    assert loads.sum() == lengths.sum()
    assert loads.max() - loads.min() <= lengths.max()  # as good as greedy longest-first
    first = lengths[order[:n_threads]]  # round 0: the longest units, in order
    assert np.array_equal(first, np.sort(lengths)[::-1][:n_threads])


def test_the_rule_picks_few_fits_of_many_units(monkeypatch):
    from bulkem.engines.wide import use_wide

    class Job:
        def __init__(self, model, n_units, n_fits):
            self.model = model
            self.fit_ds = np.zeros(n_fits, np.int64)
            self.data = bulkem.data.Ragged(np.zeros(n_units), np.arange(n_units + 1),
                                           np.array([0, n_units]))

    tmap = bulkem.models.tmap.TMAPModel.of((1, 2))
    n = config.WIDE_MIN_UNITS
    assert use_wide(Job(tmap, n, 1), "cpu") and use_wide(Job(tmap, n, 10), "cuda")
    assert not use_wide(Job(tmap, n - 1, 1), "cpu")
    assert not use_wide(Job(tmap, n, config.WIDE_MAX_FITS_CUDA + 1), "cuda")
    mixture = bulkem.models.MixtureModel(bulkem.models.get("invgauss"), 2)
    assert not use_wide(Job(mixture, n, 1), "cpu")
    monkeypatch.setattr(config, "WIDE_REGIME", False)
    assert not use_wide(Job(tmap, n, 1), "cpu")


def test_hmm_in_the_wide_regime_matches_the_oracle(backend, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    seqs = sample(HMM, "categorical", rng.integers(2, 9, 40), rng)[0]
    start = dict(startprob=np.array([0.5, 0.5]), transmat=np.array([[0.6, 0.4], [0.5, 0.5]]),
                 emissionprob=np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]))
    max_iter = 3 if backend == "cuda" else 10
    for name, value in dict(WIDE_REGIME=True, WIDE_CPU_CHUNK_UNITS=6, WIDE_CUDA_THREADS=32,
                            WIDE_CUDA_REDUCE_THREADS=32, WIDE_CUDA_REDUCE_COLS=8,
                            WIDE_CUDA_CHECK_EVERY=3, WIDE_CUDA_MAX_BLOCKS=1).items():
        monkeypatch.setattr(config, name, value)
    res = bulkem.fit([seqs], family="hmm", emission="categorical", n_symbols=3, n_components=2,
                     n_starts=1, init=start, max_iter=max_iter, tol=0.0, backend=backend)
    ref = baum_welch(seqs, "categorical", start, max_iter=max_iter, tol=0.0)
    assert res.summary.n_iter[0] == max_iter
    assert abs(res.summary.loglik[0] / ref["loglik"] - 1) < 1e-9
    p = res.params(0)
    assert np.allclose(np.sort(p["transmat"].ravel()), np.sort(ref["transmat"].ravel()),
                       rtol=1e-8)
