"""Compile every Kalman CUDA kernel for sm_90 without a GPU; print registers and local memory.

    PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:$NVRTC_LIB \
        CUDA_HOME=/usr/local/cuda \
        python benchmarks/kalman_ptx_offline.py [--models ar10,rw2,rw10] [--dtypes float64]

(``NVRTC_LIB``: the ``nvidia/cu13/lib`` folder of the unzipped
``nvidia-cuda-nvrtc`` 13.0 wheel, which numba-cuda loads to pick the target;
the development machines' CUDA 13.0 toolkit lacks libnvrtc.)
Numba compiles each kernel to PTX (needs libNVVM, not a GPU) and ``ptxas``
assembles it, so a kernel that the real compiler rejects (which the
simulator would accept) fails here, and ``ptxas -v`` reports the registers,
spill stores and local-memory bytes per thread: how much of a thread's state
and covariance stays in registers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from numba import boolean, cuda, float32, float64, int8, int64
from numba.cuda import dispatcher as cuda_dispatcher

from bulkem import StateSpace
from bulkem.engines.cuda import kalman as kalman_cuda

MODELS = {
    "ar10": lambda: StateSpace.ar(-np.poly([0.9, -0.8, 0.7, -0.6, 0.5, -0.4, 0.3, -0.2, 0.1,
                                            0.05])[1:], 1.0, 0.1),
    "rw2": lambda: StateSpace.random_walk(2, 0.1, 1.0),
    "rw10": lambda: StateSpace.random_walk(10, 0.1, 1.0),
    "ar3": lambda: StateSpace.ar([0.5, -0.3, 0.1], 1.0, 0.3),
    "dense2": lambda: StateSpace([[1.0, 1.0], [0.0, 1.0]], [[1.0, 0.0]], np.eye(2), [[1.0]],
                                 [0.0, 0.0], np.eye(2)),
}


class _Hopper:
    """Stands in for the current device: Numba compiles device functions for its cc."""

    compute_capability = (9, 0)


def signatures(fdt):
    v, vi, vi8 = fdt[::1], int64[::1], int8[::1]
    m2 = fdt[:, ::1]
    models = (m2, m2, m2, m2, m2, m2)
    return {
        "exact": (v, vi, vi, *models, float64[::1], int64[::1], int64[::1]),
        "exact_shared": (v, vi, vi, int64, vi, v, v, v, v, v, float64[::1], float64[::1],
                         int64[::1]),
        "scan_up0": (v, vi, vi, vi, vi, vi, vi, *models, m2, float64[::1]),
        "scan_up": (m2, vi, vi, vi, m2),
        "scan_down": (m2, m2, vi, vi, vi, m2),
        # the level-0 results are rows of one float64 array (kalman_cuda._scan_plan)
        "scan_final": (v, vi, vi, vi, vi, vi, *models, m2, float64[::1], float64[::1],
                       float64[::1], float64[::1]),
        "chunk_sums": (float64[::1], vi8, vi8, vi, vi, float64[::1], vi, vi),
        "splash": (v, vi, vi, *models, int64, fdt, boolean, v, v, float64[::1], float64[::1],
                   int8[::1], int8[::1]),
    }


def assemble(ptx: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        src.write_text(ptx)
        info = subprocess.run([os.environ.get("PTXAS", "ptxas"), "-arch=sm_90", "-O3", "-v",
                               str(src), "-o", str(cubin)], capture_output=True, text=True)
        if info.returncode:
            raise RuntimeError(f"ptxas failed:\n{info.stderr}")
    return " ".join(line.split(":", 1)[-1].strip() for line in info.stderr.splitlines()
                    if "Used" in line or "spill" in line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ar10,rw2,rw10")
    ap.add_argument("--dtypes", default="float64,float32")
    args = ap.parse_args()
    cuda_dispatcher.get_current_device = _Hopper  # no GPU here; compile for sm_90
    for name in args.models.split(","):
        model = MODELS[name]()
        for dtype in args.dtypes.split(","):
            fdt = float32 if dtype == "float32" else float64
            progs = kalman_cuda._programs(model.dim_state, model.dim_obs, model.kind,
                                          np.dtype(dtype))
            for kname, sig in signatures(fdt).items():
                ptx, _ = cuda.compile_ptx(progs[kname].py_func, sig, cc=(9, 0))
                print(f"{name:6} {dtype:8} {kname:13} {assemble(ptx)}", flush=True)


if __name__ == "__main__":
    main()
