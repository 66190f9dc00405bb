"""Easy and hard target directions (docs/theory.md §4.1).

A latent direction ``u`` is *hard* when ``E[uᵀz | y, z_E] = 0``, with ``z_E``
the coordinates along the directions already learned (the *easy* ones):
then GD from a random start leaves its overlap at zero for ``O(1)`` steps.
Easy directions are found in stages, as in a staircase: stage 0 collects the
directions with ``E[z | y] ≠ 0``; stage ``j+1`` those with
``E[z_⊥ | y, z_E] ≠ 0`` given the easy subspace ``E`` found so far.

``E[z_⊥ | y, z_E] = 0`` holds iff ``E[z_⊥ φ(y, z_E)] = 0`` for every test
function ``φ``. We test a fixed, rich family: bounded functions of the
standardised label (``ỹ``, ``tanh(ỹ − c)``, Gaussian bumps at several ``c``)
times Hermite polynomials of degree ≤ 2 in ``z_E``. The moments are computed
by a tensor Gauss–Hermite rule in ``(z, ε)``, whose nodes are symmetric:
for sign-symmetric hard directions the moments then vanish to rounding.
A direction is easy when the largest singular value of its normalised
moment matrix exceeds ``tol`` plus twice the quadrature error, estimated by
comparing two rules (for kinked links and hard directions without sign
symmetry the moments are quadrature noise well above rounding). A finite family can in principle miss a
dependence that only shows in other test functions; the singular values are
reported so that the margin can be inspected.

Examples
--------
>>> from dmftsolve.thresholds.directions import split_directions
>>> split = split_directions("z1 + z2**2")
>>> split.hard_indices
(1,)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from typing import Any

import numpy as np
from scipy.linalg import null_space, orth

from dmftsolve.gaussian import gauss_hermite_rule
from dmftsolve.problem import Problem, Target

__all__ = ["DirectionSplit", "axis_indices", "direction_moments", "label_features", "snap_to_axes",
           "split_directions"]

_MAX_POINTS = 300_000
_CENTRES = np.linspace(-2.0, 2.0, 9)


@dataclass(frozen=True)
class DirectionSplit:
    """Orthonormal bases of the easy and hard latent subspaces.

    Attributes
    ----------
    easy : ndarray, shape (k, k_e)
        Easy directions (learned in ``O(1)`` steps), in the order found.
    hard : ndarray, shape (k, k_h)
        The orthogonal complement: directions with ``E[z_h | y, z_E] = 0``.
    stages : tuple of int
        Number of easy directions found at each staircase stage.
    singular_values : tuple of ndarray
        Normalised moment singular values at each stage (the margin to ``tol``).
    tol : float
        Threshold used.
    quadrature_errors : tuple of float
        ``‖B_n − B_{0.7n}‖₂`` at each stage: the moments of two Gauss–Hermite
        rules differ by this much; a direction is easy only when its singular
        value exceeds ``tol + 2 ×`` this.
    """

    easy: np.ndarray
    hard: np.ndarray
    stages: tuple[int, ...]
    singular_values: tuple[np.ndarray, ...] = field(repr=False)
    tol: float = 1e-7
    quadrature_errors: tuple[float, ...] = ()

    @property
    def k(self) -> int:
        return self.easy.shape[0]

    @property
    def hard_indices(self) -> tuple[int, ...] | None:
        """The hard subspace as coordinate indices, or ``None`` if it is not axis-aligned."""
        return axis_indices(self.hard)

    @property
    def easy_indices(self) -> tuple[int, ...] | None:
        """The easy subspace as coordinate indices, or ``None`` if it is not axis-aligned."""
        return axis_indices(self.easy)

    def to_dict(self) -> dict[str, Any]:
        return {
            "easy": self.easy.tolist(), "hard": self.hard.tolist(),
            "easy_indices": self.easy_indices, "hard_indices": self.hard_indices,
            "stages": list(self.stages), "tol": self.tol,
            "singular_values": [s.tolist() for s in self.singular_values],
            "quadrature_errors": list(self.quadrature_errors),
        }


def axis_indices(basis: np.ndarray, atol: float = 1e-8) -> tuple[int, ...] | None:
    """The coordinate axes that span ``span(basis)``, or None if the subspace is not axis-aligned.

    Parameters
    ----------
    basis : ndarray, shape (k, r)
        Orthonormal columns.
    atol : float, optional
        Tolerance on the entries of the projector ``basis basisᵀ``.

    Returns
    -------
    tuple of int or None
        The 0-based axes in increasing order (``()`` for ``r = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> from dmftsolve.thresholds.directions import axis_indices
    >>> axis_indices(np.array([[0.0], [-1.0], [0.0]]))
    (1,)
    >>> print(axis_indices(np.array([[1.0], [1.0]]) / np.sqrt(2)))
    None
    """
    if basis.shape[1] == 0:
        return ()
    P = basis @ basis.T
    diag = np.diag(P)
    idx = np.flatnonzero(diag > 0.5)
    E = np.zeros_like(P)
    E[idx, idx] = 1.0
    return tuple(int(i) for i in idx) if np.allclose(P, E, atol=atol) else None


def _hermite_features(zE: np.ndarray, degree: int = 2) -> np.ndarray:
    """Products of probabilists' Hermite polynomials of ``z_E`` up to total ``degree`` (incl. 1)."""
    n, r = zE.shape
    feats = [np.ones(n)]
    for deg in range(1, degree + 1):
        for combo in combinations_with_replacement(range(r), deg):
            f = np.ones(n)
            for j in set(combo):
                p = combo.count(j)
                x = zE[:, j]
                he = (np.ones(n), x, x**2 - 1)
                f = f * he[p]
            feats.append(f)
    return np.stack(feats, axis=1)


def label_features(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The bounded test functions ``ψ(y)`` of the easy-direction test, at the quadrature nodes.

    ``ỹ`` (the label standardised with the weights ``w``), ``tanh(ỹ)``, and
    ``tanh(2(ỹ − c))`` and ``exp(−2(ỹ − c)²)`` at nine centres ``c`` in ``[-2, 2]``.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Labels at the nodes.
    w : ndarray, shape (n,)
        Quadrature weights (summing to 1).

    Returns
    -------
    ndarray, shape (n, 20)
        One column per test function; ``(n, 0)`` for a constant label.
    """
    mean = float(w @ y)
    std = float(np.sqrt(max(w @ (y - mean) ** 2, 0.0)))
    rms = float(np.sqrt(max(w @ y**2, 0.0)))
    if not np.isfinite(std) or std <= 1e-10 * rms:  # constant up to the rounding of the mean
        return np.zeros((y.size, 0))
    t = (y - mean) / std
    feats = [t, np.tanh(t)]
    feats += [np.tanh(2.0 * (t - c)) for c in _CENTRES]
    feats += [np.exp(-2.0 * (t - c) ** 2) for c in _CENTRES]
    return np.stack(feats, axis=1)


def split_directions(
    target: Target | Problem | str, *, tol: float = 1e-7, nodes: int | None = None
) -> DirectionSplit:
    """Split ``span(Θ*)`` into easy and hard directions.

    Parameters
    ----------
    target : Target, Problem or str
        The target (a problem's target is used; a string is parsed as a target).
    tol : float
        Threshold on normalised moments ``|E[uᵀz φ]| / √E[φ²]`` above which a
        direction counts as easy.
    nodes : int, optional
        Gauss–Hermite nodes per dimension (default: as many as fit in about
        3·10⁵ points, at most 80).

    Returns
    -------
    DirectionSplit

    Raises
    ------
    ValueError
        On a bad ``tol`` or ``nodes``, or a latent dimension too large for the
        quadrature (``k`` plus one for noise above 5).

    Examples
    --------
    ``y = z1 + z2²``: a linear step learns ``z1`` (``E[z1 y] ≠ 0``); ``z2`` is hard:

    >>> from dmftsolve import split_directions
    >>> s = split_directions("z1 + z2**2")
    >>> s.easy.ravel().tolist(), s.hard.ravel().tolist(), s.hard_indices
    ([1.0, 0.0], [0.0, 1.0], (1,))
    """
    if isinstance(target, Problem):
        target = target.target
    elif isinstance(target, str):
        target = Target(target)
    if not isinstance(target, Target):
        raise ValueError(f"target must be a Target, Problem or expression string, got {target!r}")
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive finite number, got {tol!r}")
    k = int(target.k)  # type: ignore[arg-type]
    dim = k + (1 if target.noisy else 0)
    if dim > 5:
        raise ValueError(f"k={k} (plus noise) is too large for the quadrature test (at most 5 dimensions)")
    if nodes is None:
        nodes = int(min(80, np.floor(_MAX_POINTS ** (1.0 / dim))))
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 4:
        raise ValueError(f"nodes must be an integer >= 4, got {nodes!r}")
    # Two rules: the moments of the coarser one estimate the quadrature error,
    # which for kinked links and hard directions without sign symmetry is far
    # above rounding; singular values move by at most ‖ΔB‖₂ (Weyl).
    rules = []
    for n in (int(nodes), max(4, int(round(0.7 * nodes)))):
        x, w = gauss_hermite_rule(dim, n)
        z = x[:, :k]
        y = target(z, x[:, k] if target.noisy else 0.0)
        rules.append((z, w, y, label_features(y, w)))

    easy = np.zeros((k, 0))
    stages: list[int] = []
    svals: list[np.ndarray] = []
    errors: list[float] = []
    while easy.shape[1] < k and rules[0][3].shape[1] > 0:
        rest = null_space(easy.T) if easy.shape[1] else np.eye(k)
        B, Bc = (direction_moments(z, w, psi, easy, rest) for z, w, _, psi in rules)
        U, s, _ = np.linalg.svd(B, full_matrices=False)
        err = float(np.linalg.norm(B - Bc, 2)) if Bc.shape == B.shape else np.inf
        svals.append(s)
        errors.append(err)
        new = U[:, s > tol + 2 * err]
        if new.shape[1] == 0:
            break
        easy = orth(np.hstack([easy, rest @ new]))
        stages.append(new.shape[1])
    hard = null_space(easy.T) if easy.shape[1] else np.eye(k)
    easy, hard = snap_to_axes(easy), snap_to_axes(hard)
    return DirectionSplit(easy=easy, hard=hard, stages=tuple(stages), singular_values=tuple(svals), tol=tol,
                          quadrature_errors=tuple(errors))


def direction_moments(z: np.ndarray, w: np.ndarray, psi: np.ndarray, easy: np.ndarray,
                      rest: np.ndarray) -> np.ndarray:
    """Normalised moments ``E[(restᵀz) φ_j]`` over the test family ``φ = ψ(y) × He(z_E)``.

    Parameters
    ----------
    z : ndarray, shape (n, k)
        Latents at the quadrature nodes.
    w : ndarray, shape (n,)
        Quadrature weights.
    psi : ndarray, shape (n, p)
        Label features (:func:`label_features`).
    easy : ndarray, shape (k, r)
        Easy directions found so far (``r = 0`` at the first stage).
    rest : ndarray, shape (k, k - r)
        Orthonormal basis of their complement, the directions tested.

    Returns
    -------
    ndarray, shape (k - r, p · q)
        ``E[(restᵀz) φ_j]`` with each ``φ_j`` normalised to ``E[φ_j²] = 1`` (``q``
        Hermite products of ``z_E`` of degree ``<= 2``); a direction is easy when
        this matrix has a singular value above the tolerance.
    """
    phi = (psi[:, :, None] * _hermite_features(z @ easy)[:, None, :]).reshape(z.shape[0], -1)
    norms = np.sqrt(w @ phi**2)
    phi = phi / np.where(norms > 1e-12, norms, np.inf)
    return (z @ rest).T @ (w[:, None] * phi)


def snap_to_axes(basis: np.ndarray) -> np.ndarray:
    """``basis`` replaced by unit coordinate vectors when its span is that of coordinate axes.

    Parameters
    ----------
    basis : ndarray, shape (k, r)
        Orthonormal columns.

    Returns
    -------
    ndarray, shape (k, r)
        The axes of :func:`axis_indices` (tolerance ``1e-6``) as columns, in
        increasing order, or ``basis`` itself if its span is not axis-aligned.

    Examples
    --------
    >>> import numpy as np
    >>> from dmftsolve.thresholds.directions import snap_to_axes
    >>> snap_to_axes(np.array([[1e-9], [-1.0]])).ravel().tolist()
    [0.0, 1.0]
    """
    idx = axis_indices(basis, atol=1e-6)
    if idx is None:
        return basis
    out = np.zeros_like(basis)
    out[list(idx), np.arange(len(idx))] = 1.0
    return out
