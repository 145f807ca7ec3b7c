"""Sequence weights of hidden Markov models and run weights of TMAPs (``fit(weights=...)``):
the engines against the oracle's weighted Baum-Welch, integer weights against repeated
sequences (runs), a weight of 0 against the sequence left out, bad weights and bad arguments.

Kernels on the CPU: the weighted categorical HMM of 3 states and 4 symbols (bulk, float64)
and the weighted TMAP of orders (1, 2, 3), which the R tests share; the wide regime and a
weighted Gaussian HMM run on the CUDA engine (the simulator in the test command)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from reference_hmm import baum_welch, forward_backward, sample

import bulkem

# Iteration by iteration against plain-EM oracles (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

CAT = dict(startprob=np.array([0.6, 0.3, 0.1]),
           transmat=np.array([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.2, 0.2, 0.6]]),
           emissionprob=np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1],
                                  [0.05, 0.05, 0.2, 0.7]]))
GAUSS = dict(startprob=np.array([0.5, 0.5]), transmat=np.array([[0.9, 0.1], [0.2, 0.8]]),
             means=np.array([[-1.0, 0.5], [2.0, 1.5]]), vars=np.array([[0.5, 1.0], [0.8, 0.3]]))
KW = dict(family="hmm", emission="categorical", n_symbols=4, n_components=3)


def _seqs(n, seed, lo=3, hi=15, truth=CAT, emission="categorical"):
    rng = np.random.default_rng(seed)
    return sample(truth, emission, rng.integers(lo, hi, n), rng)[0]


def _start(seed, truth=CAT):
    """A start near ``truth`` (bulkem's init form)."""
    rng = np.random.default_rng(seed)
    p = {}
    for key, v in truth.items():
        if key in ("startprob", "transmat", "emissionprob"):
            w = v * rng.uniform(0.5, 1.5, v.shape)
            p[key] = w / w.sum(axis=-1, keepdims=True)
        else:
            p[key] = v + rng.normal(0, 0.3, v.shape) if key == "means" else v * 1.3
    return p


def _stack(starts):
    return {k: np.array([s[k] for s in starts]) for k in starts[0]}


def _rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b))


def _repeated(seqs, w):
    return [s for s, k in zip(seqs, w, strict=True) for _ in range(int(k))]


def test_weighted_fit_is_the_oracles_weighted_baum_welch(backend, tuning, seed):
    small = backend == "cuda"
    data = [_seqs(3 if small else 6, seed), _seqs(4 if small else 7, seed + 1)]
    rng = np.random.default_rng(seed + 2)
    w = [rng.uniform(0.2, 3.0, len(d)) for d in data]
    w[1][1] = 0.0  # left out
    starts = [_start(seed + 3), _start(seed + 4)]
    max_iter = 4 if small else 12
    res = bulkem.fit(data, **KW, n_starts=2, init=_stack(starts), max_iter=max_iter, tol=1e-7,
                     seed=seed, backend=backend, tuning=tuning, weights=w)
    n_seen = [sum(len(s) for s, k in zip(d, wk, strict=True) if k > 0)
              for d, wk in zip(data, w, strict=True)]
    np.testing.assert_array_equal(res.summary.n_obs, n_seen)
    np.testing.assert_allclose(res.summary.sum_weights,
                               [np.dot(wk, [len(s) for s in d]) for d, wk in zip(data, w,
                                                                                  strict=True)],
                               rtol=1e-12)
    for row in res.starts.itertuples():
        ref = baum_welch(data[row.dataset], "categorical", starts[row.start], max_iter=max_iter,
                         tol=1e-7, weights=w[row.dataset])
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    for s in res.summary.itertuples():
        ref = baum_welch(data[s.dataset], "categorical", starts[s.best_start],
                         max_iter=max_iter, tol=1e-7, weights=w[s.dataset])
        order = np.argsort(ref["emissionprob"] @ np.arange(4), kind="stable")
        got = res.params(s.dataset)
        np.testing.assert_allclose(got["transmat"], ref["transmat"][np.ix_(order, order)],
                                   rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(got["startprob"], ref["startprob"][order], rtol=1e-7,
                                   atol=1e-12)
        k = (s.aic + 2 * s.loglik) / 2  # BIC's n: the weighted number of observations
        assert np.isclose(s.bic, -2 * s.loglik + k * np.log(s.sum_weights), rtol=1e-12)


def test_weights_travel_with_their_sequences_in_the_wide_regimes(backend, tuning, seed):
    """The wide engines deal a dataset's sequences to threads in another order (the GPU's
    stored longest first): each keeps its weight; and with more states than
    ``Tuning.hmm_many_states`` the GPU fits a weighted model with the bulk kernel."""
    if backend == "cpu":
        pytest.skip("the CPU's wide weighted kernel would cost the test command ~30 s; the "
                    "weights' reordering is the data path's, which the CUDA case runs")
    seqs = _seqs(23, seed, lo=2, hi=12)
    w = np.random.default_rng(seed).uniform(0.1, 4.0, len(seqs))
    start = _start(seed + 1)
    max_iter = 3 if backend == "cuda" else 8
    kw = dict(**KW, n_starts=1, init=start, max_iter=max_iter, tol=0.0, backend=backend,
              weights=[w])
    wide = tuning.replace(strategy="wide", wide_cpu_chunk_units=4, wide_cuda_threads=32,
                          wide_cuda_reduce_threads=32, wide_cuda_reduce_cols=8,
                          wide_cuda_check_every=2, wide_cuda_max_blocks=1)
    ref = baum_welch(seqs, "categorical", start, max_iter=max_iter, tol=0.0, weights=w)
    fits = [bulkem.fit([seqs], tuning=wide, **kw)]
    if backend == "cuda":
        fits.append(bulkem.fit([seqs], tuning=tuning.replace(hmm_many_states=2), **kw))
    for res in fits:
        assert res.summary.n_iter[0] == max_iter
        assert _rel(res.summary.loglik[0], ref["loglik"]) < 1e-9
        got = res.params(0)["transmat"]
        assert np.allclose(np.sort(got.ravel()), np.sort(ref["transmat"].ravel()), rtol=1e-8)


def test_float32_weighted_fit_on_the_gpu(backend, tuning, seed):
    """float32: the weights in the compute dtype, the returned log-likelihood in float64."""
    if backend != "cuda":
        pytest.skip("the GPU's float32 (the CPU's float32 kernels: not compiled here)")
    data = [_seqs(4, seed)]
    w = [np.array([0.5, 2.0, 1.25, 3.0])]
    kw = dict(**KW, n_starts=1, init=_start(seed), max_iter=4, tol=0.0, weights=w)
    a = bulkem.fit(data, backend="cpu", **kw)
    b = bulkem.fit(data, backend="cuda", dtype="float32", tuning=tuning, **kw)
    assert _rel(b.summary.loglik[0], a.summary.loglik[0]) < 1e-5
    assert np.allclose(b.params(0)["transmat"], a.params(0)["transmat"], atol=1e-4)


def test_integer_weights_fit_as_repeated_sequences(seed):
    """From the same start, weights 0..3 give the fit of the sequences repeated that often:
    log-likelihood, parameters, BIC's n, the ICL's entropy and the standard errors."""
    seqs = _seqs(8, seed)
    w = np.array([1, 3, 0, 2, 1, 0, 3, 1], dtype=float)
    kw = dict(**KW, n_starts=1, init=_start(seed + 1), max_iter=15, tol=0.0, backend="cpu",
              se=True)
    a = bulkem.fit([seqs], weights=[w], **kw)
    b = bulkem.fit([_repeated(seqs, w)], **kw)
    assert _rel(a.summary.loglik[0], b.summary.loglik[0]) < 1e-10
    for key, v in b.params(0).items():
        np.testing.assert_allclose(a.params(0)[key], v, rtol=1e-9, atol=1e-13)
    assert a.summary.sum_weights[0] == b.summary.n_obs[0]
    assert _rel(a.summary.bic[0], b.summary.bic[0]) < 1e-10
    assert _rel(a.entropy()[0], b.entropy()[0]) < 1e-9
    np.testing.assert_allclose(a.components.se_startprob, b.components.se_startprob,
                               rtol=1e-5)
    # what a fitted model does with new sequences: as unweighted
    assert _rel(a.score(0, seqs[0]), b.score(0, seqs[0])) < 1e-9
    assert np.array_equal(a.decode(0, seqs[1])[1], b.decode(0, seqs[1])[1])


def test_gaussian_weight_column_of_a_long_frame(backend, tuning, seed):
    """A long DataFrame's weight column (one weight per sequence, on each of its rows) as
    repeated sequences; read as an emission dimension too, it is refused.  On the CUDA
    engine (under the simulator, no kernel to compile; the CPU runs the same chain)."""
    if backend == "cpu":
        pytest.skip("a weighted Gaussian HMM kernel of the CPU would cost the test command "
                    "~30 s; the data path is the same on both engines")
    seqs = _seqs(6, seed, lo=4, hi=12, truth=GAUSS, emission="gaussian")
    w = np.array([2, 1, 0, 3, 1, 2], dtype=float)
    rows = [pd.DataFrame({"dataset": "a", "sequence": k, "x1": s[:, 0], "x2": s[:, 1],
                          "w": w[k]}) for k, s in enumerate(seqs)]
    frame = pd.concat(rows, ignore_index=True)
    kw = dict(family="hmm", emission="gaussian", n_components=2, n_starts=1,
              init=_start(seed, GAUSS), max_iter=10, tol=0.0, backend="cuda", tuning=tuning)
    a = bulkem.fit(frame, value_col=["x1", "x2"], weights="w", **kw)
    b = bulkem.fit([_repeated(seqs, w)], **kw)
    assert _rel(a.summary.loglik[0], b.summary.loglik[0]) < 1e-10
    for key, v in b.params(0).items():
        np.testing.assert_allclose(a.params("a")[key], v, rtol=1e-9, atol=1e-13)
    with pytest.raises(ValueError, match="read as a dimension of the Gaussian emission"):
        bulkem.fit(frame, weights="w", **kw)
    frame.loc[3, "w"] = 7.0  # not constant within sequence 0
    with pytest.raises(ValueError, match="not constant within dataset 'a', sequence 0"):
        bulkem.fit(frame, value_col=["x1", "x2"], weights="w", **kw)


def test_weight_zero_leaves_the_sequence_out(seed):
    seqs = _seqs(5, seed)
    kw = dict(**KW, n_starts=1, init=_start(seed), max_iter=10, tol=0.0, backend="cpu")
    a = bulkem.fit([seqs], weights=[[1, 1, 0, 1, 1]], **kw)
    b = bulkem.fit([seqs[:2] + seqs[3:]], **kw)
    assert _rel(a.summary.loglik[0], b.summary.loglik[0]) < 1e-12
    assert a.summary.n_obs[0] == b.summary.n_obs[0]
    for key, v in b.params(0).items():
        np.testing.assert_allclose(a.params(0)[key], v, rtol=1e-12, atol=1e-15)
    # the messages name the sequences as given
    bad = [s.copy() for s in seqs]
    bad[3][0] = 9.0
    with pytest.warns(UserWarning, match="invalid"):
        r = bulkem.fit([bad], weights=[[1, 1, 0, 1, 1]], **kw)
    assert r.summary.message[0].startswith("sequence 3: 1 of")
    with pytest.warns(UserWarning, match="invalid"):
        r = bulkem.fit([seqs], weights=[np.zeros(5)], **kw)
    assert r.summary.message[0] == "no sequences of positive weight"


def test_bad_weights_make_their_dataset_invalid(seed):
    data = [_seqs(3, seed + k) for k in range(4)]
    w = [np.array([1.0, np.nan, 2.0]), np.array([1.0, 1.0, np.inf]),
         np.array([-1.0, 1.0, 1.0]), np.array([1.0, 2.0, 0.5])]
    with pytest.warns(UserWarning, match="3 of 4 datasets are invalid"):
        res = bulkem.fit(data, **KW, n_starts=2, max_iter=5, seed=seed, backend="cpu",
                         weights=w)
    s = res.summary
    assert s.status.tolist()[:3] == ["invalid_data"] * 3 and s.status[3] != "invalid_data"
    assert s.message[0].startswith("sequence 1: weight nan (weights must be finite and >= 0")
    assert s.message[1].startswith("sequence 2: weight inf")
    assert s.message[2].startswith("sequence 0: weight -1")
    assert np.isnan(s.sum_weights[:3]).all() and s.sum_weights[3] > 0


def test_misaligned_weights_raise(seed):
    data = {"a": _seqs(2, seed), "b": _seqs(3, seed + 1)}
    kw = dict(**KW, n_starts=1, max_iter=2, backend="cpu")
    with pytest.raises(ValueError, match="holds 1 entries for 2 dataset"):
        bulkem.fit(data, weights=[[1.0, 1.0]], **kw)
    with pytest.raises(ValueError, match=r"dataset 'b' has 3 sequences but its weights have "
                                         r"shape \(2,\); expected \(3,\)"):
        bulkem.fit(data, weights={"a": [1, 1], "b": [1, 1]}, **kw)
    with pytest.raises(ValueError, match=r"no entry for dataset\(s\) \['b'\]"):
        bulkem.fit(data, weights={"a": [1, 1]}, **kw)
    with pytest.raises(ValueError, match="names a column, but datasets is a dict"):
        bulkem.fit(data, weights="w", **kw)
    with pytest.raises(ValueError, match="are not numbers"):
        bulkem.fit(data, weights={"a": ["x", "y"], "b": [1, 1, 1]}, **kw)
    from bulkem.scale import combine

    with pytest.raises(ValueError, match="pass the column's name"):  # (Dask, streaming)
        combine.check_splittable(dict(KW, weights={"a": [1, 1], "b": [1, 1, 1]}))


def test_em_never_lowers_the_weighted_loglik(seed):
    data = [_seqs(6, seed + k) for k in range(2)]
    w = [np.random.default_rng(seed + k).uniform(0.1, 5.0, 6) for k in range(2)]
    res = bulkem.fit(data, **KW, n_starts=3, max_iter=25, tol=0.0, seed=seed, backend="cpu",
                     weights=w, trace=True)
    tr = res.trace
    step = tr.groupby(["dataset", "start"]).loglik.diff().dropna()
    assert (step >= -1e-9 * tr.loglik.abs().max()).all()


def test_loglik_is_the_weighted_sum_of_the_sequences(seed):
    data = [_seqs(4, seed), _seqs(3, seed + 1)]
    w = [np.array([0.5, 2.0, 0.0, 1.5]), np.array([3.0, 1.0, 0.25])]
    out = bulkem.loglik(data, **KW, params=CAT, backend="cpu", weights=w)
    for d, wk, ll in zip(data, w, out.loglik, strict=True):
        ref = sum(k * forward_backward(s, "categorical", CAT)[0]
                  for s, k in zip(d, wk, strict=True))
        assert _rel(ll, ref) < 1e-12


# --- TMAP: one weight per run --------------------------------------------------------------

ORDERS = (1, 2, 3)
TMAP = dict(alpha=np.array([0.5, 0.3, 0.2]),
            pi=np.array([[0.6, 0.2, 0.1], [0.2, 0.5, 0.2], [0.1, 0.3, 0.5]]),
            rates=np.array([2.0, 1.0, 0.5]))


def test_tmap_integer_run_weights_fit_as_repeated_runs(seed):
    from reference_tmap import sample as sample_runs

    runs = sample_runs(TMAP, ORDERS, 15, np.random.default_rng(seed))
    w = np.random.default_rng(seed + 1).integers(0, 4, len(runs)).astype(float)
    kw = dict(family="tmap", orders=ORDERS, n_starts=1, init=TMAP, max_iter=8, tol=0.0,
              backend="cpu")
    a = bulkem.fit([runs], weights=[w], **kw)
    b = bulkem.fit([_repeated(runs, w)], **kw)
    assert _rel(a.summary.loglik[0], b.summary.loglik[0]) < 1e-10
    for key in ("alpha", "pi", "rates"):
        np.testing.assert_allclose(a.params(0)[key], b.params(0)[key], rtol=1e-9, atol=1e-13)
    assert a.summary.sum_weights[0] == b.summary.n_obs[0]
    # a long frame's weight column; a bad weight makes its trace invalid, named by its run
    lens = [len(u) for u in runs]
    frame = pd.DataFrame({"trace": "t", "run": np.repeat(np.arange(len(runs)), lens),
                          "value": np.concatenate(runs), "w": np.repeat(w, lens)})
    c = bulkem.fit(frame, weights="w", **kw)
    assert c.summary.loglik[0] == a.summary.loglik[0]
    bad = w.copy()
    bad[np.flatnonzero(w > 0)[1]] = -2.0
    with pytest.warns(UserWarning, match="invalid"):
        d = bulkem.fit([runs, runs], weights=[bad, w], **kw)
    assert d.summary.status.tolist()[0] == "invalid_data"
    assert d.summary.message[0].startswith(f"run {np.flatnonzero(w > 0)[1]}: weight -2 ")
    assert d.summary.loglik[1] == a.summary.loglik[0]
