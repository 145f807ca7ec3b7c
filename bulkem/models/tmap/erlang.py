"""The Erlang emission of a TMAP's branches: a hook set of :mod:`bulkem.models.hmm.emissions`.

Branch ``i`` has a fixed integer order ``r_i`` (a compile-time constant of
the hooks, closed over by :func:`erlang`) and a rate ``lambda_i``:

    f_i(x) = (lambda_i x)^(r_i - 1) / (r_i - 1)! * lambda_i * exp(-lambda_i x).

The log density is computed in log space, from ``u_i = lambda_i x``:

    log f_i(x) = r_i log(u_i) - u_i - log((r_i - 1)!) - log(x).

The last term is the same for every branch: ``dens`` leaves it out (so the
branches' densities are shifted by their largest log value, not by the
data's scale) and the model adds ``-sum log x`` once per trace (its
constant).  One log per value: ``log(u_i) = log(u_0) + log(lambda_i /
lambda_0)``, the second term a coefficient.  Both terms are of the order of
one whatever the data's scale (``u_0`` is a value in units of branch 0's
rate), so no large logs cancel: multiplying the data by ``c`` and the rates
by ``1/c`` changes nothing but rounding, in float32 as in float64.

Layouts per branch: params ``lambda`` (1); work ``lambda, r, log((r - 1)!),
log(lambda_i / lambda_0)`` (4, in the compute dtype, so that float32 math
stays float32); stats ``sum_t gamma_t(i) x_t`` (1).  M-step (the paper's
eq. 21): ``lambda_i = r_i occ_i / sum_t gamma_t(i) x_t``.
"""

from __future__ import annotations

import functools
import math

from ...tuning import DEGENERATE_PARAM
from ..base import Block
from ..hmm.emissions import Emission


@functools.cache
def erlang(orders: tuple[int, ...]) -> Emission:
    """The Erlang emission of branches of these orders (one hook set per order tuple).

    Parameters
    ----------
    orders : tuple of int
        ``r_i >= 1`` per branch; the hooks' ``N`` must be ``len(orders)``.
    """
    R = tuple(float(r) for r in orders)
    LG = tuple(math.lgamma(r) for r in orders)  # log((r - 1)!)
    PARAM = DEGENERATE_PARAM

    def prep(params, po, N, K, work, wo):
        ok = True
        lam0 = params[po]
        for i in range(N):
            lam = params[po + i]
            ok = ok and lam > 0.0 and math.isfinite(lam)
            work[wo + 4 * i] = lam
            work[wo + 4 * i + 1] = R[i]
            work[wo + 4 * i + 2] = LG[i]
            work[wo + 4 * i + 3] = math.log(lam / lam0) if ok else 0.0
        return ok

    def dens(work, wo, N, K, x, xi, e):
        v = x[xi]
        lu0 = math.log(work[wo] * v)  # log(u_0); log(u_i) = log(u_0) + log(lambda_i / lambda_0)
        for i in range(N):
            b = wo + 4 * i
            e[i] = work[b + 1] * (lu0 + work[b + 3]) - work[b] * v - work[b + 2]
        top = e[0]
        for i in range(1, N):
            top = max(top, e[i])
        for i in range(N):
            e[i] = top - e[i]
        return top

    def accum(stats, so, N, K, g, i, x, xi):
        stats[so + i] += g * x[xi]

    def mstep(stats, so, occ, oo, params, po, N, K, reg):
        for i in range(N):
            lam = R[i] * occ[oo + i] / stats[so + i]
            if not (lam > 0.0 and math.isfinite(lam)):
                return PARAM
            params[po + i] = lam
        return 0

    name = "erlang(" + ",".join(str(r) for r in orders) + ")"
    return Emission(name, lambda K: 4, lambda K: 1, lambda K: 1, prep, dens, accum, mstep, "l",
                    blocks=lambda s, K: (Block("rates", (s,), "positive", "rate"),),
                    location=lambda b: b["rates"], log_dens=True)
