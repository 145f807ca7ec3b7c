"""TMAPs with Erlang branches: both engines and both regimes against the oracle, the matrix
form, moments, EM properties, scale invariance, random starts, bad input."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from reference_tmap import em, forward_backward, matrix_loglik, matrix_moments, sample

import bulkem

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")

ORDERS = (1, 2, 3)
TRUTH = dict(alpha=np.array([0.5, 0.3, 0.2]),
             pi=np.array([[0.6, 0.2, 0.1], [0.2, 0.5, 0.2], [0.1, 0.3, 0.5]]),
             rates=np.array([2.0, 1.0, 0.5]))


def _traces(n_traces, n_runs, seed, p=TRUTH, orders=ORDERS):
    rng = np.random.default_rng(seed)
    return [sample(p, orders, n_runs, rng) for _ in range(n_traces)]


def _starts(k, seed, p=TRUTH):
    """k starting parameter sets near ``p`` (in bulkem's init form)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        a = p["alpha"] * rng.uniform(0.5, 1.5, len(p["alpha"]))
        pi = p["pi"] * rng.uniform(0.5, 1.5, p["pi"].shape)
        pi *= rng.uniform(0.7, 0.95, (len(pi), 1)) / pi.sum(axis=1, keepdims=True)
        out.append(dict(alpha=a / a.sum(), pi=pi, rates=p["rates"] * rng.uniform(0.5, 2, 3)))
    return out


def _stack(starts):
    return {k: np.array([s[k] for s in starts]) for k in starts[0]}


def _rel(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b))


@pytest.fixture
def wide(tuning):
    """A tuning of the wide regime for every batch, with small chunks, blocks and grids."""
    return tuning.replace(strategy="wide", wide_cpu_chunk_units=7, wide_cuda_threads=32,
                          wide_cuda_reduce_threads=32, wide_cuda_reduce_cols=8,
                          wide_cuda_check_every=2, wide_cuda_max_blocks=2)


def test_bulk_matches_oracle_from_given_starts(backend, tuning, seed):
    small = backend == "cuda"
    data = _traces(2, 10 if small else 30, seed)
    starts = _starts(2, seed)
    max_iter = 4 if small else 15
    res = bulkem.fit(data, family="tmap", orders=ORDERS, n_starts=2, init=_stack(starts),
                     max_iter=max_iter, tol=1e-7, backend=backend, tuning=tuning)
    for row in res.starts.itertuples():
        ref = em(data[row.trace], starts[row.start], ORDERS, max_iter=max_iter, tol=1e-7)
        assert (row.status, row.n_iter) == (ref["status"], ref["n_iter"])
        assert _rel(row.loglik, ref["loglik"]) < 1e-9
    for s in res.summary.itertuples():
        ref = em(data[s.trace], starts[s.best_start], ORDERS, max_iter=max_iter, tol=1e-7)
        got = res.params(s.trace)
        for key in ("alpha", "pi", "rates"):
            assert np.allclose(got[key], ref[key], rtol=1e-7, atol=1e-12)
    comp = res.components
    assert list(comp.columns) == ["trace", "branch", "order", "rate", "alpha", "exit"]
    assert comp.order.tolist() == list(ORDERS) * 2
    tr = res.transitions
    assert list(tr.columns) == ["trace", "from_branch", "to_branch", "pi"]
    rows = tr.groupby(["trace", "from_branch"]).pi.sum().to_numpy()
    assert np.allclose(rows + comp.exit.to_numpy(), 1.0)
    st = res.start_transitions  # issue 38: named as transitions, each start's own pi
    assert list(st.columns) == ["trace", "start", "from_branch", "to_branch", "pi"]
    for (_, start), g in st.groupby(["trace", "start"]):
        assert np.array_equal(g.pi.to_numpy(), np.asarray(starts[start]["pi"]).ravel())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_regime_matches_oracle_and_bulk(backend, tuning, wide, dtype, seed):
    if backend == "cpu" and dtype == "float32":
        pytest.skip("the CPU's float32 chain is tested in the bulk regime (the wide loop's "
                    "float32 kernel would cost the test command ~40 s)")
    data = _traces(1, 40, seed)
    start = _starts(1, seed + 1)[0]
    max_iter = (3 if dtype == "float64" else 2) if backend == "cuda" else 8
    kw = dict(family="tmap", orders=ORDERS, n_starts=1, init=start, max_iter=max_iter,
              tol=0.0, dtype=dtype)
    res = bulkem.fit(data, backend=backend, tuning=wide, **kw)
    ref = em(data[0], start, ORDERS, max_iter=max_iter, tol=0.0)
    assert (res.summary.status[0], res.summary.n_iter[0]) == ("max_iter", max_iter)
    tol = 1e-9 if dtype == "float64" else 1e-6
    assert _rel(res.summary.loglik[0], ref["loglik"]) < tol
    assert np.allclose(res.params(0)["rates"], ref["rates"], rtol=1e-8 if tol < 1e-6 else 1e-4)
    if dtype == "float64":  # the bulk engine on the CPU, for the same fit
        bulk = bulkem.fit(data, backend="cpu", tuning=wide.replace(strategy="bulk"), **kw)
        assert _rel(res.summary.loglik[0], bulk.summary.loglik[0]) < 1e-9


def test_likelihood_by_the_matrix_form(seed):
    rng = np.random.default_rng(seed)
    orders = (1, 1, 2)  # (as test_equal_orders_listed_by_mean: compiled once)
    p = dict(alpha=rng.dirichlet(np.ones(3)), rates=rng.uniform(0.3, 3.0, 3))
    p["pi"] = rng.dirichlet(np.ones(3), 3) * rng.uniform(0.6, 0.9, (3, 1))
    runs = sample(p, orders, 6, rng)
    for x in runs:  # the oracle's normal form against expm on (alpha, D0, D1)
        assert _rel(forward_backward(x, p, orders)[0], matrix_loglik(x, p, orders)) < 1e-10
    res = bulkem.fit([runs], family="tmap", orders=orders, n_starts=1, init=p, max_iter=1,
                     backend="cpu")
    fitted = res.params(0)
    want = sum(matrix_loglik(x, fitted, orders) for x in runs)
    assert _rel(res.score(0, runs), want) < 1e-10
    assert _rel(res.summary.loglik[0], want) < 1e-10  # (the returned parameters' likelihood)


def test_moments_and_samples(seed):
    res = bulkem.fit(_traces(1, 60, seed), family="tmap", n_starts=2, max_iter=10, seed=seed,
                     backend="cpu")
    p = res.params(0)
    got, want = res.moments(0), matrix_moments(p, ORDERS)
    for key in want:
        assert _rel(got[key], want[key]) < 1e-10
    truth = bulkem.models.tmap.moments(TRUTH["alpha"], TRUTH["pi"], TRUTH["rates"], ORDERS)
    for key, v in matrix_moments(TRUTH, ORDERS).items():
        assert _rel(truth[key], v) < 1e-10
    runs, branches = res.sample(0, 20_000, seed=3, return_branches=True)
    assert len(runs) == 20_000 and all(len(u) >= 1 and (u > 0).all() for u in runs[:100])
    assert all(1 <= b.min() and b.max() <= 3 for b in branches[:100])
    emp = bulkem.models.tmap.empirical_moments(runs)
    assert _rel(emp["mean_run_length"], got["mean_run_length"]) < 0.05
    assert _rel(emp["mean_interarrival"], got["mean_interarrival"]) < 0.05
    assert abs(emp["corr_x1_x2"] - got["corr_x1_x2"]) < 0.05
    again = res.sample(0, 20_000, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(again, runs, strict=True))


def test_scale_invariance(seed):
    data = _traces(2, 40, seed)
    kw = dict(family="tmap", n_starts=3, max_iter=20, tol=1e-8, seed=seed, backend="cpu")
    base = bulkem.fit(data, **kw)
    n = base.summary.n_obs.to_numpy()
    for c in (1e-6, 1e6):
        res = bulkem.fit([[x * c for x in runs] for runs in data], **kw)
        s = res.summary
        assert not s.loglik.isna().any()
        assert (s.best_start == base.summary.best_start).all()
        assert (s.n_iter == base.summary.n_iter).all()
        assert np.all(_rel(s.loglik + n * np.log(c), base.summary.loglik) < 1e-9)
        for t in (0, 1):
            a, b = res.params(t), base.params(t)
            assert np.allclose(a["rates"] * c, b["rates"], rtol=1e-8)
            assert np.allclose(a["pi"], b["pi"], rtol=1e-8, atol=1e-14)
            assert np.allclose(a["alpha"], b["alpha"], rtol=1e-8, atol=1e-14)
        sv, bv = res.start_values, base.start_values
        assert np.allclose(sv.rate * c, bv.rate, rtol=1e-12)
        assert np.array_equal(sv.alpha, bv.alpha)
    r32 = bulkem.fit([[x * 1e6 for x in runs] for runs in data], dtype="float32",
                     **{**kw, "tol": 0.0, "max_iter": 5})
    r64 = bulkem.fit(data, **{**kw, "tol": 0.0, "max_iter": 5})
    assert np.all(_rel(r32.starts.loglik + np.repeat(n, 3) * np.log(1e6), r64.starts.loglik)
                  < 1e-6)


def test_float32_close_to_float64(backend, tuning, seed):
    data = _traces(2, 8 if backend == "cuda" else 40, seed)
    kw = dict(family="tmap", n_starts=2, max_iter=4, tol=0.0, seed=seed, backend=backend,
              tuning=tuning)
    r64 = bulkem.fit(data, **kw)
    r32 = bulkem.fit(data, dtype="float32", **kw)
    assert np.max(_rel(r32.starts.loglik, r64.starts.loglik)) < 1e-6


def test_em_never_lowers_the_likelihood_and_truth_stays(seed):
    data = _traces(1, 80, seed)
    start = _starts(1, seed)[0]
    kw = dict(family="tmap", n_starts=1, backend="cpu")
    lls = [bulkem.fit(data, init=start, max_iter=k, tol=0.0, **kw).summary.loglik[0]
           for k in (1, 2, 3, 5, 8)]
    assert np.all(np.diff(lls) >= -1e-12 * np.abs(lls[:-1]))
    ref = em(data[0], start, ORDERS, max_iter=8, tol=0.0)["trace"]
    assert _rel(lls, np.array(ref)[[1, 2, 3, 5, 8]]).max() < 1e-9
    big = _traces(1, 3000, seed)
    truth = bulkem.fit(big, init=TRUTH, max_iter=50, tol=1e-9, **kw)
    got = truth.params(0)
    assert truth.summary.loglik[0] >= em(big[0], TRUTH, ORDERS, max_iter=0)["loglik"]
    assert np.allclose(got["rates"], TRUTH["rates"], rtol=0.15)
    assert np.allclose(got["pi"], TRUTH["pi"], atol=0.08)


def test_random_starts_are_the_papers_and_reproducible(seed):
    data = _traces(3, 25, seed)
    data[1][3] = data[1][3] * 1.0
    data[1][3][0] = 500.0  # a far outlier: rates scaled so that x_max lambda_max = 60
    kw = dict(family="tmap", n_starts=4, max_iter=2, seed=seed, backend="cpu")
    a = bulkem.fit(data, **kw)
    b = bulkem.fit(data[::-1], **kw)
    assert np.array_equal(a.summary.loglik.to_numpy(), b.summary.loglik.to_numpy()[::-1])
    sv = a.start_values
    assert list(sv.columns[:3]) == ["trace", "start", "branch"]
    assert np.allclose(sv.groupby(["trace", "start"]).alpha.sum(), 1.0)
    for t, runs in enumerate(data):
        kbar = np.mean([len(u) for u in runs])
        x = np.concatenate(runs)
        mine = sv[sv.trace == t]
        assert np.allclose(mine.exit, 1.0 / kbar)
        rates = np.array(ORDERS) / x.mean()
        if x.max() * rates.max() > 60:
            rates *= 60 / (x.max() * rates.max())
        assert np.allclose(mine.rate.to_numpy().reshape(4, 3), rates[None])
    assert not np.allclose(sv[sv.trace == 0].alpha.to_numpy()[:3],
                           sv[sv.trace == 0].alpha.to_numpy()[3:6])


def test_input_forms_agree(seed):
    data = _traces(2, 12, seed)
    kw = dict(family="tmap", n_starts=2, max_iter=5, seed=seed, backend="cpu")
    res = bulkem.fit(data, **kw)
    rows = [(t, r, v) for t, runs in enumerate(data) for r, u in enumerate(runs) for v in u]
    df = pd.DataFrame(rows, columns=["trace", "run", "value"])
    mixed = df.sort_values(["run", "trace"], kind="stable")  # the traces' runs interleaved
    for other in (bulkem.fit(df, **kw), bulkem.fit(dict(enumerate(data)), **kw),
                  bulkem.fit(mixed, **kw),
                  bulkem.fit(df.rename(columns={"trace": "T", "run": "R", "value": "V"}),
                             dataset_col="T", run_col="R", value_col="V", **kw)):
        assert np.array_equal(other.summary.loglik, res.summary.loglik)
    one = bulkem.fit(data[0], **kw)  # a list of runs is one trace
    assert len(one.summary) == 1 and one.summary.loglik[0] == res.summary.loglik[0]
    # rows of different runs interleaved (each run's rows in order): split by grouping
    step = df.groupby(["trace", "run"]).cumcount().to_numpy()
    apart = df.iloc[np.argsort(step, kind="stable")]
    assert np.array_equal(bulkem.fit(apart, **kw).summary.loglik, res.summary.loglik)


def test_bad_traces_get_their_own_status():
    good = _traces(1, 10, 1)[0]
    data = {
        "ok": good,
        "negative": good[:3] + [np.array([1.0, -2.0, 3.0])] + good[3:],
        "nan": [np.array([1.0, np.nan]), good[0]],
        "empty_run": [good[0], np.array([])],
        "zero": [np.array([0.0, 1.0])] * 5,
        "short": [np.array([1.0])],
    }
    kw = dict(family="tmap", n_starts=2, max_iter=5, seed=1, backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bulkem.fit(data, **kw)
        dropped = bulkem.fit(data, drop_bad_runs=True, **kw)
    s = res.summary.set_index("trace")
    assert s.loc["ok", "status"] in ("converged", "max_iter")
    assert (s.drop("ok").status == "invalid_data").all()
    assert s.loc["negative", "message"] == ("run 3: 1 of 3 values are not positive and finite "
                                            "(first: -2)")
    assert s.loc["nan", "message"].startswith("run 0: 1 of 2 values are not positive")
    assert s.loc["empty_run", "message"] == "run 1 is empty"
    assert s.loc["zero", "message"].endswith("; 5 bad runs in all")
    assert "too short: 1 values, at least 3" in s.loc["short", "message"]
    d = dropped.summary.set_index("trace")
    assert d.loc["negative", "status"] != "invalid_data"
    assert d.loc["negative", "message"].startswith("dropped 1 of 11 runs (first: run 3: 1 of 3")
    assert d.loc["negative", "n_obs"] == sum(len(u) for u in good)
    assert d.loc["zero", "status"] == "invalid_data"
    assert d.loc["zero", "message"].startswith("dropped 5 of 5 runs") and "no runs" in \
        d.loc["zero", "message"]
    assert np.isclose(d.loc["negative", "loglik"], s.loc["ok", "loglik"])


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        (dict(orders=(0, 1)), ValueError, "an integer from 1 to 10000 (found 0)"),
        (dict(orders="123"), ValueError, "expected a sequence (tuple, list or array) of integers"),
        (dict(orders=(1, 2, 3), n_components=2), ValueError, "n_components=2 but orders"),
        (dict(lengths=[3]), TypeError, "unexpected keyword argument(s) ['lengths']"),
        (dict(drop_bad_runs="yes"), TypeError, "drop_bad_runs must be True or False"),
        (dict(value_col=["a", "b"]), ValueError, "takes one value column"),
        (dict(init={"alpha": [1.0, 0, 0], "pi": np.full((3, 3), 0.4), "rates": [1, 1, 1]}),
         ValueError, "init['pi'] rows must sum to at most 1"),
        (dict(init={"alpha": [1.0, 0, 0], "transmat": np.full((3, 3), 0.3),
                    "rates": [1, -1, 1]}), ValueError, "init['rates'] must be non-negative"),
        (dict(init={"alpha": [0.5, 0, 0], "pi": np.full((3, 3), 0.3), "rates": [1, 1, 1]}),
         ValueError, "init['alpha'] must sum to 1"),
        (dict(init={"alpha": [1.0, 0, 0]}), ValueError, "init has keys"),
        (dict(init_method="subset"), ValueError, "is not available for the 'tmap' family"),
    ],
)
def test_bad_arguments_raise_at_once(kwargs, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        bulkem.fit([[[1.0, 2.0], [0.5]]], family="tmap", backend="cpu", **kwargs)


def test_n_components_alone_gives_orders_one_to_r():
    res = bulkem.fit(_traces(1, 20, 2), family="tmap", n_components=3, n_starts=1, max_iter=2,
                     seed=1, backend="cpu")  # (R = 3: no new compilation)
    assert res.components.order.tolist() == [1, 2, 3]
    assert res.n_components == 3
    from bulkem.models.tmap import TMAP

    assert TMAP.model([], 2, {}).orders == (1, 2)


def test_equal_orders_listed_by_mean(seed):
    orders = (1, 1, 2)
    p = dict(alpha=np.array([0.4, 0.4, 0.2]), rates=np.array([3.0, 0.5, 1.0]),
             pi=np.array([[0.5, 0.2, 0.1], [0.2, 0.5, 0.2], [0.3, 0.3, 0.3]]))
    swapped = dict(alpha=p["alpha"][[1, 0, 2]], rates=p["rates"][[1, 0, 2]],
                   pi=p["pi"][np.ix_([1, 0, 2], [1, 0, 2])])
    runs = sample(p, orders, 30, np.random.default_rng(seed))
    a = bulkem.fit([runs], family="tmap", orders=orders, init=p, max_iter=3, backend="cpu")
    b = bulkem.fit([runs], family="tmap", orders=orders, init=swapped, max_iter=3,
                   backend="cpu")
    for key in ("alpha", "pi", "rates"):
        assert np.allclose(a.params(0)[key], b.params(0)[key], rtol=1e-10)
    r = a.params(0)["rates"]
    assert r[0] >= r[1]  # equal orders: the larger rate (smaller mean) first


def test_exit_probability_is_never_negative():
    """Issue 38: 1 - sum(pi) of a row summing to 1 came out as -1.6e-15 in the exit column."""
    from bulkem.models.tmap.model import TMAPModel

    model = TMAPModel.of((1, 2), False)
    alpha, pi, rates = np.array([0.3, 0.7]), np.array([[0.1, 0.9], [0.5, 0.2]]), [1.0, 2.0]
    pi[0, 1] = np.nextafter(0.9, 1.0)  # the row sums to just above 1
    assert 1.0 - pi[0].sum() < 0
    cols = model.param_columns(np.concatenate([alpha, pi.ravel(), rates])[None, :])
    assert cols["exit"][0] == 0.0 and np.isclose(cols["exit"][1], 0.3)
