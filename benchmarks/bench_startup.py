"""Start-up: ``import bulkem`` and a small ``bulkem fit`` from the command line, cold and warm.

Each figure is a fresh process (wall time, median of ``--repeat``).  The compiled
kernels go to a temporary ``NUMBA_CACHE_DIR``: the first ``bulkem fit`` compiles
them (and writes them there), the later ones load them.  The same with the
on-disk cache turned off (``BULKEM_NO_CACHE=1``) is the baseline.

    python benchmarks/bench_startup.py
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def wall(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    py = sys.executable
    cli = [py, "-m", "bulkem"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rng = np.random.default_rng(1)
        rows = ["dataset,value"] + [f"{d},{float(v)!r}" for d in range(3)
                                    for v in rng.wald(2.0, 1.0, 200)]
        (tmp / "small.csv").write_text("\n".join(rows) + "\n")
        fit = [*cli, "fit", str(tmp / "small.csv"), "--starts", "10", "--quiet",
               "--backend", "cpu", "--out", str(tmp / "fits.csv")]
        base = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "cache")}
        base.pop("NUMBA_ENABLE_CUDASIM", None)
        out = []
        imp = [wall([py, "-c", "import bulkem"], base) for _ in range(args.repeat)]
        out.append(("python -c 'import bulkem'", np.median(imp), "goal < 1 s"))
        imp2 = [wall([py, "-c", "import bulkem; bulkem.fit"], base) for _ in range(args.repeat)]
        out.append(("import bulkem; bulkem.fit (loads the package)", np.median(imp2), ""))
        out.append(("bulkem fit small.csv: first (compiles, writes the cache)",
                    wall(fit, base), ""))
        warm = [wall(fit, base) for _ in range(args.repeat)]
        out.append(("bulkem fit small.csv: again (cache on disk)", np.median(warm),
                    "goal < 2 s"))
        nocache = {**base, "BULKEM_NO_CACHE": "1"}
        cold = [wall(fit, nocache) for _ in range(max(2, args.repeat // 2))]
        out.append(("bulkem fit small.csv: BULKEM_NO_CACHE=1 (baseline)", np.median(cold),
                    ""))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# {datetime.date.today()}  cpu cores {os.cpu_count()}  load average {load:.1f}  "
          f"(3 datasets x 200 values, 10 starts, CPU engine)")
    for label, sec, note in out:
        print(f"{label:<62}{sec:>8.2f} s  {note}")
    print(f"# the cache saves {out[4][1] - out[3][1]:.2f} s per call "
          f"({out[4][1] / out[3][1]:.1f}x)")


if __name__ == "__main__":
    main()
