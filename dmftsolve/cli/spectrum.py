"""``dmftsolve spectrum``: bulk Hessian spectrum and hard outliers at a time t (THEORY.md §3–4)."""

from __future__ import annotations

import argparse

import numpy as np

from dmftsolve.cli._common import (
    add_output_arguments,
    add_problem_arguments,
    emit,
    format_table,
    problem_from_args,
)
from dmftsolve.hessian.outlier_equation import outliers, training_outliers
from dmftsolve.hessian.spectrum import bulk_spectrum

DESCRIPTION = """\
The spectrum of the Hessian of the empirical risk after t GD steps, in the limit
n, d -> infinity with n/d = delta: the bulk density (matrix Stieltjes equation,
law of D from the DMFT samples at step t), its edges and atoms, and the outliers
along the hard target directions (held at zero overlap) with the squared overlap
of their eigenvectors with the hard subspace. It also lists the outliers on
both sides of the bulk along span(target) + span(W_t) (the learned
directions), with each eigenvector's squared overlap split into hard, other
target and learned parts (exact at t = 0, a tested conjecture for t > 0; see
validation/learned_outliers_vs_simulation.py).

When the law of D is unbounded below (square loss with an unbounded label, e.g.
y = z**2 early in training) the bulk has no finite left edge: this is said, and
no edge is printed.

Example:
  dmftsolve spectrum --target 'Min(z**2, 3)' --activation quad --eta 0.05 --delta 3 --t 2
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("spectrum", help="Hessian bulk spectrum and hard outliers at step t",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(p)
    g = p.add_argument_group("spectrum")
    g.add_argument("--delta", type=float, required=True, help="sample ratio n/d")
    g.add_argument("--t", type=int, default=0, help="GD step (default: %(default)s)")
    g.add_argument("--paths", type=int, default=40_000, help="DMFT Monte Carlo paths (default: %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="DMFT seed (default: %(default)s)")
    g.add_argument("--points", type=int, default=200, help="density grid points (default: %(default)s)")
    g.add_argument("--plot", metavar="FILE", default=None, help="write the density to a PNG (matplotlib)")
    add_output_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dmftsolve.dynamics.dmft import solve_dmft
    from dmftsolve.thresholds.hessian_threshold import restricted

    problem = problem_from_args(args)
    prob, hard = restricted(problem)
    res = solve_dmft(prob, args.delta, n_paths=args.paths, seed=args.seed, steps=args.t,
                     keep_samples_at=(args.t,), errors="batch")
    s = res.samples(args.t)
    lam = prob.training.lam
    bulk = bulk_spectrum(s["D"], args.delta, lam=lam, npoints=args.points, throw=False)
    hard_out = outliers(s["D"], s["Vstar"][:, list(hard)], args.delta, lam=lam, throw=False)
    # the learned coordinates are W_tᵀx: remove the (trained) bias from the pre-activations
    learned = training_outliers(s["D"], s["Vstar"], s["V"] - res.b[args.t], res.M[args.t],
                                res.Q[args.t, args.t], args.delta, hard=hard, lam=lam, throw=False)
    payload = {"problem": prob.to_dict(), "delta": args.delta, "t": args.t, "hard": list(hard),
               "bulk": bulk.to_dict(), "outliers": hard_out.to_dict()
               | {"outliers": [o.to_dict() for o in hard_out.outliers]},
               "training_outliers": learned.to_dict()
               | {"outliers": [o.to_dict() for o in learned.outliers]}}

    def table() -> str:
        le = "none (law of D unbounded below)" if bulk.left_edge is None else f"{bulk.left_edge:.6g}"
        re_ = "none (law of D unbounded above)" if bulk.right_edge is None else f"{bulk.right_edge:.6g}"
        rows = [["left edge", le], ["right edge", re_],
                ["atoms", ", ".join(f"{x:.4g} (mass {w:.3g})" for x, w in bulk.atoms) or "none"],
                ["bulk status", f"{bulk.status.value} {bulk.message}".strip()]]
        out = [f"dmftsolve spectrum: {prob.describe()}, δ={args.delta}, t={args.t}", "",
               format_table(["quantity", "value"], rows), "", "hard outliers"]
        orows = [[o.location, o.overlap2] for o in hard_out.outliers]
        out.append(format_table(["location", "overlap² with hard subspace"], orows) if orows else
                   f"none ({hard_out.status.value}{': ' + hard_out.message if hard_out.message else ''})")
        out += ["", "outliers along span(target) + span(W_t)"]
        lrows = [[o.side, o.location, o.parts["hard"], o.parts["target"], o.parts["learned"]]
                 for o in learned.outliers]
        out.append(format_table(["side", "location", "overlap² hard", "other target", "learned"], lrows)
                   if lrows else "none")
        if learned.message and learned.message != "no outliers":
            out.append(f"({learned.status.value}: {learned.message})")
        x, rho = np.asarray(bulk.x), np.asarray(bulk.density)
        if x.size:
            idx = np.linspace(0, x.size - 1, min(12, x.size)).astype(int)
            out += ["", "density (coarse)", format_table(["x", "density"], [[x[i], rho[i]] for i in idx])]
        return "\n".join(out)

    emit(args, payload, table)
    if args.plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ValueError("--plot needs matplotlib: pip install 'dmftsolve[plot]'") from None
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(bulk.x, bulk.density, label="bulk density")
        for o in hard_out.outliers:
            ax.axvline(o.location, color="C3", ls="--", label=f"hard outlier (overlap² {o.overlap2:.2f})")
        ax.set_xlabel("eigenvalue")
        ax.set_title(f"Hessian spectrum, δ={args.delta}, t={args.t}")
        ax.legend()
        fig.savefig(args.plot, dpi=100, bbox_inches="tight")
    return 0 if bulk.ok or bulk.left_edge is None else 1
