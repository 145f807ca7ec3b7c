"""TMAP benchmarks: the paper's Table 1 (one huge trace) and the bulk case (many traces).

    PYTHONPATH=. python benchmarks/bench_tmap.py                     # full sizes
    PYTHONPATH=. python benchmarks/bench_tmap.py --runs 100000 --bulk-traces 20

1. Table 1 (Bražėnas, Horváth and Telek): a synthetic trace drawn from a
   known TMAP of three Erlang branches of orders 1, 2, 3 (1,000,000 runs and
   about 8.8M values; 2,000,000 runs and about 14.5M values, as the paper's),
   30 EM iterations (``tol=0``) from one start (the paper's random start for
   the seed), fitted end to end by ``bulkem.fit`` in the wide regime on the
   GPU (float64, float32) when one is usable and on the CPU cores, beside a
   plain vectorised NumPy EM (all runs stepped together, per-step scaling)
   timed in the same run from the same start.  Published (GTX 560 Ti and a
   Core 2): C++ double 6 min 21 s and 10 min 28 s, CUDA single 46 s and
   1 min 13 s.  ``loop`` is the GPU's iteration loop alone (launches and
   device work, no transfers or tables).
2. Bulk: ``--bulk-traces`` traces x ``--bulk-runs`` runs, ``--bulk-starts``
   random starts, ``--bulk-iters`` iterations (``tol=0``): fits/s on the CPU
   (``--bulk-traces-cpu`` of the traces) and the GPU, beside the NumPy EM
   fitting a few of the same fits one by one.

Compilation is excluded (a warm-up fit per configuration).  Prints one
markdown table; ``--out DIR`` also writes it and the raw rows as JSON.
``--gpu-variants`` reruns the GPU float64 Table-1 fit (the largest trace)
under a few other values of ``Tuning.wide_cuda_*`` (registers, threads per block)
and prints their loop times.  Table 1 forces the wide regime
(``Tuning(strategy="wide")``), the bulk case's warm-up the bulk one
(``strategy="bulk"``); every setting is a :class:`bulkem.tuning.Tuning`
passed to ``bulkem.fit``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import gammaln

import bulkem
from bulkem.interop.datasets import simulate_tmap, tmap_truth
from bulkem.tuning import DEFAULT, Tuning

ORDERS = (1, 2, 3)
PAPER = {1_000_000: ("C++ double 6 min 21 s; CUDA single 46 s", -3.65998e7),
         2_000_000: ("C++ double 10 min 28 s; CUDA single 1 min 13 s", -5.73999e7)}


# --- the baseline: a plain vectorised NumPy EM ------------------------------------------------


class NumpyTMAP:
    """EM for a TMAP with Erlang branches over one trace, all runs stepped together.

    Runs are sorted by length (longest first), so the runs still going at step
    ``t`` are a prefix of that order; the forward pass keeps every step's
    scaled forward vectors (per-step normalisation, the log of each scale
    summed), the backward pass walks the steps back.  The M-step is the
    paper's eqs 21-23.  Plain NumPy, one thread.
    """

    def __init__(self, runs_values: np.ndarray, lengths: np.ndarray, orders=ORDERS):
        order = np.argsort(-lengths, kind="stable")
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[order]
        lens = lengths[order]
        self.L = len(lens)
        self.R = len(orders)
        self.r = np.asarray(orders, np.float64)
        self.lg = gammaln(self.r)
        n_steps = int(lens.max())
        self.count = np.array([(lens > t).sum() for t in range(n_steps)])
        self.x = [runs_values[starts[:c] + t] for t, c in enumerate(self.count)]
        self.logx = [np.log(v) for v in self.x]

    def iterate(self, alpha, pi, rates, n_iter: int):
        """``n_iter`` EM iterations; returns the parameters and each iteration's log-likelihood."""
        alpha, pi, rates = (np.array(a, np.float64) for a in (alpha, pi, rates))
        lls = []
        for _ in range(n_iter + 1):
            ll, stats = self._estep(alpha, pi, rates)
            lls.append(ll)
            if len(lls) == n_iter + 1:
                break
            start, xi, occ, sx = stats
            alpha = start / self.L
            pi = xi / occ[:, None]
            rates = self.r * occ / sx
        return (alpha, pi, rates), lls

    def _estep(self, alpha, pi, rates):
        d = 1.0 - pi.sum(axis=1)
        logr = np.log(rates)
        fwd, dens, scale = [], [], []
        ll = 0.0
        a = None
        for t, c in enumerate(self.count):
            lf = (self.r - 1) * (logr + self.logx[t][:, None]) + logr - rates * self.x[t][:, None] \
                - self.lg
            m = lf.max(axis=1, keepdims=True)
            f = np.exp(lf - m)
            u = (alpha[None, :] if t == 0 else a[:c] @ pi) * f
            s = u.sum(axis=1)
            a = u / s[:, None]
            ll += np.sum(np.log(s) + m[:, 0])
            fwd.append(a)
            dens.append(f)
            scale.append(s)
        occ = np.zeros(self.R)
        sx = np.zeros(self.R)
        xi = np.zeros((self.R, self.R))
        beta = None
        for t in range(len(self.count) - 1, -1, -1):
            c = self.count[t]
            c1 = self.count[t + 1] if t + 1 < len(self.count) else 0
            a = fwd[t]
            b = np.empty((c, self.R))
            if c1:  # runs going on: from step t + 1
                w = dens[t + 1] * beta / scale[t + 1][:, None]
                b[:c1] = w @ pi.T
                xi += pi * (a[:c1].T @ w)
            end = a[c1:] @ d  # runs ending at step t
            b[c1:] = d[None, :] / end[:, None]
            ll += np.sum(np.log(end))
            g = a * b
            occ += g.sum(axis=0)
            sx += self.x[t] @ g
            beta = b
        return ll, (g.sum(axis=0), xi, occ, sx)


# --- helpers ---------------------------------------------------------------------------------


def gpu_available() -> tuple[bool, str]:
    from bulkem.engines import cuda

    return cuda.available()


def fit_timed(data, **kw):
    t0 = time.perf_counter()
    res = bulkem.fit(data, progress=False, **kw)
    return res, time.perf_counter() - t0


WIDE = DEFAULT.replace(strategy="wide")  # the wide regime whatever the batch (Table 1)


def warm(backend: str, dtype: str, tuning: Tuning, as_frame: bool = False) -> None:
    """Compile the kernels of a configuration on a tiny batch (``tuning.strategy``: "wide"
    or "bulk", the regime to compile) of the timed call's input form (``as_frame``: a long
    frame, whose reading compiles kernels of its own: a warm-up on a list left them to the
    timed float64 Table-1 call, 2.48 s instead of ~0.25 s on an H200, 2026-11-29)."""
    small = simulate_tmap(300, seed=99, as_frame=as_frame)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bulkem.fit(small if as_frame else [small], family="tmap", n_starts=1, max_iter=2,
                   seed=1, backend=backend, dtype=dtype, progress=False, tuning=tuning)


def fmt_s(s: float) -> str:
    return f"{s:.3f} s" if s < 100 else f"{s / 60:.1f} min"


# --- Table 1 ---------------------------------------------------------------------------------


def table1(n_runs: int, backends: list[str], numpy_iters: int, iters: int, seed: int,
           variants: bool) -> list[dict]:
    df = simulate_tmap(n_runs, seed=seed)
    n_values = len(df)
    rows = []
    start = None
    for backend in backends:
        for dtype in ("float64", "float32"):
            warm(backend, dtype, WIDE, as_frame=True)
            res, secs = fit_timed(df, family="tmap", orders=ORDERS, n_starts=1, max_iter=iters,
                                  tol=0.0,
                                  accel=False, seed=seed, backend=backend, dtype=dtype, tuning=WIDE)
            start = res.init_params(0)
            row = dict(case="table1", runs=n_runs, values=n_values, impl=f"bulkem {backend}",
                       dtype=dtype, seconds=secs, loglik=float(res.summary.loglik[0]),
                       iters=int(res.summary.n_iter[0]))
            if backend == "cuda":
                from bulkem.engines.cuda import wide

                lp = wide.last_cuda_loop
                row.update(loop=lp["seconds"], blocks=lp["blocks"], threads=lp["threads"],
                           imbalance=lp["imbalance"])
            rows.append(row)
            print(row, flush=True)
    if numpy_iters:
        lengths = df.groupby("run", sort=False).size().to_numpy()
        t0 = time.perf_counter()
        base = NumpyTMAP(df["value"].to_numpy(), lengths)
        (_, _, _), lls = base.iterate(start["alpha"], start["pi"], start["rates"], numpy_iters)
        secs = time.perf_counter() - t0
        row = dict(case="table1", runs=n_runs, values=n_values, impl="NumPy (vectorised)",
                   dtype="float64", seconds=secs * iters / numpy_iters, measured=secs,
                   measured_iters=numpy_iters, loglik=float(lls[-1]), iters=numpy_iters)
        rows.append(row)
        print(row, flush=True)
    if variants and "cuda" in backends:
        rows += gpu_variants(df, iters, seed)
    return rows


def gpu_variants(df, iters: int, seed: int) -> list[dict]:
    from bulkem.engines.cuda import wide

    out = []
    # (ptxas, sm_90: the float64 E-step takes 142 registers uncapped, 3 blocks of 128 per SM)
    grid = [dict(wide_cuda_max_registers=128), dict(wide_cuda_max_registers=96),
            dict(wide_cuda_threads=64)]
    for dtype in ("float64",):
        for setting in grid:
            tuning = WIDE.replace(**setting)
            try:
                warm("cuda", dtype, tuning)
                res, secs = fit_timed(df, family="tmap", orders=ORDERS, n_starts=1,
                                      max_iter=iters, tol=0.0,
                                      accel=False, seed=seed, backend="cuda",
                                      dtype=dtype, tuning=tuning)
                lp = wide.last_cuda_loop
                row = dict(case="variant", setting=str(setting), dtype=dtype, seconds=secs,
                           loop=lp["seconds"], blocks=lp["blocks"],
                           loglik=float(res.summary.loglik[0]))
            except Exception as err:  # a setting this GPU cannot launch
                row = dict(case="variant", setting=str(setting), dtype=dtype, error=repr(err))
            out.append(row)
            print(row, flush=True)
    return out


# --- bulk ------------------------------------------------------------------------------------


def bulk(n_traces: int, n_traces_cpu: int, n_runs: int, starts: int, iters: int, seed: int,
         backends: list[str], numpy_fits: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    t = tmap_truth(8.824586)
    from bulkem.models.tmap import simulate

    traces = []
    for _ in range(n_traces):
        v, lengths, _ = simulate(t["alpha"], t["pi"], t["rates"], ORDERS, n_runs, rng)
        traces.append(np.split(v, np.cumsum(lengths)[:-1]))
    rows = []
    for backend in backends:
        data = traces if backend == "cuda" else traces[:n_traces_cpu]
        for dtype in ("float64", "float32"):
            warm(backend, dtype, DEFAULT.replace(strategy="bulk"))
            res, secs = fit_timed(data, family="tmap", orders=ORDERS, n_starts=starts,
                                  max_iter=iters, tol=0.0, accel=False, seed=seed, backend=backend,
                                  dtype=dtype)
            n_fits = len(data) * starts
            row = dict(case="bulk", impl=f"bulkem {backend}", dtype=dtype, traces=len(data),
                       fits=n_fits, seconds=secs, fits_per_s=n_fits / secs,
                       degenerate=int((res.starts.status == "degenerate").sum()))
            rows.append(row)
            print(row, flush=True)
    if numpy_fits:  # (from the truth: 100 iterations cost the same from any start)
        start = tmap_truth()
        t0 = time.perf_counter()
        for k in range(numpy_fits):
            runs = traces[k % len(traces)]
            base = NumpyTMAP(np.concatenate(runs), np.array([len(u) for u in runs]))
            base.iterate(start["alpha"], start["pi"], start["rates"], iters)
        secs = time.perf_counter() - t0
        row = dict(case="bulk", impl="NumPy (vectorised), one fit at a time", dtype="float64",
                   traces=numpy_fits, fits=numpy_fits, seconds=secs,
                   fits_per_s=numpy_fits / secs)
        rows.append(row)
        print(row, flush=True)
    return rows


# --- table -----------------------------------------------------------------------------------


def render(rows: list[dict], device: str, args) -> str:
    lines = [f"Device: {device}; {os.cpu_count()} CPU cores; numba threads "
             f"{__import__('numba').get_num_threads()}; {platform.python_version()}; "
             f"{datetime.date.today()}",
             f"Command: python benchmarks/bench_tmap.py {' '.join(args)}", ""]
    t1 = [r for r in rows if r["case"] == "table1"]
    if t1:
        lines += ["| runs | values | implementation | dtype | 30 iterations | loop (GPU) | "
                  "vs NumPy | log-likelihood | rel. diff. to bulkem f64 CPU/GPU |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for n in sorted({r["runs"] for r in t1}):
            mine = [r for r in t1 if r["runs"] == n]
            npy = next((r for r in mine if r["impl"].startswith("NumPy")), None)
            ref = next((r for r in mine if r["dtype"] == "float64" and "bulkem" in r["impl"]),
                       None)
            for r in mine:
                t = fmt_s(r["seconds"])
                if "measured" in r and r["measured_iters"] != 30:
                    t += f" ({r['measured_iters']} timed)"
                ratio = f"{npy['seconds'] / r['seconds']:.1f}x" if npy and r is not npy else ""
                rel = (f"{abs(r['loglik'] / ref['loglik'] - 1):.1e}" if ref and r is not ref
                       and r.get("iters") == ref.get("iters") else "")
                loop = fmt_s(r["loop"]) if "loop" in r else ""
                lines.append(f"| {n:,} | {r['values']:,} | {r['impl']} | {r['dtype']} | {t} | "
                             f"{loop} | {ratio} | {r['loglik']:.6e} | {rel} |")
            if n in PAPER:
                lines.append(f"| {n:,} | | published (2017): {PAPER[n][0]} | | | | | "
                             f"{PAPER[n][1]:.5e} (their trace) | |")
        lines.append("")
    bk = [r for r in rows if r["case"] == "bulk"]
    if bk:
        npy = next((r for r in bk if r["impl"].startswith("NumPy")), None)
        lines += ["| bulk | dtype | traces | fits | seconds | fits/s | vs NumPy |",
                  "|---|---|---|---|---|---|---|"]
        for r in bk:
            ratio = f"{r['fits_per_s'] / npy['fits_per_s']:.0f}x" if npy and r is not npy else ""
            lines.append(f"| {r['impl']} | {r['dtype']} | {r['traces']:,} | {r['fits']:,} | "
                         f"{r['seconds']:.2f} | {r['fits_per_s']:,.1f} | {ratio} |")
        lines.append("")
    var = [r for r in rows if r["case"] == "variant"]
    if var:
        lines += ["| GPU variant | dtype | end to end | loop | blocks |", "|---|---|---|---|---|"]
        for r in var:
            if "error" in r:
                lines.append(f"| {r['setting']} | {r['dtype']} | {r['error']} | | |")
            else:
                lines.append(f"| {r['setting']} | {r['dtype']} | {fmt_s(r['seconds'])} | "
                             f"{fmt_s(r['loop'])} | {r['blocks']} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    import sys

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="1000000,2000000",
                   help="Table-1 trace sizes in runs, comma-separated (0: skip)")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--numpy-iters", type=int, default=30,
                   help="iterations the NumPy baseline is timed for (scaled to --iters)")
    p.add_argument("--bulk-traces", type=int, default=1000)
    p.add_argument("--bulk-traces-cpu", type=int, default=None,
                   help="traces of the bulk case fitted on the CPU (default: all)")
    p.add_argument("--bulk-runs", type=int, default=2000)
    p.add_argument("--bulk-starts", type=int, default=20)
    p.add_argument("--bulk-iters", type=int, default=100)
    p.add_argument("--numpy-fits", type=int, default=2, help="bulk fits timed on NumPy")
    p.add_argument("--backends", default=None, help="cpu,cuda (default: cpu and a usable GPU)")
    p.add_argument("--gpu-variants", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    ok, why = gpu_available()
    backends = (args.backends.split(",") if args.backends
                else (["cuda", "cpu"] if ok else ["cpu"]))
    device = "CPU only (no usable GPU: " + why + ")" if not ok else "GPU available"
    if ok:
        from numba import cuda

        name = getattr(cuda.get_current_device(), "name", "the CUDA simulator")
        device = name.decode() if isinstance(name, bytes) else str(name)
    rows = []
    for n in [int(s) for s in args.runs.split(",") if int(s)]:
        rows += table1(n, backends, args.numpy_iters, args.iters, args.seed,
                       args.gpu_variants and n == max(int(s) for s in args.runs.split(",")))
    if args.bulk_traces:
        rows += bulk(args.bulk_traces, args.bulk_traces_cpu or args.bulk_traces, args.bulk_runs,
                     args.bulk_starts, args.bulk_iters, args.seed, backends, args.numpy_fits)
    text = render(rows, device, argv if argv is not None else sys.argv[1:])
    print()
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_tmap.md").write_text(text + "\n")
        (out / "bench_tmap.json").write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
