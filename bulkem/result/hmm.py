"""What can be computed from a hidden-Markov fit: decoding, posteriors, scores, samples."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .base import FitResult, entropy_sum, per_dataset, seeded_draws


class HMMResult(FitResult):
    """Result of :func:`bulkem.fit` with ``family="hmm"``.

    The tables of :class:`FitResult`, with one row per (dataset, state) in
    ``components`` (``startprob`` and the emission's parameters; states
    numbered from 1 in increasing order of the emission's location: the
    expected symbol, the first mean or the Poisson rate), and
    ``transitions``: one row per (dataset, from_state, to_state), ``prob``.
    State numbers returned by :meth:`decode` and the columns of
    :meth:`predict_proba` follow the same numbering (subtract 1 for
    hmmlearn's 0-based states).
    """

    @classmethod
    def assemble(cls, model, packed, job, n_starts, *args, **kwargs) -> HMMResult:
        """:meth:`FitResult.assemble`; with an inferred alphabet (categorical,
        ``n_symbols`` not given), AIC and BIC count each dataset's own symbols
        ``0 .. max`` (as hmmlearn's ``n_features``), not the batch's."""
        res = super().assemble(model, packed, job, n_starts, *args, **kwargs)
        if getattr(model, "own_alphabet", False) and len(packed.valid):
            x = model.unit_values(packed.data).values.reshape(-1)
            off = packed.data.value_offsets
            top = np.fmax.reduceat(x, off[:-1]).astype(np.int64)  # (fmax: NaN is missing)
            k = np.array([model.n_free_of(int(t) + 1) for t in top], dtype=np.float64)
            s = res.summary
            rows = np.asarray(packed.valid)
            ll = s["loglik"].to_numpy()[rows]
            n = s["sum_weights" if model.weighted else "n_obs"].to_numpy()[rows].clip(1)
            aic, bic = s["aic"].to_numpy().copy(), s["bic"].to_numpy().copy()
            aic[rows] = -2 * ll + 2 * k
            bic[rows] = -2 * ll + k * np.log(n)
            s["aic"], s["bic"] = aic, bic
        return res

    has_icl = True
    can_resample = True

    def replicates(self, B: int, seed: int) -> list:
        """:meth:`FitResult.replicates`: ``B`` sets of sequences of each fitted dataset's
        lengths, every sequence of a dataset's replicates drawn together step by step."""
        model, data = self._model, self._packed.data
        lengths = np.diff(data.units)

        def draw(item, rng):
            v, k = item
            p = model.as_dict(self._best[v][0])
            lens = np.tile(lengths[data.groups[k]:data.groups[k + 1]], B)
            seqs = _draw(model, p, lens, rng)
            per = len(lens) // B
            return [seqs[b * per:(b + 1) * per] for b in range(B)]

        return seeded_draws(draw, self._valid_index().items(), seed)

    @property
    def _chain(self):
        """The model without weights: what scores, decodes and draws sequences."""
        return self._model.unweighted

    def entropy(self) -> np.ndarray:
        """Per dataset of ``summary``: ``-sum_t sum_s g_ts log g_ts`` over the steps of its
        sequences, ``g`` the best fit's posterior state probabilities (the marginal
        posteriors' entropy, as a mixture's; each sequence's times its weight in a weighted
        fit; NaN where no fit)."""
        from ..engines import infer

        out = np.full(len(self.summary), np.nan)
        fitted = self._valid_index()  # dataset -> its place among the packed ones
        if not fitted:
            return out
        data = self._packed.data
        values, w = self._model.split(data.values)
        ks = np.array(list(fitted.values()))
        seqs, which, first = [], [], []
        for j, k in enumerate(ks):
            for u in range(data.groups[k], data.groups[k + 1]):
                seqs.append(values[data.units[u]:data.units[u + 1]])
                which.append(j)
                first.append(data.units[u])
        params = np.stack([self._best[v][0] for v in fitted])
        gam, _ = infer.posteriors(self._chain, params, np.asarray(which, np.int64), seqs)
        per_seq = np.array([entropy_sum(g) for g in gam])
        if w is not None:
            per_seq = per_seq * w[np.asarray(first, np.int64)]
        out[self._packed.valid[ks]] = np.bincount(np.asarray(which), weights=per_seq,
                                                  minlength=len(ks))
        return out

    @property
    def transitions(self) -> pd.DataFrame:
        """One row per (dataset, from_state, to_state): the fitted transition probability."""
        return self.tables["transitions"]

    @property
    def start_transitions(self) -> pd.DataFrame:
        """Each start's transition matrix: one row per (dataset, start, from_state, to_state).

        The states in the start's own order, as in ``start_values`` (join on
        ``dataset, start``).
        """
        return self.tables["start_transitions"]

    def _sequences(self, sequences: Any) -> list[np.ndarray]:
        model = self._chain
        seqs = list(sequences) if isinstance(sequences, (list, tuple)) and len(sequences) and \
            not np.isscalar(sequences[0]) else [sequences]
        out = []
        width = model.values_per_obs()
        for k, s in enumerate(seqs):
            a = np.asarray(s, dtype=np.float64)
            if width > 1 or model.emission.name == "gaussian":
                a = a.reshape(len(a), -1)
                if a.shape[1] != width:
                    raise ValueError(f"sequence {k} has shape {a.shape}; expected (n, {width}).")
            elif a.ndim != 1:
                raise ValueError(f"sequence {k} has shape {a.shape}; expected (n,).")
            problem = model.check([a], whole=False)
            if problem:
                raise ValueError(f"sequence {k}: {problem.split(': ', 1)[-1]}")
            out.append(a)
        return out

    def _const(self, seqs: list[np.ndarray]) -> np.ndarray:
        if self._chain.emission.name != "poisson":
            return np.zeros(len(seqs))
        from ..models.hmm.emissions import poisson_const

        return np.array([poisson_const(s.reshape(-1)).sum() for s in seqs])

    @per_dataset
    def score(self, dataset: Any, sequences: Any) -> float:
        """Log-likelihood of sequences under a dataset's fitted model (their sum).

        Parameters
        ----------
        dataset : identifier
            As in ``summary["dataset"]``: whose best fit to use.
        sequences : array-like or list of array-like
            One sequence or a list of sequences.

        Returns
        -------
        float
        """
        from ..engines import infer

        seqs = self._sequences(sequences)
        p = self._get(dataset)[0][None]
        ll = infer.score(self._chain, p, np.zeros(len(seqs), np.int64), seqs)
        return float(np.sum(ll + self._const(seqs)))

    @per_dataset
    def predict_proba(self, dataset: Any, sequences: Any) -> np.ndarray | list[np.ndarray]:
        """Posterior state probabilities at each step, shape ``(T, n_states)`` per sequence.

        Returns one array for one sequence, a list for a list of sequences.
        """
        from ..engines import infer

        single = not (isinstance(sequences, (list, tuple)) and len(sequences)
                      and not np.isscalar(sequences[0]))
        seqs = self._sequences(sequences)
        p = self._get(dataset)[0][None]
        gam, _ = infer.posteriors(self._chain, p, np.zeros(len(seqs), np.int64), seqs)
        return gam[0] if single else gam

    @per_dataset
    def decode(self, dataset: Any, sequences: Any) -> tuple[Any, Any]:
        """Viterbi paths (state numbers from 1) and their log-probabilities.

        Returns ``(logprob, path)`` for one sequence, as hmmlearn's
        ``decode``; ``(logprobs, paths)`` (an array and a list) for a list.
        """
        from ..engines import infer

        single = not (isinstance(sequences, (list, tuple)) and len(sequences)
                      and not np.isscalar(sequences[0]))
        seqs = self._sequences(sequences)
        p = self._get(dataset)[0][None]
        paths, lp = infer.viterbi(self._chain, p, np.zeros(len(seqs), np.int64), seqs)
        lp = lp + self._const(seqs)
        paths = [q + 1 for q in paths]
        return (float(lp[0]), paths[0]) if single else (lp, paths)

    @per_dataset
    def sample(self, dataset: Any, n_sequences: int = 1, length: int = 100,
               seed: int | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Sequences drawn from a dataset's fitted model.

        Returns
        -------
        sequences, states : list of ndarray
            ``n_sequences`` observation sequences of ``length`` steps and their
            hidden states (numbered from 1).
        """
        model = self._model
        p = model.as_dict(self._get(dataset)[0])
        rng = np.random.default_rng(seed)
        N = model.n_states
        seqs, states = [], []
        for _ in range(int(n_sequences)):
            s = np.empty(int(length), dtype=np.int64)
            s[0] = rng.choice(N, p=p["startprob"])
            for t in range(1, int(length)):
                s[t] = rng.choice(N, p=p["transmat"][s[t - 1]])
            name = model.emission.name
            if name == "categorical":
                cum = np.cumsum(p["emissionprob"][s], axis=1)
                x = (rng.random((len(s), 1)) > cum).sum(axis=1).astype(np.float64)
            elif name == "gaussian":
                x = rng.normal(p["means"][s], np.sqrt(p["vars"][s]))
                x = x[:, 0] if model.K == 1 else x
            else:
                x = rng.poisson(p["lambdas"][s]).astype(np.float64)
            seqs.append(x)
            states.append(s + 1)
        return seqs, states


def _draw(model, p: dict, lengths: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Sequences of the given lengths from one HMM (``p`` by block name), all stepped
    together: the states by inverse CDFs of ``startprob`` and ``transmat``, then the
    emissions of every step at once."""
    N, T, n = model.n_states, int(lengths.max(initial=0)), len(lengths)
    states = np.empty((n, T), dtype=np.int64)
    cum_a = np.cumsum(p["transmat"], axis=1)
    cum_a[:, -1] = 1.0
    first = np.cumsum(p["startprob"])
    first[-1] = 1.0
    if T:
        states[:, 0] = np.searchsorted(first, rng.random(n), side="right")
    for t in range(1, T):
        states[:, t] = (rng.random((n, 1)) > cum_a[states[:, t - 1]]).sum(axis=1)
    states = np.minimum(states, N - 1)
    keep = np.arange(T)[None, :] < lengths[:, None]
    s = states[keep]  # every step of every sequence, sequence after sequence
    name = model.emission.name
    if name == "categorical":
        cum = np.cumsum(p["emissionprob"], axis=1)
        x = np.minimum((rng.random((len(s), 1)) > cum[s]).sum(axis=1),
                       cum.shape[1] - 1).astype(np.float64)
    elif name == "gaussian":
        x = rng.normal(p["means"][s], np.sqrt(p["vars"][s]))
        x = x[:, 0] if model.K == 1 else x
    else:
        x = rng.poisson(p["lambdas"][s]).astype(np.float64)
    return np.split(x, np.cumsum(lengths)[:-1])
