"""Random starts of hidden Markov models, each determined by (seed, dataset, start) alone.

* startprob and every row of transmat: flat Dirichlet draws (normalised
  exponentials), from the draw counters at ``CHAIN_COUNTER`` on;
* the emission of each state from a random subset of the dataset's
  observations, as the mixtures draw their components (counters from 0):
  categorical: the subset's symbol frequencies with one pseudo-count per
  symbol of the dataset's alphabet (``V`` observations per state; with an
  inferred ``n_symbols``, the dataset's own symbols ``0 .. max``, the larger
  ones 0); Gaussian: the mean and variance of
  3 observations (the mixtures' ``subset_init``), or k-means++ centres
  (``init_method="kmeans++"``, the mixtures' ``centre_init``); Poisson: the
  mean of 3 observations plus one half.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ...fitting.starts import draw_distinct, kmeanspp_centres, seed_key, uniform
from ..mixture import gaussian as gauss_mix

CHAIN_COUNTER = 1 << 40  # first draw counter of the chain's Dirichlet draws
POISSON_SUBSET = 3
GAUSS_SUBSET = 3


@njit(inline="always")
def _dirichlet(seed, key, start, counter, out, lo, n):
    s = 0.0
    for j in range(n):
        v = -math.log(1.0 - uniform(seed, key, start, counter + j))
        out[lo + j] = v
        s += v
    for j in range(n):
        out[lo + j] /= s


@njit(inline="always")
def _chain(N, seed, key, start, out):
    c = CHAIN_COUNTER
    _dirichlet(seed, key, start, c, out, 0, N)
    for i in range(N):
        _dirichlet(seed, key, start, c + N * (i + 1), out, N + i * N, N)


@njit(parallel=True, cache=True)
def _draw_categorical(values, offsets, fit_ds, fit_start, keys, seed, N, V, own, out):
    PE = N + N * N
    for f in prange(len(fit_ds)):
        d = fit_ds[f]
        x = values[offsets[d]:offsets[d + 1]]
        key, start = keys[d], fit_start[f]
        _chain(N, seed, key, start, out[f])
        W = V  # the dataset's alphabet: the batch's, or (own) its own symbols 0 .. max
        if own:
            W = int(x.max()) + 1
        k = min(W, len(x))
        idx = np.empty((N, k), dtype=np.int64)
        counter = 0
        for i in range(N):
            counter = draw_distinct(len(x), k, seed, key, start, counter, idx, i)
            for v in range(V):
                out[f, PE + i * V + v] = 1.0 if v < W else 0.0
            for j in range(k):
                out[f, PE + i * V + int(x[idx[i, j]])] += 1.0
            for v in range(W):
                out[f, PE + i * V + v] /= k + W


@njit(parallel=True, cache=True)
def _draw_gaussian(values, offsets, fit_ds, fit_start, keys, seed, N, kmeans, out):
    D = values.shape[1]
    PE = N + N * N
    P = 1 + 2 * D  # the mixtures' layout: weight, means, variances
    for f in prange(len(fit_ds)):
        d = fit_ds[f]
        x = values[offsets[d]:offsets[d + 1]]
        key, start = keys[d], fit_start[f]
        _chain(N, seed, key, start, out[f])
        tmp = np.empty(N * P)
        if kmeans:
            centres = np.empty(N, dtype=np.int64)
            kmeanspp_centres(x, seed, key, start, centres)
            gauss_mix.centre_init(x, centres, tmp)
        else:
            k = min(GAUSS_SUBSET, len(x))
            idx = np.empty((N, k), dtype=np.int64)
            counter = 0
            for i in range(N):
                counter = draw_distinct(len(x), k, seed, key, start, counter, idx, i)
            gauss_mix.subset_init(x, idx, tmp)
        for i in range(N):
            for q in range(2 * D):
                out[f, PE + i * 2 * D + q] = tmp[i * P + 1 + q]


@njit(parallel=True, cache=True)
def _draw_poisson(values, offsets, fit_ds, fit_start, keys, seed, N, out):
    PE = N + N * N
    for f in prange(len(fit_ds)):
        d = fit_ds[f]
        x = values[offsets[d]:offsets[d + 1]]
        key, start = keys[d], fit_start[f]
        _chain(N, seed, key, start, out[f])
        k = min(POISSON_SUBSET, len(x))
        idx = np.empty((N, k), dtype=np.int64)
        counter = 0
        for i in range(N):
            counter = draw_distinct(len(x), k, seed, key, start, counter, idx, i)
            s = 0.0
            for j in range(k):
                s += x[idx[i, j]]
            out[f, PE + i] = (s + 0.5) / k


def draw(model, data, keys, seed, method, fit_ds, fit_start, out) -> None:
    """Random starts of fits (valid-dataset index, start number) into ``out`` (n, n_params),
    from the observed (not missing) steps of each dataset."""
    values, offsets = data.values, data.value_offsets
    missing = np.isnan(values.reshape(len(values), -1)).any(axis=1)
    if missing.any():  # (the datasets without missing steps draw the same starts)
        values = values[~missing]
        offsets = np.r_[0, np.cumsum(~missing)][offsets]
    sk = seed_key(seed)
    name = model.emission.name
    if name == "categorical":
        _draw_categorical(values, offsets, fit_ds, fit_start, keys, sk, model.n_states,
                          model.K, model.own_alphabet, out)
    elif name == "gaussian":
        x = values.reshape(len(values), -1)
        _draw_gaussian(x, offsets, fit_ds, fit_start, keys, sk, model.n_states,
                       method == "kmeans++", out)
    else:
        _draw_poisson(values, offsets, fit_ds, fit_start, keys, sk, model.n_states, out)
