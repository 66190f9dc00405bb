"""Is GD's long-time limit the TTI fixed point of the DMFT? (docs/findings.md)

Runs plain full-batch GD (hard direction held at zero) to near convergence at
finite d, then tests the time-translation-invariant structure of
``dmftsolve.dynamics.fixed_point``: there must be one κ with ``κ E[D/(1 + κD)] = 1/δ``
and ``1 + κD > 0`` on every sample, and ``u = V + κ g`` must be Gaussian with
variance ``Q = ‖w‖²``. It also reports how often GD's per-sample root of
``V + κ g(y, V) = u`` differs from the global minimiser of the proximal
objective. Writes ``validation/investigations/results/gd_limit_structure.md``.

Usage: python3 validation/investigations/gd_limit_structure.py   (about 2 minutes on 2 cores)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dmftsolve import Problem
from dmftsolve.dynamics.fixed_point import solve_fixed_point

CASES = [("gelu", 4.0, 0.5, 3000), ("quad", 4.0, 0.05, 6000)]
D_DIM = 1000


def run(activation: str, delta: float, eta: float, steps: int, seed: int = 0) -> dict[str, float]:
    p = Problem.build(target="z**2", activation=activation, eta=eta, hold_zero=[0])
    rng = np.random.default_rng(seed)
    n = int(delta * D_DIM)
    X = rng.standard_normal((n, D_DIM))
    y = p.labels(X[:, :1])
    w = rng.standard_normal((D_DIM, 1)) / np.sqrt(D_DIM)
    w[0] = 0.0
    for _ in range(steps):
        w -= eta * X.T @ p.grad(y, X @ w) / n
        w[0] = 0.0
    V = X @ w
    g, D = p.grad(y, V)[:, 0], p.hess(y, V)[:, 0, 0]
    # the largest κ keeping 1 + κD > 0 on every sample, and the TTI residual there
    kmax = -1.0 / D.min() if D.min() < 0 else np.inf
    ks = np.linspace(1e-3, min(kmax, 10.0) * (1 - 1e-9), 4000)
    resid = ks * (D[None, :] / (1 + ks[:, None] * D[None, :])).mean(axis=1) - 1 / delta
    u = V[:, 0] + ks[-1] * g
    grid = np.linspace(-12, 12, 2401)
    obj = ks[-1] * p.loss(y[:, None], p.network.sigma(grid)[None, :]) + (grid[None, :] - u[:, None]) ** 2 / 2
    v_glob = grid[np.argmin(obj, axis=1)]
    fp = solve_fixed_point(p, delta)
    return {
        "grad_norm": float(np.linalg.norm(X.T @ g / n)),
        "Q_gd": float(w[:, 0] @ w[:, 0]), "train_gd": float(p.loss_value(y, V).mean()),
        "kappa_marginal": float(ks[-1]), "tti_residual_max_over_stable_kappa": float(resid.max()),
        "u_var": float(u.var()), "u_kurtosis": float(np.mean((u - u.mean()) ** 4) / u.var() ** 2),
        "frac_root_not_global": float(np.mean(np.abs(v_glob - V[:, 0]) > 0.05)),
        "Q_fixed_point": float(fp.Q[0, 0]), "kappa_fixed_point": float(fp.kappa[0, 0]),
        "train_fixed_point": float(fp.train_loss),
    }


def main() -> None:
    lines = ["# GD's long-time limit vs the TTI fixed point", "",
             f"Plain GD, y = z², hard direction held at zero, d = {D_DIM}, seed 0.", "",
             "| σ | δ | η | steps | ‖∇L‖ | Q (GD) | train (GD) | κ at marginality | max TTI residual "
             "over stable κ | Var u | kurtosis u | GD root ≠ global | Q (fixed pt) | κ (fixed pt) "
             "| train (fixed pt) |", "|" + "---|" * 15]
    for act, delta, eta, steps in CASES:
        r = run(act, delta, eta, steps)
        lines.append(f"| {act} | {delta} | {eta} | {steps} | {r['grad_norm']:.2g} | {r['Q_gd']:.3f} | "
                     f"{r['train_gd']:.3f} | {r['kappa_marginal']:.3f} | "
                     f"{r['tti_residual_max_over_stable_kappa']:.3g} | {r['u_var']:.3f} | "
                     f"{r['u_kurtosis']:.2f} | {r['frac_root_not_global']:.3%} | {r['Q_fixed_point']:.3f} | "
                     f"{r['kappa_fixed_point']:.3f} | {r['train_fixed_point']:.3f} |")
        print(lines[-1], flush=True)
    out = Path(__file__).resolve().parent / "results" / "gd_limit_structure.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
