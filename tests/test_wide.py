"""The wide regime (few fits, many units) for any model of units: the deal, the rule, HMMs."""

from __future__ import annotations

import numpy as np
import pytest
from reference_hmm import baum_welch, sample

import bulkem
import bulkem.models.tmap  # (bulkem imports its submodules lazily)
from bulkem.engines.cuda.wide import deal, thread_loads
from bulkem.engines.select import use_wide
from bulkem.tuning import DEFAULT, Tuning

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

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


def test_the_rule_picks_few_fits_of_many_units():
    class Job:
        def __init__(self, model, n_units, n_fits, tuning=DEFAULT):
            self.model, self.tuning = model, tuning
            self.fit_ds = np.zeros(n_fits, np.int64)
            self.data = bulkem.data.Ragged(np.zeros(n_units), np.arange(n_units + 1),
                                           np.array([0, n_units]))

    tmap = bulkem.models.tmap.TMAPModel.of((1, 2))
    n = DEFAULT.wide_min_units
    assert use_wide(Job(tmap, n, 1), "cpu") and use_wide(Job(tmap, n, 10), "cuda")
    assert not use_wide(Job(tmap, n - 1, 1), "cpu")
    assert not use_wide(Job(tmap, n, DEFAULT.wide_max_fits_cuda + 1), "cuda")
    mixture = bulkem.models.MixtureModel(bulkem.models.get("invgauss"), 2)
    assert not use_wide(Job(mixture, n, 1), "cpu")
    assert not use_wide(Job(tmap, n, 1, Tuning(strategy="bulk")), "cpu")
    assert use_wide(Job(tmap, 10, 1, Tuning(strategy="wide")), "cpu")


def test_hmm_in_the_wide_regime_matches_the_oracle(backend, tuning, seed):
    rng = np.random.default_rng(seed)
    seqs = sample(HMM, "categorical", rng.integers(2, 9, 40), rng)[0]
    # three states and four symbols (the model of test_accel.py's wide test: one kernel)
    start = dict(startprob=np.array([0.5, 0.3, 0.2]),
                 transmat=np.array([[0.6, 0.3, 0.1], [0.4, 0.5, 0.1], [0.2, 0.3, 0.5]]),
                 emissionprob=np.array([[0.5, 0.3, 0.1, 0.1], [0.2, 0.3, 0.4, 0.1],
                                        [0.25, 0.25, 0.25, 0.25]]))
    max_iter = 3 if backend == "cuda" else 10
    tuning = tuning.replace(strategy="wide", wide_cpu_chunk_units=6, wide_cuda_threads=32,
                            wide_cuda_reduce_threads=32, wide_cuda_reduce_cols=8,
                            wide_cuda_check_every=3, wide_cuda_max_blocks=1)
    res = bulkem.fit([seqs], family="hmm", emission="categorical", n_symbols=4, n_components=3,
                     n_starts=1, init=start, max_iter=max_iter, tol=0.0, backend=backend,
                     tuning=tuning)
    ref = baum_welch(seqs, "categorical", start, max_iter=max_iter, tol=0.0)
    assert res.summary.n_iter[0] == max_iter
    assert abs(res.summary.loglik[0] / ref["loglik"] - 1) < 1e-9
    p = res.params(0)
    assert np.allclose(np.sort(p["transmat"].ravel()), np.sort(ref["transmat"].ravel()),
                       rtol=1e-8)


@pytest.mark.parametrize("width", [0, 3])
def test_units_by_length_sorts_each_datasets_units_and_moves_their_values(width):
    rng = np.random.default_rng(5)
    lens = [[3, 1, 2, 1], [], [4], [2, 2, 1]]
    seqs = [[rng.normal(size=(n, width) if width else n) for n in d] for d in lens]
    flat = [u for d in seqs for u in d]
    units = np.concatenate([[0], np.cumsum([len(u) for u in flat])])
    groups = np.concatenate([[0], np.cumsum([len(d) for d in seqs])])
    data = bulkem.data.Ragged(np.concatenate(flat), units, groups)
    out = data.units_by_length()
    np.testing.assert_array_equal(out.groups, data.groups)
    k = 0
    for d in seqs:
        want = sorted(d, key=len)  # (stable: ties in their order)
        for u in want:
            np.testing.assert_array_equal(out.values[out.units[k]:out.units[k + 1]], u)
            k += 1
    assert out.units_by_length() is out  # sorted already: no copy
