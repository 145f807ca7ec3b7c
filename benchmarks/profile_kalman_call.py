"""Where a whole ``bulkem.kalman_loglik`` call spends its time beside its engine (issue 37).

    PYTHONPATH=. python3 benchmarks/profile_kalman_call.py [--n-series 100000]
        [--n-steps 1000] [--backend cuda] [--top 20]

AR(10)-plus-noise series (``bench_kalman.py`` (a)), the exact method: the whole call from
one ``(n_series, n_steps)`` array and from a list of its rows (best of 3, after a warm-up),
the engine alone on the packed batch (host data, copies included), the host's data path
alone (reading and packing the series: ``read`` + ``pack``), the list's copy into one array
by ``bulkem.data.gather`` beside ``np.concatenate`` (the path before), and a cProfile of one
whole call from the array, the functions by their own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numba
import numpy as np
from bench_kalman import ar10, simulate_ar

import bulkem
from bulkem.data.gather import gather
from bulkem.models.ssm.linear import STATE_SPACE_FAMILY, LinearGaussian, pack_series


def best(fn, repeat: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-series", type=int, default=100_000)
    ap.add_argument("--n-steps", type=int, default=1_000)
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    model = ar10()
    y = simulate_ar(model, args.n_series, args.n_steps, seed=1)
    ys = list(y)
    if args.backend == "cuda":
        from bulkem.engines.cuda import kalman as engine
    else:
        from bulkem.engines.cpu import kalman as engine
    batch = pack_series(list(enumerate(y[:, :, None])), [model], True, np.dtype("float64"))[0]
    rows = [("engine alone, host batch (copies included)", best(lambda: engine.exact(batch))),
            ("whole call from one (n, T) array",
             best(lambda: bulkem.kalman_loglik(y, model, backend=args.backend))),
            ("whole call from a list of arrays",
             best(lambda: bulkem.kalman_loglik(ys, model, backend=args.backend)))]
    lg = LinearGaussian(model.dim_state, model.dim_obs)

    def read(series, **options):
        return STATE_SPACE_FAMILY.read(series, "dataset", "value",
                                       {"dim_obs": model.dim_obs, **options})

    cols = [v for _, v in read(ys)]
    rows += [("host data path alone, from the array", best(lambda: lg.pack(read(y)))),
             ("host data path alone, from the list", best(lambda: lg.pack(read(ys)))),
             ("  the list's copy: gather", best(lambda: gather(cols, 2, model.dim_obs))),
             ("  the list's copy: np.concatenate (before)",
              best(lambda: np.concatenate(cols, out=np.empty((y.size, model.dim_obs)))))]
    print(f"{args.n_series:,} AR(10) series x {args.n_steps:,} steps, exact, "
          f"backend={args.backend}, {numba.get_num_threads()} threads")
    for what, t in rows:
        print(f"  {what:<45} {t * 1e3:9.1f} ms")
    prof = cProfile.Profile()
    prof.enable()
    bulkem.kalman_loglik(y, model, backend=args.backend)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
    print("\ncProfile of one whole call from the array, by own time:")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[-4000:])


if __name__ == "__main__":
    main()
