"""Random starts (random subsets or k-means++), each determined by (seed, dataset, start) alone.

A counter-based generator (SplitMix64 finaliser over the key
``(seed, dataset key, start, draw counter)``) gives every draw its own
number, so a start does not depend on the batch order, the chunking, the
backend or the thread count.  The dataset key is a hash of the dataset's
values, not of its position in the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..kernels.cache import njit_cached
from ..tuning import DEFAULT

# Every way of drawing random starts; each model offers some of them ("random":
# the model's own draws: the TMAP's, section 4.1 of its paper; the state-space
# families' from each dataset's autocovariances).
INIT_METHODS = ("subset", "kmeans++", "dirichlet", "random")

_U = np.uint64
_M1 = _U(0xBF58476D1CE4E5B9)
_M2 = _U(0x94D049BB133111EB)
_GOLDEN = _U(0x9E3779B97F4A7C15)
_S30, _S27, _S31, _S11 = _U(30), _U(27), _U(31), _U(11)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53


@njit(inline="always")
def mix64(z):
    """SplitMix64 finaliser: a bijective, well-mixed map of uint64."""
    z = z + _GOLDEN
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(inline="always")
def uniform(seed, key, start, counter):
    """Uniform double in [0, 1) for one draw."""
    h = mix64(mix64(mix64(seed ^ key) ^ _U(start)) ^ _U(counter))
    return float(h >> _S11) * _TO_UNIT


@njit(parallel=True, cache=True)
def _hash_rows(bits, offsets, width, big):
    """One chain of ``mix64`` over each dataset's words; 0 for those of ``big`` words or more."""
    n = len(offsets) - 1
    out = np.zeros(n, dtype=np.uint64)
    for k in prange(n):
        if (offsets[k + 1] - offsets[k]) * width >= big:
            continue
        h = _U(offsets[k + 1] - offsets[k])
        for j in range(offsets[k] * width, offsets[k + 1] * width):
            h = mix64(h ^ bits[j])
        out[k] = h
    return out


@njit(parallel=True, cache=True)
def _hash_blocks(bits, n_obs, block):
    """One large dataset's key: a chain per block of words (in parallel), then over the blocks."""
    nb = (len(bits) + block - 1) // block
    hb = np.empty(nb, dtype=np.uint64)
    for b in prange(nb):
        h = _U(b)
        for j in range(b * block, min(len(bits), (b + 1) * block)):
            h = mix64(h ^ bits[j])
        hb[b] = h
    h = _U(n_obs)
    for b in range(nb):
        h = mix64(h ^ hb[b])
    return h


def dataset_keys(values: np.ndarray, offsets: np.ndarray,
                 blocked_min: int = DEFAULT.hash_blocked_min_words,
                 block_words: int = DEFAULT.hash_block_words) -> np.ndarray:
    """A 64-bit key per dataset, hashed from its float64 values.

    A dataset of fewer than ``blocked_min`` float64 words
    (``Tuning.hash_blocked_min_words``) is one chain of ``mix64`` over them; a larger
    one, one chain per block of ``block_words`` (``Tuning.hash_block_words``), in
    parallel, and a chain over those (a single chain over 7.4 million words took 37 ms,
    the largest host cost of a one-large-dataset GPU fit).  Either way the key depends
    on the dataset's values alone.

    Parameters
    ----------
    values : ndarray of shape (n_total,) or (n_total, n_dims), float64
    offsets : ndarray of shape (n_datasets + 1,)

    Returns
    -------
    ndarray of shape (n_datasets,), uint64
    """
    width = 1 if values.ndim == 1 else values.shape[1]
    bits = np.ascontiguousarray(values, dtype=np.float64).reshape(-1).view(np.uint64)
    offsets = offsets.astype(np.int64)
    big = blocked_min
    out = _hash_rows(bits, offsets, width, big)
    for k in np.flatnonzero(np.diff(offsets) * width >= big):
        lo, hi = offsets[k] * width, offsets[k + 1] * width
        out[k] = _hash_blocks(bits[lo:hi], offsets[k + 1] - offsets[k], block_words)
    return out


def seed_key(seed: int) -> np.uint64:
    """The uint64 form of a user seed."""
    return np.uint64(int(seed) % 2**64)


SUBSET_DRAW_LIMIT = 1000  # redraws allowed to find distinct indices


@njit(inline="always")
def draw_distinct(n, k, seed, key, start, counter, idx, row):
    """Draw k distinct indices in [0, n) into idx[row, :k]; return the next counter."""
    for j in range(k):
        for _ in range(SUBSET_DRAW_LIMIT):
            c = min(int(uniform(seed, key, start, counter) * n), n - 1)
            counter += 1
            fresh = True
            for q in range(j):
                if idx[row, q] == c:
                    fresh = False
            if fresh:
                break
        idx[row, j] = c
    return counter


_subset_cache: dict = {}


def subset_starts(family, n_components: int, values, offsets, fit_ds, fit_start, keys, seed,
                  out=None):
    """Random-subset starting values for every fit.

    For each component, ``family.subset_size`` observations are drawn without
    replacement and the family's ``subset_init`` turns them into that
    component's starting parameters; weights start equal.

    Parameters
    ----------
    family : Family
    n_components : int
    values, offsets : packed valid datasets
    fit_ds : ndarray of shape (n_fits,)
        Valid-dataset index of each fit.
    fit_start : ndarray of shape (n_fits,)
        Start number of each fit.
    keys : ndarray of shape (n_valid,), uint64
        Dataset keys from :func:`dataset_keys`.
    seed : int
    out : ndarray of shape (n_fits, n_params), float64, optional
        Written in place when given.

    Returns
    -------
    ndarray of shape (n_fits, n_params), float64
    """
    kernel = _subset_cache.get(family.name)
    if kernel is None:
        kernel = _subset_cache[family.name] = _make_subset_kernel(family.subset_init, family.name)
    n_dims = 1 if values.ndim == 1 else values.shape[1]
    if out is None:
        out = np.empty((len(fit_ds), family.n_params(n_components, n_dims)))
    kernel(values, offsets, fit_ds, fit_start, keys, seed_key(seed),
           n_components, family.subset_size(n_dims), out)
    return out


def _make_subset_kernel(init_fn, name: str):
    @njit_cached(("subset", name), parallel=True)
    def kernel(values, offsets, fit_ds, fit_start, keys, seed, m, k, out):
        for f in prange(len(fit_ds)):
            d = fit_ds[f]
            x = values[offsets[d] : offsets[d + 1]]
            idx = np.empty((m, k), dtype=np.int64)
            counter = 0
            for comp in range(m):
                counter = draw_distinct(len(x), k, seed, keys[d], fit_start[f], counter, idx, comp)
            init_fn(x, idx, out[f])

    return kernel


@njit(inline="always")
def kmeanspp_centres(x, seed, key, start, centres):
    """k-means++ seeding: fill ``centres`` with indices of distinct-ish rows of x.

    The first centre is uniform over the observations; each next one is drawn
    with probability proportional to the squared Euclidean distance to the
    nearest centre so far (uniformly again if every distance is zero).
    Every draw is ``uniform(seed, key, start, counter)``, so the centres
    depend on (seed, dataset values, start) alone.
    """
    n, D = x.shape
    counter = 0
    c = min(int(uniform(seed, key, start, counter) * n), n - 1)
    counter += 1
    centres[0] = c
    dist = np.empty(n)
    for i in range(n):
        s = 0.0
        for d in range(D):
            z = x[i, d] - x[c, d]
            s += z * z
        dist[i] = s
    for j in range(1, len(centres)):
        total = 0.0
        for i in range(n):
            total += dist[i]
        u = uniform(seed, key, start, counter)
        counter += 1
        if total > 0.0:
            target = u * total
            acc = 0.0
            c = -1
            for i in range(n):
                acc += dist[i]
                if acc > target and dist[i] > 0.0:
                    c = i
                    break
            if c < 0:  # rounding left target past the last positive distance
                for i in range(n - 1, -1, -1):
                    if dist[i] > 0.0:
                        c = i
                        break
        else:
            c = min(int(u * n), n - 1)
        centres[j] = c
        for i in range(n):
            s = 0.0
            for d in range(D):
                z = x[i, d] - x[c, d]
                s += z * z
            if s < dist[i]:
                dist[i] = s


_centre_cache: dict = {}


def kmeanspp_starts(family, n_components: int, values, offsets, fit_ds, fit_start, keys, seed,
                    out=None, sample_obs: int = DEFAULT.kmeans_sample_obs,
                    sample_per_component: int = DEFAULT.kmeans_sample_per_component):
    """k-means++ starting values for every fit.

    For each fit, :func:`kmeanspp_centres` picks ``n_components`` centres
    among the dataset's observations and the family's ``centre_init`` turns
    them into starting parameters (for the Gaussian family: means at the
    centres, variances from the observations nearest each centre, equal
    weights).  Datasets of more than ``sample_obs`` observations (at least
    ``sample_per_component`` per component; ``Tuning.kmeans_sample_obs`` and
    ``kmeans_sample_per_component``) are seeded from a random sample of that many
    (:func:`kmeanspp_rows`).  Arguments and result as :func:`subset_starts`.

    Raises
    ------
    ValueError
        If the family has no ``centre_init``.
    """
    if family.centre_init is None:
        raise ValueError(
            f"init_method='kmeans++' is not available for the {family.name!r} family; "
            "use init_method='subset'."
        )
    kernel = _centre_cache.get(family.name)
    if kernel is None:
        kernel = _centre_cache[family.name] = _make_centre_kernel(family.centre_init, family.name)
    x = values if values.ndim == 2 else values[:, None]
    if out is None:
        out = np.empty((len(fit_ds), family.n_params(n_components, x.shape[1])))
    size = max(sample_obs, sample_per_component * n_components)
    kernel(x, offsets, fit_ds, fit_start, keys, seed_key(seed), n_components, size, out)
    return out


# Counters of the sample's draws (kmeanspp_rows): beyond any counter of the seeding.
_SAMPLE_COUNTER = 1 << 40


@njit  # (not inlined: a prange loop would hoist its allocation out of the branch)
def kmeanspp_rows(x, seed, key, start, size):
    """The rows k-means++ works on: all of ``x``, or ``size`` of them drawn for large ``x``.

    A dataset of more than ``size`` observations is represented by ``size``
    rows drawn uniformly with replacement (draws ``uniform(seed, key, start,
    _SAMPLE_COUNTER + k)``), in the dataset's order: seeding and the family's
    ``centre_init`` then cost ``O(size M D)`` instead of ``O(n M D)``.
    """
    n = x.shape[0]
    if n <= size:
        return x
    idx = np.empty(size, dtype=np.int64)
    for k in range(size):
        idx[k] = min(int(uniform(seed, key, start, _SAMPLE_COUNTER + k) * n), n - 1)
    idx.sort()
    return x[idx]


def _make_centre_kernel(init_fn, name: str):
    @njit_cached(("kmeans++", name), parallel=True)
    def kernel(values, offsets, fit_ds, fit_start, keys, seed, m, size, out):
        for f in prange(len(fit_ds)):
            d = fit_ds[f]
            x = kmeanspp_rows(values[offsets[d] : offsets[d + 1]], seed, keys[d], fit_start[f],
                              size)
            centres = np.empty(m, dtype=np.int64)
            kmeanspp_centres(x, seed, keys[d], fit_start[f], centres)
            init_fn(x, centres, out[f])

    return kernel


@dataclass
class StartPlan:
    """How a batch's starting values are drawn; the engines call :meth:`fill`.

    Attributes
    ----------
    draw : callable
        ``draw(fit_ds, fit_start, out) -> out``: random starts of fits
        (valid-dataset index, start number), written into ``out`` of shape
        ``(n, n_params)`` (a new array when ``out`` is None).  Each start must
        depend on (seed, dataset values, start number) alone.
    user : ndarray of shape (n_user, n_params) or None
        The user's starts, which come first in every dataset.
    """

    draw: Callable
    user: np.ndarray | None = None

    def fill(self, fit_ds: np.ndarray, fit_start: np.ndarray, out: np.ndarray) -> None:
        """Write the starting values of fits (dataset, start number) into ``out``.

        Parameters
        ----------
        fit_ds, fit_start : ndarray of shape (n,)
            Valid-dataset index and start number of each fit.
        out : ndarray of shape (n, n_params)
        """
        n_user = 0 if self.user is None else len(self.user)
        if n_user:
            mine = fit_start < n_user
            out[mine] = self.user[fit_start[mine]]
            rest = ~mine
            if not rest.any():
                return
            fit_ds, fit_start = fit_ds[rest], fit_start[rest]
        drawn = self.draw(fit_ds, fit_start, None if n_user else out)
        if n_user:
            out[rest] = drawn
