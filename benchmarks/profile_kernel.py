"""Look inside the CUDA kernel: SASS opcode mix, registers, and one launch to profile.

    python benchmarks/profile_kernel.py sass OUTDIR        # write SASS, print opcode counts
    ncu --clock-control none --launch-skip 1 --launch-count 1 \\
        python benchmarks/profile_kernel.py run float64     # one 25,000-fit launch
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

import numpy as np

import bulkem
from bulkem import models
from bulkem.engines.cuda import bulk

OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)")
SMALL = bulkem.datasets.simulate_demo(2, 100, seed=1)


def sass(outdir: str) -> None:
    model = models.MixtureModel(models.get("invgauss"), 2, 1)
    for dtype in ("float64", "float32"):
        bulkem.fit(SMALL, n_starts=2, backend="cuda", dtype=dtype)
        k = bulk.kernel(model, np.dtype(dtype), bulk.lanes_per_fit(0.0, dtype, model))
        text = "\n".join(k.inspect_sass().values())
        Path(outdir, f"sass_{dtype}.txt").write_text(text)
        ops = collections.Counter(m.group(1).split(".")[0] for m in OPCODE.finditer(text))
        print(f"{dtype}: regs {list(k.get_regs_per_thread().values())} "
              f"local {list(k.get_local_mem_per_thread().values())} "
              f"instructions {sum(ops.values())}")
        print("   ", ", ".join(f"{op} {n}" for op, n in ops.most_common(28)))


def run(dtype: str) -> None:
    bulkem.fit(SMALL, n_starts=2, max_iter=2, backend="cuda", dtype=dtype)  # compile
    data = bulkem.datasets.simulate_demo(100, 2000, seed=1)
    bulkem.fit(data, n_starts=250, max_iter=100, tol=0.0,
               accel=False, seed=1, backend="cuda", dtype=dtype)


if __name__ == "__main__":
    sass(sys.argv[2]) if sys.argv[1] == "sass" else run(sys.argv[2])
