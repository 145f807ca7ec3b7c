"""Hidden Markov models: emissions, the scaled forward-backward chain, the model, its starts.

* :mod:`.emissions`: categorical, Gaussian (diagonal) and Poisson emissions;
* :mod:`.chain`: the chain's E-step and M-step (also the TMAP's, terminating);
* :mod:`.model`: the HMM as a model of the EM driver (data, starts, tables);
* :mod:`.draws`: random starts.

Forward scores, posteriors and Viterbi paths of given models are
:mod:`bulkem.engines.infer`; :class:`HMMFamily` (``family="hmm"``) reads the data and
builds the model.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ...data.units import read_units
from .emissions import EMISSIONS, MAX_SYMBOLS, Emission
from .model import HMMModel

OPTIONS = ("emission", "n_symbols", "params", "sequence_col")


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
        return read_units(datasets, dataset_col, options.get("sequence_col", "sequence"),
                          value_col, multi=gaussian)

    def model(self, pairs: list, n_components: int, options: dict) -> HMMModel:
        """The :class:`HMMModel` of ``n_components`` states for these data and options."""
        name = options.get("emission", "gaussian")
        if not isinstance(name, str) or name not in EMISSIONS:
            raise ValueError(f"unknown emission {name!r}; expected one of {sorted(EMISSIONS)} "
                             "(a string, e.g. emission='categorical').")
        if n_components > MAX_STATES:
            raise ValueError(f"n_components = {n_components} states is too many: bulkem fits "
                             f"hidden Markov models of at most {MAX_STATES} states (a fit holds "
                             "N x N transition probabilities and their statistics).")
        em: Emission = EMISSIONS[name]
        own = False
        if name == "gaussian":
            K = next((u.shape[1] for _, units in pairs for u in units if len(u)), 1)
            if "emission" not in options and _whole_numbers(pairs):
                warnings.warn(
                    "family='hmm' without emission= fits Gaussian emissions, and these data "
                    "are whole numbers: for symbols pass emission='categorical', for counts "
                    "emission='poisson' (emission='gaussian' keeps Gaussian emissions and "
                    "silences this warning).", stacklevel=4)
        elif name == "categorical":
            K = options.get("n_symbols")
            if K is None:
                K, own = _inferred_symbols(pairs), True
            elif isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
                raise ValueError(f"n_symbols must be an integer >= 1; got n_symbols = {K!r}.")
            elif K > MAX_SYMBOLS:
                raise ValueError(f"n_symbols = {K} is too large: bulkem fits categorical "
                                 f"emissions of at most {MAX_SYMBOLS} symbols (0 .. "
                                 f"{MAX_SYMBOLS - 1}); recode the symbols to fewer values.")
        else:
            K = 1
        return HMMModel(em, n_components, int(K), _update(options.get("params", "ste"), em),
                        own_alphabet=own, unit_col=options.get("sequence_col", "sequence"))


# The most hidden states: a fit's N x N transition matrix, its statistics and N forward
# values per step are held per fit (2^24 values at this limit).
MAX_STATES = 4096


def _whole_numbers(pairs: list, sample: int = 10) -> bool:
    """The first ``sample`` datasets' values are whole numbers >= 0 (symbols or counts)."""
    seen = False
    for _, units in pairs[:sample]:
        for u in units:
            u = np.asarray(u)
            if u.size:
                with np.errstate(invalid="ignore"):
                    if not np.all((u >= 0) & (u == np.floor(u))):
                        return False
                seen = True
    return seen


def _inferred_symbols(pairs: list) -> int:
    """``n_symbols`` when not given: the largest symbol + 1 of the batch's valid datasets.

    As hmmlearn's ``CategoricalHMM`` (``n_features = X.max() + 1``), each
    dataset's alphabet is its own symbols ``0 .. max``: its starts give no
    weight to a larger symbol, so its emission probabilities of the symbols
    beyond its own stay 0 and its fit, log-likelihood, AIC and BIC are the
    same whatever the other datasets of the batch
    (:attr:`HMMModel.own_alphabet`).  The batch's kernels are built for the
    largest alphabet; a dataset with a value that is not a symbol ``0 ..
    MAX_SYMBOLS - 1`` is left out here and reported as invalid.
    """
    top = 0
    for _, units in pairs:
        if not units or not all(len(u) for u in units):
            continue
        u = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in units])
        u = u[~np.isnan(u)]  # (missing steps)
        if (len(u) and np.all(np.isfinite(u)) and np.all(u >= 0) and np.all(u == np.round(u))
                and u.max() < MAX_SYMBOLS):
            top = max(top, int(u.max()))
    return top + 1


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

__all__ = ["HMM", "HMMFamily", "HMMModel", "EMISSIONS", "MAX_SYMBOLS"]
