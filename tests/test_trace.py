"""``fit(trace=True)`` (issue 32, item 5): every start's log-likelihood by iteration, on both
engines, against the oracle's trace."""

from __future__ import annotations

import numpy as np
import pytest
from reference import ig_em

import bulkem
from bulkem.tuning import Tuning

# Iteration by iteration against plain-EM oracles and peers (conftest.plain_em).
pytestmark = pytest.mark.usefixtures("plain_em")


def _batch(seed, n=3, obs=120):
    rng = np.random.default_rng(seed)
    return [np.concatenate([rng.wald(1.0, 5.0, obs // 2), rng.wald(4.0, 20.0, obs - obs // 2)])
            for _ in range(n)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_trace_is_the_oracles_and_ends_at_each_starts_loglik(seed, backend, tuning, dtype):
    x = _batch(seed)
    res = bulkem.fit(x, n_components=2, n_starts=2, seed=seed, max_iter=15, tol=0.0,
                     backend=backend, tuning=tuning, dtype=dtype, trace=True)
    tr = res.trace
    assert list(tr.columns) == ["dataset", "start", "iteration", "loglik"]
    last = tr.groupby(["dataset", "start"]).tail(1).reset_index(drop=True)
    np.testing.assert_array_equal(last.iteration, res.starts.n_iter)
    np.testing.assert_allclose(last.loglik, res.starts.loglik, rtol=1e-12)
    assert (tr.groupby(["dataset", "start"]).loglik.diff().dropna() > -1e-6).all()  # EM
    if dtype == "float32":
        return
    for row in res.starts.itertuples():
        p = res.start_values[(res.start_values.dataset == row.dataset)
                             & (res.start_values.start == row.start)]
        ref = ig_em(x[row.dataset], p.weight.to_numpy(), p.mu.to_numpy(),
                    p["lambda"].to_numpy(), max_iter=15, tol=0.0)
        got = tr[(tr.dataset == row.dataset) & (tr.start == row.start)].loglik.to_numpy()
        np.testing.assert_allclose(got, ref["trace"], rtol=1e-9)


def test_trace_of_the_large_cpu_regime_equals_the_bulk_engines(seed):
    x = _batch(seed, n=1, obs=300)
    kw = dict(n_components=2, n_starts=2, seed=seed, max_iter=8, tol=0.0, backend="cpu",
              trace=True)
    bulk = bulkem.fit(x, tuning=Tuning(strategy="bulk"), **kw)
    large = bulkem.fit(x, tuning=Tuning(strategy="large"), **kw)
    assert large.trace.equals(bulk.trace)


def test_trace_in_a_grid_and_its_checks(seed):
    x = _batch(seed, n=2)
    res = bulkem.fit(x, n_components=[1, 2], n_starts=2, seed=seed, max_iter=5, backend="cpu",
                     trace=True)
    for d in range(2):
        k = res.summary.n_components[d]
        mine = res.trace[res.trace.dataset == d].reset_index(drop=True)
        theirs = res.for_size(k).trace
        assert mine.equals(theirs[theirs.dataset == d].reset_index(drop=True))
    with pytest.raises(ValueError, match="fit with trace=True"):
        _ = bulkem.fit(x, n_components=1, n_starts=1, backend="cpu").trace
    with pytest.raises(TypeError, match="trace must be True or False"):
        bulkem.fit(x, trace=1, backend="cpu")
    runs = [[np.ones(2)] * 5]
    with pytest.raises(ValueError, match="trace=True is recorded by the 'bulk' strategy"):
        bulkem.fit(runs, family="tmap", orders=(1, 2), n_starts=1, backend="cuda", trace=True,
                   tuning=Tuning(strategy="wide"))


def test_trace_of_the_wide_cpu_regime_equals_the_bulk_engines(seed):
    """One TMAP trace of many runs (the paper's convergence figures) on the CPU's wide
    engine: the bulk engine's trace (to rounding: the wide engine adds its blocks' sums)."""
    from reference_tmap import sample

    p = {"alpha": np.array([0.6, 0.4]), "pi": np.array([[0.2, 0.3], [0.1, 0.4]]),
         "rates": np.array([1.0, 3.0])}
    runs = [sample(p, (1, 2), 300, np.random.default_rng(seed))]
    kw = dict(family="tmap", orders=(1, 2), n_starts=2, seed=seed, max_iter=6, tol=0.0,
              backend="cpu", trace=True)
    wide = bulkem.fit(runs, tuning=Tuning(strategy="wide", wide_cpu_chunk_units=32), **kw)
    bulk = bulkem.fit(runs, tuning=Tuning(strategy="bulk"), **kw)
    assert len(wide.trace) == 2 * 7
    assert wide.trace.iloc[:, :3].equals(bulk.trace.iloc[:, :3])
    np.testing.assert_allclose(wide.trace.loglik, bulk.trace.loglik, rtol=1e-12)
