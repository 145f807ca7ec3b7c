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

With ``accel`` (SQUAREM, :func:`make_accel`), every second M-step is followed by an
extrapolation along the last two steps; the driver's E-step at the extrapolated
parameters is its safeguard (kept only if the log-likelihood did not fall), so the
likelihoods of the kept parameters never fall, as in plain EM.

The returned log-likelihood is that of the returned parameters: stop if the
log-likelihood ``L`` is not finite (degenerate), fell by more than rounding
since the previous iteration (degenerate), changed by less than ``tol``
(converged) or ``max_iter`` M-steps are done (max_iter); otherwise M-step,
and repeat.  ``n_iter`` counts the M-steps (with ``accel``: the E-steps after the first,
each a pass over the data, whether its parameters were kept or not).

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
        Converged: ``|ll - ll_prev| < tol``, or with ``tol < 0`` (``fit(rtol=-tol)``)
        ``< -tol * |ll_prev|``.
    """
    NONFINITE = DEGENERATE_NONFINITE
    DECREASE = DEGENERATE_DECREASE

    def stop(ll, ll_prev, it, max_iter, tol, drop_rtol):
        if not math.isfinite(ll):
            return NONFINITE
        if it > 0:
            if ll < ll_prev - drop_rtol * abs(ll_prev):
                return DECREASE
            if abs(ll - ll_prev) < (tol if tol >= 0.0 else -tol * abs(ll_prev)):
                return CONVERGED
        if it == max_iter:
            return MAX_ITER
        return -1

    return jit(stop)


ACCEL_EXTRA = 3  # the accelerator's scalars after its three parameter vectors
ACCEL_MAX_STEP = 256.0  # the largest extrapolation (see make_accel)


def accel_size(n_params: int) -> int:
    """Length of the driver's ``back`` array: the float32 refit's copy of the start, then
    the accelerator's state (:func:`make_accel`)."""
    return 4 * n_params + ACCEL_EXTRA


def make_accel(jit):
    """Build SQUAREM (Varadhan and Roland 2008, scheme 3) as a state machine of the EM loop.

    A cycle: from ``x0`` (the start, or an M-step's output) two M-steps give ``x1`` and
    ``x2``; with ``r = x1 - x0`` and ``v = x2 - 2 x1 + x0`` the extrapolation ``x' = x0 +
    2 a r + a^2 v``, ``a = |r| / |v|`` clipped to ``[1, a_max]`` (``a_max`` starts at 1,
    grows 4-fold when reached, up to :data:`ACCEL_MAX_STEP`, and shrinks 4-fold on a
    failure, as in the SQUAREM package).  ``x'`` is kept if it stays feasible (no entry
    that ``x0, x1, x2`` all have >= 0 turns negative: weights, probabilities, variances,
    rates), its log-likelihood (the loop's next E-step) is not below that of ``x1``, and
    its M-step succeeds; that M-step's output is the next cycle's ``x0``.  Else ``x2``,
    the plain EM step, is.  Each cycle is three passes over the data.

    Linear constraints (weights that sum to 1) hold at ``x'`` as the coefficients of
    ``x0, x1, x2`` sum to 1, up to rounding amplified by ``(1 + a)^2`` (the reason for
    the cap, and for starting each cycle from an M-step's output, which restores them);
    a model whose ``prepare`` returns NaN for infeasible parameters (HMM rows that sum
    to more than 1, a non-stationary AR) gets them rejected by the E-step.  ``prepare``
    may reorder components (the mixtures keep the heaviest first): a cycle whose ``x1``
    came back reordered starts again from it.

    ``acc`` is the driver's ``back`` array (:func:`accel_size`): ``acc[:n]`` is the
    float32 refit's, ``x0, x1, x2`` follow, then the phase (what the next E-step
    evaluates: 0 ``x0``, 1 ``x1``, 3 ``x'``; 4: an ``x'`` kept, before its M-step),
    ``a_max`` and the log-likelihood of ``x1``.

    Returns
    -------
    tuple of callables
        ``begin(acc, n)``; ``judge(acc, params, n, ll) -> verdict`` after each E-step:
        0 a point of the EM path, 1 an ``x'`` rejected (``params`` is now ``x2``, to be
        evaluated next), 2 an ``x'`` kept (its M-step follows); ``advance(acc, params,
        n)`` after each M-step that succeeded; ``undo(acc, params, n) -> bool`` after
        one that failed (True: it was an ``x'``'s, ``params`` is ``x2``); ``last(acc,
        params, n)``: ``params`` back to ``x1``, the last point of the EM path before an
        ``x'``.
    """

    def begin(acc, n):
        acc[4 * n] = 0.0
        acc[4 * n + 1] = 1.0

    def judge(acc, params, n, ll):
        S = 4 * n
        ph = acc[S]
        if ph == 3.0:
            if ll >= acc[S + 2]:  # (not NaN)
                acc[S] = 4.0
                return 2
            for k in range(n):
                params[k] = acc[3 * n + k]
            acc[S] = 0.0
            acc[S + 1] = max(1.0, acc[S + 1] * 0.25)
            return 1
        if ph == 1.0:
            for k in range(n):
                if params[k] != acc[2 * n + k]:  # reordered by prepare
                    ph = 0.0
        if ph == 1.0:
            acc[S + 2] = ll
        else:
            for k in range(n):
                acc[n + k] = params[k]
        acc[S] = ph
        return 0

    def advance(acc, params, n):
        S = 4 * n
        ph = acc[S]
        if ph == 4.0:  # the M-step of a kept x': the next x0
            acc[S] = 0.0
            return
        if ph == 0.0:  # the M-step of x0: x1
            for k in range(n):
                acc[2 * n + k] = params[k]
            acc[S] = 1.0
            return
        acc[S] = 0.0  # the M-step of x1: x2, and the extrapolation
        sr2 = 0.0
        sv2 = 0.0
        for k in range(n):
            x0 = acc[n + k]
            x1 = acc[2 * n + k]
            x2 = params[k]
            acc[3 * n + k] = x2
            r = x1 - x0
            v = x2 - 2.0 * x1 + x0
            sr2 += r * r
            sv2 += v * v
        if not (sv2 > 0.0 and sr2 < math.inf):
            return
        amax = acc[S + 1]
        a = min(max(math.sqrt(sr2 / sv2), 1.0), amax)
        if a == amax:
            acc[S + 1] = min(4.0 * amax, MAX_STEP)
        if a == 1.0:
            return
        ok = True
        for k in range(n):
            x0 = acc[n + k]
            x1 = acc[2 * n + k]
            x2 = acc[3 * n + k]
            x = x0 + 2.0 * a * (x1 - x0) + a * a * (x2 - 2.0 * x1 + x0)
            if x < 0.0 and x0 >= 0.0 and x1 >= 0.0 and x2 >= 0.0:
                ok = False
            params[k] = x
        if ok:
            acc[S] = 3.0
            return
        for k in range(n):
            params[k] = acc[3 * n + k]
        acc[S + 1] = max(1.0, acc[S + 1] * 0.25)

    def undo(acc, params, n):
        S = 4 * n
        if acc[S] != 4.0:
            return False
        for k in range(n):
            params[k] = acc[3 * n + k]
        acc[S] = 0.0
        acc[S + 1] = max(1.0, acc[S + 1] * 0.25)
        return True

    def last(acc, params, n):
        for k in range(n):
            params[k] = acc[2 * n + k]

    MAX_STEP = ACCEL_MAX_STEP
    return jit(begin), jit(judge), jit(advance), jit(undo), jit(last)


def make_step(mstep_f, jit):
    """Build what follows each E-step of a fit, shared by every EM loop.

    ``step(data, stats, params, n, reg, ll, it, ll_prev, back, n_params, accel,
    max_iter, tol, drop_rtol, trace) -> (status, it, ll_prev, ll)``: given the E-step's
    log-likelihood ``ll`` at ``params`` after ``it`` passes (``ll_prev``: that of the
    last point of the EM path), the accelerator's verdict (``accel``:
    :func:`make_accel`'s state in ``back``), ``trace[it]``, the stopping rule
    (:func:`make_stop`, applied on the EM path, not at an extrapolation) and the M-step
    (``mstep_f`` of the model's pieces).  ``status`` -1: go on with the E-step at
    ``params`` (``it`` and ``ll_prev`` updated); else the fit's final status, and ``ll``
    that of the parameters left in ``params``.
    """
    stop_f = make_stop(jit)
    begin, judge, advance, undo, last = make_accel(jit)
    MAXED = MAX_ITER

    def step(data, stats, params, n, reg, ll, it, ll_prev, back, n_params, accel, max_iter,
             tol, drop_rtol, trace):
        verdict = 0
        if accel:
            verdict = judge(back, params, n_params, ll)
        if verdict == 0:  # a point of the EM path
            if it < len(trace):  # the log-likelihood after ``it`` passes
                trace[it] = ll
            status = stop_f(ll, ll_prev, it, max_iter, tol, drop_rtol)
            if status >= 0:
                return status, it, ll_prev, ll
            status = mstep_f(data, stats, params, n, reg)
            if status != 0:
                return status, it, ll_prev, ll
            if accel:
                advance(back, params, n_params)
            return -1, it + 1, ll, ll
        if verdict == 2 and it < max_iter:  # an extrapolation kept: its M-step
            if it < len(trace):
                trace[it] = ll
            if mstep_f(data, stats, params, n, reg) == 0:
                advance(back, params, n_params)
                return -1, it + 1, ll_prev, ll  # (the next point is compared with x1's)
            undo(back, params, n_params)
        # an extrapolation not kept: the pass counts, the likelihood stays
        if it < len(trace):
            trace[it] = ll_prev
        if it >= max_iter:
            last(back, params, n_params)
            return MAXED, it, ll_prev, ll_prev
        return -1, it + 1, ll_prev, ll

    return jit(step)


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
        drop_rtol, drop64, reg, trace, accel) -> (status, n_iter, loglik)``: ``data`` is the
        model's batch tuple in the compute dtype and ``data64`` in float64
        (the same tuple in float64), ``lo, hi`` the dataset's items, ``const``
        its constant log-likelihood term; ``params`` (float64) is updated in
        place and the rest are scratch of the model's
        :class:`~bulkem.models.base.Sizes`: ``tot``,
        ``coef``, ``stats`` and ``back`` (:func:`accel_size`) float64, ``work`` and
        ``scratch`` in the compute dtype, ``work64`` and ``scratch64`` the
        same in float64 (for a float32 fit's float64 passes), ``buf`` the
        lane's buffer.  ``xc`` is ``EXP_CONSTS``.  ``drop_rtol`` is the
        tolerated fall (``Tuning.decrease_rtol``) of the compute dtype, ``drop64``
        that of float64 (a float32 fit's float64 refit, on targets that refit).
        ``trace`` (float64, length ``max_iter + 1`` or 0) gets the log-likelihood after each
        number of M-steps, ``trace[it]``, as far as it is long (a float32 fit's in float32,
        but the last, the returned one; a refit writes it again from the start).
        ``accel``: 1 for SQUAREM (:func:`make_accel`), 0 for plain EM.
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
           work64, scratch64, back, buf, xc, max_iter, tol, drop_rtol, drop64, reg, trace,
           accel):
        nt = len(tot) if RUNTIME else NT
        np_ = len(params) if RUNTIME else NP
        for k in range(nt):
            tot[k] = 0.0
        setup64(data64, lo + lane, hi, step, tot)
        allreduce_vec(tot, 0, nt)
        if not NARROW:
            return loop64(data64, lo, hi, lane, step, const, params, tot, coef, work64, stats,
                          scratch64, back, buf, xc, max_iter, tol, drop_rtol, reg, trace, accel)
        if REDO_HERE:
            for k in range(np_):
                back[k] = params[k]
        status, it, ll = loop(data, lo, hi, lane, step, const, params, tot, coef, work, stats,
                              scratch, back, buf, xc, max_iter, tol, drop_rtol, reg, trace,
                              accel)
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
                      scratch64, back, buf, xc, max_iter, tol, drop64, reg, trace, accel)

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
    ns, n_params = model.sizes().stats, model.sizes().params
    if target.name == "cuda":
        return _make_loop(pieces, ns, n_params, target, give_up, target.jit)
    key = ("loop", model.cpu_key, np.dtype(dtype).name, target.name, give_up)
    if key not in _cpu_kept:
        _cpu_kept[key] = _make_loop(pieces, ns, n_params, target, give_up, kernel())
    return _cpu_kept[key]


def _make_loop(pieces, NS, NP, target, give_up: bool, jit):
    """The EM iterations of :func:`make_em` with one set of pieces (one compute dtype).

    ``loop(data, lo, hi, lane, step, const, params, tot, coef, work, stats,
    scratch, back, buf, xc, max_iter, tol, drop_rtol, reg, trace, accel) -> (status,
    n_iter, loglik)``, compiled with ``jit``.  With ``give_up``, a fit it would stop as
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
    begin = make_accel(target.jit)[0]
    step_f = make_step(mstep_f, target.jit)
    GIVE_UP = give_up
    NONFINITE = DEGENERATE_NONFINITE  # this and above: the degenerate statuses
    ONE_THREAD = target.name != "cuda"  # (and the sizes may be run-time values: len(stats))

    def loop(data, lo, hi, lane, step, const, params, tot, coef, work, stats, scratch, back,
             buf, xc, max_iter, tol, drop_rtol, reg, trace, accel):
        if ONE_THREAD:
            lane = 0
            step = 1
        n = hi - lo
        ns = len(stats) if ONE_THREAD else NS
        np_ = len(params) if ONE_THREAD else NP
        if accel:
            begin(back, np_)
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
            mine = trace[:len(trace) if lane == 0 else 0]  # (lane 0 writes the trace)
            status, it, ll_prev, ll = step_f(data, stats, params, n, reg, ll, it, ll_prev, back,
                                             np_, accel, max_iter, tol, drop_rtol, mine)
            if status >= 0:
                return -1 if GIVE_UP and status >= NONFINITE else status, it, ll

    return jit(loop)


def gave_up(status: int) -> bool:
    """A float32 fit the driver would fit again in float64 (it stopped as degenerate)."""
    return status >= DEGENERATE_NONFINITE
