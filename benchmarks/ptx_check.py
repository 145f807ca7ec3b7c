"""Compile the bulk and wide regimes' CUDA kernels for sm_90 without a GPU, through ptxas.

    source /tmp/sassenv.sh    # CUDA_HOME, LD_LIBRARY_PATH, PATH to a CUDA toolkit with ptxas
    python benchmarks/ptx_check.py

Numba writes PTX for compute capability 9.0 (needs libNVVM, not a GPU) and
``ptxas`` assembles it, which refuses what the simulator accepts (local or
shared arrays of size zero or of a non-constant size), and NVVM refuses what
the simulator accepts too (a shared array defined twice: ERROR_INVALID_IR).
Covers the mixtures' bulk kernel at every lanes-per-fit setting the engine
uses (tol = 0, tol > 0, the block-wide float64 refit), and the TMAP's and
HMM's bulk and wide kernels, with the default :class:`bulkem.tuning.Tuning`
(its lanes, threads and register caps, as the engines read them from the
model's ``tuning``).  Prints, per kernel, ptxas' exit status, registers and
spills.  Exits non-zero if any kernel fails.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from numba import cuda, float32, float64, int32, int64, types
from numba.cuda import dispatcher as cuda_dispatcher


class _Hopper:
    """Stands in for the current device: Numba compiles device functions for its cc."""

    compute_capability = (9, 0)


def _ptxas(ptx: str, regs: int | None) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        src.write_text(ptx)
        cmd = ["ptxas", "-arch=sm_90", "-O3", "-v", str(src), "-o", str(out)]
        if regs:
            cmd[4:4] = ["-maxrregcount", str(regs)]
        run = subprocess.run(cmd, capture_output=True, text=True)
    info = [ln.split(":", 1)[-1].strip() for ln in run.stderr.splitlines()
            if "Used" in ln or "spill" in ln or "error" in ln.lower()]
    return run.returncode, "; ".join(info[:3])


def main() -> int:
    cuda_dispatcher.get_current_device = _Hopper  # no GPU here; compile for sm_90
    from bulkem.engines.cuda import bulk, wide
    from bulkem.kernels.fastmath import EXP_CONSTS
    from bulkem.models import MixtureModel, get
    from bulkem.models.hmm import EMISSIONS, HMMModel
    from bulkem.models.tmap import TMAPModel

    xc = types.UniTuple(float64, len(EXP_CONSTS))
    failed = 0
    for fam, M, D in (("invgauss", 2, 1), ("gaussian", 3, 2)):
        m = MixtureModel(get(fam), M, D)
        for dtype in ("float64", "float32"):
            fdt = float32 if dtype == "float32" else float64
            sig = (types.Tuple((fdt[::1], int64)), types.Tuple((float64[::1], int64)),
                   int64[::1], int64[::1], float64[::1], float64[:, ::1], int32[::1],
                   int32[::1], float64[::1], xc, int64, float64, float64, float64, int64[::1],
                   int32[::1], float64[:, ::1], float64[:, ::1], int64)
            lanes = {bulk.lanes_per_fit(0.0, dtype, m), bulk.lanes_per_fit(1e-6, dtype, m)}
            if dtype == "float64":
                lanes.add(m.tuning.cuda_lanes_per_refit)
            for G in sorted(lanes):
                try:
                    ptx, _ = cuda.compile_ptx(bulk.kernel(m, np.dtype(dtype), G).py_func, sig,
                                              cc=(9, 0))
                    rc, info = _ptxas(ptx, m.tuning.cuda_max_registers)
                except Exception as e:  # NVVM refused the IR
                    rc, info = 1, f"{type(e).__name__}: {e}"
                failed += rc != 0
                print(f"mix   {fam:8s} M={M} D={D} {dtype:8s} bulk {G:3d} lanes rc={rc} {info}")

    models = [TMAPModel.of((1, 2, 3)), TMAPModel.of((1, 1, 2, 4)),
              HMMModel(EMISSIONS["categorical"], 4, 8)]
    for m in models:
        for dtype in ("float64", "float32"):
            fdt = float32 if dtype == "float32" else float64
            data = types.Tuple((fdt[::1], int64[::1]))
            data64 = types.Tuple((float64[::1], int64[::1]))
            init, estep, reduce, _ = wide.kernels(m, np.dtype(dtype))
            sigs = {
                "wide init": (init, (float64[::1], float64[::1], float64[::1], fdt[::1],
                                     float64[::1]), None),
                "wide estep": (estep, (data, int64, int64, fdt[::1], float64[:, ::1],
                                       int64[::1], float64[:, ::1], xc),
                               m.tuning.wide_cuda_max_registers),
                "wide reduce": (reduce, (float64[:, ::1], int64, int64[::1], float64[::1],
                                         float64[::1], float64[::1], float64[::1], fdt[::1],
                                         int64, float64, int64, float64, float64, float64),
                                None),
            }
            k = bulk.kernel(m, np.dtype(dtype), bulk.lanes_per_fit(0.0, dtype, m))
            sigs["bulk"] = (k, (data, data64, int64[::1], int64[::1], float64[::1],
                                float64[:, ::1], int32[::1], int32[::1], float64[::1], xc, int64,
                                float64, float64, float64, int64[::1], int32[::1],
                                float64[:, ::1]), m.tuning.cuda_max_registers_units)
            for name, (kern, sig, regs) in sigs.items():
                ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))
                rc, info = _ptxas(ptx, regs)
                failed += rc != 0
                print(f"{m.name:5s} {m.emission.name:14s} {dtype:8s} {name:12s} rc={rc} {info}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
