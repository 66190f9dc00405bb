"""The parameter side of the DMFT: deterministic linear algebra on the kernels (``docs/theory.md`` §2.3).

With ``φ^t = λω^t + ν^t + Σ_s Γ(t,s) ω^s`` (the √d-scaled orthogonal part of the gradient),
``ω^{t+1} = ω^t − η φ^t`` and ``N(u) := E[ν^t ω^{uᵀ}] = −η Σ_{b<u} Cν(t,b) R(u,b+1)ᵀ``::

    E[φ^t ω^{sᵀ}] = N(s) + Σ_u Γ̃(t,u) Q(u,s)          (Γ̃ = Γ + λ I δ_{u,t})
    E[φ^t φ^{tᵀ}] = Cν(t,t) + N Γ̃ᵀ + Γ̃ Nᵀ + Γ̃ Q Γ̃ᵀ
    Q(t+1,s)      = Q(t,s) − η E[φ^t ω^{sᵀ}]                    (s ≤ t)
    Q(t+1,t+1)    = Q(t,t) − η (E[φ^t ω^{tᵀ}] + ᵀ) + η² E[φ^t φ^{tᵀ}]
    R(t+1,s)      = (1 − ηλ) R(t,s) − η Σ_{u=s}^{t} Γ(t,u) R(u,s)
    M_{t+1}       = (1 − ηλ) M_t − η E[V* g^{tᵀ}]

The functions here take the sampled moments of step ``t`` (``Γ(t,·)``, ``Cν(t,·)``, ``E[V* g^tᵀ]``) and
the kernel stores, and return the next rows; they draw nothing. Their inputs may be *stacks*: index 0
the estimate from all paths, further indices the per-batch estimates whose spread gives the batch
errors. Kernel stores are ``(T+2)m``-square arrays of ``m×m`` blocks, block ``(t, s)`` at rows
``t·m:(t+1)m`` and columns ``s·m:(s+1)m``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["KernelStep", "next_R_row", "memory_row", "kernel_step", "overlap_step", "gradient_norm",
           "psd_violation"]


def _support(support: np.ndarray | None, t: int, m: int, lam: float) -> np.ndarray | None:
    """The columns of ``Γ̃(t, ·) = Γ(t, ·) + λ I δ_{·t}`` that may be non-zero, sorted (None: all)."""
    if support is None:
        return None
    cols = np.asarray(support, dtype=np.intp)
    if lam:
        cols = np.union1d(cols, np.arange(t * m, (t + 1) * m))
    return cols


def _with_ridge(Gamma: np.ndarray, t: int, m: int, lam: float) -> np.ndarray:
    """``Γ̃ = Γ + λ I`` on the diagonal block of the last axis (a copy)."""
    G = Gamma.copy()
    G[..., t * m:(t + 1) * m] += lam * np.eye(m)
    return G


def next_R_row(R: np.ndarray, Gamma_row: np.ndarray, t: int, m: int, eta: float, lam: float,
               support: np.ndarray | None = None) -> np.ndarray:
    """``R(t+1, ≤t) = R(t, ≤t) − η (Γ(t, ·) + λ I δ_{·t}) R(≤t, ≤t)``, shape ``(m, (t+1)m)``.

    Parameters
    ----------
    R : numpy.ndarray
        The response store (blocks ``≤ t`` filled).
    Gamma_row : numpy.ndarray
        ``Γ(t, ≤t)``, shape ``(m, (t+1)m)``.
    t, m : int
        The step and the width.
    eta, lam : float
        Step size and ridge.
    support : numpy.ndarray, optional
        Column indices outside which ``Γ(t, ·)`` is zero (Stein's ``Γ`` vanishes at the
        null innovations): only those rows of ``R`` are read. Default: every column.
    """
    tm, t1m = t * m, (t + 1) * m
    G = _with_ridge(Gamma_row, t, m, lam)
    cols = _support(support, t, m, lam)
    if cols is None:
        return R[tm:t1m, :t1m] - eta * (G @ R[:t1m, :t1m])
    return R[tm:t1m, :t1m] - eta * (G[:, cols] @ R[cols, :t1m])


def memory_row(Cnu: np.ndarray, R: np.ndarray, t: int, m: int, eta: float) -> np.ndarray:
    """``N(u) = −η Σ_{b<t} Cν(t,b) R(u,b+1)ᵀ`` for ``u ≤ t`` from the row ``Cν(t, ≤t)``.

    ``Cnu`` is a stack ``(E, m, (t+1)m)`` of rows; returns the stack ``(E, m, (t+1)m)``.
    """
    tm, t1m = t * m, (t + 1) * m
    return -eta * (Cnu[:, :, :tm] @ R[:t1m, m:t1m].T)


class KernelStep(NamedTuple):
    """The parameter-side rows of step ``t → t+1`` (:func:`kernel_step`)."""

    #: ``Q(t+1, ≤t)`` from the estimate of all paths, ``(m, (t+1)m)``
    Q_row: np.ndarray
    #: ``Q(t+1, t+1)`` for each estimate of the stack, ``(E, m, m)``, symmetrised
    Q_next: np.ndarray
    #: ``E[φ^t φ^{tᵀ}]`` for each estimate, ``(E, m, m)`` (its trace is ``‖∇L_⊥‖²``)
    E_phiphi: np.ndarray


def kernel_step(Q: np.ndarray, Gamma: np.ndarray, Cnu_tt: np.ndarray, N_row: np.ndarray,
                t: int, m: int, eta: float, lam: float, support: np.ndarray | None = None) -> KernelStep:
    """Advance ``Q`` from step ``t`` to ``t+1`` (module docstring).

    Parameters
    ----------
    Q : numpy.ndarray
        The kernel store, blocks ``≤ t`` filled.
    Gamma : numpy.ndarray
        Stack ``(E, m, (t+1)m)`` of ``Γ(t, ≤t)``.
    Cnu_tt : numpy.ndarray
        Stack ``(E, m, m)`` of ``Cν(t, t)``.
    N_row : numpy.ndarray
        Stack ``(E, m, (t+1)m)`` of ``N(≤t)`` (:func:`memory_row`).
    t, m : int
        Step and width.
    eta, lam : float
        Step size and ridge.
    support : numpy.ndarray, optional
        Column indices outside which every ``Γ(t, ·)`` of the stack is zero: only those rows of
        ``Q`` are read (:func:`next_R_row`). Default: every column.
    """
    tm, t1m = t * m, (t + 1) * m
    Gt = _with_ridge(Gamma, t, m, lam)
    cols = _support(support, t, m, lam)
    if cols is None:
        cols = slice(0, t1m)
    Gs = Gt[:, :, cols]  # Γ̃ on its support
    GsT = Gs.transpose(0, 2, 1)
    GQ = Gs @ Q[cols, :t1m]
    F = N_row + GQ  # E[φ ω^{≤tᵀ}]
    NG = N_row[:, :, cols] @ GsT
    Ephi = Cnu_tt + NG + NG.transpose(0, 2, 1) + GQ[:, :, cols] @ GsT
    Ft = F[:, :, tm:t1m]
    Qnext = Q[tm:t1m, tm:t1m][None] - eta * (Ft + Ft.transpose(0, 2, 1)) + eta**2 * Ephi
    Qnext = (Qnext + Qnext.transpose(0, 2, 1)) / 2
    return KernelStep(Q_row=Q[tm:t1m, :t1m] - eta * F[0], Q_next=Qnext, E_phiphi=Ephi)


def overlap_step(M: np.ndarray, EVg: np.ndarray, eta: float, lam: float, held: list[int]) -> np.ndarray:
    """``M_{t+1} = (1 − ηλ) M_t − η E[V* g^{tᵀ}]`` with the ``held`` rows set to zero.

    ``M`` is ``(k, m)``; ``EVg`` is ``(k, m)`` or a stack ``(E, k, m)`` (the result has its shape).
    """
    out = (1 - eta * lam) * M - eta * EVg
    out[..., held, :] = 0.0
    return out


def gradient_norm(EVg: np.ndarray, M: np.ndarray, E_phiphi: np.ndarray, lam: float,
                  held: list[int]) -> np.ndarray:
    """``‖∇L(W^t)‖_F``: the part along the target (``E[V* gᵀ] + λ M``, held rows excluded as in
    projected GD) and the orthogonal part ``tr E[φ φᵀ]``. ``EVg`` ``(..., k, m)``, ``E_phiphi``
    ``(..., m, m)``; returns shape ``(...)``."""
    par = EVg + lam * M
    par[..., held, :] = 0.0
    return np.sqrt(np.clip((par**2).sum(axis=(-2, -1)) + np.trace(E_phiphi, axis1=-2, axis2=-1),
                           0.0, None))


def psd_violation(Q_tt: np.ndarray, rtol: float) -> tuple[float, float] | None:
    """``(smallest eigenvalue, largest diagonal entry)`` of ``Q(t,t)`` if the smallest eigenvalue
    is below ``−rtol`` times the largest diagonal entry (a covariance cannot do that: the
    recursion has diverged), else None."""
    scale = float(np.max(np.abs(np.diag(Q_tt))))
    lo = float(np.linalg.eigvalsh((Q_tt + Q_tt.T) / 2)[0])
    return (lo, scale) if lo < -rtol * scale else None
