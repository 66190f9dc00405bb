"""``dmftsolve threshold``: the feature-learning threshold δ_NN (THEORY.md §5)."""

from __future__ import annotations

import argparse

from dmftsolve.cli._common import (
    add_output_arguments,
    add_problem_arguments,
    emit,
    format_table,
    problem_from_args,
)
from dmftsolve.thresholds.hessian_threshold import ThresholdSettings, delta_nn

DESCRIPTION = """\
Compute delta_NN: the smallest sample ratio delta = n/d at which the Hessian of
the empirical risk, along GD with the hard target directions held at zero
overlap, has a negative outlier eigenvalue whose eigenvector overlaps the hard
subspace (GD then escapes along it and learns the hard directions). The
easy/hard split comes from the target. Each delta evaluated re-runs the DMFT;
the threshold is bracketed on a geometric grid, then bisected, and both ends
of the final bracket are evaluated. delta_alg is printed beside it.

--t N        delta_NN(N), the Hessian after N GD steps;
--t long     (default) the long-time rule: delta_NN(T) and delta_NN(T/2) with
             T = --long-time; status not_converged if the brackets disagree;
--t tti      the time-translation-invariant fixed point (fast; valid only where
             GD reaches the fixed point's proximal branch, see docs/findings.md).

The Monte Carlo error of delta_NN is measured, not guessed: --replicates R
repeats the whole search with DMFT seeds seed, seed+1, ..., and prints the
mean of the R bracket midpoints with its standard error (the bisection bracket
of one seed is much narrower than the seed-to-seed spread).

With no options this computes the paper's headline case, a GeLU single neuron
on y = z**2, with 3 replicates (about 45 s on 2 cores).

Example:
  dmftsolve threshold --activation quad --eta 0.05 --t 100 --bracket 2,30
"""


def _time(text: str) -> int | str | None:
    if text == "long":
        return None
    if text == "tti":
        return "tti"
    try:
        t = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a step, 'long' or 'tti', got {text!r}") from None
    if t < 0:
        raise argparse.ArgumentTypeError(f"a step must be >= 0, got {t}")
    return t


def _pair(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'low,high', got {text!r}") from None
    return lo, hi


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("threshold", help="feature-learning threshold delta_NN (and delta_alg)",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(p, eta=0.5)
    g = p.add_argument_group("threshold search")
    g.add_argument("--t", type=_time, default=None, metavar="{N,long,tti}",
                   help="time at which the Hessian is taken (default: long)")
    g.add_argument("--long-time", type=int, default=200,
                   help="T of the long-time rule, in GD steps (default: %(default)s)")
    g.add_argument("--criterion", choices=("negative", "separated"), default="negative",
                   help="negative: a negative hard outlier; separated: any hard outlier below the "
                        "bulk, the BBP point (default: %(default)s)")
    g.add_argument("--bracket", type=_pair, default=(2.0, 40.0),
                   help="range of delta searched, 'low,high' (default: 2,40)")
    g.add_argument("--grid", type=int, default=6, help="initial grid points (default: %(default)s)")
    g.add_argument("--xtol", type=float, default=0.25,
                   help="width of the final bracket in delta (default: %(default)s)")
    g.add_argument("--paths", type=int, default=10_000,
                   help="Monte Carlo paths per DMFT run (default: %(default)s)")
    g.add_argument("--seed", type=int, default=0,
                   help="DMFT seed of the first replicate (default: %(default)s)")
    g.add_argument("--replicates", type=int, default=3,
                   help="independent searches (seeds seed, seed+1, ...) for the standard error "
                        "(default: %(default)s)")
    g.add_argument("--tails", choices=("sample", "strict"), default="sample",
                   help="unbounded law of D at finite t: use the sample law (sample) or fail (strict)")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="one line per evaluation on stderr (default: on)")
    add_output_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    settings = ThresholdSettings(criterion=args.criterion, bracket=args.bracket, grid=args.grid,
                                 xtol=args.xtol, n_paths=args.paths, seed=args.seed,
                                 long_time=args.long_time, tails=args.tails, replicates=args.replicates)
    res = delta_nn(problem, args.t, settings=settings, progress=args.progress and not args.json,
                   throw=False)

    def table() -> str:
        t = {None: f"long-time rule (T={args.long_time})", "tti": "TTI fixed point"}.get(res.t, res.t)
        lines = [f"dmftsolve threshold: {problem.describe()}", f"hard directions: {list(res.hard)}; t: {t}",
                 ""]
        rows = [["delta_NN", res.delta_nn],
                ["standard error", "unknown (one replicate)" if res.stderr is None else res.stderr],
                ["bracket" if len(res.replicates) < 2 else "hull of the replicate brackets",
                 None if res.bracket is None else f"[{res.bracket[0]:.4g}, {res.bracket[1]:.4g}]"],
                ["delta_alg", res.delta_alg], ["status", res.status.value],
                ["evaluations", res.diagnostics["evaluations"]], ["elapsed [s]", round(res.elapsed, 1)]]
        lines.append(format_table(["quantity", "value"], rows))
        lines += ["", res.message, "", "evaluations"]
        ev = [[e["seed"], e["delta"], e["t"], e["has_outlier"],
               ", ".join(f"{o['location']:.4g} ({o['overlap2']:.2f})" for o in e["outliers"]) or "-",
               e["left_edge"], e["status"]] for e in res.evaluations]
        heads = ["seed", "delta", "t", "outlier", "outliers (overlap²)", "left edge", "status"]
        lines.append(format_table(heads, ev))
        return "\n".join(lines)

    emit(args, res.to_dict(), table)
    return 0 if res.ok else 1
