"""Every tunable number of bulkem in one place.

Kernels and engines read these values when they are built; nothing numeric is
hard-coded inside a kernel.  Tests patch a few of them (small blocks, small
chunks) so that the CUDA simulator exercises several blocks on tiny inputs.
"""

from __future__ import annotations

import math

# --- fit status codes (shared by both engines; see result.STATUS_NAMES) ---
CONVERGED = 0
MAX_ITER = 1
DEGENERATE_NONFINITE = 2  # NaN or infinite log-likelihood
DEGENERATE_PARAM = 3  # non-positive or non-finite parameter after an M-step
DEGENERATE_COLLAPSE = 4  # a component lost (almost) all its mass or variance
DEGENERATE_DECREASE = 5  # log-likelihood fell by more than rounding
# Internal, never in the tables: a float32 fit that gave up, to be fitted
# again in float64 from its start (see bulkem.engines.driver.make_em).
REDO_FLOAT64 = 6

# --- EM numerics ---
# A component whose summed responsibility falls below this many observations
# is reported as collapsed.
MIN_COMPONENT_MASS = 1e-8
# A probability computed by an M-step may exceed 1 by rounding (a sum of counts over its
# total); up to this much it is accepted as 1 would be.
PROB_RTOL = 1e-9
# Relative fall of the log-likelihood tolerated as rounding, by compute dtype.
DECREASE_RTOL = {"float64": 1e-9, "float32": 1e-4}
# Starts whose log-likelihoods are this close (relative) to the largest are ties, and the
# first of them is the best start: two starts that reach the same optimum differ by rounding
# (1e-11 between the CPU and CUDA engines), which must not choose between them.
BEST_TIE_RTOL = 1e-10
# Largest accepted shape parameter lambda/mu of an inverse-Gaussian component:
# beyond it the component has collapsed onto a point in float64 terms.
MAX_IG_SHAPE = 1e14

# E-step: observations a lane (CPU: a fit) takes between two flushes of its
# per-observation sums into the float64 totals, by compute dtype.  A block's
# log-sum-exp sums (each in [1, M]) are multiplied and logged once per block;
# with float32 the block's statistics are also summed in float32, so a short
# block keeps their rounding small.  Capped where M**block would overflow
# (float32, M = 2: 126).  float32 128 vs 32, kernel alone on an H200: 0.90x the
# time, the same share of fits within 1e-6 of float64 (on the CPU too).
ESTEP_BLOCK_OBS = {"float64": 256, "float32": 128}

# The CPU's E-step takes a block's observations this many at a time, the
# per-observation arithmetic unchanged (same bits) but with the inner loops
# over the tile's observations, which the compiler vectorises
# (bulkem.models.mixture.fused._make_tiled).  0: one at a time.
CPU_TILE_OBS = 64

# The one-large-dataset regime on the CPU computes this many blocks of a pass in
# parallel at a time, each into its own row, then adds the rows in block order
# (bulkem.models.mixture.fused.make_blocked).
CPU_WIDE_WAVE_BLOCKS = 512

# An E-step uses the linear (expanded) form of the log densities, fast, only
# where its rounding bound (bulkem.models.mixture.fused.rounding_bound, a few
# eps times the largest summed term) is at most this fraction of the previous
# iteration's |log-likelihood|, by compute dtype; else, and at a fit's first
# E-step, the exact centred form.  float64: the reported log-likelihood is then
# within ~1e-12 relative of the exact one (the tables promise 1e-9); float32
# iterations tolerate 1e-4 (DECREASE_RTOL) and report a float64 log-likelihood.
EXACT_RTOL = {"float64": 2.0**-40, "float32": 2.0**-12}

# --- random starts ---
SUBSET_DRAW_LIMIT = 1000  # redraws allowed to find distinct indices
# k-means++ starts (init_method="kmeans++") of a dataset with more observations
# than max(KMEANS_SAMPLE_OBS, KMEANS_SAMPLE_PER_COMPONENT * M) are seeded from
# that many drawn at random (fitting.starts.kmeanspp_rows): the seeding and the
# variances of the start cost O(n M D) each, 0.3-0.5 s of host time for the CUDA
# EM paper's 230,400 x 32 dimensions and 32 components (six times its 100 GPU
# iterations), ~2 ms from 1,024.  Smaller datasets use every observation.  On that
# problem (6 starts, 100 iterations, float32) the median final log-likelihood was
# -1.1687e7 from all rows, -1.1973e7 from 2,048, -1.1664e7 from 1,024, -1.1870e7
# from 512: the sample's size shows no trend above 1,024.
KMEANS_SAMPLE_OBS = 1024
KMEANS_SAMPLE_PER_COMPONENT = 32
# Dataset keys (fitting.starts.dataset_keys): a dataset of at least this many
# float64 words is hashed by blocks of HASH_BLOCK_WORDS in parallel.
HASH_BLOCKED_MIN_WORDS = 1 << 20
HASH_BLOCK_WORDS = 1 << 16
# The features of vector data (the values transposed) are copied on every core
# from this many values up (models.mixture.model._contiguous).
PARALLEL_TRANSPOSE_MIN = 1 << 20
# A float64 dataset of this many values or more is checked for NaN and infinite
# values on every core (data.inputs.basic_problems; one thread took 5 ms for the
# 7.4 million of the CUDA EM paper's largest problem).
PARALLEL_CHECK_MIN = 1 << 20

# --- CPU engine ---
CPU_CHUNK_FITS = 200_000  # most fits per parallel call
PROGRESS_STEPS = 50  # while progress is shown, work is reported in about this many steps
CPU_MIN_CHUNK_FITS = 256  # ... but never in parallel calls of fewer fits than this

# --- CUDA engine ---
WARP_SIZE = 32
CUDA_WARPS_PER_BLOCK = 4  # warps per block
# Lanes of a warp that share a fit (a power of 2 up to 32).  The per-iteration
# work (M-step, reductions) costs a group the same whatever its size, so small
# groups spend more of their time on observations, but a warp runs until its
# slowest fit stops.  With tol=0 all fits run max_iter iterations (measured on
# an H200, issue-4 batch: 8 lanes 1.04x (f64) and 1.20x (f32) faster than 32;
# kernel alone, 4 lanes: f32 0.97x the time of 8, f64 1.01x); with tol=1e-6
# they stop apart (8 lanes 0.64x, 16 lanes 0.83x of 32).
CUDA_LANES_PER_FIT = 32  # tol > 0
CUDA_LANES_PER_FIT_TOL0 = {"float64": 8, "float32": 4}  # tol = 0, by compute dtype
# Sequence models (lanes split a dataset's sequences): lanes per fit by (tol > 0), and
# the register cap.  Measured on an H200 (issue-13 HMM batch: 20,000 fits of 20
# sequences, N = 4, V = 8, float64, tol = 0): 4 lanes and 64 registers 6,927 fits/s;
# no cap 9,099; 128 registers 8,628; 2 lanes 9,104; 8 lanes 2,894.
CUDA_LANES_PER_FIT_UNITS = {False: 2, True: 2}
CUDA_MAX_REGISTERS_UNITS = None
# Hidden Markov models with more states than this run on the GPU one fit at a time, each
# time step a tiled matrix product over the sequences (bulkem.engines.cuda.many_states); the bulk
# kernel keeps a lane's state vectors and N x N statistics per lane.
HMM_MANY_STATES = 32
# float32 fits that give up are fitted again in float64 by a second launch
# after their chunk's, with this many lanes per fit (more than 32: a block of
# that many threads per fit; None: as many as a float64 batch uses, which
# makes them the float64 fits to the last bit).  The last chunk's refits are
# not hidden behind other work, so their latency counts: issue-4 batch,
# float32 end to end on an H200, 8 lanes (None) 2.51M fits/s, 32 lanes 2.98M,
# 128 lanes 3.17M, 256 lanes 3.01M (32 and up agree with the float64 fits to
# rounding, not to the bit).
CUDA_LANES_PER_REFIT = 128
CUDA_MAX_REGISTERS = 64  # cap on registers per thread (measured: 64 beats none and 80 on an H200)

# --- CUDA scheduler ---
CUDA_DEVICES = None  # GPU ids to use; None: every visible GPU
# Host threads feeding the GPUs, in all (each GPU gets its share, at least
# one): they share the GIL, so more threads wait on each other.  Measured on
# 2 x H200 (issue-4 batch, float64): one thread per GPU 1.83M fits/s, two
# 1.74M; on one H200 two threads beat one.
CUDA_HOST_THREADS = 2
CUDA_CHUNKS_IN_FLIGHT = 2  # chunks a host thread keeps launched (one stream each)
CUDA_CHUNKS_PER_STREAM = 2  # chunks a host thread gets at least (v6: 2 best; 4, 8 worse)
CUDA_CHUNK_FITS = 1_000_000  # most fits in one launch
CUDA_MIN_CHUNK_FITS = 16_384  # fewest fits worth a launch (about 6 waves on an H100)
CUDA_MEMORY_FRACTION = 0.5  # share of free GPU memory the chunks in flight may take
CUDA_MEMORY_BUDGET = None  # bytes per chunk; None: from free memory (tests set it small)
CUDA_GROUP_BY_SIZE = True  # longest fits first within a launch, similar sizes side by side
PROGRESS_POLL_S = 0.1  # how often a running kernel's finished fits are counted
CUDA_WAIT_POLL_S = 0.0005  # how often a running chunk is asked whether it is done
# A chunk's arrays travel in one buffer each way.  Buffers up to this size are
# page-locked (asynchronous copies at full speed), and up to CUDA_PINNED_POOL
# of them per GPU, each with its device buffer, are kept for later chunks and
# calls (page-locking and device allocation are slow).
CUDA_PINNED_MAX_BYTES = 64 << 20
CUDA_PINNED_POOL = 8

LOG_2PI = math.log(2.0 * math.pi)

# --- Gaussian family and the one-large-dataset regime (issue 5) ---
# A Gaussian component whose variance in a dimension falls to this fraction of
# its mean square (E[x^2]) or below has collapsed onto a point in float64
# terms (the variance is then within rounding of E[x^2] - mean^2).
GAUSS_VAR_RTOL = 1e-12
# A batch runs in the large regime (bulkem.engines.large: each fit spread over
# the whole machine, one after another) when every dataset it fits has at
# least LARGE_MIN_OBS observations and it has few fits: fewer than the CPU's
# Numba threads, or at most LARGE_MAX_FITS_CUDA on the GPU (one warp per fit
# would leave most of it idle).  Otherwise the bulk engines run it.
LARGE_MIN_OBS = 20_000
LARGE_MAX_FITS_CUDA = 64
# CUDA tiled E-step: threads per block (a multiple of WARP_SIZE), observations
# per tile at most (halved until the block's shared arrays fit), the static
# shared memory a block may use, blocks per multiprocessor (None: as many as
# can be resident at once), and a cap on blocks (None: no cap; tests set it).
LARGE_CUDA_THREADS = 128
LARGE_CUDA_TILE = 64
LARGE_CUDA_SHARED_BYTES = 48 * 1024
LARGE_CUDA_BLOCKS_PER_SM = None
LARGE_CUDA_MAX_BLOCKS = None
# CUDA reduction of the per-block partial statistics: statistics per block and
# threads per block (REDUCE_THREADS a multiple of REDUCE_COLS).
LARGE_CUDA_REDUCE_COLS = 16
LARGE_CUDA_REDUCE_THREADS = 256
# Iterations launched between two reads of the device's done flag (iterations
# launched after a fit has stopped return at once).
LARGE_CUDA_CHECK_EVERY = 8
# Marshal the per-iteration kernels' arguments once per fit instead of at every
# launch (numba-cuda internals; the ordinary launch is used where they differ).
LARGE_CUDA_PREPARED_LAUNCH = True

# --- Kalman likelihoods (bulkem.kalman_loglik; issue 15) ---
# The Kalman engines read these when a call starts, so tests can patch them (small
# blocks and chunks, so that the CUDA simulator runs several blocks and the scan
# several levels on tiny inputs).
# Exact filter.
# Series of one model without missing rows share the covariance part of the
# filter (it does not depend on the data): it is computed once, on the host,
# for the longest series, and each series then runs the mean recursion only.
# Used when at least this many series qualify (the shared part costs one
# sequential filter of the longest series).
KALMAN_SHARED_GAINS_MIN_SERIES = 2

# Scan (the time-parallel exact filter).
# Level-0 chunk: time steps one thread (CPU: one task) filters conditionally;
# it is at least CHUNK0 steps, and longer when the batch would otherwise
# make more than TARGET_CHUNKS chunks.  Higher levels combine CHUNK elements
# per thread.  The CPU wants a few chunks per core (then two levels); a GPU
# wants many threads and short sequential runs.
KALMAN_CPU_SCAN_CHUNK0 = 64
KALMAN_CPU_SCAN_CHUNK = 256
KALMAN_CPU_SCAN_CHUNKS_PER_THREAD = 8
KALMAN_CUDA_SCAN_CHUNK0 = 32  # H100, 10^6 steps: RW 2-D 0.56 ms (16: 0.79), AR(10) 20.7 (25.0)
KALMAN_CUDA_SCAN_CHUNK = 8
KALMAN_CUDA_SCAN_TARGET_CHUNKS = 1 << 18
# From this many states on, a warp takes a chunk above level 0 (its lanes share
# the element's matrices in shared memory), this many chunks per block, and level
# 0 keeps a thread per chunk with its largest matrices in shared memory; fewer
# states: a thread per chunk everywhere, the matrices in registers.
KALMAN_CUDA_SCAN_WARP_MIN_NX = 4
KALMAN_CUDA_SCAN_WARPS = 4

# Steady-state scan: a batch of one model without missing rows whose covariance
# recursion settles (a step's predicted covariance within ULPS units in the last
# place of the step before's, at the latest after MAX_STEPS steps) scans means
# alone (models/ssm/scan.py); its first chunk of a series holds the steps before.
# The GPU's level-0 chunk is at least STEADY_CHUNK0 steps (more when the batch
# would make more than the scan's TARGET_CHUNKS), its levels above combine
# STEADY_CHUNK elements per thread.
KALMAN_SCAN_STEADY_ULPS = 4
KALMAN_SCAN_STEADY_MAX_STEPS = 10_000
KALMAN_CUDA_STEADY_CHUNK0 = 64
KALMAN_CUDA_STEADY_CHUNK = 16  # H100, 10^6 steps, chunks of 64: AR(10) 0.33 ms (32: 0.36)

# Splash.
KALMAN_CPU_SPLASH_BLOCK = 256  # time steps per parallel task
KALMAN_SPLASH_BROAD_VAR = 1e6  # default variance of the broad prior that starts each window
# Splash step terms are summed in chunks of this many steps (on the GPU, by the
# first thread of the chunk's threads, in one block), then the chunks of a
# series in order: one order on both engines, and only the chunk sums leave the
# GPU.  At most 1,024 (threads per block).
KALMAN_SPLASH_SUM_CHUNK = 64

# CUDA launches.
KALMAN_CUDA_THREADS = 128  # threads per block of every Kalman kernel (the paper: 128 or 256)

# --- State-space EM (bulkem.fit, family="ar" / "local_level"; issue 15) ---
# The AR coefficients' M-step (the Shumway-Stoffer regression plus the stationary
# prior's gradient) is halved towards the old coefficients until it raises the
# expected log-likelihood, at most this many times (then they stay).
SSM_AR_MAX_HALVINGS = 30
# Lanes that share a fit on the GPU, by (tol > 0): a lane takes whole series, so one
# lane per fit when datasets are single series (the usual case), no idle lanes.
CUDA_LANES_PER_FIT_SERIES = {False: 1, True: 1}
# An AR fit whose companion matrix has a spectral radius at or above this is flagged in
# summary.message: the stationary prior holds it inside the unit circle, but the data
# may not be stationary.
SSM_AR_RADIUS_WARN = 0.999

# --- TMAP family (issue 14) ---
# Random starts (the paper's section 4.1): rates are scaled down so that
# x_max * lambda_max is at most this (the paper's margin from float32's exp
# underflow at about 88).
TMAP_START_MAX_RATE_X = 60.0

# --- the wide regime for models of units (bulkem.engines.wide; issue 14) ---
# A batch runs in the wide regime (each fit over the whole machine, one after
# another) when the model's items are units (sequences, runs), every dataset
# it fits has at least WIDE_MIN_UNITS units and it has few fits: fewer than
# the CPU's Numba threads, or at most WIDE_MAX_FITS_CUDA on the GPU.
WIDE_MIN_UNITS = 20_000
WIDE_MAX_FITS_CUDA = 64
WIDE_REGIME = None  # None: by that rule; True: always (models of units); False: never
# CPU: units per partial sum (fixed, so results do not depend on threads).
WIDE_CPU_CHUNK_UNITS = 1024
# CUDA E-step: threads per block (a multiple of WARP_SIZE); blocks per
# multiprocessor (None: as many as can be resident at once); a cap on blocks
# (None: none; tests set it); the most bytes the threads' forward-vector
# buffers may take (fewer blocks when they would take more).
WIDE_CUDA_THREADS = 128
WIDE_CUDA_BLOCKS_PER_SM = None
WIDE_CUDA_MAX_BLOCKS = None
WIDE_CUDA_BUF_BYTES = 4 << 30
# CUDA reduction of the block partials (one block): threads, and statistics
# summed side by side (REDUCE_THREADS a multiple of REDUCE_COLS).
WIDE_CUDA_REDUCE_THREADS = 256
WIDE_CUDA_REDUCE_COLS = 32
# Iterations launched between two reads of the device's done flag.
WIDE_CUDA_CHECK_EVERY = 8
WIDE_CUDA_MAX_REGISTERS = None  # cap on registers per E-step thread (None: the compiler's)
