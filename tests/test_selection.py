"""A grid of sizes in one call (issue 32): ``n_components=[...]``, ``order=[...]``,
``orders=[...]``; the ``selection`` table against separate calls and NumPy oracles."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from reference import ig_logpdf
from reference_hmm import forward_backward

import bulkem
from bulkem.tuning import REACHED_RTOL, Tuning


def _ig_batch(seed, n=3):
    rng = np.random.default_rng(seed)
    return [np.concatenate([rng.wald(1.0, 6.0, 150), rng.wald(4.0, 25.0, 150)])
            for _ in range(n)]


@pytest.mark.cuda
def test_a_grid_on_the_gpu_runs_every_size_in_one_scheduler_run(monkeypatch, seed):
    """On the GPU a grid's sizes share one run of the scheduler (each size's chunks on the
    same streams), and each size's fits are still those of a call with that size alone."""
    from conftest import SIMULATED

    from bulkem.engines.cuda import scheduler
    from bulkem.tuning import Tuning

    tuning = (Tuning(cuda_warps_per_block=2, cuda_lanes_per_fit=4,
                     cuda_lanes_per_fit_tol0={"float64": 4, "float32": 4},
                     cuda_lanes_per_refit=None) if SIMULATED else Tuning())
    runs: list = []
    real = scheduler.run_jobs

    def spy(jobs, *args):
        runs.append(len(jobs))
        return real(jobs, *args)

    monkeypatch.setattr(scheduler, "run_jobs", spy)
    x = [v[:40] for v in _ig_batch(seed, n=2)]
    kw = dict(family="invgauss", n_starts=2, seed=seed, max_iter=15, backend="cuda",
              tuning=tuning)
    grid = bulkem.fit(x, n_components=[1, 2], **kw)
    assert runs == [2]
    for k in (1, 2):
        alone = bulkem.fit(x, n_components=k, **kw)
        pd.testing.assert_frame_equal(grid.for_size(k).starts, alone.starts)
        pd.testing.assert_frame_equal(grid.for_size(k).components, alone.components)


def _entropy(z):
    return -np.sum(np.where(z > 0, z * np.log(np.where(z > 0, z, 1.0)), 0.0))


def test_grid_gives_the_fits_of_separate_calls_and_chooses_by_bic(seed):
    """Each size's fits are those of a call with that size alone (same seed: the same bits,
    although the grid runs the CPU's one run-time-size kernel: K = 2 alone runs the
    compiled size the other tests share, K = 1 and 3 the run-time kernel, so that they
    compile no kernel of their own), and the tables hold the chosen size's rows, dataset by
    dataset."""
    x = _ig_batch(seed) + [np.array([1.0, np.nan, 2.0])]
    kw = dict(family="invgauss", n_starts=4, seed=seed, max_iter=60, backend="cpu")
    with pytest.warns(UserWarning, match="1 of 4 datasets are invalid"):
        grid = bulkem.fit(x, n_components=range(1, 4), **kw)
    sel = grid.selection
    assert list(sel.columns) == ["dataset", "n_components", "status", "loglik", "n_params",
                                 "aic", "bic", "icl", "n_iter", "n_best", "chosen"]
    assert sel[["dataset", "n_components"]].values.tolist() == [
        [d, k] for d in range(4) for k in (1, 2, 3)]
    for k in (1, 2, 3):
        with pytest.warns(UserWarning):
            alone = bulkem.fit(x, n_components=k, **kw, tuning=None if k == 2 else
                               Tuning(cpu_sizes="run-time"))
        part = grid.for_size(k)
        pd.testing.assert_frame_equal(part.starts, alone.starts)
        pd.testing.assert_frame_equal(part.components, alone.components)
        rows = sel[sel.n_components == k].reset_index(drop=True)
        assert np.array_equal(rows.bic, alone.summary.bic, equal_nan=True)
        assert (rows.n_params == 3 * k - 1).all()
    fitted = sel[sel.status != "invalid_data"]
    want = fitted.loc[fitted.groupby("dataset").bic.idxmin(), ["dataset", "n_components"]]
    got = sel.loc[sel.chosen, ["dataset", "n_components"]]
    assert want.values.tolist() == got.values.tolist()
    assert not sel[sel.dataset == 3].chosen.any()
    # the usual tables: each dataset's chosen size, in input order
    for d, k in got.values.tolist():
        part = grid.for_size(k)
        assert grid.summary.loc[d, "n_components"] == k
        assert grid.summary.loc[d, "loglik"] == part.summary.loc[d, "loglik"]
        mine = grid.components[grid.components.dataset == d].reset_index(drop=True)
        pd.testing.assert_frame_equal(
            mine, part.components[part.components.dataset == d].reset_index(drop=True))
        assert len(grid.starts[grid.starts.dataset == d]) == 4
        np.testing.assert_array_equal(grid.params(d)["mu"], part.params(d)["mu"])
        assert grid.predict_proba(d, [1.0, 4.0]).shape == (2, k)
    assert grid.summary.status.tolist()[3] == "invalid_data"
    assert pd.isna(grid.summary.n_components[3])
    with pytest.raises(KeyError, match="invalid_data"):
        grid.params(3)


def test_n_best_counts_the_starts_that_reached_the_best(seed):
    x = _ig_batch(seed, 2)
    res = bulkem.fit(x, n_components=[2, 3], n_starts=6, seed=seed, max_iter=80,
                     backend="cpu")
    for k in (2, 3):
        part = res.for_size(k)
        for d in range(2):
            st = part.starts[(part.starts.dataset == d)
                             & part.starts.status.isin(["converged", "max_iter"])]
            best = part.summary.loglik[d]
            want = int((st.loglik >= best - REACHED_RTOL * abs(best)).sum())
            row = res.selection[(res.selection.dataset == d) & (res.selection.n_components == k)]
            assert row.n_best.item() == want >= 1


def test_icl_is_the_bic_plus_twice_the_entropy_of_numpy_responsibilities(seed):
    x = _ig_batch(seed, 2)
    res = bulkem.fit(x, n_components=[1, 2], n_starts=3, seed=seed, backend="cpu",
                     criterion="icl")
    for row in res.selection.itertuples():
        p = res.for_size(row.n_components).params(row.dataset)
        lp = np.log(p["weight"]) + ig_logpdf(x[row.dataset][:, None], p["mu"], p["lambda"])
        z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
        assert np.isclose(row.icl, row.bic + 2 * _entropy(z), rtol=1e-12, atol=1e-9)
    want = res.selection.loc[res.selection.groupby("dataset").icl.idxmin(), "n_components"]
    assert res.selection.loc[res.selection.chosen, "n_components"].tolist() == want.tolist()


def test_gaussian_icl_is_the_bic_plus_twice_the_entropy_of_numpy_responsibilities(seed):
    rng = np.random.default_rng(seed)
    x = [np.concatenate([rng.normal(0, 1, (80, 2)), rng.normal(3, 0.5, (60, 2))])
         for _ in range(2)]
    res = bulkem.fit(x, family="gaussian", n_components=[1, 2], n_starts=3, seed=seed,
                     backend="cpu")
    for row in res.selection.itertuples():
        p = res.for_size(row.n_components).params(row.dataset)
        X = x[row.dataset][:, None, :]
        lp = np.log(p["weight"]) - 0.5 * np.sum(np.log(2 * np.pi * p["var"])
                                                + (X - p["mean"]) ** 2 / p["var"], axis=2)
        z = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
        assert np.isclose(row.icl, row.bic + 2 * _entropy(z), rtol=1e-12, atol=1e-9)


def test_hmm_grid_and_its_icl_against_the_forward_backward_oracle(seed):
    rng = np.random.default_rng(seed)
    seqs = [[rng.integers(0, 4, 25) for _ in range(2)] for _ in range(2)]
    kw = dict(family="hmm", emission="categorical", n_symbols=4, n_starts=2, seed=seed,
              max_iter=8, backend="cpu")
    res = bulkem.fit(seqs, n_components=[2, 3], **kw)
    assert res.selection.chosen.sum() == 2
    alone = bulkem.fit(seqs, n_components=3, **kw)
    pd.testing.assert_frame_equal(res.for_size(3).tables["transitions"], alone.transitions)
    for row in res.selection.itertuples():
        p = res.for_size(row.n_components).params(row.dataset)
        ent = sum(_entropy(forward_backward(s, "categorical", p)[1]) for s in seqs[row.dataset])
        assert np.isclose(row.icl, row.bic + 2 * ent, rtol=1e-10)
    d = 0
    k = int(res.summary.n_components[d])
    assert res.transitions[res.transitions.dataset == d].shape[0] == k * k
    assert res.decode(d, seqs[d][0])[1].max() <= k


def test_ar_order_and_tmap_orders_grids(seed):
    rng = np.random.default_rng(seed)
    y = [np.convolve(rng.standard_normal(120), [1.0, 0.6], "same") for _ in range(2)]
    ar = bulkem.fit(y, family="ar", order=[1, 2], n_starts=2, seed=seed, max_iter=15,
                    backend="cpu")
    assert list(ar.selection.columns[:2]) == ["dataset", "order"]
    assert "icl" not in ar.selection
    assert ar.selection.chosen.sum() == 2 and ar.summary.order.notna().all()
    alone = bulkem.fit(y, family="ar", order=2, n_starts=2, seed=seed, max_iter=15,
                       backend="cpu")
    pd.testing.assert_frame_equal(ar.for_size(2).components, alone.components)

    runs = [[rng.exponential(1.0, rng.integers(1, 4)) for _ in range(30)] for _ in range(2)]
    # (the orders of other tests: their kernels)
    tm = bulkem.fit(runs, family="tmap", orders=[(1, 1, 2), (1, 2, 3)], n_starts=2, seed=seed,
                    max_iter=5, backend="cpu")
    sel = tm.selection
    assert list(sel.columns[:2]) == ["trace", "orders"]
    assert sel.orders.tolist() == [(1, 1, 2), (1, 2, 3)] * 2
    for trace, orders in sel.loc[sel.chosen, ["trace", "orders"]].values.tolist():
        assert (tm.components[tm.components.trace == trace].order.tolist() == list(orders))
        assert np.isfinite(tm.score(trace, runs[trace][:3]))
    assert tm.for_size([1, 1, 2]).n_components == 3


def test_grid_with_standard_errors_keeps_each_sizes_covariances(seed):
    x = _ig_batch(seed, 2)
    res = bulkem.fit(x, n_components=[1, 2], n_starts=3, seed=seed, backend="cpu", se=True,
                     max_iter=200)
    for d in range(2):
        k = int(res.summary.n_components[d])
        assert res.cov(d).shape == (3 * k, 3 * k)
        assert "se_mu" in res.components


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(n_components=[2, 2]), ValueError, r"repeats a size"),
    (dict(n_components=[]), ValueError, r"empty list"),
    (dict(n_components=[1, 0]), ValueError, r"each entry of n_components must be >= 1"),
    (dict(n_components=[1, 2], init={"weight": [1.0], "mu": [1.0], "lambda": [1.0]}),
     ValueError, r"init= with a grid of sizes"),
    (dict(n_components=[1, 2], criterion="hqic"), ValueError, r"unknown criterion 'hqic'"),
    (dict(family="ar", n_components=[1, 2], order=1), ValueError, r"pass order=\[1, 2, 3\]"),
    (dict(family="ar", order=[1, 2], criterion="icl"), ValueError, r"has none: use 'bic'"),
    (dict(n_components=[1, 2], checkpoint="unused"), ValueError, r"without checkpoint="),
])
def test_grid_arguments_are_checked_at_once(kwargs, error, match):
    kw = {"family": "invgauss", "backend": "cpu", **kwargs}
    with pytest.raises(error, match=match):
        bulkem.fit([np.linspace(0.5, 2.0, 40)], **kw)


def test_one_size_fit_has_no_selection():
    res = bulkem.fit([np.linspace(0.5, 2.0, 40)], n_components=1, n_starts=1, backend="cpu")
    assert res.for_size(1) is res
    with pytest.raises(ValueError, match="fit a grid of sizes"):
        _ = res.selection


def test_grid_on_each_engine_equals_the_cpu_grid(seed, backend, tuning):
    x = [v[:60] for v in _ig_batch(seed, 2)]
    kw = dict(n_components=[1, 2], n_starts=2, seed=seed, max_iter=5, tol=0.0)
    cpu = bulkem.fit(x, backend="cpu", **kw)
    res = bulkem.fit(x, backend=backend, tuning=tuning, **kw)
    assert np.allclose(res.selection.loglik, cpu.selection.loglik, rtol=1e-9)
    assert res.selection.chosen.tolist() == cpu.selection.chosen.tolist()
    assert res.backend == backend
