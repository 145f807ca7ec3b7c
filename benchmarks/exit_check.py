"""Does a process that used the GPUs exit cleanly?  Steps given on the command line.

    python -X faulthandler benchmarks/exit_check.py all,all-f32; echo "rc=$?"

Runs the comma-separated steps in one process, then exits; a crash shows as a
non-zero exit status (and, with ``-X faulthandler``, the Python stacks of
every thread).  Steps: ``numba`` (numba-cuda alone: an array and a stream on
every GPU, a host thread each), ``cpu`` (a small fit on the CPU engine),
``one`` / ``all`` (a small float64 ``bulkem.fit`` on GPU 0 / on every GPU:
``Tuning(cuda_devices=(0,))`` / ``Tuning(cuda_devices=None)``), with ``-f32`` in
float32 and ``-big`` on the issue-4 batch, and ``clear`` (empty the CUDA engine's
buffer pool and collect garbage).
"""

from __future__ import annotations

import gc
import sys
import threading

import numpy as np

import bulkem
from bulkem.engines.cuda import buffers
from bulkem.engines.cuda import compat as cuda_engine
from bulkem.tuning import Tuning

cuda = cuda_engine.cuda


def touch(dev: int) -> None:
    with cuda.gpus[dev]:
        a = cuda.to_device(np.ones(1000))
        s = cuda.stream()
        a.copy_to_host(stream=s)
        s.synchronize()


def step(name: str) -> None:
    if name == "numba":
        threads = [threading.Thread(target=touch, args=(d,)) for d in range(len(cuda.gpus))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return
    if name == "clear":
        buffers._pool.clear()
        gc.collect()
        return
    where, *opts = name.split("-")
    big = "big" in opts
    data = bulkem.datasets.simulate_demo(100 if big else 20, 2000 if big else 300, seed=1)
    tuning = Tuning(cuda_devices=(0,) if where == "one" else None)
    res = bulkem.fit(data, n_starts=1000 if big else 50, max_iter=100 if big else 5, tol=0.0,
                     accel=False,
                     seed=1, backend="cpu" if where == "cpu" else "cuda",
                     dtype="float32" if "f32" in opts else "float64", tuning=tuning)
    print(name, res, flush=True)


if __name__ == "__main__":
    for name in (sys.argv[1] if len(sys.argv) > 1 else "all").split(","):
        step(name)
    print("done", flush=True)
