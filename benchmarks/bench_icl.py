"""What reading a grid fit's ``selection`` table costs (its ICL column: a compiled pass over
every value at every size), beside the grid call itself.

    python benchmarks/bench_icl.py [--datasets 1000] [--obs 2000] [--backend cpu]

The fits are cut short (``max_iter=2``, 2 starts): the ICL's pass depends on the values and
sizes, not on how well they were fitted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=2000)
    ap.add_argument("--backend", default="cpu")
    a = ap.parse_args()
    import bulkem

    rng = np.random.default_rng(0)
    batches = {
        "invgauss": [np.concatenate([rng.wald(1.0, 6.0, a.obs // 2), rng.wald(4.0, 25.0, a.obs
                                                                           - a.obs // 2)])
                     for _ in range(a.datasets)],
        "gaussian": [np.concatenate([rng.normal(0, 1, a.obs // 2), rng.normal(4, 1, a.obs
                                                                             - a.obs // 2)])
                     for _ in range(a.datasets)]}
    print(f"{a.datasets:,} datasets x {a.obs:,} values, K = 1..6, backend {a.backend}")
    print("| family | grid call s (2 starts, 2 iterations) | selection read (ICL) s |")
    print("|---|---|---|")
    for fam, x in batches.items():
        kw = dict(family=fam, n_components=list(range(1, 7)), n_starts=2, max_iter=2, seed=1,
                  backend=a.backend, progress=False)
        assert len(bulkem.fit(x[:4], **kw).selection)  # compile
        t = time.perf_counter()
        res = bulkem.fit(x, **kw)
        t_fit = time.perf_counter() - t
        t = time.perf_counter()
        assert res.selection["icl"].notna().any()
        print(f"| {fam} | {t_fit:.3f} | {time.perf_counter() - t:.3f} |", flush=True)


if __name__ == "__main__":
    main()
