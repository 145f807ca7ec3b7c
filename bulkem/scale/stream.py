"""Streaming ``bulkem fit``: a long file fitted in chunks of whole datasets.

``bulkem fit long.parquet --chunk-datasets 50000 --out fits.parquet`` reads the
input a piece at a time (Parquet record batches, CSV chunks of rows), cuts it
into chunks of ``--chunk-datasets`` whole datasets, fits each chunk with
:func:`bulkem.fit` and appends its tables to the outputs as it finishes, so host
memory is bounded by the chunk size (and the input's row-group size), not the
input's.  The outputs are written under temporary names beside them
(``.<name>.partial``) and renamed into place when the run completes, so an
output file that is there is always whole and readable (a Parquet file is
readable only once its footer is written); meanwhile the finished chunks can be
read from the checkpoint.  A dataset's rows must be contiguous in the file (any order of
datasets; sort the file by dataset if they are not): a dataset found in two
places stops the run with a message.

Each finished chunk is also kept in a checkpoint directory (the machinery of
:mod:`bulkem.scale.checkpoint`), so ``--resume`` continues a run that crashed: it
checks that the arguments and the already-fitted part of the input are the
same, rewrites the outputs from the kept chunks and fits the rest.  The
checkpoint is removed when the run completes, unless ``--checkpoint DIR`` named
it.  The outputs hold the rows an in-memory ``bulkem fit`` of the same file
writes, in the same order.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import api
from ..tuning import check as check_tuning
from . import checkpoint, combine
from .checkpoint import RunDir

# Rows read from the input at a time (a Parquet record batch, a CSV chunk).
READ_ROWS = 1_000_000
# Progress lines at most this often when stderr is not a terminal (a log file).
REPORT_EVERY_S = 10.0
# CLI arguments of `bulkem fit` -> bulkem.fit arguments (those present are passed).
FIT_ARGS = {"family": "family", "components": "n_components", "starts": "n_starts",
            "max_iter": "max_iter", "tol": "tol", "seed": "seed", "backend": "backend",
            "dtype": "dtype", "dataset_col": "dataset_col", "value_col": "value_col",
            "reg_covar": "reg_covar", "init_method": "init_method"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the streaming options to the ``bulkem fit`` parser."""
    g = parser.add_argument_group(
        "streaming (inputs larger than memory)",
        "Read, fit and write the input in chunks of whole datasets; a dataset's rows must be "
        "contiguous in the file.")
    g.add_argument("--chunk-datasets", type=int, metavar="N",
                   help="stream: fit N datasets at a time and append their tables to the "
                        "outputs as they finish; host memory is bounded by N")
    g.add_argument("--checkpoint", metavar="DIR",
                   help="keep each finished chunk in DIR (Parquet) so that --resume can go on "
                        "after a crash (default: OUT without suffix + '.checkpoint', removed "
                        "when the run completes); implies streaming")
    g.add_argument("--resume", action="store_true",
                   help="continue an interrupted streamed run from its checkpoint: same input "
                        "and arguments; only the missing chunks are fitted")
    g.add_argument("--read-rows", type=int, metavar="N", default=READ_ROWS,
                   help=f"rows read from the input at a time (default {READ_ROWS:,}): with "
                        "--chunk-datasets, host memory is bounded by both")


def wanted(args: argparse.Namespace) -> bool:
    """Whether ``bulkem fit`` was asked to stream."""
    return (getattr(args, "chunk_datasets", None) is not None or getattr(args, "resume", False)
            or getattr(args, "checkpoint", None) is not None)


def main(args: argparse.Namespace, options: dict | None = None) -> int:
    """``bulkem fit`` streamed (see the module's description); the CLI's exit code.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``bulkem fit`` command line.
    options : dict, optional
        The family's options of :func:`bulkem.fit` (``emission=``, ``order=``,
        ...), as the in-memory path passes them.
    """
    fit_kwargs = {name: getattr(args, cli) for cli, name in FIT_ARGS.items() if hasattr(args, cli)}
    fit_kwargs.update(options or {})
    report = fit_file(args.input, args.out, fit_kwargs, chunk_datasets=args.chunk_datasets,
                      read_rows=args.read_rows, checkpoint_dir=args.checkpoint,
                      resume=args.resume, quiet=args.quiet)
    print(f"{report['n_datasets']} datasets fitted on {report['backend']} in "
          f"{report['seconds']:.2f} s ({report['n_chunks']} chunks of up to "
          f"{report['chunk_datasets']} datasets); wrote {', '.join(report['outputs'])}")
    print(pd.Series(report["status"], name="count").rename_axis("status").to_string())
    return 0


# --- reading whole datasets -------------------------------------------------


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".pq")


def _pieces(path: Path, read_rows: int) -> Iterator[tuple[pd.DataFrame, float]]:
    """The input a piece at a time, with the share of it read so far."""
    if _is_parquet(path):
        _, pq = checkpoint._require_pyarrow()
        # pre_buffer=False: pyarrow's read-ahead cache (its default here) keeps every column
        # chunk read until the file is closed, so host memory grew with the input (18 GiB
        # for 10^7 datasets), not with the chunk size
        pf = pq.ParquetFile(path, pre_buffer=False)
        total, done = max(pf.metadata.num_rows, 1), 0
        for batch in pf.iter_batches(batch_size=read_rows):
            done += batch.num_rows
            yield batch.to_pandas(), done / total
    else:
        size = max(os.path.getsize(path), 1)
        with open(path, "rb") as f:
            for df in pd.read_csv(f, chunksize=read_rows):
                yield df, min(f.tell() / size, 1.0)


def _run_starts(ids: pd.Series, before: Any = None) -> np.ndarray:
    """Row numbers where a new run of equal dataset identifiers begins (none missing); with
    ``before`` (the identifier of the row before these, if any), row 0 only if it differs."""
    a = ids.to_numpy()
    if a.dtype.kind in "iuf":  # (numbers: one NumPy pass)
        new = np.empty(len(a), dtype=bool)
        np.not_equal(a[1:], a[:-1], out=new[1:])
    else:  # (vectorised for Arrow strings too)
        new = ids.ne(ids.shift()).to_numpy(dtype=bool, copy=True)
    if len(a):
        new[0] = before is None or bool(a[0] != before)
    return np.flatnonzero(new)


class Chunk:
    """A chunk of whole datasets read from the input.

    Attributes
    ----------
    number : int
    frame : pandas.DataFrame
        Its rows, in file order.
    ids : ndarray
        Its datasets, in file order (each once).
    first_row : int
        Row number of its first row in the input (rows without a dataset not counted).
    read : float
        Share of the input read when it was cut.
    digest : str
        Its hash (``checkpoint.hash_input`` of ``frame``), taken where it is cut (the
        reader's thread, while the chunk before fits).
    """

    def __init__(self, number: int, frame: pd.DataFrame, ids: np.ndarray, first_row: int,
                 read: float):
        self.number, self.frame, self.ids, self.first_row, self.read = (
            number, frame, ids, first_row, read)
        self.digest = checkpoint.hash_input(frame)


def read_chunks(path: Path, dataset_col: str, chunk_datasets: int,
                read_rows: int | None = None) -> Iterator[Chunk]:
    """Cut a long file into chunks of ``chunk_datasets`` whole datasets, in file order.

    Rows without a dataset identifier are left out (as :func:`bulkem.fit`
    leaves them out).  At most one chunk and one piece of rows are held.

    Raises
    ------
    ValueError
        When the dataset column is missing, or a dataset's rows are not
        contiguous within a chunk.
    """
    held: list[pd.DataFrame] = []  # the rows read and not yet in a chunk, piece by piece
    starts: list[np.ndarray] = []  # their runs' first rows (from the first held row)
    n_held, n_runs, last = 0, 0, None
    row0, number = 0, 0
    for piece, read in _pieces(path, read_rows or READ_ROWS):
        if dataset_col not in piece.columns:
            raise ValueError(
                f"{path} has columns {list(piece.columns)}; expected a {dataset_col!r} column "
                "naming the dataset of each row. Pass --dataset-col to name another.")
        piece = piece[piece[dataset_col].notna()]
        if not len(piece):
            continue
        ids = piece[dataset_col]
        s = _run_starts(ids, last) + n_held  # (each piece's runs once: no rows read again)
        last = ids.iloc[-1]
        held.append(piece)
        starts.append(s)
        n_held += len(piece)
        n_runs += len(s)
        # every run but the last is a whole dataset: the last may go on in the next piece
        if n_runs > chunk_datasets:
            pend = pd.concat(held, ignore_index=True) if len(held) > 1 else held[0]
            at = np.concatenate(starts)
            while len(at) > chunk_datasets:
                cut = int(at[chunk_datasets])
                yield _chunk(number, pend.iloc[:cut], at[:chunk_datasets], row0, read, path,
                             dataset_col)
                number, row0 = number + 1, row0 + cut
                pend, at = pend.iloc[cut:], at[chunk_datasets:] - cut
            held, starts, n_held, n_runs = [pend], [at], len(pend), len(at)
    if n_held:
        pend = pd.concat(held, ignore_index=True) if len(held) > 1 else held[0]
        yield _chunk(number, pend, np.concatenate(starts), row0, 1.0, path, dataset_col)


def ahead(chunks: Iterator[Chunk]) -> Iterator[Chunk]:
    """``chunks``, the next one read by a thread of its own while the caller fits this one
    (reading and cutting the input overlap the fits; host memory: one chunk more).  An
    error of the reader is raised where its chunk would have come."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()
    END = object()

    def read() -> None:
        try:
            for c in chunks:
                while not stop.is_set():
                    try:
                        q.put((c, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((END, None))
        except BaseException as err:  # (raised in the caller's thread)
            q.put((END, err))

    t = threading.Thread(target=read, name="bulkem-stream-reader", daemon=True)
    t.start()
    try:
        while True:
            c, err = q.get()
            if err is not None:
                raise err
            if c is END:
                return
            yield c
    finally:
        stop.set()
        while t.is_alive():  # (let a reader blocked on the full queue see the stop)
            try:
                q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.1)


class _InOrder:
    """Calls run one after another, in the order given, by a thread of its own (Parquet
    writes release the GIL: they overlap the next chunk's fit).  At most one call waits; an
    error is raised by the next :meth:`put` or by :meth:`close`."""

    def __init__(self) -> None:
        import queue
        import threading

        self.q: queue.Queue = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="bulkem-stream-writer",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            call = self.q.get()
            if call is None:
                self.q.task_done()
                return
            if self.error is None:
                try:
                    call()
                except BaseException as err:  # (raised in the caller's thread)
                    self.error = err
            self.q.task_done()

    def wait(self) -> None:
        """Wait until every call given has run (the checkpoint read back is whole)."""
        self.q.join()
        if self.error is not None:
            raise self.error

    def put(self, call) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(call)

    def close(self, raise_error: bool = True) -> None:
        """Wait for the calls given; raise the first error (unless ``raise_error=False``)."""
        if self.thread.is_alive():
            self.q.put(None)
            self.thread.join()
        if raise_error and self.error is not None:
            raise self.error


def _chunk(number: int, frame: pd.DataFrame, starts: np.ndarray, row0: int, read: float,
           path: Path, dataset_col: str) -> Chunk:
    ids = frame[dataset_col].iloc[starts].to_numpy()
    uniq = pd.unique(ids)
    if len(uniq) != len(ids):
        seen: set = set()
        k = next(j for j, x in enumerate(ids) if x in seen or seen.add(x))
        raise ValueError(_not_contiguous(ids[k], path, dataset_col, row0 + int(starts[k])))
    return Chunk(number, frame.reset_index(drop=True), ids, row0, read)


def _not_contiguous(ident: Any, path: Path, dataset_col: str, row: int) -> str:
    return (f"dataset {ident!r} has rows in two places of {path} (again from data row {row}); "
            f"streaming needs each dataset's rows together: sort the file by {dataset_col!r} "
            "(a stable sort keeps the order of its values), or fit it without --chunk-datasets.")


class _SeenIds:
    """64-bit hashes of the datasets fitted so far, to find one that comes back later.

    Sorted arrays of doubling sizes: a look-up is a few binary searches, an
    insert costs O(log n) copies per element; 8 bytes per dataset.
    """

    def __init__(self):
        self.levels: list[np.ndarray] = []

    def add(self, ids: np.ndarray) -> np.ndarray:
        """Record a chunk's identifiers; return the positions of any seen before."""
        h = pd.util.hash_array(np.asarray(ids))
        hit = np.zeros(len(h), dtype=bool)
        for level in self.levels:
            pos = np.searchsorted(level, h).clip(max=len(level) - 1)
            hit |= level[pos] == h
        new = np.sort(h)
        while self.levels and len(self.levels[-1]) <= len(new):
            new = np.sort(np.concatenate([self.levels.pop(), new]), kind="mergesort")
        self.levels.append(new)
        return np.flatnonzero(hit)


# --- writing the tables ----------------------------------------------------------


class _Writer:
    """Appends each chunk's tables to the output files (CSV, or Parquet by the suffix).

    ``summary`` goes to ``out``, every other table to ``<out stem>.<table><suffix>``,
    as the in-memory ``bulkem fit`` names them.  Each is written as
    ``.<file name>.partial`` beside it and renamed into place by :meth:`close`,
    so that a file at an output's name is always complete.
    """

    def __init__(self, out: Path):
        self.out = out
        self.parquet = _is_parquet(out)
        self.files: dict[str, Any] = {}
        self.empty: dict[str, pd.DataFrame] = {}

    def path(self, name: str) -> Path:
        if name == "summary":
            return self.out
        return Path(f"{self.out.with_suffix('')}.{name}{self.out.suffix}")

    def partial(self, name: str) -> Path:
        """Where table ``name`` is written until the run completes."""
        path = self.path(name)
        return path.with_name(f".{path.name}.partial")

    def append(self, tables: dict[str, pd.DataFrame]) -> None:
        for name, t in tables.items():
            if self.parquet:
                self._parquet(name, t)
            else:
                f = self.files.get(name)
                if f is None:
                    f = self.files[name] = open(self.partial(name), "w", newline="")
                t.to_csv(f, header=f.tell() == 0, index=False)
                f.flush()

    def _parquet(self, name: str, t: pd.DataFrame) -> None:
        pa, pq = checkpoint._require_pyarrow()
        if not len(t):  # an empty piece may have other dtypes (object ids): skip it
            self.empty.setdefault(name, t)
            return
        w = self.files.get(name)
        if w is None:
            schema = pa.Schema.from_pandas(t, preserve_index=False)
            w = self.files[name] = pq.ParquetWriter(self.partial(name), schema)
        w.write_table(pa.Table.from_pandas(t, schema=w.schema, preserve_index=False))

    def close(self) -> list[str]:
        """Close every file (an empty table is written empty), rename each into place;
        the paths written."""
        for name, t in self.empty.items():
            if name not in self.files:
                t.to_parquet(self.partial(name), index=False)
        for f in self.files.values():
            f.close()
        names = list(dict.fromkeys([*self.files, *self.empty]))
        for name in names:
            os.replace(self.partial(name), self.path(name))
        return [str(self.path(name)) for name in names]

    def abort(self) -> None:
        """Close and remove the partial files (the run failed: the outputs stay as they were)."""
        for f in self.files.values():
            try:
                f.close()
            except Exception:  # noqa: BLE001 - a half-written file is removed anyway
                pass
        for name in dict.fromkeys([*self.files, *self.empty]):
            self.partial(name).unlink(missing_ok=True)


# --- progress ------------------------------------------------------------------


class _Meter:
    """Datasets done, datasets/s and an ETA on stderr: a line rewritten on a terminal,
    a line every ``REPORT_EVERY_S`` seconds (and at the end) otherwise."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.done = self.fitted = 0
        self.start: tuple[float, float] | None = None  # (time, share read) when fitting began
        self.last = -np.inf

    def fitting(self, read_before: float) -> None:
        if self.start is None:
            self.start = (time.perf_counter(), read_before)

    def update(self, n: int, fitted: bool, read: float, final: bool = False) -> None:
        self.done += n
        self.fitted += n if fitted else 0
        now = time.perf_counter()
        if self.quiet or not (final or self.tty or now - self.last >= REPORT_EVERY_S):
            return
        self.last = now
        t_start, r_start = self.start or (self.t0, 0.0)
        rate = self.fitted / max(now - t_start, 1e-9)
        if read > r_start:
            eta = _clock((1 - read) * (now - t_start) / (read - r_start))
        else:
            eta = "?"
        line = (f"{self.done:,} datasets, {rate:,.0f} datasets/s, {read:.0%} of the input "
                f"read, ETA {eta}")
        print(("\r" + line) if self.tty else line, end="" if self.tty and not final else "\n",
              file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


# --- the run ---------------------------------------------------------------------


def fit_file(input_path: str | os.PathLike, out: str | os.PathLike, fit_kwargs: dict, *,
             chunk_datasets: int | None = None, checkpoint_dir: str | os.PathLike | None = None,
             resume: bool = False, quiet: bool = False, read_rows: int | None = None) -> dict:
    """Fit a long CSV/Parquet file chunk by chunk, appending the tables to the outputs.

    Parameters
    ----------
    input_path : str or os.PathLike
        Long CSV or Parquet (``.parquet``/``.pq``) file; a dataset's rows contiguous.
    out : str or os.PathLike
        The summary table's path (CSV, or Parquet by its suffix); the other
        tables go beside it as ``<stem>.<table><suffix>``.
    fit_kwargs : dict
        Arguments of :func:`bulkem.fit` (not ``datasets`` or ``progress``).
    chunk_datasets : int, optional
        Datasets per chunk; default ``Tuning.checkpoint_chunk_fits // n_starts``,
        or the checkpoint's when resuming.
    checkpoint_dir : str or os.PathLike, optional
        Where finished chunks are kept (kept after the run); default
        ``<out stem>.checkpoint`` (removed after a complete run).
    resume : bool
        Continue from the checkpoint; without it an existing checkpoint is an error.
    quiet : bool
        No progress lines.
    read_rows : int, optional
        Rows read at a time (default ``READ_ROWS``).

    Returns
    -------
    dict
        ``n_datasets, n_chunks, chunk_datasets, seconds, backend, status`` (counts)
        and ``outputs`` (paths).

    Raises
    ------
    ValueError
        For bad arguments, a checkpoint of other arguments or input, a checkpoint
        found without ``resume``, or a dataset whose rows are not contiguous.
    """
    t0 = time.perf_counter()
    src, out = Path(input_path), Path(out)
    if not src.exists():
        raise FileNotFoundError(f"input file {src} does not exist.")
    if chunk_datasets is not None and (isinstance(chunk_datasets, bool)
                                       or not isinstance(chunk_datasets, int)
                                       or chunk_datasets < 1):
        raise ValueError(f"--chunk-datasets must be an integer >= 1; got {chunk_datasets!r}.")
    keep = checkpoint_dir is not None
    if keep:
        checkpoint.check_path(checkpoint_dir, "--checkpoint")
    run = RunDir(checkpoint_dir if keep else Path(f"{out.with_suffix('')}.checkpoint"))
    if run.manifest is not None and not resume:
        raise ValueError(
            f"{run.path} holds the checkpoint of an earlier run: pass --resume to continue it, "
            "or delete it to start afresh.")
    if resume and run.manifest is None and not quiet:
        print(f"bulkem: no checkpoint in {run.path} yet; starting from the beginning.",
              file=sys.stderr)
    fit_kwargs = dict(fit_kwargs)
    fit_kwargs.pop("progress", None)
    n_starts = fit_kwargs.get("n_starts", 10)
    if run.manifest is not None:
        if chunk_datasets is not None and chunk_datasets != run.manifest["chunk_datasets"]:
            raise ValueError(
                f"checkpoint {run.path} was made with --chunk-datasets "
                f"{run.manifest['chunk_datasets']}, not {chunk_datasets}; pass the same value "
                "(or leave it out) to resume.")
        chunk_datasets = run.manifest["chunk_datasets"]
    elif chunk_datasets is None:
        chunk_fits = check_tuning(fit_kwargs.get("tuning")).checkpoint_chunk_fits
        chunk_datasets = max(1, chunk_fits // n_starts) if (
            isinstance(n_starts, int) and n_starts > 0) else 1
    fit_kwargs["seed"] = checkpoint.resolve_seed(run, fit_kwargs.get("seed"))
    combine.check_splittable(fit_kwargs)
    arguments = {k: v for k, v in fit_kwargs.items() if k not in checkpoint.NOT_COMPARED}
    run.start("stream", arguments, chunk_datasets)
    run.clear_temporary()
    done = run.finished()

    dataset_col = fit_kwargs.get("dataset_col", "dataset")
    writer, meter, seen = _Writer(out), _Meter(quiet), _SeenIds()
    status: dict[str, int] = {}
    backends: dict[str, None] = {}
    caught: list = []
    n_datasets = n_chunks = 0
    read = 0.0
    later = _InOrder()  # the checkpoint's and the outputs' writes, while the next chunk fits
    try:
        for chunk in ahead(read_chunks(src, dataset_col, chunk_datasets, read_rows)):
            again = seen.add(chunk.ids)
            if len(again):
                later.wait()  # (the earlier chunks' checkpoint written)
                _check_repeats(run, chunk, again, src, dataset_col)
            digest = chunk.digest
            if chunk.number in done:
                meta = run.meta(chunk.number)
                if meta["hash"] != digest:
                    raise ValueError(
                        f"chunk {chunk.number} of {src} (datasets {chunk.ids[0]!r} to "
                        f"{chunk.ids[-1]!r}) differs from the one in checkpoint {run.path}: the "
                        "input changed since. Resume with the same input, or delete the "
                        "checkpoint to start afresh.")
                parts = run.read(chunk.number)
            else:
                meter.fitting(read)
                t1 = time.perf_counter()
                with warnings.catch_warnings(record=True) as got:
                    warnings.simplefilter("always")
                    # (the frame as it is: bulkem.fit reads a long frame by column, its
                    # datasets' rows already together)
                    parts = combine.split(api.fit(chunk.frame, progress=False, **fit_kwargs))
                caught += got
                later.put(functools.partial(run.write, chunk.number, parts, {
                    "chunk": chunk.number, "first_row": chunk.first_row,
                    "first": chunk.ids[0], "last": chunk.ids[-1], "n_datasets": len(chunk.ids),
                    "hash": digest, "seconds": time.perf_counter() - t1}))
            later.put(functools.partial(writer.append, parts.tables))
            for k, v in parts.tables["summary"]["status"].value_counts(sort=False).items():
                status[k] = status.get(k, 0) + int(v)
            backends[str(parts.scalars.get("backend"))] = None
            n_datasets += len(chunk.ids)
            n_chunks += 1
            read = chunk.read
            meter.update(len(chunk.ids), chunk.number not in done, read)
        if n_chunks == 0:
            raise ValueError(f"{src} holds no rows with a dataset; expected at least one "
                             "dataset.")
        extra = sorted(i for i in done if i >= n_chunks)
        if extra:
            raise ValueError(
                f"checkpoint {run.path} has chunk {extra[0]} but {src} ends after chunk "
                f"{n_chunks - 1}: the input changed since. Delete the checkpoint to start "
                "afresh.")
        later.close()
    except BaseException:
        later.close(raise_error=False)
        writer.abort()
        raise
    outputs = writer.close()
    meter.update(0, False, 1.0, final=True)
    checkpoint.warn_for_run(status, caught, stacklevel=2)
    if not keep:
        shutil.rmtree(run.path, ignore_errors=True)
    return {"n_datasets": n_datasets, "n_chunks": n_chunks, "chunk_datasets": chunk_datasets,
            "seconds": time.perf_counter() - t0, "backend": "+".join(backends),
            "status": status, "outputs": outputs}


def _check_repeats(run: RunDir, chunk: Chunk, again: np.ndarray, src: Path,
                   dataset_col: str) -> None:
    """Raise if a dataset of ``chunk`` was in an earlier chunk (not a hash collision)."""
    wanted_ids = set(chunk.ids[again].tolist())
    for i in range(chunk.number):
        earlier = set(run.read(i).tables["summary"]["dataset"].tolist())
        both = wanted_ids & earlier
        if both:
            ident = next(iter(both))
            row = chunk.first_row + int(np.flatnonzero(chunk.frame[dataset_col].to_numpy()
                                                       == ident)[0])
            raise ValueError(_not_contiguous(ident, src, dataset_col, row))
