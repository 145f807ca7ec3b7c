"""A finite mixture of a family's components, as a model of the EM driver."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import njit, prange

from ...data import Packed, pack
from ...data.units import counts
from ...fitting import starts
from ...kernels.cache import njit_cached
from ...tuning import DEFAULT, Tuning
from ..base import Layout, Model, Pieces, Sizes, init_blocks
from .fused import block_obs, fixed_sizes, make_blocked, make_bound, make_pass, make_weighted_pass

if TYPE_CHECKING:  # (a type only: family.py imports this module)
    from .family import Family


def weight_problems(w: np.ndarray) -> str | None:
    """Why observation weights cannot be used (NaN, infinite or negative ones), or None."""
    bad = ~np.isfinite(w)
    neg = ~bad & (w < 0)
    problems = []
    if bad.any():
        problems.append(f"{int(bad.sum())} of {len(w)} weights are NaN or infinite")
    if neg.any():
        problems.append(f"{int(neg.sum())} of {len(w)} weights are negative")
    if problems:
        return ("; ".join(problems) + " (weights must be finite and >= 0; a weight of 0 "
                "leaves its value out)")
    return None


@njit(cache=True, nogil=True)  # called by the CUDA scheduler's threads
def segment_sums(x, offsets):
    """``out[k] = sum(x[offsets[k]:offsets[k + 1]])``, in order."""
    out = np.zeros(len(offsets) - 1)
    for k in range(len(offsets) - 1):
        s = 0.0
        for i in range(offsets[k], offsets[k + 1]):
            s += x[i]
        out[k] = s
    return out


@dataclass(frozen=True)
class MixtureModel(Model):
    """``M`` components of a :class:`Family` in ``D`` dimensions.

    The items the lanes of a fit split are the dataset's observations.  The
    batch data of the kernels starts ``(feat, stride)``: the family's features of
    every observation, feature ``f`` of observation ``i`` at
    ``feat[f * stride + i]`` (:meth:`kernel_data`).

    With ``weighted``, each observation has a weight (``fit(weights=...)``), stored as
    the last column of the packed values (``(n, 2)`` for a scalar family, ``(n, D + 1)``
    for a vector one) so that it travels with its value wherever the datasets are
    split, chunked or checkpointed, and after the features in the kernels' ``feat``.
    Its E-steps are :func:`.fused.make_weighted_pass`'s.
    """

    family: Family
    n_components: int
    n_dims: int = 1
    tuning: Tuning = DEFAULT
    weighted: bool = False

    @property
    def compiled_sizes(self) -> bool:
        """The CPU's kernels have M and D compiled in (``Tuning.cpu_sizes``), else read
        them at run time: one kernel for every size."""
        return self.tuning.cpu_sizes == "compiled"

    @property
    def name(self) -> str:
        return self.family.name

    @property
    def key(self) -> tuple:
        """What the compiled code depends on (for compile caches): the model and the
        tuning compiled into kernels."""
        return ("mixture", self.family.name + ("+w" if self.weighted else ""), self.n_components,
                self.n_dims, self.tuning.key())

    @property
    def cpu_key(self) -> tuple:
        """What the CPU kernels depend on: the sizes only where they are compiled in."""
        if self.compiled_sizes:
            return self.key
        return ("mixture", self.family.name + ("+w" if self.weighted else ""), self.tuning.key())

    component_label = "component"  # the components table's numbering column

    @property
    def init_methods(self) -> tuple[str, ...]:
        """The ``init_method`` values this family offers."""
        return ("subset", "kmeans++") if self.family.centre_init is not None else ("subset",)

    @property
    def default_init(self) -> str:
        return self.family.default_init

    @property
    def params_layout(self) -> Layout:
        """One record of the family's blocks per component."""
        return Layout([self.family.blocks(self.n_components, self.n_dims)],
                      exchangeable="component")

    def bytes_per_value(self, dtype) -> int:
        """Bytes of kernel data per observation: float64 features, and a narrower copy."""
        item = 8 if np.dtype(dtype) == np.float64 else 8 + np.dtype(dtype).itemsize
        return (self.family.n_features(self.n_dims) + int(self.weighted)) * item

    weight_unit = "value"

    def with_weights(self) -> MixtureModel:
        return dataclasses.replace(self, weighted=True)

    def attach_weights(self, pairs, weights, datasets, dataset_col: str):
        """The weights as the values' last column (:func:`bulkem.data.weights.attach_weights`)."""
        from ...data.weights import attach_weights

        return attach_weights(pairs, weights, datasets, dataset_col)

    def weight_sums(self, packed) -> np.ndarray:
        """Each valid dataset's sum of weights (BIC's number of observations)."""
        return segment_sums(np.ascontiguousarray(packed.data.values[:, -1]),
                            packed.data.value_offsets)

    # --- data -----------------------------------------------------------------

    def split(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Packed values -> ``(values, weights)``: the weights, the last column, apart
        (contiguous copies); ``(values, None)`` for an unweighted model."""
        if not self.weighted:
            return values, None
        x = values[:, 0] if self.family.ndim == 1 else values[:, :-1]
        return np.ascontiguousarray(x), np.ascontiguousarray(values[:, -1])

    def check(self, values: np.ndarray) -> str | None:
        """Why a dataset cannot be fitted, or None."""
        x, w = self.split(values)
        problems = [] if w is None else [weight_problems(w)]
        problems.append(self.family.check(x, self.n_components))
        return "; ".join(p for p in problems if p) or None

    def pack(self, pairs: list) -> Packed:
        """Validate the datasets (``(identifier, array)`` pairs) and pack the valid ones
        (:meth:`check` runs only on the datasets that :meth:`screen` flags)."""
        return pack(pairs, self.check, self.screen)

    def screen(self, values: np.ndarray, n_obs: np.ndarray) -> np.ndarray:
        """The datasets :meth:`check` could fault (``n_obs`` values each of ``values``),
        from every value at once: too short, a NaN or infinite value, or a value the family
        refuses (``Family.outside``)."""
        from ...data._checks import nonfinite_datasets

        values, w = self.split(values)
        width = int(np.prod(values.shape[1:], dtype=np.int64))
        starts = np.zeros(len(n_obs) + 1, dtype=np.int64)
        np.cumsum(n_obs * width, out=starts[1:])
        look = n_obs < self.family.min_obs(self.n_components, self.n_dims)
        look |= nonfinite_datasets(np.ascontiguousarray(values, np.float64).reshape(-1), starts)
        if self.family.outside is not None:
            with np.errstate(invalid="ignore"):
                look |= counts(self.family.outside(values), n_obs) > 0
        if w is not None:
            with np.errstate(invalid="ignore"):
                look |= counts(~(w >= 0) | ~np.isfinite(w), n_obs) > 0
        return look

    def kernel_data(self, data) -> tuple[tuple, np.ndarray, np.ndarray]:
        """The kernels' batch tuple, item offsets and per-dataset constants.

        Parameters
        ----------
        data : bulkem.data.Ragged
            Datasets of one unit each (their observations).

        Returns
        -------
        data : tuple
            ``(feat, stride, block64, block32, M, D, tau64, tau32)``: ``feat`` of shape
            ``(n_features * n,)`` float64; the observations per block of the E-step's
            sums in float64 and in float32 (``Tuning.estep_block_obs``,
            :func:`.fused.block_obs`); the numbers of components and dimensions (read by
            the CPU's pieces, run-time values there); ``Tuning.exact_rtol`` of float64 and
            float32 (run-time values: no kernel is compiled per value).
        offsets : ndarray of shape (n_datasets + 1,)
            The datasets' observation ranges.
        const : ndarray of shape (n_datasets,)
            Per-dataset sum of the family's shared log-density term.
        """
        offsets = data.value_offsets
        values, w = self.split(data.values)
        big = self.tuning.parallel_transpose_min  # (values: on every core from this many)
        if len(values) >= big and values.ndim == 1:
            feat, obs = _by_parts(self.family, values)
        else:
            feat = _contiguous(self.family.features(values), big)
            obs = self.family.obs_const(values)
        feat = feat.reshape(-1)
        if w is not None:  # the weights after the features; the shared term weighted
            feat = np.concatenate([feat, w])
            obs = obs * w
        const = segment_sums(obs, offsets)
        M, per = self.n_components, self.tuning.estep_block_obs
        blocks = (block_obs(np.float64, M, per["float64"]),
                  block_obs(np.float32, M, per["float32"]))
        tau = self.tuning.exact_rtol
        return ((feat, len(values), *blocks, M, self.n_dims, float(tau["float64"]),
                 float(tau["float32"])), offsets, const)

    def entropies(self, data, which: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``-sum_i sum_m z_im log z_im`` of each dataset ``which[j]`` of ``data`` under
        ``params[j]`` (``z``: the components' posterior probabilities), compiled, on every
        core (the ICL's entropy term, :meth:`MixtureResult.entropy`)."""
        (feat, stride, *_), offsets, _ = self.kernel_data(data)
        out = np.empty(len(which))
        _entropy_kernel(self.family, self.weighted)(feat, stride, offsets,
                                                    np.asarray(which, np.int64),
                                     np.ascontiguousarray(params, np.float64),
                                     self.n_components, self.n_dims,
                                     self.family.n_coef(self.n_components, self.n_dims), out)
        return out

    # --- starts ---------------------------------------------------------------

    def start_plan(self, data, keys: np.ndarray, seed: int, method: str,
                   user: np.ndarray | None) -> starts.StartPlan:
        """How the random starts of a batch are drawn (a ``fitting.starts.StartPlan``)."""
        fam, M, offsets = self.family, self.n_components, data.value_offsets
        values = self.split(data.values)[0]  # (weights: the starts draw values alike)
        tun = self.tuning

        def draw(fit_ds, fit_start, out):
            if method == "kmeans++":
                return starts.kmeanspp_starts(fam, M, values, offsets, fit_ds, fit_start, keys,
                                              seed, out, tun.kmeans_sample_obs,
                                              tun.kmeans_sample_per_component)
            return starts.subset_starts(fam, M, values, offsets, fit_ds, fit_start, keys, seed,
                                        out)

        return starts.StartPlan(draw, user)

    def user_starts(self, init: Mapping) -> np.ndarray:
        """User starting values (``fit(init=...)``) -> array of shape (k, n_params)."""
        layout = self.params_layout
        shapes = self.init_shapes()
        blocks = dict(zip(shapes, init_blocks(init, shapes), strict=True))
        positive = [b.name for b in layout.blocks.values() if b.constraint != "real"]
        for key, block in blocks.items():
            if not np.all(np.isfinite(block)):
                raise ValueError(f"init[{key!r}] holds NaN or infinite values; init values "
                                 "must be finite.")
            if key in positive and np.any(block <= 0):
                raise ValueError(f"init[{key!r}] must be positive ({self.family.name!r} family: "
                                 f"{', '.join(positive)} > 0); got {np.min(block)!r}.")
        w = blocks["weight"]
        blocks["weight"] = w / w.sum(axis=1, keepdims=True)
        return layout.join(blocks)

    # --- tables ---------------------------------------------------------------

    def param_columns(self, params: np.ndarray) -> dict:
        """Table columns, one row per (fit, component), from ``params`` (n_fits, n_params)."""
        layout = self.params_layout
        return layout.record_columns(params, layout.blocks)

    def at_bound(self, params: np.ndarray, reg: float) -> np.ndarray:
        """As :meth:`Model.at_bound`, and a block held at its floor: ``reg_covar`` for
        ``Family.reg_floored`` (the Gaussian's variances), or ``Family.floors``."""
        out = super().at_bound(params, reg)
        blocks = self.params_layout.split(params)
        floors = self.family.floors
        if self.family.reg_floored is not None:
            floors = ((self.family.reg_floored, reg),) + floors
        for name, floor in floors:
            out |= (blocks[name].reshape(len(params), -1) <= floor * (1 + 1e-6)).any(axis=1)
        return out

    @property
    def has_score(self) -> bool:
        """Whether the family has a score (``Family.score``)."""
        return self.family.score is not None

    def score(self, params: np.ndarray, stats: np.ndarray) -> np.ndarray:
        """As :meth:`Model.score`: the family's (``Family.score``), from the E-step's
        statistics less its log-likelihood (the last)."""
        M, D = self.n_components, self.n_dims
        return self.family.score(params, stats[:, :self.family.n_stats(M, D)], M, D)

    def canonical(self, params: np.ndarray) -> np.ndarray:
        """``params`` (n_fits, n_params) with each fit's components in increasing location."""
        key = self.family.order_key(params, self.n_components, self.n_dims)
        return self.params_layout.permute(params, np.argsort(key, axis=1, kind="stable"))

    def start_tables(self, datasets: np.ndarray, starts: np.ndarray, init: np.ndarray) -> dict:
        """Tables of the starts beyond ``start_values``: none for a mixture."""
        return {}

    def sizes(self) -> Sizes:
        fam, M, D = self.family, self.n_components, self.n_dims
        NS = fam.n_stats(M, D)
        NC = fam.n_coef(M, D)
        # stats: the family's, then the E-step's log-likelihood (summed over
        # lanes with them); totals: sum g, a flag and a scale per dtype (see
        # pieces); work: the pass's coefficients and the pass
        # (weighted: the weights' sum after the totals, copied after the log-likelihood)
        W = int(self.weighted)
        return Sizes(params=fam.n_params(M, D), stats=NS + 1 + W, totals=NS // M + 4 + W,
                     coef=NC, work=NC + 1, scratch=NS + M)

    def pieces(self, dtype, target) -> Pieces:
        """The E-step passes (:func:`make_pass`) and the family's M-step, as driver pieces.

        ``prepare`` picks the pass of each iteration: the linear one where
        :func:`~.fused.make_bound` (times eps) is at most
        ``tuning.exact_rtol`` of the previous E-step's |log-likelihood|
        (less the constant), the exact one otherwise and at the first E-step
        of these pieces for a fit (a flag per dtype in ``tot``).  A choice
        made from the fit's own numbers only, so every engine makes the same.
        The E-step leaves its log-likelihood in the last statistic, which the
        driver sums over a fit's lanes with the others; ``complete`` turns it
        into the next ``prepare``'s scale (``tot``).  (The hooks call no
        collective of the target themselves: Numba-CUDA links a device
        function holding a shared array once per caller, and NVVM refuses the
        duplicate symbols, ERROR_INVALID_IR, for block-wide fits.)
        On the ``"cpu-wide"`` target the passes run their blocks in parallel
        (:func:`~.fused.make_blocked`).  A ``weighted`` model runs the weighted exact
        pass (:func:`~.fused.make_weighted_pass`) at every E-step, and its M-step's
        number of observations is the weights' sum; a family with ``accum_at`` (statistics
        that depend on the parameters: the negative binomial) runs the exact pass at every
        E-step too.

        The number of components and of dimensions are run-time values on
        the CPU targets, read from the batch tuple (:meth:`kernel_data`), so
        that one compiled kernel serves every ``M`` and ``D`` (the pieces do
        not depend on this model's sizes there; :attr:`cpu_key`), unless
        ``compiled_sizes``; on the GPU they are this model's, compile-time
        constants.  Both give the same bits.
        """
        fam = self.family
        jit = target.jit
        approx = target.approx32 if dtype == np.float32 else None
        on_gpu = target.name == "cuda"
        tile = 0 if on_gpu else self.tuning.cpu_tile_obs
        wide = target.name == "cpu-wide"
        WEIGHTED = self.weighted
        # every E-step the exact pass: weights, or statistics that depend on the parameters
        EXACT_ONLY = WEIGHTED or fam.accum_at is not None
        by_stat = wide and tile > 0 and fam.accum_tile is not None  # (rows by statistic)
        tun = self.tuning
        const = on_gpu or self.compiled_sizes
        sizes = (self.n_components, self.n_dims) if const else None
        ps = make_pass(fam, dtype, jit, approx, tile, by_stat, sizes)
        totals, shift, complete, first = ps.totals, ps.shift, ps.complete, ps.first
        pass_exact = ps.exact
        if WEIGHTED:
            wp = make_weighted_pass(fam, dtype, jit, approx, tile, by_stat, sizes)
            totals, pass_exact = wp.totals, wp.exact
        coef_f = jit(fam.coef)
        ecoef_f = jit(fam.exact_coef)
        mstep_f = jit(fam.mstep)
        bound_f = make_bound(fam, jit)
        per_f = jit(fam.n_stats)  # per_f(1, D): statistics per component
        ncoef_f = jit(fam.n_coef)
        npar_f = jit(fam.per_component)
        FIRST = first
        FOFF = 0 if dtype == np.float64 else 1  # tot[S + FOFF]: E-steps done before
        SOFF = 2 if dtype == np.float64 else 3  # tot[S + SOFF]: the base, then |ll|
        EPS = float(np.finfo(dtype).eps)
        fix = fixed_sizes(sizes, jit)  # the constants, where compiled in

        def dims_py(data):
            return fix(data[4], data[5])

        dims = jit(dims_py)

        def layout_py(M, D):
            """``(S, NS, NC, P)``: statistics per component and in all, coefficients,
            parameters per component (the weight first).  ``work[NC]``: 0 the linear
            pass, 1 the exact one; ``stats[NS]``: the E-step's log-likelihood."""
            S = per_f(1, D)
            return S, S * M, ncoef_f(M, D), npar_f(D)

        layout = jit(layout_py)
        if wide:
            wave = tun.cpu_wide_wave_blocks
            exact_f = make_blocked(pass_exact, fam, dtype, first, by_stat, wave=wave, sizes=sizes)
            fast_f = exact_f if EXACT_ONLY else make_blocked(ps.estep, fam, dtype, first, by_stat,
                                                           wave=wave, sizes=sizes)

            def run_fast(M, D, NS, NC, work, feat, stride, lo, hi, step, block, stats, scratch,
                         xc):
                return fast_f(M, D, work[:NC], feat, stride, lo, hi, block, stats, xc)

            def run_exact(M, D, NS, NC, work, feat, stride, lo, hi, step, block, stats, scratch,
                          xc):
                return exact_f(M, D, work[:NC], feat, stride, lo, hi, block, stats, xc)
        else:
            pass_fast = pass_exact if EXACT_ONLY else ps.estep

            def run_fast(M, D, NS, NC, work, feat, stride, lo, hi, step, block, stats, scratch,
                         xc):
                return pass_fast(M, D, work, feat, stride, lo, hi, step, block, stats,
                                 scratch[:NS], scratch[NS:NS + M], xc)

            def run_exact(M, D, NS, NC, work, feat, stride, lo, hi, step, block, stats, scratch,
                          xc):
                return pass_exact(M, D, work, feat, stride, lo, hi, step, block, stats,
                                  scratch[:NS], scratch[NS:NS + M], xc)
        run_fast = jit(run_fast)
        run_exact = jit(run_exact)

        def lead_py(M, P, params):
            # The pass derives component 0 from the totals, which is accurate only
            # while component 0 is not small: keep the heaviest first.
            for m in range(1, M):
                if params[P * m] > params[0]:
                    for k in range(P):
                        a = params[k]
                        params[k] = params[P * m + k]
                        params[P * m + k] = a

        lead = jit(lead_py)

        BI = 2 if dtype == np.float64 else 3  # data[BI]: this dtype's block (kernel_data)
        TI = 6 if dtype == np.float64 else 7  # data[TI]: this dtype's exact_rtol

        def setup(data, lo, hi, step, tot):
            M, D = dims(data)
            totals(D, data[0], data[1], lo, hi, step, tot)

        def prepare(data, params, tot, coef, work):
            M, D = dims(data)
            S, NS, NC, P = layout(M, D)
            if FIRST == 1 and M > 1:
                lead(M, P, params)
            coef_f(params, M, D, coef)
            later = tot[S + FOFF] != 0.0  # not the fit's first E-step with these pieces
            tot[S + FOFF] = 1.0
            if (later and not EXACT_ONLY
                    and EPS * bound_f(M, D, coef, tot) <= data[TI] * tot[S + SOFF]):
                work[NC] = 0
                base = shift(M, D, coef, tot, work)
            else:  # the exact pass: all of the log-likelihood from the E-step
                work[NC] = 1
                ecoef_f(params, M, D, coef)
                base = 0.0
                for k in range(NC):
                    c = coef[k]
                    if not math.isfinite(c):
                        base = math.nan
                    work[k] = c
            tot[S + SOFF] = base
            return base

        def estep(data, lo, hi, step, work, stats, scratch, buf, xc):
            M, D = dims(data)
            S, NS, NC, P = layout(M, D)
            feat, stride, block = data[0], data[1], data[BI]
            if work[NC] == 0:
                ll = run_fast(M, D, NS, NC, work, feat, stride, lo, hi, step, block, stats,
                              scratch, xc)
            else:
                ll = run_exact(M, D, NS, NC, work, feat, stride, lo, hi, step, block, stats,
                               scratch, xc)
            stats[NS] = ll
            return ll

        def complete_scale(data, stats, tot):
            M, D = dims(data)
            S, NS, NC, P = layout(M, D)
            complete(M, D, stats, tot)
            tot[S + SOFF] = abs(stats[NS] + tot[S + SOFF])  # for the next prepare
            if WEIGHTED:
                stats[NS + 1] = tot[S + 4]  # the weights' sum, for the M-step

        def mstep(data, stats, params, n, reg):
            M, D = dims(data)
            if WEIGHTED:
                S, NS, NC, P = layout(M, D)
                return mstep_f(stats, params, M, D, stats[NS + 1], reg)
            return mstep_f(stats, params, M, D, n, reg)

        # The statistics the lanes of a fit sum from (the driver's allreduce): on the CPU
        # one thread runs a fit and sums nothing, and the sizes are run-time values.
        first_stat = fam.n_stats(1, self.n_dims) * first if on_gpu else 0
        return Pieces(jit(setup), jit(prepare), jit(estep), jit(complete_scale), jit(mstep),
                      first_stat)


_entropy_kernels: dict = {}


def _entropy_kernel(family, weighted: bool = False):
    """The compiled pass of :meth:`MixtureModel.entropies` for a family (sizes at run time).

    From the family's exact log densities (``Family.exact_logdens``, without the
    observation's shared term, which cancels): with ``a_m = log w_m p_m(x) - max``,
    ``-sum z log z = log s - sum e^a_m a_m / s``, ``s = sum e^a_m``.  A value that every
    component's density underflows adds nothing.  ``weighted``: each value's term times
    its weight (stored after the features)."""
    name = family.name + ("+w" if weighted else "")
    if name in _entropy_kernels:
        return _entropy_kernels[name]
    coef_f, dens_f = njit(family.exact_coef), njit(family.exact_logdens)
    nfeat_f = njit(family.n_features)
    WEIGHTED = weighted

    @njit_cached(("mixture-entropy", name), parallel=True)
    def run(feat, stride, offsets, which, params, M, D, n_coef, out):
        for j in prange(len(which)):
            c = np.empty(n_coef)
            coef_f(params[j], M, D, c)
            lw = np.empty(M)
            h = 0.0
            ust = np.uint64(stride)
            wo = np.uint64(nfeat_f(D)) * ust
            for i in range(np.uint64(offsets[which[j]]), np.uint64(offsets[which[j] + 1])):
                top = -np.inf
                for m in range(M):
                    lw[m] = dens_f(c, m, D, feat, ust, i)
                    top = max(top, lw[m])
                if not math.isfinite(top):
                    continue
                s = 0.0
                acc = 0.0
                for m in range(M):
                    a = lw[m] - top
                    e = math.exp(a)
                    s += e
                    if e > 0.0:
                        acc += e * a
                hi = math.log(s) - acc / s
                h += feat[wo + i] * hi if WEIGHTED else hi
            out[j] = h

    _entropy_kernels[name] = run
    return run


def _by_parts(family, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``family.features(values)`` (C order) and ``family.obs_const(values)`` of a large 1-D
    batch, computed a slice of values per core (NumPy's ufuncs release the GIL): the same
    numbers, element by element, as one call each."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    n = len(values)
    parts = max(1, min(numba.get_num_threads(), os.cpu_count() or 1))
    cuts = np.linspace(0, n, parts + 1).astype(np.int64)
    feat = np.empty((family.n_features(1), n))
    obs = np.empty(n)

    def one(k: int) -> None:
        a, b = cuts[k], cuts[k + 1]
        feat[:, a:b] = family.features(values[a:b])
        obs[a:b] = family.obs_const(values[a:b])

    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(one, range(parts)))
    return feat, obs


def _contiguous(feat: np.ndarray, parallel_min: int) -> np.ndarray:
    """``np.ascontiguousarray(feat)``; a transposed view of ``parallel_min`` values or more
    copied on every core.

    (The vector families' features are the data transposed: one thread took
    61 ms for 230,400 x 32 values, the largest host cost of a one-large-dataset
    GPU fit.)
    """
    if feat.ndim == 2 and not feat.flags.c_contiguous and feat.T.flags.c_contiguous \
            and feat.size >= parallel_min:
        return _transpose(feat.T)
    return np.ascontiguousarray(feat)


@njit(parallel=True, cache=True)
def _transpose(a):
    n, d = a.shape
    out = np.empty((d, n), a.dtype)
    block = 512
    for b in prange((n + block - 1) // block):
        for j in range(d):
            for i in range(b * block, min(n, (b + 1) * block)):
                out[j, i] = a[i, j]
    return out
