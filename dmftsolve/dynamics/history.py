"""What each DMFT path keeps of its past (``DMFTSettings.history``; ``docs/theory.md`` §2.4).

The fields of step ``t`` carry the memory term ``μ^t = −(η/δ) Σ_{s<t} R(t, s+1) g^s`` of each
path, and the parameter side needs ``N(u) = E[g^t μ^{uᵀ}]``-type products of the step's gradients
with the past. Two ways to keep the past:

* :class:`FullHistory` (``"full"``): the gradients ``g^u`` of every step. Each step reads them for
  the memory term of the next fields and for the row ``Cg(t, ·) = E[g^t g^{uᵀ}]``; with pooled
  moments (``errors="none"``) both in one pass over cache-sized column blocks.
* :class:`CompactHistory` (``"compact"``, needs the Stein responses and ``errors="none"``): the memory
  terms ``μ^v`` at the steps ``v`` whose innovation is not null, advanced by the recursion of ``R``,

      μ^{t+1} = (1 − ηλ) μ^t − η Σ_v Γ(t,v) μ^v − (η/δ) g^t.

  The Stein ``Γ(t, v)`` is zero at null innovations and ``Q(t+1, v)`` is read later only at non-null
  ``v`` and at ``v = t``, so nothing else is needed; ``Cg`` outside its diagonal blocks and
  ``Q(s, u)`` with ``u`` null and ``s ≥ u + 2`` are not formed (NaN in the result).

Both give the same overlaps, cosines, ``Q(t, t)``, ``R`` and ``Γ`` up to round-off
(``tests/test_dmft.py::test_compact_history_is_the_full_solve``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from dmftsolve.dynamics.innovations import InnovationBasis
from dmftsolve.dynamics.paths import PathSet

__all__ = ["PathHistory", "FullHistory", "CompactHistory", "HISTORIES", "check_history"]

#: column blocks of the history passes: about 4 MiB, read from memory once and from the cache
#: ``2m − 1`` times (one matrix-vector product per neuron and per product)
_BLOCK_BYTES = 1 << 22
#: widths up to which the passes use matrix-vector products; above, one matrix product per block
#: of about 512 KiB (a matrix product with ``m`` columns packs its operands, which at small ``m``
#: costs more than it saves)
GEMV_MAX_WIDTH = 4
_GEMM_BLOCK_BYTES = 1 << 19


class PathHistory(Protocol):
    """The past of every path, as the DMFT driver uses it each step."""

    def memory(self, t: int) -> np.ndarray | None:
        """The memory term ``μ^t`` of the fields of step ``t``, ``(m, N)`` (None: zero)."""
        ...

    def stored(self, t: int, n0: int, n1: int, keep: np.ndarray) -> None:
        """Step ``t``'s non-null innovations were stored at rows ``n0:n1`` (``keep``: their indices)."""
        ...

    def record(self, t: int, g: np.ndarray) -> np.ndarray | None:
        """Keep step ``t``'s gradients ``g^t`` (``(m, N)``); return the per-batch rows
        ``Cν(t, ≤t) = E_b[g^t g^{uᵀ}]/δ`` (``(B, m, (t+1)m)``) if they are formed here, else None."""
        ...

    def advance(self, t: int, g: np.ndarray, Gamma_row: np.ndarray, R_row: np.ndarray,
                Cnu: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """After ``Γ(t, ·)`` and ``R(t+1, ≤t)`` are known: the rows ``Cν(t, ≤t)`` (pooled, ``(1, m,
        (t+1)m)``, NaN where not formed) or ``Cnu`` if :meth:`record` gave them, and ``N(≤t)``
        (``(1, m, (t+1)m)``) if formed here (else None: the driver forms it from ``Cν``). Also
        prepares the memory term of step ``t + 1``."""
        ...


def check_history(name: Any, method: str, errors: str) -> None:
    """Raise ``ValueError`` unless ``name`` is a history usable with the estimator ``method`` and
    the error model ``errors``."""
    if name not in HISTORIES:
        raise ValueError(f"history must be 'full' or 'compact', got {name!r}")
    if name == "compact" and (method != "stein" or errors != "none"):
        raise ValueError("history='compact' needs the Stein responses and errors='none', got "
                         f"method={method!r}, errors={errors!r}")


class FullHistory:
    """The gradients ``g^u`` of every step, on every path (module docstring)."""

    def __init__(self, paths: PathSet, R: np.ndarray, *, steps: int, eta: float, delta: float,
                 pooled: bool, dtype: Any) -> None:
        self.paths, self.R = paths, R
        self.m, self.N, self.T = paths.m, paths.N, steps
        self.eta, self.delta, self.pooled = eta, delta, pooled
        self.G = np.zeros(((steps + 1) * self.m, self.N), dtype=np.dtype(dtype))
        self.next_memory: tuple[int, np.ndarray] | None = None

    def memory(self, t: int) -> np.ndarray | None:
        m = self.m
        if self.next_memory is not None and self.next_memory[0] == t:
            return self.next_memory[1]  # from the previous step's pass over the history
        if t == 0:
            return None
        coef = -(self.eta / self.delta) * self.R[t * m:(t + 1) * m, m:(t + 1) * m]
        return coef.astype(self.G.dtype) @ self.G[: t * m]

    def stored(self, t: int, n0: int, n1: int, keep: np.ndarray) -> None:
        return None

    def record(self, t: int, g: np.ndarray) -> np.ndarray | None:
        m, B, nb = self.m, self.paths.B, self.paths.nb
        t1m = (t + 1) * m
        self.G[t * m:t1m] = g
        if self.pooled:
            return None  # formed in the same pass as the next memory term (advance)
        Gb = self.G[:t1m].reshape(t1m, B, nb).transpose(1, 2, 0)  # (B, nb, t1m)
        gg = (self.paths.batches(g).astype(self.G.dtype, copy=False) @ Gb) / nb
        return gg.astype(float, copy=False) / self.delta

    def advance(self, t: int, g: np.ndarray, Gamma_row: np.ndarray, R_row: np.ndarray,
                Cnu: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        if Cnu is not None:
            return Cnu, None
        return self._pass(t, g, R_row), None

    def _pass(self, t: int, g: np.ndarray, R_row: np.ndarray) -> np.ndarray:
        """``E[g^t g^{uᵀ}]/δ`` for ``u ≤ t`` (``(1, m, (t+1)m)``) and, for ``t < T``, the memory term
        ``−(η/δ) Σ_{u≤t} R(t+1, u+1) g^u`` of the next step's fields, in one pass over the history:
        the two products contract it along different axes, and in column blocks that stay in cache
        it is read from memory once a step instead of twice. ``R(t+1, ·)`` depends on ``Γ(t, ·)``
        and not on ``E[g g]``, which is what allows it. Each block is read by ``2m`` matrix-vector
        products, which stream it at close to the memory bandwidth."""
        m, N = self.m, self.N
        t1m = (t + 1) * m
        dt = self.G.dtype
        H = self.G[:t1m]
        if t >= self.T:
            return (H @ np.ascontiguousarray(g.T, dtype=dt)).T.astype(float)[None] / (N * self.delta)
        coef = np.empty((m, t1m))
        coef[:, : t1m - m] = R_row[:, m:t1m]  # R(t+1, u+1), u < t
        coef[:, t1m - m:] = np.eye(m)  # R(t+1, t+1) = I
        coef = (-(self.eta / self.delta) * coef).astype(dt)
        mem = np.empty((m, N), dtype=dt)
        if m > GEMV_MAX_WIDTH:
            gT = np.ascontiguousarray(g.T, dtype=dt)  # (N, m)
            width = max(256, _GEMM_BLOCK_BYTES // max(1, t1m * H.itemsize))
            if width >= N:
                gg = (H @ gT).astype(float)
                mem = coef @ H
            else:
                gg = np.zeros((t1m, m))
                for j in range(0, N, width):
                    blk = H[:, j:j + width]
                    gg += blk @ gT[j:j + width]
                    mem[:, j:j + width] = coef @ blk
            self.next_memory = (t + 1, mem)
            return gg.T[None] / (N * self.delta)
        gv = self.G[t * m:t1m]  # g^t as stored by record, (m, N) in the path dtype
        gg = np.zeros((m, t1m))
        width = max(256, _BLOCK_BYTES // max(1, t1m * H.itemsize))
        for j in range(0, N, width):
            blk = H[:, j:j + width]
            for i in range(m):
                gg[i] += blk @ gv[i, j:j + width]
                mem[i, j:j + width] = coef[i] @ blk
        self.next_memory = (t + 1, mem)
        return gg[None] / (N * self.delta)


class CompactHistory:
    """The memory terms at the non-null innovations (module docstring)."""

    def __init__(self, paths: PathSet, basis: InnovationBasis, *, steps: int, eta: float, lam: float,
                 delta: float, dtype: Any) -> None:
        self.paths, self.basis = paths, basis
        self.m, self.N, self.T = paths.m, paths.N, steps
        self.eta, self.lam, self.delta = eta, lam, delta
        self.S = np.zeros(((steps + 1) * self.m, self.N), dtype=np.dtype(dtype))  # rows in the order of Z
        self.mem = np.zeros((self.m, self.N))

    def memory(self, t: int) -> np.ndarray | None:
        return self.mem

    def stored(self, t: int, n0: int, n1: int, keep: np.ndarray) -> None:
        self.S[n0:n1] = self.mem[keep]  # the memory term where the innovation is not null

    def record(self, t: int, g: np.ndarray) -> np.ndarray | None:
        return None

    def advance(self, t: int, g: np.ndarray, Gamma_row: np.ndarray, R_row: np.ndarray,
                Cnu: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """``Cν(t, ·)`` on its diagonal block only and ``N(·)`` from ``E[g^t μ_jᵀ]`` (zero where not
        needed), in one pass over the stored memory terms; for ``t < T`` it also advances ``μ`` to
        ``t + 1``."""
        m, N = self.m, self.N
        tm, t1m = t * m, (t + 1) * m
        dt = self.S.dtype
        nz = self.basis.n
        rows = self.basis.nonnull
        S = self.S[:nz]
        gv = np.ascontiguousarray(g, dtype=dt)
        Egm = np.zeros((m, nz))
        advance = t < self.T
        if advance:
            Gz = (-self.eta * Gamma_row[:, rows]).astype(dt)  # (m, n_z)
            P = np.zeros((m, N), dtype=dt)
        if nz:
            width = max(256, _BLOCK_BYTES // max(1, nz * S.itemsize))
            for j in range(0, N, width):
                blk = S[:, j:j + width]
                if m > GEMV_MAX_WIDTH:
                    Egm += (blk @ gv[:, j:j + width].T).T
                    if advance:
                        P[:, j:j + width] = Gz @ blk
                    continue
                for i in range(m):
                    Egm[i] += blk @ gv[i, j:j + width]
                    if advance:
                        P[i, j:j + width] = Gz[i] @ blk
        N_row = np.zeros((m, t1m))
        N_row[:, rows] = Egm / N
        N_row[:, tm:t1m] = (g @ self.mem.T) / N  # the memory term of step t itself, in float64
        Cnu = np.full((1, m, t1m), np.nan)
        Cnu[0, :, tm:t1m] = (g @ g.T) / (N * self.delta)
        if advance:  # in place: the rows kept in S are copies
            if self.lam:
                self.mem *= 1.0 - self.eta * self.lam
            self.mem += P
            self.mem -= (self.eta / self.delta) * g
        return Cnu, N_row[None]


HISTORIES = {"full": FullHistory, "compact": CompactHistory}
