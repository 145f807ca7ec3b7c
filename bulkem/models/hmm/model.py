"""The hidden Markov model as a model of the EM driver: data, starts, tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from ...data import Packed, Ragged
from ...data.units import HMM_WORDS, Words, by_dataset, counts, flagged, pack_units
from ...fitting import starts
from ...kernels.target import kernel
from ...tuning import DEFAULT, DEGENERATE_COLLAPSE, DEGENERATE_PARAM, Tuning
from ..base import Axis, Block, Layout, Model, Pieces, Sizes, init_blocks
from . import draws
from .chain import ChainLayout, fused_multiply_add, make_chain, stack_vector, update_flags
from .emissions import MAX_COUNT, MAX_SYMBOLS, Emission, poisson_const
from .weights import unit_weights, weight_problems, with_column

# The largest vectors (and transition matrices) and per-unit sums a GPU thread keeps in local
# arrays of their own (make_chain's local_max): small enough to live in registers.
GPU_LOCAL_MAX = (64, 512)


@dataclass(frozen=True)
class HMMModel(Model):
    """A hidden Markov model of ``N`` states with an emission distribution.

    The items the lanes of a fit split are the dataset's sequences.  The
    kernels' batch data is ``(x, units, block, flags)``: the observations of every
    sequence (``K`` values per observation for a Gaussian emission), the
    sequences' offsets into them (in observations), the units per block of
    the sums over units (``Tuning.wide_cpu_chunk_units``, a run-time value) and
    ``update`` as the M-step's bits (:func:`.chain.update_flags`: read at run time on the
    CPU, compiled in on the GPU).

    Attributes
    ----------
    emission : Emission
    n_states : int
    K : int
        Symbols (categorical), dimensions (Gaussian) or 1 (Poisson).
    update : str
        Which parameters the M-step updates: ``s`` startprob, ``t`` transmat,
        ``e`` the emission's (hmmlearn's ``params``, emission letters merged).
    own_alphabet : bool
        Categorical, ``n_symbols`` not given: each dataset's alphabet is its
        own symbols ``0 .. max`` (hmmlearn's ``X.max() + 1``), not the batch's
        ``K``: its starts weigh no larger symbol and its free parameters count
        its own (so its fit is the same whatever the batch).
    weighted : bool
        Each sequence has a weight (``fit(weights=...)``): its log-likelihood and its
        statistics count that many times.  The weight is the packed values' last column,
        repeated on each of the sequence's rows (so it travels with the sequence wherever
        the datasets are split, chunked or reordered), and one per unit after the offsets
        in the kernels' batch tuple, ``(x, units, block, w, flags)`` (:func:`.chain.make_chain`).
    unit_col : str
        The DataFrame column of the units (``sequence_col``), for a weight column.
    """

    emission: Emission
    n_states: int
    K: int = 1
    update: str = "ste"
    own_alphabet: bool = False
    tuning: Tuning = DEFAULT
    weighted: bool = False
    unit_col: str = "sequence"

    name = "hmm"
    component_label = "state"
    # the transition tables' columns: dataset, from, to, probability
    transition_columns: ClassVar[tuple[str, ...]] = ("dataset", "from_state", "to_state", "prob")
    # what the chain's and the emissions' M-steps mean by a degenerate status
    status_reasons = {
        DEGENERATE_COLLAPSE: "a state collapsed (no mass left, or zero spread)",
        DEGENERATE_PARAM: "an emission parameter became invalid (non-finite, a negative "
                          "variance or a probability above 1)",
    }
    terminating = False
    # The CPU's M-step reads ``update`` from the batch tuple (cpu_key); False: compiled in.
    run_time_update: ClassVar[bool] = True
    # The items the lanes split are the data's units (sequences): the wide
    # engines (bulkem.engines.cpu.wide, bulkem.engines.cuda.wide) may deal them to
    # threads in any order.
    unit_items = True

    # The chain's blocks: (name, constraint) of the start and the transition probabilities,
    # and the name of the states' axis.
    chain_blocks: ClassVar[tuple] = (("startprob", "simplex"), ("transmat", "simplex"))
    state_axis: ClassVar[str] = "state"
    weight_unit: ClassVar[str | None] = "sequence"
    words: ClassVar[Words] = HMM_WORDS  # what the messages call datasets and units

    def layout_for(self, K: int) -> Layout:
        """The parameter blocks with ``K`` symbols (dimensions): startprob, transmat (row =
        from), then one record of the emission's blocks per state."""
        s = Axis(self.state_axis, self.n_states)
        (start, c_start), (trans, c_trans) = self.chain_blocks
        return Layout([(Block(start, (s,), c_start),), (Block(trans, (s, s), c_trans),),
                       self.emission.blocks(s, K)], exchangeable=self.state_axis)

    @property
    def params_layout(self) -> Layout:
        return self.layout_for(self.K)

    @property
    def layout(self) -> ChainLayout:
        em, K = self.emission, self.K
        params = self.params_layout
        trans = self.chain_blocks[1][0]
        first_emission = em.blocks(Axis(self.state_axis, 1), K)[0].name
        return ChainLayout(self.n_states, K, em.n_params(K), em.n_work(K), em.n_stats(K),
                           params.offset(trans), params.offset(first_emission), params.size)

    @property
    def key(self) -> tuple:
        return self._key_with(self.update)

    @property
    def cpu_key(self) -> tuple:
        """:attr:`key` less ``update``, which the CPU's M-step reads from the batch tuple
        (one kernel for every ``update``)."""
        return self.key if self._update_item is None else self._key_with()

    def _key_with(self, *update: str) -> tuple:
        return ((self.name, self.emission.name, self.n_states, self.K, *update,
                 self.terminating, self.tuning.key()) + self._weighted_key)

    @property
    def _update_item(self) -> int | None:
        """The batch tuple's item of the M-step's ``update`` flags (:meth:`kernel_data`), or
        None where the model compiles its ``update`` in (a subclass of its own data)."""
        return (4 if self.weighted else 3) if self.run_time_update else None

    @property
    def _weighted_key(self) -> tuple:
        return ("weighted",) if self.weighted else ()

    @property
    def n_components(self) -> int:
        return self.n_states

    @property
    def n_dims(self) -> int:
        return self.K if self.emission.name == "gaussian" else 1

    @property
    def n_free(self) -> int:
        """Free parameters of what the M-step updates, for AIC and BIC."""
        return self.n_free_of(self.K)

    def free_blocks(self) -> list[str]:
        """The blocks the M-step updates (``update``: ``s`` start, ``t`` transitions, ``e``
        the emission's)."""
        (start, _), (trans, _) = self.chain_blocks
        chosen = [start] * ("s" in self.update) + [trans] * ("t" in self.update)
        if "e" in self.update:
            chosen += [name for name in self.params_layout.blocks if name not in (start, trans)]
        return chosen

    def n_free_of(self, K: int) -> int:
        """:attr:`n_free` with an alphabet (categorical) of ``K`` symbols."""
        return self.layout_for(K).n_free(self.free_blocks())

    @property
    def init_methods(self) -> tuple[str, ...]:
        return ("subset", "kmeans++") if self.emission.name == "gaussian" else ("subset",)

    @property
    def default_init(self) -> str:
        return "subset"

    def sizes(self) -> Sizes:
        return self.layout.sizes()

    @property
    def has_score(self) -> bool:
        """A hidden Markov model's emissions have scores (a TMAP's chain: not yet)."""
        return not self.terminating and self.emission.score is not None

    def score(self, params: np.ndarray, stats: np.ndarray) -> np.ndarray:
        """As :meth:`Model.score`: ``Q = start . log(startprob) + transitions . log(transmat)
        + the emission's part``, from the fit's totals (``stats[:, P:]``, see
        :mod:`.chain`); a probability of 0 (no expected count) gets 0."""
        lay, N = self.layout, self.n_states
        tot = stats[:, lay.s_part:]
        out = np.zeros_like(params)
        PT, PE = lay.p_trans, lay.p_emit
        chain = slice(0, PT + N * N)  # startprob, then transmat: the statistics' order too
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, chain] = np.where(params[:, chain] > 0.0, tot[:, chain] / params[:, chain],
                                     0.0)
        out[:, PE:PE + N * lay.E] = self.emission.score(
            params[:, PE:PE + N * lay.E], tot[:, lay.s_emit:lay.s_emit + N * lay.S], N, self.K)
        return out

    def pieces(self, dtype, target) -> Pieces:
        # CPU: the E-step and M-step compiled once each, not inlined, the E-step's vectors
        # and per-unit sums on the stack, its products fused (see make_chain).  GPU: small
        # vectors and sums in the thread's local arrays (registers), not in the local
        # memory of its statistics.
        if target.name != "cpu":
            on_cpu = target.name != "cuda"
            return make_chain(self.emission, self.layout, dtype, target.jit, self.terminating,
                              self.update, local=target.local, local_max=GPU_LOCAL_MAX,
                              weighted=self.weighted,
                              update_item=self._update_item if on_cpu else None)
        return make_chain(self.emission, self.layout, dtype, target.jit, self.terminating,
                          self.update, jit_outer=kernel(), local=stack_vector,
                          keep_emission=True, fma=fused_multiply_add(), weighted=self.weighted,
                          update_item=self._update_item)

    def bytes_per_value(self, dtype) -> int:
        """Bytes of kernel data per stored value, and per observation's share of the offsets."""
        item = 8 if np.dtype(dtype) == np.float64 else 8 + np.dtype(dtype).itemsize
        return item + 8

    # --- weights --------------------------------------------------------------------------

    def with_weights(self) -> HMMModel:
        return dataclasses.replace(self, weighted=True)

    @property
    def unweighted(self) -> HMMModel:
        """This model without weights (scoring, decoding and sampling new sequences)."""
        return dataclasses.replace(self, weighted=False) if self.weighted else self

    def attach_weights(self, pairs: list, weights, datasets, dataset_col: str) -> list:
        """``(identifier, sequences)`` pairs with each sequence's weight as its last column
        (:mod:`.weights`; sequences of weight 0 left out); a ValueError where the weights do
        not line up with the datasets."""
        if (isinstance(weights, str) and self.emission.name == "gaussian"
                and isinstance(datasets, pd.DataFrame) and "value" not in datasets.columns
                and weights in datasets.columns
                and len(datasets.columns) - 2 == self.K):  # (every column but the keys)
            raise ValueError(f"weights={weights!r} was read as a dimension of the Gaussian "
                             "emission too (every column but the dataset and sequence "
                             "columns is one when no column is called 'value'); name the "
                             "value columns with value_col=[...].")
        ws = unit_weights(pairs, weights, datasets, dataset_col, self.unit_col, self.words)
        return [(ident, with_column(units, w))
                for (ident, units), w in zip(pairs, ws, strict=True)]

    def split(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Packed values (a batch's or a sequence's) -> ``(values, weights)``: the weights,
        the last column, apart (views); ``(values, None)`` for an unweighted model."""
        if not self.weighted:
            return values, None
        x = values[:, :-1] if self.emission.name == "gaussian" else values[:, 0]
        return x, values[:, -1]

    def unit_values(self, data: Ragged) -> Ragged:
        """``data`` without the weights (the values as an unweighted model packs them)."""
        if not self.weighted:
            return data
        return Ragged(np.ascontiguousarray(self.split(data.values)[0]), data.units,
                      data.groups)

    def weight_sums(self, packed: Packed) -> np.ndarray:
        """Each valid dataset's sum over its sequences of weight x observed (not missing)
        steps: BIC's number of observations (``summary.sum_weights``)."""
        from ..mixture.model import segment_sums

        x, w = self.split(packed.data.values)
        seen = ~np.isnan(_rows(x)).any(axis=1)
        return segment_sums(np.where(seen, w, 0.0), packed.data.value_offsets)

    # --- data -----------------------------------------------------------------------------

    def values_per_obs(self) -> int:
        return self.emission.values_per_obs(self.K)

    def check(self, units: list, whole: bool = True) -> str | None:
        """Every problem of one dataset (a list of sequences), or None.

        ``whole=False`` checks the sequences alone, not whether the dataset has
        enough observations to fit (for scoring and decoding new sequences).
        Weighted: each sequence has its weight as its last column; a NaN, infinite or
        negative one is a problem.
        """
        problems = []
        numbers = range(len(units))
        if self.weighted:
            numbers = getattr(units, "numbers", np.arange(len(units)))
            seen = np.array([len(u) > 0 for u in units], dtype=bool)
            w = np.array([u[0, -1] for u in units if len(u)], dtype=np.float64)
            problems.append(weight_problems(w, np.asarray(numbers)[seen], self.words.unit))
            problems = [p for p in problems if p]
            units = [self.split(np.asarray(u))[0] for u in units]
        n_obs = 0
        for k, u in zip(numbers, units, strict=True):
            n = len(u)
            if n == 0:
                problems.append(f"sequence {k} is empty")
                continue
            seen = ~np.isnan(u).reshape(n, -1).any(axis=1)  # missing steps: marginalised
            n_obs += int(seen.sum())
            bad = int(np.count_nonzero(np.isinf(u).reshape(n, -1).any(axis=1)))
            if bad:
                problems.append(f"sequence {k}: {bad} of {n} observations are infinite "
                                "(NaN marks a missing one)")
                continue
            u = np.asarray(u).reshape(n, -1)[seen].reshape(-1)
            n = len(u)
            if self.emission.name == "categorical":
                wrong = (u < 0) | (u >= self.K) | (u != np.round(u))
                if wrong.any():
                    first = u[wrong][0]
                    hint = (f"; at most {MAX_SYMBOLS} symbols are supported"
                            if first >= MAX_SYMBOLS else "")
                    problems.append(f"sequence {k}: {int(wrong.sum())} of {n} values are not "
                                    f"symbols 0..{self.K - 1} (first: {first:g}){hint}")
            elif self.emission.name == "poisson":
                wrong = (u < 0) | (u != np.round(u))
                if wrong.any():
                    problems.append(f"sequence {k}: {int(wrong.sum())} of {n} values are not "
                                    f"counts (non-negative integers; first: {u[wrong][0]:g})")
                elif (u > MAX_COUNT).any():
                    big = u[u > MAX_COUNT]
                    problems.append(f"sequence {k}: {len(big)} of {n} counts are above 2**53 = "
                                    f"{MAX_COUNT:.0f} (first: {big[0]:g}), beyond the integers "
                                    "that float64 holds exactly; scale the counts down")
        if not units:
            problems.append("no sequences" + (" of positive weight" if self.weighted else ""))
        elif whole and n_obs < self.n_states:
            problems.append(f"too short: {n_obs} observations (not missing), at least "
                            f"{self.n_states} needed for this number of states")
        return "; ".join(problems) if problems else None

    def pack(self, pairs: list) -> Packed:
        """Validate ``(identifier, list of sequences)`` pairs and pack the valid datasets
        (:meth:`check` runs only on the datasets that one vectorised pass flags)."""
        def observed(v):
            return ~np.isnan(_rows(self.split(v)[0])).any(axis=1)

        return pack_units(pairs, self.check, self.values_per_obs() + self.weighted,
                          screen=self._screen, observed=observed)

    def _screen(self, values: np.ndarray, lengths: np.ndarray, n_units: np.ndarray
                ) -> np.ndarray:
        """The datasets :meth:`check` could fault, from every value at once."""
        values, w = self.split(values)
        x = _rows(values)
        with np.errstate(invalid="ignore"):
            missing = np.isnan(x).any(axis=1)
            bad = np.isinf(x).any(axis=1)
            if w is not None:
                bad |= ~(w >= 0) | np.isinf(w)
            v = np.where(missing, 0.0, x[:, 0])
            if self.emission.name == "categorical":
                bad |= (v < 0) | (v >= self.K) | (v != np.round(v))
            elif self.emission.name == "poisson":
                bad |= (v < 0) | (v != np.round(v)) | (v > MAX_COUNT)
        empty = by_dataset(lengths == 0, n_units) > 0
        seen = lengths - counts(missing, lengths) if missing.any() else lengths
        return (flagged(bad, lengths, n_units) | empty | (n_units == 0)
                | (by_dataset(seen, n_units) < self.n_states))

    def kernel_data(self, data: Ragged, constants: bool = True
                    ) -> tuple[tuple, np.ndarray, np.ndarray]:
        """The kernels' batch tuple ``(x, units, block, flags)`` (weighted: ``(x, units, block,
        w, flags)``, ``w`` one weight per unit), item (sequence) offsets, constants.

        The constant of a dataset is the part of its log-likelihood that no
        parameter changes: for Poisson emissions the sum of
        :func:`~.emissions.poisson_const` (``-log(x!)`` but for huge counts; weighted,
        each times its sequence's weight), else 0 (and 0 with ``constants=False``, for an
        engine that has them already).
        """
        values, w = self.split(data.values)
        x = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        const = np.zeros(data.n_datasets)
        if constants and self.emission.name == "poisson" and len(values):
            v = values.reshape(-1)
            c = poisson_const(np.where(np.isnan(v), 0.0, v))  # (a missing step: 0)
            if w is not None:
                c = c * w
            const = np.add.reduceat(c, data.value_offsets[:-1])
        batch = (x, data.units, self.tuning.wide_cpu_chunk_units)
        if w is not None:  # (a valid dataset's sequences are not empty: a row each)
            batch += (np.ascontiguousarray(w[data.units[:-1]]),)
        batch += (update_flags(self.update),)  # (_update_item)
        return batch, data.groups, const

    # --- starts ---------------------------------------------------------------------------

    def start_plan(self, data: Ragged, keys: np.ndarray, seed: int, method: str,
                   user: np.ndarray | None) -> starts.StartPlan:
        """Random starts: Dirichlet startprob and rows, emissions from random data subsets."""
        def draw(fit_ds, fit_start, out):
            if out is None:
                out = np.empty((len(fit_ds), self.n_params))
            draws.draw(self, plain, keys, seed, method, fit_ds, fit_start, out)
            return out

        plain = self.unit_values(data)  # (weights: the starts draw values alike)

        return starts.StartPlan(draw, user)

    def user_starts(self, init: Mapping) -> np.ndarray:
        """User starting values (``fit(init=...)``) -> array of shape (k, n_params)."""
        shapes = self.init_shapes()
        blocks = dict(zip(shapes, init_blocks(init, shapes), strict=True))
        for key, b in blocks.items():
            if not np.all(np.isfinite(b)):
                raise ValueError(f"init[{key!r}] must be finite.")
            if key != "means" and np.any(b < 0):
                raise ValueError(f"init[{key!r}] must be non-negative.")
        for key in ("startprob", "transmat", "emissionprob"):
            if key in blocks and not np.allclose(blocks[key].sum(axis=-1), 1.0, atol=1e-8):
                raise ValueError(f"init[{key!r}] rows must sum to 1 (probabilities).")
        if "vars" in blocks and np.any(blocks["vars"] <= 0):
            raise ValueError("init['vars'] must be positive: variances of the Gaussian emissions.")
        if "lambdas" in blocks and np.any(blocks["lambdas"] <= 0):
            raise ValueError("init['lambdas'] must be positive: Poisson rates.")
        return self.params_layout.join(blocks)

    # --- tables ---------------------------------------------------------------------------

    def param_columns(self, params: np.ndarray) -> dict:
        """Columns, one row per (fit, state): startprob and the emission's parameters."""
        layout = self.params_layout
        start, _, *emission = layout.blocks
        return layout.record_columns(params, [start, *emission])

    def order_key(self, params: np.ndarray) -> np.ndarray:
        """States are listed in increasing order of this key (n_fits, N): emission location."""
        return self.emission.location(self.params_layout.split(params))

    def permute(self, params: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Each fit's states renumbered: new state ``k`` is old state ``order[f, k]``."""
        return self.params_layout.permute(params, order)

    def canonical(self, params: np.ndarray) -> np.ndarray:
        """``params`` with each fit's states in increasing order of :meth:`order_key`."""
        order = np.argsort(self.order_key(params), axis=1, kind="stable")
        return self.permute(params, order)

    def start_tables(self, datasets: np.ndarray, starts: np.ndarray, init: np.ndarray) -> dict:
        """``start_transitions``: each start's transition matrix, one row per (dataset, start,
        from_state, to_state) (the states in the start's own order, as ``start_values``;
        the columns named by :attr:`transition_columns`)."""
        return {"start_transitions": self._transitions(datasets, init, starts)}

    def extra_tables(self, datasets: np.ndarray, params: np.ndarray) -> dict:
        """``transitions``: one row per (dataset, from_state, to_state), ``prob``."""
        return {"transitions": self._transitions(datasets, params)}

    def _transitions(self, datasets: np.ndarray, params: np.ndarray,
                     starts: np.ndarray | None = None) -> pd.DataFrame:
        """A row per (fit, from, to) of each fit's transition matrix (with its start)."""
        N = self.n_states
        trans = self.params_layout.split(params)[self.chain_blocks[1][0]]
        ds, fr, to, prob = self.transition_columns
        cols = {ds: np.repeat(datasets, N * N)}
        if starts is not None:
            cols["start"] = np.repeat(starts, N * N)
        cols[fr] = np.tile(np.repeat(np.arange(1, N + 1), N), len(datasets))
        cols[to] = np.tile(np.arange(1, N + 1), N * len(datasets))
        cols[prob] = trans.reshape(-1)
        return pd.DataFrame(cols)


def _rows(values: np.ndarray) -> np.ndarray:
    """Values as rows, one per observation (a 1-D array: one column)."""
    return values[:, None] if values.ndim == 1 else values
