"""bulkem.scale.dask: a Dask DataFrame fitted partition by partition, as one bulkem.fit call."""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest
from conftest import demo

import bulkem

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

KW = dict(n_components=2, n_starts=3, seed=7, backend="cpu")
KEYS = {"summary": ["dataset"], "components": ["dataset", "component"],
        "starts": ["dataset", "start"], "start_values": ["dataset", "start", "component"]}
TIMEOUT = 180  # seconds a cluster computation may take before the test fails


def long_frame(n: int, n_obs: int, seed: int) -> pd.DataFrame:
    """Datasets of string ids in long form, one of them too short to fit."""
    d = demo(n, n_obs, seed)
    d[3] = d[3][:2]
    return pd.DataFrame({"dataset": np.repeat([f"d{i:03d}" for i in range(n)], [len(x) for x in d]),
                         "value": np.concatenate(d)})


def assert_same(ref, tables: dict):
    """Each dask table equals the one bulkem.fit table, sorted the same way."""
    assert list(tables) == list(KEYS)
    for name, keys in KEYS.items():
        a = getattr(ref, name).sort_values(keys).reset_index(drop=True)
        b = tables[name].sort_values(keys).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each, on free ports, no dashboard."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, scheduler_port=0,
                                  silence_logs=logging.CRITICAL,
                                  env={"NUMBA_NUM_THREADS": "1"}) as cluster, \
            distributed.Client(cluster, timeout=60) as c:
        yield c


def compute(client, res) -> dict:
    futures = client.compute([res.tables[name] for name in KEYS])
    return dict(zip(KEYS, [f.result(timeout=TIMEOUT) for f in futures], strict=True))


def test_killed_worker_loses_nothing(client):
    """A worker killed while it fits is replaced; the tables are those of an undisturbed run.

    Runs first, on fresh workers, so that the kill lands while the first fits
    (with their compilation) are running.
    """
    df = long_frame(40, 50, 1)
    with pytest.warns(UserWarning):
        ref = bulkem.fit(df, progress=False, **KW)
    pids = client.run(os.getpid)
    killed = {}

    def kill_a_fitting_worker():
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and not killed:
            for addr, keys in client.processing().items():
                if any("_fit_partition" in str(k) for k in keys) and addr in pids:
                    os.kill(pids[addr], signal.SIGKILL)
                    killed[addr] = pids[addr]
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_a_fitting_worker, daemon=True)
    watcher.start()
    res = bulkem.dask.fit(dd.from_pandas(df, npartitions=6, sort=False), **KW)
    tables = compute(client, res)
    watcher.join(timeout=TIMEOUT)
    assert killed, "no worker was killed"
    client.wait_for_workers(2, timeout=TIMEOUT)
    assert set(killed.values()).isdisjoint(client.run(os.getpid).values())
    assert_same(ref, tables)


@pytest.mark.parametrize("npartitions", [1, 5])
def test_cluster_tables_equal_one_call(client, npartitions):
    df = long_frame(25, 40, 2)
    with pytest.warns(UserWarning):
        ref = bulkem.fit(df, progress=False, **KW)
    res = bulkem.dask.fit(dd.from_pandas(df, npartitions=npartitions, sort=False), **KW)
    assert_same(ref, compute(client, res))
    back = res.compute()
    assert len(back.summary) == 25 and back.seed == 7
    x = np.linspace(0.5, 4, 5)
    assert np.array_equal(back.density("d010", x), ref.density("d010", x))


def test_local_scheduler_any_partitioning_and_gaussian_columns():
    rng = np.random.default_rng(3)
    rows = [(f"g{k}", *rng.normal(3 * (i % 2), 1, 2)) for k in range(8) for i in range(30)]
    df = pd.DataFrame(rows, columns=["dataset", "x1", "x2"]).sample(frac=1, random_state=2)
    kw = {**KW, "family": "gaussian", "value_col": ["x1", "x2"]}
    ref = bulkem.fit(df, progress=False, **kw)
    with dask.config.set(scheduler="sync"):
        for n, regroup_to in ((3, None), (4, 2)):
            res = bulkem.dask.fit(dd.from_pandas(df, npartitions=n, sort=False),
                                  npartitions=regroup_to, **kw)
            tables = dict(zip(KEYS, dask.compute(*res.tables.values()), strict=True))
            assert_same(ref, tables)
            assert res.components.columns.tolist() == ref.components.columns.tolist()


def test_a_weight_column_goes_with_its_rows():
    df = long_frame(6, 40, 4)
    df["w"] = np.random.default_rng(4).integers(0, 4, len(df)).astype(float)
    with pytest.warns(UserWarning):
        ref = bulkem.fit(df, progress=False, weights="w", **KW)
    with dask.config.set(scheduler="sync"), pytest.warns(UserWarning):
        res = bulkem.dask.fit(dd.from_pandas(df, npartitions=3, sort=False), weights="w", **KW)
        assert_same(ref, dict(zip(KEYS, dask.compute(*res.tables.values()), strict=True)))
    with pytest.raises(ValueError, match="pass the column's name"):
        bulkem.dask.fit(dd.from_pandas(df, npartitions=2), weights=[df.w.to_numpy()], **KW)


def test_no_regroup_and_arguments():
    df = long_frame(6, 40, 3)
    whole = [df[df.dataset.isin(ids)] for ids in (["d000", "d001", "d002"], ["d003", "d004",
                                                                            "d005"])]
    ddf = dd.from_delayed([dask.delayed(w) for w in whole], meta=df.iloc[:0])
    with pytest.warns(UserWarning):
        ref = bulkem.fit(df, progress=False, **KW)
    with dask.config.set(scheduler="sync"), pytest.warns(UserWarning):
        res = bulkem.dask.fit(ddf, regroup=False, persist=False, **KW)
        assert_same(ref, dict(zip(KEYS, dask.compute(*res.tables.values()), strict=True)))
        assert "DaskFitResult(family='invgauss'" in repr(res)
        with pytest.raises(TypeError, match="takes no checkpoint= argument"):
            bulkem.dask.fit(ddf, checkpoint="x", **KW)
        with pytest.raises(ValueError, match="expected a 'ds' column"):
            bulkem.dask.fit(ddf, dataset_col="ds", **KW)
        with pytest.raises(TypeError, match="expected a dask DataFrame"):
            bulkem.dask.fit(df, **KW)
        with pytest.raises(ValueError, match="n_starts must be >= 1"):
            bulkem.dask.fit(ddf, **{**KW, "n_starts": 0})
        seeded = bulkem.dask.fit(ddf, **{**KW, "seed": None})
        assert isinstance(seeded.seed, int)


def test_without_dask_the_error_says_how_to_get_it(monkeypatch):
    for name in [m for m in sys.modules if m == "dask" or m.startswith("dask.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.delitem(sys.modules, "bulkem.scale.dask", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'bulkem\[dask\]'"):
        importlib.import_module("bulkem.scale.dask")


def test_hidden_markov_sequences_and_transitions():
    from test_checkpoint import HMM, hmm_frame

    df = hmm_frame(6, 4)
    kw = {k: v for k, v in HMM.items() if k != "progress"}
    ref = bulkem.fit(df, progress=False, **kw)
    with dask.config.set(scheduler="sync"):
        res = bulkem.dask.fit(dd.from_pandas(df, npartitions=3, sort=False), **kw)
        got = dict(zip(res.tables, dask.compute(*res.tables.values()), strict=True))
        keys = {**KEYS, "components": ["dataset", "state"],
                "start_values": ["dataset", "start", "state"],
                "transitions": ["dataset", "from_state", "to_state"],
                "start_transitions": ["dataset", "start", "from_state", "to_state"]}
        assert list(got) == list(keys)
        for name, k in keys.items():
            a = getattr(ref, name)
            pd.testing.assert_frame_equal(a.sort_values(k).reset_index(drop=True),
                                          got[name].sort_values(k).reset_index(drop=True),
                                          check_exact=True)
        back = res.compute()
        seq = df[(df.dataset == "h2") & (df.sequence == 1)].value.to_numpy()
        assert back.score("h2", seq) == ref.score("h2", seq)
        with pytest.raises(ValueError, match="Pass n_symbols="):
            bulkem.dask.fit(dd.from_pandas(df, npartitions=2), **{**kw, "emission": "categorical"})
