"""The one EM driver, written once and compiled for the CPU and the GPU.

:func:`make_em` builds the EM loop of a single fit from a model's
:class:`~bulkem.models.base.Pieces`.  The same Python source is compiled for
a :class:`~bulkem.kernels.target.Target`: with ``numba.njit`` (CPU engine:
one thread runs a fit, ``lane = 0``, ``step = 1``) or as a CUDA device
function (GPU engine: a group of lanes shares a fit, lane ``j`` takes items
``j, j + G, ...``, and the target's ``allreduce`` sums across the group).
The driver knows nothing about the model; per fit it runs:

* ``setup`` once: the fit's constants (summed over the lanes);
* per iteration: ``prepare`` (coefficients) -> ``estep`` over the lane's
  items -> sum the log-likelihood and statistics over the lanes ->
  ``complete`` -> the stopping rule -> ``mstep``.

The returned log-likelihood is that of the returned parameters: stop if the
log-likelihood ``L`` is not finite (degenerate), fell by more than rounding
since the previous iteration (degenerate), changed by less than ``tol``
(converged) or ``max_iter`` M-steps are done (max_iter); otherwise M-step,
and repeat.  ``n_iter`` counts the M-steps.

Sums over items and the M-step are float64.  With a float32 compute dtype
the iterations run on the float32 pieces and data, with two exceptions that
use the float64 ones:

* ``setup`` and the returned log-likelihood (one more float64 E-step at the
  returned parameters): the figure users compare across starts and models
  is accurate to float64 rounding of the data, not to float32 sums;
* a fit that float32 would stop as degenerate (a failed M-step, a
  log-likelihood that fell or is not finite) gives up and is fitted again in
  float64 from its start (see ``Target.redo_here``): it is then the float64
  fit from that start.  Such fits are mostly starts heading for a collapsing
  component, whose statistics float32 cannot resolve.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels.target import kernel
from ..tuning import CONVERGED, DEGENERATE_DECREASE, DEGENERATE_NONFINITE, MAX_ITER, REDO_FLOAT64


def make_stop(jit):
    """Build the stopping rule shared by every engine.

    Returns
    -------
    callable
        ``stop(ll, ll_prev, it, max_iter, tol, drop_rtol) -> status``: the
        final status of a fit whose E-step at iteration ``it`` (M-steps done
        so far) gave log-likelihood ``ll``, or -1 to go on with an M-step.
    """
    NONFINITE = DEGENERATE_NONFINITE
    DECREASE = DEGENERATE_DECREASE

    def stop(ll, ll_prev, it, max_iter, tol, drop_rtol):
        if not math.isfinite(ll):
            return NONFINITE
        if it > 0:
            if ll < ll_prev - drop_rtol * abs(ll_prev):
                return DECREASE
            if abs(ll - ll_prev) < tol:
                return CONVERGED
        if it == max_iter:
            return MAX_ITER
        return -1

    return jit(stop)


def make_em(model, dtype, target):
    """Build the single-fit EM loop of a model.

    Parameters
    ----------
    model : bulkem.models.base.Model
        Supplies ``sizes()`` and ``pieces(dtype, target)``.
    dtype : numpy scalar type
        Compute dtype of the per-item math (float32 or float64).
    target : bulkem.kernels.target.Target

    Returns
    -------
    callable
        ``em(data, data64, lo, hi, lane, step, const, params, tot, coef, work,
        stats, scratch, work64, scratch64, back, buf, xc, max_iter, tol,
        drop_rtol, drop64, reg, trace) -> (status, n_iter, loglik)``: ``data`` is the
        model's batch tuple in the compute dtype and ``data64`` in float64
        (the same tuple in float64), ``lo, hi`` the dataset's items, ``const``
        its constant log-likelihood term; ``params`` (float64) is updated in
        place and the rest are scratch of the model's
        :class:`~bulkem.models.base.Sizes`: ``tot``,
        ``coef``, ``stats`` and ``back`` (parameters) float64, ``work`` and
        ``scratch`` in the compute dtype, ``work64`` and ``scratch64`` the
        same in float64 (for a float32 fit's float64 passes), ``buf`` the
        lane's buffer.  ``xc`` is ``EXP_CONSTS``.  ``drop_rtol`` is the
        tolerated fall (``Tuning.decrease_rtol``) of the compute dtype, ``drop64``
        that of float64 (a float32 fit's float64 refit, on targets that refit).
        ``trace`` (float64, length ``max_iter + 1`` or 0) gets the log-likelihood after each
        number of M-steps, ``trace[it]``, as far as it is long (a float32 fit's in float32,
        but the last, the returned one; a refit writes it again from the start).
    """
    sizes = model.sizes()
    NT = sizes.totals
    NP = sizes.params
    # On the CPU the arrays are a fit's own, allocated at the model's sizes, which may be
    # run-time values (Model.cpu_key): their lengths; on the GPU the sizes compiled in.
    RUNTIME = target.name != "cuda"
    NARROW = dtype != np.float64
    REDO_HERE = target.redo_here
    REDO = REDO_FLOAT64
    allreduce = target.allreduce
    allreduce_vec = target.allreduce_vec
    wide = _pieces(model, np.float64, target)
    loop64 = _loop(model, np.float64, target, give_up=False)
    loop = _loop(model, dtype, target, give_up=True) if NARROW else loop64
    setup64, prepare64, estep64 = wide.setup, wide.prepare, wide.estep

    def em(data, data64, lo, hi, lane, step, const, params, tot, coef, work, stats, scratch,
           work64, scratch64, back, buf, xc, max_iter, tol, drop_rtol, drop64, reg, trace):
        nt = len(tot) if RUNTIME else NT
        np_ = len(params) if RUNTIME else NP
        for k in range(nt):
            tot[k] = 0.0
        setup64(data64, lo + lane, hi, step, tot)
        allreduce_vec(tot, 0, nt)
        if not NARROW:
            return loop64(data64, lo, hi, lane, step, const, params, tot, coef, work64, stats,
                          scratch64, buf, xc, max_iter, tol, drop_rtol, reg, trace)
        if REDO_HERE:
            for k in range(np_):
                back[k] = params[k]
        status, it, ll = loop(data, lo, hi, lane, step, const, params, tot, coef, work, stats,
                              scratch, buf, xc, max_iter, tol, drop_rtol, reg, trace)
        if status >= 0:  # the returned log-likelihood, in float64 at the same parameters
            base = prepare64(data64, params, tot, coef, work64)
            ll = estep64(data64, lo + lane, hi, step, work64, stats, scratch64, buf, xc)
            ll = allreduce(ll) + base + const
            if lane == 0 and it < len(trace):
                trace[it] = ll
            return status, it, ll
        if not REDO_HERE:
            return REDO, it, ll
        for k in range(np_):  # float32 gave up: the fit again, in float64, from its start
            params[k] = back[k]
        return loop64(data64, lo, hi, lane, step, const, params, tot, coef, work64, stats,
                      scratch64, buf, xc, max_iter, tol, drop64, reg, trace)

    return target.jit(em)


_cpu_kept: dict = {}


def _pieces(model, dtype, target):
    """``model.pieces(dtype, target)``, kept per (model, dtype, target) on the CPU targets:
    the functions a model compiles on their own (the mixtures' tiled passes) then compile
    once for the float64 kernel and the float32 kernel's float64 passes."""
    if target.name == "cuda":
        return model.pieces(dtype, target)
    key = ("pieces", model.cpu_key, np.dtype(dtype).name, target.name)
    if key not in _cpu_kept:
        _cpu_kept[key] = model.pieces(dtype, target)
    return _cpu_kept[key]


def _loop(model, dtype, target, give_up: bool):
    """The EM iterations of one compute dtype (:func:`_make_loop`), for :func:`make_em`.

    On the CPU targets a function of its own, called (not inlined) and kept per (model,
    dtype, target): the float32 kernel's float64 refit is the float64 kernel's loop,
    compiled once.  On the GPU a device function, inlined.
    """
    pieces = _pieces(model, dtype, target)
    ns = model.sizes().stats
    if target.name == "cuda":
        return _make_loop(pieces, ns, target, give_up, target.jit)
    key = ("loop", model.cpu_key, np.dtype(dtype).name, target.name, give_up)
    if key not in _cpu_kept:
        _cpu_kept[key] = _make_loop(pieces, ns, target, give_up, kernel())
    return _cpu_kept[key]


def _make_loop(pieces, NS, target, give_up: bool, jit):
    """The EM iterations of :func:`make_em` with one set of pieces (one compute dtype).

    ``loop(data, lo, hi, lane, step, const, params, tot, coef, work, stats,
    scratch, buf, xc, max_iter, tol, drop_rtol, reg, trace) -> (status, n_iter,
    loglik)``, compiled with ``jit``.  With ``give_up``, a fit it would stop as
    degenerate returns status -1 instead.  On the CPU (one thread a fit) ``lane``
    and ``step`` are the constants 0 and 1, so that the inlined passes are compiled
    for consecutive observations (taken as run-time values, the CPU fits ran 7-15%
    slower).
    """
    prepare_f, estep_f, complete_f, mstep_f = (pieces.prepare, pieces.estep, pieces.complete,
                                               pieces.mstep)
    FIRST = pieces.first_stat
    allreduce = target.allreduce
    allreduce_vec = target.allreduce_vec
    stop_f = make_stop(target.jit)
    GIVE_UP = give_up
    NONFINITE = DEGENERATE_NONFINITE  # this and above: the degenerate statuses
    ONE_THREAD = target.name != "cuda"  # (and the sizes may be run-time values: len(stats))

    def loop(data, lo, hi, lane, step, const, params, tot, coef, work, stats, scratch, buf, xc,
             max_iter, tol, drop_rtol, reg, trace):
        if ONE_THREAD:
            lane = 0
            step = 1
        n = hi - lo
        ns = len(stats) if ONE_THREAD else NS
        it = 0
        ll_prev = 0.0
        while True:
            base = prepare_f(data, params, tot, coef, work)
            for k in range(ns):
                stats[k] = 0.0
            ll = estep_f(data, lo + lane, hi, step, work, stats, scratch, buf, xc)
            ll = allreduce(ll) + base + const
            allreduce_vec(stats, FIRST, ns)
            complete_f(data, stats, tot)
            if lane == 0 and it < len(trace):  # the log-likelihood after ``it`` M-steps
                trace[it] = ll
            status = stop_f(ll, ll_prev, it, max_iter, tol, drop_rtol)
            if status >= 0:
                return -1 if GIVE_UP and status >= NONFINITE else status, it, ll
            status = mstep_f(data, stats, params, n, reg)
            if status != 0:
                return -1 if GIVE_UP else status, it, ll
            ll_prev = ll
            it += 1

    return jit(loop)


def gave_up(status: int) -> bool:
    """A float32 fit the driver would fit again in float64 (it stopped as degenerate)."""
    return status >= DEGENERATE_NONFINITE
