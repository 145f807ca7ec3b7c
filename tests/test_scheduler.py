"""The GPU scheduler: chunk plans, device split, and results that do not depend on them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import demo

import bulkem
from bulkem.engines.cuda import buffers, compat, scheduler
from bulkem.tuning import Tuning


def _job(sizes, n_starts=3, family="invgauss", method="subset"):
    data = [np.abs(np.random.default_rng(k).normal(2, 0.5, n)) + 0.1 for k, n in enumerate(sizes)]
    from bulkem import models
    from bulkem.api import make_job

    fam = models.get(family)
    pairs = fam.read(data, "dataset", "value", {})
    model = fam.model(pairs, 2, {})
    return make_job(model, model.pack(pairs), n_starts, 1, None, np.dtype("float64"), 10, 0.0,
                    method)


def test_plan_covers_every_fit_once_within_budget():
    job = _job([50, 400, 120, 3000, 60], n_starts=4)
    order = np.argsort(-job.data.dataset_sizes())
    budget = 3000 * 2 * 8 + 16 + 2 * (6 * 8 + 32)  # the big dataset with two fits
    chunks = scheduler.plan_chunks(job, order, budget, max_fits=5)
    fits = np.concatenate([c.fits for c in chunks])
    assert np.array_equal(np.sort(fits), np.arange(len(job.fit_ds)))
    for c in chunks:
        assert len(c.fits) <= 5
        assert np.array_equal(job.fit_ds[c.fits], c.datasets[c.fit_ds])
        packed = scheduler.pack(job, c)
        data_bytes = packed.data64[0].nbytes + 16 * len(c.datasets)
        assert data_bytes + len(c.fits) * (6 * 8 + 32) <= budget
    with pytest.raises(ValueError, match="fit it with backend='cpu'"):
        scheduler.plan_chunks(job, order, 1000, max_fits=5)


def test_plan_of_a_group_that_fits_is_the_loops_one_chunk():
    job = _job([50, 400, 120, 3000, 60], n_starts=4)
    order = np.array([3, 1, 2, 4, 0])
    (whole,) = scheduler.plan_chunks(job, order, 1 << 30, max_fits=1000)  # the shortcut
    # a budget just too small for the shortcut: the loop, in two chunks
    parts = scheduler.plan_chunks(job, order, 3000 * 2 * 8 + 16 + 20 * (6 * 8 + 32), max_fits=18)
    assert len(parts) == 2
    assert np.array_equal(whole.datasets, order)
    assert np.array_equal(whole.fits, np.concatenate([c.fits for c in parts]))
    assert np.array_equal(job.fit_ds[whole.fits], whole.datasets[whole.fit_ds])


@pytest.mark.parametrize(("family", "method"), [("invgauss", "subset"), ("gaussian", "kmeans++")])
def test_starts_drawn_by_chunk_equal_starts_drawn_at_once(family, method):
    job = _job([50, 400, 120], n_starts=5, family=family, method=method)
    job.start_plan.user = np.array([[0.5, 1.0, 2.0, 0.5, 3.0, 4.0]])  # start 0 of each dataset
    job.draw_starts()
    whole = job.init.copy()
    assert np.array_equal(whole[::5], np.repeat(job.start_plan.user, 3, axis=0))
    rows = np.random.default_rng(0).permutation(len(job.fit_ds))
    for piece in np.array_split(rows, 4):  # in pieces, in any order: the same starts
        out = np.full((len(piece), whole.shape[1]), np.nan)
        job.start_plan.fill(job.fit_ds[piece], job.fit_start[piece], out)
        assert np.array_equal(out, whole[piece])


def test_balance_splits_cost_evenly():
    cost = np.array([10.0, 9, 8, 7, 1, 1, 1, 1])
    parts = scheduler.balance(cost, np.arange(8), 2)
    loads = [cost[p].sum() for p in parts]
    assert sorted(np.concatenate(parts)) == list(range(8))
    assert abs(loads[0] - loads[1]) <= 2


@pytest.mark.cuda
def test_small_memory_budget_runs_in_pieces_with_same_results():
    data = demo(3, 30, 4) + [demo(1, 45, 5)[0]]
    tuning = Tuning(cuda_warps_per_block=2)
    kw = dict(n_starts=2, max_iter=6, tol=0.0, seed=3, backend="cuda")
    whole = bulkem.fit(data, tuning=tuning, **kw)
    calls = []
    pieces = bulkem.fit(data, progress=lambda done, total: calls.append(done), **kw,
                        tuning=tuning.replace(cuda_memory_budget=45 * 16 + 16 + 6 * 8 + 32,
                                              cuda_min_chunk_fits=1))
    assert len(calls) >= 4 and calls[-1] == 8  # at most two fits fit a chunk
    assert pieces.starts.equals(whole.starts)
    assert pieces.components.equals(whole.components)
    assert pieces.start_values.equals(whole.start_values)


def test_page_locked_buffers_are_pooled(monkeypatch):
    # The pool's logic, with the simulator standing in for page-locked memory.
    monkeypatch.setattr(buffers, "SIMULATED", False)
    monkeypatch.setattr(buffers.cuda, "get_current_device", lambda: SimpleNamespace(id=0))
    monkeypatch.setattr(buffers, "_pool", {})
    tuning = Tuning(cuda_pinned_pool=2)

    def take(n, tuning=tuning):
        return buffers.take(n, tuning)

    def give(b):
        buffers.give(b, tuning)

    a, b = take(1000), take(500)
    assert (len(a), len(b), len(a.device), a.pinned) == (1000, 500, 1000, True)
    give(a)
    give(b)
    d, c = take(400), take(600)  # the smallest free buffers that are large enough
    assert d is b and c is a
    give(d)
    give(c)
    give(take(2000))  # a third: the smallest goes
    assert sorted(len(x) for x in buffers._pool[0]) == [1000, 2000]
    layout = [(0, np.dtype(np.float64), (2,)), (256, np.dtype(np.int32), (3,)), (512, None, ())]
    h, dv = a.views(layout)
    assert [x.shape for x in h] == [(2,), (3,)]
    assert a.views(list(layout))[1] is dv  # kept for the same layout
    big = take(101, tuning.replace(cuda_pinned_max_bytes=100))  # too large to lock: not pooled
    assert not big.pinned
    give(big)
    assert len(buffers._pool[0]) == 2


def test_each_kernel_library_is_unloaded_once():
    # Two GPUs' contexts hold modules of the same library: one unloading stays.
    class Finalizer:
        def __init__(self) -> None:
            self.detached = False

        def detach(self) -> None:
            self.detached = True

    def module() -> SimpleNamespace:
        return SimpleNamespace(_finalizer=Finalizer())

    a0, b0, a1 = module(), module(), module()
    gpus = [SimpleNamespace(primary_context=SimpleNamespace(modules={"a": a0, "b": b0})),
            SimpleNamespace(primary_context=SimpleNamespace(modules={"a": a1})),
            SimpleNamespace(primary_context=None)]  # a GPU never used
    assert compat._unload_each_library_once(gpus) == 1
    assert [m._finalizer.detached for m in (a0, b0, a1)] == [False, False, True]


@pytest.mark.cuda
def test_devices_pick_the_gpus_and_bad_ones_say_what_was_found(monkeypatch):
    """``fit(devices=...)`` and ``kalman_loglik(devices=...)``: the same results on the
    devices given; ids the process does not see, a CPU run, or a list that is not one of
    distinct ids raise at once; the Kalman series split over several devices (two "devices"
    that are both GPU 0 here) give the one-device figures."""
    from bulkem import StateSpace

    x = list(demo(2, 30, 2))
    kw = dict(n_starts=1, max_iter=3, seed=1, backend="cuda")
    base = bulkem.fit(x, **kw)
    res = bulkem.fit(x, devices=[0], **kw)
    assert res.summary.loglik.equals(base.summary.loglik)
    with pytest.raises(ValueError, match=r"GPU id\(s\) \[7\] not found"):
        bulkem.fit(x, devices=[7], **kw)
    with pytest.raises(ValueError, match="picks GPUs, but this call runs on the CPU"):
        bulkem.fit(x, devices=[0], n_starts=1, backend="cpu")
    for bad in ([], [0, 0], "0", [-1], [True]):
        with pytest.raises(ValueError, match="devices must be a non-empty list"):
            bulkem.fit(x, devices=bad, **kw)
    rng = np.random.default_rng(3)
    series = [rng.normal(0, 1, n) for n in (4, 3)]
    model = StateSpace.local_level(1.0, 0.5)
    cpu = bulkem.kalman_loglik(series, model, backend="cpu")
    one = bulkem.kalman_loglik(series, model, backend="cuda", devices=[0])
    monkeypatch.setattr(scheduler, "devices", lambda tuning: [0, 0])
    two = bulkem.kalman_loglik(series, model, backend="cuda")
    np.testing.assert_allclose(one.loglik, cpu.loglik, rtol=1e-10)
    np.testing.assert_array_equal(two.loglik, one.loglik)
