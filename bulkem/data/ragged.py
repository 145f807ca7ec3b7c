"""Ragged batches: values + offsets, with a second level grouping units into datasets."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True, parallel=True)
def _copy_runs(src, first, lens, starts, out):
    """``out[starts[j]:starts[j] + lens[j]] = src[first[j]:first[j] + lens[j]]``, the runs
    on every core."""
    for j in prange(len(lens)):
        a, b = first[j], starts[j]
        for i in range(lens[j]):
            out[b + i] = src[a + i]


@njit(cache=True, nogil=True)
def _offsets_in_order(units, order, out):
    """``out``: the offsets of the units ``order`` of ``units`` stored in that order; returns
    their values' count."""
    out[0] = 0
    for j in range(len(order)):
        u = order[j]
        out[j + 1] = out[j] + units[u + 1] - units[u]
    return out[len(order)]


@njit(cache=True, nogil=True, parallel=True)
def _copy_units(src, units, order, starts, width, out):
    """Unit ``order[j]`` of ``units`` (``width`` values a row) to rows ``starts[j]:starts[j +
    1]`` of ``out``, in blocks of units on every core."""
    n = len(order)
    block = 4096
    for b in prange((n + block - 1) // block):
        for j in range(b * block, min(n, (b + 1) * block)):
            a = units[order[j]] * width
            o = starts[j] * width
            for i in range((starts[j + 1] - starts[j]) * width):
                out[o + i] = src[a + i]


@dataclass
class Ragged:
    """Datasets of units of values, in two levels of offsets.

    A unit is the grain at which a model's likelihood factorises: one unit
    per dataset for a mixture (all its observations), a sequence for a
    hidden Markov model.  Unit ``k`` is ``values[units[k]:units[k + 1]]`` and
    dataset ``d`` is units ``groups[d]`` to ``groups[d + 1]`` (the layout
    hmmlearn uses for many sequences, one level up).

    Attributes
    ----------
    values : ndarray of shape (n_values,) or (n_values, n_dims)
    units : ndarray of shape (n_units + 1,), int64
    groups : ndarray of shape (n_datasets + 1,), int64
    kernel_cache : dict or None
        Where a call that runs several jobs on these data (a fit, then its standard
        errors) keeps the models' kernel arrays between them (``Job.kernel_data``, the
        CUDA scheduler's chunks), keyed by model and datasets; None: nothing kept.
    """

    values: np.ndarray
    units: np.ndarray
    groups: np.ndarray
    kernel_cache: dict | None = field(default=None, repr=False, compare=False)
    _value_stats: np.ndarray | None = field(default=None, init=False, repr=False,
                                            compare=False)

    def __post_init__(self) -> None:
        # Numba types a read-only array apart, so read-only values (a pandas column under
        # copy-on-write, an Arrow or Parquet column, a memory map, a checkpoint's data read
        # back) would compile every kernel a second time (15-70 s each), for values no
        # kernel writes.  A view of writable memory is flagged writable (no copy: pandas'
        # columns); other values are copied once.
        if isinstance(self.values, np.ndarray) and not self.values.flags.writeable:
            view = self.values.view()
            try:
                view.flags.writeable = True  # (allowed where the memory's owner is writable)
            except ValueError:
                view = self.values.copy()
            self.values = view

    @classmethod
    def flat(cls, values: np.ndarray, offsets: np.ndarray) -> Ragged:
        """One unit per dataset: dataset ``d`` is ``values[offsets[d]:offsets[d + 1]]``."""
        return cls(values, offsets, np.arange(len(offsets), dtype=np.int64))

    @property
    def n_datasets(self) -> int:
        return len(self.groups) - 1

    @property
    def value_offsets(self) -> np.ndarray:
        """Where each dataset's values start and end, ``(n_datasets + 1,)``."""
        return self.units[self.groups]

    def value_stats(self) -> np.ndarray:
        """Per dataset: the sum of its values, the largest and the sum of their logs,
        ``(n_datasets, 3)`` (:func:`bulkem.data._checks.segment_stats`; positive 1-D values),
        taken once and kept (a TMAP fit's starts and constants both read them)."""
        if self._value_stats is None:
            from ._checks import segment_stats

            self._value_stats = segment_stats(self.values, self.value_offsets)
        return self._value_stats

    def dataset_sizes(self) -> np.ndarray:
        """Values per dataset, ``(n_datasets,)``."""
        return np.diff(self.value_offsets)

    def longest_unit(self) -> int:
        """Values in the longest unit (0 if there is none)."""
        return int(np.diff(self.units).max()) if len(self.units) > 1 else 0

    def take(self, datasets: np.ndarray) -> Ragged:
        """The given datasets, in that order, packed anew (offsets from 0): views of the
        values where they are consecutive datasets in order, else copied on every core."""
        datasets = np.asarray(datasets, dtype=np.int64)
        if len(datasets) and np.all(np.diff(datasets) == 1):
            a, b = self.groups[datasets[0]], self.groups[datasets[-1] + 1]
            units = self.units[a:b + 1]
            return Ragged(self.values[units[0]:units[-1]], units - units[0],
                          self.groups[datasets[0]:datasets[-1] + 2] - a)
        n_units = self.groups[datasets + 1] - self.groups[datasets]
        groups = np.zeros(len(datasets) + 1, dtype=np.int64)
        np.cumsum(n_units, out=groups[1:])
        uidx = np.repeat(self.groups[datasets] - groups[:-1], n_units) + np.arange(groups[-1])
        lens = self.units[uidx + 1] - self.units[uidx]
        units = np.zeros(len(uidx) + 1, dtype=np.int64)
        np.cumsum(lens, out=units[1:])
        first = self.units[self.groups[datasets]]  # each dataset's values: one run
        runs = self.units[self.groups[datasets + 1]] - first
        width = int(np.prod(self.values.shape[1:], dtype=np.int64))
        src = np.ascontiguousarray(self.values).reshape(-1)
        out = np.empty(int(units[-1]) * width, dtype=src.dtype)
        _copy_runs(src, first * width, runs * width, units[groups[:-1]] * width, out)
        return Ragged(out.reshape((-1,) + self.values.shape[1:]), units, groups)

    def units_by_length(self) -> Ragged:
        """The same datasets, each one's units stored from the shortest to the longest
        (ties in their order), the values copied on every core; ``self`` where they already
        are.  The GPU's lanes that share a fit take its units in turn and wait for each
        other at the end of each: neighbours of like length keep them busy
        (:func:`bulkem.engines.cuda.scheduler.pack`)."""
        lens = np.diff(self.units)
        gid = np.repeat(np.arange(self.n_datasets), np.diff(self.groups))
        same = (np.diff(lens) >= 0) | (np.diff(gid) != 0)
        if same.all():
            return self
        order = np.lexsort((lens, gid))  # (stable: ties keep their order)
        return self._units_stored(self.units, order, self.groups.copy())

    def units_in_order(self, d: int, order: np.ndarray) -> Ragged:
        """Dataset ``d`` alone, its units stored in ``order`` (one dataset of ``len(order)``
        units; the offsets in one compiled pass, the values copied on every core)."""
        own = self.units[self.groups[d]:self.groups[d + 1] + 1]  # the dataset's unit offsets
        order = np.asarray(order, dtype=np.int64)
        return self._units_stored(own, order, np.array([0, len(order)], dtype=np.int64))

    def _units_stored(self, own: np.ndarray, order: np.ndarray, groups: np.ndarray) -> Ragged:
        """The units ``order`` of the unit offsets ``own`` stored in that order, grouped by
        ``groups`` (the offsets in one compiled pass, the values copied on every core)."""
        units = np.empty(len(order) + 1, dtype=np.int64)
        width = int(np.prod(self.values.shape[1:], dtype=np.int64))
        src = np.ascontiguousarray(self.values).reshape(-1)
        out = np.empty(_offsets_in_order(own, order, units) * width, dtype=src.dtype)
        _copy_units(src, own, order, units, width, out)
        return Ragged(out.reshape((-1,) + self.values.shape[1:]), units, groups)
