"""Linear-Gaussian state-space models: the :class:`StateSpace` class and its checks.

The model of one series ``y_1, ..., y_T`` (each ``y_t`` a vector of
``dim_obs`` values) with hidden states ``x_t`` of ``dim_state`` values::

    x_1     ~ N(m0, P0)                      (the prior of the first state)
    x_{t+1} = F x_t + w_t,   w_t ~ N(0, Q)
    y_t     = H x_t + v_t,   v_t ~ N(0, R)

``m0, P0`` is the prior of the state at the *first* time step, before its
observation (the predictive density of step 1), as in the paper's
Algorithm 1 and in statsmodels' ``initialization="known"``.

A non-stationary state (a random walk, a trend) may instead have a flat
prior: ``StateSpace(..., diffuse=True)`` (or a mask of the diffuse states)
makes :func:`bulkem.kalman_loglik` evaluate the exact diffuse likelihood of
Durbin and Koopman (2012, ch. 5; the univariate treatment of Koopman and
Durbin 2000), the limit of ``P0 = P* + kappa P_inf`` as ``kappa -> inf``
without the divergent ``log kappa``: statsmodels' ``initialization="diffuse"``
(``UnobservedComponents(..., use_exact_diffuse=True)``) with every term kept,
``loglikelihood_burn=0`` (see :mod:`.diffuse`).

Covariances may be singular (positive semi-definite): the AR(p) model in
companion form has a rank-one ``Q``, a pure AR model has ``R = 0``, and a
known initial state has ``P0 = 0``.  What the filter needs is that the
predicted covariance of each observation, ``H P H^T + R``, is positive
definite; a series where it is not gets status ``failed``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Relative tolerances of the checks of a covariance matrix (scaled by its
# largest absolute entry): asymmetry beyond SYM_RTOL is an error; an
# eigenvalue below -PSD_RTOL means "not positive semi-definite".
SYM_RTOL = 1e-10
PSD_RTOL = 1e-10

# Compile-time structure of the transition matrix F, chosen per batch: the
# predict step then skips the products by zeros and ones.
DENSE = 0
IDENTITY = 1  # F = I (random walks)
COMPANION = 2  # F = [phi^T; I 0] (AR(p) in companion form)
KIND_NAMES = {DENSE: "dense", IDENTITY: "identity", COMPANION: "companion"}
BLOCKS = ("F", "H", "Q", "R", "m0", "P0")  # the parameter blocks, in parameter order


def _matrix(name: str, value: Any, shape: tuple[int, int], hint: str) -> np.ndarray:
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} holds non-numeric values ({err}); expected a {shape[0]} x "
                        f"{shape[1]} matrix of numbers.") from None
    if a.ndim < 2 and a.size == shape[0] * shape[1] and (a.ndim == 0 or 1 in shape):
        a = a.reshape(shape)  # a scalar for a 1 x 1 matrix, a vector for one row or column
    if a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}; expected {shape} ({hint}).")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has {int(np.sum(~np.isfinite(a)))} NaN or infinite entries; "
                         "expected finite numbers.")
    return a


def _dim(value: Any, axis: int) -> int:
    """The length of ``value`` along ``axis`` (1 for a scalar), without converting it twice."""
    shape = np.shape(value)
    return int(shape[axis]) if len(shape) > axis else 1


def _covariance(name: str, a: np.ndarray) -> np.ndarray:
    """Check that ``a`` is symmetric positive semi-definite; return its symmetric part."""
    scale = max(1.0, float(np.max(np.abs(a))) if a.size else 1.0)
    asym = float(np.max(np.abs(a - a.T))) if a.size else 0.0
    if asym > SYM_RTOL * scale:
        raise ValueError(
            f"{name} is not symmetric (largest |{name} - {name}.T| = {asym:.3g}); expected a "
            f"covariance matrix. Pass ({name} + {name}.T) / 2 if the asymmetry is rounding.")
    a = (a + a.T) / 2
    low = float(np.min(np.linalg.eigvalsh(a))) if a.size else 0.0
    if low < -PSD_RTOL * scale:
        raise ValueError(
            f"{name} is not positive semi-definite (smallest eigenvalue {low:.3g}); expected a "
            f"covariance matrix. Build it as B @ B.T, or clip its negative eigenvalues.")
    return a


def _positive(name: str, value: Any, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number; got {value!r}.")
    v = float(value)
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {need}; got {name} = {value!r}.")
    return v


def stationary_covariance(F: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The stationary state covariance: the ``P`` with ``P = F P F^T + Q``.

    Solves the discrete Lyapunov equation (``scipy.linalg.solve_discrete_lyapunov``).

    Raises
    ------
    ValueError
        If ``F`` has an eigenvalue on or outside the unit circle: then there is
        no stationary distribution.
    """
    from scipy.linalg import solve_discrete_lyapunov

    rho = float(np.max(np.abs(np.linalg.eigvals(F)))) if F.size else 0.0
    if not rho < 1.0:
        raise ValueError(
            f"F has spectral radius {rho:.6g} (expected < 1 for a stationary process), so there "
            "is no stationary prior; pass m0 and P0 explicitly.")
    P = solve_discrete_lyapunov(F, Q)
    return (P + P.T) / 2


def _diffuse_mask(diffuse: Any, n: int) -> np.ndarray:
    """``diffuse`` (a bool, or a mask of the states) as a boolean array of shape (n,)."""
    if isinstance(diffuse, (bool, np.bool_)):
        return np.full(n, bool(diffuse))
    mask = np.asarray(diffuse)
    if mask.dtype != np.bool_ or mask.shape != (n,):
        raise ValueError(f"diffuse must be True, False or a boolean mask of shape ({n},) (one "
                         f"entry per state: True for a flat prior); got {diffuse!r}.")
    return mask.copy()


def _partly_stationary(F: np.ndarray, Q: np.ndarray, dif: np.ndarray) -> np.ndarray:
    """``P0`` of a model with some diffuse states: the stationary covariance of the others."""
    keep = ~dif
    if np.any(F[np.ix_(keep, dif)] != 0.0):
        raise ValueError("some states are diffuse and the others depend on them (F[other, "
                         "diffuse] != 0), so the others have no stationary law of their own; "
                         "pass P0, the prior covariance of the non-diffuse states.")
    P0 = np.zeros(F.shape)
    P0[np.ix_(keep, keep)] = stationary_covariance(F[np.ix_(keep, keep)], Q[np.ix_(keep, keep)])
    return P0


def transition_kind(F: np.ndarray) -> int:
    """The structure of ``F`` that the predict step can exploit (exactly, no tolerance)."""
    n = F.shape[0]
    if np.array_equal(F, np.eye(n)):
        return IDENTITY
    if n >= 2 and np.array_equal(F[1:], np.eye(n - 1, n)):
        return COMPANION
    return DENSE


class StateSpace(Mapping):
    """A linear-Gaussian state-space model (see the module docstring for the equations).

    It is the parameter set of ``family="state_space"``: a read-only dict of the blocks
    ``F, H, Q, R, m0, P0`` (``bulkem.loglik(series, "state_space", params=model)``).

    Parameters
    ----------
    F : array-like of shape (dim_state, dim_state)
        Transition matrix.
    H : array-like of shape (dim_obs, dim_state)
        Observation matrix (a 1-D array of length ``dim_state`` is one row).
    Q : array-like of shape (dim_state, dim_state)
        State noise covariance (symmetric positive semi-definite).
    R : array-like of shape (dim_obs, dim_obs)
        Observation noise covariance (symmetric positive semi-definite; a
        number when ``dim_obs = 1``).
    m0 : array-like of shape (dim_state,), optional
        Prior mean of the first state; zeros if None.
    P0 : array-like of shape (dim_state, dim_state), optional
        Prior covariance of the first state (symmetric positive
        semi-definite).  If None, the stationary covariance (the solution of
        ``P0 = F P0 F^T + Q``), which exists when every eigenvalue of ``F``
        lies inside the unit circle; otherwise pass it.
    diffuse : bool or array-like of bool of shape (dim_state,), default False
        States with a flat (exact diffuse) prior: True for every state, or a
        mask.  Their entries of ``m0`` and their rows and columns of ``P0`` are
        set to 0 (``P0`` is then the prior covariance ``P*`` of the other
        states, ``P_inf`` the diagonal of the mask).  With every state diffuse
        ``P0`` defaults to 0; with some, to the stationary covariance of the
        others where they do not depend on the diffuse ones (``F[other,
        diffuse] == 0``), else pass ``P0``.  Evaluated by
        :func:`bulkem.kalman_loglik`; a diffuse model cannot be simulated.

    Raises
    ------
    ValueError, TypeError
        When a matrix has the wrong shape, non-finite entries, or a covariance
        is not symmetric positive semi-definite; the message says which.

    Examples
    --------
    >>> m = StateSpace.ar([0.5, -0.2], sigma2=1.0, obs_var=0.1)
    >>> m.dim_state, m.dim_obs
    (2, 1)
    """

    def __init__(self, F: Any, H: Any, Q: Any, R: Any, m0: Any = None, P0: Any = None, *,
                 diffuse: bool | Sequence[bool] | np.ndarray = False) -> None:
        n = _dim(F, 0)
        self.F = _matrix("F", F, (n, n), "square: dim_state x dim_state")
        d = _dim(H, 0) if np.ndim(H) == 2 else 1
        self.H = _matrix("H", H, (d, n), f"dim_obs x dim_state, dim_state = {n} from F")
        self.Q = _covariance("Q", _matrix("Q", Q, (n, n), f"dim_state = {n} from F"))
        self.R = _covariance("R", _matrix("R", R, (d, d), f"dim_obs = {d} from H"))
        self.diffuse = _diffuse_mask(diffuse, n)
        if m0 is None:
            m0 = np.zeros(n)
        m0 = np.array(m0, dtype=np.float64)
        if m0.shape != (n,):
            m0 = m0.reshape(-1) if m0.size == n else m0
        if m0.shape != (n,):
            raise ValueError(f"m0 has shape {np.shape(m0)}; expected ({n},) (dim_state from F).")
        if not np.all(np.isfinite(m0)):
            raise ValueError("m0 has NaN or infinite entries; expected finite numbers.")
        dif = self.diffuse
        self.m0 = np.where(dif, 0.0, m0)
        if P0 is None and dif.all():
            P0 = np.zeros((n, n))
        elif P0 is None and dif.any():
            P0 = _partly_stationary(self.F, self.Q, dif)
        elif P0 is None:
            P0 = stationary_covariance(self.F, self.Q)
        P0 = _covariance("P0", _matrix("P0", P0, (n, n), f"dim_state = {n} from F"))
        P0[dif] = 0.0
        P0[:, dif] = 0.0
        self.P0 = P0

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def local_level(cls, state_var: float, obs_var: float, level0: float = 0.0,
                    level_var: float | None = None, *, diffuse: bool = False) -> StateSpace:
        """The local-level model of ``bulkem.fit(family="local_level")``.

        ``x_{t+1} = x_t + w_t``, ``w_t ~ N(0, state_var)``; ``y_t = x_t + v_t``,
        ``v_t ~ N(0, obs_var)``; the first level ``x_1 ~ N(level0, level_var)``
        (``level_var`` default ``state_var``: ``prior="fitted"``'s prior, the level
        one step before the first plus a step), or flat with ``diffuse=True``
        (``prior="diffuse"``; ``level0`` and ``level_var`` are then not used).

        Examples
        --------
        >>> m = StateSpace.local_level(1469.1, 15099.0, diffuse=True)
        >>> m
        StateSpace(dim_state=1, dim_obs=1, F=identity, diffuse=1)
        """
        q = _positive("state_var", state_var, allow_zero=False)
        r = _positive("obs_var", obs_var, allow_zero=True)
        if not isinstance(diffuse, (bool, np.bool_)):
            raise TypeError(f"diffuse must be True or False; got diffuse = {diffuse!r}.")
        if diffuse:
            return cls([[1.0]], [[1.0]], [[q]], [[r]], diffuse=True)
        x0 = float(np.asarray(level0, dtype=np.float64))
        v0 = q if level_var is None else _positive("level_var", level_var, allow_zero=True)
        return cls([[1.0]], [[1.0]], [[q]], [[r]], [x0], [[v0]])

    @classmethod
    def random_walk(cls, dim: int, q: float, r: float, p0: float = 1.0) -> StateSpace:
        """A ``dim``-dimensional random walk observed with noise (the paper's toy model).

        ``x_{t+1} = x_t + w_t``, ``w_t ~ N(0, q I)``; ``y_t = x_t + v_t``,
        ``v_t ~ N(0, r I)``; ``x_1 ~ N(0, p0 I)``.

        Parameters
        ----------
        dim : int
            State and observation dimension.
        q, r : float
            State noise variance (> 0) and observation noise variance (>= 0).
        p0 : float, default 1.0
            Prior variance of the first state.  A random walk has no
            stationary law, so this is a choice; a large ``p0`` approaches a
            diffuse start (at the cost of rounding in the first update).
        """
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or dim < 1:
            raise ValueError(f"dim must be an integer >= 1; got {dim!r}.")
        q = _positive("q", q, allow_zero=False)
        r = _positive("r", r, allow_zero=True)
        p0 = _positive("p0", p0, allow_zero=True)
        eye = np.eye(int(dim))
        return cls(eye, eye, q * eye, r * eye, np.zeros(dim), p0 * eye)

    @classmethod
    def ar(cls, phi: Any, sigma2: float, obs_var: float = 0.0, m0: Any = None,
           P0: Any = None) -> StateSpace:
        """An AR(p) process, optionally observed with noise, in companion form.

        ``z_t = phi_1 z_{t-1} + ... + phi_p z_{t-p} + e_t``, ``e_t ~ N(0, sigma2)``;
        ``y_t = z_t + v_t``, ``v_t ~ N(0, obs_var)``.  The state is
        ``x_t = (z_t, z_{t-1}, ..., z_{t-p+1})``, so ``F`` has ``phi`` as its
        first row and ones below the diagonal, ``H = (1, 0, ..., 0)`` and
        ``Q = sigma2 e_1 e_1^T`` (the layout of statsmodels' SARIMAX).

        Parameters
        ----------
        phi : array-like of shape (p,)
            AR coefficients.
        sigma2 : float
            Innovation variance (> 0).
        obs_var : float, default 0.0
            Observation noise variance (>= 0; 0 is a pure AR process).
        m0, P0 : optional
            Prior of the first state.  By default the stationary law: mean 0
            and ``P0`` the solution of the discrete Lyapunov equation
            ``P0 = F P0 F^T + Q`` (the autocovariances ``gamma(|i - j|)`` of the
            process), which requires a stationary ``phi``; a non-stationary
            ``phi`` raises and asks for ``P0``.
        """
        try:
            phi = np.atleast_1d(np.array(phi, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise TypeError(f"phi holds non-numeric values ({err}); expected a non-empty 1-D "
                            "array of AR coefficients (numbers).") from None
        if phi.ndim != 1 or len(phi) == 0:
            raise ValueError(f"phi has shape {phi.shape}; expected a non-empty 1-D array of AR "
                             "coefficients, shape (p,).")
        if not np.all(np.isfinite(phi)):
            raise ValueError(f"phi has {int(np.sum(~np.isfinite(phi)))} NaN or infinite entries "
                             f"(phi = {phi.tolist()}); expected finite AR coefficients.")
        sigma2 = _positive("sigma2", sigma2, allow_zero=False)
        obs_var = _positive("obs_var", obs_var, allow_zero=True)
        p = len(phi)
        F = np.zeros((p, p))
        F[0] = phi
        F[1:, :-1] = np.eye(p - 1)
        H = np.zeros((1, p))
        H[0, 0] = 1.0
        Q = np.zeros((p, p))
        Q[0, 0] = sigma2
        return cls(F, H, Q, [[obs_var]], m0, P0)

    # -- properties -------------------------------------------------------------------------

    @property
    def dim_state(self) -> int:
        """Number of hidden state values ``n``."""
        return self.F.shape[0]

    @property
    def dim_obs(self) -> int:
        """Number of values observed per time step ``d``."""
        return self.H.shape[0]

    @property
    def kind(self) -> int:
        """Structure of ``F``: ``DENSE``, ``IDENTITY`` or ``COMPANION``."""
        return transition_kind(self.F)

    @property
    def is_diffuse(self) -> bool:
        """Whether any state has a flat (exact diffuse) prior."""
        return bool(self.diffuse.any())

    def simulate(self, n_steps: int, rng: np.random.Generator | int | None = None
                 ) -> np.ndarray:
        """Draw one series of ``n_steps`` observations, shape ``(n_steps, dim_obs)``."""
        if self.is_diffuse:
            raise ValueError("a diffuse prior (flat) has no draws; to simulate, give the "
                             "first state a proper prior: StateSpace(F, H, Q, R, m0, P0) with "
                             "m0 a starting state (P0 = 0 for a known one).")
        rng = np.random.default_rng(rng)
        n, d = self.dim_state, self.dim_obs
        x = rng.multivariate_normal(self.m0, self.P0, method="eigh")
        w = rng.multivariate_normal(np.zeros(n), self.Q, size=n_steps, method="eigh")
        v = rng.multivariate_normal(np.zeros(d), self.R, size=n_steps, method="eigh")
        y = np.empty((n_steps, d))
        for t in range(n_steps):
            y[t] = self.H @ x + v[t]
            x = self.F @ x + w[t]
        return y

    # -- the parameter blocks, as a read-only dict --------------------------------------------

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in BLOCKS:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):
        return iter(BLOCKS)

    def __len__(self) -> int:
        return len(BLOCKS)

    __eq__ = object.__eq__  # (not Mapping's: arrays compare element-wise)
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        dif = f", diffuse={int(self.diffuse.sum())}" if self.is_diffuse else ""
        return (f"StateSpace(dim_state={self.dim_state}, dim_obs={self.dim_obs}, "
                f"F={KIND_NAMES[self.kind]}{dif})")


@dataclass
class ModelArrays:
    """One or many models of the same dimensions, flattened for the engines.

    Attributes
    ----------
    F, Q, P0 : ndarray of shape (n_models, dim_state * dim_state)
    H : ndarray of shape (n_models, dim_obs * dim_state)
    R : ndarray of shape (n_models, dim_obs * dim_obs)
    m0 : ndarray of shape (n_models, dim_state)
        Row-major matrices, float64, C-contiguous.
    nx, ny : int
        State and observation dimensions.
    kind : int
        Structure of ``F`` common to every model (``DENSE`` if they differ).
    """

    F: np.ndarray
    H: np.ndarray
    Q: np.ndarray
    R: np.ndarray
    m0: np.ndarray
    P0: np.ndarray
    nx: int
    ny: int
    kind: int


def as_models(model: StateSpace | Sequence[StateSpace]) -> tuple[list[StateSpace], bool]:
    """``model`` as a list, and whether it was one model for all series."""
    if isinstance(model, StateSpace):
        return [model], True
    if isinstance(model, Sequence) and not isinstance(model, (str, bytes)) and len(model) > 0:
        bad = [type(m).__name__ for m in model if not isinstance(m, StateSpace)]
        if bad:
            raise TypeError(f"model is a sequence holding {bad[0]}; expected bulkem.StateSpace "
                            "objects (one per series) or a single StateSpace.")
        models = list(model)
        dims = {(m.dim_state, m.dim_obs) for m in models}
        if len(dims) != 1:
            raise ValueError(f"the models have different (dim_state, dim_obs): {sorted(dims)}; "
                             "every model of a batch needs the same dimensions. Run the groups "
                             "separately.")
        return models, False
    raise TypeError(f"model is a {type(model).__name__}; expected a bulkem.StateSpace or a "
                    "non-empty sequence of them (one per series).")
