"""The in-memory fit: validation, the :class:`Job`, the backend, the strategy's run, the tables.

:func:`fit` reads and checks the arguments and the datasets, packs the valid ones, makes the
:class:`Job` of every (dataset, start) fit (:func:`make_job`), runs it with the strategy
that :func:`bulkem.engines.select.run` picks, and builds the model's result tables.
``bulkem.fit`` is :func:`bulkem.scale.fit`: this :func:`fit`, or with ``checkpoint=`` the
same fits in chunks.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import models
from .data import Packed, Ragged
from .engines import select
from .fitting import memory, starts
from .fitting.progress import Progress
from .result import FitResult, result_class
from .tuning import Tuning
from .tuning import check as check_tuning

if TYPE_CHECKING:
    import pandas as pd

    from .models.ssm.statespace import StateSpace

BACKENDS = ("auto", "cpu", "cuda")
_COMPILED: set = set()  # (model, engine, dtype) fitted before in this process
DTYPES = ("float64", "float32")
CRITERIA = ("bic", "aic", "icl")


@dataclass
class Job:
    """Everything an engine needs to run a batch of fits; outputs filled in place.

    Attributes
    ----------
    model : Model
        What is fitted (:mod:`bulkem.models`): its pieces, sizes and data layout.
    dtype : numpy.dtype
        Compute dtype of the per-item math.
    data : bulkem.data.Ragged
        The valid datasets.
    fit_ds, fit_start : ndarray of shape (n_fits,)
        Valid-dataset index and start number of each fit.
    start_plan
        How the starting values are drawn (``fill(fit_ds, fit_start, out)``).
    init : ndarray of shape (n_fits, n_params)
        Starting values, written by :meth:`draw_starts`, which the engines
        call.
    params : ndarray of shape (n_fits, n_params)
        Fitted values out.
    status, n_iter, loglik : ndarray of shape (n_fits,)
        Outputs.
    reg : float
        Passed to the model's M-step: the Gaussian variance floor
        ``reg_covar`` (ignored by models without one).
    """

    model: Any
    dtype: np.dtype
    data: Ragged
    fit_ds: np.ndarray
    fit_start: np.ndarray
    start_plan: Any
    init: np.ndarray
    params: np.ndarray
    status: np.ndarray
    n_iter: np.ndarray
    loglik: np.ndarray
    max_iter: int
    tol: float
    drop_rtol: float
    reg: float
    _kernel_data: tuple | None = field(default=None, repr=False)
    # Observations of each valid dataset (``Packed.n_obs``: a state-space series' observed
    # steps, less than its length where some are missing).
    n_obs: np.ndarray | None = None
    # An evaluation at the same parameter sets for every dataset: those sets (n_sets,
    # n_params); the fits' ``init`` then holds the same rows.
    common_params: np.ndarray | None = None
    # An evaluation by the Kalman filter: the time step where each fit's filter stopped
    # (status NOT_POSITIVE_DEFINITE), else -1.
    stopped_at: np.ndarray | None = None
    # Each fit's log-likelihood after 0, 1, ... M-steps (n_fits, max_iter + 1), written by the
    # engines up to its n_iter (fit(trace=True)); None: not kept.
    trace: np.ndarray | None = None
    # Each fit's E-step statistics at its returned parameters (n_fits, Sizes.stats), written by
    # the bulk engines where given (float64 jobs: an evaluation's, for standard errors from
    # the score); None: not kept.
    stats: np.ndarray | None = None
    # Whether the tables number each best fit's components (states, branches) in the model's
    # canonical order (``fit(reorder=...)``); False: in the order the fit holds them.
    reorder: bool = True
    # 1: the engines accelerate EM by SQUAREM (``fit(accel=...)``,
    # :func:`bulkem.fitting.driver.make_accel`); 0: plain EM.
    accel: int = 0

    @property
    def tuning(self) -> Tuning:
        """The tuning the engines run this job with (the model's)."""
        return self.model.tuning

    @property
    def drop_rtol64(self) -> float:
        """The tolerated fall of a float64 fit (a float32 fit's float64 refit included)."""
        return self.tuning.decrease_rtol["float64"]

    def kernel_data(self) -> tuple[tuple, np.ndarray, np.ndarray]:
        """The model's kernel arrays of the whole batch (``model.kernel_data``), on first use.

        The CUDA scheduler makes them chunk by chunk instead, while the GPU runs.
        """
        if self._kernel_data is None:
            cache = self.data.kernel_cache  # (kept for the call's next job on these data)
            key = (self.model.key, "all")
            if cache is not None and key in cache:
                self._kernel_data = cache[key]
            else:
                self._kernel_data = self.model.kernel_data(self.data)
                if cache is not None:
                    cache[key] = self._kernel_data
        return self._kernel_data

    def draw_starts(self) -> None:
        """Write every fit's starting values into ``init`` (on every core)."""
        self.start_plan.fill(self.fit_ds, self.fit_start, self.init)

    def start_in_place(self, on_starts: Callable[[], None] | None = None) -> None:
        """Draw the starts into ``init`` and ``params``, then call ``on_starts()`` if given.

        For the engines that fit ``params`` in place (CPU, one large dataset).
        """
        self.draw_starts()
        self.params[:] = self.init
        if on_starts is not None:
            on_starts()


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {low}; got {value!r}.")
    if value < low:
        raise ValueError(f"{name} must be >= {low}; got {name} = {value}.")
    if high is not None and value > high:
        raise ValueError(f"{name} must be at most {high}; got {name} = {value}.")
    return int(value)


def _check_dtype(dtype: Any) -> str:
    """``dtype`` as "float64" or "float32" (also given as a numpy type or dtype)."""
    name = dtype
    if dtype is None:  # (np.dtype(None) is float64: None would pass unseen)
        name = None
    elif not isinstance(dtype, str):
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = None
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {list(DTYPES)}.")
    return name


def _may_have_gpu() -> bool:
    """False only where no NVIDIA driver can be present: Linux without its device files.

    Lets ``backend="auto"`` choose the CPU without importing numba.cuda
    (about 0.6 s) on machines without a GPU; elsewhere the import decides.
    """
    if not sys.platform.startswith("linux") or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True
    return any(os.path.exists(p) for p in ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg"))


def resolve_backend(backend: str) -> str:
    """Turn "auto"/"cpu"/"cuda" into the engine that will run."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {list(BACKENDS)}.")
    if backend == "cpu" or (backend == "auto" and not _may_have_gpu()):
        return "cpu"
    from .engines import cuda as cuda_engine

    ok, found = cuda_engine.available()
    if ok:
        return "cuda"
    if backend == "cuda":
        raise ValueError(
            f"backend='cuda' needs a usable NVIDIA GPU, but {found}. "
            "Use backend='cpu' or backend='auto' to run on the CPU."
        )
    return "cpu"


def _with_devices(tuning: Tuning, devices: Any, engine: str) -> Tuning:
    """``tuning`` with ``cuda_devices`` from ``fit(devices=...)``; checked."""
    if devices is None:
        return tuning
    ok = (isinstance(devices, (Sequence, np.ndarray)) and not isinstance(devices, (str, bytes))
          and len(devices) > 0
          and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
                  for d in devices)
          and len(set(int(d) for d in devices)) == len(devices))
    if not ok:
        raise ValueError(f"devices must be a non-empty list of distinct GPU ids (0, 1, ...); "
                         f"got devices = {devices!r}.")
    if engine != "cuda":
        raise ValueError(f"devices = {list(devices)!r} picks GPUs, but this call runs on the "
                         "CPU; pass backend='cuda', or leave devices out.")
    return dataclasses.replace(tuning, cuda_devices=tuple(int(d) for d in devices))


def _read(fam, datasets: Any, M: int | None, dtype: str, tuning: Tuning, dataset_col: str,
          value_col: Any, options: dict) -> tuple[list, Any]:
    """The family's ``(identifier, data)`` pairs and the model of ``M`` components (with
    ``tuning``) for them; a ValueError if the family has no ``dtype``."""
    pairs = fam.read(datasets, dataset_col, value_col, options)
    return pairs, _model(fam, pairs, M, dtype, tuning, options)


def _model(fam, pairs: list, M: int | None, dtype: str, tuning: Tuning, options: dict) -> Any:
    """The family's model of ``M`` components and these options, with ``tuning``."""
    model = fam.model(pairs, M, options)
    extra = {"range_dtype": dtype} if hasattr(model, "range_dtype") else {}
    model = dataclasses.replace(model, tuning=tuning, **extra)
    if dtype not in model.dtypes:
        raise ValueError(f"dtype={dtype!r} is not available for the {fam.name!r} family; use "
                         f"one of {list(model.dtypes)}.")
    return model


def _value_cols(fam, datasets: Any, dataset_col: str, value_col: Any, weights: Any) -> Any:
    """``value_col``, less a DataFrame's weight column where a vector family would read every
    column but ``dataset_col`` (no column is called "value")."""
    import pandas as pd

    if (isinstance(weights, str) and getattr(fam, "ndim", 1) == 2 and value_col == "value"
            and isinstance(datasets, pd.DataFrame) and "value" not in datasets.columns):
        return [c for c in datasets.columns if c not in (dataset_col, weights)]
    return value_col


def _weighted(fam, fitted: list, pairs: Any, weights: Any, datasets: Any,
              dataset_col: str) -> tuple[list, Any]:
    """The models weighted and the datasets with their weights attached (each model's
    ``with_weights``); a ValueError for a family without weights."""
    if not all(m.weight_unit for m in fitted):
        raise ValueError(f"the {fam.name!r} family takes no weights (weights= is for the "
                         "mixtures, per value; hmm, per sequence; tmap, per run; ar and "
                         "local_level, per series): leave weights out.")
    return ([m.with_weights() for m in fitted],
            fitted[0].attach_weights(pairs, weights, datasets, dataset_col))


def _is_list(value: Any) -> bool:
    """A list, tuple, range or 1-D array (a grid of sizes), not a string or a scalar."""
    return (isinstance(value, (list, tuple, range))
            or (isinstance(value, np.ndarray) and value.ndim == 1))


def grid_sizes(fam, n_components: Any, options: dict) -> tuple[str, list] | None:
    """The sizes of a grid fit: ``(label, [(size, n_components, options), ...])``, or None
    for one size.

    A list of ``n_components`` (mixtures, HMMs, TMAPs), of AR ``order`` or of TMAP
    ``orders`` (a list of tuples); a size is the list's entry (a tuple for ``orders``).
    """
    orders = options.get("orders")
    grids = {"n_components": _is_list(n_components),
             "order": fam.name == "ar" and _is_list(options.get("order")),
             "orders": (fam.name == "tmap" and _is_list(orders) and len(orders) > 0
                        and all(_is_list(o) for o in orders))}
    named = [k for k, v in grids.items() if v]
    if not named:
        return None
    if len(named) > 1:
        raise ValueError(f"a grid over one size at a time: got lists for {named}; give one "
                         "of them a list and the other a single value.")
    label = named[0]
    if label == "n_components" and fam.name in ("ar", "local_level"):
        raise ValueError(f"n_components is not used by the {fam.name!r} family; for a grid of "
                         "AR orders pass order=[1, 2, 3].")
    given = list(n_components if label == "n_components" else options[label])
    if not given:
        raise ValueError(f"{label} is an empty list; give at least one size.")
    sizes = []
    for k in given:
        if label == "orders":
            size = tuple(int(r) if isinstance(r, numbers.Integral) and not isinstance(r, bool)
                         else r for r in k)
            sizes.append((size, None if n_components is None else n_components,
                          {**options, "orders": size}))
        else:
            size = _check_int(f"each entry of {label}", k.item() if isinstance(k, np.generic)
                              else k, 1)
            sizes.append((size, size, options) if label == "n_components"
                         else (size, n_components, {**options, "order": size}))
    keys = [s for s, _, _ in sizes]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{label} = {given!r} repeats a size; give each size once.")
    return label, sizes


def fit(
    datasets: Any,
    family: str = "invgauss",
    n_components: int | None = None,
    n_starts: int = 10,
    max_iter: int | None = None,
    tol: float | None = None,
    seed: int | None = None,
    backend: str = "auto",
    dtype: str = "float64",
    init: Mapping | None = None,
    strict: bool = False,
    progress: bool | Callable[[int, int], None] | None = None,
    dataset_col: str = "dataset",
    value_col: str | Sequence[str] = "value",
    reg_covar: float = 1e-6,
    init_method: str | None = None,
    tuning: Tuning | None = None,
    se: bool = False,
    criterion: str = "bic",
    bootstrap: int = 0,
    bootstrap_level: float = 0.95,
    reorder: bool = True,
    trace: bool = False,
    accel: bool | None = None,
    rtol: float | None = None,
    devices: Sequence[int] | None = None,
    weights: Any = None,
    **options: Any,
) -> FitResult:
    """Fit a mixture, HMM, TMAP or state-space model by EM to every dataset, from many starts each.

    Parameters
    ----------
    datasets : list of array-like, dict, array-like, pandas.DataFrame or pyarrow data
        A list of 1-D arrays, a dict name -> array, one 1-D array (one
        dataset), a long DataFrame (or a ``pyarrow.Table``) with columns ``dataset_col``
        and ``value_col`` (datasets in order of first appearance, read by column), or a
        ``pyarrow`` list array (``ListArray``, ``LargeListArray``, chunked: a dataset per
        list, a null list an empty one).  For ``family="gaussian"`` each dataset is a 2-D array
        of shape ``(n_obs, n_dims)`` (1-D data is ``n_dims = 1``; one 3-D
        array is a stack of datasets), and a DataFrame has the dataset column
        and one column per dimension (all columns but ``dataset_col`` unless
        ``value_col`` lists them).  Every dataset of a batch has the same
        ``n_dims``.  Dataset identifiers in the tables are the list
        positions, dict keys or DataFrame labels.
    family : {"invgauss", "gaussian", "poisson", "negbinom", "lognormal", "gamma", "hmm", \
"tmap", "ar", "local_level"}
        Component distribution: inverse-Gaussian (positive scalars),
        Gaussian with a diagonal covariance matrix (vectors), Poisson
        (counts: 0, 1, 2, ...; parameters weight, rate), negative binomial (overdispersed
        counts; weight, size, mu: R's ``dnbinom(x, size, mu = mu)``, variance
        ``mu + mu^2 / size``) or log-normal
        (positive scalars; weight, meanlog, varlog: the mean and variance of
        log x, ``reg_covar`` the floor of varlog) or gamma (positive scalars;
        weight, shape, rate); "hmm": hidden
        Markov models of sequences (a NaN step is missing, marginalised);
        "tmap": transient Markovian arrival
        processes with Erlang branches, fitted to traces of runs (options
        ``orders``, ``run_col``, ``drop_bad_runs``; see
        :mod:`bulkem.models.tmap`); "ar": AR(p) plus noise (option
        ``order``), "local_level": a random walk plus noise, fitted to
        series (option ``series_col``; see :mod:`bulkem.models.ssm`).
        The local level's option ``prior`` is the first level's prior:
        ``"fitted"`` (default) ``N(level0, state_var)`` with ``level0`` a
        parameter, whose log-likelihood is statsmodels'
        ``initialize_known(level0, state_var)`` with ``loglikelihood_burn=0``;
        or ``"diffuse"``, a flat prior and no ``level0``: the exact diffuse
        log-likelihood of Durbin and Koopman with every term kept (the first
        observed step adds ``-log(2 pi) / 2``, leading missing steps drop out),
        statsmodels' ``UnobservedComponents(y, "llevel",
        use_exact_diffuse=True)``, whose ``loglikelihood_burn`` is then 0.
        statsmodels' default ``UnobservedComponents(y, "llevel")`` is
        neither: an approximate diffuse prior ``N(0, 1e6)`` and the first
        observation burnt (``loglikelihood_burn = 1``, its term dropped);
        for the Nile data its maximum is -632.538, the exact diffuse one
        -633.465 (see :mod:`bulkem.models.ssm.em`).  A flat prior has no
        draws: ``bootstrap`` replicates start each series at its smoothed
        level at its first observed step.
    n_components : int or list of int, optional
        Mixture components or hidden states ``M`` (default 2); for
        ``family="tmap"`` the number of Erlang branches, ``len(orders)`` by
        default; not used by "ar" and "local_level".  A list (or range) is a
        grid of sizes, as is a list of AR orders (``order=[1, 2, 3]``) or of
        TMAP branch orders (``orders=[(1, 2), (1, 1, 2)]``): every size is
        fitted from the same seed (each size's fits are those of a call with
        that size alone), ``FitResult.selection`` has one row per (dataset,
        size) with its criteria, and the usual tables hold each dataset's
        chosen size (``criterion``); ``FitResult.for_size(k)`` gives any size.
        On the CPU the mixtures' grid runs one kernel for every size
        (``Tuning(cpu_sizes="run-time")``, unless ``tuning`` is given); on the GPU every
        size's fits run in one run of the scheduler (a kernel per size, their chunks on
        the same streams).
    n_starts : int, default 10
        Starts per dataset: the rows of ``init`` first, then random starts
        drawn by ``init_method``.
    max_iter : int or None, default None
        Most M-steps per start (passes over the data, with ``accel``); None: the family's
        default, 100 for the mixtures, HMMs and TMAPs, 500 for the state-space families
        (accelerated, 99% of AR(3) fits of 500 steps end within 500 passes; 78% within
        100).  ``max_iter=0`` with ``init`` makes a result of the given
        parameters, unfitted (status ``max_iter``, their log-likelihood): its methods
        (``predict_proba``, ``decode``, ``score``, ``sample``...) then use a published or
        hand-made model (``reorder=False`` keeps its components in the given order).
    tol : float or None, default None (1e-6)
        A start has converged when its log-likelihood (the dataset's total, not a mean per
        observation) changes by less than ``tol`` between passes: an absolute change, as
        mixtools' ``epsilon`` and hmmlearn's ``tol``.  A dataset whose log-likelihood is
        large (a million observations: about 1e6) needs a larger ``tol``, as float64
        resolves about 1e-16 of it: or ``rtol``.  ``tol=0`` runs exactly ``max_iter``.
    rtol : float, optional
        Instead of ``tol``, a relative rule: a start has converged when ``|L_k - L_{k-1}| <
        rtol * |L_{k-1}|`` (``L_k`` its log-likelihood after ``k`` passes), the same rule
        for a dataset of 100 values and one of a million (e.g. ``rtol=1e-10``).  Give
        ``tol`` or ``rtol``, not both.
    seed : int or None
        Seed of the random starts.  A start is determined by (seed, dataset
        values, start number) alone.  None draws a seed, recorded in
        ``FitResult.seed``.
    backend : {"auto", "cpu", "cuda"}
        "auto" uses a usable GPU when there is one, else the CPU.
    devices : list of int, optional
        The GPUs to use (ids 0, 1, ...; default: every visible one): the bulk fits are
        spread over them; the one-fit-at-a-time engines (wide, large, many states) run on
        the first.  Only with the CUDA engine.
    dtype : {"float64", "float32"}
        Precision of the per-observation math; sums are always float64.
        With "float32", each returned log-likelihood is computed in float64
        at the returned parameters, and a start that float32 would stop as
        degenerate (a collapsing component, a falling likelihood) is fitted
        again in float64 from the same start.
    init : dict, optional
        User starting values, for ``k`` starts or one (leading axis left
        out): ``{"weight": (k, M), "mu": (k, M), "lambda": (k, M)}`` for
        the inverse-Gaussian family, ``{"weight": (k, M), "mean": (k, M, D),
        "var": (k, M, D)}`` for the Gaussian family.  ``FitResult.params``
        returns this form, so a fit can seed another.
    strict : bool, default False
        Raise on the first invalid dataset instead of reporting it.
    progress : bool, callable or None
        A progress bar (True), none (False), a bar for large batches on a
        terminal (None), or ``progress(done, total)`` called per chunk.
    dataset_col : str
        Column naming the dataset of each row, for DataFrame input.
    value_col : str or list of str
        Value column(s), for DataFrame input.  The Gaussian family takes all
        columns but ``dataset_col`` (and a ``weights`` column) when no column is called
        "value".
    weights : str, list, dict or array-like, optional
        A frequency or survey weight >= 0 per unit of the data: per value for the mixture
        families, per sequence for "hmm", per run for "tmap", per series for "ar" and
        "local_level".  In the datasets' form with a weight in place of each unit: a list
        with one entry per dataset (an array of its values' weights; of one weight per
        sequence, run or series, or a number for a dataset of one), a dict with the
        datasets' keys, one array for one dataset; or the name of a column of a long
        DataFrame (for sequences, runs and series the same on every row of one; a Gaussian
        HMM read from a frame without a "value" column then needs ``value_col=``).  A
        unit's log-likelihood and its share of the sufficient statistics count ``weight``
        times: integer weights fit as repeated units would, a weight of 0 leaves the unit
        out, and BIC counts the weighted number of observations (``summary.sum_weights``).
        The random starts draw as if unweighted.  A dataset with a NaN, infinite or
        negative weight is ``invalid_data``.  Weighted mixtures always take the exact
        E-step (a log per value), and on the GPU the bulk engine; a weighted HMM of more
        than ``Tuning.hmm_many_states`` states runs on the GPU's bulk kernel.  With
        ``checkpoint=`` in any of these forms (each chunk gets its datasets' weights); with
        Dask and streamed files as a column's name; not with ``bootstrap=``.
    reg_covar : float, default 1e-6
        Gaussian family: added to every variance in each M-step (as in
        scikit-learn), so that no component shrinks onto a single point.
        Ignored by the inverse-Gaussian family.  The Gaussian family's option
        ``covariance_type`` is ``"diag"`` (default: ``var`` per dimension),
        ``"full"`` (``cov``: each component's lower triangle, row by row),
        ``"tied"`` (one covariance matrix shared by the components: ``cov`` as for
        ``"full"``, every component's row holding it, counted once in the
        free parameters; an ``init["cov"]`` repeats it) or ``"spherical"``
        (one ``var`` per component), as scikit-learn's ``GaussianMixture``.
    init_method : {"subset", "kmeans++"} or None
        How random starts are drawn, each determined by (seed, dataset
        values, start number) alone.  "subset": each component starts from
        the moments of 3 observations drawn without replacement.
        "kmeans++" (Gaussian family only): means at k-means++ seeds (each
        next centre drawn with probability proportional to the squared
        distance to the nearest one so far), variances of the observations
        nearest each centre, equal weights; a dataset of more than 1,024
        observations (32 per component if more) is seeded from a random
        sample of that many (``Tuning.kmeans_sample_obs``).  None: the
        family's default, "subset" for "invgauss" and "kmeans++" for
        "gaussian" (the seeding scikit-learn users expect).
    tuning : bulkem.tuning.Tuning, optional
        Block sizes, thresholds and other tunable numbers (:class:`bulkem.tuning.Tuning`;
        None: the measured defaults).  They change speed and the order of sums, not
        the model: tests pass small blocks so that tiny inputs span several.
    se : bool, default False
        Also the standard errors of every fitted dataset's best parameters, from the
        observed information (:mod:`bulkem.fitting.information`): an ``se_`` column beside
        each parameter of ``components`` (``se`` for the state-space models' long table) and
        of ``transitions``, and ``FitResult.cov(d)``. NaN, with a note in
        ``summary.message``, where a parameter lies on its constraint's boundary or the
        information is not positive definite. They cost ``2 P`` E-steps per dataset for
        ``P`` free parameters where the model has a score (Fisher's identity: every mixture
        family and the hidden Markov models), else ``1 + 2 P + P (P - 1) / 2``
        log-likelihoods (TMAP, the state-space models).
    bootstrap : int, default 0
        ``B`` datasets drawn from each fitted dataset's best fit (its size each: values,
        sequence or series lengths and missing steps, runs), refitted in one batch from
        ``n_starts`` random starts with the same settings; percentile intervals of every
        parameter in an ``intervals`` table (``FitResult.intervals``).  Costs ``B`` times
        the fit.
    bootstrap_level : float, default 0.95
        Coverage of the bootstrap intervals: the ``(1 - level) / 2`` and ``(1 + level) /
        2`` quantiles of the refitted parameters.
    trace : bool, default False
        Keep every start's log-likelihood after each iteration: a ``trace`` table, one row
        per (dataset, start, iteration): ``iteration`` (M-steps done, from 0) and
        ``loglik``, for convergence plots; ``n_fits x (max_iter + 1)`` numbers of
        memory.
    accel : bool or None, default None
        Accelerate EM by SQUAREM (Varadhan and Roland 2008): after every two EM steps, an
        extrapolation along them, kept only where the log-likelihood does not fall (so it
        never falls between kept steps, as in plain EM) and the parameters stay feasible;
        the same maxima as plain EM in fewer passes over the data where EM is slow (HMMs,
        state-space models, overlapping mixtures).  ``n_iter`` and ``max_iter`` then count
        passes (E-steps), an extrapolation not kept included.  None: the family's default
        (``accel_default`` of its model: on for every family, measured to help each,
        ``benchmarks/bench_accel.py``; ``accel=False`` for plain EM, as hmmlearn's and
        mixtools' iterations).  Plain EM, on both engines, for the ``large`` strategy (a
        few big mixture datasets) and HMMs of more than ``Tuning.hmm_many_states``
        states, whose GPU engines have no accelerator yet.
    reorder : bool, default True
        Number each best fit's components, states or branches in the family's canonical
        order (by location); False keeps the order the fit holds them in, that of ``init``
        for a fit from given starting values.
    criterion : {"bic", "aic", "icl"}, default "bic"
        How a grid of sizes chooses each dataset's size: the smallest value among the sizes
        with a usable fit (the smaller size on a tie).  "icl" (mixtures and HMMs) is the BIC
        plus twice the entropy of the posterior component (state) probabilities.

    Returns
    -------
    FitResult
        Tables ``summary``, ``components``, ``starts`` and ``start_values``; with
        ``bootstrap`` also ``intervals``; with a grid of sizes also ``selection``, and the
        chosen size in a ``summary`` column named as the grid (``n_components``, ``order``
        or ``orders``).

    Raises
    ------
    ValueError, TypeError
        On bad arguments, at once; on invalid datasets only when ``strict``.
    MemoryError
        Before any fit, when the batch's results or an engine's buffers would not fit in the
        memory available (the message says how much is needed and what to do).
    """
    t0 = time.perf_counter()
    fam = models.get(family)
    grid = grid_sizes(fam, n_components, options)
    if grid is None:
        M = (getattr(fam, "default_n_components", 2) if n_components is None
             else _check_int("n_components", n_components, 1))
        label, sizes = "n_components", [(M, M, options)]
    else:
        label, sizes = grid
    n_starts = _check_int("n_starts", n_starts, 1)
    if max_iter is not None:
        max_iter = _check_int("max_iter", max_iter, 0)
    if tol is not None and rtol is not None:
        raise ValueError(f"tol = {tol!r} and rtol = {rtol!r}: give tol (the absolute change "
                         "of the log-likelihood that stops a start) or rtol (the relative "
                         "one), not both.")
    if rtol is not None:
        if (isinstance(rtol, bool) or not isinstance(rtol, numbers.Real)
                or not 0 < rtol < np.inf):
            raise ValueError(f"rtol must be a finite number > 0 (e.g. 1e-10); got rtol = "
                             f"{rtol!r}.")
        tol = -float(rtol)  # (the engines' encoding of the relative rule: make_stop)
    elif tol is None:
        tol = 1e-6
    elif isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol >= 0:
        raise ValueError(f"tol must be a number >= 0; got tol = {tol!r}.")
    if not np.isfinite(tol):
        raise ValueError(f"tol must be finite; got tol = {tol!r}.")
    dtype = _check_dtype(dtype)
    if tuning is None and grid is not None:  # one CPU mixture kernel for every size
        tuning = Tuning(cpu_sizes="run-time")
    engine = resolve_backend(backend)
    tuning = _with_devices(check_tuning(tuning), devices, engine)
    for name, flag in (("se", se), ("strict", strict), ("reorder", reorder), ("trace", trace),
                       ("accel", True if accel is None else accel)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False; got {name} = {flag!r}.")
    if not (progress is None or isinstance(progress, (bool, np.bool_)) or callable(progress)):
        raise TypeError(f"progress must be True, False, None or a callable progress(done, "
                        f"total); got progress = {progress!r}.")
    if (isinstance(reg_covar, bool) or not isinstance(reg_covar, numbers.Real)
            or not 0 <= reg_covar < np.inf):
        raise ValueError(f"reg_covar must be a finite number >= 0; got reg_covar = {reg_covar!r}.")
    if criterion not in CRITERIA:
        raise ValueError(f"unknown criterion {criterion!r}; expected one of {list(CRITERIA)}.")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
    else:
        seed = _check_int("seed", seed, 0, 2**64 - 1)  # (the starts use it modulo 2^64)
    bootstrap = _check_int("bootstrap", bootstrap, 0)
    if (isinstance(bootstrap_level, bool) or not isinstance(bootstrap_level, numbers.Real)
            or not 0 < bootstrap_level < 1):
        raise ValueError(f"bootstrap_level must be a number between 0 and 1 (the intervals' "
                         f"coverage, e.g. 0.95); got bootstrap_level = {bootstrap_level!r}.")
    if bootstrap and grid is not None:
        raise ValueError(f"bootstrap= with a grid of sizes ({label} = "
                         f"{[s for s, _, _ in sizes]}): bootstrap the size chosen, fitted alone.")
    if len(sizes) > 1 and init is not None:
        raise ValueError(f"init= with a grid of sizes ({label} = {[s for s, _, _ in sizes]}): "
                         "starting values have one size; fit that size on its own with init=.")
    value_col = _value_cols(fam, datasets, dataset_col, value_col, weights)
    pairs = fam.read(datasets, dataset_col, value_col, sizes[0][2])
    fitted = [_model(fam, pairs, m, dtype, tuning, opts) for _, m, opts in sizes]  # all checked
    if weights is not None:
        fitted, pairs = _weighted(fam, fitted, pairs, weights, datasets, dataset_col)
        if bootstrap:
            raise ValueError("bootstrap= with weights=: the bootstrap's samples are unweighted "
                             "draws of each dataset's size; use se=True for standard errors "
                             "of a weighted fit.")
    if bootstrap and not result_class(fitted[0]).can_resample:
        raise ValueError(f"bootstrap= needs a sampler of the fitted model; the {fam.name!r} "
                         "family has none: leave bootstrap out, or use se=True for standard "
                         "errors.")
    if criterion == "icl" and not result_class(fitted[0]).has_icl:
        raise ValueError(f"criterion='icl' needs the posterior probabilities of a mixture or "
                         f"HMM; the {fam.name!r} family has none: use 'bic' or 'aic'.")
    if max_iter is None:
        max_iter = fitted[0].default_max_iter
    if init_method is None:
        init_method = fitted[0].default_init
    if not isinstance(init_method, str) or init_method not in starts.INIT_METHODS:
        raise ValueError(
            f"unknown init_method {init_method!r}; expected one of {list(starts.INIT_METHODS)}."
        )
    if init_method not in fitted[0].init_methods:
        raise ValueError(
            f"init_method={init_method!r} is not available for the {fam.name!r} family; "
            f"use one of {list(fitted[0].init_methods)}."
        )
    user = None
    if init is not None:
        user = fitted[0].user_starts(init)
        if len(user) > n_starts:
            raise ValueError(
                f"init gives {len(user)} starts but n_starts = {n_starts}; "
                f"set n_starts >= {len(user)}."
            )
    settings = dict(n_starts=n_starts, seed=seed, dtype=dtype, max_iter=max_iter, tol=float(tol),
                    init_method=init_method, reg_covar=float(reg_covar),
                    engine=engine, progress=progress, t0=t0,
                    reorder=bool(reorder),
                    accel=(fitted[0].accel_default if accel is None else bool(accel)))
    results = dict(zip([size for size, _, _ in sizes],
                       _fit_models(fitted, pairs, user=user, strict=bool(strict), se=bool(se),
                                   trace=bool(trace), **settings), strict=True))
    if grid is None:
        result = results[sizes[0][0]]
        if bootstrap:  # the refits: fresh starts, nothing but their parameters kept
            boot = {**settings, "user": None, "strict": False, "se": False, "trace": False}
            bootstrap_intervals(result, fitted[0], bootstrap, float(bootstrap_level), boot)
            result.elapsed = time.perf_counter() - t0
    else:
        from .result.selection import choose

        result = choose(results, label, criterion, time.perf_counter() - t0)
    status = result.summary["status"]
    n_bad = int((status == "invalid_data").sum())
    if n_bad:
        warnings.warn(
            f"{n_bad} of {len(status)} datasets are invalid and were not fitted; "
            "see summary.status and summary.message.",
            stacklevel=2,
        )
    n_failed = int((status == "failed").sum())
    if n_failed:
        warnings.warn(
            f"{n_failed} of {len(result.summary)} datasets have no usable start (status "
            f"'failed'){' at any size' if len(results) > 1 else ''}; try more starts or fewer "
            "components.",
            stacklevel=2,
        )
    return result


def _fit_model(model, pairs: list, **settings: Any) -> FitResult:
    """Pack the datasets for ``model``, fit every (dataset, start) and build the tables
    (:func:`_fit_models` of one model)."""
    return _fit_models([model], pairs, **settings)[0]


def _fit_models(models: list, pairs: list, *, n_starts: int, seed: int, user: Any, dtype: str,
                max_iter: int, tol: float, init_method: str, reg_covar: float, engine: str,
                strict: bool, progress: Any, se: bool, t0: float, reorder: bool,
                trace: bool, accel: bool = False) -> list[FitResult]:
    """Pack the datasets for each model (a grid's sizes), fit every (dataset, start) of every
    one in one engine run (:func:`bulkem.engines.select.run_jobs`) and build each one's
    tables."""
    made = []
    for model in models:
        packed = model.pack(pairs)
        n_bad = len(packed.ids) - len(packed.valid)
        if n_bad and strict:
            first = next(m for m in packed.messages if m is not None)
            raise ValueError(f"{n_bad} invalid dataset(s) with strict=True; first: {first}.")
        job = make_job(model, packed, n_starts, seed, user, np.dtype(dtype), max_iter, tol,
                       init_method, reg_covar)
        job.reorder = reorder
        job.accel = int(accel)
        if trace:
            job.trace = np.full((len(job.fit_ds), max_iter + 1), np.nan)
        made.append((model, packed, job, result_class(model), {}))
    bar = Progress(progress, sum(len(job.fit_ds) for _, _, job, _, _ in made))
    compiled = {(model.key, engine, np.dtype(dtype).name) for model in models}
    if compiled - _COMPILED:  # first use in this process: kernels compiled or loaded
        bar.phase("compiling kernels, first use; kept on disk for the next run")
        _COMPILED.update(compiled)

    def on_starts(model, packed, job, tables, early) -> Callable[[], None]:
        # while the GPU runs: what the tables need of the starts only
        return lambda: early.update(tables.before_fits(model, packed, job, n_starts))

    results = []
    try:
        for _, packed, _, _, _ in made:
            if se:  # the standard errors' job reads the fit's kernel arrays again
                packed.data.kernel_cache = {}
        try:
            select.run_jobs([m[2] for m in made], engine, bar, [on_starts(*m) for m in made])
        finally:
            bar.close()
        for model, packed, job, tables, early in made:
            result = tables.assemble(model, packed, job, n_starts, seed, engine, dtype,
                                     time.perf_counter() - t0, early or None)
            if trace:
                result.tables["trace"] = _trace_table(result, job)
            if se:
                standard_errors(result, engine, reg_covar)
            results.append(result)
    finally:
        for _, packed, _, _, _ in made:
            packed.data.kernel_cache = None  # (the kernel arrays: not kept with the result)
    return results


def loglik(
    datasets: Any,
    family: str = "invgauss",
    params: Mapping | Sequence[Mapping] | None = None,
    n_components: int | None = None,
    backend: str = "auto",
    dtype: str = "float64",
    dataset_col: str = "dataset",
    value_col: str | Sequence[str] = "value",
    tuning: Tuning | None = None,
    weights: Any = None,
    **options: Any,
) -> pd.DataFrame:
    """Log-likelihood of every dataset at given parameters, without fitting.

    The same engines as :func:`fit` run one E-step per dataset (an EM job with no M-step):
    a published fit, a fit to other data or hand-made values are scored on many datasets
    at once.

    Parameters
    ----------
    datasets
        As for :func:`fit` (the family's input forms); checked as :func:`fit` checks them.
    family : str
        A family of :func:`fit` (``invgauss``, ``gaussian``, ``poisson``, ``negbinom``,
        ``lognormal``, ``gamma``, ``hmm``, ``tmap``, ``ar``, ``local_level``), with its options
        (``emission=``, ``orders=``, ``order=``, ``prior=``...), or ``state_space``: a
        linear-Gaussian state-space model of given matrices (``params`` a
        :class:`~bulkem.StateSpace` or its blocks ``F, H, Q, R, m0, P0``; a dataset is one
        series; options ``method=`` "exact", "scan" or "splash", ``window=``,
        ``splash_var=``, ``dim_obs=``; :func:`kalman_loglik` gives its table by series).
    params : dict or sequence of dict
        The parameters by block name, in the form ``fit(init=...)`` takes and
        ``FitResult.params(d)`` returns (e.g. ``{"weight": ..., "mu": ..., "lambda": ...}``):
        one dict for every dataset, one per dataset in input order, or one dict whose
        arrays have a leading axis of one entry per dataset.
    n_components : int, optional
        Components or states; by default the length of the last axis of the first block of
        ``params`` (``weight``, ``startprob``).
    backend, dtype, dataset_col, value_col, tuning, weights
        As for :func:`fit`; the returned log-likelihood is float64 at these parameters
        whatever the compute dtype (with ``weights``, the weighted sum of the values' log
        densities, or of the sequences', runs' or series' log-likelihoods).

    Returns
    -------
    pandas.DataFrame
        One row per dataset, in input order: ``dataset``, ``n_obs``, ``loglik``,
        ``status`` (``ok``; ``invalid_data``: never evaluated; ``failed``: the
        log-likelihood is not finite, or the parameters are unusable for these data) and
        ``message`` (why, for the last two).

    Examples
    --------
    >>> import numpy as np, bulkem
    >>> x = [np.random.default_rng(k).wald(1.0, 2.0, 200) for k in range(3)]
    >>> p = {"weight": [0.5, 0.5], "mu": [0.8, 1.5], "lambda": [2.0, 2.0]}
    >>> bulkem.loglik(x, "invgauss", p, backend="cpu").status.tolist()
    ['ok', 'ok', 'ok']
    """
    import pandas as pd

    from .result.base import status_messages
    from .tuning import MAX_ITER

    fam = models.get(family, evaluated=True)
    if isinstance(params, Mapping):
        given = [params]
    elif isinstance(params, Sequence) and not isinstance(params, str) and params and all(
            isinstance(p, Mapping) for p in params):
        given = list(params)
    else:
        raise TypeError(f"params must be a dict of parameter blocks (the form fit(init=...) "
                        f"takes), or a list of such dicts, one per dataset; got "
                        f"{type(params).__name__}.")
    if n_components is None:  # the first block's last axis (weight, startprob: per component)
        first = np.shape(next(iter(given[0].values()), None))
        n_components = first[-1] if first else getattr(fam, "default_n_components", 2)
    M = _check_int("n_components", n_components, 1)
    dtype = _check_dtype(dtype)
    tuning = check_tuning(tuning)
    value_col = _value_cols(fam, datasets, dataset_col, value_col, weights)
    pairs, model = _read(fam, datasets, M, dtype, tuning, dataset_col, value_col, options)
    if weights is not None:
        (model,), pairs = _weighted(fam, [model], pairs, weights, datasets, dataset_col)
    if len(given) not in (1, len(pairs)):
        raise ValueError(f"params gives {len(given)} parameter sets for {len(pairs)} datasets; "
                         "expected one for all datasets or one per dataset.")
    if len(given) > 1:  # one parameter set per dataset: checked as the starts of one fit
        keys = list(given[0])
        if any(list(p) != keys for p in given):
            raise ValueError(f"params: every dict must have the keys {keys} (in that order); "
                             "found one with others.")
        try:
            given = [{k: np.stack([np.asarray(p[k], dtype=np.float64) for p in given])
                      for k in keys}]
        except ValueError as err:
            raise ValueError(f"params: the dicts' arrays differ in shape ({err}); each block "
                             "has one shape for every dataset.") from None
    rows = model.user_starts(given[0])
    if len(rows) not in (1, len(pairs)):
        raise ValueError(f"params holds {len(rows)} parameter sets (a leading axis of "
                         f"{len(rows)}) for {len(pairs)} datasets; expected one set for all "
                         "datasets or one per dataset.")
    engine = resolve_backend(backend)
    packed = model.pack(pairs)
    n_bad = len(packed.ids) - len(packed.valid)
    if n_bad:
        warnings.warn(f"{n_bad} of {len(packed.ids)} datasets are invalid and were not "
                      "evaluated; see the status and message columns.", stacklevel=2)
    given_rows = rows[packed.valid] if len(rows) == len(pairs) > 1 else rows[:1]
    job = evaluate(model, packed, given_rows[:, None], engine, np.dtype(dtype))
    n = len(packed.ids)
    ll = np.full(n, np.nan)
    status = np.array(["ok" if m is None else "invalid_data" for m in packed.messages],
                      dtype=object)
    message = np.array(["" if m is None else m for m in packed.messages], dtype=object)
    reasons = status_messages(model)
    for j, i in enumerate(packed.valid):
        if job.status[j] == MAX_ITER and np.isfinite(job.loglik[j]):
            ll[i] = job.loglik[j]
        else:
            status[i] = "failed"
            message[i] = (reasons.get(int(job.status[j]), "")
                          or "the log-likelihood is not a finite number")
            if job.stopped_at is not None and job.stopped_at[j] >= 0:
                message[i] += f" (time step {int(job.stopped_at[j])}, 0-based)"
    return pd.DataFrame({"dataset": packed.ids, "n_obs": packed.n_obs, "loglik": ll,
                         "status": status, "message": message})


def kalman_loglik(
    series: Any,
    model: StateSpace | Sequence[StateSpace],
    method: str = "exact",
    window: int | None = None,
    backend: str = "auto",
    dtype: str = "float64",
    report_error: bool = False,
    *,
    splash_var: float | None = None,
    series_col: str = "series",
    value_col: str | Sequence[str] | None = "value",
    tuning: Tuning | None = None,
    devices: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Log marginal likelihood ``log p(y_1, ..., y_T)`` of every series under its model.

    :func:`loglik` with ``family="state_space"``, one series per dataset, with the table
    and messages of a Kalman filter: the engines run

    * ``"exact"``: the sequential Kalman filter, many series at once (a series per CPU
      task or per GPU thread, as cuML's batched Kalman kernel).  Series of one model
      without missing values share the covariance recursion, which does not depend on
      the data: it runs once and each series then runs only the mean recursion (the same
      arithmetic, so the same numbers).
    * ``"scan"``: the exact filter made parallel over time by an associative scan
      (Saerkkae and Garcia-Fernandez 2021), for long series; a batch of one model without
      missing rows runs the steady-state scan (``models/ssm/scan.py``).
    * ``"splash"``: the approximation of Lin, Moore and Russell, each step's predictive
      density from the last ``window`` observations only, started from a broad prior;
      every step in parallel.

    Parameters
    ----------
    series : list of array-like, dict, array-like or pandas.DataFrame
        A list of arrays, a dict name -> array, one array (one series), or a
        long DataFrame with a ``series_col`` column and the value column(s).
        A series is a 1-D array of ``T`` values for a model with
        ``dim_obs = 1``, else an array of shape ``(T, dim_obs)`` (one 3-D
        array is a stack of equal-length series).  Series may have different
        lengths.  NaN marks a missing observation: its update is skipped.
        With ``dim_obs > 1`` a time step with any NaN is missing as a whole
        (its other values are ignored).
    model : StateSpace or sequence of StateSpace
        One model for every series, or one per series (same dimensions, in
        the order of ``series``).  A model with diffuse states
        (``StateSpace(..., diffuse=True)``; the same ones for every model) gives the
        exact diffuse log-likelihood of Durbin and Koopman, statsmodels'
        ``initialization="diffuse"`` with ``loglikelihood_burn=0``: the diffuse
        phase (a step or a few per series) runs on the CPU, the rest of every
        series on the engine of ``method`` and ``backend``
        (:mod:`bulkem.models.ssm.diffuse`).
    method : {"exact", "scan", "splash"}
        "exact": the sequential filter, series in parallel.  "scan": the
        exact filter parallel over time (for few long series).  "splash":
        the paper's approximation, each step's predictive density from the
        last ``window`` observations only.
    window : int, optional
        Steps each splash predictive density looks at (``y_{t-window+1} ..
        y_t``); required by, and only used with, ``method="splash"``.
    backend : {"auto", "cpu", "cuda"}
        "auto" uses a usable GPU when there is one, else the CPU.
    dtype : {"float64", "float32"}
        Precision of the filter's arithmetic; log-likelihood terms are summed
        in float64.  float32 loses digits in the covariance recursion: expect
        relative differences around 1e-5 or worse for long or badly scaled
        series.
    report_error : bool, default False
        With ``method="splash"``, also compute the exact log-likelihood and
        report both and their difference.
    splash_var : float, optional
        Variance of the broad prior ``N(0, splash_var * I)`` that starts each
        splash window (default ``Tuning.kalman_splash_broad_var`` = 1e6);
        pick it much larger than the state's variance.
    series_col, value_col : str
        Column names for DataFrame input (``value_col=None``: every column
        but ``series_col``).
    tuning : bulkem.tuning.Tuning, optional
        Chunk sizes, threads per block and the splash prior's default variance
        (:class:`bulkem.tuning.Tuning`; None: the defaults).
    devices : list of int, optional
        The GPUs to use (default: every visible one); the series are split over them, in
        parts of about equal values (with the CUDA engine only).

    Returns
    -------
    pandas.DataFrame
        One row per series, in input order: ``series``, ``loglik``, ``n_obs``
        (observed time steps), ``status`` (``ok``, ``invalid_data``: never
        evaluated, or ``failed``: an innovation covariance ``H P H^T + R``
        was not positive definite, or the log-likelihood is not a finite
        number: data far outside the model's scale, whose log-likelihood
        is below the range of float numbers, give ``failed`` and say so,
        never ``ok`` with ``-inf``), ``message`` (why, for the last two);
        with ``report_error=True`` also ``exact_loglik`` and ``error =
        loglik - exact_loglik``.

    Raises
    ------
    ValueError, TypeError
        For bad arguments (unknown method, a model of other dimensions than
        the data, ...); a bad series only gets its own status.

    Examples
    --------
    >>> import numpy as np, bulkem
    >>> model = bulkem.StateSpace.ar([0.6, -0.2], sigma2=1.0, obs_var=0.5)
    >>> ys = [model.simulate(200, rng=k)[:, 0] for k in range(3)]
    >>> bulkem.kalman_loglik(ys, model, backend="cpu").status.tolist()
    ['ok', 'ok', 'ok']
    """
    from functools import partial

    import pandas as pd

    from .models.ssm import diffuse
    from .models.ssm.linear import STATE_SPACE_FAMILY, check_method
    from .models.ssm.plan import not_finite, not_positive_definite
    from .models.ssm.statespace import as_models
    from .tuning import MAX_ITER, NOT_POSITIVE_DEFINITE

    check_method(method, window, splash_var)
    dtype = _check_dtype(dtype)
    if report_error and method != "splash":
        raise ValueError(f"report_error=True reports the error of method='splash'; got "
                         f"method={method!r}, which is exact.")
    models_, one = as_models(model)
    mask = diffuse.common_mask(models_)  # exact diffuse states: their phase, then the engines
    run = evaluate if mask is None else partial(diffuse.evaluate, mask=mask, run=evaluate)
    options = {"method": method, "window": window, "splash_var": splash_var,
               "dim_obs": models_[0].dim_obs}
    engine = resolve_backend(backend)
    pairs, lg = _read(STATE_SPACE_FAMILY, series, models_[0].dim_state, dtype,
                      _with_devices(check_tuning(tuning), devices, engine), series_col,
                      value_col, options)
    if not one and len(models_) != len(pairs):
        raise ValueError(f"{len(models_)} models for {len(pairs)} series; expected one model "
                         "for all series or one per series.")
    packed = lg.pack(pairs)
    rows = lg.rows(models_)
    valid = packed.valid
    params = (rows[:1] if one else rows[valid])[:, None]
    n = len(pairs)
    ll, exact_ll = np.full(n, np.nan), np.full(n, np.nan)
    status = np.full(n, "invalid_data", dtype=object)
    status[valid] = "ok"
    msg = np.full(n, "", dtype=object)
    for i in np.flatnonzero(status == "invalid_data"):
        msg[i] = packed.messages[i]
    if len(valid):
        job = run(lg, packed, params, engine, np.dtype(dtype))
        ll[valid] = job.loglik
        for j in np.flatnonzero(job.status != MAX_ITER):
            i = valid[j]
            ll[i] = np.nan
            status[i] = "failed"
            if job.status[j] == NOT_POSITIVE_DEFINITE:
                msg[i] = not_positive_definite(int(job.stopped_at[j]))
                if method != "exact":
                    msg[i] += " method='exact' may still evaluate it."
            else:
                msg[i] = not_finite(job.loglik[j], pairs[i][1], dtype)
        if report_error:
            ref = run(dataclasses.replace(lg, method="exact", window=None), packed,
                      params, engine, np.dtype(dtype))
            exact_ll[valid] = np.where(ref.status == MAX_ITER, ref.loglik, np.nan)
    cols = {"series": packed.ids, "loglik": ll, "n_obs": packed.n_obs, "status": status,
            "message": msg}
    if report_error:
        cols["exact_loglik"] = exact_ll
        cols["error"] = ll - exact_ll
    return pd.DataFrame(cols)


def evaluate(model, packed: Packed, params: np.ndarray, engine: str, dtype: np.dtype,
             stats: bool = False) -> Job:
    """The log-likelihoods of the valid datasets at given parameters: a :class:`Job` of one
    E-step and no M-step per (dataset, parameter set), run by the strategy the table picks.

    Parameters
    ----------
    params : ndarray of shape (n_valid, n_sets, n_params) or (1, n_sets, n_params)
        Parameter sets of each valid dataset (the job's starts), or the same sets for every
        dataset (``Job.common_params``: a strategy may then skip the per-fit copies).
    stats : bool
        Keep each E-step's statistics too (``Job.stats``; float64; the bulk strategy).

    Returns
    -------
    Job
        Its ``loglik`` and ``status`` (``MAX_ITER`` where evaluated) per (dataset, set).
    """
    common = len(params) == 1

    def take(fit_ds, fit_start, out):
        out[:] = params[0, fit_start] if common else params[fit_ds, fit_start]
        return out

    job = make_job(model, packed, params.shape[1], 0, params[0], dtype, 0, 0.0,
                   plan=starts.StartPlan(take))
    if common:
        job.common_params = params[0]
    if stats:
        job.stats = np.zeros((len(job.fit_ds), model.sizes().stats))
    select.run(job, engine, Progress(False, len(job.fit_ds)))
    return job


def _trace_table(result: FitResult, job: Job) -> pd.DataFrame:
    """The ``trace`` table: each fit's log-likelihood after 0 .. n_iter M-steps, one row per
    (dataset, start, iteration), in the ``starts`` table's order."""
    import pandas as pd

    n = np.where(job.n_iter >= 0, job.n_iter + 1, 0).astype(np.int64)
    fit = np.repeat(np.arange(len(n)), n)
    first = np.zeros(len(n) + 1, np.int64)
    np.cumsum(n, out=first[1:])
    iteration = np.arange(len(fit)) - first[fit]
    starts = result.starts
    return pd.DataFrame({starts.columns[0]: starts.iloc[:, 0].to_numpy()[fit],
                         "start": starts["start"].to_numpy()[fit], "iteration": iteration,
                         "loglik": job.trace[fit, iteration]})


def nanquantiles(a: np.ndarray, qs: Sequence[float]) -> list[np.ndarray]:
    """``np.nanquantile(a, q, axis=1)`` for each ``q`` of ``qs`` (the same bits: linear
    interpolation between the sorted finite values; NaN where a row has none), in a few
    whole-array passes: NumPy's own takes a Python call per row of a 3-D ``a``."""
    s = np.sort(a, axis=1)  # (NaN last)
    n = (~np.isnan(a)).sum(axis=1, keepdims=True)
    out = []
    for q in qs:
        pos = (n - 1) * float(q)
        below = np.clip(np.floor(pos), 0, np.maximum(n - 1, 0)).astype(np.int64)
        above = np.minimum(below + 1, np.maximum(n - 1, 0))
        t = pos - below
        x0 = np.take_along_axis(s, below, axis=1)
        x1 = np.take_along_axis(s, above, axis=1)
        diff = x1 - x0
        v = np.where(t >= 0.5, x1 - diff * (1 - t), x0 + diff * t)  # (NumPy's _lerp)
        out.append(np.where(n > 0, v, np.nan)[:, 0])
    return out


def bootstrap_intervals(result: FitResult, model: Any, B: int, level: float,
                        fit_args: dict) -> None:
    """Parametric bootstrap of a fit, added to ``result`` in place: ``B`` datasets drawn from
    every fitted dataset's best fit, each the size of that dataset
    (:meth:`FitResult.replicates`, seeded by the fit's seed and the dataset's place), refitted
    in one batch
    (:func:`_fit_model` with ``fit_args``); the ``intervals`` table holds, per (dataset,
    parameter in :meth:`Layout.names` order), the estimate, the ``(1 - level) / 2`` and
    ``(1 + level) / 2`` quantiles of the refits' parameters and ``n_boot``, the refits
    that have a usable start."""
    import pandas as pd

    vids = list(result._best)
    lay = model.params_layout
    draws = np.full((len(vids), B, lay.size), np.nan)
    lo = hi = draws[:, 0]  # (no dataset fitted: an empty table)
    if vids:
        refit = _fit_model(model, list(enumerate(result.replicates(B, fit_args["seed"]))),
                           **fit_args)
        for k, (params, _) in refit._best.items():
            draws[k // B, k % B] = params
        lo, hi = nanquantiles(draws, ((1 - level) / 2, (1 + level) / 2))
    names = lay.names()
    estimate = np.array([result._best[v][0] for v in vids]).reshape(len(vids), lay.size)
    result.tables["intervals"] = pd.DataFrame({
        result.summary.columns[0]: np.repeat(pd.Series(vids, dtype=result.summary.iloc[:, 0]
                                                       .dtype).to_numpy(), lay.size),
        "parameter": np.tile(np.asarray(names, dtype=object), len(vids)),
        "estimate": estimate.reshape(-1), "lower": lo.reshape(-1), "upper": hi.reshape(-1),
        "n_boot": np.repeat(np.isfinite(draws[:, :, 0]).sum(axis=1), lay.size),
    })


def standard_errors(result: FitResult, engine: str, reg: float) -> None:
    """Standard errors of every fitted dataset's best parameters, added to ``result`` in
    place: ``se_`` columns beside the parameters of ``components`` (and of
    ``transitions``), a ``covariances`` table (one row per dataset and pair of parameters,
    behind ``result.cov(d)``), and a note in ``summary.message`` where they are NaN (see
    :mod:`bulkem.fitting.information`)."""
    import pandas as pd

    from .fitting import information
    from .tuning import MAX_ITER

    model, packed = result._model, result._packed
    lay, free = model.params_layout, model.free_blocks()
    vids = list(result._best)
    if not vids:
        return
    best = np.stack([result._best[v][0] for v in vids])
    theta = lay.to_free(best, free)
    bound = ~np.isfinite(theta).all(axis=1) | model.at_bound(best, reg)
    theta = np.where(np.isfinite(theta), theta, 0.0)
    h = information.steps(theta)
    score = model.has_score
    pts = (information.score_points if score else information.points)(theta, h)
    n, Q, P = pts.shape
    need = np.flatnonzero(~bound)  # (a boundary's errors are NaN: not evaluated)
    H = np.full((n, P, P), np.nan)
    if len(need):
        params = lay.from_free(pts[need].reshape(-1, P), np.repeat(best[need], Q, axis=0),
                               free).reshape(len(need), Q, lay.size)
        where = {v: k for k, v in enumerate(packed.ids)}
        rows = np.searchsorted(packed.valid, [where[vids[i]] for i in need])
        if len(rows) < len(packed.valid):  # those datasets alone, in that order
            packed = dataclasses.replace(packed, valid=packed.valid[rows],
                                         data=packed.data.take(rows))
            rows = np.arange(len(rows))
        else:  # every one, in the packed order
            params[rows] = params.copy()
        job = evaluate(model, packed, params, engine, np.dtype(np.float64), stats=score)
        ok = (job.status == MAX_ITER).reshape(len(need), Q)[rows]
        if score:  # the score at each point, in the free coordinates
            at = params[rows].reshape(-1, lay.size)
            stats = job.stats.reshape(len(need), Q, -1)[rows].reshape(len(at), -1)
            s = lay.free_gradient(at, model.score(at, stats), free).reshape(len(need), Q, P)
            s[~ok] = np.nan
            H[need] = information.score_hessian(s, h[need])
        else:
            f = np.where(ok, job.loglik.reshape(len(need), Q)[rows], np.nan)
            H[need] = information.hessian(f, h[need])
    cov, ok = information.covariance(H, lay.free_jacobian(best, free))
    ok &= ~bound
    cov[~ok] = np.nan
    se = np.sqrt(np.clip(np.diagonal(cov, axis1=1, axis2=2), 0.0, None))
    names = np.array(lay.names(), dtype=object)
    k = len(names)
    idcol = result.summary.columns[0]  # (dataset, or trace)
    ids = pd.Series(vids, dtype=result.summary[idcol].dtype)
    code = np.arange(k)
    result.tables["covariances"] = pd.DataFrame({  # a table: kept by checkpoints and joins
        # (names as categories: strings would cost a conversion per row)
        idcol: ids.take(np.repeat(np.arange(len(vids)), k * k)).to_numpy(),
        "row": pd.Categorical.from_codes(np.tile(np.repeat(code, k), len(vids)), names),
        "column": pd.Categorical.from_codes(np.tile(code, len(vids) * k), names),
        "cov": cov.reshape(-1)})
    comp = result.components
    for col, values in model.se_columns(se).items():
        comp[col] = values
    trans = result.tables.get("transitions")
    if trans is not None:
        prob = model.transition_columns[-1]
        trans["se_" + prob] = model.extra_tables(np.asarray(vids, dtype=object),
                                                 se)["transitions"][prob].to_numpy()
    why = np.where(bound, "standard errors NaN: a parameter on its constraint's boundary "
                   "(a probability near 0, a variance at reg_covar)",
                   "standard errors NaN: the observed information is not positive definite "
                   "(a flat direction, or not at a maximum)")
    msg = result.summary["message"].to_numpy(dtype=object).copy()
    at = {v: k for k, v in enumerate(result.summary[idcol])}
    for k, v in enumerate(vids):
        if not ok[k]:
            i = at[v]
            msg[i] = f"{msg[i]}; {why[k]}" if msg[i] else str(why[k])
    result.summary["message"] = msg


def make_job(model, packed: Packed, n_starts: int, seed: int, user: np.ndarray | None,
             dtype: np.dtype, max_iter: int, tol: float, init_method: str = "subset",
             reg: float = 0.0, plan: starts.StartPlan | None = None) -> Job:
    """The :class:`Job` of every (valid dataset, start) fit of a packed batch; its starts
    drawn by ``plan`` (default: the model's)."""
    n_valid = len(packed.valid)
    n_fits, n_params = n_valid * n_starts, model.n_params
    memory.check(n_fits * (2 * n_params * 8 + 32),  # init, params; ids, status, n_iter, loglik
                 f"the starting values and results of {n_fits:,} fits ({n_valid:,} datasets "
                 f"x {n_starts:,} starts, {n_params:,} parameters each)",
                 "use fewer starts or fewer datasets at once (checkpoint= fits a batch in "
                 "chunks).")
    fit_ds = np.repeat(np.arange(n_valid, dtype=np.int64), n_starts)
    fit_start = np.tile(np.arange(n_starts, dtype=np.int64), n_valid)
    data = packed.data
    if (user is not None and len(user) >= n_starts) or not model.keyed_starts:
        keys = np.zeros(data.n_datasets, np.uint64)  # no random start reads a dataset key
    else:
        keys = starts.dataset_keys(data.values, data.value_offsets,
                                   model.tuning.hash_blocked_min_words,
                                   model.tuning.hash_block_words)
    if plan is None:
        plan = model.start_plan(data, keys, seed, init_method, user)
    return Job(
        model=model,
        dtype=dtype,
        data=data,
        fit_ds=fit_ds,
        fit_start=fit_start,
        start_plan=plan,
        init=np.empty((len(fit_ds), n_params)),
        params=np.empty((len(fit_ds), n_params)),
        status=np.zeros(len(fit_ds), np.int32),
        n_iter=np.zeros(len(fit_ds), np.int32),
        loglik=np.zeros(len(fit_ds), np.float64),
        max_iter=max_iter,
        tol=tol,
        drop_rtol=model.tuning.decrease_rtol[dtype.name],
        reg=reg,
        n_obs=packed.n_obs[packed.valid],
    )
