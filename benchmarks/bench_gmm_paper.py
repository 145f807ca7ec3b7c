"""The GMM CUDA paper's problem sizes: bulkem's time per EM iteration of one large dataset.

Kumar, Satoor and Buck ("Fast Parallel Expectation Maximization for Gaussian
Mixture Models on GPUs using CUDA", 2009; ``shared/papers/gmm-em-cuda.txt``)
time one EM iteration of a diagonal-covariance Gaussian mixture of one dataset
of N points, M components, D dimensions (single precision) for the sizes of
their Tables III and IV:

    N       M   D    naive C, 1 CPU thread   Quadro FX 5800 (CUDA)
    46.8K    8   8          338.9 ms              16.2 ms
    76.8K   16  16        2,495.8 ms              42.4 ms
    122.8K  24  24       11,175.1 ms             102.1 ms
    153.6K  32  32       32,225.6 ms             215.0 ms
    230.4K  32  32       43,352.6 ms             264.9 ms   (164x; Table IV)

This script fits the same sizes with ``bulkem.fit(data, family="gaussian",
n_components=M)``, one dataset, in the one-large-dataset regime
(``Tuning(strategy="large")``, which the default rules also pick at these
sizes; forced here so that ``--scale`` below 1 times the same code), on the
backend given, from one given start near the truth (the data and start of
``bench_gaussian.py``).  Time per iteration: the difference of two whole fits
(``max_iter`` = k1 and k2, ``tol=0``), best of ``--repeat`` each, divided by
k2 - k1, so that the start, packing, transfers and tables cancel; compilation
is excluded by a warm-up fit of each model shape and dtype.  It prints a table
beside the paper's figures and writes ``benchmarks/results/gmm_paper_<backend>.csv``
(columns ``device, date, commit, backend, dtype, N, M, D, ms_per_iteration``),
which ``vignettes/gmm.py`` and ``vignettes/gmm.Rmd`` read.

    python benchmarks/bench_gmm_paper.py --backend cuda            # the paper's sizes
    python benchmarks/bench_gmm_paper.py --backend cpu --scale 0.1 # N / 10: a quick check
    python benchmarks/bench_gmm_paper.py --backend cpu --sizes 230400:32:32 --threads 1

``--scale`` multiplies every N (M and D stay the paper's); ``--sizes`` gives
other N:M:D triples.  The device column names the GPU, or the CPU and the
number of threads used.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import bulkem  # noqa: E402
from bulkem.tuning import Tuning  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_gaussian import mixture, per_iteration, start_from  # noqa: E402

# The paper's Tables III (GeForce 8800 Ultra, 128 cores) and IV (Quadro FX 5800, 240 cores):
# (N, M, D) -> (CPU ms, 8800 Ultra ms, Quadro FX 5800 ms); N as printed ("46.8K" = 46,800).
# The CPU is "non-optimized single-threaded C" on a 3.0 GHz Pentium IV; Table IV's CPU
# column is used (Table III's differs by < 4%). The 230.4K row is Table IV's alone.
PAPER = {
    (46_800, 8, 8): (338.9, 16.2, 16.2),
    (76_800, 16, 16): (2495.8, 43.8, 42.4),
    (122_800, 24, 24): (11175.1, 146.8, 102.1),
    (153_600, 32, 32): (32225.6, 269.3, 215.0),
    (230_400, 32, 32): (43352.6, None, 264.9),
}
LARGE = Tuning(strategy="large")


def commit() -> str:
    """The short commit of the tree, with "+dirty" when bulkem/ or benchmarks/ differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "../bulkem", "."],
                               cwd=HERE, check=True, capture_output=True, text=True).stdout
        return head + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device(backend: str) -> str:
    if backend == "cuda":
        from numba import cuda

        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    import numba

    n = numba.get_num_threads()
    return (f"{cpu_name()} ({platform.node()}), {n} thread{'s' if n > 1 else ''} of "
            f"{os.cpu_count()} cores")


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for part in text.split(","):
        n, m, d = (int(v) for v in part.split(":"))
        out.append((n, m, d))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("cpu", "cuda"), required=True)
    ap.add_argument("--dtypes", default="float32,float64",
                    help="comma list (the paper's code is single precision)")
    ap.add_argument("--sizes", type=parse_sizes, default=list(PAPER),
                    help="N:M:D triples, comma-separated (default: the paper's five)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every N by this")
    ap.add_argument("--k1", type=int, default=None,
                    help="iterations of the shorter fit (default: cuda 10, cpu 2)")
    ap.add_argument("--k2", type=int, default=None,
                    help="iterations of the longer fit (default: cuda 510, cpu 12)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="CPU: Numba threads")
    ap.add_argument("--device", default=None,
                    help="the device column (default: the GPU's name, or the CPU's with its "
                         "host name and threads)")
    ap.add_argument("--csv", type=Path, default=None,
                    help="default benchmarks/results/gmm_paper_<backend>.csv; '-' for none")
    args = ap.parse_args()
    k1 = args.k1 if args.k1 is not None else (10 if args.backend == "cuda" else 2)
    k2 = args.k2 if args.k2 is not None else (510 if args.backend == "cuda" else 12)
    if args.threads:
        import numba

        numba.set_num_threads(args.threads)
    if args.backend == "cuda":
        from bulkem.engines.cuda import available

        ok, why = available()
        if not ok:
            sys.exit(f"--backend cuda: no usable GPU ({why})")
    dev = args.device or device(args.backend)
    today = str(datetime.date.today())
    rev = commit()
    sizes = [(max(1, round(n * args.scale)), m, d) for n, m, d in args.sizes]
    print(f"# {today}  {platform.node()}  {dev}  commit {rev}")
    print(f"# one dataset, diagonal Gaussian mixture, large regime; ms per iteration = (fit of "
          f"{k2} - fit of {k1} iterations) / {k2 - k1}, best of {args.repeat}; tol = 0")
    rows = []
    for n, m, d in sizes:
        x64, w, means, var = mixture(n, d, m, seed=1)
        init = start_from(x64, w, means, var, seed=2)
        for dtype in args.dtypes.split(","):
            x = x64.astype(dtype)

            def fit(k, x=x, init=init, m=m, dtype=dtype):
                return bulkem.fit([x], family="gaussian", n_components=m, n_starts=1,
                                  init=init, max_iter=k, tol=0.0, accel=False, dtype=dtype,
                                  backend=args.backend, progress=False, tuning=LARGE)

            fit(2)  # compiles this shape and dtype
            sec, res = per_iteration(fit, k1, k2, args.repeat)
            if res.summary.n_iter[0] != k2:
                print(f"!! N={n} M={m} D={d} {dtype}: the fit stopped after "
                      f"{res.summary.n_iter[0]} of {k2} iterations ({res.summary.status[0]}); "
                      "its time per iteration is off", flush=True)
            ms = sec * 1e3
            if ms <= 0:
                print(f"!! N={n} M={m} D={d} {dtype}: the two fits' difference is below the "
                      "timing noise; raise --k2", flush=True)
            rows.append({"device": dev, "date": today, "commit": rev, "backend": args.backend,
                         "dtype": dtype, "N": n, "M": m, "D": d, "ms_per_iteration": ms})
            print(f"N={n:>7,} M={m:>2} D={d:>2} {dtype}: {ms:10.3f} ms per iteration "
                  f"(loglik after {k2}: {res.summary.loglik[0]:.8e})", flush=True)

    print(f"\n## {dev}, {args.backend}: ms per EM iteration beside the paper's (single precision "
          "C on one Pentium IV thread; CUDA on a GeForce 8800 Ultra and a Quadro FX 5800)")
    dts = args.dtypes.split(",")
    print("| N | M | D | " + " | ".join(f"bulkem {t}" for t in dts)
          + " | paper CPU | paper 8800 Ultra | paper FX 5800 | FX 5800 / bulkem " + dts[0] + " |")
    print("|---" * (3 + len(dts) + 4) + "|")
    for n, m, d in sizes:
        mine = {r["dtype"]: r["ms_per_iteration"] for r in rows
                if (r["N"], r["M"], r["D"]) == (n, m, d)}
        pub = PAPER.get((n, m, d))

        def cell(v):
            return "-" if v is None else f"{v:,.3f}" if v < 100 else f"{v:,.1f}"
        ratio = (f"{pub[2] / mine[dts[0]]:,.1f}x" if pub and mine.get(dts[0]) else "-")
        print(f"| {n:,} | {m} | {d} | " + " | ".join(cell(mine.get(t)) for t in dts)
              + " | " + " | ".join(cell(v) for v in (pub or (None,) * 3)) + f" | {ratio} |")

    if str(args.csv) != "-":
        import pandas as pd

        path = args.csv or HERE / "results" / f"gmm_paper_{args.backend}.csv"
        pd.DataFrame(rows).to_csv(path, index=False)
        print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
