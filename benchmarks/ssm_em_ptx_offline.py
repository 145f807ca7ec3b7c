"""Compile the bulk EM kernel of the state-space families for sm_90 without a GPU.

    source /tmp/sassenv.sh   # or: PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=/usr/local/cuda \
                             #     LD_LIBRARY_PATH=/usr/local/cuda/lib64:$NVRTC_LIB
    python benchmarks/ssm_em_ptx_offline.py [--models ar1,ar3,ar10,level]

Numba compiles the kernel (the EM driver around the Kalman smoother E-step
and the closed-form M-steps) to PTX (libNVVM, no GPU) and ``ptxas``
assembles it, so a kernel the real compiler rejects, which the simulator
would accept (zero-length local arrays, shared or local sizes that are not
compile-time constants), fails here; ``ptxas -v`` reports the registers,
spill stores and local memory (stack frame) per thread.  See
``benchmarks/kalman_ptx_offline.py`` for where libnvrtc comes from.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from numba import cuda, float64, int32, int64, types
from numba.cuda import dispatcher as cuda_dispatcher

from bulkem.engines.cuda import bulk
from bulkem.kernels.fastmath import EXP_CONSTS
from bulkem.models.ssm.model import SSMModel

MODELS = {"ar1": ("ar", 1), "ar3": ("ar", 3), "ar10": ("ar", 10), "level": ("local_level", 1)}


class _Hopper:
    """Stands in for the current device: Numba compiles device functions for its cc."""

    compute_capability = (9, 0)


def assemble(ptx: str, regs: int | None) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        src.write_text(ptx)
        cmd = [os.environ.get("PTXAS", "ptxas"), "-arch=sm_90", "-O3", "-v", str(src), "-o",
               str(cubin)]
        if regs:
            cmd[1:1] = ["-maxrregcount", str(regs)]
        info = subprocess.run(cmd, capture_output=True, text=True)
        if info.returncode:
            raise RuntimeError(f"ptxas failed:\n{info.stderr}")
    return " ".join(line.split(":", 1)[-1].strip() for line in info.stderr.splitlines()
                    if "Used" in line or "spill" in line or "stack" in line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ar1,ar3,ar10,level")
    ap.add_argument("--regs", type=int, default=0,
                    help="register cap (default: Tuning.cuda_max_registers_series)")
    args = ap.parse_args()
    cuda_dispatcher.get_current_device = _Hopper  # no GPU here; compile for sm_90
    data = types.Tuple((float64[::1], int64[::1]))
    sig = (data, data, int64[::1], int64[::1], float64[::1], float64[:, ::1], int32[::1],
           int32[::1], float64[::1], types.UniTuple(float64, len(EXP_CONSTS)), int64, float64,
           float64, float64, int64[::1], int32[::1], float64[:, ::1], float64[:, ::1], int64,
           float64[:, ::1])
    for name in args.models.split(","):
        model = SSMModel(*MODELS[name])
        lanes = bulk.lanes_per_fit(1e-6, np.float64, model)
        k = bulk.kernel(model, np.dtype("float64"), lanes)
        ptx, _ = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))
        regs = args.regs or model.cuda_max_registers
        print(f"{name:6} lanes={lanes} regs<={regs} {assemble(ptx, regs)}",
              flush=True)


if __name__ == "__main__":
    main()
