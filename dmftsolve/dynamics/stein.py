"""Stein (Gaussian integration by parts) estimator of the DMFT response ``Γ``.

With ``Ξ^t = Σ_{u≤t} L(t,u) ζ^u`` (standard normal innovations ``ζ``),
Stein's lemma gives ``E[g^t ζ^{uᵀ}] = Σ_{s≥u} Γ(t,s) L(s,u)``: row ``t`` of
``Γ`` is one block triangular solve with ``Lᵀ`` (``O(N T² m²)`` time over a
run, ``O(N T m)`` memory, no second derivatives). Responses to zero-variance
innovations are set to zero (Stein's lemma cannot see them). Optional
regression (``stein_regression``) replaces ``E[g ζᵀ]`` by the least-squares
coefficients of ``g`` on the innovations, a control variate for the part of
``g`` linear in ``ζ``. The caveats (identifiability of ``Γ`` once the
innovation variances collapse, and why the observables are unaffected) are in
the module docstring of :mod:`dmftsolve.dynamics.dmft`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from dmftsolve.dynamics.response import StepMoments

__all__ = ["SteinResponse", "control_pairs", "label_controls"]


def label_controls(y: np.ndarray) -> np.ndarray:
    """The label functions of ``DMFTSettings.stein_controls``: ``f_1 ∝ y − ȳ`` and ``f_2 ∝``
    ``f_1²`` centred and made orthogonal to ``f_1``, each with mean 0 and mean square 1 over
    ``y`` (shape ``(K, n)``, ``K ≤ 2``; a function that vanishes is left out).

    Examples
    --------
    >>> import numpy as np
    >>> F = label_controls(np.array([0.0, 1.0, 4.0, 9.0]))
    >>> F.shape, np.allclose(F.mean(axis=1), 0), np.allclose(F @ F.T / 4, np.eye(2))
    ((2, 4), True, True)
    """
    y = np.asarray(y, dtype=float)
    n = y.size
    out = []
    f1 = y - y.mean()
    if f1 @ f1 > 1e-24 * n * max(1.0, float(np.max(np.abs(y))) ** 2):
        f1 = f1 / np.sqrt(f1 @ f1 / n)
        out.append(f1)
        f2 = f1**2 - (f1**2).mean()
        f2 = f2 - (f2 @ f1) / n * f1
        if f2 @ f2 > 1e-12 * n:
            out.append(f2 / np.sqrt(f2 @ f2 / n))
    return np.array(out).reshape(len(out), n)


def control_pairs(K: int) -> list[tuple[int, int]]:
    """The pairs ``(a, b)``, ``0 ≤ a ≤ b ≤ K``, whose products ``w_a w_b`` (``w_0 = 1``,
    ``w_k = f_k``) weigh the Gram of the regressors ``w_a ζ^u``, in the order the moments
    ``StepMoments.controls`` hold them.

    >>> control_pairs(1)
    [(0, 0), (0, 1), (1, 1)]
    """
    return [(a, b) for a in range(K + 1) for b in range(a, K + 1)]


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
    n_controls : int
        ``K``: with ``K > 0`` (``DMFTSettings.stein_controls``; needs ``regression`` and one
        pooled estimate) the regressors are ``w_a ζ^u`` for ``a = 0..K`` (``w_0 = 1``, ``w_k``
        the label functions of :func:`label_controls`), ordered ``(u, a)``; the coefficients
        of the ``ζ^u`` (``a = 0``) are the estimate. The Gram and the moments come in
        ``StepMoments.controls``.
    crossfit : bool
        ``DMFTSettings.stein_crossfit`` (needs ``regression`` and one pooled estimate): the
        regression's coefficients from each half of the columns correct the other half's
        moments (``StepMoments.halves``).
    """

    needs_D = False

    def __init__(self, *, n_batches: int, batch_size: int, steps: int, m: int, antithetic: bool,
                 regression: bool, p_ratio: float = 0.05, n_controls: int = 0,
                 crossfit: bool = False) -> None:
        B, nb = n_batches, batch_size
        self.crossfit = crossfit
        if crossfit and (n_controls or not regression or B != 1):
            raise ValueError(f"crossfit=True needs regression=True, n_controls=0 and one pooled estimate, "
                             f"got regression={regression!r}, n_controls={n_controls}, n_batches={B}")
        self.K1 = n_controls + 1
        if n_controls and not (regression and B == 1):
            raise ValueError(f"n_controls={n_controls} needs regression=True and one pooled estimate "
                             f"(n_batches=1), got regression={regression!r}, n_batches={B}")
        self.pair_index = np.zeros((self.K1, self.K1), dtype=int)
        for i, (a, b) in enumerate(control_pairs(n_controls)):
            self.pair_index[a, b] = self.pair_index[b, a] = i
        size = (steps + 1) * m * self.K1
        self.antithetic = antithetic
        self.p_ratio = p_ratio
        # index 0 = all paths, 1..B = batches; one batch (errors="none" pools the paths into
        # one) is its own mean, so it is estimated once and returned as both
        self.single = B == 1
        if crossfit:  # one Cholesky factor (and, in ``raw``, one Gram) per half of the columns
            n_est, n_eff = 2, [nb / 2, nb / 2]
            self.raw = np.zeros((2, size, size))
        else:
            n_est = 1 if self.single else B + 1
            n_eff = [B * nb] + [nb] * (n_est - 1)
        self.gram = np.zeros((n_est, size, size)) if regression else None
        self.active = np.ones(n_est, dtype=bool)
        self.n_eff = np.array(n_eff, dtype=float) / (2 if antithetic else 1)
        self.regressed = np.zeros(steps + 1, dtype=bool)

    @staticmethod
    def memory_bytes(*, n_paths: int, n_batches: int, steps: int, m: int, regression: bool,
                     n_controls: int = 0, crossfit: bool = False) -> int:
        """Bytes of the estimator's own store (the regression Gram factors, and with ``crossfit``
        the halves' Grams)."""
        size = (steps + 1) * m * (n_controls + 1)
        n_store = 4 if crossfit else (1 if n_batches == 1 else n_batches + 1)
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
        if self.crossfit:
            Sgz = self._crossfit(Sgz, step, k)
        elif self.gram is not None and self.K1 > 1:
            Sgz = self._controlled(Sgz, step, k)
        elif self.gram is not None:
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
            gam[:, nn] = sla.solve_triangular(L, rhs.T, lower=True, trans="T", check_finite=False).T
        gam = gam.reshape(rows, m, t1m)
        return (gam[0], gam) if single else (gam[0], gam[1:])

    def _gram_solve(self, i: int, k: int, S: np.ndarray) -> np.ndarray:
        """``S G⁻¹`` for estimate ``i``'s Gram ``G = C Cᵀ`` on its first ``k`` regressors (``S``
        of shape ``(rows, k)``): the least-squares coefficients, by two triangular solves with
        the stored factor."""
        assert self.gram is not None
        C = self.gram[i, :k, :k]
        w = sla.solve_triangular(C, S.T, lower=True, check_finite=False)
        return sla.solve_triangular(C, w, lower=True, trans="T", check_finite=False).T

    def _controlled(self, Sgz: np.ndarray, step: StepMoments, k: int) -> np.ndarray:
        """``Sgz`` (``(1, m, k)``, the plain moments on the ``k`` non-null innovations) replaced
        by the coefficients of the ``ζ^u`` in the regression of ``g`` on every ``w_a ζ^u``
        (``n_controls``), while that regression is active."""
        assert self.gram is not None and step.controls is not None
        K1 = self.K1
        gw, zw = step.controls  # (K, m, k), (P, nk, k)
        nk = zw.shape[1]
        # the new regressors (one per new innovation j and weight a) against all: (j, a) x (u, b)
        rows = zw[self.pair_index]  # (K1, K1, nk, k): [a, b, j, u]
        rows = rows.transpose(2, 0, 3, 1).reshape(nk * K1, k * K1)
        self._extend_gram(rows[None], (k - nk) * K1, nk * K1)
        if self.active[0]:
            m = Sgz.shape[1]
            S = np.empty((m, k, K1))
            S[:, :, 0] = Sgz[0]
            S[:, :, 1:] = gw.transpose(1, 2, 0)
            beta = self._gram_solve(0, k * K1, S.reshape(m, k * K1))
            Sgz = beta.reshape(1, m, k, K1)[..., 0].copy()
        self.regressed[step.t] = bool(self.active[0])
        return Sgz

    def _crossfit(self, Sgz: np.ndarray, step: StepMoments, k: int) -> np.ndarray:
        """``Sgz`` (``(1, m, k)``, the pooled moments on the ``k`` non-null innovations) replaced,
        while both halves regress, by ``½ Σ_h [S_h − β_{h'} (G_h − I)]`` with ``S_h, G_h`` half
        ``h``'s moments and Gram and ``β_{h'} = S_{h'} G_{h'}⁻¹`` the other half's coefficients."""
        assert self.gram is not None and step.halves is not None
        m = Sgz.shape[1]
        keep = np.flatnonzero(~step.null)
        nk = keep.size
        S = np.stack([h[:m] for h in step.halves])  # (2, m, k)
        rows = np.stack([h[m:][keep] for h in step.halves])  # (2, nk, k)
        self._extend_gram(rows, k - nk, nk)
        for i in range(2):  # the Grams themselves, for the correction
            self.raw[i, k - nk:k, :k] = rows[i]
            self.raw[i, :k, k - nk:k] = rows[i].T
        if self.active.all():
            beta = [self._gram_solve(i, k, S[i]) for i in range(2)]
            eye = np.eye(k)
            est = [S[i] - beta[1 - i] @ (self.raw[i, :k, :k] - eye) for i in range(2)]
            Sgz = ((est[0] + est[1]) / 2)[None]
        self.regressed[step.t] = bool(self.active.all())
        return Sgz

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
                Crow = sla.solve_triangular(self.gram[i, :k, :k], row[:, :k].T, lower=True,
                                            check_finite=False).T
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
