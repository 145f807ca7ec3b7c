"""Every tunable number of bulkem in one frozen :class:`Tuning`, and the fit statuses.

A :class:`Tuning` is passed, never patched: ``bulkem.fit(..., tuning=Tuning(...))`` (and
``kalman_loglik``) hands it to the model and the engines, which read it when they build
and run kernels.  The default, :data:`DEFAULT`, holds the measured values below.  The
fields marked ``compiled`` are baked into compiled kernels: :meth:`Tuning.key` (those
fields alone) is part of every kernel's cache key, so a tuning that changes none of them
reuses every compiled kernel; the others are read at run time.  The CUDA engines' own
fields (``compiled(..., "cuda")``) key the CUDA kernels only: a CPU fit does not compile
again for them.

Example: small blocks, so that a test's tiny datasets span several of them::

    bulkem.fit(data, tuning=Tuning(estep_block_obs={"float64": 8, "float32": 8}))
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Status(IntEnum):
    """A fit's status code, as the engines write it (``FitResult.starts["status"]`` names it)."""

    CONVERGED = 0
    MAX_ITER = 1
    DEGENERATE_NONFINITE = 2  # NaN or infinite log-likelihood
    DEGENERATE_PARAM = 3  # non-positive or non-finite parameter after an M-step
    DEGENERATE_COLLAPSE = 4  # a component lost (almost) all its mass or variance
    DEGENERATE_DECREASE = 5  # log-likelihood fell by more than rounding
    # Internal, never in the tables: a float32 fit that gave up, to be fitted again in
    # float64 from its start (see bulkem.fitting.driver.make_em).
    REDO_FLOAT64 = 6
    # An evaluation by the Kalman filter that stopped: an innovation covariance was not
    # positive definite (``Job.stopped_at`` holds the time step).
    NOT_POSITIVE_DEFINITE = 7


# The codes as plain ints, for compiled code (numba types an IntEnum member apart from int).
CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
DEGENERATE_NONFINITE = int(Status.DEGENERATE_NONFINITE)
DEGENERATE_PARAM = int(Status.DEGENERATE_PARAM)
DEGENERATE_COLLAPSE = int(Status.DEGENERATE_COLLAPSE)
DEGENERATE_DECREASE = int(Status.DEGENERATE_DECREASE)
REDO_FLOAT64 = int(Status.REDO_FLOAT64)
NOT_POSITIVE_DEFINITE = int(Status.NOT_POSITIVE_DEFINITE)

LOG_2PI = math.log(2.0 * math.pi)
WARP_SIZE = 32  # threads of a CUDA warp

# --- what a degenerate fit is: definitions of the maths, compiled into the models'
# device functions (constants, not tuning: they decide results, not speed) ---
# A component whose summed responsibility falls below this many observations
# is reported as collapsed.
MIN_COMPONENT_MASS = 1e-8

# A probability computed by an M-step may exceed 1 by rounding (a sum of counts over its
# total); up to this much it is accepted as 1 would be.
PROB_RTOL = 1e-9

# Largest accepted shape parameter lambda/mu of an inverse-Gaussian component:
# beyond it the component has collapsed onto a point in float64 terms.
MAX_IG_SHAPE = 1e14

# Starts whose log-likelihoods are this close (relative) to the largest are ties, and the
# first of them is the best start: two starts that reach the same optimum differ by rounding
# (1e-11 between the CPU and CUDA engines), which must not choose between them.
BEST_TIE_RTOL = 1e-10

# A grid fit's ``selection.n_best``: the starts whose log-likelihood is within this much
# (relative) of the best start's.  EM stops a start when an iteration gains less than
# ``tol`` (1e-6 by default), possibly short of the maximum it is heading for; 1e-6 of a
# log-likelihood of -3,000 (2,000 values) is 3e-3.
REACHED_RTOL = 1e-6

# A Gaussian component whose variance in a dimension falls to this fraction of
# its mean square (E[x^2]) or below has collapsed onto a point in float64
# terms (the variance is then within rounding of E[x^2] - mean^2).
GAUSS_VAR_RTOL = 1e-12


STRATEGIES = (None, "bulk", "large", "wide", "many_states")  # (bulkem.engines.select)


class FrozenMap(dict):
    """A read-only dict (a per-dtype setting): hashable and picklable, unlike a mapping proxy."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a Tuning is read-only; build another with Tuning.replace(...)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=repr)))

    def __reduce__(self):
        return FrozenMap, (dict(self),)


def compiled(default: Any, where: str = "model") -> Any:
    """A field whose value is baked into compiled kernels: the models' pieces and the driver
    on every target (``where="model"``), or the CUDA engines' kernels alone (``"cuda"``);
    :meth:`Tuning.key` of that kind holds it."""
    if isinstance(default, dict):
        return field(default_factory=lambda: FrozenMap(default), metadata={"compiled": where})
    return field(default=default, metadata={"compiled": where})


@dataclass(frozen=True)
class Tuning:
    """Every tunable number of bulkem (see the module docstring); immutable.

    Build one with the fields to change, ``Tuning(cpu_chunk_fits=64)``, or from another,
    ``tuning.replace(cpu_chunk_fits=64)``.  Per-dtype fields take a dict.
    """

    # Relative fall of the log-likelihood tolerated as rounding, by compute dtype (passed
    # to the kernels at run time).
    decrease_rtol: Mapping[str, float] = field(
        default_factory=lambda: FrozenMap({"float64": 1e-9, "float32": 1e-4}))

    # E-step: observations a lane (CPU: a fit) takes between two flushes of its
    # per-observation sums into the float64 totals, by compute dtype.  A block's
    # log-sum-exp sums (each in [1, M]) are multiplied and logged once per block;
    # with float32 the block's statistics are also summed in float32, so a short
    # block keeps their rounding small.  Capped where M**block would overflow
    # (float32, M = 2: 126).  float32 128 vs 32, kernel alone on an H200: 0.90x the
    # time, the same share of fits within 1e-6 of float64 (on the CPU too).  A run-time
    # value (the mixtures' batch tuple carries it): no kernel is compiled per value.
    estep_block_obs: Mapping[str, int] = field(
        default_factory=lambda: FrozenMap({"float64": 256, "float32": 128}))

    # The CPU's E-step takes a block's observations this many at a time, the
    # per-observation arithmetic unchanged (same bits) but with the inner loops
    # over the tile's observations, which the compiler vectorises
    # (bulkem.models.mixture.fused._make_tiled).  0: one at a time.
    cpu_tile_obs: int = compiled(64)

    # The one-large-dataset regime on the CPU computes this many blocks of a pass in
    # parallel at a time, each into its own row, then adds the rows in block order
    # (bulkem.models.mixture.fused.make_blocked).
    cpu_wide_wave_blocks: int = compiled(512)

    # An E-step uses the linear (expanded) form of the log densities, fast, only
    # where its rounding bound (bulkem.models.mixture.fused.make_bound, a few
    # eps times the largest summed term) is at most this fraction of the previous
    # iteration's |log-likelihood|, by compute dtype; else, and at a fit's first
    # E-step, the exact centred form.  float64: the reported log-likelihood is then
    # within ~1e-12 relative of the exact one (the tables promise 1e-9); float32
    # iterations tolerate 1e-4 (decrease_rtol) and report a float64 log-likelihood.
    # A run-time value (the mixtures' batch tuple carries it), but in the CUDA large
    # regime's kernels, which compile it in.
    exact_rtol: Mapping[str, float] = field(
        default_factory=lambda: FrozenMap({"float64": 2.0**-40, "float32": 2.0**-12}))

    # --- random starts ---
    # k-means++ starts (init_method="kmeans++") of a dataset with more observations
    # than max(kmeans_sample_obs, kmeans_sample_per_component * M) are seeded from
    # that many drawn at random (fitting.starts.kmeanspp_rows): the seeding and the
    # variances of the start cost O(n M D) each, 0.3-0.5 s of host time for the CUDA
    # EM paper's 230,400 x 32 dimensions and 32 components (six times its 100 GPU
    # iterations), ~2 ms from 1,024.  Smaller datasets use every observation.  On that
    # problem (6 starts, 100 iterations, float32) the median final log-likelihood was
    # -1.1687e7 from all rows, -1.1973e7 from 2,048, -1.1664e7 from 1,024, -1.1870e7
    # from 512: the sample's size shows no trend above 1,024.
    kmeans_sample_obs: int = 1024
    kmeans_sample_per_component: int = 32
    # Dataset keys (fitting.starts.dataset_keys): a dataset of at least this many
    # float64 words is hashed by blocks of hash_block_words in parallel.
    hash_blocked_min_words: int = 1 << 20
    hash_block_words: int = 1 << 16
    # The features of vector data (the values transposed) are copied on every core
    # from this many values up (models.mixture.model._contiguous).
    parallel_transpose_min: int = 1 << 20
    # A float64 dataset of this many values or more is checked for NaN and infinite
    # values on every core (data.inputs.basic_problems; one thread took 5 ms for the
    # 7.4 million of the CUDA EM paper's largest problem).
    parallel_check_min: int = 1 << 20

    # --- CPU engine ---
    cpu_chunk_fits: int = 200_000  # most fits per parallel call
    progress_steps: int = 50  # while progress is shown, work is reported in about this many steps
    cpu_min_chunk_fits: int = 256  # ... but never in parallel calls of fewer fits than this

    # --- CUDA engine ---
    cuda_warps_per_block: int = compiled(4, "cuda")  # warps per block
    # Lanes of a warp that share a fit (a power of 2 up to 32).  The per-iteration
    # work (M-step, reductions) costs a group the same whatever its size, so small
    # groups spend more of their time on observations, but a warp runs until its
    # slowest fit stops.  With tol=0 all fits run max_iter iterations (measured on
    # an H200, issue-4 batch: 8 lanes 1.04x (f64) and 1.20x (f32) faster than 32;
    # kernel alone, 4 lanes: f32 0.97x the time of 8, f64 1.01x); with tol=1e-6
    # they stop apart (8 lanes 0.64x, 16 lanes 0.83x of 32).
    cuda_lanes_per_fit: int = compiled(32, "cuda")  # tol > 0
    # The same with tol = 0, by compute dtype.
    cuda_lanes_per_fit_tol0: Mapping[str, int] = compiled({"float64": 8, "float32": 4}, "cuda")
    # Sequence models (lanes split a dataset's sequences): lanes per fit by (tol > 0), and
    # the register cap.  Measured on an H200 (issue-13 HMM batch: 20,000 fits of 20
    # sequences, N = 4, V = 8, float64, tol = 0): 4 lanes and 64 registers 6,927 fits/s;
    # no cap 9,099; 128 registers 8,628; 2 lanes 9,104; 8 lanes 2,894.  Since the chain's
    # vectors, transitions and per-unit sums are arrays of their own (2026-11-30, same run,
    # fits/s: no cap / 128 / 168 / 200 registers; 128 and 4 lanes): categorical 11,754 /
    # 15,587 / 15,567 / 11,986; 13,134; Gaussian D = 1 11,227 / 15,349 / 16,869 / 11,349;
    # D = 4 5,872 / 5,786 / 6,410 / 5,725; Poisson 10,160 / 14,144 / 14,616 / 10,331.  168
    # registers leave room for 3 blocks of 4 warps an SM (255 or 200: 2), so the batch's
    # 40,000 threads run in one wave, and no spills enter these models' step loops.
    cuda_lanes_per_fit_units: Mapping[bool, int] = compiled({False: 2, True: 2}, "cuda")
    cuda_max_registers_units: int | None = compiled(168, "cuda")
    # Hidden Markov models with more states than this run on the GPU one fit at a time, each
    # time step a tiled matrix product over the sequences (bulkem.engines.cuda.many_states);
    # the bulk kernel keeps a lane's state vectors and N x N statistics per lane.
    hmm_many_states: int = 32
    # float32 fits that give up are fitted again in float64 by a second launch
    # after their chunk's, with this many lanes per fit (more than 32: a block of
    # that many threads per fit; None: as many as a float64 batch uses, which
    # makes them the float64 fits to the last bit).  The last chunk's refits are
    # not hidden behind other work, so their latency counts: issue-4 batch,
    # float32 end to end on an H200, 8 lanes (None) 2.51M fits/s, 32 lanes 2.98M,
    # 128 lanes 3.17M, 256 lanes 3.01M (32 and up agree with the float64 fits to
    # rounding, not to the bit).
    cuda_lanes_per_refit: int = compiled(128, "cuda")
    # Cap on registers per thread (measured: 64 beats none and 80 on an H200)
    cuda_max_registers: int = compiled(64, "cuda")

    # --- CUDA scheduler ---
    cuda_devices: tuple[int, ...] | None = None  # GPU ids to use; None: every visible GPU
    # Host threads feeding the GPUs, in all (each GPU gets its share, at least
    # one): they share the GIL, so more threads wait on each other.  Measured on
    # 2 x H200 (issue-4 batch, float64): one thread per GPU 1.83M fits/s, two
    # 1.74M; on one H200 two threads beat one.
    cuda_host_threads: int = 2
    cuda_chunks_in_flight: int = 2  # chunks a host thread keeps launched (one stream each)
    cuda_chunks_per_stream: int = 2  # chunks a host thread gets at least (v6: 2 best; 4, 8 worse)
    cuda_chunk_fits: int = 1_000_000  # most fits in one launch
    cuda_min_chunk_fits: int = 16_384  # fewest fits worth a launch (about 6 waves on an H100)
    cuda_memory_fraction: float = 0.5  # share of free GPU memory the chunks in flight may take
    # Bytes per chunk; None: from free memory (tests set it small)
    cuda_memory_budget: int | None = None
    # Longest fits first within a launch, similar sizes side by side.
    cuda_group_by_size: bool = True
    progress_poll_s: float = 0.1  # how often a running kernel's finished fits are counted
    cuda_wait_poll_s: float = 0.0005  # how often a running chunk is asked whether it is done
    # A chunk's arrays travel in one buffer each way.  Buffers up to this size are
    # page-locked (asynchronous copies at full speed), and up to cuda_pinned_pool
    # of them per GPU, each with its device buffer, are kept for later chunks and
    # calls (page-locking and device allocation are slow).
    cuda_pinned_max_bytes: int = 64 << 20
    cuda_pinned_pool: int = 8
    # Host threads that copy a large array into page-locked buffers on its way to the GPU
    # (engines/cuda/buffers.upload; 0: one per core).
    host_copy_threads: int = 0

    # A mixture batch runs in the large regime (bulkem.engines.select.use_large;
    # engines/cpu/large.py, engines/cuda/large.py: each fit spread over the whole
    # machine, one after another) when every dataset it fits has at least
    # large_min_obs observations and it has few fits: fewer than the CPU's Numba
    # threads, or at most large_max_fits_cuda on the GPU (one warp per fit would
    # leave most of it idle).  Otherwise the bulk engines run it.
    large_min_obs: int = 20_000
    large_max_fits_cuda: int = 64
    # CUDA tiled E-step: threads per block (a multiple of WARP_SIZE), observations
    # per tile at most (halved until the block's shared arrays fit), the static
    # shared memory a block may use, blocks per multiprocessor (None: as many as
    # can be resident at once), and a cap on blocks (None: no cap; tests set it).
    large_cuda_threads: int = compiled(128, "cuda")
    # ... per dtype, for a model whose coefficients the tiles read from global memory (too
    # many for shared memory: full covariances at D = M = 32; engines/cuda/large.plan).
    # H200, D = M = 32: float64 16.5 ms per iteration at 256 against 22.0 at 128; float32
    # 8.8 against 6.8.
    large_cuda_threads_global: Mapping[str, int] = compiled({"float64": 256, "float32": 128},
                                                           "cuda")
    large_cuda_tile: int = compiled(64, "cuda")
    large_cuda_shared_bytes: int = compiled(48 * 1024, "cuda")
    large_cuda_blocks_per_sm: int | None = None
    large_cuda_max_blocks: int | None = None
    # CUDA reduction of the per-block partial statistics: statistics per block and
    # threads per block (large_cuda_reduce_threads a multiple of large_cuda_reduce_cols).
    large_cuda_reduce_cols: int = compiled(16, "cuda")
    large_cuda_reduce_threads: int = compiled(256, "cuda")
    # Iterations launched between two reads of the device's done flag (iterations
    # launched after a fit has stopped return at once).
    large_cuda_check_every: int = 8
    # Marshal the per-iteration kernels' arguments once per fit instead of at every
    # launch (numba-cuda internals; the ordinary launch is used where they differ).
    cuda_prepared_launch: bool = True

    # --- Kalman likelihoods (bulkem.kalman_loglik; issue 15) ---
    # The Kalman engines read these when a call starts, so tests can pass small ones
    # (small blocks and chunks, so that the CUDA simulator runs several blocks and the
    # scan several levels on tiny inputs).
    # Exact filter.
    # Series of one model without missing rows share the covariance part of the
    # filter (it does not depend on the data): it is computed once, on the host,
    # for the longest series, and each series then runs the mean recursion only.
    # Used when at least this many series qualify (the shared part costs one
    # sequential filter of the longest series).
    kalman_shared_gains_min_series: int = 2

    # Scan (the time-parallel exact filter).
    # Level-0 chunk: time steps one thread (CPU: one task) filters conditionally;
    # it is at least *_scan_chunk0 steps, and longer when the batch would otherwise
    # make more than kalman_cuda_scan_target_chunks chunks (CPU: the Numba threads
    # times kalman_cpu_scan_chunks_per_thread).  Higher levels combine *_scan_chunk
    # elements per thread.  The CPU wants a few chunks per core (then two levels); a GPU
    # wants many threads and short sequential runs.
    kalman_cpu_scan_chunk0: int = 64
    kalman_cpu_scan_chunk: int = 256
    kalman_cpu_scan_chunks_per_thread: int = 8
    # H100, 10^6 steps: RW 2-D 0.56 ms (16: 0.79), AR(10) 20.7 (25.0)
    kalman_cuda_scan_chunk0: int = 32
    kalman_cuda_scan_chunk: int = 8
    kalman_cuda_scan_target_chunks: int = 1 << 18
    # From this many states on, a warp takes a chunk above level 0 (its lanes share
    # the element's matrices in shared memory), this many chunks per block, and level
    # 0 keeps a thread per chunk with its largest matrices in shared memory; fewer
    # states: a thread per chunk everywhere, the matrices in registers.
    kalman_cuda_scan_warp_min_nx: int = compiled(4, "cuda")
    kalman_cuda_scan_warps: int = compiled(4, "cuda")

    # Steady-state scan: a batch of one model without missing rows whose covariance
    # recursion settles (a step's predicted covariance within kalman_scan_steady_ulps
    # units in the last place of the step before's, at the latest after
    # kalman_scan_steady_max_steps steps) scans means alone (models/ssm/scan.py); its
    # first chunk of a series holds the steps before.  The GPU's level-0 chunk is at
    # least kalman_cuda_steady_chunk0 steps (more when the batch would make more than
    # kalman_cuda_scan_target_chunks), its levels above combine kalman_cuda_steady_chunk
    # elements per thread.
    kalman_scan_steady_ulps: int = 4
    kalman_scan_steady_max_steps: int = 10_000
    kalman_cuda_steady_chunk0: int = 64
    kalman_cuda_steady_chunk: int = 16  # H100, 10^6 steps, chunks of 64: AR(10) 0.33 ms (32: 0.36)

    # Splash.
    kalman_cpu_splash_block: int = 256  # time steps per parallel task
    # Default variance of the broad prior that starts each window.
    kalman_splash_broad_var: float = 1e6
    # Splash step terms are summed in chunks of this many steps (on the GPU, by the
    # first thread of the chunk's threads, in one block), then the chunks of a
    # series in order: one order on both engines, and only the chunk sums leave the
    # GPU.  At most 1,024 (threads per block).
    kalman_splash_sum_chunk: int = compiled(64, "cuda")

    # CUDA launches.
    # Threads per block of every Kalman kernel (the paper: 128 or 256)
    kalman_cuda_threads: int = compiled(128, "cuda")

    # --- State-space EM (bulkem.fit, family="ar" / "local_level"; issue 15) ---
    # The AR coefficients' M-step (the Shumway-Stoffer regression plus the stationary
    # prior's gradient) is halved towards the old coefficients until it raises the
    # expected log-likelihood, at most this many times (then they stay).
    ssm_ar_max_halvings: int = compiled(30)
    # Lanes that share a fit on the GPU, by (tol > 0): a lane takes whole series, so one
    # lane per fit when datasets are single series (the usual case), no idle lanes.
    cuda_lanes_per_fit_series: Mapping[bool, int] = compiled({False: 1, True: 1}, "cuda")
    # Their register cap (the chains' cuda_max_registers_units does not suit them: 10,000
    # AR(3) series x 500 steps, 10 starts, 50 iterations, H200, 2026-11-30: no cap (224
    # registers, no spills) 94,671 fits/s, 168 registers 87,061).
    cuda_max_registers_series: int | None = compiled(None, "cuda")
    # An AR fit whose companion matrix has a spectral radius at or above this is flagged in
    # summary.message: the stationary prior holds it inside the unit circle, but the data
    # may not be stationary.
    ssm_ar_radius_warn: float = 0.999

    # --- the wide regime for models of units (issue 14) ---
    # A batch runs in the wide regime (bulkem.engines.select.use_wide;
    # engines/cpu/wide.py, engines/cuda/wide.py: each fit over the whole machine, one
    # after another) when the model's items are units (sequences, runs), every dataset
    # it fits has at least wide_min_units units and it has few fits: fewer than
    # the CPU's Numba threads, or at most wide_max_fits_cuda on the GPU.
    wide_min_units: int = 20_000
    wide_max_fits_cuda: int = 64
    # CPU: units per partial sum (fixed, so results do not depend on threads); the HMM
    # chain's block of units in every engine, read at run time (the batch tuple's).
    wide_cpu_chunk_units: int = 1024
    # CUDA E-step: threads per block (a multiple of WARP_SIZE); blocks per
    # multiprocessor (None: as many as can be resident at once); a cap on blocks
    # (None: none; tests set it); the most bytes the threads' forward-vector
    # buffers may take (fewer blocks when they would take more).
    wide_cuda_threads: int = compiled(128, "cuda")
    wide_cuda_blocks_per_sm: int | None = None
    wide_cuda_max_blocks: int | None = None
    wide_cuda_buf_bytes: int = 4 << 30
    # CUDA reduction of the block partials (one block): threads, and statistics
    # summed side by side (wide_cuda_reduce_threads a multiple of wide_cuda_reduce_cols).
    wide_cuda_reduce_threads: int = compiled(256, "cuda")
    wide_cuda_reduce_cols: int = compiled(32, "cuda")
    # Iterations launched between two reads of the device's done flag.
    wide_cuda_check_every: int = 8
    # Cap on registers per E-step thread (None: the compiler's).
    wide_cuda_max_registers: int | None = compiled(None, "cuda")


    # --- the strategy (bulkem.engines.select) ---
    # None: by the rules of the strategy table; "bulk", "large", "wide" or "many_states":
    # that strategy whenever the model and engine have it (tests use it on small data).
    strategy: str | None = None
    # The CPU's mixture kernels have the numbers of components and dimensions compiled in
    # ("compiled": one kernel per size) or read them at run time from the batch tuple
    # ("run-time": one kernel for every size, for a grid of sizes).  The same bits either
    # way; run-time sizes measured 1.2-2.7x slower per fit and 1.0-1.7x slower to compile
    # on 16 cores (BENCHMARKS.md), so they pay only where several sizes share the kernel.
    # The environment variable BULKEM_CPU_SIZES sets the default (read when a Tuning is
    # built): a session that fits many sizes (an R user's grid of calls; the test command,
    # whose tests fit ~25 sizes and would compile a kernel for each) compiles one kernel
    # per family and dtype.
    cpu_sizes: str = field(default_factory=lambda: os.environ.get("BULKEM_CPU_SIZES",
                                                                  "compiled"))

    # --- runs in chunks (bulkem.scale) ---
    # Fits per chunk of a checkpointed run: a chunk holds max(1, this // n_starts) datasets.
    # A chunk is the work lost to a crash and the grain of the Parquet files; 5 * 10^5 fits
    # are under a second on a GPU and half a minute on 16 CPU cores (200 values).  It also
    # bounds the host memory of a streamed `bulkem fit`: 4.2 GiB at peak with chunks of
    # 10^6 fits (10^5 datasets of 200 values) on an H100 machine, over the 4 GiB the
    # streaming issue allows.
    checkpoint_chunk_fits: int = 500_000

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Mapping) and not isinstance(value, FrozenMap):  # read-only
                object.__setattr__(self, f.name, FrozenMap(value))
        if self.cpu_sizes not in ("compiled", "run-time"):
            raise ValueError(f"Tuning(cpu_sizes={self.cpu_sizes!r}): expected 'compiled' or "
                             "'run-time' (the default comes from the environment variable "
                             "BULKEM_CPU_SIZES where it is set).")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"Tuning(strategy={self.strategy!r}): expected one of "
                             f"{list(STRATEGIES)} (None: the strategy table's rules).")

    def replace(self, **changes: Any) -> Tuning:
        """A copy with ``changes`` (field names as keywords)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unknown tuning field(s) {unknown}; see bulkem.tuning.Tuning.")
        return dataclasses.replace(self, **changes)

    def key(self, where: str = "model") -> str:
        """The fields compiled into the models' pieces (``"model"``: part of every model's
        ``key``) or into the CUDA engines' kernels (``"cuda"``), with their values.

        Computed once per tuning (the engines read it at every kernel lookup)."""
        cache = vars(self).setdefault("_keys", {})  # (not a field: no effect on == or repr)
        if where not in cache:
            cache[where] = repr(sorted((f.name, _plain(getattr(self, f.name)))
                                       for f in dataclasses.fields(self)
                                       if f.metadata.get("compiled") == where))
        return cache[where]

    def __hash__(self) -> int:
        cache = vars(self).setdefault("_keys", {})
        if "hash" not in cache:
            cache["hash"] = hash(repr([(f.name, _plain(getattr(self, f.name)))
                                       for f in dataclasses.fields(self)]))
        return cache["hash"]


def _plain(value: Any) -> Any:
    return sorted(value.items(), key=repr) if isinstance(value, Mapping) else value


DEFAULT = Tuning()


def check(tuning: Any) -> Tuning:
    """``tuning`` if it is a :class:`Tuning`, :data:`DEFAULT` if None; else a TypeError."""
    if tuning is None:
        return DEFAULT
    if not isinstance(tuning, Tuning):
        raise TypeError(f"tuning must be a bulkem.tuning.Tuning or None; got "
                        f"{type(tuning).__name__}. Build one with the fields to change, "
                        "e.g. Tuning(cpu_chunk_fits=1000).")
    return tuning
