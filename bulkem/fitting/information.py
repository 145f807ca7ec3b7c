"""Standard errors from the observed information, two recipes for every model.

The observed information is minus the Hessian of the observed-data log-likelihood at the
fitted parameters, taken in the model's unconstrained coordinates (``Layout.to_free``: logs
of positive values, log-ratios of probabilities); the engines evaluate every perturbed
parameter set of every dataset in one job (an E-step each, no M-step). Its inverse, mapped
back by the delta method (``Layout.from_free``'s Jacobian), is the covariance of the
parameters.

* **From the score** (models with ``Model.has_score``): by Fisher's identity the score is
  the gradient of the expected complete-data log-likelihood, ``Q(p | theta) = S(theta) .
  c(p)``, at ``p = theta``, which the model computes from the E-step's statistics ``S``
  (``Job.stats``); the Hessian's columns are central differences of the score at ``+-h``
  along each coordinate: ``2 P`` E-steps per dataset for ``P`` free parameters
  (:func:`score_points`, :func:`score_hessian`), error O(h^2), and rounding relative to
  the score's terms over ``h``, not the log-likelihood's over ``h^2``.
* **From log-likelihood values** (the others): ``1 + 2 P + P (P - 1) / 2`` evaluations, about
  the fewest that determine a quadratic: the centre, ``+-h`` along each coordinate (the
  diagonal by central differences, error O(h^2)) and the corner ``(+h_i, +h_j)`` of each
  pair (the off-diagonal by a forward difference, error O(h) times third derivatives: about
  1e-4 of the information's scale, far below a standard error's own precision). The four
  corners of each pair (``2 P^2 + 1`` evaluations, as before 2026-11-29) gave O(h^2) at
  3-4 times the cost.
"""

from __future__ import annotations

import numpy as np

# Relative step of the central differences: a second difference's truncation error is
# O(h^2) and its rounding O(eps |loglik| / h^2); h ~ eps^(1/4) balances them.
REL_STEP = 1e-4


def steps(theta: np.ndarray) -> np.ndarray:
    """Each coordinate's step ``h`` (n, P)."""
    return REL_STEP * np.maximum(1.0, np.abs(theta))


def points(theta: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The perturbed coordinates of every dataset (n, n_points(P), P), in the order
    :func:`hessian` reads them: the centre, ``+h_i`` and ``-h_i`` per coordinate, then per
    pair ``i < j`` the corner ``(+h_i, +h_j)``."""
    n, P = theta.shape
    out = [theta]
    for i in range(P):
        for sign in (1.0, -1.0):
            t = theta.copy()
            t[:, i] += sign * h[:, i]
            out.append(t)
    for i in range(P):
        for j in range(i + 1, P):
            t = theta.copy()
            t[:, i] += h[:, i]
            t[:, j] += h[:, j]
            out.append(t)
    return np.stack(out, axis=1)


def n_points(P: int) -> int:
    """Evaluations per dataset for ``P`` free parameters."""
    return 1 + 2 * P + P * (P - 1) // 2


def hessian(f: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The Hessian (n, P, P) from the log-likelihoods ``f`` (n, n_points(P)) at :func:`points`:
    ``H_ij = (f(+h_i, +h_j) - f(+h_i) - f(+h_j) + f(0)) / (h_i h_j)``."""
    n, P = h.shape
    H = np.empty((n, P, P))
    f0 = f[:, 0]
    for i in range(P):
        H[:, i, i] = (f[:, 1 + 2 * i] - 2.0 * f0 + f[:, 2 + 2 * i]) / h[:, i] ** 2
    k = 1 + 2 * P
    for i in range(P):
        for j in range(i + 1, P):
            H[:, i, j] = H[:, j, i] = ((f[:, k] - f[:, 1 + 2 * i] - f[:, 1 + 2 * j] + f0)
                                       / (h[:, i] * h[:, j]))
            k += 1
    return H


def score_points(theta: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The coordinates (n, 2 P, P) where :func:`score_hessian` reads the score: ``+h_i``
    then ``-h_i`` per coordinate ``i``."""
    n, P = theta.shape
    out = np.repeat(theta[:, None, :], 2 * P, axis=1)
    idx = np.arange(P)
    out[:, 2 * idx, idx] += h
    out[:, 2 * idx + 1, idx] -= h
    return out


def score_hessian(s: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The Hessian (n, P, P) from the scores ``s`` (n, 2 P, P) at :func:`score_points`:
    row ``i`` is ``(s(+h_i) - s(-h_i)) / (2 h_i)``, then the symmetric part (the two
    halves differ by O(h^2) and rounding)."""
    H = (s[:, 0::2, :] - s[:, 1::2, :]) / (2.0 * h[:, :, None])
    return 0.5 * (H + np.swapaxes(H, 1, 2))


def covariance(H: np.ndarray, J: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The parameters' covariance ``J (-H)^-1 J^T`` (n, size, size) and a flag per dataset:
    False where the observed information ``-H`` is not finite and positive definite (a
    flat direction or a point off the maximum), its covariance NaN."""
    n, P = H.shape[:2]
    cov = np.full((n, J.shape[1], J.shape[1]), np.nan)
    ok = np.zeros(n, dtype=bool)
    finite = np.isfinite(H).all(axis=(1, 2))
    try:  # every finite one at once, the usual case; else one by one, skipping the rest
        chol = np.linalg.cholesky(-H[finite])
    except np.linalg.LinAlgError:
        chol = None
    if chol is not None:
        inv = np.linalg.inv(chol)
        Jf = J[finite]
        cov[finite] = Jf @ (np.swapaxes(inv, 1, 2) @ inv) @ np.swapaxes(Jf, 1, 2)
        ok[finite] = True
        return cov, ok
    for d in range(n):
        info = -H[d]
        if not np.all(np.isfinite(info)):
            continue
        try:
            chol = np.linalg.cholesky(info)
        except np.linalg.LinAlgError:
            continue
        inv = np.linalg.inv(chol)
        cov[d] = J[d] @ (inv.T @ inv) @ J[d].T
        ok[d] = True
    return cov, ok
