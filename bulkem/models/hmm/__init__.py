"""Hidden Markov models: emissions, the scaled forward-backward chain, Viterbi.

* :mod:`.emissions`: categorical, Gaussian (diagonal) and Poisson emissions;
* :mod:`.chain`: the chain's E-step and M-step (also the TMAP's, terminating);
* :mod:`.model`: the HMM as a model of the EM driver (data, starts, tables);
* :mod:`.draws`: random starts;
* :mod:`.infer`: forward scores, posteriors and Viterbi paths of given models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .emissions import EMISSIONS, Emission
from .model import HMMModel

OPTIONS = ("emission", "n_symbols", "params", "sequence_col")


def _as_sequence(x: Any, where: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where} holds non-numeric values ({err}); expected numbers.") from None


def _is_sequence_list(ds: Any) -> bool:
    """A dataset given as a list of sequences (not one sequence of numbers)."""
    return (isinstance(ds, (list, tuple)) and len(ds) > 0
            and not any(np.isscalar(v) for v in ds))


def _units(ds: Any, ident: Any, gaussian: bool) -> list[np.ndarray]:
    seqs = list(ds) if _is_sequence_list(ds) else [ds]
    out = []
    for k, s in enumerate(seqs):
        a = _as_sequence(s, f"dataset {ident!r}, sequence {k}")
        if gaussian and a.ndim == 1:
            a = a[:, None]
        if a.ndim != (2 if gaussian else 1):
            want = "(n_obs, n_dims)" if gaussian else "(n_obs,)"
            raise ValueError(f"dataset {ident!r}, sequence {k} has shape {a.shape}; expected "
                             f"{want}. A dataset is one sequence or a list of sequences.")
        out.append(a)
    return out


class HMMFamily:
    """``family="hmm"``: reads sequence data and builds :class:`HMMModel` s."""

    name = "hmm"

    def read(self, datasets: Any, dataset_col: str, value_col, options: dict) -> list:
        """Any accepted input form -> ``(identifier, list of sequences)`` pairs.

        A dataset is one sequence or a list of sequences (ragged lengths); a
        batch is a list or a dict of datasets, one array (one dataset of one
        sequence), or a long DataFrame with columns ``dataset_col``,
        ``sequence_col`` (default "sequence") and the value column(s), rows in
        time order within a sequence.
        """
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {unknown} for family='hmm'; "
                            f"it takes {list(OPTIONS)} beyond bulkem.fit's own.")
        gaussian = options.get("emission", "gaussian") == "gaussian"
        if isinstance(datasets, pd.DataFrame):
            seq_col = options.get("sequence_col", "sequence")
            for c in (dataset_col, seq_col):
                if c not in datasets.columns:
                    raise ValueError(
                        f"DataFrame input has columns {list(datasets.columns)}; expected a "
                        f"{c!r} column (set dataset_col= / sequence_col= to name another).")
            cols = [value_col] if isinstance(value_col, str) else list(value_col)
            if gaussian and value_col == "value" and "value" not in datasets.columns:
                cols = [c for c in datasets.columns if c not in (dataset_col, seq_col)]
            missing = [c for c in cols if c not in datasets.columns]
            if missing or not cols:
                raise ValueError(f"DataFrame input lacks value column(s) {missing or cols}; it "
                                 f"has {list(datasets.columns)}. Pass value_col= to name them.")
            pairs = []
            for k, g in datasets.groupby(dataset_col, sort=False):
                seqs = [s[cols].to_numpy() if gaussian else s[cols[0]].to_numpy()
                        for _, s in g.groupby(seq_col, sort=False)]
                pairs.append((k, seqs))
        elif isinstance(datasets, Mapping):
            pairs = list(datasets.items())
        elif isinstance(datasets, (np.ndarray, pd.Series)):
            pairs = [(0, datasets)]
        elif isinstance(datasets, Sequence) and not isinstance(datasets, (str, bytes)):
            if len(datasets) and all(np.isscalar(v) for v in datasets):
                pairs = [(0, datasets)]  # one sequence of numbers
            else:
                pairs = list(enumerate(datasets))
        else:
            raise TypeError(
                f"datasets is a {type(datasets).__name__}; expected a list or dict of datasets "
                "(each one sequence or a list of sequences), one array, or a long DataFrame.")
        if not pairs:
            raise ValueError("datasets is empty; expected at least one dataset.")
        out = [(k, _units(v, k, gaussian)) for k, v in pairs]
        if gaussian:
            dims = {u.shape[1] for _, units in out for u in units if len(u)}
            if len(dims) > 1:
                raise ValueError(f"sequences have different numbers of dimensions {sorted(dims)}; "
                                 "every observation of a batch needs the same dimensions.")
        return out

    def model(self, pairs: list, n_components: int, options: dict) -> HMMModel:
        """The :class:`HMMModel` of ``n_components`` states for these data and options."""
        name = options.get("emission", "gaussian")
        if name not in EMISSIONS:
            raise ValueError(f"unknown emission {name!r}; expected one of {sorted(EMISSIONS)}.")
        em: Emission = EMISSIONS[name]
        if name == "gaussian":
            K = next((u.shape[1] for _, units in pairs for u in units if len(u)), 1)
        elif name == "categorical":
            K = options.get("n_symbols")
            if K is None:  # the largest symbol + 1, over the datasets that are all symbols
                tops = [max(u.max() for u in units) for _, units in pairs
                        if units and all(len(u) and np.all(np.isfinite(u)) and np.all(u >= 0)
                                         and np.all(u == np.round(u)) for u in units)]
                K = int(max(tops)) + 1 if tops else 1
            elif isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
                raise ValueError(f"n_symbols must be an integer >= 1; got n_symbols = {K!r}.")
        else:
            K = 1
        return HMMModel(em, n_components, int(K), _update(options.get("params", "ste"), em))


def _update(params: Any, em: Emission) -> str:
    """hmmlearn's ``params`` letters -> the chain's ``s``, ``t``, ``e`` flags."""
    letters = "st" + "".join(dict.fromkeys(em.letters + "e"))
    if not isinstance(params, str) or set(params) - set(letters):
        raise ValueError(f"params={params!r}: expected letters from {letters!r} (s startprob, "
                         f"t transmat, {em.letters!r} or e: the {em.name} emission's "
                         "parameters).")
    if "e" in params:
        params = params.replace("e", "") + em.letters
    emit = set(params) & set(em.letters)
    if emit and emit != set(em.letters):
        raise ValueError(f"params={params!r}: the {em.name} emission's parameters "
                         f"{em.letters!r} are updated together; give all or none of them.")
    return "".join(c for c in "st" if c in params) + ("e" if emit else "")


HMM = HMMFamily()

__all__ = ["HMM", "HMMFamily", "HMMModel", "EMISSIONS"]
