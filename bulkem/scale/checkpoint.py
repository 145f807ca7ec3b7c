"""Checkpoint and resume: ``bulkem.fit(..., checkpoint="run_dir/")``.

The datasets are cut into chunks of whole datasets, in input order, and fitted
chunk by chunk through the ordinary :func:`bulkem.fit`.  As each chunk
finishes, its tables go to ``run_dir`` as Parquet files, in a folder written
under a temporary name and renamed when complete, so a crash (even SIGKILL)
leaves only whole chunks behind.  The same call again fits only the chunks that
are missing and returns the tables an uninterrupted run would have returned:
each fit depends on the seed, the dataset's values and the start number alone,
never on which other datasets share its batch.

``run_dir`` holds::

    manifest.json          the arguments, the chunk size, the data's size and hashes
    chunk-000000/          one folder per finished chunk:
        summary.parquet    ... one file per table of the FitResult,
        best.parquet       the best fits (for density, predict, params),
        meta.json          the chunk's datasets, data hash, backend and timing, and a
                           checksum of each of its files and of itself.

A run directory made with other arguments or other data is refused, with a
message that lists what differs.  A damaged one (a chunk's file changed,
truncated, missing or copied from another chunk; a garbled ``meta.json`` or
manifest) is refused with a :class:`CheckpointError` that names the chunk
folder to delete; the next call fits that chunk again.  The backend, the
progress display and ``strict`` may change between runs (they do not change
the tables).  One process at a time may use a run directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__, api, models
from ..fitting.progress import Progress
from ..tuning import check as check_tuning
from . import combine
from .combine import Parts

MANIFEST = "manifest.json"
# 2: checksums of the manifest and of every file of a chunk.
FORMAT = "bulkem-checkpoint-2"
CHUNK_NAME = re.compile(r"chunk-(\d{6})")
# Arguments that may differ between the runs of one checkpoint: they do not
# change the tables.
# (tuning: speed and sum order; criterion: a grid's choice, and a grid is not checkpointed)
NOT_COMPARED = ("backend", "progress", "strict", "tuning", "criterion")
# Arguments bulkem.fit gained after checkpoints were first written, with their defaults: left
# out of the manifest at those values, so that a run written before them resumes.
LATER_DEFAULTS = {"bootstrap": 0, "bootstrap_level": 0.95, "reorder": True, "accel": None,
                  "rtol": None, "covariance_type": "diag"}
# Warnings of bulkem.fit that a chunked run replaces by one for the whole run.
_BATCH_WARNINGS = ("datasets are invalid and were not fitted", "have no usable start")


class CheckpointError(ValueError):
    """A checkpoint directory that is damaged: the message says what to delete."""


def _require_pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:  # pragma: no cover - pyarrow is in the test extra
        raise ImportError(
            "checkpoints are Parquet files and need pyarrow: pip install 'bulkem[parquet]'."
        ) from err
    return pa, pq


# --- hashing and JSON --------------------------------------------------------


def _plain(x: Any) -> Any:
    return x.item() if isinstance(x, np.generic) else x


def jsonable(x: Any) -> Any:
    """Arguments as JSON values (arrays as nested lists; anything else by repr)."""
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    x = _plain(x)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return repr(x)


def _feed(h: Any, value: Any) -> None:
    """Feed a dataset (or any input piece) into a hash, exactly and in order."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        frame = value.to_frame() if isinstance(value, pd.Series) else value
        for name, col in frame.items():
            h.update(f"\x00{name}:{col.dtype}:{len(col)}\x00".encode())
            if isinstance(col.dtype, np.dtype) and col.dtype.kind in "biufcmM":
                h.update(np.ascontiguousarray(col.to_numpy()))  # numbers: their bytes
            else:  # strings, objects: codes in order, then pandas' hash of each distinct value
                codes, uniques = pd.factorize(col)
                h.update(np.ascontiguousarray(codes))
                h.update(pd.util.hash_pandas_object(pd.Series(uniques), index=False).to_numpy())
        return
    try:
        a = np.asarray(value)
    except (ValueError, TypeError):  # ragged: a list of sequences, say
        a = None
    if a is not None and a.dtype.kind in "biuf":
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a))
    elif isinstance(value, (list, tuple)):
        h.update(f"[{len(value)}".encode())
        for v in value:
            _feed(h, v)
    else:
        h.update(repr(value).encode())


def hash_input(piece: Any) -> str:
    """Hash of a piece of input in :func:`bulkem.fit`'s forms (identifiers included)."""
    h = hashlib.blake2b(digest_size=16)
    if isinstance(piece, Mapping):
        for k, v in piece.items():
            h.update(f"\x00{_plain(k)!r}\x00".encode())
            _feed(h, v)
    else:
        _feed(h, piece)
    return h.hexdigest()


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _checksum(record: dict) -> str:
    """Checksum of a JSON record (its ``checksum`` entry left out)."""
    rest = {k: v for k, v in record.items() if k != "checksum"}
    return _digest(json.dumps(rest, sort_keys=True).encode())


def _signed(record: dict) -> str:
    """A JSON record with its checksum, as written to disk."""
    record = json.loads(json.dumps(jsonable(record)))  # tuples -> lists, as read back
    return json.dumps({**record, "checksum": _checksum(record)}, indent=1)


def _short(x: Any, width: int = 60) -> str:
    s = json.dumps(x)
    return s if len(s) <= width else s[: width - 3] + "..."


def _differences(old: dict, new: dict) -> list[str]:
    out = []
    for key in dict.fromkeys([*old, *new]):
        a, b = old.get(key, "(absent)"), new.get(key, "(absent)")
        if a != b:
            out.append(f"{key} = {_short(a)} in the checkpoint, {_short(b)} now")
    return out


# --- the run directory -------------------------------------------------------


class RunDir:
    """A checkpoint directory: a manifest and one folder per finished chunk.

    Parameters
    ----------
    path : str or os.PathLike
        The directory; created (with its parents) when the first chunk is written.

    Attributes
    ----------
    manifest : dict or None
        The manifest found there, or None for a new run.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.manifest = None
        self._pending: dict | None = None
        mpath = self.path / MANIFEST
        if mpath.exists():
            self.manifest = self._read_manifest(mpath)
        elif self.path.exists() and not self.path.is_dir():
            raise ValueError(
                f"checkpoint directory {self.path} is a file; name a new or empty directory.")
        elif self.path.is_dir() and any(CHUNK_NAME.fullmatch(p.name)
                                        for p in self.path.iterdir()):
            raise CheckpointError(
                f"checkpoint {self.path} has chunk folders but no {MANIFEST}: it is damaged "
                "(the arguments its chunks were fitted with are lost). Delete the directory "
                f"{self.path} to start afresh.")
        elif self.path.is_dir() and any(self.path.iterdir()):
            raise ValueError(
                f"checkpoint directory {self.path} exists and is not a bulkem checkpoint (no "
                f"{MANIFEST}); name a new or empty directory."
            )

    def _read_manifest(self, mpath: Path) -> dict:
        def damaged(what: str) -> CheckpointError:
            return CheckpointError(
                f"checkpoint {self.path} is damaged: its {MANIFEST} {what}. Delete the "
                f"directory {self.path} to start afresh.")

        try:
            manifest = json.loads(mpath.read_bytes().decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise damaged(f"is not valid JSON ({err})") from None
        if not isinstance(manifest, dict):
            raise damaged(f"holds a {type(manifest).__name__}, not a JSON object")
        if manifest.get("format") != FORMAT:
            raise ValueError(
                f"{mpath} is not a bulkem checkpoint of this version (format "
                f"{manifest.get('format')!r}, expected {FORMAT!r}); use another "
                "directory (or delete this one to start afresh)."
            )
        if manifest.get("checksum") != _checksum(manifest):
            raise damaged("fails its checksum (changed since it was written)")
        return manifest

    def start(self, source: str, arguments: dict, chunk_datasets: int,
              data: dict | None = None) -> None:
        """Check a run against the manifest, or prepare a new manifest.

        Parameters
        ----------
        source : str
            What makes the chunks ("fit": in-memory datasets; "stream": a file).
        arguments : dict
            The fit's arguments, as compared between runs (JSON-able).
        chunk_datasets : int
            Datasets per chunk.
        data : dict, optional
            The data's size and per-chunk hashes, when known up front.

        Raises
        ------
        ValueError
            When the manifest differs: the message lists what.
        """
        new = {"format": FORMAT, "bulkem": __version__, "source": source,
               "arguments": jsonable(arguments), "chunk_datasets": int(chunk_datasets),
               "data": jsonable(data)}
        new = json.loads(_signed(new))  # tuples -> lists, as read back
        if self.manifest is None:
            self._pending = new
            return
        old = self.manifest
        diffs = _differences({k: old.get(k) for k in ("bulkem", "source", "chunk_datasets")},
                             {k: new[k] for k in ("bulkem", "source", "chunk_datasets")})
        diffs += _differences(old.get("arguments", {}), new["arguments"])
        if diffs:
            raise ValueError(
                f"checkpoint {self.path} was made with other arguments: " + "; ".join(diffs)
                + ". Call with the same arguments to resume it, or use another directory "
                "(or delete this one) to start afresh."
            )
        if data is not None and old.get("data") != new["data"]:
            raise ValueError(
                f"checkpoint {self.path} was made from other data: "
                + _data_differences(old.get("data") or {}, new["data"], int(chunk_datasets))
                + ". Pass the same datasets in the same order to resume it, or use another "
                "directory (or delete this one) to start afresh."
            )

    def _chunk(self, i: int) -> Path:
        return self.path / f"chunk-{i:06d}"

    def finished(self) -> set[int]:
        """Numbers of the chunks written completely."""
        if not self.path.is_dir():
            return set()
        return {int(m.group(1)) for p in self.path.iterdir()
                if (m := CHUNK_NAME.fullmatch(p.name)) and p.is_dir()}

    def damaged(self, i: int, what: str) -> CheckpointError:
        """The error for chunk ``i`` found damaged (``what``: how)."""
        d = self._chunk(i)
        return CheckpointError(
            f"checkpoint {self.path}: chunk {i} is damaged: {what}. Delete the folder {d} "
            "and resume (the same call, or the same `bulkem fit` with --resume): that chunk "
            "is fitted again, the others are kept.")

    def meta(self, i: int) -> dict:
        """The ``meta.json`` of finished chunk ``i``, checked.

        Raises
        ------
        CheckpointError
            When it is missing, not JSON, fails its checksum or is another chunk's.
        """
        path = self._chunk(i) / "meta.json"
        try:
            meta = json.loads(path.read_bytes().decode())
        except FileNotFoundError:
            raise self.damaged(i, "its meta.json is missing") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise self.damaged(i, f"its meta.json is not valid JSON ({err})") from None
        if not isinstance(meta, dict) or meta.get("checksum") != _checksum(meta):
            raise self.damaged(i, "its meta.json fails its checksum (changed since it was "
                                  "written)")
        if meta.get("chunk") != i:
            raise self.damaged(i, f"its meta.json is chunk {meta.get('chunk')}'s (copied from "
                                  "another chunk?)")
        return meta

    def _read_file(self, i: int, name: str, meta: dict) -> bytes:
        """The bytes of a file of chunk ``i``, checked against its checksum in ``meta``."""
        try:
            data = (self._chunk(i) / name).read_bytes()
        except FileNotFoundError:
            raise self.damaged(i, f"its {name} is missing") from None
        if _digest(data) != meta["files"].get(name):
            raise self.damaged(i, f"its {name} fails its checksum (changed, truncated or "
                                  "copied from another chunk since it was written)")
        return data

    def _write_manifest(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".{MANIFEST}.tmp{os.getpid()}"
        tmp.write_text(_signed(self._pending))
        _fsync(tmp)
        os.replace(tmp, self.path / MANIFEST)
        _fsync(self.path)
        self.manifest, self._pending = self._pending, None

    def clear_temporary(self) -> None:
        """Remove folders of chunks that a killed run left half-written."""
        if self.path.is_dir():
            for p in self.path.glob(".chunk-*.tmp*"):
                shutil.rmtree(p, ignore_errors=True)

    def write(self, i: int, parts: Parts, meta: dict) -> None:
        """Write chunk ``i`` atomically: a temporary folder, renamed when complete."""
        pa, pq = _require_pyarrow()
        if self._pending is not None:
            self._write_manifest()
        tmp = self.path / f".chunk-{i:06d}.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            for name, table in parts.tables.items():
                pq.write_table(pa.Table.from_pandas(table, preserve_index=False),
                               tmp / f"{name}.parquet")
            pq.write_table(_best_table(parts.best), tmp / "best.parquet")
        except (pa.ArrowException, TypeError, ValueError) as err:
            shutil.rmtree(tmp, ignore_errors=True)
            raise TypeError(
                f"chunk {i} cannot be written to Parquet ({err}); checkpoints need dataset "
                "identifiers of one Parquet type (all integers or all strings, say)."
            ) from None
        files = {p.name: _digest(p.read_bytes()) for p in sorted(tmp.iterdir())}
        meta = {**meta, "tables": list(parts.tables), "scalars": jsonable(parts.scalars),
                "result_class": parts.result_class, "files": files}
        (tmp / "meta.json").write_text(_signed(meta))
        for p in tmp.iterdir():
            _fsync(p)
        os.rename(tmp, self._chunk(i))
        _fsync(self.path)

    def read(self, i: int) -> Parts:
        """The parts of finished chunk ``i``, every file checked against its checksum.

        Raises
        ------
        CheckpointError
            When a file of the chunk is missing or changed.
        """
        pa, pq = _require_pyarrow()
        meta = self.meta(i)

        def table(name: str):
            data = self._read_file(i, name, meta)
            try:
                return pq.read_table(pa.BufferReader(data))
            except pa.ArrowException as err:  # (only if it was written so)
                raise self.damaged(i, f"its {name} is not readable Parquet ({err})") from None

        tables = {name: table(f"{name}.parquet").to_pandas() for name in meta["tables"]}
        return Parts(tables, _read_best(table("best.parquet")), meta["scalars"],
                     meta["result_class"])


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _best_table(best: dict):
    """``FitResult._best`` (id -> tuple of 1-D float arrays) as an Arrow table."""
    pa, _ = _require_pyarrow()
    ids = list(best)
    records = list(best.values())
    cols = {"dataset": pa.array([_plain(k) for k in ids])}
    for j in range(len(records[0]) if records else 0):
        cols[f"part{j}"] = pa.array(
            [np.asarray(r[j], dtype=np.float64).ravel() for r in records],
            type=pa.list_(pa.float64()))
    return pa.table(cols)


def _read_best(table) -> dict:
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return {}
    ids = table.column("dataset").to_numpy(zero_copy_only=False)
    parts = []
    for name in table.column_names[1:]:
        col = table.column(name).combine_chunks()
        flat = pc.list_flatten(col).to_numpy(zero_copy_only=False)
        parts.append(flat.reshape(table.num_rows, -1))  # same length for every dataset
    return {k: tuple(p[r] for p in parts) for r, k in enumerate(ids)}


def _data_differences(old: dict, new: dict, chunk: int) -> str:
    if old.get("n_datasets") != new.get("n_datasets"):
        return f"{old.get('n_datasets')} datasets there, {new.get('n_datasets')} now"
    a, b = old.get("chunk_hashes") or [], new.get("chunk_hashes") or []
    bad = [i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y]
    n = new.get("n_datasets") or 0
    what = ", ".join(f"chunk {i} (datasets {i * chunk} to {min((i + 1) * chunk, n) - 1})"
                     for i in bad[:5])
    more = f" and {len(bad) - 5} more chunks" if len(bad) > 5 else ""
    return f"the values or identifiers of {what}{more} differ"


# --- in-memory datasets in chunks ------------------------------------------------


class _Chunks:
    """Cuts :func:`bulkem.fit`'s input into chunks of whole datasets, in input order.

    Each chunk is in a form ``bulkem.fit`` takes and gives the same datasets,
    with the same identifiers, as the whole input: row subsets of a long
    DataFrame with the dataset column; else ``{identifier: dataset}`` dicts
    of the datasets the family reads from the input (``family.read``, as
    ``bulkem.fit`` reads it: a TMAP's list of runs is one trace, a mixture's
    list of arrays many datasets).
    """

    def __init__(self, datasets: Any, fam: Any, kwargs: dict):
        dataset_col = kwargs.get("dataset_col", "dataset")
        self.data = datasets
        if isinstance(datasets, pd.DataFrame) and dataset_col in datasets.columns:
            codes, uniques = pd.factorize(datasets[dataset_col])  # first appearance; NaN -1
            self._order = np.argsort(codes, kind="stable")
            self._sorted = codes[self._order]
            self.kind, self.n = "frame", len(uniques)
        else:
            self._pairs = fam.read(datasets, dataset_col, kwargs.get("value_col", "value"),
                                   combine._options(kwargs))
            self.kind, self.n = "pairs", len(self._pairs)

    def get(self, lo: int, hi: int) -> Any:
        """Datasets ``lo`` to ``hi - 1`` (input order), in a form ``bulkem.fit`` takes."""
        if self.kind == "frame":
            a, b = np.searchsorted(self._sorted, [lo, hi])
            return self.data.iloc[np.sort(self._order[a:b])]
        return dict(self._pairs[lo:hi])

    def weights(self, weights: Any, lo: int, hi: int) -> Any:
        """The ``weights=`` of :meth:`get` ``(lo, hi)``: a column's name as it is (the
        rows carry it); weights per dataset (a dict by key, a sequence in input order)
        as a dict with the chunk's keys.  Weights that do not align with the datasets
        are passed whole, for ``bulkem.fit`` to say so."""
        if weights is None or isinstance(weights, str) or self.kind == "frame" or self.n == 1:
            return weights
        keys = [k for k, _ in self._pairs[lo:hi]]
        if isinstance(weights, Mapping):
            return {k: weights[k] for k in keys if k in weights}
        if not isinstance(weights, (list, tuple, np.ndarray)) or len(weights) != self.n:
            return weights
        return {k: weights[lo + j] for j, k in enumerate(keys)}


def chunk_bounds(n: int, chunk_datasets: int) -> Iterator[tuple[int, int, int]]:
    """``(chunk number, first dataset, end)`` of each chunk of ``n`` datasets."""
    for i, lo in enumerate(range(0, n, chunk_datasets)):
        yield i, lo, min(lo + chunk_datasets, n)


# --- bulkem.fit(..., checkpoint=...) ----------------------------------------------


class _Relay:
    """Forwards each chunk's progress to the run's bar, as a running total."""

    def __init__(self, bar: Progress):
        self.bar, self.base = bar, 0  # base: fits of the chunks before this one

    def __call__(self, done: int, total: int) -> None:
        self._to(self.base + done)

    def _to(self, target: int) -> None:
        if target > self.bar.done:
            self.bar(target - self.bar.done)

    def chunk(self, n_fits: int) -> None:
        """The chunk of ``n_fits`` fits is done (fitted or read back): top the bar up."""
        self.base += n_fits
        self._to(self.base)


def draw_seed() -> int:
    """A random seed, as :func:`bulkem.fit` draws one when none is given."""
    return int(np.random.SeedSequence().generate_state(1, np.uint32)[0])


def resolve_seed(run: RunDir, seed: int | None) -> int | None:
    """The seed of a run: the one given, else the checkpoint's, else a new one."""
    if seed is not None:
        return seed
    if run.manifest is not None:
        return run.manifest["arguments"].get("seed")
    return draw_seed()


def warn_for_run(status: Mapping[str, int], caught: list, stacklevel: int = 4) -> None:
    """Warn once for a whole chunked run, as :func:`bulkem.fit` warns for one batch.

    Parameters
    ----------
    status : mapping of str -> int
        Datasets by status over the run.
    caught : list of warnings.WarningMessage
        The chunks' warnings: bulkem.fit's per-batch ones are replaced, the
        others repeated.
    stacklevel : int
        Passed to :func:`warnings.warn`.
    """
    for w in caught:
        if not any(s in str(w.message) for s in _BATCH_WARNINGS):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    status = dict(status)
    n, n_bad, n_failed = (sum(status.values()), status.get("invalid_data", 0),
                          status.get("failed", 0))
    if n_bad:
        warnings.warn(f"{n_bad} of {n} datasets are invalid and were not fitted; see "
                      "summary.status and summary.message.", stacklevel=stacklevel)
    if n_failed:
        warnings.warn(f"{n_failed} of {n} datasets have no usable start (status 'failed'); "
                      "try more starts or fewer components.", stacklevel=stacklevel)


def check_path(path: Any, name: str = "checkpoint") -> None:
    """Raise unless ``path`` names a directory (a non-empty str or os.PathLike)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise TypeError(f"{name} must name a run directory (a str or pathlib.Path, e.g. "
                        f"{name}='fits.checkpoint'); got {name} = {path!r}.")


def fit(datasets: Any, checkpoint: str | os.PathLike, **kwargs: Any) -> combine.FitResult:
    """:func:`bulkem.fit` in chunks, each written to ``checkpoint`` as it finishes.

    Called by ``bulkem.fit(..., checkpoint=run_dir)``; takes the same
    arguments.  A second call with the same arguments and data fits only the
    chunks that are missing.  With ``seed=None`` a new run draws a seed and a
    resumed run takes the checkpoint's.

    Parameters
    ----------
    datasets
        As :func:`bulkem.fit`.
    checkpoint : str or os.PathLike
        The run directory.
    **kwargs
        Every other argument of :func:`bulkem.fit`.

    Returns
    -------
    FitResult
        The tables of an uninterrupted ``bulkem.fit`` (rows in input order);
        ``elapsed`` is this call's wall time, ``backend`` the backend(s) that
        fitted the chunks, joined by "+" when they differ.

    Raises
    ------
    CheckpointError
        When the checkpoint is damaged (the message names what to delete).
    ValueError
        When the checkpoint was made with other arguments or data (the message
        says what differs), or as :func:`bulkem.fit`.
    TypeError
        When ``checkpoint`` is not a path, or as :func:`bulkem.fit`.
    """
    t0 = time.perf_counter()
    check_path(checkpoint)
    _require_pyarrow()
    fam = models.get(kwargs.get("family", "invgauss"))
    combine.check_splittable(kwargs, weights_by_dataset=True)
    chunks = _Chunks(datasets, fam, kwargs)
    weights = kwargs.pop("weights", None)
    if chunks.n == 0:
        return api.fit(datasets, **kwargs)  # raises: no datasets
    run = RunDir(checkpoint)
    n_starts = kwargs.get("n_starts", 10)
    chunk_fits = check_tuning(kwargs.get("tuning")).checkpoint_chunk_fits
    default_chunk = max(1, chunk_fits // n_starts) if isinstance(n_starts, int) and n_starts > 0 \
        else 1
    per_chunk = int(run.manifest["chunk_datasets"]) if run.manifest else default_chunk
    kwargs["seed"] = resolve_seed(run, kwargs.get("seed"))
    bounds = list(chunk_bounds(chunks.n, per_chunk))
    hashes = [hash_input(chunks.get(lo, hi)) for _, lo, hi in bounds]
    chunk_weights = [chunks.weights(weights, lo, hi) for _, lo, hi in bounds]
    if weights is not None and not isinstance(weights, str):  # (a column: in the rows' hash)
        hashes = [_digest((h + hash_input(w)).encode())
                  for h, w in zip(hashes, chunk_weights, strict=True)]
    arguments = {k: v for k, v in kwargs.items() if k not in NOT_COMPARED
                 and not (k in LATER_DEFAULTS and v == LATER_DEFAULTS[k])}
    if isinstance(weights, str):
        arguments["weights"] = weights
    whole = hashlib.blake2b("".join(hashes).encode(), digest_size=16).hexdigest()
    run.start("fit", arguments, per_chunk,
              {"n_datasets": chunks.n, "hash": whole, "chunk_hashes": hashes})
    run.clear_temporary()
    done = run.finished()

    progress = kwargs.pop("progress", None)
    bar = Progress(progress, chunks.n * n_starts if isinstance(n_starts, int) else 0)
    relay = _Relay(bar)
    parts: list[Parts] = []
    caught: list = []
    try:
        for i, lo, hi in bounds:
            if i in done:
                if run.meta(i).get("hash") != hashes[i]:
                    raise run.damaged(i, "its meta.json is of other data than the manifest's "
                                         "chunk (copied from another checkpoint?)")
                parts.append(run.read(i))
            else:
                t1 = time.perf_counter()
                data = chunks.get(lo, hi)
                if chunks.kind == "frame":  # the plain layout split fast; others by bulkem.fit
                    fast = combine.split_long(data, kwargs.get("dataset_col", "dataset"),
                                              kwargs.get("value_col", "value"),
                                              kwargs.get("family", "invgauss"))
                    data = data if fast is None else fast
                with warnings.catch_warnings(record=True) as got:
                    warnings.simplefilter("always")
                    res = api.fit(data, progress=relay if bar.active else False,
                                  weights=chunk_weights[i], **kwargs)
                caught += got
                p = combine.split(res)
                run.write(i, p, {"chunk": i, "first": lo, "end": hi, "hash": hashes[i],
                                 "seconds": time.perf_counter() - t1})
                parts.append(p)
            relay.chunk((hi - lo) * n_starts)
    finally:
        bar.close()
    result = combine.join(parts, elapsed=time.perf_counter() - t0)
    if result._model is None:  # every chunk read back: the model from the first dataset
        result._model = combine.model_for(kwargs, chunks.get(0, 1))
    warn_for_run(result.summary["status"].value_counts(sort=False), caught)
    return result
