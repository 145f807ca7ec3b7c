"""What can be computed from a mixture fit: densities, scores, component probabilities."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import FitResult, per_dataset, seeded_draws


class MixtureResult(FitResult):
    """Result of :func:`bulkem.fit` for a mixture family.

    The tables of :class:`FitResult`; ``components`` has one row per
    (dataset, component) of the best start, numbered from 1 in increasing
    order of their location (``mu`` for the inverse-Gaussian family,
    ``mean_1`` for the Gaussian family).
    """

    has_icl = True
    can_resample = True

    def replicates(self, B: int, seed: int) -> list:
        """:meth:`FitResult.replicates`: ``B`` samples of each fitted dataset's size."""
        n_obs = dict(zip(self.summary.iloc[:, 0], self.summary["n_obs"], strict=True))

        def draw(item, rng):
            v, (params, _) = item
            n = int(n_obs[v])
            x, _ = self._model.family.sample(params, self.n_components, B * n, rng)
            return [x[b * n:(b + 1) * n] for b in range(B)]

        return seeded_draws(draw, self._best.items(), seed)

    def entropy(self) -> np.ndarray:
        """Per dataset of ``summary``: ``-sum_i sum_l z_il log z_il`` over the dataset's
        values, ``z`` the best fit's component probabilities (NaN where no fit); a compiled
        pass over every dataset on every core (``MixtureModel.entropies``)."""
        out = np.full(len(self.summary), np.nan)
        fitted = self._valid_index()  # dataset -> its place among the packed ones
        if not fitted:
            return out
        packed = self._packed
        ks = np.array(list(fitted.values()))
        params = np.stack([self._best[v][0] for v in fitted])
        out[packed.valid[ks]] = self._model.entropies(packed.data, ks, params)
        return out

    def _points(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self._model.family.ndim == 1:
            if x.ndim == 2 and x.shape[1] == 1:
                x = x[:, 0]
            if x.ndim != 1:
                raise ValueError(f"x has shape {x.shape}; expected (n,) for the "
                                 f"{self.family!r} family.")
            return x
        if x.ndim == 1 and self.n_dims == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[1] != self.n_dims:
            raise ValueError(f"x has shape {x.shape}; expected (n, {self.n_dims}): "
                             f"one row per point, one column per dimension.")
        return x

    @per_dataset
    def density(self, dataset: Any, x: Any) -> np.ndarray:
        """The fitted mixture density of a dataset at points x (for plotting).

        Parameters
        ----------
        dataset : identifier
            As in ``summary["dataset"]``.
        x : array-like of shape (n,) or (n, n_dims)
            Points; (n, n_dims) for the Gaussian family.

        Returns
        -------
        ndarray of shape (n,)
        """
        return np.exp(self.score_samples(dataset, x))

    @per_dataset
    def score_samples(self, dataset: Any, x: Any) -> np.ndarray:
        """Log of the fitted mixture density at each point, as scikit-learn's.

        Parameters
        ----------
        dataset : identifier
            As in ``summary["dataset"]``: whose best fit to use.
        x : array-like of shape (n,) or (n, n_dims)
            Points; (n, n_dims) for the Gaussian family.

        Returns
        -------
        ndarray of shape (n,)
            Per-point log-likelihood; its sum over the dataset's own values is
            ``summary.loglik``.
        """
        x = self._points(x)
        return self._model.family.log_density(x, self._get(dataset)[0], self.n_components)

    @per_dataset
    def predict_proba(self, dataset: Any, x: Any) -> np.ndarray:
        """Posterior probability of each component at each point (responsibilities).

        Parameters
        ----------
        dataset : identifier
        x : array-like of shape (n,) or (n, n_dims)

        Returns
        -------
        ndarray of shape (n, n_components)
            Column ``l`` is component ``l + 1`` of the ``components`` table;
            rows sum to 1.
        """
        x = self._points(x)
        return self._model.family.proba(x, self._get(dataset)[0], self.n_components)

    @per_dataset
    def predict(self, dataset: Any, x: Any) -> np.ndarray:
        """The most probable component of each point.

        Parameters
        ----------
        dataset : identifier
        x : array-like of shape (n,) or (n, n_dims)

        Returns
        -------
        ndarray of shape (n,), int
            Component numbers as in the ``components`` table, from 1
            (subtract 1 for scikit-learn's 0-based labels).
        """
        return np.argmax(self.predict_proba(dataset, x), axis=1) + 1

    @per_dataset
    def sample(self, dataset: Any, n: int = 1, seed: int | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Values drawn from a dataset's fitted mixture.

        Parameters
        ----------
        dataset : identifier
        n : int
            How many values.
        seed : int or None

        Returns
        -------
        values : ndarray of shape (n,) or (n, n_dims)
        components : ndarray of shape (n,), int
            Each value's component, numbered as in the ``components`` table (from 1).
        """
        x, comp = self._model.family.sample(self._get(dataset)[0], self.n_components, int(n),
                                            np.random.default_rng(seed))
        return x, comp + 1

    @per_dataset
    def plot(self, dataset: Any, ax: Any = None, bins: Any = "auto", **kwargs: Any) -> Any:
        """Histogram of a dataset with its fitted mixture density and components.

        Needs matplotlib (``pip install 'bulkem[plot]'``); see
        :func:`bulkem.result.plotting.plot_fit` for the other options.

        Parameters
        ----------
        dataset : identifier
            As in ``summary["dataset"]``.
        ax : matplotlib Axes, optional
            Where to draw; a new figure when None.
        bins : int, sequence or str, default "auto"
            Histogram bins.

        Returns
        -------
        matplotlib Axes
        """
        from .plotting import plot_fit

        return plot_fit(self, dataset, ax=ax, bins=bins, **kwargs)
