"""AR(p)-plus-noise and local-level models as models of the EM driver: data, starts, tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ...data import Packed, Ragged
from ...data.units import by_dataset, counts, pack_units
from ...fitting import starts
from ...tuning import DEFAULT, DEGENERATE_PARAM, Tuning
from ..base import Axis, Block, Layout, Model, Pieces, Sizes, init_blocks
from . import draws
from . import weights as series_weights
from .em import AR, LOCAL_LEVEL, EMLayout, make_pieces
from .statespace import StateSpace


def ar_radius(phi: np.ndarray) -> np.ndarray:
    """Spectral radius of the companion matrix of each row of ``phi`` (n, p): < 1 is stationary.

    The largest modulus of the roots of ``z^p - phi_1 z^{p-1} - ... - phi_p``
    (1 over the smallest modulus of the AR polynomial's roots).
    """
    phi = np.atleast_2d(np.asarray(phi, dtype=np.float64))
    n, p = phi.shape
    if n == 0:
        return np.empty(0)
    F = np.zeros((n, p, p))
    F[:, 0, :] = phi
    if p > 1:
        F[:, np.arange(1, p), np.arange(p - 1)] = 1.0
    ok = np.all(np.isfinite(phi), axis=1)
    out = np.full(n, np.nan)
    if ok.any():
        out[ok] = np.abs(np.linalg.eigvals(F[ok])).max(axis=1)
    return out


# The range of the data's scale that a fit takes: the E-step sums squares of
# the values over every step, and the AR M-step solves with the inverse of
# such sums; with the scale within 1e-100 .. 1e100 both stay far inside
# float64's range (about 1e-308 .. 1e308).  The AR family's scale is the
# largest |y|, the local level's the spread max(y) - min(y) (the level
# itself is free) and its largest |y| at most SCALE_MAX.
SCALE_MIN = 1e-100
SCALE_MAX = 1e100

# The local level's priors of the first level (SSMModel.prior).
FITTED = "fitted"
DIFFUSE = "diffuse"
PRIORS = (FITTED, DIFFUSE)


def _scale_problems(obs: np.ndarray, family: str) -> list[str]:
    """Why the observed values ``obs`` (finite, not all equal) are out of the fits' range."""
    big = float(np.max(np.abs(obs)))
    if big > SCALE_MAX:
        return [f"observed values reach {big:.3g} in magnitude; expected at most "
                f"{SCALE_MAX:g}: the fit's variances (squares of the values) would overflow. "
                "Divide the series by a constant (the fitted variances scale by its square)"]
    scale = big if family == AR else float(np.max(obs) - np.min(obs))
    if scale < SCALE_MIN:
        what = "largest |value|" if family == AR else "spread (max - min)"
        return [f"the observed values' {what} is {scale:.3g}; expected at least "
                f"{SCALE_MIN:g}: the fit's variances (squares of the values) would underflow. "
                "Multiply the series by a constant (the fitted variances scale by its square)"]
    return []


def _after_first(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per series: its steps after the first observed one (-1 for a series with none)."""
    n = len(lengths)
    at = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=at[1:])
    seen = np.flatnonzero(~np.isnan(values))
    out = np.full(n, -1, dtype=np.int64)
    if len(seen):
        series = np.searchsorted(at, seen, side="right") - 1
        firsts = np.full(n, -1, dtype=np.int64)
        new = np.r_[True, series[1:] != series[:-1]]  # (seen is sorted)
        firsts[series[new]] = seen[new]
        has = firsts >= 0
        out[has] = at[1:][has] - 1 - firsts[has]
    return out


@dataclass(frozen=True)
class SSMModel(Model):
    """An AR(p)-plus-noise (``family="ar"``) or local-level model fitted by EM.

    The items the lanes of a fit split are the dataset's series.  The
    kernels' batch data is ``(y, units)``: every series' values (NaN:
    missing) and the series' offsets into them; weighted, ``(y, units, w)``
    with one weight per series.  See :mod:`.em` for the model, its prior and
    the E- and M-steps.

    Attributes
    ----------
    family : {"ar", "local_level"}
    order : int
        The AR order ``p`` (1 for the local level): the state dimension.
    prior : {"fitted", "diffuse"}
        The local level's prior of the first level: ``N(level0, state_var)`` with
        ``level0`` fitted, or the exact diffuse prior (a flat one: no ``level0``; see
        :mod:`.em`).  The AR family's prior is the stationary law ("fitted": nothing to
        choose).  Only "diffuse" changes :attr:`key` (a compiled variant of its own).
    weighted : bool
        One weight per series (``fit(weights=...)``): its log-likelihood and its share of
        the statistics count that many times (:mod:`.weights`, :mod:`.em`).
    series_col : str
        The series column of a DataFrame input (read again for a weight column); not part
        of the model.
    """

    family: str
    order: int = 1
    tuning: Tuning = DEFAULT
    prior: str = FITTED
    weighted: bool = False
    series_col: str = field(default="series", compare=False, repr=False)

    component_label = "parameter"
    status_reasons = {
        DEGENERATE_PARAM: "a variance became non-positive or non-finite",
    }
    dtypes = ("float64",)

    @property
    def name(self) -> str:
        return self.family

    def __post_init__(self) -> None:
        if self.prior not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r}; expected one of {list(PRIORS)}.")
        if self.prior == DIFFUSE and self.family != LOCAL_LEVEL:
            raise ValueError(f"prior='diffuse' is for family='local_level' (a random walk, "
                             f"which has no stationary law); the {self.family!r} family's "
                             "prior is the stationary law. Leave prior out.")

    @property
    def diffuse(self) -> bool:
        """Whether the first level has the exact diffuse prior (``prior="diffuse"``)."""
        return self.prior == DIFFUSE

    @property
    def layout(self) -> EMLayout:
        return EMLayout(self.family, self.order, self.diffuse, self.weighted)

    @property
    def key(self) -> tuple:
        key = ("ssm", self.family, self.order, self.tuning.key())  # (the default's as it was)
        return key + (DIFFUSE,) * self.diffuse + ("weighted",) * self.weighted

    @property
    def params_layout(self) -> Layout:
        """``phi`` (AR order) or ``level0`` (not with the diffuse prior), then ``state_var``
        and ``obs_var``."""
        var = [(Block("state_var", (), "positive"),), (Block("obs_var", (), "positive"),)]
        if self.diffuse:
            return Layout(var)
        head = (Block("phi", (Axis("lag", self.order),)) if self.family == AR
                else Block("level0"))
        return Layout([(head,), *var])

    @property
    def names(self) -> list[str]:
        """The parameters, in params order (one ``components`` row each)."""
        return [c for b in self.params_layout.blocks.values() for c in b.columns(skip=0)]

    @property
    def n_components(self) -> int:
        return self.n_params

    n_dims = 1

    @property
    def cuda_lanes(self) -> dict:
        """Lanes per fit on the GPU, by ``tol > 0`` (read by the bulk CUDA kernel)."""
        return self.tuning.cuda_lanes_per_fit_series

    @property
    def cuda_max_registers(self) -> int | None:
        """The GPU bulk kernel's register cap (read by the bulk CUDA kernel)."""
        return self.tuning.cuda_max_registers_series

    init_methods = ("random",)
    default_max_iter = 500  # (accelerated AR(3) x 500 steps: 99% of fits end within it)
    default_init = "random"

    def sizes(self) -> Sizes:
        return self.layout.sizes()

    def pieces(self, dtype, target) -> Pieces:
        # CPU: the big pieces compiled once each, not inlined (compile time; see make_pieces)
        outer = njit(error_model="numpy") if target.name == "cpu" else None
        return make_pieces(self.layout, dtype, target.jit, outer,
                           max_halvings=self.tuning.ssm_ar_max_halvings)

    def bytes_per_value(self, dtype) -> int:
        """Bytes of kernel data per stored value, and per value's share of the offsets (and
        of the series' weights)."""
        return 16 + 8 * self.weighted

    # --- weights --------------------------------------------------------------------------

    weight_unit = "series"

    def with_weights(self) -> SSMModel:
        """This model with one weight per series."""
        return dataclasses.replace(self, weighted=True)

    def attach_weights(self, pairs: list, weights, datasets, dataset_col: str) -> list:
        """The pairs with each dataset's series weights attached, series of weight 0 left
        out (:func:`.weights.attach_weights`)."""
        return series_weights.attach_weights(pairs, weights, datasets, dataset_col,
                                             self.series_col)

    def weight_sums(self, packed: Packed) -> np.ndarray:
        """Each valid dataset's sum over its series of weight times observed steps (BIC's
        number of observations)."""
        return series_weights.weight_sums(packed.data)

    # --- data -----------------------------------------------------------------------------

    def values_per_obs(self) -> int:
        return 1

    def check(self, units: list) -> str | None:
        """Every problem of one dataset (a list of series; weighted, a
        :class:`.weights.SeriesList`), or None."""
        problems = []
        w = getattr(units, "weights", None)
        numbers = getattr(units, "numbers", range(len(units)))  # (as given: for the messages)
        why = None if w is None else series_weights.weight_problems(w, numbers)
        if why:
            problems.append(why)
        p = self.order
        seen = []
        for k, u in zip(numbers, units, strict=True):
            n = len(u)
            if n < p or n == 0:
                problems.append(f"series {k} is too short: {n} steps, at least {max(p, 1)} "
                                "needed (the state dimension)")
                continue
            inf = int(np.count_nonzero(np.isinf(u)))
            if inf:
                problems.append(f"series {k}: {inf} of {n} values are infinite; expected "
                                "finite numbers, or NaN for a missing step")
                continue
            obs = u[~np.isnan(u)]
            if not len(obs):
                problems.append(f"series {k}: all {n} steps are missing (NaN)")
                continue
            seen.append(obs)
        if not units:
            problems.append("no series" if w is None else "no series of weight above 0")
        if not problems:
            obs = np.concatenate(seen)
            if self.family == AR and not np.any(obs != 0.0):
                problems.append("every observed value is 0: no variance to fit")
            elif self.family == AR and all(not np.any(o != o[0]) for o in seen):
                problems.append(
                    f"every series is constant (series 0 at {seen[0][0]:g}): an AR process "
                    "with a unit root and no noise fits it exactly, so the likelihood has no "
                    "maximum (the variances go to 0)")
            elif self.family == LOCAL_LEVEL and not np.any(obs != obs[0]):
                problems.append(f"every observed value is {obs[0]:g}: no variance to fit")
            elif self.diffuse and not any(
                    len(u) - 1 - int(np.argmax(~np.isnan(u))) > 0 for u in units):
                problems.append(
                    "with prior='diffuse' every series ends at its first observed step: no "
                    "step after it to estimate state_var from (a flat prior's first level "
                    "is free). Give longer series, or use the default prior='fitted'")
            else:
                problems.extend(_scale_problems(obs, self.family))
        return "; ".join(problems) if problems else None

    def pack(self, pairs: list) -> Packed:
        """Validate ``(identifier, list of series)`` pairs and pack the valid datasets.

        ``n_obs`` counts the observed (not missing) steps.  Weighted: each dataset a
        :class:`.weights.SeriesList`, packed in a :class:`.weights.WeightedRagged`.
        """
        if not self.weighted:
            return pack_units(pairs, self.check, 1, observed=lambda v: ~np.isnan(v),
                              screen=self._screen)
        bad = np.array([series_weights.weight_problems(us.weights, us.numbers) is not None
                        for _, us in pairs], dtype=bool)
        packed = pack_units(pairs, self.check, 1, observed=lambda v: ~np.isnan(v),
                            screen=lambda *a: self._screen(*a) | bad)
        d = packed.data
        w = [pairs[k][1].weights for k in packed.valid]
        packed.data = series_weights.WeightedRagged(
            d.values, d.units, d.groups, weights=np.concatenate(w) if w else np.empty(0))
        return packed

    def _screen(self, values: np.ndarray, lengths: np.ndarray, n_units: np.ndarray
                ) -> np.ndarray:
        """The datasets :meth:`check` could fault, from every value at once: a series too
        short, with an infinite value or none observed; no variance (every series constant
        for the AR family, every value equal for the local level); a scale out of range;
        with the diffuse prior, no step after any series' first observed one."""
        n_nan = counts(np.isnan(values), lengths)
        out = (n_units == 0) | (by_dataset((lengths < max(self.order, 1))
                                           | (counts(np.isinf(values), lengths) > 0)
                                           | (n_nan == lengths), n_units) > 0)
        hi, lo = np.full(len(lengths), np.nan), np.full(len(lengths), np.nan)
        full = np.flatnonzero(lengths > 0)
        if len(full):
            at = np.r_[0, np.cumsum(lengths)][full]
            hi[full] = np.fmax.reduceat(values, at)  # (NaN ignored; all-NaN: NaN)
            lo[full] = np.fmin.reduceat(values, at)
        ds_of_unit = np.repeat(np.arange(len(n_units)), n_units)
        big = np.zeros(len(n_units))
        np.fmax.at(big, ds_of_unit, np.fmax(np.abs(hi), np.abs(lo)))  # (NaN ignored)
        varies = hi != lo  # per series; False for a constant or all-missing one
        if self.family == AR:
            out |= ~(by_dataset(varies, n_units) > 0) | (big < SCALE_MIN)
        else:
            top, bottom = np.full(len(n_units), -np.inf), np.full(len(n_units), np.inf)
            np.fmax.at(top, ds_of_unit, hi)
            np.fmin.at(bottom, ds_of_unit, lo)
            out |= ~(top - bottom >= SCALE_MIN)  # (also every value equal, or none)
        if self.diffuse:
            out |= ~(by_dataset(_after_first(values, lengths) > 0, n_units) > 0)
        return out | (big > SCALE_MAX)

    def kernel_data(self, data: Ragged) -> tuple[tuple, np.ndarray, np.ndarray]:
        """The kernels' batch tuple ``(y, units)`` (weighted: ``(y, units, w)``, ``data`` a
        :class:`.weights.WeightedRagged`), item (series) offsets, constants (0)."""
        y = np.ascontiguousarray(data.values, dtype=np.float64).reshape(-1)
        if self.weighted:
            w = np.ascontiguousarray(data.weights, dtype=np.float64)
            return (y, data.units, w), data.groups, np.zeros(data.n_datasets)
        return (y, data.units), data.groups, np.zeros(data.n_datasets)

    # --- starts ---------------------------------------------------------------------------

    def start_plan(self, data: Ragged, keys: np.ndarray, seed: int, method: str,
                   user: np.ndarray | None) -> starts.StartPlan:
        """Random starts scaled by each dataset's moments (see :mod:`.draws`)."""
        mom = []

        def draw(fit_ds, fit_start, out):
            if out is None:
                out = np.empty((len(fit_ds), self.n_params))
            if not mom:
                mom.append(draws.dataset_moments(self, data))
            draws.draw(self, data, keys, seed, fit_ds, fit_start, out, mom[0])
            return out

        return starts.StartPlan(draw, user)

    def user_starts(self, init: Mapping) -> np.ndarray:
        """User starting values (``fit(init=...)``) -> array of shape (k, n_params)."""
        shapes = self.init_shapes()
        if self.diffuse and isinstance(init, Mapping) and "level0" in init:
            raise ValueError("init has a 'level0', but with prior='diffuse' the first level "
                             "has a flat prior, not a parameter: give only 'state_var' and "
                             "'obs_var'.")
        for key, v in init.items():
            if key in shapes:
                try:
                    np.asarray(v, dtype=np.float64)
                except (TypeError, ValueError) as err:
                    raise TypeError(f"init[{key!r}] holds non-numeric values ({err}); expected "
                                    f"numbers, shape {shapes[key]} per start.") from None
        blocks = dict(zip(shapes, init_blocks(init, shapes), strict=True))
        for key, b in blocks.items():
            if not np.all(np.isfinite(b)):
                raise ValueError(f"init[{key!r}] must be finite; got {b.tolist()}.")
        for key in ("state_var", "obs_var"):
            if np.any(blocks[key] <= 0):
                raise ValueError(f"init[{key!r}] must be positive: a variance; got "
                                 f"{blocks[key].tolist()}.")
        if self.family == AR:
            rad = ar_radius(blocks["phi"])
            bad = np.flatnonzero(~(rad < 1.0))
            if len(bad):
                raise ValueError(
                    f"init['phi'] of start {int(bad[0])} is not stationary (companion matrix "
                    f"spectral radius {rad[bad[0]]:.6g}, expected < 1): the AR family's prior "
                    "is the stationary law, which such coefficients do not have. Pass "
                    "stationary coefficients, or use family='local_level' for a random walk.")
        return self.params_layout.join(blocks)

    def state_space(self, params: Mapping) -> StateSpace:
        """One fit's parameters (``as_dict``) as the :class:`StateSpace` of
        ``family="state_space"``: AR, ``StateSpace.ar(phi, state_var, obs_var)`` with the
        stationary prior; local level, ``x_1 ~ N(level0, state_var)``, or with the diffuse
        prior ``StateSpace.local_level(state_var, obs_var, diffuse=True)``."""
        if self.family == AR:
            return StateSpace.ar(params["phi"], params["state_var"], params["obs_var"])
        if self.diffuse:
            return StateSpace.local_level(params["state_var"], params["obs_var"], diffuse=True)
        return StateSpace([[1.0]], [[1.0]], [[params["state_var"]]], [[params["obs_var"]]],
                          [params["level0"]], [[params["state_var"]]])

    # --- tables ---------------------------------------------------------------------------

    def param_columns(self, params: np.ndarray) -> dict:
        """Columns, one row per (fit, parameter): ``parameter`` (its name) and ``value``."""
        # n_params columns, not -1: a batch with no fit has no rows to infer them from
        p = np.asarray(params, dtype=np.float64).reshape(len(params), self.n_params)
        names = np.array(self.names, dtype=object)
        return {"parameter": np.tile(names, len(p)), "value": p.reshape(-1)}

    def se_columns(self, se: np.ndarray) -> dict:
        """The long components table's ``se`` column, one row per (fit, parameter)."""
        return {"se": np.asarray(se, dtype=np.float64).reshape(-1)}

    def canonical(self, params: np.ndarray) -> np.ndarray:
        """No exchangeable parts: the parameters as they are."""
        return np.asarray(params, dtype=np.float64)

    def start_tables(self, datasets: np.ndarray, starts: np.ndarray, init: np.ndarray) -> dict:
        """Tables of the starts beyond ``start_values``: none."""
        return {}

