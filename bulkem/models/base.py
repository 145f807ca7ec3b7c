"""What a model supplies to the one EM driver (:mod:`bulkem.fitting.driver`).

A fit is one (dataset, start).  A dataset is a set of *items*, the grain at
which the lanes sharing a fit split the E-step: the observations of a
mixture dataset, the sequences of a hidden-Markov dataset.  The driver knows
nothing about the model: it loops, reduces across lanes, stops and redoes
float32 failures; the model supplies small compiled pieces (:class:`Pieces`)
and their array sizes (:class:`Sizes`).

Every piece is plain Python written once and compiled for a
:class:`bulkem.kernels.target.Target` (CPU or GPU).  Pieces may use scalar
arithmetic, the ``math`` module, 1-D array indexing and tuples; model
dimensions (components, states, symbols) are compile-time constants, except
where a model reads them from the batch tuple (:attr:`Model.cpu_key`).

A model's parameters are named blocks (:class:`Block`: a name, axes and a
constraint) laid out in one fit's parameter vector by a :class:`Layout`; the
vector's length, the free-parameter count (AIC, BIC), the blocks as named
arrays (``FitResult.params``, ``fit(init=...)``), the canonical order of the
exchangeable components or states and the components table's columns follow
from them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import ClassVar, NamedTuple

import numpy as np

from ..tuning import Tuning


class Sizes(NamedTuple):
    """Lengths of one fit's arrays (each allocated per lane by the engines).

    Attributes
    ----------
    params : int
        The parameter vector (float64).
    stats : int
        Sufficient statistics (float64), summed over the fit's lanes.
    totals : int
        Per-fit constants computed once before the iterations (float64).
    coef : int
        Per-iteration float64 coefficients.
    work : int
        Per-iteration coefficients in the compute dtype.
    scratch : int
        Per-lane E-step scratch in the compute dtype.
    buf_per_len : int
        Per-lane buffer, in values of the compute dtype per observation of
        the longest item (0: none).  Sequence models keep their forward
        vectors there; the CPU allocates it per fit, the GPU in global memory.
    """

    params: int
    stats: int
    totals: int
    coef: int
    work: int
    scratch: int
    buf_per_len: int = 0


class Pieces(NamedTuple):
    """A model's compiled E-step and M-step, for one compute dtype and target.

    ``data`` is the model's tuple of batch arrays (:meth:`Model.kernel_data`),
    ``lo, hi`` a dataset's items; a lane takes items ``lo, lo + step, ... < hi``.
    Every piece gets ``data``: a model whose sizes are run-time values on the
    CPU reads them there (the mixtures' ``M`` and ``D``); engines that run only
    models without such sizes (the sequence models' wide GPU engine, their
    decoding) pass an empty tuple to the pieces that take no observations.

    Attributes
    ----------
    setup : callable
        ``setup(data, lo, hi, step, tot)``: adds this lane's part of the
        per-fit constants to ``tot`` (the driver sums ``tot`` over lanes).
    prepare : callable
        ``prepare(data, params, tot, coef, work) -> base``: the iteration's
        coefficients from the parameters; returns the part of the
        log-likelihood that follows from ``tot`` (NaN if a coefficient is
        not finite).  May reorder exchangeable components of ``params``.
    estep : callable
        ``estep(data, lo, hi, step, work, stats, scratch, buf, xc) -> ll``:
        adds this lane's items' expected statistics to ``stats[first_stat:]``
        and returns their log-likelihood (``xc``: ``EXP_CONSTS``).
    complete : callable
        ``complete(data, stats, tot)``: the statistics before ``first_stat``,
        after the reduction (or nothing).
    mstep : callable
        ``mstep(data, stats, params, n, reg) -> status`` (0: ok), ``n`` the
        dataset's number of items, ``reg`` the model's regularisation.
    first_stat : int
        The first statistic the E-step sums (the lanes of a fit sum from it).
    """

    setup: Callable
    prepare: Callable
    estep: Callable
    complete: Callable
    mstep: Callable
    first_stat: int = 0


CONSTRAINTS = ("real", "positive", "simplex", "substochastic")


class Axis(NamedTuple):
    """An axis of a parameter block: its name, its length, and the number of its first
    entry in table columns (``mean_1``, ``prob_0``), or each entry's label there
    (``labels``: a packed triangle's ``1_1``, ``2_1``...)."""

    name: str
    length: int
    first: int = 1
    labels: tuple | None = None


class Block(NamedTuple):
    """A named block of parameters.

    Attributes
    ----------
    name : str
        The key of ``FitResult.params`` and of ``fit(init=...)``.
    axes : tuple of Axis
        Its axes, outermost first; ``()`` for a scalar.
    constraint : str
        ``"real"``; ``"positive"``; ``"simplex"`` (each row along the last axis sums to
        1); ``"substochastic"`` (each row sums to at most 1, the rest an exit
        probability).
    column : str, optional
        The table columns' name (``mean`` for ``mean_1 .. mean_D``); default ``name``.
    shared : bool, default False
        One value repeated along the first axis (every component's record holds the same:
        a tied covariance): stored, split and tabled per record, but counted and given
        unconstrained coordinates once (:attr:`n_free`, :meth:`Layout.to_free`).  A
        ``"real"`` or ``"positive"`` block with at least one axis.
    """

    name: str
    axes: tuple = ()
    constraint: str = "real"
    column: str | None = None
    shared: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.length for a in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def n_free(self) -> int:
        """Free parameters: a simplex row loses one to its sum, the others none; a
        ``shared`` block counts one record."""
        if self.shared:
            return self.size // self.shape[0]
        if self.constraint == "simplex":
            return self.size - self.size // self.shape[-1]
        return self.size

    def columns(self, skip: int = 1) -> list[str]:
        """Table column names of one record: the axes after the first ``skip`` numbered
        (``mean_1``...), row-major."""
        name = self.column or self.name
        labels = [name]
        for a in self.axes[skip:]:
            tags = a.labels or [a.first + i for i in range(a.length)]
            labels = [f"{lab}_{t}" for lab in labels for t in tags]
        return labels


class Layout:
    """Where a model's parameter blocks lie in one fit's parameter vector.

    The vector is a sequence of groups; the blocks of a group share their first axis and
    are interleaved along it, one record per entry (a mixture's components: ``weight,
    mean_1 .. mean_D, var_1 .. var_D`` of component 0, then of component 1...).  A group
    of one block is that block, row-major; a scalar is a group of its own.

    Parameters
    ----------
    groups : sequence of sequence of Block
    exchangeable : str, optional
        The name of the axis whose entries a model may renumber (components, states):
        :meth:`permute` reorders every axis of that name.
    """

    def __init__(self, groups, exchangeable: str | None = None) -> None:
        self.groups = tuple(tuple(g) for g in groups)
        self.exchangeable = exchangeable
        self.blocks = {b.name: b for g in self.groups for b in g}
        self._where = {}  # name -> (group start, records, record length, column in record)
        start = 0
        for group in self.groups:
            outer = {b.shape[0] if b.axes else 1 for b in group}
            if len(outer) != 1 or (len(group) > 1 and any(not b.axes for b in group)):
                raise ValueError(f"the blocks of a group must share their first axis: "
                                 f"{[b.name for b in group]}")
            n = outer.pop()
            rec = sum(b.size // n for b in group)
            col = 0
            for b in group:
                if b.constraint not in CONSTRAINTS:
                    raise ValueError(f"block {b.name!r}: constraint {b.constraint!r}; "
                                     f"expected one of {CONSTRAINTS}")
                if b.shared and (not b.axes or b.constraint not in ("real", "positive")):
                    raise ValueError(f"block {b.name!r}: a shared block needs an axis and "
                                     f"a 'real' or 'positive' constraint")
                self._where[b.name] = (start, n, rec, col)
                col += b.size // n
            start += n * rec
        self.size = start

    def __getitem__(self, name: str) -> Block:
        return self.blocks[name]

    def offset(self, name: str) -> int:
        """Where block ``name`` starts (its first record's first entry)."""
        start, _, _, col = self._where[name]
        return start + col

    def n_free(self, names=None) -> int:
        """Free parameters of the blocks ``names`` (default: all), for AIC and BIC."""
        return sum(b.n_free for b in self.blocks.values() if names is None or b.name in names)

    def split(self, params: np.ndarray) -> dict:
        """``params`` (n_fits, size) -> each block as an array (n_fits,) + its shape
        (views where the layout allows)."""
        p = np.asarray(params, dtype=np.float64).reshape(-1, self.size)
        out = {}
        for name, (start, n, rec, col) in self._where.items():
            b = self.blocks[name]
            w = b.size // n
            part = p[:, start:start + n * rec].reshape(len(p), n, rec)[:, :, col:col + w]
            out[name] = part.reshape((len(p),) + b.shape)
        return out

    def join(self, arrays) -> np.ndarray:
        """Blocks as arrays (n_fits,) + shape (a mapping by name) -> params (n_fits, size).

        A ``shared`` block's records must be equal (NaN aside: a failed fit's), else a
        ValueError (user starting values)."""
        k = len(next(iter(arrays.values())))
        out = np.empty((k, self.size))
        for name, (start, n, rec, col) in self._where.items():
            w = self.blocks[name].size // n
            a = np.asarray(arrays[name], np.float64).reshape(k, n, w)
            if self.blocks[name].shared and (
                    (a != a[:, :1]) & ~np.isnan(a) & ~np.isnan(a[:, :1])).any():
                axis = self.blocks[name].axes[0].name
                raise ValueError(f"{name!r} is one value shared by every {axis}: give the "
                                 f"same values for each of the {n} {axis}s.")
            out[:, start:start + n * rec].reshape(k, n, rec)[:, :, col:col + w] = a
        return out

    def one(self, params: np.ndarray) -> dict:
        """One fit's blocks as arrays of their shapes (copies; scalars as floats)."""
        return {name: (float(a[0]) if a.ndim == 1 else a[0].copy())
                for name, a in self.split(np.asarray(params)[None]).items()}

    def permute(self, params: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Each fit's exchangeable entries renumbered (new ``k`` is old ``order[f, k]``) along
        every axis named :attr:`exchangeable`."""
        blocks = self.split(params)
        for name, a in blocks.items():
            for i, ax in enumerate(self.blocks[name].axes):
                if ax.name == self.exchangeable:
                    idx = order.reshape((len(order),) + (1,) * i + (ax.length,)
                                        + (1,) * (a.ndim - 2 - i))
                    a = np.take_along_axis(a, idx, axis=i + 1)
            blocks[name] = a
        return self.join(blocks)

    def names(self) -> list[str]:
        """Every parameter's name, in parameter-vector order (``weight_1``, ``mean_2_1``:
        the block's table-column name and its indices along every axis)."""
        out = np.empty(self.size, dtype=object)
        index = np.arange(self.size, dtype=np.float64)[None]
        for name, a in self.split(index).items():
            b = self.blocks[name]
            out[a.reshape(-1).astype(np.int64)] = b.columns(skip=0)
        return list(out)

    def to_free(self, params: np.ndarray, names) -> np.ndarray:
        """The blocks ``names`` of ``params`` (n_fits, size) in unconstrained coordinates
        (n_fits, n_free(names)): ``log`` of a positive value; of a simplex row, the log-ratios
        to its last entry; of a sub-stochastic row, the log-ratios to its rest ``1 - sum``;
        a ``shared`` block's first record.  A value on its constraint's boundary (a zero
        probability) gives -inf or NaN."""
        blocks = self.split(params)
        parts = []
        with np.errstate(divide="ignore", invalid="ignore"):
            for name in self.blocks:
                if name not in names or not self.blocks[name].n_free:  # (one weight: none)
                    continue
                b, a = self.blocks[name], blocks[name]
                n = len(a)
                if b.shared:  # (its records are equal: the first)
                    a = a[:, 0]
                if b.constraint == "real":
                    parts.append(a.reshape(n, -1))
                elif b.constraint == "positive":
                    parts.append(np.log(a.reshape(n, -1)))
                else:
                    rows = a.reshape(n, -1, b.shape[-1])
                    ref = (rows[:, :, -1:] if b.constraint == "simplex"
                           else 1.0 - rows.sum(axis=2, keepdims=True))
                    top = rows[:, :, :-1] if b.constraint == "simplex" else rows
                    parts.append(np.log(top / ref).reshape(n, -1))
        return np.concatenate(parts, axis=1) if parts else np.empty((len(params), 0))

    def from_free(self, theta: np.ndarray, params: np.ndarray, names) -> np.ndarray:
        """``params`` (n_fits, size) with the blocks ``names`` taken from unconstrained
        coordinates ``theta`` (n_fits, n_free(names)): the inverse of :meth:`to_free`."""
        blocks = self.split(params)
        n, col = len(params), 0
        for name in self.blocks:
            if name not in names or not self.blocks[name].n_free:
                continue
            b = self.blocks[name]
            t = theta[:, col:col + b.n_free]
            col += b.n_free
            if b.constraint in ("real", "positive"):
                x = t if b.constraint == "real" else np.exp(t)
                if b.shared:  # one record, repeated
                    x = np.broadcast_to(x[:, None, :], (n, b.shape[0], b.n_free))
            else:  # a row: exp(t) over 1 + sum(exp(t)), with the last (or the rest) 1 / that
                rows = t.reshape(n, -1, b.shape[-1] - (b.constraint == "simplex"))
                top = np.zeros(rows.shape[:2] + (1,))
                for c in range(rows.shape[2]):  # (NumPy reduces short axes slowly)
                    np.maximum(top[:, :, 0], rows[:, :, c], out=top[:, :, 0])
                e = np.exp(rows - top)
                denom = np.exp(-top)
                for c in range(rows.shape[2]):
                    denom[:, :, 0] += e[:, :, c]
                x = e / denom
                if b.constraint == "simplex":
                    x = np.concatenate([x, np.exp(-top) / denom], axis=2)
            blocks[name] = x.reshape((n,) + b.shape)
        return self.join(blocks)

    def free_jacobian(self, params: np.ndarray, names) -> np.ndarray:
        """``d params / d theta`` (n_fits, size, n_free(names)) at ``params``, ``theta`` the
        unconstrained coordinates of :meth:`to_free`: 1 for a real value, ``x`` for a
        positive one, ``x_i (delta_ij - x_j)`` within a simplex or sub-stochastic row."""
        blocks = self.split(params)
        index = self.split(np.arange(self.size, dtype=np.float64)[None])
        n = len(params)
        J = np.zeros((n, self.size, self.n_free(names)))
        col = 0
        for name in self.blocks:
            if name not in names:
                continue
            b = self.blocks[name]
            where = index[name].reshape(-1).astype(np.int64)
            x = blocks[name].reshape(n, -1)
            if b.constraint in ("real", "positive"):
                d = np.arange(b.size) % b.n_free  # (a shared block's records: the same)
                J[:, where, col + d] = 1.0 if b.constraint == "real" else x
            else:
                K = b.shape[-1]
                F = K - (b.constraint == "simplex")  # free coordinates per row
                rows = x.reshape(n, -1, K)
                for r in range(rows.shape[1]):
                    block = -rows[:, r, :, None] * rows[:, r, None, :F]
                    block[:, np.arange(F), np.arange(F)] += rows[:, r, :F]
                    J[:, where[r * K:(r + 1) * K, None], col + r * F + np.arange(F)] = block
            col += b.n_free
        return J

    def free_gradient(self, params: np.ndarray, grad: np.ndarray, names) -> np.ndarray:
        """The gradient (n, n_free(names)) in the unconstrained coordinates of
        :meth:`to_free` of a function whose gradient in the stored parameters is ``grad``
        (n, size), at ``params``: :meth:`free_jacobian` transposed times ``grad``, block by
        block, without forming the Jacobian (a simplex or sub-stochastic row's free
        coordinate ``c`` gets ``x_c (g_c - sum_k x_k g_k)``)."""
        blocks, grads = self.split(params), self.split(grad)
        n, parts = len(params), []
        for name in self.blocks:
            if name not in names or not self.blocks[name].n_free:
                continue
            b = self.blocks[name]
            x, g = blocks[name].reshape(n, -1), grads[name].reshape(n, -1)
            if b.shared:  # every record's gradient goes to the one set of coordinates
                x = x[:, :b.n_free]
                g = g.reshape(n, b.shape[0], b.n_free).sum(axis=1)
            if b.constraint == "real":
                parts.append(g)
            elif b.constraint == "positive":
                parts.append(x * g)
            else:
                K = b.shape[-1]
                rows, gr = x.reshape(n, -1, K), g.reshape(n, -1, K)
                F = K - (b.constraint == "simplex")
                dot = np.zeros(rows.shape[:2] + (1,))
                for c in range(K):  # (NumPy reduces short axes slowly)
                    dot[:, :, 0] += rows[:, :, c] * gr[:, :, c]
                parts.append((rows[:, :, :F] * (gr[:, :, :F] - dot)).reshape(n, -1))
        return np.concatenate(parts, axis=1) if parts else np.empty((n, 0))

    def record_columns(self, params: np.ndarray, names) -> dict:
        """Table columns of the blocks ``names`` (sharing a first axis), one row per (fit,
        entry of that axis): ``{column: values}``."""
        blocks = self.split(params)
        cols = {}
        for name in names:
            b = self.blocks[name]
            flat = blocks[name].reshape(-1, b.size // (b.shape[0] if b.axes else 1))
            cols.update({c: flat[:, j] for j, c in enumerate(b.columns())})
        return cols


class Likelihood(ABC):
    """What a model whose likelihood the engines evaluate meets (``bulkem.loglik``).

    A model is a frozen dataclass of its sizes (components or states, dimensions, orders)
    and its :class:`~bulkem.tuning.Tuning`; it knows nothing of engines or tables.  The
    abstract methods below are required; the class attributes are defaults a model may
    override.  :class:`Model` adds what an EM fit needs.
    """

    name: str  # the family's name, as ``bulkem.fit(family=...)`` takes it
    # Components, states, branches or parameters: the rows per dataset of the tables.
    n_components: int
    tuning: Tuning
    component_label: ClassVar[str] = "component"  # the components table's numbering column
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32")  # compute dtypes it offers
    init_methods: ClassVar[tuple[str, ...]] = ("subset",)  # ``init_method`` values it offers
    default_init: ClassVar[str] = "subset"
    # fit(accel=None): whether EM is accelerated (SQUAREM, bulkem.fitting.driver.make_accel);
    # measured to help every family (benchmarks/bench_accel.py: 3.2-9.3x fewer passes).
    accel_default: ClassVar[bool] = True
    default_max_iter: ClassVar[int] = 100  # fit(max_iter=None)
    # The items the lanes of a fit split are the data's units (sequences, runs, series),
    # which the wide strategy may deal to threads in any order; False: observations.
    unit_items: ClassVar[bool] = False
    # Whether the random starts read the datasets' keys (a hash of their values, which
    # ``make_job`` computes: one pass over every value); False: the model keys its own.
    keyed_starts: ClassVar[bool] = True
    # Why a start is degenerate, by status code, where the model means more than the
    # generic text (result.base.STATUS_MESSAGES).
    status_reasons: ClassVar[Mapping[int, str]] = MappingProxyType({})

    @property
    @abstractmethod
    def key(self) -> tuple:
        """What the compiled code depends on (compile caches), ``tuning.key()`` included."""

    @property
    def cpu_key(self) -> tuple:
        """What the CPU kernels depend on: :attr:`key`, less any size the CPU's pieces
        take at run time (from the batch tuple)."""
        return self.key

    @property
    @abstractmethod
    def params_layout(self) -> Layout:
        """One fit's named parameter blocks and where they lie in its parameter vector."""

    @property
    def n_params(self) -> int:
        """Length of one fit's parameter vector."""
        return self.params_layout.size

    def free_blocks(self) -> list[str]:
        """The blocks the M-step estimates (all, unless a model fixes some): what AIC and
        BIC count and what standard errors are taken for."""
        return list(self.params_layout.blocks)

    @property
    def n_free(self) -> int:
        """Free parameters, for AIC and BIC."""
        return self.params_layout.n_free(self.free_blocks())

    def se_columns(self, se: np.ndarray) -> dict:
        """Standard-error columns of the components table from ``se`` (n_fits, n_params):
        ``se_`` and the column of each block with one entry per component (the others,
        such as a transition matrix, go to their own tables)."""
        lay = self.params_layout
        names = [name for name, b in lay.blocks.items()
                 if b.axes and [a.name for a in b.axes].count(lay.exchangeable) == 1]
        return {f"se_{c}": v for c, v in lay.record_columns(se, names).items()}

    def at_bound(self, params: np.ndarray, reg: float) -> np.ndarray:
        """Fits (rows of ``params``) with a free parameter on its constraint's boundary,
        where standard errors are not taken: a probability or weight under ``1e-8``."""
        lay, free = self.params_layout, self.free_blocks()
        out = np.zeros(len(params), dtype=bool)
        for name, a in lay.split(params).items():
            if name in free and lay.blocks[name].constraint in ("simplex", "substochastic"):
                out |= (a.reshape(len(a), -1) < 1e-8).any(axis=1)
        return out

    def init_shapes(self) -> dict:
        """The keys of user starting values (the blocks), in parameter order, and the shape
        each takes for one start."""
        return {name: b.shape for name, b in self.params_layout.blocks.items()}

    @abstractmethod
    def pack(self, pairs: list):
        """``(identifier, data)`` pairs -> a checked, packed batch (``bulkem.data.Packed``)."""

    @abstractmethod
    def user_starts(self, init) -> object:
        """User starting values (``bulkem.fit(init=...)``) as rows of parameters."""

    def as_dict(self, params) -> dict:
        """One fit's parameters as named arrays (``FitResult.params``): its blocks."""
        return self.params_layout.one(params)

    # What fit(weights=...) weights in this model ("value", "sequence", "run", "series"),
    # None: the model takes no weights.
    weight_unit: ClassVar[str | None] = None

    def with_weights(self) -> Likelihood:
        """This model, weighted (``fit(weights=...)``); only where :attr:`weight_unit`."""
        raise NotImplementedError(f"{type(self).__name__} takes no weights")

    def attach_weights(self, pairs, weights, datasets, dataset_col: str):
        """The datasets with their weights attached, in the form the weighted model's
        ``pack`` reads; a ValueError where the weights do not line up with the datasets.
        Only where :attr:`weight_unit`."""
        raise NotImplementedError(f"{type(self).__name__} takes no weights")

    # A weighted model (``with_weights()``) has ``weighted = True`` and
    # ``weight_sums(packed) -> ndarray``: each valid dataset's weighted number of
    # observations (BIC's n; ``summary.sum_weights``).


class Model(Likelihood):
    """The contract a model fitted by EM meets: what the API, the engines and the tables read.

    Beyond :class:`Likelihood`: the EM driver's compiled pieces and their sizes, the
    kernels' data, the random starts and the tables.
    """

    @abstractmethod
    def sizes(self) -> Sizes:
        """The lengths of one fit's arrays."""

    @abstractmethod
    def pieces(self, dtype, target) -> Pieces:
        """The compiled E-step and M-step for a compute dtype and target."""

    @abstractmethod
    def kernel_data(self, data) -> tuple:
        """``(data, offsets, const)``: the kernels' arrays of a ``Ragged`` batch."""

    @abstractmethod
    def bytes_per_value(self, dtype) -> int:
        """Bytes of kernel data per stored value (the GPU's chunk budget)."""

    @abstractmethod
    def start_plan(self, data, keys, seed: int, method: str, user):
        """How the batch's random starts are drawn (a ``fitting.starts.StartPlan``)."""

    @abstractmethod
    def canonical(self, params):
        """Parameters with exchangeable components in the tables' order."""

    @abstractmethod
    def param_columns(self, params) -> dict:
        """The components table's columns of canonical parameters."""

    def extra_tables(self, vids, params) -> dict:
        """Tables beyond ``summary, components, starts, start_values`` (none by default)."""
        return {}

    @property
    def has_score(self) -> bool:
        """Whether :meth:`score` is given: standard errors then take ``2 P`` E-steps, not
        ``P^2 / 2`` log-likelihoods (:mod:`bulkem.fitting.information`)."""
        return False

    def score(self, params: np.ndarray, stats: np.ndarray) -> np.ndarray:
        """The score of the observed-data log-likelihood at ``params`` (n, n_params), by
        Fisher's identity: ``d Q(p | params) / d p`` at ``p = params``, where
        ``Q(p | params) = stats . c(p)`` is the expected complete-data log-likelihood and
        ``stats`` (n, ``Sizes.stats``) the E-step's statistics at ``params``
        (``Job.stats``).  Derivatives with respect to the parameters as stored (a weight,
        a variance), for :meth:`Layout.free_gradient`.  Only where :attr:`has_score`."""
        raise NotImplementedError(f"{type(self).__name__} has no score")

    @abstractmethod
    def start_tables(self, dataset, start, init) -> dict:
        """Tables of the starts' values, built before the fits (``start_values``...)."""


def init_blocks(init: Mapping, shapes: dict) -> list[np.ndarray]:
    """User starting values as one array per key, each of shape (k,) + shape."""
    if not isinstance(init, Mapping):
        raise TypeError(
            f"init is a {type(init).__name__}; expected a dict with keys {list(shapes)}."
        )
    if sorted(init) != sorted(shapes):
        raise ValueError(f"init has keys {list(init)}; expected exactly {list(shapes)}.")
    blocks = []
    for key, shape in shapes.items():
        a = np.asarray(init[key], dtype=np.float64)
        if a.shape == shape:
            a = a[None]
        if a.shape[1:] != shape:
            raise ValueError(
                f"init[{key!r}] has shape {np.shape(init[key])}; expected {shape} for one "
                f"start or (n_starts,) + {shape} for several."
            )
        blocks.append(a)
    k = {len(b) for b in blocks}
    if len(k) != 1:
        raise ValueError(f"init arrays give different numbers of starts: {sorted(k)}.")
    return blocks
