"""The GPU scan's warp-per-chunk kernels (``bulkem.engines.cuda.scan_warp``).

Under the simulator: the combines of a warp give the bits of ``scan.py``'s
one-thread combine (the prefix combine those of the full one, for ``b, C``);
the whole scan, switched to the warp kernels for every model, gives the
NumPy oracle's numbers and the thread-per-chunk kernels' bits on a ragged
batch (missing rows, a one-step series, a failing first step, a model per
series), for the three structures of ``F``.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import float64
from test_kalman import ar3, assert_rel, ref_loglik, rw2, trend

from bulkem import StateSpace
from bulkem.engines.cuda import cuda
from bulkem.models.ssm.kalman import make_kalman
from bulkem.models.ssm.scan import element_size, make_scan
from bulkem.models.ssm.statespace import DENSE
from bulkem.tuning import Tuning

pytestmark = pytest.mark.cuda


def same(want, got):
    """The same bits under the simulator (no fused multiply-adds on either side); on a GPU,
    whose compiler fuses them (the CPU's does not), close."""
    from bulkem.engines.cuda import SIMULATED

    if SIMULATED:
        assert want.tobytes() == got.tobytes()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _elements(nx: int, n: int, rng) -> np.ndarray:
    """``n`` random elements (rows) with symmetric positive definite ``C`` and ``J``."""
    out = np.empty((n, element_size(nx)))
    for r in range(n):
        X, Y = rng.normal(size=(nx, nx)), rng.normal(size=(nx, nx))
        out[r] = np.concatenate([rng.normal(size=nx * nx), rng.normal(size=nx),
                                 (X @ X.T + 0.1 * np.eye(nx)).ravel(), rng.normal(size=nx),
                                 (Y @ Y.T).ravel()])
    return out


@pytest.mark.parametrize("nx", [3, 5])
def test_warp_combines_give_the_bits_of_scan_py(seed, nx):
    from bulkem.engines.cuda.scan_warp import warp_programs

    rng = np.random.default_rng(seed)
    steps = make_kalman(nx, 1, DENSE, np.float64, lambda f: f)
    sc = make_scan(nx, 1, DENSE, np.float64, lambda f: f, steps)
    w = warp_programs(nx, np.float64, 1)
    combine, combine_prefix = w["combine"], w["combine_prefix"]
    ne, npx = w["ne"], w["np"]
    E1, E2 = _elements(nx, 1, rng)[0], _elements(nx, 1, rng)[0]
    nxx = nx * nx

    @cuda.jit
    def kernel(e1, e2, out, out_prefix):
        sh = cuda.shared.array(4096, float64)
        lane = cuda.threadIdx.x
        a, b = sh[0:ne], sh[ne:2 * ne]
        m = sh[2 * ne:3 * ne + nx]  # (NX x (3 NX + 1) + NX fits)
        o = 3 * ne + nx
        t, v, p = sh[o:o + nxx], sh[o + nxx:o + nxx + nx], sh[o + nxx + nx:o + nxx + nx + npx]
        for q in range(lane, ne, 32):
            a[q] = e1[q]
            b[q] = e2[q]
        for q in range(lane, npx, 32):
            p[q] = e1[nxx + q]  # (b, C of element 1)
        cuda.syncwarp()
        combine(a, b, m, t, v, lane)
        combine_prefix(p, b, m, t, lane)
        for q in range(lane, ne, 32):
            out[q] = a[q]
        for q in range(lane, npx, 32):
            out_prefix[q] = p[q]

    assert 3 * ne + 2 * nx + nxx + npx <= 4096 and nx * (3 * nx + 2) <= ne + nx
    out, out_prefix = np.zeros(ne), np.zeros(npx)
    kernel[1, 32](E1, E2, out, out_prefix)
    cuts = np.cumsum([nxx, nx, nxx, nx])  # A, b, C, eta, J
    a1, b1, c1, e1, j1 = (x.copy() for x in np.split(E1, cuts))
    parts2 = np.split(E2, cuts)
    scratch = [np.zeros(nxx), np.zeros(nxx), np.zeros(nxx), np.zeros(nx), np.zeros(nx),
               np.zeros(nxx)]
    sc.combine(a1, b1, c1, e1, j1, *parts2, *scratch)
    same(np.concatenate([a1, b1, c1, e1, j1]), out)
    # a prefix: element 1 with A, eta, J = 0; the full combine's (b, C), bit for bit
    a1, b1, c1 = np.zeros(nxx), E1[nxx:nxx + nx].copy(), E1[nxx + nx:2 * nxx + nx].copy()
    e1, j1 = np.zeros(nx), np.zeros(nxx)
    sc.combine(a1, b1, c1, e1, j1, *parts2, *scratch)
    same(np.concatenate([b1, c1]), out_prefix)
    b1, c1 = E1[nxx:nxx + nx].copy(), E1[nxx + nx:2 * nxx + nx].copy()
    sc.combine_prefix(b1, c1, *parts2, scratch[0], scratch[1], scratch[3], scratch[2])
    same(np.concatenate([b1, c1]), out_prefix)


def test_warp_scan_matches_oracle_and_thread_kernels(seed):
    from bulkem.engines.cuda import kalman as kalman_cuda
    from bulkem.models.ssm.linear import pack_series

    rng = np.random.default_rng(seed)
    exact_state = StateSpace.ar([0.5, -0.3, 0.1], sigma2=1.3, obs_var=0.0, P0=np.zeros((3, 3)))
    a = [ar3().simulate(n, rng)[:, 0] for n in (9, 1, 14)]
    a[2][[0, 4, 5]] = np.nan
    trends = [trend(0.1 * (k + 1), 0.01, 1.0 + k) for k in range(2)]
    t = [m.simulate(n, rng)[:, 0] for m, n in zip(trends, (10, 7), strict=True)]
    t[0][3] = np.nan
    r = [rw2().simulate(11, rng)]
    r[0][[2, 6]] = np.nan
    cases = [(a + [a[0][:5]], [ar3()] * 3 + [exact_state], [9, 1, 11, 5], [-1, -1, -1, 0]),
             (t, trends, [9, 7], [-1, -1]), (r, [rw2()], [9], [-1])]
    small = Tuning(kalman_cuda_scan_warps=2, kalman_cuda_threads=4)
    for ys, models, n_obs, fail in cases:
        batch = pack_series([(k, y.reshape(len(y), -1)) for k, y in enumerate(ys)], models,
                            False, np.dtype("float64"))[0]
        got = {}
        # the thread kernels; then warps above level 0 (level 0 by threads, its matrices
        # in shared memory)
        for min_nx in (99, 1):
            got[min_nx] = out = kalman_cuda.scan(
                batch, chunk0=3, chunk=2, tuning=small.replace(kalman_cuda_scan_warp_min_nx=min_nx))
            ok = [k for k, f in enumerate(fail) if f < 0]
            assert_rel(out.loglik[ok], [ref_loglik(ys[k], models[k]) for k in ok])
            assert list(out.n_obs[ok]) == [n_obs[k] for k in ok]
            assert list(out.fail) == fail
            same(got[99].loglik[ok], out.loglik[ok])
