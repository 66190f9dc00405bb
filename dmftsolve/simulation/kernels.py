"""Kernels of the finite-d simulator: the blocked GD pass over ``X`` and the Hessian of ``L``.

The GD step reads ``X`` once: :func:`blocked_pass` walks over row blocks
small enough to stay in cache, computes ``V_b = X_b W``, the gradient
``g_b`` and accumulates ``X_bᵀ g_b`` before moving on, instead of the two
full matrix-vector products ``X W`` and ``Xᵀ G``, which each stream the
whole of ``X`` from memory.

Several trials that share ``X`` (same data, different initialisations or
learning rates) are stepped together by :func:`gd_step_batch`: their weights
sit side by side as the columns of one ``(d, trials·m)`` matrix, so each
block of ``X`` is multiplied once by all of them (one GEMM instead of one
GEMV per trial).

The per-sample derivatives ``g = ∇_V ℓ`` and ``D = ∇²_V ℓ`` are the
compiled ones of :class:`~dmftsolve.problem.Problem` (``Problem.grad``,
``Problem.hess``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse.linalg as spla

from dmftsolve._blas import blas_threads
from dmftsolve.problem import Problem

__all__ = [
    "BLOCK_BYTES",
    "DENSE_HESSIAN_LIMIT",
    "RowFunction",
    "GDStep",
    "blas_threads",
    "blocked_pass",
    "default_block_rows",
    "make_grad_rows",
    "gd_step",
    "gd_step_batch",
    "hessian_operator",
    "dense_hessian_matrix",
]

#: Largest ``d·m`` for which a dense Hessian (``dense_hessian`` / ``full_spectrum``) is built.
DENSE_HESSIAN_LIMIT = 6000

#: Bytes of ``X`` per row block in :func:`blocked_pass` (tuned with ``benchmarks/bench_simulator.py``).
BLOCK_BYTES = 8 * 2**20

#: ``rows(start, stop, V_b) -> G_b``: the per-row function of :func:`blocked_pass`.
RowFunction = Callable[[int, int, np.ndarray], np.ndarray]


# --------------------------------------------------------------------------- the blocked pass
def default_block_rows(d: int, itemsize: int) -> int:
    """Rows per block so that a block of ``X`` holds about :data:`BLOCK_BYTES` bytes."""
    return max(8, int(BLOCK_BYTES // max(1, d * itemsize)))


def blocked_pass(
    X: np.ndarray,
    W: np.ndarray,
    rows: RowFunction,
    *,
    block_rows: int | None = None,
    V_out: np.ndarray | None = None,
    shift: np.ndarray | None = None,
) -> np.ndarray:
    """``Xᵀ G`` with ``G_b = rows(start, stop, X_b W + shift)``, in one blocked pass over ``X``.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        C-contiguous data (float32 or float64); never copied.
    W : ndarray, shape (d, m)
        Weights; cast to ``X.dtype`` for the products.
    rows : callable
        ``rows(start, stop, V_b)`` returns ``G`` for rows ``start:stop`` given
        their pre-activations ``V_b = X[start:stop] @ W`` (shape ``(b, m)``).
    block_rows : int, optional
        Rows per block; default :func:`default_block_rows`.
    V_out : ndarray, shape (n, m), optional
        If given (C-contiguous, dtype ``X.dtype``), receives ``X W + shift``.
    shift : ndarray, shape (m,), optional
        Added to every row of the pre-activations (the bias ``b``); default none.

    Returns
    -------
    ndarray, shape (d, m), float64
        ``Xᵀ G``; each block's product is formed in ``X.dtype`` while the
        block is in cache, and the blocks are summed in float64.
    """
    n, d = X.shape
    if W.ndim != 2 or W.shape[0] != d:
        raise ValueError(f"W must have shape (d, m) with d={d}, got {W.shape}")
    m = W.shape[1]
    b = default_block_rows(d, X.itemsize) if block_rows is None else int(block_rows)
    if b < 1:
        raise ValueError(f"block_rows must be >= 1, got {block_rows!r}")
    Wc = np.ascontiguousarray(W, dtype=X.dtype)
    acc = np.zeros((d, m), dtype=np.float64)
    tmp = np.empty((d, m), dtype=X.dtype)
    Vbuf = V_out if V_out is not None else np.empty((min(b, n), m), dtype=X.dtype)
    for start in range(0, n, b):
        stop = min(start + b, n)
        Xb = X[start:stop]
        Vb = Vbuf[start:stop] if V_out is not None else Vbuf[: stop - start]
        np.matmul(Xb, Wc, out=Vb)
        if shift is not None:
            Vb += shift
        Gb = np.asarray(rows(start, stop, Vb), dtype=X.dtype)
        np.matmul(Xb.T, Gb, out=tmp)
        acc += tmp
    return acc


def make_grad_rows(problem: Problem, y: np.ndarray, *, trials: int = 1) -> RowFunction:
    """Row function for :func:`blocked_pass` giving ``G_i = g(y_i, V_i)`` (``Problem.grad``).

    With ``trials > 1`` the pre-activations of ``trials`` trials sharing the
    labels ``y`` sit side by side (columns ``j·m … j·m + m − 1`` for trial
    ``j``, the layout of :func:`gd_step_batch`), and so does ``G``.
    """
    m = problem.m
    yc = np.asarray(y, dtype=np.float64)[:, None]

    def rows(start: int, stop: int, Vb: np.ndarray) -> np.ndarray:
        b = stop - start
        return problem.grad(yc[start:stop], Vb.reshape(b, trials, m)).reshape(b, trials * m)

    return rows


class GDStep(NamedTuple):
    """One GD step of :func:`gd_step_batch` (arrays in its column layout)."""

    W: np.ndarray
    grad: np.ndarray
    b: np.ndarray | None
    grad_b: np.ndarray | None


def _check_bias(problem: Problem, b: Any, size: int) -> np.ndarray | None:
    """``b`` as a float64 array of shape ``(size,)``; required iff ``problem.bias``."""
    if problem.bias and b is None:
        raise ValueError(f"problem has bias=True: the current bias b (shape ({size},)) is required")
    if b is not None and not problem.bias:
        raise ValueError("b was given but the problem has bias=False")
    if b is None:
        return None
    b = np.asarray(b, dtype=np.float64)
    if b.shape != (size,):
        raise ValueError(f"b must have shape ({size},), got {b.shape}")
    return b


def gd_step_batch(
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    *,
    eta: Any = None,
    b: np.ndarray | None = None,
    block_rows: int | None = None,
    rows: RowFunction | None = None,
    V_out: np.ndarray | None = None,
) -> GDStep:
    """One GD step of ``B`` trials sharing ``(X, y)``, by one blocked pass over ``X``.

    Trial ``j`` has weights ``W[:, j·m:(j+1)·m]`` and takes the step
    ``W_j ← W_j − η_j ∇_W L(W_j, b_j)`` (and ``b_j ← b_j − η_j ∂L/∂b``);
    every block of ``X`` is multiplied by all ``B·m`` columns at once.

    Parameters
    ----------
    problem : Problem
        Supplies ``g``, ``λ`` and ``hold_zero`` (those rows are zeroed).
    X : ndarray, shape (n, d)
        Covariates (float32 or float64, C-contiguous).
    y : ndarray, shape (n,)
        Labels.
    W : ndarray, shape (d, B·m)
        The weights of the ``B`` trials side by side (float64).
    eta : float or array of shape (B,), optional
        Learning rate of each trial; default ``problem.training.eta``.
    b : ndarray, shape (B·m,), optional
        Biases side by side; required when ``problem.bias``, refused otherwise.
    block_rows : int, optional
        Rows per block of :func:`blocked_pass`.
    rows : callable, optional
        A prebuilt ``make_grad_rows(problem, y, trials=B)``.
    V_out : ndarray, shape (n, B·m), optional
        Receives the pre-activations ``X W + b`` at the current ``(W, b)``.

    Returns
    -------
    GDStep
        ``W`` after the step; ``grad = (1/n) Xᵀ G + λ W`` with ``hold_zero``
        rows zeroed; ``b`` after the step and ``grad_b = (1/n) Σ_i G_i``
        (no ridge), both None without a bias.
    """
    n, d = X.shape
    m, t = problem.m, problem.training
    if W.ndim != 2 or W.shape[0] != d or W.shape[1] % m:
        raise ValueError(f"W must have shape (d, B*m) with d={d}, m={m}, got {W.shape}")
    B = W.shape[1] // m
    eta_a = np.broadcast_to(np.asarray(t.eta if eta is None else eta, dtype=np.float64), (B,))
    shift = _check_bias(problem, b, B * m)
    rows = make_grad_rows(problem, y, trials=B) if rows is None else rows
    gsum = None
    if shift is not None:
        gsum = np.zeros(B * m)
        inner = rows

        def rows(start: int, stop: int, Vb: np.ndarray) -> np.ndarray:
            Gb = np.asarray(inner(start, stop, Vb), dtype=np.float64)
            gsum[:] += Gb.sum(axis=0)
            return Gb

    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        grad = blocked_pass(X, W, rows, block_rows=block_rows, V_out=V_out, shift=shift)
        grad /= n
        if t.lam:
            grad += t.lam * W
    hz = list(t.hold_zero)
    if hz:
        grad[hz] = 0.0
    eta_cols = np.repeat(eta_a, m)
    W_new = W - eta_cols * grad
    if hz:
        W_new[hz] = 0.0
    if gsum is None:
        return GDStep(W_new, grad, None, None)
    grad_b = gsum / n
    return GDStep(W_new, grad, shift - eta_cols * grad_b, grad_b)


def gd_step(
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    *,
    b: np.ndarray | None = None,
    block_rows: int | None = None,
    rows: RowFunction | None = None,
    V_out: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """One GD step ``W ← W − η ∇_W L(W, b)`` (and ``b ← b − η ∂L/∂b``) by one blocked pass over ``X``.

    Parameters
    ----------
    problem : Problem
        Supplies ``g``, ``η`` and ``λ``; ``hold_zero`` rows are zeroed.
    X : ndarray, shape (n, d)
        Covariates (float32 or float64, C-contiguous).
    y : ndarray, shape (n,)
        Labels.
    W : ndarray, shape (d, m)
        Current weights (float64).
    b : ndarray, shape (m,), optional
        Current bias; required when ``problem.bias`` is True and refused
        otherwise.
    block_rows : int, optional
        Rows per block of :func:`blocked_pass`.
    rows : callable, optional
        A prebuilt :func:`make_grad_rows` (saves rebuilding it every step).
    V_out : ndarray, shape (n, m), optional
        Receives the pre-activations ``X W + b`` at the current ``(W, b)``.

    Returns
    -------
    W_new : ndarray, shape (d, m)
        The weights after the step.
    grad : ndarray, shape (d, m)
        ``∇_W L = (1/n) Xᵀ G + λ W`` with ``hold_zero`` rows set to zero.
    b_new : ndarray, shape (m,)
        Only when ``b`` is given: the bias after the step.
    grad_b : ndarray, shape (m,)
        Only when ``b`` is given: ``∂L/∂b = (1/n) Σ_i G_i`` (no ridge).

    Raises
    ------
    ValueError
        If ``W`` is not of shape ``(d, m)``, or ``b`` is missing for a
        problem with a bias, given for one without, or not of shape ``(m,)``.
    """
    if W.ndim != 2 or W.shape[1] != problem.m:
        raise ValueError(f"W must have shape (d, m) with m={problem.m}, got {W.shape}")
    step = gd_step_batch(problem, X, y, W, b=b, block_rows=block_rows, rows=rows, V_out=V_out)
    if step.b is None:
        return step.W, step.grad
    return step.W, step.grad, step.b, step.grad_b


# --------------------------------------------------------------------------- Hessian
def _preactivations(problem: Problem, X: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """``X W (+ b)`` in float64 (products in ``X.dtype``); ``b`` is required iff ``problem.bias``."""
    shift = _check_bias(problem, b, problem.m)
    V = np.asarray(X @ np.asarray(W, dtype=X.dtype), dtype=np.float64)
    if shift is not None:
        V += shift
    return V


def _hess_rows(problem: Problem, y: np.ndarray, V: np.ndarray) -> RowFunction:
    """Row function ``U_b -> D_b U_b`` (per-sample ``D_i = ∇²_V ℓ``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        D = problem.hess(y, np.asarray(V, dtype=np.float64))
    if problem.m == 1:
        D1 = D[:, 0, :]  # (n, 1)

        def rows1(start: int, stop: int, Ub: np.ndarray) -> np.ndarray:
            return D1[start:stop] * Ub

        return rows1

    def rows(start: int, stop: int, Ub: np.ndarray) -> np.ndarray:
        return np.einsum("bij,bj->bi", D[start:stop], Ub)

    return rows


def hessian_operator(
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    *,
    b: np.ndarray | None = None,
    block_rows: int | None = None,
) -> spla.LinearOperator:
    """Matrix-free ``∇²_W L(W, b)`` on ``Δ ∈ R^{d×m}`` flattened row-major (index ``i·m + j``).

    ``H[Δ] = (1/n) Σ_i x_i (D_i Δᵀ x_i)ᵀ + λΔ`` (``docs/theory.md`` §3.1), each
    product one :func:`blocked_pass` over ``X``. ``D_i`` is evaluated at
    ``V_i = Wᵀx_i + b`` (``b``, shape ``(m,)``, the bias: required when
    ``problem.bias`` and refused otherwise); the Hessian is the ``W`` block
    only: the rows and columns of the bias are not included.
    """
    n, d = X.shape
    m = problem.m
    V = _preactivations(problem, X, W, b)
    rows = _hess_rows(problem, y, V)
    lam = problem.training.lam

    def matvec(v: np.ndarray) -> np.ndarray:
        Delta = np.asarray(v, dtype=np.float64).reshape(d, m)
        out = blocked_pass(X, Delta, rows, block_rows=block_rows) / n
        if lam:
            out += lam * Delta
        return out.ravel()

    return spla.LinearOperator((d * m, d * m), matvec=matvec, rmatvec=matvec, dtype=np.float64)


def dense_hessian_matrix(problem: Problem, X: np.ndarray, y: np.ndarray, W: np.ndarray, *,
                         b: np.ndarray | None = None, block_rows: int | None = None) -> np.ndarray:
    """The dense ``(d·m) × (d·m)`` Hessian (same flattening as :func:`hessian_operator`).

    With a bias ``b`` (required when ``problem.bias``, refused otherwise),
    ``∇²_W L`` at ``(W, b)`` (the bias block is not included).

    Raises
    ------
    ValueError
        If ``d·m`` exceeds :data:`DENSE_HESSIAN_LIMIT`.
    """
    n, d = X.shape
    m = problem.m
    if d * m > DENSE_HESSIAN_LIMIT:
        raise ValueError(
            f"dense Hessian needs d*m <= {DENSE_HESSIAN_LIMIT}, got d*m={d * m}; "
            "use the Lanczos path (dense_hessian=False, full_spectrum=False)"
        )
    V = _preactivations(problem, X, W, b)
    with np.errstate(over="ignore", invalid="ignore"):
        D = problem.hess(y, V)
    H = np.zeros((d, m, d, m))
    b = default_block_rows(d, 8) if block_rows is None else int(block_rows)
    for start in range(0, n, b):
        Xb = np.asarray(X[start:start + b], dtype=np.float64)
        Db = D[start:start + b]
        for j in range(m):
            for l in range(m):
                H[:, j, :, l] += Xb.T @ (Db[:, j, l, None] * Xb)
    H /= n
    H = H.reshape(d * m, d * m)
    H = 0.5 * (H + H.T)
    lam = problem.training.lam
    if lam:
        H[np.diag_indices_from(H)] += lam
    return H


