"""``fit(trace=True)`` (issue 32, item 5): every start's log-likelihood by iteration, on both
engines and every strategy, against the oracle's trace and the CPU engines'."""

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


def test_trace_of_the_wide_cpu_regime_equals_the_bulk_engines(seed):
    """One TMAP trace of many runs (the paper's convergence figures) on the CPU's wide
    engine: the bulk engine's trace (to rounding: the wide engine adds its blocks' sums)."""
    from reference_tmap import sample

    p = {"alpha": np.array([0.5, 0.3, 0.2]),
         "pi": np.array([[0.2, 0.2, 0.1], [0.1, 0.3, 0.1], [0.2, 0.1, 0.2]]),
         "rates": np.array([1.0, 3.0, 6.0])}
    runs = [sample(p, (1, 2, 3), 300, np.random.default_rng(seed))]
    kw = dict(family="tmap", orders=(1, 2, 3), n_starts=2, seed=seed, max_iter=6, tol=0.0,
              backend="cpu", trace=True)
    wide = bulkem.fit(runs, tuning=Tuning(strategy="wide", wide_cpu_chunk_units=32), **kw)
    bulk = bulkem.fit(runs, tuning=Tuning(strategy="bulk"), **kw)
    assert len(wide.trace) == 2 * 7
    assert wide.trace.iloc[:, :3].equals(bulk.trace.iloc[:, :3])
    np.testing.assert_allclose(wide.trace.loglik, bulk.trace.loglik, rtol=1e-12)


@pytest.fixture
def strategies(monkeypatch):
    """The strategies that ran (``select.run``'s answers), in order: the tests below check
    that the GPU ran the engine they are about, not the bulk one."""
    from bulkem.engines import select

    ran: list = []
    run = select.run

    def spy(*args, **kwargs):
        ran.append(run(*args, **kwargs))
        return ran[-1]

    monkeypatch.setattr(select, "run", spy)
    return ran


def _same_traces(gpu, cpu, rtol) -> None:
    """The GPU fit's trace is the CPU fit's (same rows, log-likelihoods to ``rtol``), and its
    last row per start is that start's log-likelihood."""
    assert len(gpu.trace) == len(cpu.trace) > 0
    assert gpu.trace.iloc[:, :3].equals(cpu.trace.iloc[:, :3])
    np.testing.assert_allclose(gpu.trace.loglik, cpu.trace.loglik, rtol=rtol)
    last = gpu.trace.groupby([gpu.trace.columns[0], "start"]).tail(1).reset_index(drop=True)
    np.testing.assert_array_equal(last.iteration, gpu.starts.n_iter)
    np.testing.assert_array_equal(last.loglik, gpu.starts.loglik)


# float32 fits: every entry but the last float32's (to its rounding, summed in another order
# on each engine); the last the float64 log-likelihood at the returned parameters.
RTOL = {"float64": 1e-9, "float32": 1e-5}


def _real_gpu_only(dtype: str) -> None:
    """float32 on a real GPU only: under the simulator the float32 CPU kernels it compares
    with cost the test command ~20 s each (the float64 case covers the trace's plumbing)."""
    from conftest import SIMULATED

    if SIMULATED and dtype == "float32":
        pytest.skip("float32 traces of the wide and large GPU engines: on a real GPU only")


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_trace_of_the_wide_cuda_engine_is_the_cpu_engines(seed, strategies, dtype):
    """The GPU's wide engine writes the trace in its reduction kernel (the driver's step);
    tests/test_tmap.py's TMAP and wide tuning (its kernels)."""
    from reference_tmap import sample

    _real_gpu_only(dtype)
    p = dict(alpha=np.array([0.5, 0.3, 0.2]),
             pi=np.array([[0.6, 0.2, 0.1], [0.2, 0.5, 0.2], [0.1, 0.3, 0.5]]),
             rates=np.array([2.0, 1.0, 0.5]))
    runs = [sample(p, (1, 2, 3), 30, np.random.default_rng(seed))]
    wide = Tuning(strategy="wide", wide_cpu_chunk_units=7, wide_cuda_threads=32,
                  wide_cuda_reduce_threads=32, wide_cuda_reduce_cols=8, wide_cuda_check_every=2,
                  wide_cuda_max_blocks=2)
    kw = dict(family="tmap", orders=(1, 2, 3), n_starts=2, seed=seed, max_iter=3, tol=0.0,
              dtype=dtype, trace=True, tuning=wide)
    gpu = bulkem.fit(runs, backend="cuda", **kw)
    cpu = bulkem.fit(runs, backend="cpu", **kw)
    assert strategies == ["wide", "wide"]
    _same_traces(gpu, cpu, RTOL[dtype])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_trace_of_the_large_cuda_engine_is_the_cpu_engines(seed, strategies, dtype):
    """The GPU's large engine writes the trace in its reduction kernel (tests/test_gaussian.py's
    Gaussian (2, 1) and small tiles)."""
    from conftest import SMALL_LARGE

    _real_gpu_only(dtype)
    rng = np.random.default_rng(seed)
    x = [np.concatenate([rng.normal(-2.0, 1.0, 20), rng.normal(3.0, 0.7, 20)])]
    kw = dict(family="gaussian", n_components=2, n_starts=2, seed=seed, max_iter=4, tol=0.0,
              dtype=dtype, trace=True, tuning=Tuning(strategy="large", **SMALL_LARGE))
    gpu = bulkem.fit(x, backend="cuda", **kw)
    cpu = bulkem.fit(x, backend="cpu", **kw)
    assert strategies == ["large", "large"]
    _same_traces(gpu, cpu, RTOL[dtype])


@pytest.mark.cuda
def test_trace_of_the_many_states_cuda_engine_is_the_cpu_engines(small_many_states, seed,
                                                                 strategies):
    """The GPU's many-states engine writes the trace in its M-step kernel (small tiles and
    splits under the simulator: the ``small_many_states`` fixture)."""
    rng = np.random.default_rng(seed)
    data = [[rng.integers(0, 4, n).astype(float) for n in (6, 2, 5)]]
    kw = dict(family="hmm", emission="categorical", n_symbols=4, n_components=3, n_starts=2,
              max_iter=4, tol=0.0, seed=seed, trace=True)
    gpu = bulkem.fit(data, backend="cuda", tuning=Tuning(hmm_many_states=2), **kw)
    cpu = bulkem.fit(data, backend="cpu", **kw)
    assert strategies == ["many_states", "bulk"]
    _same_traces(gpu, cpu, RTOL["float64"])
