"""Where the GPU's exact Kalman likelihood of many series spends its time, phase by phase.

    PYTHONPATH=. python3 benchmarks/profile_kalman_gpu.py [--n-series 100000] [--n-steps 1000]
        [--long-steps 1000000] [--splash-only | --scan-only]

First the splash approximation of one long series (``bench_kalman.py`` (b)):
the whole ``kalman_cuda.splash`` call, its phases one by one, and a
cProfile of the host side.  Then, on the batch of ``bench_kalman.py`` (a),
with the data already on the GPU: the whole ``kalman_cuda.exact`` call,
then its phases one by one (each synchronised): the choice of sharing
series, the shared covariance recursion on the host, the small copies, the
shared-gains kernel (several block sizes) and the copy back; and the
kernels' registers and local memory per thread.  ``--scan-only``: the
time-parallel scan of one long series instead (the whole call with its plan
kept, the sequential filter on one CPU core and the ratio, the plan, each
phase of a call, the kernels' registers) with the kernels that the
default tuning picks and with the others (thread- or warp-per-chunk: a
:class:`bulkem.tuning.Tuning` of another ``kalman_cuda_scan_warp_min_nx``, passed to
``kalman_cuda.scan``), and the level-0 chunk tried, on the long series and on its first
10,000 steps.  Everything else runs with the default ``Tuning``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_kalman import ar10, best_of, long_models, one_core, pack, simulate_ar, simulate_rw
from numba import cuda

from bulkem.engines.cpu import kalman as kalman_cpu
from bulkem.engines.cuda import kalman as kalman_cuda
from bulkem.models.ssm.plan import shared_series
from bulkem.tuning import DEFAULT, Tuning


def timed(fn, repeat=5):
    """Best wall time of ``fn()`` over ``repeat`` calls, the GPU synchronised around each."""
    best = np.inf
    out = None
    for _ in range(repeat):
        cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-series", type=int, default=100_000)
    ap.add_argument("--n-steps", type=int, default=1000)
    ap.add_argument("--long-steps", type=int, default=1_000_000)
    ap.add_argument("--splash-only", action="store_true", help="the splash profile alone")
    ap.add_argument("--scan-only", action="store_true", help="the scan profile alone")
    ap.add_argument("--scan-call", action="store_true",
                    help="the phases of a whole scan call (no kept plan), and its host profile")
    args = ap.parse_args()
    if args.scan_only:
        scan_profile(args.long_steps)
        return
    if args.scan_call:
        scan_call_profile(args.long_steps)
        return
    splash_profile(args.long_steps)
    if args.splash_only:
        return
    model = ar10()
    y = simulate_ar(model, args.n_series, args.n_steps, seed=1)
    for dtype in ("float64", "float32"):
        profile(y, model, dtype, args.n_steps)


def splash_profile(n_steps: int) -> None:
    """The splash approximation of one long series: wall time and where the host time goes."""
    import cProfile
    import pstats

    for name, (kind, model) in long_models().items():
        y = simulate_rw(model, n_steps, 2) if kind == "rw" else simulate_ar(model, 1, n_steps, 2)[0]
        batch = pack([y], model)
        dev = kalman_cuda.to_device(batch)
        w = {"rw": 10, "ar": 11}[kind]
        out = kalman_cuda.splash(batch, w, 1e6, dev=dev)
        t, _ = timed(lambda b=batch, d=dev, w=w: kalman_cuda.splash(b, w, 1e6, dev=d), repeat=50)
        print(f"\n# {name}: splash (window {w}) of {n_steps:,} steps, data on the GPU: "
              f"{t * 1e3:.3f} ms (best of 50); loglik {out.loglik[0]!r}")
        kalman_cpu.exact(pack([y[:50]], model))  # (compiled)
        t_seq, ref = best_of(one_core(lambda b=batch: kalman_cpu.exact(b)), repeat=3)
        print(f"  sequential filter, 1 CPU core: {t_seq * 1e3:.2f} ms; splash on the GPU "
              f"{t_seq / t:.1f}x faster; splash error {out.loglik[0] - ref.loglik[0]:+.3g}")
        if hasattr(kalman_cuda, "_splash_program"):  # (the fused kernel: its phases)
            splash_phases(batch, dev, w)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(20):
            kalman_cuda.splash(batch, w, 1e6, dev=dev)
        cuda.synchronize()
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(25)


def splash_phases(batch, dev, w: int, tuning: Tuning = DEFAULT) -> None:
    """The phases of one ``kalman_cuda.splash`` call, each timed alone (best of 50, ms)."""
    md = batch.models
    chunk = tuning.kalman_splash_sum_chunk
    per_block = max(1, tuning.kalman_cuda_threads // chunk)
    kernel = kalman_cuda._splash_program(md.nx, md.ny, md.kind, batch.y.dtype, chunk, per_block)

    def show(what, fn, repeat=50):
        t, res = timed(fn, repeat=repeat)
        print(f"  {what:<52} {t * 1e3:9.3f}")
        return res

    print("  made once per device batch (kept in dev.scratch):")
    plan = show("  the whole plan (best of 5)", lambda: kalman_cuda._splash_plan(
        batch, dev, w, 1e6, None, chunk, per_block, True), repeat=5)
    starts = show("  chunk starts (host)", lambda: kalman_cuda._chunk_starts(batch.offsets, chunk))
    n = int(starts[-1])
    show("  shared gains (cached on the GPU across batches)",
         lambda: kalman_cuda._device_gains(batch, w, 1e6, None))
    show("    (splash_gains on the host, uncached)",
         lambda: kalman_cpu.splash_gains(batch, w, 1e6, None))
    show("  to_device(chunk starts)", lambda: cuda.to_device(starts))
    show("  device_array((3, n_chunks))", lambda: cuda.device_array((3, n), np.float64))
    show("  pinned_array((3, n_chunks)) (best of 5)",
         lambda: cuda.pinned_array((3, n), np.float64), repeat=5)
    print("  every call:")
    show("  kernel, prepared launch + sync", plan.launch)
    show("    (ordinary launch + sync)", lambda: plan.launch.configured(*plan.launch.args))
    show("  copy_to_host (into the pinned array)", lambda: plan.sums.copy_to_host(plan.host))
    show("    (pageable, new array)", lambda: plan.sums.copy_to_host())
    show("  per-series totals (host)",
         lambda: kalman_cuda._series_totals(batch.offsets, plan.starts, plan.host))
    for cres in kernel.overloads.values():
        print(f"  splash kernel: {getattr(cres, 'regs_per_thread', '?')} registers, "
              f"{getattr(cres, 'local_mem_per_thread', '?')} bytes local memory per thread, "
              f"{-(-n // per_block):,} blocks of {chunk * per_block}")


def scan_call_profile(n_steps: int) -> None:
    """A whole scan call of one long series as a user makes it (``kalman_loglik``, and the
    engine on the packed batch: a new device batch and plan each time), phase by phase, and
    a cProfile of the host side."""
    import cProfile
    import pstats

    import bulkem

    for name, (kind, model) in long_models().items():
        y = simulate_rw(model, n_steps, 2) if kind == "rw" else simulate_ar(model, 1, n_steps, 2)[0]
        print(f"\n# {name}, {n_steps:,} steps: a whole call, phase by phase (ms)")
        scan_call(y, model)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(5):
            bulkem.kalman_loglik([y], model, method="scan", backend="cuda")
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(25)


def scan_call(y, model, tuning: Tuning = DEFAULT) -> None:
    """The phases of :func:`scan_call_profile`'s call, each timed alone."""
    import bulkem

    batch = pack([y], model)
    kalman_cuda.scan(batch)  # (compiled)
    t, _ = timed(lambda: bulkem.kalman_loglik([y], model, method="scan", backend="cuda"))
    print(f"    kalman_loglik(method='scan')               {t * 1e3:9.3f}")
    t, _ = timed(lambda: kalman_cuda.scan(batch))
    print(f"    kalman_cuda.scan(batch)                    {t * 1e3:9.3f}")
    t, dev = timed(lambda: kalman_cuda.to_device(batch))
    print(f"    to_device                                  {t * 1e3:9.3f}")
    t, st = timed(lambda: kalman_cpu.steady(batch))
    print(f"    steady gains (host)                        {t * 1e3:9.3f}")
    c0 = tuning.kalman_cuda_steady_chunk0
    c = tuning.kalman_cuda_steady_chunk
    threads = tuning.kalman_cuda_threads
    t, plan = timed(lambda: kalman_cuda._steady_plan(batch, dev, st, c0, c, False, threads))
    print(f"    plan (levels, tables, buffers, launchers)  {t * 1e3:9.3f}")
    import cProfile
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    for _ in range(5):
        kalman_cuda._steady_plan(batch, dev, st, c0, c, False, threads)
    cuda.synchronize()
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(20)

    def launches(p=plan):
        for _, launch in p.launches:
            launch()

    t, _ = timed(launches)
    print(f"    {len(plan.launches)} launches                               {t * 1e3:9.3f}")
    t, _ = timed(lambda p=plan: p.sums.copy_to_host(p.host))
    print(f"    copy back                                  {t * 1e3:9.3f}")


def scan_profile(n_steps: int) -> None:
    """The GPU scan of one long series: the whole call (the plan kept with the device batch)
    against the sequential filter on one CPU core, the first call's plan, then each phase of
    a call (the launches summed by kernel over the levels, the copy back, the host totals),
    the kernels' registers; with the kernels the default tuning picks, then the others (a
    tuning of another ``kalman_cuda_scan_warp_min_nx``); the level-0 chunk."""
    t_seq = {}
    for name, (kind, model) in long_models().items():
        y = simulate_rw(model, n_steps, 2) if kind == "rw" else simulate_ar(model, 1, n_steps, 2)[0]
        batch = pack([y], model)
        kalman_cpu.exact(pack([y[:50]], model))  # (compiled)
        t_seq[name], ref = best_of(one_core(lambda b=batch: kalman_cpu.exact(b)), repeat=3)
        print(f"\n# {name}: sequential filter of {n_steps:,} steps on 1 CPU core: "
              f"{t_seq[name] * 1e3:.2f} ms; loglik {ref.loglik[0]!r}")
        dev = kalman_cuda.to_device(batch)
        wanted = kalman_cuda._scan_warps(batch.models, batch.y.dtype, DEFAULT)
        for min_nx in (DEFAULT.kalman_cuda_scan_warp_min_nx, 1 if not wanted else 10 ** 6):
            scan_phases(name, batch, dev, n_steps, t_seq[name],
                        DEFAULT.replace(kalman_cuda_scan_warp_min_nx=min_nx))
        scan_chunks(batch, dev, name)
        if n_steps > 10_000:  # a shorter series: fewer threads, the latency of each level
            short = pack([y[:10_000]], model)
            scan_chunks(short, kalman_cuda.to_device(short), name)


def scan_phases(name, batch, dev, n_steps: int, t_seq: float, tuning: Tuning = DEFAULT) -> None:
    """One tuning's scan: the whole call against ``t_seq``, the plan, the phases."""
    from bulkem.models.ssm.plan import chunk0_for, plan_levels

    chunk = tuning.kalman_cuda_scan_chunk
    threads = tuning.kalman_cuda_threads
    wpb = kalman_cuda._scan_warps(batch.models, batch.y.dtype, tuning)
    how = f"a warp per chunk, {wpb} per block" if wpb else "a thread per chunk"
    out = kalman_cuda.scan(batch, dev=dev, tuning=tuning)
    t, _ = timed(lambda b=batch, d=dev: kalman_cuda.scan(b, dev=d, tuning=tuning), repeat=20)
    chunk0 = chunk0_for(batch.offsets[-1], tuning.kalman_cuda_scan_chunk0,
                        tuning.kalman_cuda_scan_target_chunks)
    tn, _ = timed(lambda b=batch: kalman_cuda.scan(b, dev=kalman_cuda.to_device(b),
                                                   tuning=tuning), repeat=3)
    print(f"\n# {name} ({how}): scan of {n_steps:,} steps, data on the GPU: "
          f"{t * 1e3:.3f} ms (best of 20), {t_seq / t:.1f}x the sequential filter on 1 "
          f"CPU core; loglik {out.loglik[0]!r}")
    print("  made once per device batch (kept in dev.scratch):")
    tp, plan = timed(lambda b=batch, d=dev, c=chunk0: kalman_cuda._scan_plan(
        b, d, c, chunk, True, wpb, threads), repeat=3)
    print(f"    the whole plan (best of 3)                 {tp * 1e3:9.3f}")
    tl, levels = timed(lambda b=batch, c=chunk0: plan_levels(b.offsets, c, chunk))
    print(f"    plan_levels (host)                         {tl * 1e3:9.3f}")
    print(f"    ({len(levels)} levels, {levels[0].n_chunks:,} chunks of {chunk0} steps at "
          f"level 0; a call on a new device batch, copy of the data included: "
          f"{tn * 1e3:.3f} ms)")
    print("  every call (best of 20 each, synchronised):")
    seconds: dict = {}
    for k, launch in plan.launches:
        tk, _ = timed(launch, repeat=20)
        seconds[k] = seconds.get(k, 0.0) + tk
    for k, tk in seconds.items():
        print(f"    {k:<12} (launch + run, all levels)   {tk * 1e3:9.3f}")
    tc, _ = timed(lambda p=plan: p.sums.copy_to_host(p.host), repeat=20)
    label = f"copy_to_host ({plan.sums.shape[0]} x {plan.sums.shape[1]:,}, pinned)"
    print(f"    {label:<42} {tc * 1e3:9.3f}")
    th, _ = timed(lambda b=batch, p=plan: kalman_cuda._series_totals(b.offsets, p.starts,
                                                                     p.host), repeat=20)
    print(f"    per-series totals (host)                   {th * 1e3:9.3f}")
    print(f"    the rest of a call (host)                  "
          f"{(t - sum(seconds.values()) - tc - th) * 1e3:9.3f}")
    for k, kernel in plan.kernels.items():
        for cres in kernel.overloads.values():
            print(f"  {k}: {getattr(cres, 'regs_per_thread', '?')} registers, "
                  f"{getattr(cres, 'local_mem_per_thread', '?')} bytes local memory, "
                  f"{getattr(cres, 'shared_mem_per_block', '?')} bytes shared memory "
                  "per block")


def scan_chunks(batch, dev, name: str) -> None:
    """The level-0 chunk (``Tuning.kalman_cuda_scan_chunk0``) tried: the whole call, its
    plan kept (best of 10), the levels, and the log-likelihood."""
    from bulkem.models.ssm.plan import plan_levels

    n = int(batch.offsets[-1])
    print(f"  {name}, {n:,} steps: level-0 chunk (Tuning.kalman_cuda_scan_chunk0 = "
          f"{DEFAULT.kalman_cuda_scan_chunk0}), ms per call, best of 10:")
    for c0 in (8, 16, 32, 64, 128, 256):
        out = kalman_cuda.scan(batch, chunk0=c0, dev=dev)  # (its plan)
        t, _ = timed(lambda b=batch, d=dev, c=c0: kalman_cuda.scan(b, chunk0=c, dev=d),
                     repeat=10)
        levels = plan_levels(batch.offsets, c0, DEFAULT.kalman_cuda_scan_chunk)
        print(f"    chunks of {c0:>3} steps: {t * 1e3:9.3f} ms  ({len(levels)} levels, "
              f"{levels[0].n_chunks:>7,} chunks; loglik {out.loglik[0]!r})")
    for c in (2, 4, 16):  # elements per chunk above level 0 (Tuning.kalman_cuda_scan_chunk)
        out = kalman_cuda.scan(batch, chunk=c, dev=dev)
        t, _ = timed(lambda b=batch, d=dev, c=c: kalman_cuda.scan(b, chunk=c, dev=d), repeat=10)
        print(f"    {c:>2} elements per chunk above level 0 (default chunk0): {t * 1e3:9.3f} ms "
              f"(loglik {out.loglik[0]!r})")


def profile(y, model, dtype: str, n_steps: int) -> None:
    """The phases of one dtype."""
    batch = pack(list(y), model, dtype)
    md = batch.models
    dev = kalman_cuda.to_device(batch)
    kalman_cuda.exact(pack(list(y[:4]), model, dtype))  # compile
    print(f"\n# {dtype}: {batch.n_series:,} AR(10) series x {n_steps:,} steps, "
          "data on the GPU (best of 5, ms)")
    t, _ = timed(lambda: kalman_cuda.exact(batch, dev=dev))
    print(f"whole exact() call                 {t * 1e3:9.3f}")
    t, sel = timed(lambda: shared_series(batch, None, 2))
    print(f"  shared_series                    {t * 1e3:9.3f}")
    Ws = np.empty(n_steps * md.nx * md.ny, batch.y.dtype)
    Ls = np.empty(n_steps * md.ny * md.ny, batch.y.dtype)
    logdets = np.empty(n_steps)
    t, _ = timed(lambda: kalman_cpu.gains(batch, n_steps, Ws, Ls, logdets))
    print(f"  gains on the host                {t * 1e3:9.3f}")
    t, _ = timed(lambda: np.setdiff1d(np.arange(batch.n_series), sel))
    print(f"  (np.setdiff1d, the old way to the rest) {t * 1e3:9.3f}")

    def small():
        ints = cuda.to_device(np.stack([sel, batch.offsets[sel], batch.lengths[sel]]))
        return ints, cuda.to_device(np.concatenate([Ws, Ls])), cuda.to_device(logdets)
    t, (ints, gains_d, ld_d) = timed(small)
    print(f"  three small to_device copies     {t * 1e3:9.3f}")
    p = kalman_cuda._programs(md.nx, md.ny, md.kind, batch.y.dtype)
    ll = cuda.device_array(batch.n_series)
    nobs = cuda.device_array(batch.n_series, np.int64)
    k = p["exact_shared"]
    nw = len(Ws)
    for threads in (64, 128, 256):
        g = (-(-len(sel) // threads), threads)
        t, _ = timed(lambda g=g: k[g](dev.y, ints[1], ints[2], 1, ints[0], dev.F[0], dev.H[0],
                                      dev.m0[0], gains_d[:nw], gains_d[nw:], ld_d, ll, nobs))
        print(f"  shared kernel, {threads:>3} threads per block  {t * 1e3:9.3f}")
    t, _ = timed(lambda: (ll.copy_to_host(), nobs.copy_to_host()))
    print(f"  copies back                      {t * 1e3:9.3f}")
    for name in ("exact_shared", "exact"):
        for cres in p[name].overloads.values():
            print(f"  {name}: {getattr(cres, 'regs_per_thread', '?')} registers, "
                  f"{getattr(cres, 'local_mem_per_thread', '?')} bytes local memory per thread")
    print(f"  (Tuning.kalman_cuda_threads = {DEFAULT.kalman_cuda_threads})")


if __name__ == "__main__":
    main()
