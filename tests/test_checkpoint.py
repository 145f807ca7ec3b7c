"""Checkpoint and resume: bulkem.fit(..., checkpoint=run_dir)."""

from __future__ import annotations

import json
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import assert_same_tables, demo, run_and_kill

import bulkem
from bulkem import api
from bulkem.scale import checkpoint, combine
from bulkem.tuning import Tuning

pytest.importorskip("pyarrow")

KW = dict(n_components=2, n_starts=3, seed=5, backend="cpu", progress=False,
          tuning=Tuning(checkpoint_chunk_fits=12))  # 4 datasets of 3 starts a chunk


@pytest.fixture
def count_fits(monkeypatch):
    """Counts the chunk fits (calls of the plain bulkem.fit) of a checkpointed run."""
    calls = []
    plain = api.fit

    def spy(datasets, **kw):
        if kw.get("checkpoint") is None:  # a chunk's fit, not the checkpointed call itself
            calls.append(kw)
        return plain(datasets, **kw)

    monkeypatch.setattr(checkpoint.api, "fit", spy)
    return calls


def data(n=18, seed=3):
    d = demo(n, 60, seed)
    d[5] = d[5][:2]  # invalid: too short
    return d


def test_chunked_run_equals_one_call_and_second_call_reads(tmp_path, count_fits):
    d = data()
    with pytest.warns(UserWarning, match="1 of 18 datasets are invalid"):
        ref = api.fit(d, **KW)
    count_fits.clear()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = bulkem.fit(d, checkpoint=tmp_path / "run", **KW)
    assert [str(w.message) for w in got] == [
        "1 of 18 datasets are invalid and were not fitted; see summary.status and "
        "summary.message."]
    assert len(count_fits) == 5  # 18 datasets, 4 a chunk
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        *(f"chunk-00000{i}" for i in range(5)), "manifest.json"]
    assert_same_tables(ref, res)
    count_fits.clear()
    with pytest.warns(UserWarning, match="1 of 18 datasets are invalid"):
        again = bulkem.fit(d, checkpoint=tmp_path / "run", **KW)
    assert count_fits == []
    assert_same_tables(ref, again)
    x = np.linspace(0.2, 6, 9)
    for r in (res, again):
        assert np.array_equal(r.density(7, x), ref.density(7, x))
        assert np.array_equal(r.init_params(7)["mu"], ref.init_params(7)["mu"])
    assert (again.seed, again.backend, again.n_components) == (5, "cpu", 2)


def test_dataframe_and_dict_inputs(tmp_path):
    d = demo(9, 50, 4)
    df = pd.DataFrame({"dataset": np.repeat([f"s{i}" for i in range(9)], 50),
                       "value": np.concatenate(d)}).sample(frac=1, random_state=1)
    ref = api.fit(df, **KW)
    assert_same_tables(ref, bulkem.fit(df, checkpoint=tmp_path / "a", **KW))
    assert_same_tables(ref, bulkem.fit(df, checkpoint=tmp_path / "a", **KW))
    named = {f"s{i}": v for i, v in enumerate(d)}
    assert_same_tables(api.fit(named, **KW), bulkem.fit(named, checkpoint=tmp_path / "b", **KW))


def test_seed_none_is_drawn_once_and_kept(tmp_path):
    d = demo(6, 50, 5)
    kw = {**KW, "seed": None}
    first = bulkem.fit(d, checkpoint=tmp_path / "run", **kw)
    again = bulkem.fit(d, checkpoint=tmp_path / "run", **kw)
    assert first.seed == again.seed
    assert_same_tables(api.fit(d, **{**KW, "seed": first.seed}), again)


def test_other_arguments_or_data_are_refused(tmp_path):
    d = demo(10, 50, 6)
    bulkem.fit(d, checkpoint=tmp_path / "run", **KW)
    with pytest.raises(ValueError, match=r"other arguments: n_starts = 3 in the checkpoint, 4 "
                                         r"now; seed = 5 in the checkpoint, 6 now"):
        bulkem.fit(d, checkpoint=tmp_path / "run", **{**KW, "n_starts": 4, "seed": 6})
    with pytest.raises(ValueError, match=r"other data: 10 datasets there, 9 now"):
        bulkem.fit(d[:9], checkpoint=tmp_path / "run", **KW)
    changed = list(d)
    changed[5] = changed[5] * 1.5
    with pytest.raises(ValueError, match=r"chunk 1 \(datasets 4 to 7\) differ"):
        bulkem.fit(changed, checkpoint=tmp_path / "run", **KW)
    # the backend and the progress display may change
    bulkem.fit(d, checkpoint=tmp_path / "run", **{**KW, "backend": "auto", "progress": True})
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="is not a bulkem checkpoint"):
        bulkem.fit(d, checkpoint=tmp_path / "other", **KW)


def test_bad_arguments_leave_no_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="n_starts must be >= 1"):
        bulkem.fit(demo(2, 50, 1), checkpoint=tmp_path / "run", **{**KW, "n_starts": 0})
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_progress_counts_every_fit_once(tmp_path):
    seen = []
    d = demo(10, 50, 7)
    bulkem.fit(d, checkpoint=tmp_path / "run", **{**KW, "progress": lambda a, b: seen.append(a)})
    assert seen[-1] == 30 and seen == sorted(seen)
    seen.clear()
    bulkem.fit(d, checkpoint=tmp_path / "run", **{**KW, "progress": lambda a, b: seen.append(a)})
    assert seen[-1] == 30


CHILD = """
import pathlib, sys, time
import bulkem
from bulkem.interop.datasets import simulate_demo
from bulkem.scale import checkpoint
from bulkem.tuning import Tuning

marker = pathlib.Path(sys.argv[2])

def progress(done, total):
    if done > 12:  # chunk 1 is being fitted: say so, and wait to be killed
        marker.write_text(str(done))
        time.sleep(600)

bulkem.fit(simulate_demo(18, 60, seed=11), n_starts=3, seed=5, backend="cpu",
           checkpoint=sys.argv[1], progress=progress,
           tuning=Tuning(checkpoint_chunk_fits=12))  # 4 datasets of 3 starts a chunk
"""


def test_resume_after_sigkill_equals_an_uninterrupted_run(tmp_path, count_fits):
    run, marker = tmp_path / "run", tmp_path / "in_chunk_1"
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    run_and_kill([str(script), str(run), str(marker)], marker, timeout=240)
    assert checkpoint.RunDir(run).finished() == {0}
    (run / ".chunk-000001.tmp99999").mkdir()  # as a kill during a write leaves it
    (run / ".chunk-000001.tmp99999" / "summary.parquet").write_bytes(b"half")
    d = demo(18, 60, 11)
    kw = {**KW, "progress": None}
    resumed = bulkem.fit(d, checkpoint=run, **kw)
    assert len(count_fits) == 4  # chunks 1 to 4 only
    assert not list(run.glob(".chunk-*"))
    assert json.loads((run / "manifest.json").read_text())["chunk_datasets"] == 4
    assert_same_tables(api.fit(d, **KW), resumed)


def hmm_frame(n: int = 7, seed: int = 2) -> pd.DataFrame:
    """Poisson counts in long form: dataset, sequence, value; two sequences a dataset."""
    rng = np.random.default_rng(seed)
    rows = [(f"h{d}", s, v) for d in range(n) for s in range(2)
            for v in rng.poisson(rng.choice([1.0, 6.0], 1)[0], 12 + 3 * s)]
    return pd.DataFrame(rows, columns=["dataset", "sequence", "value"])


HMM = dict(family="hmm", emission="poisson", n_components=2, n_starts=2, max_iter=5, seed=3,
           backend="cpu", progress=False, tuning=KW["tuning"])


def test_hidden_markov_tables_come_along(tmp_path):
    df = hmm_frame()
    ref = api.fit(df, **HMM)
    assert "transitions" in combine.table_names(ref)
    first = bulkem.fit(df, checkpoint=tmp_path / "run", **HMM)
    again = bulkem.fit(df, checkpoint=tmp_path / "run", **HMM)  # every chunk read back
    for res in (first, again):
        assert type(res) is type(ref)
        assert_same_tables(ref, res)
        pd.testing.assert_frame_equal(res.transitions, ref.transitions, check_exact=True)
        seq = df[(df.dataset == "h3") & (df.sequence == 0)].value.to_numpy()
        assert res.score("h3", seq) == ref.score("h3", seq)
    with pytest.raises(ValueError, match="Pass n_symbols="):
        bulkem.fit(df, checkpoint=tmp_path / "cat", **{**HMM, "emission": "categorical"})


def test_every_input_form_is_read_as_bulkem_fit_reads_it(tmp_path):
    """A TMAP's list of runs is one trace (it was cut into one trace a run, issue 30)."""
    rng = np.random.default_rng(4)
    runs = [rng.exponential(1.0, k) for k in (3, 2, 4, 3, 2, 5, 3)]
    kw = {**KW, "family": "tmap", "orders": (1, 2, 3), "n_starts": 2, "max_iter": 5}
    del kw["n_components"]
    ref = api.fit(runs, **kw)
    assert len(ref.summary) == 1
    res = bulkem.fit(runs, checkpoint=tmp_path / "one", **kw)
    assert_same_tables(ref, res)
    traces = {"a": runs[:3], "b": runs[3:]}  # many traces: a dict (or a list of lists)
    assert_same_tables(api.fit(traces, **kw), bulkem.fit(traces, checkpoint=tmp_path / "two",
                                                         **kw))


@pytest.mark.parametrize("bad", [3, b"run", "", ["run"]])
def test_checkpoint_must_be_a_path(tmp_path, bad):
    with pytest.raises(TypeError, match=r"checkpoint must name a run directory \(a str or "
                                        r"pathlib.Path.*got checkpoint = "):
        bulkem.fit(demo(2, 50, 1), checkpoint=bad, **KW)
