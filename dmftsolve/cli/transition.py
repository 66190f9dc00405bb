"""``dmftsolve transition``: GD's predicted success curve over δ at finite d, and δ_50 (issue 9)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from dmftsolve.cli._common import (
    CommandError,
    add_output_arguments,
    add_problem_arguments,
    emit,
    floats,
    format_table,
    positive_int,
    problem_from_args,
)

DESCRIPTION = """\
Predict the probability that full-batch GD from a random start learns the hard
direction (cosine with the target above 1/2 by step T) at input dimension d, over
a list of sample ratios delta = n/d, and its 50 % point delta_50 with a standard
error. This is the number to compare with experiments at finite d; the long-time
delta_NN of `dmftsolve threshold` is a different quantity (a Hessian threshold of
the d -> infinity restricted dynamics) and lies well above GD's transition at
d = 500-4000.

How: each draw is one unrestricted DMFT run started at the overlap M_0 = m_0/sqrt(d)
of a random start (m_0 stratified over N(0, q0)). With the default construction
"forced" its kernels use --paths Monte Carlo paths paired by reflection z -> -z, and
its overlap update is driven by GD's finite-n gradient along the target: the paths
reweighted by quenched bootstrap weights of n = delta*d samples, which carries the
gradient noise of n samples (covariance (1/n) E[z^2 g^t g^s]) and the finite-n
curvature along the target (dmftsolve.thresholds.finite_d_transition). The success
probability is the fraction of draws that escape by step T; delta_50 is the
maximum-likelihood probit fit over all draws, +- its bootstrap standard error.
Other constructions (--construction): "quenched" (GD's gradient over n quenched label
samples, kernels over copies of them), "finite_n" (N = n unpaired paths, kernels
included: wider curves), "initial" (the random initial overlap only: the difference
shows what the O(1/sqrt(d)) finite-n effects contribute).

The paths' own noise: the reflection pairs cancel it in the force, but not in the
curvature along the target. With independent (--force-weights poisson) weights a
draw's quenched curvature noise has variance about 1/n + 2/N against GD's 1/n (N
kernel paths, n = delta*d samples); the default paired weights top the paths' own
2/N up to exactly 1/n, which needs N >= 2n. Above that (large d), the excess
2n/N - 1 remains (the JSON's per-point diagnostics give it as curvature_excess);
at d = 4000, removing an excess of 2.4-5.8 lowered delta_50 by 0.4-0.7, onto GD's. A warning is
printed when it exceeds 1 at some delta: --paths-per-sample 2 removes it, at a
cost that grows with n.

Cost: one DMFT run of T steps with --paths paths per draw, independent of d for
"forced" at fixed --paths: measured about 5-15 s per draw with 2e4 paths, T = 400
(GeLU, one core, 5 s unloaded), so the default (6 deltas x 16 draws) takes about
10-25 CPU-minutes, spread over --workers processes; the cost grows linearly with
the number of paths. Use --draws and --steps to trade accuracy for time.

Single neuron (m = 1) with one target direction (k = 1), label even in z, random
start; no bias or ridge.

--sim FILE.json overlays simulator points in the table and the plot: a JSON object
{"deltas": [...], "successes": [...], "trials": [...]} (e.g. from `dmftsolve
simulate` runs); their probit delta_50 is printed beside the theory's.

Example:
  dmftsolve transition --target "z**2 - 1" --d 1000 --delta 5.5,6,6.5,7,7.5,8.5 --draws 16
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("transition", help="predicted GD success curve over delta at finite d, "
                                                 "and delta_50", description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(p, eta=0.5, steps=400, target="z**2 - 1")
    g = p.add_argument_group("transition")
    g.add_argument("--d", type=positive_int("--d", 10**7), default=2000,
                   help="input dimension d (default: %(default)s)")
    g.add_argument("--delta", type=floats, default=[6.0, 6.5, 7.0, 7.5, 8.0, 9.0],
                   help="comma-separated sample ratios (default: 6,6.5,7,7.5,8,9)")
    g.add_argument("--draws", type=positive_int("--draws", 10**5), default=16,
                   help="DMFT draws per delta (default: %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="root seed (default: %(default)s)")
    g.add_argument("--construction", choices=("forced", "quenched", "finite_n", "initial"), default="forced",
                   help="how a draw carries GD's finite-n sources (see above; default: %(default)s)")
    g.add_argument("--paths", type=positive_int("--paths", 10**7), default=20_000,
                   help="kernel paths of the forced and initial constructions (default: %(default)s)")
    g.add_argument("--paths-per-sample", type=float, default=None,
                   help="forced / initial: use round(X * n) kernel paths at each delta (n = delta*d) "
                        "instead of --paths, so the paths' own noise shrinks with GD's (default: off)")
    g.add_argument("--force-weights", choices=("paired", "poisson"), default="paired",
                   help="forced: the weights of the force; 'paired' gives the curvature along the "
                        "target GD's noise when there are at least 2n paths, 'poisson' adds the "
                        "paths' own (see above; default: %(default)s)")
    g.add_argument("--workers", type=positive_int("--workers", 256), default=None,
                   help="processes for the draws (default: the CPUs this process may use)")
    g.add_argument("--plot", type=Path, default=None, help="write the curve to this image file")
    g.add_argument("--sim", type=Path, default=None,
                   help="JSON of simulator success counts to show beside the theory (see above)")
    g.add_argument("--progress", action="store_true", help="one line per delta on stderr")
    add_output_arguments(p)
    p.set_defaults(func=run)


def _load_sim(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        sim = json.loads(path.read_text())
        out = {k: [float(v) for v in sim[k]] for k in ("deltas", "successes", "trials")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"--sim {path}: expected JSON with deltas, successes, trials ({exc})", 2) from None
    if not len(out["deltas"]) == len(out["successes"]) == len(out["trials"]):
        raise CommandError(f"--sim {path}: deltas, successes and trials differ in length", 2)
    return out


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from dmftsolve.thresholds.finite_d_transition import TransitionSettings, probit_fit, transition

    if args.plot is not None:  # shared check (cli/_common): directory, writability, format
        from dmftsolve.cli._common import check_output_path

        args.plot = Path(check_output_path(str(args.plot)))
    if args.M0 is not None or args.Q0 is not None or args.hold_zero:
        raise ValueError("--M0, --Q0 and --hold-zero do not apply: each draw starts from a random "
                         f"overlap m_0/sqrt(d) (got --M0 {args.M0}, --Q0 {args.Q0}, "
                         f"--hold-zero {args.hold_zero})")
    sim = _load_sim(args.sim)
    problem = problem_from_args(args)
    if args.paths < 40:
        raise ValueError(f"--paths must be at least 40, got {args.paths}")
    workers = args.workers
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if args.paths_per_sample is not None and not 0 < args.paths_per_sample <= 1000:
        raise ValueError(f"--paths-per-sample must be in (0, 1000], got {args.paths_per_sample}")
    s = TransitionSettings(draws=args.draws, seed=args.seed, construction=args.construction,
                           n_paths=args.paths, workers=workers, paths_per_sample=args.paths_per_sample,
                           force_weights=args.force_weights)
    c = transition(problem, args.d, args.delta, settings=s, throw=False, progress=args.progress)
    sim_fit = None
    if sim is not None:
        sim_fit = probit_fit(np.array(sim["deltas"]), np.array(sim["successes"]), np.array(sim["trials"]))
    if args.plot is not None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        ax.errorbar(c.deltas, c.p, c.p_err, fmt="o-", capsize=2, label=f"theory ({args.construction})")
        if sim is not None:
            k, n = np.array(sim["successes"]), np.array(sim["trials"])
            pg = k / n
            ax.errorbar(sim["deltas"], pg, np.sqrt(np.maximum(pg * (1 - pg), 0.25 / n) / n), fmt="s--",
                        capsize=2, label="simulator")
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set_xlabel("δ = n/d")
        ax.set_ylabel("P(success)")
        ax.set_title(f"d = {args.d}, δ_50 = {c.delta_50:.2f} ± {c.delta_50_err:.2f}", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        plt.close(fig)
    payload = {"result": c.to_dict(), "simulator": sim,
               "simulator_delta_50": None if sim_fit is None else {"delta_50": sim_fit[0], "err": sim_fit[1]}}

    def table() -> str:
        rows = [[f"{x:g}", f"{k}/{n}", f"{p:.2f} ± {e:.2f}"]
                for x, k, n, p, e in zip(c.deltas, c.successes, c.draws, c.p, c.p_err, strict=True)]
        out = [f"GD success probability at d = {args.d}, T = {problem.training.steps} "
               f"(construction {args.construction}, {args.draws} draws per δ)",
               format_table(["delta", "escapes", "P(success)"], rows)]
        if sim_fit is not None:
            out.append(f"simulator delta_50 = {sim_fit[0]:.2f} ± {sim_fit[1]:.2f} (probit fit)")
        if math.isfinite(c.delta_50):
            out.append(f"delta_50 = {c.delta_50:.2f} ± {c.delta_50_err:.2f}  (probit width {c.width:.2f})")
        else:
            out.append(f"delta_50: {c.message}")
        return "\n".join(out)

    emit(args, payload, table)
    for w in c.warnings:  # also in the JSON (result.warnings)
        print(f"warning: {w}", file=sys.stderr)
    if not c.ok:
        raise CommandError(f"{c.status.value}: {c.message}")
    return 0
