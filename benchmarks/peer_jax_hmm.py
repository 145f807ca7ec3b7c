"""A JAX peer of bulkem's HMM fits: what a GPU user would write today, on the same batch.

Dynamax-style scaled forward-backward: a ``jax.lax.scan`` forward (filtered
probabilities, one normaliser per step) and backward, ``jax.vmap`` over sequences (padded
to the longest, 500, with a mask), starts and datasets, float64; one Baum-Welch
iteration (E-step, then the M-step of the initial probabilities, the transitions and the
emissions: categorical, diagonal Gaussian or Poisson) and the ``iters`` iterations around
it in one ``jax.jit``, then the log-likelihood at the final parameters (what bulkem's
``starts.loglik`` is).  Compilation is excluded by a warm-up of one iteration on the same
shapes.  The fits start from bulkem's own starting values, so each fit's final
log-likelihood must equal bulkem's (float64, to rounding): it is checked, fit by fit.

Two ways to run it (its own process either way: JAX and numba-cuda do not share one):

    # bench_hmm.py --jax writes the batch, bulkem's starts and log-likelihoods to a file
    python benchmarks/peer_jax_hmm.py --input batch.npz
    # alone: simulates the batch, draws the starts and the reference by bulkem's CPU engine
    python benchmarks/peer_jax_hmm.py --datasets 20 --starts 3 --iters 5 --emission categorical

The last line printed is a JSON record (``fits``, ``seconds``, ``fits_per_s``, the
agreement with bulkem), which ``bench_hmm.py`` reads; a missing JAX prints
``{"error": ...}`` and exits with status 3.  The whole batch goes to the device at once; if
it does not fit, the datasets are split into chunks (halved until one fits, or
``--chunk``), each its own call, timed together.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

NO_JAX = 3  # exit status: JAX is not importable


def pad(data: list, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Ragged datasets of equally many sequences -> values (n_datasets, Q, T, dim), lengths."""
    n, q = len(data), len(data[0])
    T = max(len(s) for ds in data for s in ds)
    dim = data[0][0].shape[1] if kind == "gaussian" else 1
    x = np.zeros((n, q, T, dim))
    lengths = np.zeros((n, q), dtype=np.int64)
    for d, ds in enumerate(data):
        for k, s in enumerate(ds):
            x[d, k, :len(s)] = np.asarray(s, dtype=np.float64).reshape(len(s), dim)
            lengths[d, k] = len(s)
    return x, lengths


def start_arrays(res, kind: str, n_datasets: int, n_starts: int) -> dict:
    """Every start's starting values of a bulkem result, as arrays (n_datasets, S, N, ...)."""
    sv = res.start_values
    N = res.n_components
    shape = (n_datasets, n_starts, N)
    out = {"startprob": sv["startprob"].to_numpy().reshape(shape)}
    tr = res.tables["start_transitions"]
    out["transmat"] = tr["prob"].to_numpy().reshape(*shape, N)
    if kind == "categorical":
        cols = [c for c in sv.columns if c.startswith("prob_")]
        out["emissionprob"] = sv[cols].to_numpy().reshape(*shape, len(cols))
    elif kind == "gaussian":
        means = [c for c in sv.columns if c.startswith("mean_")]
        out["means"] = sv[means].to_numpy().reshape(*shape, len(means))
        out["vars"] = sv[[c.replace("mean_", "var_") for c in means]].to_numpy().reshape(
            *shape, len(means))
    else:
        out["lambdas"] = sv["lambda"].to_numpy().reshape(shape)
    return out


def save_input(path: str, data: list, kind: str, res, n_starts: int, iters: int,
               n_symbols: int = 0) -> None:
    """The batch, bulkem's starts and its per-start log-likelihoods, for ``--input``."""
    x, lengths = pad(data, kind)
    starts = start_arrays(res, kind, len(data), n_starts)
    st = res.starts
    np.savez(path, x=x, lengths=lengths, kind=kind, iters=iters, n_symbols=n_symbols,
             loglik=st["loglik"].to_numpy().reshape(len(data), n_starts),
             ok=(st["status"].astype(str) != "degenerate").to_numpy().reshape(len(data),
                                                                               n_starts),
             **{f"p_{k}": v for k, v in starts.items()})


def emission_names(kind: str) -> tuple[str, ...]:
    return {"categorical": ("emissionprob",), "gaussian": ("means", "vars"),
            "poisson": ("lambdas",)}[kind]


def build(kind: str, n_symbols: int):
    """The jitted fit: ``run(params, x, mask, n_iter) -> (params, loglik)`` of a batch."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import gammaln

    def emit(p, x):
        """Emission factors (T, N) scaled so that each step's largest is 1, and the log
        scale of each step (T,)."""
        if kind == "categorical":
            b = p["emissionprob"][:, x[:, 0].astype(jnp.int32)].T
            return b, jnp.zeros(x.shape[0])
        if kind == "gaussian":
            mu, var = p["means"], p["vars"]  # (N, D)
            z = x[:, None, :] - mu[None]
            logb = -0.5 * jnp.sum(jnp.log(2 * jnp.pi * var)[None] + z * z / var[None], axis=2)
        else:
            lam = p["lambdas"]
            logb = x * jnp.log(lam)[None] - lam[None] - gammaln(x + 1.0)
        m = jnp.max(logb, axis=1)
        return jnp.exp(logb - m[:, None]), m

    def sequence(p, x, mask):
        """E-step of one padded sequence: its statistics and log-likelihood."""
        A = p["transmat"]
        b, m = emit(p, x)
        a0 = p["startprob"] * b[0]
        c0 = a0.sum()

        def fwd(alpha, inp):
            bt, on = inp
            a = (alpha @ A) * bt
            c = a.sum()
            new = jnp.where(on, a / c, alpha)
            return new, (new, jnp.where(on, c, 1.0))

        _, (alphas, cs) = jax.lax.scan(fwd, a0 / c0, (b[1:], mask[1:]))
        alphas = jnp.concatenate([(a0 / c0)[None], alphas])
        cs = jnp.concatenate([c0[None], cs])
        w = b * (mask / cs)[:, None]  # b_t / c_t on the sequence, 0 beyond

        def bwd(beta, inp):
            wt, on = inp  # step t + 1's
            new = jnp.where(on, A @ (wt * beta), 1.0)
            return new, new

        ones = jnp.ones_like(a0)
        _, betas = jax.lax.scan(bwd, ones, (w[1:], mask[1:]), reverse=True)
        betas = jnp.concatenate([betas, ones[None]])
        gamma = alphas * betas * mask[:, None]
        trans = A * (alphas[:-1].T @ (w[1:] * betas[1:]))
        ll = jnp.sum(jnp.log(cs)) + jnp.sum(m * mask)
        if kind == "categorical":
            em = (gamma.T @ jax.nn.one_hot(x[:, 0].astype(jnp.int32), n_symbols),)
        elif kind == "gaussian":
            em = (gamma.T @ x, gamma.T @ (x * x))
        else:
            em = (gamma.T @ x[:, 0],)
        return (gamma[0], trans, gamma.sum(axis=0), *em), ll

    def fit_stats(p, x, mask):
        """Statistics and log-likelihood of one fit: its dataset's sequences summed."""
        stats, ll = jax.vmap(sequence, in_axes=(None, 0, 0))(p, x, mask)
        return tuple(s.sum(axis=0) for s in stats), ll.sum()

    def mstep(p, stats, n_seq):
        start, trans, occ, *em = stats
        new = {"startprob": start / n_seq,
               "transmat": trans / trans.sum(axis=1, keepdims=True)}
        if kind == "categorical":
            new["emissionprob"] = em[0] / em[0].sum(axis=1, keepdims=True)
        elif kind == "gaussian":
            mean = em[0] / occ[:, None]
            new["means"] = mean
            new["vars"] = em[1] / occ[:, None] - mean * mean  # (bulkem's reg_covar=0)
        else:
            new["lambdas"] = em[0] / occ
        return new

    def one_fit(p, x, mask, n_iter):
        def body(_, q):
            stats, _ = fit_stats(q, x, mask)
            return mstep(q, stats, x.shape[0])

        p = jax.lax.fori_loop(0, n_iter, body, p)
        return p, fit_stats(p, x, mask)[1]

    # starts share their dataset's values; datasets carry their own
    per_dataset = jax.vmap(one_fit, in_axes=(0, None, None, None))
    return jax.jit(jax.vmap(per_dataset, in_axes=(0, 0, 0, None)))


def run_peer(inp: dict, chunk: int, repeat: int) -> dict:
    """Time the fits of the whole batch; compare their log-likelihoods with bulkem's."""
    import jax
    import jax.numpy as jnp

    kind = str(inp["kind"])
    iters = int(inp["iters"])
    x = inp["x"]
    lengths = inp["lengths"]
    n, q, T = x.shape[:3]
    mask = (np.arange(T)[None, None, :] < lengths[..., None]).astype(np.float64)
    names = ("startprob", "transmat", *emission_names(kind))
    params = {k: inp[f"p_{k}"] for k in names}
    n_starts = params["startprob"].shape[1]
    run = build(kind, int(inp["n_symbols"]))
    chunk = chunk if chunk > 0 else n

    def call(size, n_iter):
        out = []
        for lo in range(0, n, size):
            sl = slice(lo, lo + size)
            p = {k: jnp.asarray(v[sl]) for k, v in params.items()}
            out.append(run(p, jnp.asarray(x[sl]), jnp.asarray(mask[sl]), n_iter))
        return jax.block_until_ready(out)

    while True:  # the largest chunk that the device holds
        try:
            call(chunk, 1)  # compile (n_iter is traced: the same executable)
            break
        except Exception as e:  # XlaRuntimeError: RESOURCE_EXHAUSTED
            if "RESOURCE_EXHAUSTED" not in str(e) or chunk == 1:
                raise
            chunk = (chunk + 1) // 2
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = call(chunk, iters)
        best = min(best, time.perf_counter() - t0)
    ll = np.concatenate([np.asarray(o[1]) for o in out])
    ref, ok = inp["loglik"], inp["ok"].astype(bool) & np.isfinite(inp["loglik"])
    rel = np.abs(ll - ref)[ok] / np.abs(ref[ok])
    rel = np.where(np.isfinite(rel), rel, np.inf)
    fits = n * n_starts
    return {"emission": kind, "fits": fits, "seconds": best, "fits_per_s": fits / best,
            "device": str(jax.devices()[0]), "chunk": chunk, "padded_to": T, "iters": iters,
            "compared": int(ok.sum()), "max_rel": float(rel.max()) if len(rel) else None,
            "median_rel": float(np.median(rel)) if len(rel) else None,
            "over_1e-9": int((rel > 1e-9).sum())}


def standalone(args) -> dict:
    """The batch of bench_hmm.py and bulkem's CPU fits of it: the peer's input."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_hmm as bench

    import bulkem

    data = bench.make_batch(args.datasets, emission=args.emission)
    kind, _ = bench.EMISSIONS[args.emission]
    res = bulkem.fit(data, **bench.fit_options(args.emission, args.starts, args.iters),
                     backend="cpu")
    path = os.path.join(args.tmp, "peer_input.npz")
    save_input(path, data, kind, res, args.starts, args.iters,
               bench.N_SYMBOLS if kind == "categorical" else 0)
    return dict(np.load(path))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", help="an .npz of bench_hmm.py (else simulate, fit by bulkem CPU)")
    ap.add_argument("--datasets", type=int, default=20)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--emission", default="categorical",
                    help="categorical, gaussian1, gaussian4 or poisson (without --input)")
    ap.add_argument("--chunk", type=int, default=0, help="datasets per call (0: all)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tmp", default="/tmp")
    args = ap.parse_args()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
    except ImportError as e:
        print(json.dumps({"error": f"jax not importable ({e})"}))
        sys.exit(NO_JAX)
    jax.config.update("jax_enable_x64", True)
    inp = dict(np.load(args.input)) if args.input else standalone(args)
    out = run_peer(inp, args.chunk, args.repeat)
    print(f"# JAX {jax.__version__} on {out['device']}: {out['fits']} fits ({out['iters']} "
          f"iterations, sequences padded to {out['padded_to']}, {out['chunk']} datasets per "
          f"call) in {out['seconds']:.3f} s: {out['fits_per_s']:,.1f} fits/s")
    print(f"# final loglik vs bulkem, {out['compared']} fits: max relative difference "
          f"{out['max_rel']:.2e}, median {out['median_rel']:.2e}, {out['over_1e-9']} above 1e-9")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
