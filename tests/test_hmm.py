"""Hidden Markov models: both engines against the oracle and hmmlearn, EM properties, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from reference_hmm import baum_welch, forward_backward, sample, viterbi

import bulkem

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

# One small model per emission (each configuration compiles its own kernels).
TRUTH = {
    "categorical": dict(
        startprob=np.array([0.6, 0.3, 0.1]),
        transmat=np.array([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.2, 0.2, 0.6]]),
        emissionprob=np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1],
                               [0.05, 0.05, 0.2, 0.7]])),
    "gaussian": dict(
        startprob=np.array([0.5, 0.5]),
        transmat=np.array([[0.9, 0.1], [0.2, 0.8]]),
        means=np.array([[-1.0, 0.5], [2.0, 1.5]]), vars=np.array([[0.5, 1.0], [0.8, 0.3]])),
    "poisson": dict(
        startprob=np.array([0.3, 0.7]),
        transmat=np.array([[0.85, 0.15], [0.25, 0.75]]),
        lambdas=np.array([1.5, 7.0])),
}


def _data(emission, n_datasets, n_seq, lo, hi, seed):
    rng = np.random.default_rng(seed)
    return [sample(TRUTH[emission], emission, rng.integers(lo, hi, n_seq), rng)[0]
            for _ in range(n_datasets)]


def _perturbed(emission, k, seed):
    """k starting parameter sets near the truth (in bulkem's init form)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        p = {}
        for key, v in TRUTH[emission].items():
            if key in ("startprob", "transmat", "emissionprob"):
                w = v * rng.uniform(0.5, 1.5, v.shape)
                p[key] = w / w.sum(axis=-1, keepdims=True)
            elif key == "means":
                p[key] = v + rng.normal(0, 0.5, v.shape)
            else:
                p[key] = v * rng.uniform(0.6, 1.6, v.shape)
        out.append(p)
    return out


def _stack(starts):
    return {k: np.array([s[k] for s in starts]) for k in starts[0]}


def _rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b))


@pytest.mark.parametrize("emission", ["categorical", "gaussian", "poisson"])
def test_engine_matches_oracle_from_given_starts(backend, tuning, emission, seed):
    small = backend == "cuda"
    data = _data(emission, 2, 3 if small else 4, 2, 12 if small else 30, seed)
    starts = _perturbed(emission, 2, seed)
    kw = dict(family="hmm", emission=emission, n_components=len(TRUTH[emission]["startprob"]),
              n_starts=2, init=_stack(starts), max_iter=6 if small else 25, tol=1e-7,
              seed=seed, backend=backend, tuning=tuning, reg_covar=1e-6)
    if emission == "categorical":
        kw["n_symbols"] = 4
    res = bulkem.fit(data, **kw)
    for row in res.starts.itertuples():
        ref = baum_welch(data[row.dataset], emission, starts[row.start],
                         max_iter=kw["max_iter"], tol=1e-7, reg_covar=1e-6)
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    # the best start's parameters, states in the tables' order
    for s in res.summary.itertuples():
        ref = baum_welch(data[s.dataset], emission, starts[s.best_start],
                         max_iter=kw["max_iter"], tol=1e-7, reg_covar=1e-6)
        got = res.params(s.dataset)
        order = np.argsort(_key(emission, ref), kind="stable")
        assert np.allclose(got["transmat"], ref["transmat"][np.ix_(order, order)], rtol=1e-7,
                           atol=1e-12)
        assert np.allclose(got["startprob"], ref["startprob"][order], rtol=1e-7, atol=1e-12)


def _key(emission, p):
    if emission == "categorical":
        return p["emissionprob"] @ np.arange(p["emissionprob"].shape[1])
    if emission == "gaussian":
        return p["means"][:, 0]
    return p["lambdas"]


@pytest.mark.parametrize("emission", ["categorical", "gaussian", "poisson"])
def test_matches_hmmlearn_after_k_iterations(emission, seed):
    hmm = pytest.importorskip("hmmlearn.hmm")
    data = _data(emission, 1, 5, 20, 60, seed)[0]
    start = _perturbed(emission, 1, seed + 1)[0]
    N = len(start["startprob"])
    X = np.concatenate(data)
    X = X.reshape(len(X), -1) if emission == "gaussian" else X.reshape(-1, 1).astype(int)
    lengths = [len(s) for s in data]
    for k in (1, 7):
        if emission == "categorical":
            ref = hmm.CategoricalHMM(N, n_iter=k, tol=-np.inf, init_params="", n_features=4)
            ref.emissionprob_ = start["emissionprob"]
        elif emission == "gaussian":
            ref = hmm.GaussianHMM(N, "diag", n_iter=k, tol=-np.inf, init_params="",
                                  covars_prior=0.0)
            ref.means_, ref.covars_ = start["means"], start["vars"]
        else:
            ref = hmm.PoissonHMM(N, n_iter=k, tol=-np.inf, init_params="")
            ref.lambdas_ = start["lambdas"][:, None]
        ref.startprob_, ref.transmat_ = start["startprob"], start["transmat"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref.fit(X, lengths)
        res = bulkem.fit([data], family="hmm", emission=emission, n_components=N, n_starts=1,
                         init=start, max_iter=k, tol=0.0, backend="cpu", reg_covar=0.0,
                         **({"n_symbols": 4} if emission == "categorical" else {}))
        assert _rel(res.summary.loglik[0], ref.score(X, lengths)) < 1e-8
    # Viterbi paths and log-probabilities as hmmlearn's, for the fitted model
    p = res.params(0)
    order = np.argsort(_key(emission, p), kind="stable")  # (already in table order)
    assert np.array_equal(order, np.arange(N))
    for s in data[:3]:
        xs = s.reshape(len(s), -1) if emission == "gaussian" else s.reshape(-1, 1).astype(int)
        ref_lp, ref_path = _hmmlearn_like(hmm, emission, p, N).decode(xs)
        lp, path = res.decode(0, s)
        assert np.array_equal(path - 1, ref_path)
        assert _rel(lp, ref_lp) < 1e-10


def _hmmlearn_like(hmm, emission, p, N):
    if emission == "categorical":
        m = hmm.CategoricalHMM(N, n_features=4)
        m.emissionprob_ = p["emissionprob"]
    elif emission == "gaussian":
        m = hmm.GaussianHMM(N, "diag")
        m.means_, m.covars_ = p["means"], p["vars"]
    else:
        m = hmm.PoissonHMM(N)
        m.lambdas_ = p["lambdas"][:, None]
    m.startprob_, m.transmat_ = p["startprob"], p["transmat"]
    return m


def test_result_methods_match_the_oracle(seed):
    data = _data("categorical", 2, 4, 10, 30, seed)
    res = bulkem.fit(data, family="hmm", emission="categorical", n_symbols=4, n_components=3,
                     n_starts=3, max_iter=20, seed=seed, backend="cpu")
    p = res.params(1)
    seqs = data[1][:2]
    assert np.isclose(res.score(1, seqs), sum(forward_backward(s, "categorical", p)[0]
                                               for s in seqs), rtol=1e-12)
    post = res.predict_proba(1, seqs)
    for s, g in zip(seqs, post, strict=True):
        assert np.allclose(g, forward_backward(s, "categorical", p)[1], rtol=1e-10, atol=1e-14)
        assert np.allclose(g.sum(axis=1), 1.0)
    lp, path = res.decode(1, seqs[0])
    ref_lp, ref_path = viterbi(seqs[0], "categorical", p)
    assert np.array_equal(path - 1, ref_path) and np.isclose(lp, ref_lp, rtol=1e-12)
    xs, states = res.sample(1, n_sequences=3, length=50, seed=4)
    assert len(xs) == 3 and all(len(x) == 50 for x in xs)
    assert all(set(np.unique(x)) <= {0.0, 1.0, 2.0, 3.0} for x in xs)
    assert all(s.min() >= 1 and s.max() <= 3 for s in states)
    tr = res.transitions
    assert list(tr.columns) == ["dataset", "from_state", "to_state", "prob"]
    assert np.allclose(tr.groupby(["dataset", "from_state"]).prob.sum(), 1.0)
    assert np.allclose(res.components.groupby("dataset").startprob.sum(), 1.0)


@pytest.mark.parametrize("emission", ["categorical", "gaussian"])
def test_loglik_never_decreases_and_truth_stays(emission, seed):
    data = _data(emission, 1, 30, 100, 200, seed)
    N = len(TRUTH[emission]["startprob"])
    kw = dict(family="hmm", emission=emission, n_components=N, n_starts=1, backend="cpu",
              **({"n_symbols": 4} if emission == "categorical" else {}))
    start = _perturbed(emission, 1, seed)[0]
    lls = [bulkem.fit(data, init=start, max_iter=k, tol=0.0, **kw).summary.loglik[0]
           for k in range(1, 9)]
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1]))
    truth = bulkem.fit(data, init=TRUTH[emission], max_iter=200, tol=1e-10, **kw)
    ref = baum_welch(data[0], emission, TRUTH[emission], max_iter=0)["loglik"]
    assert truth.summary.loglik[0] >= ref
    got = truth.params(0)
    assert np.allclose(got["transmat"], TRUTH[emission]["transmat"], atol=0.15)


def test_frozen_transmat_and_long_and_short_sequences(seed):
    rng = np.random.default_rng(seed)
    T = TRUTH["categorical"]
    long = sample(T, "categorical", [100_000], rng)[0]
    short = sample(T, "categorical", [1] * 30, rng)[0]
    res = bulkem.fit([long, short], family="hmm", emission="categorical", n_symbols=4,
                     n_components=3, n_starts=1, init=T, max_iter=3, tol=0.0, params="se",
                     backend="cpu")
    assert (res.summary.status == "max_iter").all()
    for d in (0, 1):
        order = np.argsort(_key("categorical", T), kind="stable")
        assert np.allclose(res.params(d)["transmat"], T["transmat"][np.ix_(order, order)])
    ref = baum_welch(short, "categorical", T, max_iter=3, tol=0.0, update="se")
    assert _rel(res.summary.loglik[1], ref["loglik"]) < 1e-9
    assert np.isfinite(res.summary.loglik[0]) and res.summary.loglik[0] < -1e4


def test_bad_datasets_get_their_own_status():
    good = _data("categorical", 1, 3, 10, 20, 1)[0]
    data = {
        "ok": good,
        "empty_seq": [good[0], np.array([])],
        "symbol": [good[0], np.array([0.0, 1.0, 9.0])],
        "inf": [np.array([0.0, np.inf, 1.0]), good[1]],
        "short": [np.array([1.0])],
        "both": [np.array([]), np.array([0.0, 5.0])],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bulkem.fit(data, family="hmm", emission="categorical", n_symbols=4,
                         n_components=3, n_starts=2, max_iter=5, seed=1, backend="cpu")
    s = res.summary.set_index("dataset")
    assert s.loc["ok", "status"] in ("converged", "max_iter")
    assert (s.drop("ok").status == "invalid_data").all()
    assert s.loc["empty_seq", "message"] == "sequence 1 is empty"
    assert "sequence 1: 1 of 3 values are not symbols 0..3 (first: 9)" in s.loc["symbol", "message"]
    assert s.loc["inf", "message"] == ("sequence 0: 1 of 3 observations are infinite (NaN "
                                       "marks a missing one)")
    assert "too short: 1 observations (not missing), at least 3" in s.loc["short", "message"]
    both = s.loc["both", "message"]  # every problem found
    assert "sequence 0 is empty" in both and "sequence 1: 1 of 2 values are not symbols" in both


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        (dict(emission="gamma"), ValueError, "unknown emission 'gamma'"),
        (dict(params="sx"), ValueError, "params='sx': expected letters from 'ste'"),
        (dict(n_symbols=0), ValueError, "n_symbols must be an integer >= 1"),
        (dict(lengths=[3]), TypeError, "unexpected keyword argument(s) ['lengths']"),
        (dict(init={"startprob": [1.0]}), ValueError, "init has keys"),
    ],
)
def test_bad_arguments_raise_at_once(kwargs, exc, words):
    import re

    with pytest.raises(exc, match=re.escape(words)):
        bulkem.fit([[0.0, 1.0, 2.0, 1.0]], family="hmm", n_components=2, backend="cpu",
                   **{"emission": "categorical", **kwargs})


def test_random_starts_reproducible_and_valid(seed):
    data = _data("gaussian", 3, 3, 15, 30, seed)
    kw = dict(family="hmm", emission="gaussian", n_components=2, n_starts=3, max_iter=5,
              seed=seed, backend="cpu")
    a = bulkem.fit(data, **kw)
    b = bulkem.fit(data[::-1], **kw)
    assert np.array_equal(a.summary.loglik.to_numpy(), b.summary.loglik.to_numpy()[::-1])
    km = bulkem.fit(data, init_method="kmeans++", **kw)
    assert (km.summary.status != "invalid_data").all()
    sv = a.start_values
    assert np.allclose(sv.groupby(["dataset", "start"]).startprob.sum(), 1.0)
    assert (sv.var_1 > 0).all()


def test_float32_close_to_float64(backend, tuning, seed):
    if backend == "cpu":
        pytest.skip("the CPU's float32 chain: tests/test_tmap.py's float32 fits (a kernel of "
                    "its own would cost the test command ~55 s)")
    data = _data("poisson", 2, 3, 10, 20, seed)
    kw = dict(family="hmm", emission="poisson", n_components=2, n_starts=2, max_iter=5,
              tol=0.0, seed=seed, backend=backend, tuning=tuning)
    r64 = bulkem.fit(data, **kw)
    r32 = bulkem.fit(data, dtype="float32", **kw)
    assert np.max(_rel(r32.starts.loglik, r64.starts.loglik)) < 1e-5


@pytest.mark.cuda
def test_gpu_scores_and_paths_equal_the_cpu_ones(seed):
    from bulkem.engines import infer

    data = _data("gaussian", 1, 5, 3, 9, seed)[0]
    res = bulkem.fit([data], family="hmm", emission="gaussian", n_components=2, n_starts=2,
                     max_iter=5, seed=seed, backend="cpu")
    m, p = res._model, res._get(0)[0][None]
    which = np.zeros(len(data), np.int64)
    a, b = (infer.score(m, p, which, data, backend=k) for k in ("cpu", "cuda"))
    assert np.max(_rel(b, a)) < 1e-12
    (pa, la), (pb, lb) = (infer.viterbi(m, p, which, data, backend=k) for k in ("cpu", "cuda"))
    assert all(np.array_equal(x, y) for x, y in zip(pa, pb, strict=True))
    assert np.max(_rel(lb, la)) < 1e-12


@pytest.mark.cuda
@pytest.mark.parametrize("params", ["ste", "se"])
def test_many_states_regime_matches_the_bulk_cpu_engine(small_many_states, seed, params):
    """More states than Tuning.hmm_many_states: a matrix product per step (forced low here;
    small tiles under the simulator: the ``small_many_states`` fixture). ``params="se"``
    (transitions held) on a real GPU only: under the simulator each case costs the test
    command ~40 s."""
    from conftest import SIMULATED

    if SIMULATED and params != "ste":
        pytest.skip("params='se' in the many-states engine: on a real GPU only")
    from bulkem.tuning import Tuning

    rng = np.random.default_rng(seed)
    # 3 states x 4 symbols: the CPU kernels of the other categorical tests
    data = [[rng.integers(0, 4, n).astype(float) for n in (6, 2, 9)],
            [rng.integers(0, 4, n).astype(float) for n in (4, 5)]]
    kw = dict(family="hmm", emission="categorical", n_symbols=4, n_components=3, n_starts=2,
              max_iter=6, tol=1e-4, seed=seed, params=params)
    a = bulkem.fit(data, backend="cpu", **kw)
    b = bulkem.fit(data, backend="cuda", tuning=Tuning(hmm_many_states=2), **kw)
    assert (a.starts.status == b.starts.status).all()
    assert (a.starts.n_iter == b.starts.n_iter).all()
    assert np.max(_rel(b.starts.loglik, a.starts.loglik)) < 1e-12
    assert np.allclose(a.transitions.prob, b.transitions.prob, rtol=1e-10, atol=1e-14)
    assert np.allclose(a.components.prob_1, b.components.prob_1, rtol=1e-10, atol=1e-14)


def test_whole_numbers_without_an_emission_warn():
    """``family="hmm"`` without ``emission=`` fits Gaussian emissions: on symbols or counts
    it says so (no kernel runs); ``emission="gaussian"`` or real values are silent."""
    import warnings

    from bulkem import models

    fam = models.get("hmm")
    symbols = fam.read([[np.array([0.0, 1.0, 2.0, 1.0])]], "dataset", "value", {})
    with pytest.warns(UserWarning, match="emission='categorical'"):
        fam.model(symbols, 2, {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fam.model(symbols, 2, {"emission": "gaussian"})
        fam.model(fam.read([[np.array([0.5, 1.0, 2.0])]], "dataset", "value", {}), 2, {})
