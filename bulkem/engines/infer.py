"""What a fitted chain gives for sequences: forward scores, posteriors, Viterbi paths.

The per-sequence functions are written once (:func:`make_units`) and run
over many sequences at once, each with its own model: on the CPU in a
``prange`` loop (:func:`score`, :func:`posteriors`, :func:`viterbi`), on the
GPU one thread per sequence (:func:`score` and :func:`viterbi` with
``backend="cuda"``; their kernels are built here, on first GPU use).

Viterbi works in log space and breaks ties as hmmlearn does: the lowest
state index wins every maximum (the first of equal values), both in the
lattice and in the last step.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from ..kernels.cache import njit_cached
from ..kernels.fastmath import EXP_CONSTS
from ..kernels.scaled import LN2, exponent, pow2
from ..kernels.target import CPU
from ..models.hmm.chain import make_dens

cuda = None  # numba.cuda, imported by _cuda_runners() on first GPU use


class Units(NamedTuple):
    """Compiled per-sequence functions of a chain (see :func:`make_units`)."""

    forward: object
    posterior: object
    viterbi: object


def make_units(model, dtype, target) -> Units:
    """Per-sequence forward, posterior and Viterbi functions of a chain model.

    * ``forward(x, a0, T, work, scratch) -> loglik``;
    * ``posterior(x, a0, T, work, scratch, buf, gamma) -> loglik``: ``gamma[t N + i]``
      the posterior probability of state ``i`` at step ``t`` (``buf``: ``N T`` values);
    * ``viterbi(x, a0, T, work, lw, scratch, lat, back, path) -> logprob``: the most
      probable path into ``path[:T]`` (``lw = log(work)``; ``lat`` ``N``, ``back`` ``N T``
      scratch).

    ``work`` comes from the chain's ``prepare`` (:func:`work_rows`).
    """
    lay = model.layout
    N, K = lay.N, lay.K
    PT, WX, WE = lay.p_trans, lay.w_exit, lay.w_emit
    TERM = model.terminating
    CAT = model.emission.name == "categorical"
    jit = target.jit
    LOGD = model.emission.log_dens
    dens, raw_dens, _ = make_dens(model.emission, dtype, jit)
    XC = EXP_CONSTS
    expo = jit(exponent)
    two = jit(pow2)
    ONE = dtype(1.0)
    ZERO = dtype(0.0)

    def alphas(x, a0, T, work, a, e, nb, buf, keep):
        # the forward vectors in normal form (buf[t N:(t + 1) N] when keep); log-likelihood
        shift = 0.0
        scale = 0
        for t in range(T):
            shift += np.float64(dens(work, WE, N, K, x, a0 + t, e, XC))
            s = ZERO
            for j in range(N):
                if t == 0:
                    v = work[j] * e[j]
                else:
                    acc = ZERO
                    for i in range(N):
                        acc += a[i] * work[PT + i * N + j]
                    v = acc * e[j]
                nb[j] = v
                s += v
            ex = expo(s)
            scale += ex
            sc = two(-ex)
            for j in range(N):
                a[j] = nb[j] * sc
                if keep:
                    buf[t * N + j] = a[j]
        s = ZERO
        for j in range(N):
            s += a[j] * work[WX + j] if TERM else a[j]
        return shift + scale * LN2 + math.log(np.float64(s))

    alphas_f = jit(alphas)

    def forward(x, a0, T, work, scratch):
        return alphas_f(x, a0, T, work, scratch[0:N], scratch[N:2 * N], scratch[2 * N:3 * N],
                        scratch, False)

    def posterior(x, a0, T, work, scratch, buf, gamma):
        a = scratch[0:N]
        e = scratch[N:2 * N]
        b = scratch[2 * N:3 * N]
        nb = scratch[3 * N:4 * N]
        ll = alphas_f(x, a0, T, work, a, e, nb, buf, True)
        for i in range(N):
            b[i] = work[WX + i] if TERM else ONE
        t = T - 1
        while True:
            z = ZERO
            for i in range(N):
                z += buf[t * N + i] * b[i]
            for i in range(N):
                gamma[t * N + i] = buf[t * N + i] * b[i] / z
            if t == 0:
                break
            dens(work, WE, N, K, x, a0 + t, e, XC)
            sb = ZERO
            for i in range(N):
                acc = ZERO
                for j in range(N):
                    acc += work[PT + i * N + j] * e[j] * b[j]
                nb[i] = acc
                sb += acc
            sc = two(-expo(sb))
            for i in range(N):
                b[i] = nb[i] * sc
            t -= 1
        return ll

    def viterbi(x, a0, T, work, lw, scratch, lat, back, path):
        # lw = log(work), computed once on the host: the same bits on every engine, so that
        # the engines' paths are the same, near ties included (categorical emissions; others
        # take their log densities from dens)
        e = scratch[N:2 * N]
        nb = scratch[2 * N:3 * N]
        for t in range(T):
            m = 0.0
            if not CAT:
                m = raw_dens(work, WE, N, K, x, a0 + t, e)
            for j in range(N):
                if CAT:  # (a missing step, NaN: marginalised, log 1)
                    v = x[a0 + t]
                    le = 0.0 if math.isnan(v) else lw[WE + j * K + int(v)]
                elif LOGD:  # the log density itself, never rounded through exp and log
                    le = m - e[j]
                else:
                    le = math.log(e[j]) + m
                if t == 0:
                    nb[j] = lw[j] + le
                else:
                    best = lat[0] + lw[PT + j]
                    arg = 0
                    for i in range(1, N):
                        v = lat[i] + lw[PT + i * N + j]
                        if v > best:
                            best = v
                            arg = i
                    nb[j] = best + le
                    back[t * N + j] = arg
            for j in range(N):
                lat[j] = nb[j]
        if TERM:
            for j in range(N):
                lat[j] += lw[WX + j]
        best = lat[0]
        arg = 0
        for j in range(1, N):
            if lat[j] > best:
                best = lat[j]
                arg = j
        path[T - 1] = arg
        for t in range(T - 1, 0, -1):
            arg = int(back[t * N + arg])
            path[t - 1] = arg
        return best

    return Units(jit(forward), jit(posterior), jit(viterbi))


_cpu: dict = {}


def _cpu_runners(model):
    if model.key in _cpu:
        return _cpu[model.key]
    lay = model.layout
    N, NW = lay.N, lay.n_work
    prepare = model.pieces(np.float64, CPU).prepare
    units = make_units(model, np.float64, CPU)
    fwd, post, vit = units.forward, units.posterior, units.viterbi

    @njit_cached(("hmm-infer", model.key), parallel=True)
    def work_rows(params, out):
        for k in prange(len(params)):
            scratch = np.empty(1)
            base = prepare((), params[k], scratch, scratch, out[k])
            if not base == 0.0:  # a parameter out of its domain
                out[k, :] = np.nan

    @njit_cached(("hmm-infer", model.key), parallel=True)
    def run_score(work, which, x, offsets, out):
        for u in prange(len(offsets) - 1):
            scratch = np.empty(4 * N)
            out[u] = fwd(x, offsets[u], offsets[u + 1] - offsets[u], work[which[u]], scratch)

    @njit_cached(("hmm-infer", model.key), parallel=True)
    def run_posterior(work, which, x, offsets, gamma, out):
        for u in prange(len(offsets) - 1):
            scratch = np.empty(4 * N)
            T = offsets[u + 1] - offsets[u]
            buf = np.empty(N * T)
            out[u] = post(x, offsets[u], T, work[which[u]], scratch, buf,
                          gamma[offsets[u] * N:offsets[u + 1] * N])

    @njit_cached(("hmm-infer", model.key), parallel=True)
    def run_viterbi(work, lw, which, x, offsets, path, out):
        for u in prange(len(offsets) - 1):
            scratch = np.empty(4 * N)
            T = offsets[u + 1] - offsets[u]
            lat = np.empty(N)
            back = np.zeros(N * T, dtype=np.int64)
            out[u] = vit(x, offsets[u], T, work[which[u]], lw[which[u]], scratch, lat, back,
                         path[offsets[u]:offsets[u + 1]])

    _cpu[model.key] = (work_rows, run_score, run_posterior, run_viterbi, NW)
    return _cpu[model.key]


def work_rows(model, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each model's per-step coefficients (the chain's ``prepare``) and their logs, on the host.

    Rows of NaN for parameters out of their domain.  The logs are NumPy's, the
    same bits for every engine.
    """
    run, *_, NW = _cpu_runners(model)
    work = np.empty((len(params), NW))
    run(np.ascontiguousarray(params, np.float64), work)
    with np.errstate(divide="ignore", invalid="ignore"):
        return work, np.log(work)


_gpu: dict = {}


def _cuda_runners(model):
    """Forward scores and Viterbi paths of many sequences on the GPU, a thread per sequence."""
    global cuda
    if cuda is None:  # the first GPU use: a CPU-only session never imports numba.cuda
        from .cuda.compat import cuda
    if model.key in _gpu:
        return _gpu[model.key]
    from numba import float64

    from .cuda import bulk

    lay = model.layout
    N = lay.N
    units = make_units(model, np.float64, bulk.target(1, lay.n_stats))
    fwd, vit = units.forward, units.viterbi
    NS = 4 * N

    @cuda.jit
    def run_score(work, which, x, offsets, out):
        u = cuda.grid(1)
        if u >= offsets.shape[0] - 1:
            return
        scratch = cuda.local.array(NS, float64)
        out[u] = fwd(x, offsets[u], offsets[u + 1] - offsets[u], work[which[u]], scratch)

    @cuda.jit
    def run_viterbi(work, lw, which, x, offsets, path, back, out):
        u = cuda.grid(1)
        if u >= offsets.shape[0] - 1:
            return
        scratch = cuda.local.array(NS, float64)
        lat = cuda.local.array(N, float64)
        a, b = offsets[u], offsets[u + 1]
        out[u] = vit(x, a, b - a, work[which[u]], lw[which[u]], scratch, lat, back[a * N:b * N],
                     path[a:b])

    _gpu[model.key] = (run_score, run_viterbi)
    return _gpu[model.key]


THREADS = 128  # threads per block of the GPU's per-sequence kernels


def _layout(model, sequences: list[np.ndarray]):
    x = np.ascontiguousarray(np.concatenate([np.asarray(s, np.float64) for s in sequences])
                             if sequences else np.empty(0)).reshape(-1)
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sequences], out=offsets[1:])
    return x, offsets


def score(model, params: np.ndarray, which: np.ndarray, sequences: list,
          backend: str = "cpu") -> np.ndarray:
    """Log-likelihood of each sequence under its model ``params[which[k]]``.

    Parameters
    ----------
    model : HMMModel
    params : ndarray of shape (n_models, n_params)
    which : ndarray of shape (n_sequences,)
    sequences : list of ndarray
    backend : {"cpu", "cuda"}
        Every core, or a GPU thread per sequence.

    Returns
    -------
    ndarray of shape (n_sequences,)
        Without the part no parameter changes (``-log(x!)`` of Poisson counts).
    """
    x, offsets = _layout(model, sequences)
    out = np.empty(len(sequences))
    work, _ = work_rows(model, params)
    which = np.asarray(which, np.int64)
    if backend == "cuda":
        run = _cuda_runners(model)[0]
        n = len(sequences)
        if n:
            dev_out = cuda.device_array(n)
            run[(n + THREADS - 1) // THREADS, THREADS](
                cuda.to_device(work), cuda.to_device(which), cuda.to_device(x),
                cuda.to_device(offsets), dev_out)
            dev_out.copy_to_host(out)
        return out
    _cpu_runners(model)[1](work, which, x, offsets, out)
    return out


def posteriors(model, params, which, sequences) -> tuple[list[np.ndarray], np.ndarray]:
    """Posterior state probabilities ``(T, N)`` of each sequence, and its log-likelihood (CPU)."""
    x, offsets = _layout(model, sequences)
    N = model.n_states
    gamma = np.empty(offsets[-1] * N)
    out = np.empty(len(sequences))
    _cpu_runners(model)[2](work_rows(model, params)[0], np.asarray(which, np.int64), x,
                           offsets, gamma, out)
    g = gamma.reshape(-1, N)
    return [g[offsets[k]:offsets[k + 1]] for k in range(len(sequences))], out


def viterbi(model, params, which, sequences,
            backend: str = "cpu") -> tuple[list[np.ndarray], np.ndarray]:
    """The most probable state path (0-based) of each sequence and its log-probability.

    ``backend``: every core (``"cpu"``) or a GPU thread per sequence (``"cuda"``).
    """
    x, offsets = _layout(model, sequences)
    path = np.empty(offsets[-1], dtype=np.int64)
    out = np.empty(len(sequences))
    work, lw = work_rows(model, params)
    which = np.asarray(which, np.int64)
    if backend == "cuda" and len(sequences):
        run = _cuda_runners(model)[1]
        n = len(sequences)
        dev_path = cuda.device_array(len(path), np.int64)
        dev_back = cuda.device_array(len(x) // model.values_per_obs() * model.n_states, np.int64)
        dev_out = cuda.device_array(n)
        run[(n + THREADS - 1) // THREADS, THREADS](
            cuda.to_device(work), cuda.to_device(lw), cuda.to_device(which), cuda.to_device(x),
            cuda.to_device(offsets), dev_path, dev_back, dev_out)
        dev_path.copy_to_host(path)
        dev_out.copy_to_host(out)
    elif len(sequences):
        _cpu_runners(model)[3](work, lw, which, x, offsets, path, out)
    return [path[offsets[k]:offsets[k + 1]] for k in range(len(sequences))], out
