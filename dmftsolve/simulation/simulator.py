"""Finite-d reference simulator: the exact full-batch GD of ``THEORY.md`` §1.

Every theoretical quantity of the library (DMFT kernels, overlaps, losses,
Hessian outliers) is checked against this simulator run on the same
:class:`~dmftsolve.problem.Problem` (``THEORY.md`` §6).

Set-up, for each trial:

* covariates ``X ∈ R^{n×d}`` with i.i.d. ``N(0, 1)`` entries, ``n = round(δ d)``;
* target subspace ``Θ* =`` the first ``k`` coordinate axes. This loses no
  generality: the law of ``x ~ N(0, I_d)`` is rotation invariant, so GD
  started from a rotation-invariant initialisation behaves identically (in
  law) for every orthonormal ``Θ*``. Then ``V* = X[:, :k]``, the overlaps
  ``M = Θ*ᵀW`` are the first ``k`` rows of ``W``, and projections on
  ``span(Θ*)`` are row selections;
* labels ``y_i = h(V*_i, ε_i)`` with ``ε_i ~ N(0, 1)``;
* GD ``W ← (1 − ηλ) W − (η/n) Xᵀ G`` with ``G_i = g(y_i, Wᵀx_i)``; rows of
  ``W`` listed in ``training.hold_zero`` are set to zero at initialisation
  and after every step (projected GD on the complement of those directions);
* with a trained bias (``Problem.build(..., bias=True)``) the pre-activations
  are ``V_i = Wᵀx_i + b`` everywhere (training loss, gradient, Hessian, test
  loss), ``b⁰ = 0`` and ``b ← b − (η/n) Σ_i G_i`` (no ridge, not affected by
  ``hold_zero``).

The GD step reads ``X`` once: :func:`blocked_pass` walks over row blocks
small enough to stay in cache, computes ``V_b = X_b W``, the gradient
``g_b`` and accumulates ``X_bᵀ g_b`` before moving on, instead of the two
full matrix-vector products ``X W`` and ``Xᵀ G``, which each stream the
whole of ``X`` from memory.

Examples
--------
>>> from dmftsolve import Problem
>>> from dmftsolve.simulation.simulator import simulate
>>> p = Problem.build(target="z**2", activation="quad", eta=0.05, steps=20)
>>> run = simulate(p, d=50, delta=4.0, seed=0, trials=2)
>>> run.cosine.shape
(2, 21)
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.linalg
import scipy.sparse.linalg as spla
import sympy as sp

from dmftsolve._blas import blas_threads
from dmftsolve._symbolic import _MODULES, _drop_distributions
from dmftsolve.activations import R
from dmftsolve.losses import F, Y
from dmftsolve.problem import Problem, check_delta, check_integer
from dmftsolve.results import ResultBase, SolverError, Status
from dmftsolve.seeds import SeedLike, as_seed_sequence, child, seed_record

__all__ = [
    "SimulationResult",
    "simulate",
    "blocked_pass",
    "make_grad_rows",
    "gd_step",
    "hessian_operator",
    "dense_hessian_matrix",
    "default_block_rows",
    "DENSE_HESSIAN_LIMIT",
    "blas_threads",
]

#: Largest ``d·m`` for which a dense Hessian (``dense_hessian`` / ``full_spectrum``) is built.
DENSE_HESSIAN_LIMIT = 6000

#: Bytes of ``X`` per row block in :func:`blocked_pass` (tuned with ``benchmarks/bench_simulator.py``).
BLOCK_BYTES = 8 * 2**20

#: Largest memory (bytes) for the stored iterates behind ``gram="full"``.
FULL_GRAM_LIMIT = 2 * 2**30

RowFunction = Callable[[int, int, np.ndarray], np.ndarray]


# --------------------------------------------------------------------------- the kernel
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


def _grad_function(problem: Problem) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A lean ``(y, V) -> g(y, V)`` for many small calls (equal to ``problem.grad``).

    ``problem.grad`` evaluates three compiled expressions with input checks
    and copies; in the blocked pass it is called once per block, so its fixed
    cost matters. For ``m = 1`` the chain rule is fused into one sympy
    expression ``a ∂_f loss(y, a σ(r)) σ'(r)``; for ``m > 1`` the three raw
    expressions are combined with numpy. The caller sets ``np.errstate``.
    """
    a = problem.network.a_array
    sigma = problem.network.sympy_expr
    dsigma = _drop_distributions(sp.diff(sigma, R))
    dloss = _drop_distributions(sp.diff(problem.loss.sympy_expr, F))
    if problem.m == 1:
        a0 = sp.Float(float(a[0]))
        expr = _drop_distributions(a0 * dloss.subs(F, a0 * sigma) * dsigma)
        raw = sp.lambdify([Y, R], expr, modules=_MODULES)

        def grad1(y: np.ndarray, V: np.ndarray) -> np.ndarray:
            out = raw(y[:, None], V)
            return np.broadcast_to(out, V.shape)

        return grad1
    raw_s = sp.lambdify([R], sigma, modules=_MODULES)
    raw_ds = sp.lambdify([R], dsigma, modules=_MODULES)
    raw_dl = sp.lambdify([Y, F], dloss, modules=_MODULES)

    def grad(y: np.ndarray, V: np.ndarray) -> np.ndarray:
        f = np.broadcast_to(raw_s(V), V.shape) @ a
        lf = np.broadcast_to(raw_dl(y, f), y.shape)
        return (lf[:, None] * a) * raw_ds(V)

    return grad


def make_grad_rows(problem: Problem, y: np.ndarray) -> RowFunction:
    """Row function for :func:`blocked_pass` giving ``G_i = g(y_i, V_i)``."""
    gfun = _grad_function(problem)
    y = np.asarray(y, dtype=np.float64)

    def rows(start: int, stop: int, Vb: np.ndarray) -> np.ndarray:
        return gfun(y[start:stop], Vb)

    return rows


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
        If ``b`` is missing for a problem with a bias, given for one
        without, or not of shape ``(m,)``.
    """
    n = X.shape[0]
    t = problem.training
    if problem.bias and b is None:
        raise ValueError("problem has bias=True: gd_step needs the current bias b (shape (m,))")
    if b is not None and not problem.bias:
        raise ValueError("b was given but the problem has bias=False")
    rows = make_grad_rows(problem, y) if rows is None else rows
    gsum = None
    shift = None
    if b is not None:
        shift = np.asarray(b, dtype=np.float64)
        if shift.shape != (problem.m,):
            raise ValueError(f"b must have shape (m,)=({problem.m},), got {shift.shape}")
        gsum = np.zeros(problem.m)
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
    W_new = W - t.eta * grad
    if hz:
        W_new[hz] = 0.0
    if gsum is None:
        return W_new, grad
    grad_b = gsum / n
    return W_new, grad, shift - t.eta * grad_b, grad_b


# --------------------------------------------------------------------------- Hessian
def _preactivations(problem: Problem, X: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """``X W (+ b)`` in float64 (products in ``X.dtype``); ``b`` is required iff ``problem.bias``."""
    if problem.bias and b is None:
        raise ValueError("problem has bias=True: the Hessian needs the current bias b (shape (m,))")
    if b is not None and not problem.bias:
        raise ValueError("b was given but the problem has bias=False")
    V = np.asarray(X @ np.asarray(W, dtype=X.dtype), dtype=np.float64)
    if b is not None:
        b = np.asarray(b, dtype=np.float64)
        if b.shape != (problem.m,):
            raise ValueError(f"b must have shape (m,)=({problem.m},), got {b.shape}")
        V += b
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

    ``H[Δ] = (1/n) Σ_i x_i (D_i Δᵀ x_i)ᵀ + λΔ`` (``THEORY.md`` §3), each
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


def dense_hessian_matrix(
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    *,
    b: np.ndarray | None = None,
    block_rows: int | None = None,
) -> np.ndarray:
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


# --------------------------------------------------------------------------- result
@dataclass(repr=False)
class SimulationResult(ResultBase):
    """Trajectories of finite-d GD, one row per trial.

    Arrays have leading axes ``(trials, recorded steps)``; ``R`` below is the
    number of recorded steps (:attr:`steps`).

    Attributes
    ----------
    status, message, settings, diagnostics, elapsed
        See :class:`~dmftsolve.results.ResultBase`. ``settings`` holds ``d``,
        ``n``, ``delta``, ``trials``, the per-trial seeds (entropy and spawn
        key of each ``SeedSequence``), ``dtype``, ``block_rows`` and the problem.
    steps : ndarray, shape (R,)
        The recorded GD steps ``t`` (``0``, every ``record_every``-th, and ``T``).
    overlaps : ndarray, shape (trials, R, k, m)
        ``M_t = Θ*ᵀW_t``.
    gram : ndarray, shape (trials, R, m, m) or (trials, R, R, m, m)
        ``W_tᵀW_t``; with ``gram="full"`` the two-time Gram ``W_tᵀW_s``
        (axes ``t, s, :, :``).
    train_loss : ndarray, shape (trials, R)
        ``(1/n) Σ_i ℓ(y_i, W_tᵀx_i + b_t)`` (no ridge term).
    test_loss, test_loss_stderr : ndarray, shape (trials, R)
        Mean of ``ℓ`` on ``n_test`` fresh samples and its standard error.
    grad_norm : ndarray, shape (trials, R)
        ``‖∇_W L(W_t, b_t)‖_F`` (bias gradient not included; ridge included; ``hold_zero`` rows excluded, i.e.
        the norm of the step direction actually taken).
    cosine : ndarray, shape (trials, R)
        Largest principal cosine between ``span(W_t)`` and ``span(Θ*)``.
    cosine_per_direction : ndarray, shape (trials, R, k)
        ``‖P_{span W_t} θ*_i‖`` for each target direction ``i``.
    bias : ndarray, shape (trials, R, m)
        The trained bias ``b_t`` (all zeros, always present, when the problem
        has ``bias=False``).
    hessian : dict
        Empty unless ``hessian_at`` was given. Eigenpairs of ``∇²_W L`` at
        ``(W_t, b_t)``: the bias block of the Hessian is not included. Keys: ``steps`` (H,),
        ``method`` ("lanczos" or "dense"), ``hard`` (the hard rows),
        ``low``/``high`` (trials, H, n_eigs): smallest/largest eigenvalues,
        each ascending; ``low_overlap_hard``/``high_overlap_hard``: squared
        overlap of each eigenvector with the hard subspace;
        ``low_overlap_target``/``high_overlap_target``: with ``span(Θ*)``;
        ``spectrum`` (trials, H, d·m) when ``full_spectrum=True``.
    """

    status: Status
    message: str
    settings: dict[str, Any]
    diagnostics: dict[str, Any]
    elapsed: float
    steps: np.ndarray
    overlaps: np.ndarray
    gram: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    test_loss_stderr: np.ndarray
    grad_norm: np.ndarray
    cosine: np.ndarray
    cosine_per_direction: np.ndarray
    bias: np.ndarray
    hessian: dict[str, Any] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        return int(self.cosine.shape[0])

    def _array(self, name: str) -> np.ndarray:
        if name in self.hessian and isinstance(self.hessian[name], np.ndarray):
            return self.hessian[name]
        names = {f.name for f in dataclasses.fields(self)}
        value = getattr(self, name, None) if name in names else None
        if not isinstance(value, np.ndarray) or value.ndim == 0 or name == "steps":
            raise ValueError(f"name must be a per-trial array of the result, got {name!r}")
        return value

    def mean(self, name: str) -> np.ndarray:
        """Mean over trials of the array ``name`` (e.g. ``"cosine"``, ``"low"``)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(self._array(name), axis=0)

    def stderr(self, name: str) -> np.ndarray:
        """Standard error over trials of the mean of ``name`` (NaN for one trial)."""
        a = self._array(name)
        count = np.sum(np.isfinite(a), axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sd = np.nanstd(a, axis=0, ddof=1)
            return np.where(count > 1, sd / np.sqrt(np.maximum(count, 1)), np.nan)

    def final(self, name: str) -> np.ndarray:
        """Per-trial value of ``name`` at the last recorded step."""
        return self._array(name)[:, -1]

    def success(self, threshold: float = 0.5) -> np.ndarray:
        """Per trial: final cosine ``> threshold`` (a trial that blew up is a failure)."""
        threshold = float(threshold)
        c = self.cosine[:, -1]
        return np.isfinite(c) & (c > threshold)

    def success_rate(self, threshold: float = 0.5) -> tuple[float, float]:
        """Fraction of successful trials and its binomial standard error."""
        s = self.success(threshold)
        p = float(np.mean(s))
        return p, math.sqrt(p * (1.0 - p) / s.size)


# --------------------------------------------------------------------------- helpers
@dataclass(frozen=True)
class _Options:
    """Per-trial settings (picklable, sent to executor workers)."""

    gram: str
    record_every: int
    n_test: int
    hessian_at: tuple[int, ...]
    n_eigs: int
    dense_hessian: bool
    full_spectrum: bool
    hard: tuple[int, ...]
    dtype: str
    block_rows: int | None
    blas_threads: int | None = 1


# Transitional aliases (the public versions live in dmftsolve.seeds).
_seed_sequence = as_seed_sequence
_child = child
_seed_record = seed_record


def _dtype(value: Any) -> np.dtype:
    try:
        dt = np.dtype(value)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64, got {value!r}") from None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {value!r}")
    return dt


def _cosines(M: np.ndarray, G: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest principal cosine and per-direction ``‖P_W θ_i‖`` from ``M = Θᵀ W`` and ``G = WᵀW``.

    With ``P_W = W G⁺ Wᵀ``: ``Θᵀ P_W Θ = M G⁺ Mᵀ``; its diagonal gives the
    squared per-direction projections and its largest eigenvalue the squared
    largest principal cosine.
    """
    C = M @ np.linalg.pinv(G, rcond=1e-12, hermitian=True) @ M.T
    per = np.sqrt(np.clip(np.diag(C), 0.0, 1.0))
    top = float(np.sqrt(np.clip(np.linalg.eigvalsh(0.5 * (C + C.T))[-1], 0.0, 1.0)))
    return top, per


def _psd_sqrt(Q: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(0.5 * (Q + Q.T))
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


def _psd_factor(Q: np.ndarray) -> np.ndarray:
    """``L`` with ``L Lᵀ = Q`` for a positive semidefinite ``Q`` (clipping round-off)."""
    w, U = np.linalg.eigh(0.5 * (Q + Q.T))
    return U * np.sqrt(np.clip(w, 0.0, None))


def _init_weights(problem: Problem, d: int, rng: np.random.Generator) -> np.ndarray:
    k, m = problem.k, problem.m
    init = problem.training.init
    if init.kind == "random":
        W = rng.standard_normal((d, m)) * math.sqrt(init.q0 / d)
    else:
        W = np.zeros((d, m))
        W[:k] = init.overlaps(k, m)
        B = rng.standard_normal((d - k, m))
        Qb, _ = np.linalg.qr(B)
        W[k:] = Qb @ _psd_sqrt(init.gram(m))
    W[list(problem.training.hold_zero)] = 0.0
    return W


def _recorded_steps(T: int, every: int) -> np.ndarray:
    s = list(range(0, T + 1, every))
    if s[-1] != T:
        s.append(T)
    return np.asarray(s, dtype=int)


# --------------------------------------------------------------------------- one trial
def _hessian_eigs(
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    opts: _Options,
    rng: np.random.Generator,
    b: np.ndarray | None = None,
) -> dict[str, Any]:
    d, m, k = X.shape[1], problem.m, problem.k
    ne = opts.n_eigs
    info: dict[str, Any] = {}
    if opts.dense_hessian or opts.full_spectrum:
        H = dense_hessian_matrix(problem, X, y, W, b=b, block_rows=opts.block_rows)
        w, U = scipy.linalg.eigh(H)
        low_w, low_v = w[:ne], U[:, :ne]
        high_w, high_v = w[-ne:], U[:, -ne:]
        if opts.full_spectrum:
            info["spectrum"] = w
        info["converged"] = True
    else:
        op = hessian_operator(problem, X, y, W, b=b, block_rows=opts.block_rows)
        v0 = rng.standard_normal(d * m)
        converged = True
        out = []
        for which in ("SA", "LA"):
            try:
                vals, vecs = spla.eigsh(op, k=ne, which=which, v0=v0, tol=1e-10,
                                        maxiter=max(2000, 10 * d * m))
            except spla.ArpackNoConvergence as exc:
                converged = False
                vals = np.full(ne, np.nan)
                vecs = np.full((d * m, ne), np.nan)
                nconv = len(exc.eigenvalues)
                vals[:nconv] = exc.eigenvalues
                vecs[:, :nconv] = exc.eigenvectors
            order = np.argsort(vals)
            out.append((vals[order], vecs[:, order]))
        (low_w, low_v), (high_w, high_v) = out
        info["converged"] = converged
    for name, vecs in (("low", low_v), ("high", high_v)):
        sq = vecs.reshape(d, m, -1) ** 2
        info[f"{name}_overlap_hard"] = sq[list(opts.hard)].sum(axis=(0, 1))
        info[f"{name}_overlap_target"] = sq[:k].sum(axis=(0, 1))
    info["low"], info["high"] = low_w, high_w
    return info


def _run_trial(
    problem: Problem,
    d: int,
    n: int,
    ss: np.random.SeedSequence,
    opts: _Options,
    progress: Any = None,
) -> dict[str, Any]:
    """Run one trial; returns a dict of per-trial arrays and a status."""
    t0 = time.perf_counter()
    k, m = problem.k, problem.m
    tr = problem.training
    T = tr.steps
    dtype = np.dtype(opts.dtype)
    rng_data, rng_init, rng_test, rng_hess = (np.random.default_rng(_child(ss, i)) for i in range(4))

    # data: X generated in place, never copied; V* = X[:, :k]
    X = np.empty((n, d), dtype=dtype)
    if dtype == np.float64:
        rng_data.standard_normal(out=X)
    else:  # the float64 stream rounded, by row blocks: same data as float64 up to rounding
        b = default_block_rows(d, 8)
        for start in range(0, n, b):
            X[start:start + b] = rng_data.standard_normal((min(b, n - start), d))
    eps = rng_data.standard_normal(n)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.asarray(problem.labels(np.asarray(X[:, :k], dtype=np.float64), eps), dtype=float)
    W = _init_weights(problem, d, rng_init)

    # test set: the exact law of (Θ*ᵀx, Wᵀx) for fresh x given W (common random numbers)
    zt = rng_test.standard_normal((opts.n_test, k))
    xit = rng_test.standard_normal((opts.n_test, m))
    with np.errstate(over="ignore", invalid="ignore"):
        yt = np.asarray(problem.labels(zt, rng_test.standard_normal(opts.n_test)), dtype=float)

    steps = _recorded_steps(T, opts.record_every)
    Rn = len(steps)
    rec_index = {int(s): i for i, s in enumerate(steps)}
    out: dict[str, Any] = {
        "overlaps": np.full((Rn, k, m), np.nan),
        "gram": np.full((Rn, m, m), np.nan),
        "train_loss": np.full(Rn, np.nan),
        "test_loss": np.full(Rn, np.nan),
        "test_loss_stderr": np.full(Rn, np.nan),
        "grad_norm": np.full(Rn, np.nan),
        "cosine": np.full(Rn, np.nan),
        "cosine_per_direction": np.full((Rn, k), np.nan),
        "bias": np.full((Rn, m), np.nan),
    }
    history = np.full((Rn, d, m), np.nan) if opts.gram == "full" else None
    H = len(opts.hessian_at)
    hess: dict[str, Any] = {}
    if H:
        ne = opts.n_eigs
        for key in ("low", "high", "low_overlap_hard", "high_overlap_hard",
                    "low_overlap_target", "high_overlap_target"):
            hess[key] = np.full((H, ne), np.nan)
        if opts.full_spectrum:
            hess["spectrum"] = np.full((H, d * m), np.nan)
        hess["converged"] = np.zeros(H, dtype=bool)
    hess_index = {s: i for i, s in enumerate(opts.hessian_at)}

    status, message = Status.SUCCESS, ""
    rows = make_grad_rows(problem, y)
    V = np.empty((n, m), dtype=dtype)
    b = np.zeros(m) if problem.bias else None
    b_new = None
    with blas_threads(opts.blas_threads):
        for t in range(T + 1):
            if b is None:
                W_new, grad = gd_step(problem, X, y, W, block_rows=opts.block_rows, rows=rows, V_out=V)
            else:
                W_new, grad, b_new, _ = gd_step(problem, X, y, W, b=b, block_rows=opts.block_rows,
                                                rows=rows, V_out=V)
            i = rec_index.get(t)
            if i is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    Vf = np.asarray(V, dtype=np.float64)
                    M = W[:k].copy()
                    G = W.T @ W
                    out["overlaps"][i] = M
                    out["gram"][i] = G
                    out["train_loss"][i] = float(np.mean(problem.loss_value(y, Vf)))
                    out["bias"][i] = 0.0 if b is None else b
                    Vt = zt @ M + xit @ _psd_factor(W[k:].T @ W[k:]).T if np.all(np.isfinite(W)) \
                        else np.full((opts.n_test, m), np.nan)
                    if b is not None:
                        Vt = Vt + b
                    lt = problem.loss_value(yt, Vt)
                    out["test_loss"][i] = float(np.mean(lt))
                    out["test_loss_stderr"][i] = float(np.std(lt, ddof=1) / math.sqrt(opts.n_test))
                    out["grad_norm"][i] = float(np.linalg.norm(grad))
                    if np.all(np.isfinite(G)) and np.all(np.isfinite(M)):
                        out["cosine"][i], out["cosine_per_direction"][i] = _cosines(M, G)
                if history is not None:
                    history[i] = W
                finite = all(np.all(np.isfinite(out[key][i])) for key in
                             ("overlaps", "gram", "train_loss", "grad_norm", "cosine", "bias"))
                if not finite:
                    status = Status.NONFINITE
                    message = f"non-finite values at step {t}"
                    break
            j = hess_index.get(t)
            if j is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    info = _hessian_eigs(problem, X, y, W, opts, rng_hess, b)
                for key, val in info.items():
                    hess[key][j] = val
            W = W_new
            if b is not None:
                b = b_new
            if progress is not None:
                progress.update(1)
    if H and not np.all(hess["converged"]) and status.ok:
        status = Status.NOT_CONVERGED
        message = "Lanczos (eigsh) did not converge at some Hessian steps"
    if history is not None:
        out["gram"] = np.einsum("tdi,sdj->tsij", history, history)
    out["hessian"] = hess
    out["status"] = status
    out["message"] = message
    out["elapsed"] = time.perf_counter() - t0
    out["steps"] = steps
    return out


def _assemble(
    trials: list[dict[str, Any]],
    settings: dict[str, Any],
    hessian_meta: dict[str, Any],
    elapsed: float,
) -> SimulationResult:
    """Stack per-trial outputs into a :class:`SimulationResult`."""
    names = ("overlaps", "gram", "train_loss", "test_loss", "test_loss_stderr", "grad_norm",
             "cosine", "cosine_per_direction", "bias")
    arrays = {name: np.stack([t[name] for t in trials]) for name in names}
    hessian: dict[str, Any] = {}
    if trials[0]["hessian"]:
        hessian = dict(hessian_meta)
        for key in trials[0]["hessian"]:
            hessian[key] = np.stack([t["hessian"][key] for t in trials])
    bad = [(i, t) for i, t in enumerate(trials) if not t["status"].ok]
    if not bad:
        status, message = Status.SUCCESS, ""
    else:
        statuses = {t["status"] for _, t in bad}
        status = Status.NONFINITE if Status.NONFINITE in statuses else bad[0][1]["status"]
        message = "; ".join(f"trial {i}: {t['message']}" for i, t in bad)
    diagnostics = {
        "trial_elapsed": [t["elapsed"] for t in trials],
        "trial_status": [t["status"].value for t in trials],
    }
    return SimulationResult(
        status=status, message=message, settings=settings, diagnostics=diagnostics,
        elapsed=elapsed, steps=trials[0]["steps"], hessian=hessian, **arrays,
    )


def _prepare(
    problem: Problem,
    d: Any,
    delta: Any,
    *,
    trials: Any,
    gram: str,
    record_every: Any,
    n_test: Any,
    hessian_at: Iterable[int],
    n_eigs: Any,
    dense_hessian: bool,
    full_spectrum: bool,
    hard: Sequence[int] | None,
    dtype: Any,
    block_rows: Any,
    blas_threads: Any = 1,
) -> tuple[int, int, float, int, _Options]:
    """Validate the arguments of :func:`simulate`; return ``(d, n, delta, trials, options)``."""
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    k, m = problem.k, problem.m
    d = check_integer("d", d, 1)
    if d < k + m:
        raise ValueError(f"d must be >= k + m = {k + m}, got {d}")
    delta = check_delta(delta)
    n = int(round(delta * d))
    if n < 2:
        raise ValueError(f"delta={delta} with d={d} gives n={n} samples; need n >= 2")
    trials = check_integer("trials", trials, 1)
    if gram not in ("diag", "full"):
        raise ValueError(f"gram must be 'diag' or 'full', got {gram!r}")
    record_every = check_integer("record_every", record_every, 1)
    n_test = n if n_test is None else check_integer("n_test", n_test, 2)
    T = problem.training.steps
    if isinstance(hessian_at, (int, np.integer)):
        hessian_at = (hessian_at,)
    hess_steps = sorted({check_integer("hessian_at entry", s, 0) for s in hessian_at})
    if hess_steps and hess_steps[-1] > T:
        raise ValueError(f"hessian_at entries must be <= steps={T}, got {hess_steps[-1]}")
    n_eigs = check_integer("n_eigs", n_eigs, 1)
    if hess_steps and n_eigs >= d * m - 1:
        raise ValueError(f"n_eigs must be < d*m - 1 = {d * m - 1}, got {n_eigs}")
    if hess_steps and (dense_hessian or full_spectrum) and d * m > DENSE_HESSIAN_LIMIT:
        raise ValueError(
            f"dense_hessian/full_spectrum need d*m <= {DENSE_HESSIAN_LIMIT}, got d*m={d * m}"
        )
    if hard is None:
        hard_t = tuple(problem.training.hold_zero) or tuple(range(k))
    else:
        hard_t = tuple(sorted({check_integer("hard entry", i, 0) for i in hard}))
        if not hard_t or hard_t[-1] >= k:
            raise ValueError(f"hard must name target directions in 0..{k - 1}, got {hard!r}")
    dt = _dtype(dtype)
    if block_rows is not None:
        block_rows = check_integer("block_rows", block_rows, 1)
    if blas_threads is not None:
        blas_threads = check_integer("blas_threads", blas_threads, 1)
    init = problem.training.init
    hz = list(problem.training.hold_zero)
    if init.kind == "warm" and hz and np.any(init.overlaps(k, m)[hz] != 0):
        raise ValueError(
            f"warm start M0={init.M0!r} has non-zero rows for hold_zero={tuple(hz)!r}"
        )
    Rn = len(_recorded_steps(T, record_every))
    if gram == "full" and Rn * d * m * 8 > FULL_GRAM_LIMIT:
        raise ValueError(
            f"gram='full' would store {Rn} iterates of size {d}x{m} "
            f"({Rn * d * m * 8 / 2**30:.1f} GiB); raise record_every"
        )
    opts = _Options(gram=gram, record_every=record_every, n_test=n_test,
                    hessian_at=tuple(hess_steps), n_eigs=n_eigs,
                    dense_hessian=bool(dense_hessian), full_spectrum=bool(full_spectrum),
                    hard=hard_t, dtype=dt.name, block_rows=block_rows,
                    blas_threads=blas_threads)
    return d, n, delta, trials, opts


def _settings(
    problem: Problem, d: int, n: int, delta: float, seeds: list[np.random.SeedSequence],
    opts: _Options,
) -> dict[str, Any]:
    return {
        "d": d, "n": n, "delta": delta, "trials": len(seeds),
        "seeds": [_seed_record(s) for s in seeds],
        "dtype": opts.dtype,
        "block_rows": opts.block_rows if opts.block_rows is not None
        else default_block_rows(d, np.dtype(opts.dtype).itemsize),
        "record_every": opts.record_every, "n_test": opts.n_test, "gram": opts.gram,
        "hessian_at": list(opts.hessian_at), "n_eigs": opts.n_eigs,
        "hessian_method": "dense" if (opts.dense_hessian or opts.full_spectrum) else "lanczos",
        "hard": list(opts.hard),
        "blas_threads": opts.blas_threads,
        "theta_star": "first k coordinate axes",
        "problem": problem.to_dict(),
    }


def _hessian_meta(opts: _Options) -> dict[str, Any]:
    return {
        "steps": np.asarray(opts.hessian_at, dtype=int),
        "method": "dense" if (opts.dense_hessian or opts.full_spectrum) else "lanczos",
        "hard": list(opts.hard),
    }


# --------------------------------------------------------------------------- public entry
def simulate(
    problem: Problem,
    d: int,
    delta: float,
    *,
    seed: SeedLike = None,
    trials: int = 1,
    gram: Literal["diag", "full"] = "diag",
    record_every: int = 1,
    n_test: int | None = None,
    hessian_at: Iterable[int] = (),
    n_eigs: int = 4,
    dense_hessian: bool = False,
    full_spectrum: bool = False,
    hard: Sequence[int] | None = None,
    dtype: Any = np.float64,
    block_rows: int | None = None,
    blas_threads: int | None = 1,
    progress: bool = False,
    throw: bool = True,
) -> SimulationResult:
    """Run full-batch GD at finite ``d`` on ``problem`` (``THEORY.md`` §1).

    ``Θ*`` is taken to be the first ``k`` coordinate axes, which is no loss
    of generality because ``x ~ N(0, I_d)`` is isotropic and the random
    initialisation rotation invariant: ``V* = X[:, :k]`` and the overlaps are
    the first ``k`` rows of ``W``.

    Parameters
    ----------
    problem : Problem
        Target, network, loss and GD schedule (``η``, ``λ``, ``T``, init,
        ``hold_zero``); with ``problem.bias`` the bias ``b`` (``b⁰ = 0``) is
        trained too and recorded in ``SimulationResult.bias``.
    d : int
        Input dimension, ``d >= k + m``.
    delta : float
        Sample ratio; ``n = round(δ d)``.
    seed : int, SeedSequence, Generator or None
        Root of all randomness. Trial ``j`` uses the ``j``-th child of the
        root ``SeedSequence`` (as ``SeedSequence.spawn`` makes it; the root
        is not mutated), so trial ``j`` does not depend on ``trials``.
    trials : int
        Independent repetitions (fresh data, labels, init, test set).
    gram : {"diag", "full"}
        ``"diag"``: equal-time Gram ``W_tᵀW_t``; ``"full"``: the two-time
        Gram ``W_tᵀW_s`` over recorded steps (stores the recorded iterates).
    record_every : int
        Record every this many steps (and always step 0 and ``T``).
    n_test : int, optional
        Fresh samples for the test loss (default ``n``). They are drawn from
        the exact joint law of ``(Θ*ᵀx, W_tᵀx)`` for ``x ~ N(0, I_d)``
        independent of ``W_t`` (Gaussian with covariance built from ``M_t``
        and ``W_tᵀW_t``), so no ``n_test × d`` matrix is formed; the same
        standard-normal draws are reused at every step.
    hessian_at : iterable of int
        Steps ``t`` at which to compute extreme eigenpairs of ``∇²L(W_t)``
        (with a bias: ``∇²_W L`` at ``(W_t, b_t)``, the bias block excluded).
    n_eigs : int
        Number of smallest and of largest eigenpairs.
    dense_hessian : bool
        Build the dense ``dm × dm`` Hessian and use ``eigh`` (``dm <=``
        :data:`DENSE_HESSIAN_LIMIT`) instead of Lanczos (``eigsh``).
    full_spectrum : bool
        Also return all eigenvalues (implies the dense path).
    hard : sequence of int, optional
        Target directions forming the hard subspace for eigenvector
        overlaps; default ``training.hold_zero`` if non-empty, else all ``k``.
    dtype : float64 or float32
        Storage of ``X`` and precision of the matrix products; the weights,
        gradients' block sums, losses and Hessian weights are float64.
    block_rows : int, optional
        Rows of ``X`` per block of the single-pass GD step (default: about
        :data:`BLOCK_BYTES` bytes per block).
    blas_threads : int or None
        BLAS threads during the run (see :func:`blas_threads`); None leaves
        BLAS alone. The default, one thread, is the robust choice: the
        blocked pass makes many mid-sized BLAS calls, and with several
        threads each call waits for the slowest one, which on a shared or
        oversubscribed machine was measured here to be 10-20x slower than
        one thread (and at best 1.5x faster on an idle one). Run trials in
        parallel with :func:`dmftsolve.simulation.sweeps.sweep` instead.
    progress : bool
        Show a tqdm bar on stderr.
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` if the run ends with a
        non-success status (non-finite values, Lanczos not converged).

    Returns
    -------
    SimulationResult

    Raises
    ------
    ValueError
        For invalid arguments (naming the parameter).
    SolverError
        If ``throw`` and a trial produced non-finite values or Lanczos failed.
    """
    d, n, delta, trials, opts = _prepare(
        problem, d, delta, trials=trials, gram=gram, record_every=record_every, n_test=n_test,
        hessian_at=hessian_at, n_eigs=n_eigs, dense_hessian=dense_hessian,
        full_spectrum=full_spectrum, hard=hard, dtype=dtype, block_rows=block_rows,
        blas_threads=blas_threads,
    )
    root = _seed_sequence(seed)
    seeds = [_child(root, j) for j in range(trials)]
    t0 = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=trials * (problem.training.steps + 1), file=sys.stderr,
                   desc=f"simulate d={d} δ={delta:g}", unit="step")
    try:
        outs = [_run_trial(problem, d, n, s, opts, bar) for s in seeds]
    finally:
        if bar is not None:
            bar.close()
    settings = _settings(problem, d, n, delta, seeds, opts)
    settings["root_seed"] = _seed_record(root)
    result = _assemble(outs, settings, _hessian_meta(opts), time.perf_counter() - t0)
    if throw and not result.ok:
        raise SolverError(f"simulate {result.status.value}: {result.message}", result)
    return result
