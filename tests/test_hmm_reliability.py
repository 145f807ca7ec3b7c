"""Regression tests of issue 30's HMM and TMAP bugs (6-9), CPU engine.

Fixed small model shapes (2 states) so that the kernels compiled here are few.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from reference_hmm import forward_backward

import bulkem
from bulkem.tuning import DEFAULT, Tuning


def _fit(data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid or failed datasets warn
        return bulkem.fit(data, **{"family": "hmm", "n_components": 2, "backend": "cpu",
                                   "progress": False, **kw})


# --- bug 6: a categorical HMM's inferred alphabet ---------------------------------------------

CAT_A = [np.array([0, 1, 2, 1, 0, 0, 2, 1, 1, 0]), np.array([1, 1, 0, 2, 2, 0])]
CAT_KW = dict(emission="categorical", n_starts=3, max_iter=20, seed=11)


def test_categorical_fit_does_not_depend_on_the_other_datasets_symbols():
    alone = _fit([CAT_A], **CAT_KW)
    both = _fit([CAT_A, [np.array([3.0, 0.0, 1.0, 3.0])]], **CAT_KW)  # (4 symbols)
    assert set(both.summary.status) <= {"converged", "max_iter"}
    assert both.summary.loglik[0] == alone.summary.loglik[0]
    pa, pb = alone.params(0), both.params(0)
    assert np.array_equal(pa["transmat"], pb["transmat"])
    assert np.array_equal(pa["emissionprob"], pb["emissionprob"][:, :3])
    assert np.all(pb["emissionprob"][:, 3:] == 0.0)  # symbols beyond the dataset's own
    # the dataset's own alphabet counts its free parameters, whatever the batch
    assert both.summary.bic[0] == alone.summary.bic[0]


def test_categorical_bad_symbols_are_invalid_data_and_change_nothing():
    alone = _fit([CAT_A], **CAT_KW)
    bad = [[np.array([1e300, 0.0])], [np.array([-1.0, 0.0])], [np.array([0.5, 1.0])],
           [np.array([2.0**40, 1.0])]]
    res = _fit([CAT_A, *bad], **CAT_KW)
    s = res.summary
    assert list(s.status) == [alone.summary.status[0]] + ["invalid_data"] * 4
    assert all(m for m in s.message[1:])
    assert "1e+300" in s.message[1] and str(bulkem.models.hmm.MAX_SYMBOLS) in s.message[1]
    assert s.loglik[0] == alone.summary.loglik[0]


def test_too_many_symbols_raises_at_once():
    with pytest.raises(ValueError, match=f"at most {bulkem.models.hmm.MAX_SYMBOLS}"):
        _fit([CAT_A], n_symbols=10**9, **CAT_KW)


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


# --- bug 8: Poisson counts far above the rates ---------------------------------------------------

POIS_KW = dict(emission="poisson", n_starts=4, max_iter=100, tol=1e-10, seed=3)


def test_poisson_huge_counts_have_an_exact_loglik():
    x = np.array([1e15, 0.0, 2.0])
    res = _fit([[x]], **POIS_KW)
    assert res.summary.status[0] == "converged"
    p = res.params(0)
    ref = forward_backward(x, "poisson", p)[0]
    assert -21.0 < ref < -20.8
    assert np.isclose(res.summary.loglik[0], ref, rtol=1e-10, atol=0)
    assert np.isclose(res.score(0, x), ref, rtol=1e-10, atol=0)


def test_poisson_counts_beyond_the_limit_are_invalid_data():
    good = [np.array([3.0, 0.0, 2.0, 5.0, 1.0])]
    alone = _fit([good], **POIS_KW)
    res = _fit([good, [np.array([1e300, 0.0, 2.0])], [np.array([2.0**53 + 2, 1.0])]],
               **POIS_KW)
    assert list(res.summary.status) == [alone.summary.status[0], "invalid_data", "invalid_data"]
    assert "2**53" in res.summary.message[1]
    assert res.summary.loglik[0] == alone.summary.loglik[0]


# --- bug 9: the same bits in the wide regime ---------------------------------------------------


def _many_sequences(emission, n, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 4, n)
    if emission == "poisson":
        return [rng.poisson(rng.choice([1.0, 6.0]), k).astype(float) for k in lengths]
    return [rng.normal(rng.choice([-1.0, 2.0]), 1.0, k) for k in lengths]


@pytest.mark.parametrize("emission", ["gaussian"])
def test_wide_regime_gives_the_bulk_bits(emission):
    # (one emission: the wide engine's code is the emissions'; test_accel.py checks it with
    # categorical symbols, the TMAP test below with Erlang branches and a trace constant)
    # more units than wide_cpu_chunk_units (several chunks) and a ragged last chunk
    big = _many_sequences(emission, 2 * DEFAULT.wide_cpu_chunk_units + 77, 5)
    small = _many_sequences(emission, 5, 6)
    kw = dict(emission=emission, n_starts=1, max_iter=6, tol=0.0, seed=2)
    wide = _fit([big], tuning=Tuning(strategy="wide"), **kw)
    bulk = _fit([big, small], tuning=Tuning(strategy="bulk"), **kw)
    assert wide.summary.loglik[0] == bulk.summary.loglik[0]
    for key, v in wide.params(0).items():
        assert np.array_equal(v, bulk.params(0)[key]), key


def test_tmap_wide_regime_gives_the_bulk_bits():
    rng = np.random.default_rng(8)
    n = 2 * DEFAULT.wide_cpu_chunk_units + 77
    big = [rng.gamma(rng.choice([0.5, 2.0]), 1.0, k) + 1e-3 for k in rng.integers(1, 4, n)]
    small = [rng.gamma(1.0, 1.0, k) + 1e-3 for k in (2, 3, 1)]
    kw = dict(family="tmap", orders=(1, 2, 3), n_starts=1, max_iter=6, tol=0.0, seed=2,
              backend="cpu", progress=False)
    wide = bulkem.fit([big], tuning=Tuning(strategy="wide"), **kw)
    bulk = bulkem.fit([big, small], tuning=Tuning(strategy="bulk"), **kw)
    assert wide.summary.loglik[0] == bulk.summary.loglik[0]
    for key, v in wide.params(0).items():
        assert np.array_equal(v, bulk.params(0)[key]), key


@pytest.mark.parametrize("family, kw, match", [
    ("hmm", dict(n_components=10**12), r"n_components = 1000000000000 states is too many: .* "
                                       r"at most 4096 states"),
    ("hmm", dict(emission=["gaussian"]), r"unknown emission \['gaussian'\]; expected one of"),
    ("tmap", dict(orders={1: 1, 2: 2}), r"orders=\{1: 1, 2: 2\}: expected a sequence"),
    ("tmap", dict(orders=(1, 2**40)), r"every order must be an integer from 1 to 10000 \(found "
                                      r"1099511627776\)"),
])
def test_bad_hmm_and_tmap_arguments_say_what_and_the_limit(family, kw, match):
    """Issue 30, arguments: n_components=10**12 raised numpy's 'Maximum allowed dimension
    exceeded', emission=['gaussian'] "unhashable type: 'list'"; orders={1: 1, 2: 2} was read
    as its keys and orders=(1, 2**40) compiled, then failed every start."""
    data = [[np.array([0.1, 0.5, 1.2])]] if family == "hmm" else [np.array([0.1, 0.5, 1.2])]
    with pytest.raises(ValueError, match=match):
        bulkem.fit(data, family=family, n_starts=1, backend="cpu", progress=False, **kw)


@pytest.mark.parametrize("emission", ["categorical", "poisson", "gaussian"])
def test_the_vectorised_screen_finds_every_dataset_the_check_faults(emission, seed):
    """``HMMModel.pack`` runs ``check`` only where one pass over all values flags a dataset:
    its messages must be exactly the per-dataset checks' (every fault flagged)."""
    from bulkem.models.hmm.emissions import EMISSIONS
    from bulkem.models.hmm.model import HMMModel

    rng = np.random.default_rng(seed)
    model = HMMModel(EMISSIONS[emission], 3, 4 if emission == "categorical" else 1, "ste")

    def seq(n):
        return rng.integers(0, 4, n).astype(float)

    bad_values = [np.nan, np.inf, -1.0, 2.5, 4.0, 1e17]
    pairs = [(0, [seq(5), seq(7)]), (1, []), (2, [seq(4), seq(0)]), (3, [seq(2)])]
    for k, v in enumerate(bad_values):
        s = seq(6)
        s[int(rng.integers(0, 6))] = v
        pairs.append((4 + k, [seq(5), s]))
    pairs.append((99, [seq(8)]))
    packed = model.pack(pairs)
    assert packed.messages == [model.check(units) for _, units in pairs]
    assert packed.messages[0] is None and packed.messages[-1] is None
    assert sum(m is not None for m in packed.messages) >= 3
    # (a NaN step is missing, not a fault: n_obs counts the observed steps)
    assert packed.n_obs.tolist() == [sum(int((~np.isnan(u)).sum()) for u in units)
                                     for _, units in pairs]
