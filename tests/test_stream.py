"""Streaming `bulkem fit`: chunks of whole datasets, appended outputs, --resume."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import demo

import bulkem
from bulkem import api
from bulkem.interop.cli import main
from bulkem.scale import combine, stream

pytest.importorskip("pyarrow")

TABLES = ("summary", "components", "starts", "start_values")
ARGS = ["--components", "2", "--starts", "3", "--seed", "4", "--backend", "cpu"]


def long_frame(n: int = 11, seed: int = 1) -> pd.DataFrame:
    """String ids in an order that is not sorted, datasets of different sizes, one invalid."""
    d = [x[: 30 + 7 * (i % 4)] for i, x in enumerate(demo(n, 60, seed))]
    d[4] = d[4][:2]
    ids = [f"x{(7 * i) % n:02d}" for i in range(n)]
    return pd.DataFrame({"dataset": np.repeat(ids, [len(x) for x in d]),
                         "value": np.concatenate(d)})


def out_paths(out):
    stem = out.with_suffix("")
    return [out] + [type(out)(f"{stem}.{t}{out.suffix}") for t in TABLES[1:]]


SMALL_READS = ["--read-rows", "45"]  # pieces that cut datasets in two


@contextlib.contextmanager
def _quiet():
    """Warnings from bulkem.fit called directly ignored; the CLI prints its own to stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_streamed_csv_is_the_in_memory_csv(tmp_path, capsys):
    src = tmp_path / "long.csv"
    long_frame().to_csv(src, index=False)
    whole, streamed = tmp_path / "whole.csv", tmp_path / "streamed.csv"
    assert main(["fit", str(src), *ARGS, "--out", str(whole), "--quiet"]) == 0
    assert "warning: 1 of 11 datasets are invalid" in capsys.readouterr().err  # the CLI says it
    with _quiet():
        assert main(["fit", str(src), *ARGS, "--out", str(streamed),
                     "--chunk-datasets", "3", *SMALL_READS]) == 0
    out, err = capsys.readouterr()
    assert "11 datasets fitted on cpu" in out and "4 chunks of up to 3 datasets" in out
    assert "11 datasets" in err and "datasets/s" in err and "ETA 0:00:00" in err
    for a, b in zip(out_paths(whole), out_paths(streamed), strict=True):
        assert a.read_text() == b.read_text(), b.name
    assert not (tmp_path / "streamed.checkpoint").exists()  # removed after a complete run


def test_parquet_in_and_out_equal_bulkem_fit(tmp_path):
    df = long_frame(9, 2)
    src = tmp_path / "long.parquet"
    df.to_parquet(src, row_group_size=20)
    out = tmp_path / "fits.parquet"
    with _quiet():
        ref = api.fit(df, n_components=2, n_starts=3, seed=4, backend="cpu", progress=False)
        assert main(["fit", str(src), *ARGS, "--out", str(out), "--chunk-datasets", "2",
                     *SMALL_READS, "--quiet"]) == 0
    for name, path in zip(TABLES, out_paths(out), strict=True):
        pd.testing.assert_frame_equal(getattr(ref, name), pd.read_parquet(path),
                                      check_exact=True)


def test_resume_fits_only_the_missing_chunks(tmp_path, monkeypatch, capsys):
    src = tmp_path / "long.csv"
    long_frame(10, 3).to_csv(src, index=False)
    whole, out = tmp_path / "whole.csv", tmp_path / "fits.csv"
    assert main(["fit", str(src), *ARGS, "--out", str(whole), "--quiet"]) == 0
    calls = []
    plain = api.fit

    def crash_on_third(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as a crash: chunks 0 and 1 are in the checkpoint
        return plain(*a, **kw)

    monkeypatch.setattr(stream.api, "fit", crash_on_third)
    argv = ["fit", str(src), *ARGS, "--out", str(out), "--chunk-datasets", "3", "--quiet"]
    with pytest.raises(KeyboardInterrupt), _quiet():
        main(argv)
    ckpt = tmp_path / "fits.checkpoint"
    assert bulkem.scale.checkpoint.RunDir(ckpt).finished() == {0, 1}
    assert main(argv) == 2  # a checkpoint is there: --resume or delete it
    assert "pass --resume to continue it" in capsys.readouterr().err
    assert main([*argv[:-5], "--starts", "4", "--out", str(out), "--resume"]) == 2
    assert "n_starts = 3 in the checkpoint, 4 now" in capsys.readouterr().err
    assert main([*argv, "--chunk-datasets", "5", "--resume"]) == 2
    assert "made with --chunk-datasets 3, not 5" in capsys.readouterr().err
    calls.clear()
    with _quiet():
        assert main([*argv, "--resume"]) == 0
    assert len(calls) == 2  # chunks 2 and 3 of 4
    for a, b in zip(out_paths(whole), out_paths(out), strict=True):
        assert a.read_text() == b.read_text(), b.name
    assert not ckpt.exists()


def test_resume_refuses_a_changed_input(tmp_path, capsys):
    src = tmp_path / "long.csv"
    df = long_frame(6, 4)
    df = df[df.dataset != "x04"]  # no invalid dataset
    df.to_csv(src, index=False)
    ckpt = tmp_path / "kept"
    argv = ["fit", str(src), *ARGS, "--out", str(tmp_path / "f.csv"), "--chunk-datasets", "2",
            "--checkpoint", str(ckpt), "--quiet"]
    assert main(argv) == 0
    assert sorted(p.name for p in ckpt.iterdir())[:3] == ["chunk-000000", "chunk-000001",
                                                          "chunk-000002"]
    df.assign(value=df.value * 2).to_csv(src, index=False)
    assert main([*argv, "--resume"]) == 2
    assert "chunk 0 of" in capsys.readouterr().err
    df[df.dataset.isin(df.dataset.unique()[:2])].to_csv(src, index=False)  # chunk 0 only
    assert main([*argv, "--resume"]) == 2
    assert "has chunk 1 but" in capsys.readouterr().err


@pytest.mark.parametrize("chunk", ["5", "1"])
def test_a_dataset_in_two_places_is_refused(tmp_path, capsys, chunk):
    a, b = demo(2, 40, 5)
    src = tmp_path / "long.csv"
    pd.DataFrame({"dataset": ["a"] * 20 + ["b"] * 40 + ["a"] * 20,
                  "value": np.r_[a[:20], b, a[20:]]}).to_csv(src, index=False)
    assert main(["fit", str(src), *ARGS, "--out", str(tmp_path / "f.csv"), "--chunk-datasets",
                 chunk, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "dataset 'a' has rows in two places" in err and "again from data row 60" in err
    assert "sort the file by 'dataset'" in err


def test_seen_ids_finds_repeats_across_levels():
    seen = stream._SeenIds()
    for k in range(20):
        assert len(seen.add(np.arange(10 * k, 10 * k + 10))) == 0
    assert list(seen.add(np.array([500, 3, 199]))) == [1, 2]
    assert list(seen.add(np.array(["x", "y"], dtype=object))) == []


@pytest.mark.parametrize("ids", [["b", "a", None, "c"], [3, 1, 2, 7]])
def test_split_long_is_bulkem_fits_split(ids):
    from bulkem.data import as_datasets

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"value": rng.random(40),
                       "dataset": [ids[k] for k in rng.integers(0, 4, 40)]})
    fast = combine.split_long(df, "dataset", "value")
    slow = as_datasets(df)
    assert [k for k, _ in slow] == list(fast)
    assert all(np.array_equal(v, fast[k]) for k, v in slow)
    assert combine.split_long(df.assign(other=1), "dataset", "value") is None
    assert combine.split_long(df.astype({"dataset": "category"}), "dataset", "value") is None


def test_stream_passes_family_options_and_writes_every_table(tmp_path):
    from test_checkpoint import HMM, hmm_frame

    df = hmm_frame(5, 6)
    src = tmp_path / "hmm.parquet"
    df.to_parquet(src)
    kw = {k: v for k, v in HMM.items() if k != "progress"}
    ref = api.fit(df, progress=False, **kw)
    report = stream.fit_file(src, tmp_path / "f.parquet", kw, chunk_datasets=2, quiet=True)
    assert report["n_chunks"] == 3
    assert {o.rsplit("/", 1)[-1] for o in report["outputs"]} >= {
        f"f.{name}.parquet" for name in ref.tables}
    pd.testing.assert_frame_equal(ref.transitions, pd.read_parquet(tmp_path /
                                                                   "f.transitions.parquet"))


def test_reading_parquet_in_chunks_holds_one_chunk(tmp_path):
    """Arrow holds about a chunk's rows, not the file read so far (pyarrow's read-ahead
    cache kept every column chunk read: 18 GiB of host memory over 10^7 datasets)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "long.parquet"
    with pq.ParquetWriter(path, pa.schema([("dataset", pa.int64()), ("value", pa.float64())])) as w:
        for g in range(40):  # 40 row groups of 50 datasets x 100 values
            ids = np.repeat(np.arange(50 * g, 50 * (g + 1)), 100)
            w.write_table(pa.table({"dataset": ids,
                                    "value": np.random.default_rng(g).random(len(ids))}))
    held = []
    for chunk in stream.read_chunks(path, "dataset", 50, read_rows=5_000):
        assert len(chunk.ids) == 50
        held.append(pa.total_allocated_bytes())
    assert len(held) == 40
    assert max(held) < path.stat().st_size / 4, (max(held), path.stat().st_size)


@pytest.mark.parametrize("family", ["hmm", "ar"])
def test_streamed_family_options_are_the_in_memory_ones(tmp_path, capsys, family):
    """--emission, --symbols (hmm) and --order (ar) reach the streamed fits (they were
    dropped: a categorical HMM was fitted with Gaussian emissions; --order did not exist)."""
    from test_checkpoint_families import OPTIONS, family_frame

    src = tmp_path / "in.csv"
    family_frame(family, 5, 3).to_csv(src, index=False)
    common = ["fit", str(src), "--family", family, *OPTIONS[family][1], "--starts", "2",
              "--max-iter", "5", "--seed", "3", "--backend", "cpu", "--quiet"]
    whole, streamed = tmp_path / "whole.csv", tmp_path / "streamed.csv"
    with _quiet():
        assert main([*common, "--out", str(whole)]) == 0
        assert main([*common, "--out", str(streamed), "--chunk-datasets", "2"]) == 0
    capsys.readouterr()
    written = sorted(p.name for p in tmp_path.glob("whole.*"))
    assert len(written) >= 4
    for name in written:
        assert (tmp_path / name).read_text() == (tmp_path / name.replace(
            "whole", "streamed")).read_text(), name
