"""How much of the Stein Q bias comes from the same-step quadratic kernel terms.

The parameter-side update of :mod:`dmftsolve.dynamics.dmft` is
``Q(t+1,t+1) = Q − η(F + Fᵀ) + η² E[φφᵀ]`` with
``E[φφᵀ] = Cν + N Γ̃ᵀ + Γ̃ Nᵀ + Γ̃ Q Γ̃ᵀ``. The terms quadratic in same-step estimates carry an
upward bias equal to the estimation variance of the pooled estimate, which the ``B`` batch
estimates of a solve with ``errors="batch"`` measure:
``Σ_b (Γ_b − Γ̄) Q (Γ_b − Γ̄)ᵀ / (B(B − 1))`` and the same for the cross term. This script wraps
``_Run._advance`` (a private method: a diagnostic, not an API) to accumulate ``η²`` times those
two estimates along a restricted solve, and prints them beside ``Q(t,t)`` from 2·10⁴ and
8·10⁴ paths. Setting: GeLU, ``y = z² − 1``, η = 0.5, δ = 7, hard direction held at zero,
reflection-paired paths, seed 1.

Run: ``OMP_NUM_THREADS=1 python validation/investigations/stein_bias_terms.py`` (about 15 s).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import dmftsolve.dynamics.dmft as dm
from dmftsolve import Problem

TIMES = (25, 50, 100)


def main() -> dict[str, Any]:
    acc = {"gqg": 0.0, "ng": 0.0}
    rows: dict[int, tuple[float, float]] = {}
    orig = dm._Run._advance

    def advance(self: Any, t: int, Gam: np.ndarray, Gam_b: np.ndarray, Cn_b: np.ndarray,
                EVg_b: np.ndarray, g_b: np.ndarray, *rest: Any) -> bool:
        m, eta = self.m, self.eta
        tm, t1m = t * m, (t + 1) * m
        Q = self.Qb[:t1m, :t1m]
        Cs = np.concatenate([Cn_b.mean(axis=0)[None], Cn_b])
        Nrow = -eta * (Cs[:, :, :tm] @ self.Rb[:t1m, m:t1m].T)
        dG, dN = Gam_b - Gam[None], Nrow[1:] - Nrow[0]
        B = dG.shape[0]
        acc["gqg"] += eta**2 * np.einsum("bi,ij,bj->", dG[:, 0], Q, dG[:, 0]) / (B * (B - 1))
        acc["ng"] += eta**2 * 2 * np.einsum("bi,bi->", dN[:, 0], dG[:, 0]) / (B * (B - 1))
        if t in TIMES:
            rows[t] = (acc["gqg"], acc["ng"])
        return orig(self, t, Gam, Gam_b, Cn_b, EVg_b, g_b, *rest)

    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=max(TIMES), hold_zero=[0])
    dm._Run._advance = advance
    try:
        q20 = dm.solve_dmft(p, 7.0, n_paths=20_000, seed=1, reflect=(0,), errors="batch",
                            test_loss="none").q_diag[:, 0, 0]
    finally:
        dm._Run._advance = orig
    q80 = dm.solve_dmft(p, 7.0, n_paths=80_000, seed=1, reflect=(0,), errors="batch",
                        test_loss="none").q_diag[:, 0, 0]
    print("| t | Q(t,t), 2e4 paths | 8e4 paths | 1/N bias at 2e4 (4/3 × difference) | "
          "η²·(ΓQΓ term) | η²·(NΓ terms) | share of the bias |")
    print("|---|---|---|---|---|---|---|")
    out = {}
    for t in TIMES:
        bias = 4 / 3 * (q20[t] - q80[t])
        g, n = rows[t]
        out[t] = {"q20": q20[t], "q80": q80[t], "bias": bias, "gqg": g, "ng": n}
        print(f"| {t} | {q20[t]:.4f} | {q80[t]:.4f} | {bias:.3f} | {g:.4f} | {n:.4f} | "
              f"{(g + n) / bias:.0%} |")
    return out


if __name__ == "__main__":
    main()
