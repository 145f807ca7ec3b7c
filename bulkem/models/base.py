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
"""

from __future__ import annotations

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


class Model(ABC):
    """The contract every model meets: what the API, the engines and the tables read.

    A model is a frozen dataclass of its sizes (components or states, dimensions, orders)
    and its :class:`~bulkem.tuning.Tuning`; it knows nothing of engines or tables.  The
    abstract methods below are required; the class attributes are defaults a model may
    override.
    """

    name: str  # the family's name, as ``bulkem.fit(family=...)`` takes it
    # Components, states, branches or parameters: the rows per dataset of the tables.
    n_components: int
    tuning: Tuning
    component_label: ClassVar[str] = "component"  # the components table's numbering column
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32")  # compute dtypes it offers
    init_methods: ClassVar[tuple[str, ...]] = ("subset",)  # ``init_method`` values it offers
    default_init: ClassVar[str] = "subset"
    # The items the lanes of a fit split are the data's units (sequences, runs, series),
    # which the wide strategy may deal to threads in any order; False: observations.
    unit_items: ClassVar[bool] = False
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
    def n_params(self) -> int:
        """Length of one fit's parameter vector."""

    @property
    @abstractmethod
    def n_free(self) -> int:
        """Free parameters, for AIC and BIC."""

    @abstractmethod
    def sizes(self) -> Sizes:
        """The lengths of one fit's arrays."""

    @abstractmethod
    def pieces(self, dtype, target) -> Pieces:
        """The compiled E-step and M-step for a compute dtype and target."""

    @abstractmethod
    def pack(self, pairs: list):
        """``(identifier, data)`` pairs -> a checked, packed batch (``bulkem.data.Packed``)."""

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
    def user_starts(self, init) -> object:
        """User starting values (``bulkem.fit(init=...)``) as rows of parameters."""

    @abstractmethod
    def canonical(self, params):
        """Parameters with exchangeable components in the tables' order."""

    @abstractmethod
    def param_columns(self, params) -> dict:
        """The components table's columns of canonical parameters."""

    def extra_tables(self, vids, params) -> dict:
        """Tables beyond ``summary, components, starts, start_values`` (none by default)."""
        return {}

    @abstractmethod
    def start_tables(self, dataset, start, init) -> dict:
        """Tables of the starts' values, built before the fits (``start_values``...)."""

    @abstractmethod
    def as_dict(self, params) -> dict:
        """One fit's parameters as named arrays (``FitResult.params``)."""


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
