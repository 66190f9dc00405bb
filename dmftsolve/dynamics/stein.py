"""Stein (Gaussian integration by parts) estimator of the DMFT response ``Γ``.

With ``Ξ^t = Σ_{u≤t} L(t,u) ζ^u`` (standard normal innovations ``ζ``),
Stein's lemma gives ``E[g^t ζ^{uᵀ}] = Σ_{s≥u} Γ(t,s) L(s,u)``: row ``t`` of
``Γ`` is one block triangular solve with ``Lᵀ`` (``O(N T² m²)`` time over a
run, ``O(N T m)`` memory, no second derivatives). Responses to zero-variance
innovations are set to zero (Stein's lemma cannot see them). Optional
regression (``Stein(regression=True)``) replaces ``E[g ζᵀ]`` by the least-squares
coefficients of ``g`` on the innovations, a control variate for the part of
``g`` linear in ``ζ``. The caveats (identifiability of ``Γ`` once the
innovation variances collapse, and why the observables are unaffected) are in
the module docstring of :mod:`dmftsolve.dynamics.dmft`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmftsolve._lapack import solve_lower
from dmftsolve.dynamics.response import StepMoments

__all__ = ["Stein", "SteinResponse"]


@dataclass(frozen=True)
class Stein:
    """The Stein estimator of ``Γ`` (``DMFTSettings.method``; ``docs/theory.md`` §2.5).

    Parameters
    ----------
    regression : bool
        Replace ``E[g ζᵀ]`` by the least-squares coefficients of ``g`` on the innovations (the
        sample Gram instead of ``I``): a control variate for the part of ``g`` linear in ``ζ``,
        which lowers the estimate's own noise that the parameter side adds to ``Q`` each step.

    Examples
    --------
    >>> Stein(regression=True).to_dict()
    {'method': 'stein', 'stein_regression': True}
    """

    regression: bool = False

    #: the method's name in records and on the command line
    name = "stein"
    #: the default ``null_rtol``: Stein divides by the innovations' standard deviations
    default_null_rtol = 1e-4
    needs_D = False

    def __post_init__(self) -> None:
        if not isinstance(self.regression, (bool, np.bool_)):
            raise ValueError(f"regression must be True or False, got {self.regression!r}")

    def build(self, *, n_batches: int, batch_size: int, steps: int, m: int,
              antithetic: bool) -> SteinResponse:
        """The estimator of one solve."""
        return SteinResponse(n_batches=n_batches, batch_size=batch_size, steps=steps, m=m,
                             antithetic=antithetic, regression=bool(self.regression))

    def memory_bytes(self, *, n_paths: int, n_batches: int, steps: int, m: int) -> int:
        """Bytes of the estimator's own store."""
        return SteinResponse.memory_bytes(n_batches=n_batches, steps=steps, m=m,
                                          regression=bool(self.regression))

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.name, "stein_regression": bool(self.regression)}


class SteinResponse:
    """Row ``t`` of ``Γ`` from ``E[g^t ζ^{uᵀ}]`` by one triangular solve (module docstring).

    Parameters
    ----------
    n_batches, batch_size : int
        ``B`` batches of ``nb`` paths.
    steps, m : int
        ``T`` and the width (sizes the regression store).
    antithetic : bool
        Paths come in antithetic pairs (then ``g`` is not centred: the pairs
        already cancel its part even in ``ζ``).
    regression : bool
        Regress ``g`` on the innovations (sample Gram instead of ``I``).
    p_ratio : float
        Regression stops once the regressors (the non-null innovations) exceed this
        fraction of the independent paths.
    """

    needs_D = False
    zero_at_null = True  # Γ = Sgz L̃⁻¹ is formed on the non-null innovations only

    def __init__(self, *, n_batches: int, batch_size: int, steps: int, m: int, antithetic: bool,
                 regression: bool, p_ratio: float = 0.05) -> None:
        B, nb = n_batches, batch_size
        size = (steps + 1) * m
        self.antithetic = antithetic
        self.p_ratio = p_ratio
        # index 0 = all paths, 1..B = batches; one batch (errors="none" pools the paths into
        # one) is its own mean, so it is estimated once and returned as both
        self.single = B == 1
        n_est = 1 if self.single else B + 1
        self.gram = np.zeros((n_est, size, size)) if regression else None
        self.active = np.ones(n_est, dtype=bool)
        n_eff = [B * nb] + [nb] * (n_est - 1)
        self.n_eff = np.array(n_eff, dtype=float) / (2 if antithetic else 1)
        self.regressed = np.zeros(steps + 1, dtype=bool)

    @staticmethod
    def memory_bytes(*, n_batches: int, steps: int, m: int, regression: bool) -> int:
        """Bytes of the estimator's own store (the regression Gram factors)."""
        size = (steps + 1) * m
        n_store = 1 if n_batches == 1 else n_batches + 1
        return 8 * n_store * size * size if regression else 0

    def row(self, step: StepMoments) -> tuple[np.ndarray, np.ndarray]:
        t, m = step.t, step.m
        t1m = (t + 1) * m
        single = self.single
        if single:
            Sgz, Szz = step.gz.copy(), step.zz.copy()
        else:
            Sgz = np.concatenate([step.gz.mean(axis=0)[None], step.gz])
            Szz = np.concatenate([step.zz.mean(axis=0)[None], step.zz])
        if not self.antithetic:  # centre (regression with intercept)
            gm, zm = step.gmean, step.zmean  # (B, m), (B, t1m)
            if not single:
                gm = np.concatenate([gm.mean(axis=0)[None], gm])  # (B+1, m)
                zm = np.concatenate([zm.mean(axis=0)[None], zm])  # (B+1, t1m)
            Sgz = Sgz - gm[:, :, None] * zm[:, None, :]
            Szz = Szz - zm[:, t * m:t1m, None] * zm[:, None, :]
        nm = step.null_mask
        nn = np.flatnonzero(~nm)  # the non-null innovations; the null ones have zero moments
        k = nn.size
        Sgz = Sgz[:, :, nn]
        if self.gram is not None:
            keep = np.flatnonzero(~step.null)
            self._extend_gram(Szz[:, keep][:, :, nn], k - keep.size, keep.size)
            for i in np.flatnonzero(self.active):  # c = Sgz Gz^{-1}: OLS coefficients of g on ζ^{≤t}
                Sgz[i] = self._gram_solve(i, k, Sgz[i])
            self.regressed[t] = bool(self.active[0])
        rows = Sgz.shape[0]  # B + 1, or 1 for a single batch
        rhs = Sgz.reshape(rows * m, k)
        # Γ = Sgz L̃^{-1} on the non-null innovations only: L̃ is zero below the diagonal in a
        # null column, so the other entries are those of the full solve, and these are zero
        gam = np.zeros((rows * m, t1m))
        if k:
            L = step.L[np.ix_(nn, nn)] if step.L_nonnull is None else step.L_nonnull
            gam[:, nn] = solve_lower(L, rhs.T, trans=True).T
        gam = gam.reshape(rows, m, t1m)
        return (gam[0], gam) if single else (gam[0], gam[1:])

    def _gram_solve(self, i: int, k: int, S: np.ndarray) -> np.ndarray:
        """``S G⁻¹`` for estimate ``i``'s Gram ``G = C Cᵀ`` on its first ``k`` regressors (``S``
        of shape ``(rows, k)``): the least-squares coefficients, by two triangular solves with
        the stored factor."""
        assert self.gram is not None
        C = self.gram[i, :k, :k]
        return solve_lower(C, solve_lower(C, S.T), trans=True).T

    def _extend_gram(self, Szz: np.ndarray, k: int, nk: int) -> None:
        """Extend, for each estimate still regressing, the Cholesky factor of the sample Gram
        of the non-null innovations ``ζ^{≤t}`` (``k`` before step ``t``) by the rows of the
        ``nk`` non-null innovations of step ``t`` (``Szz[i]``, their moments with all ``k + nk``).
        A null innovation is zero on every path: it is left out, and costs no degree of
        freedom. Regression stops for estimate ``i`` once the regressors exceed ``p_ratio`` of
        its independent paths, or if the Gram is numerically singular."""
        assert self.gram is not None
        k1 = k + nk
        for i in range(self.gram.shape[0]):
            if not self.active[i]:
                continue
            if k1 > self.p_ratio * self.n_eff[i]:
                self.active[i] = False
                continue
            if nk == 0:
                continue
            row = Szz[i]  # (nk, k1)
            if k:
                Crow = solve_lower(self.gram[i, :k, :k], row[:, :k].T).T
            else:
                Crow = np.zeros((nk, 0))
            Stt = row[:, k:k1] - Crow @ Crow.T
            try:
                Ctt = np.linalg.cholesky((Stt + Stt.T) / 2)
            except np.linalg.LinAlgError:
                self.active[i] = False
                continue
            self.gram[i, k:k1, :k] = Crow
            self.gram[i, k:k1, k:k1] = Ctt

    def diagnostics(self) -> dict[str, np.ndarray]:
        return {"stein_regressed": self.regressed.copy()}
