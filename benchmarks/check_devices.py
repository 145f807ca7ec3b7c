"""Same fits on one GPU and on all GPUs, whatever the chunking (float64 and float32).

    python benchmarks/check_devices.py

Fits a batch of 20 demo datasets x 500 starts with every visible GPU, then
with GPU 0 alone, then on GPU 0 in small chunks, and prints whether the
``starts`` and ``components`` tables are identical (bit for bit).  Each run's
settings are a :class:`bulkem.tuning.Tuning` (``cuda_devices``, ``cuda_chunk_fits``,
``cuda_min_chunk_fits``) passed to ``bulkem.fit``.
"""

from __future__ import annotations

import bulkem
from bulkem.tuning import Tuning


def main() -> None:
    data = bulkem.datasets.simulate_demo(20, 2000, seed=3)
    for dtype in ("float64", "float32"):
        for tol in (0.0, 1e-6):
            kw = dict(n_starts=500, max_iter=100, tol=tol, seed=5, backend="cuda", dtype=dtype,
                      progress=False)
            runs = {}
            for name, tuning in (("all GPUs", Tuning()), ("GPU 0", Tuning(cuda_devices=(0,))),
                                 ("GPU 0, small chunks", Tuning(cuda_devices=(0,),
                                                                cuda_chunk_fits=777,
                                                                cuda_min_chunk_fits=1))):
                runs[name] = bulkem.fit(data, tuning=tuning, **kw)
            base = runs["all GPUs"]
            for name, r in runs.items():
                same = r.starts.equals(base.starts) and r.components.equals(base.components)
                print(f"{dtype} tol={tol}: {name:<20} identical to all GPUs: {same}")


if __name__ == "__main__":
    main()
