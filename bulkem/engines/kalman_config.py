"""Tunable numbers of the Kalman engines (to move into bulkem/config.py).

The engines read these when a call starts, so tests can patch them (small
blocks and chunks, so that the CUDA simulator runs several blocks and the
scan several levels on tiny inputs).
"""

from __future__ import annotations

# --- exact filter ---
# Series of one model without missing rows share the covariance part of the
# filter (it does not depend on the data): it is computed once, on the host,
# for the longest series, and each series then runs the mean recursion only.
# Used when at least this many series qualify (the shared part costs one
# sequential filter of the longest series).
SHARED_GAINS_MIN_SERIES = 2

# --- scan (time-parallel exact filter) ---
# Level-0 chunk: time steps one thread (CPU: one task) filters conditionally;
# it is at least CHUNK0 steps, and longer when the batch would otherwise
# make more than TARGET_CHUNKS chunks.  Higher levels combine CHUNK elements
# per thread.  The CPU wants a few chunks per core (then two levels); a GPU
# wants many threads and short sequential runs.
CPU_SCAN_CHUNK0 = 64
CPU_SCAN_CHUNK = 256
CPU_SCAN_CHUNKS_PER_THREAD = 8
CUDA_SCAN_CHUNK0 = 16
CUDA_SCAN_CHUNK = 8
CUDA_SCAN_TARGET_CHUNKS = 1 << 18

# --- splash ---
CPU_SPLASH_BLOCK = 256  # time steps per parallel task
SPLASH_BROAD_VAR = 1e6  # default variance of the broad prior that starts each window
# Splash step terms are summed in chunks of this many steps (on the GPU, a
# thread per chunk), then the chunks of a series in order: one order on both
# engines, and only the chunk sums leave the GPU.
SPLASH_SUM_CHUNK = 64

# --- CUDA launches ---
CUDA_THREADS = 128  # threads per block of every Kalman kernel (the paper: 128 or 256)
