"""Count the bulk kernel's instructions per loop without a GPU (Hopper SASS, offline).

    python benchmarks/sass_offline.py [--family invgauss] [--components 2] [--dims 1]
                                      [--out DIR] [--set NAME=VALUE ...]
    python benchmarks/sass_offline.py --family hmm --emission categorical \
                                      --components 4 --dims 8 --dtypes float64
    python benchmarks/sass_offline.py --family tmap --orders 1,2,3

Numba compiles the kernel to PTX for sm_90 (needs libNVVM, not a GPU),
``ptxas`` assembles it with the engine's register cap and ``nvdisasm`` lists
the SASS.  Every backward branch closes a loop; the script prints each loop's
length and opcode mix, so that a kernel change can be judged by its
instruction count before it costs device time.  Tools are found on ``PATH``
or through ``PTXAS`` / ``NVDISASM``; libNVVM through ``CUDA_HOME`` as Numba
looks for it.  On the development machines (CUDA 13.0 toolkit, no driver)::

    pip download --no-deps -d /tmp/whl nvidia-cuda-nvdisasm    # then unzip it
    LD_LIBRARY_PATH=/usr/local/cuda-13.0/lib64 CUDA_HOME=/usr/local/cuda-13.0 \
    NVDISASM=/tmp/nvdis/nvidia/cu13/bin/nvdisasm python benchmarks/sass_offline.py

Numba 0.68's CUDA target also loads libnvrtc (to pick the architecture): where the toolkit
lacks it, ``pip download --no-deps nvidia-cuda-nvrtc==13.0.*``, unzip it and add its
``nvidia/cu13/lib`` to ``LD_LIBRARY_PATH``.  (libNVVM must match ``ptxas``: a newer libNVVM
writes PTX that an older ``ptxas`` refuses.)

Hidden Markov models (``--family hmm``: ``--emission``, ``--components`` states, ``--dims``
symbols or dimensions) and TMAPs (``--family tmap --orders``) compile the bulk kernel of
sequence models, with their register cap (``Tuning.cuda_max_registers_units``); their
step loops are the short inner loops of the listing (the 2026-11-30 session found the
E-step's per-step sums in local memory this way: ``LDL``/``STL`` in those loops).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from numba import cuda, float64, int32, int64, types
from numba.cuda import dispatcher as cuda_dispatcher

from bulkem import models
from bulkem.engines.cuda import bulk
from bulkem.kernels.fastmath import EXP_CONSTS
from bulkem.tuning import DEFAULT, Tuning

sys.path.insert(0, os.path.dirname(__file__))
from tuning_args import from_items  # noqa: E402

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
TARGET = re.compile(r"`?\(?\.L_x_\d+\)?|0x([0-9a-f]+)")


class _Hopper:
    """Stands in for the current device: Numba compiles device functions for its cc."""

    compute_capability = (9, 0)


def _model(family: str, m: int, d: int, tuning: Tuning, emission: str = "categorical",
           orders: tuple = (1, 2, 3)):
    """The model whose bulk kernel is compiled, and whether it is a model of units."""
    import dataclasses

    if family == "hmm":
        from bulkem.models.hmm import EMISSIONS, HMMModel

        return dataclasses.replace(HMMModel(EMISSIONS[emission], m, d), tuning=tuning), True
    if family == "tmap":
        from bulkem.models.tmap import TMAPModel

        return dataclasses.replace(TMAPModel.of(orders), tuning=tuning), True
    return models.MixtureModel(models.get(family), m, d, tuning=tuning), False


def compile_sass(family: str, m: int, d: int, dtype: str, tuning: Tuning = DEFAULT,
                 emission: str = "categorical", orders: tuple = (1, 2, 3)) -> tuple[str, str]:
    cuda_dispatcher.get_current_device = _Hopper  # no GPU here; compile for sm_90
    model, units = _model(family, m, d, tuning, emission, orders)
    kernel = bulk.kernel(model, np.dtype(dtype), bulk.lanes_per_fit(0.0, dtype, model))
    # the batch tuple's types, from the model's own packing of a tiny dataset
    from numba import typeof

    from bulkem.data import Ragged

    width = 1 if units else d
    values = np.ones((4, width)) if width > 1 else np.ones(4)
    part = Ragged(values, np.array([0, 2, 4]), np.array([0, 2]) if units else np.array([0, 1]))
    if not units:
        part = Ragged.flat(values, np.array([0, 4]))
    batch = model.kernel_data(part)[0]
    narrow = tuple(a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype == np.float64
                   else a for a in batch)
    data, data64 = typeof(narrow), typeof(batch)
    sig = (data, data64, int64[::1], int64[::1], float64[::1], float64[:, ::1], int32[::1],
           int32[::1], float64[::1], types.UniTuple(float64, len(EXP_CONSTS)), int64, float64,
           float64, float64, int64[::1], int32[::1], float64[:, ::1], float64[:, ::1], int64,
           float64[:, ::1])
    ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp, "k.ptx"), Path(tmp, "k.cubin")
        src.write_text(ptx)
        cap = (getattr(model, "cuda_max_registers", tuning.cuda_max_registers_units) if units
               else tuning.cuda_max_registers)
        regs = ["-maxrregcount", str(cap)] if cap else []
        info = subprocess.run([os.environ.get("PTXAS", "ptxas"), "-arch=sm_90", "-O3", "-v", *regs,
                               str(src), "-o", str(cubin)], capture_output=True, text=True)
        if info.returncode:
            raise RuntimeError(f"ptxas failed:\n{info.stderr}")
        info = info.stderr
        sass = subprocess.run([os.environ.get("NVDISASM", "nvdisasm"), "-hex", "-c", str(cubin)],
                              capture_output=True, text=True, check=True).stdout
    usage = " ".join(line.split(":", 1)[-1].strip() for line in info.splitlines() if "Used" in line)
    return sass, usage


def loops(sass: str) -> list[tuple[int, int, collections.Counter]]:
    """(start, end, opcode counts) of every loop closed by a backward branch."""
    rows = [(int(mt.group(1), 16), mt.group(3), mt.group(4)) for mt in LINE.finditer(sass)]
    labels = {}
    for line in sass.splitlines():
        lab = re.match(r"\s*(\.L_x_\d+):", line)
        if lab:
            nxt = LINE.search(sass, sass.index(line) + len(line))
            if nxt:
                labels[lab.group(1)] = int(nxt.group(1), 16)
    found = []
    for addr, op, rest in rows:
        if not op.startswith("BRA"):
            continue
        lab = re.search(r"(\.L_x_\d+)", rest)
        target = labels.get(lab.group(1)) if lab else None
        if target is not None and target <= addr:
            ops = collections.Counter(o.split(".")[0] for a, o, _ in rows if target <= a <= addr)
            found.append((target, addr, ops))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="invgauss")
    ap.add_argument("--components", type=int, default=2)
    ap.add_argument("--dims", type=int, default=1,
                    help="dimensions (hmm: symbols of a categorical emission, or dimensions)")
    ap.add_argument("--emission", default="categorical", help="hmm: the emission")
    ap.add_argument("--orders", default="1,2,3", help="tmap: the branches' orders")
    ap.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    ap.add_argument("--out", default=None, help="write the SASS listings here")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a Tuning field to compile with, e.g. cuda_max_registers=None (or "
                         "the old upper-case config name, CUDA_MAX_REGISTERS=None)")
    args = ap.parse_args()
    tuning = from_items(args.set)
    fp64 = {"DFMA", "DADD", "DMUL", "DSETP", "DMNMX", "F2F", "I2F", "F2I", "MUFU"}
    orders = tuple(int(r) for r in args.orders.split(","))
    for dtype in args.dtypes:
        sass, usage = compile_sass(args.family, args.components, args.dims, dtype, tuning,
                                   args.emission, orders)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            Path(args.out, f"sass_offline_{dtype}.txt").write_text(sass)
        print(f"{dtype}: {usage}")
        for start, end, ops in loops(sass):
            n = sum(ops.values())
            fp = sum(v for k, v in ops.items() if k in fp64 or k.startswith("F"))
            top = ", ".join(f"{k} {v}" for k, v in ops.most_common(12))
            print(f"  loop {start:#06x}-{end:#06x}: {n:4d} instr, {fp:3d} FP/MUFU/conv | {top}")


if __name__ == "__main__":
    main()
