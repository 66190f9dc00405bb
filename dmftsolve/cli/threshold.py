"""``dmftsolve threshold``: the feature-learning threshold δ_NN (docs/theory.md §5)."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from dmftsolve.cli._common import (
    CommandError,
    add_output_arguments,
    add_problem_arguments,
    add_progress_argument,
    add_seed_argument,
    check_cost,
    clip,
    command_parser,
    dmft_cost,
    emit,
    finite_float,
    format_pm,
    format_table,
    given,
    null_rtol,
    positive_int,
    problem_from_args,
    want_progress,
    warn,
)

DESCRIPTION = """\
Compute delta_NN, the smallest delta = n/d at which the Hessian of the
empirical risk along GD with the hard target directions held at zero overlap
has a negative outlier whose eigenvector overlaps them (GD then escapes along
it). The Hessian is taken after --t steps, or by the long-time rule at
--long-time and half of it. Each delta tried runs the DMFT; a grid brackets the
threshold and bisection narrows it; --replicates searches with seeds seed,
seed+1, ... give its standard error. delta_alg is printed beside it. This is
the d -> infinity threshold; GD's 50 % point at a finite d is `dmftsolve
transition`.
"""

EXAMPLES = """\
dmftsolve threshold
dmftsolve threshold --activation quad --t 100 --bracket 2,30
dmftsolve threshold --t 50 --replicates 5 --json > threshold.json
"""


def _time(text: str) -> int | str | None:
    if text == "long":
        return None
    if text == "tti":
        return "tti"
    try:
        t = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a step, 'long' or 'tti', got {clip(text)}") from None
    if t < 0:
        raise argparse.ArgumentTypeError(f"a step must be >= 0, got {t}")
    if t > MAX_STEPS:
        raise argparse.ArgumentTypeError(f"a step must be <= {MAX_STEPS}, got {clip(t)}")
    return t


def _pair(text: str) -> tuple[float, float]:
    try:
        lo, hi = (finite_float(v) for v in text.split(","))
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"expected 'low,high' (two finite numbers), got {clip(text)}") from None
    if not 0 < lo < hi:
        raise argparse.ArgumentTypeError(f"expected 0 < low < high, got {clip(text)}")
    return lo, hi


#: Largest GD step the command accepts for --t and --long-time (the DMFT stores
#: (T+1)²-sized kernels; 20000 steps is about 30 GiB, and takes days).
MAX_STEPS = 20_000


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command_parser(subparsers, "threshold", "feature-learning threshold delta_NN (and delta_alg)",
                       DESCRIPTION, EXAMPLES)
    # the time of the Hessian is --t / --long-time; a --steps given is said to be ignored (run)
    add_problem_arguments(p, steps_help="ignored: the Hessian is at --t or --long-time")
    g = p.add_argument_group("threshold search")
    g.add_argument("--t", type=_time, default=None, metavar="{N,long,tti}",
                   help="step N, long-time rule or TTI fixed point (default: long)")
    g.add_argument("--long-time", type=positive_int("--long-time", MAX_STEPS), default=200, metavar="T",
                   help="T of the long-time rule (default: %(default)s)")
    g.add_argument("--criterion", choices=("negative", "separated"), default="negative", metavar="NAME",
                   help="negative or separated outlier (default: %(default)s)")
    g.add_argument("--bracket", type=_pair, default=(2.0, 40.0), metavar="LO,HI",
                   help="range of delta searched (default: 2,40)")
    g.add_argument("--grid", type=positive_int("--grid", 1000), default=6, metavar="N",
                   help="initial grid points, >= 2 (default: %(default)s)")
    g.add_argument("--xtol", type=finite_float, default=1.0, metavar="X",
                   help="width of the final bracket (default: %(default)s)")
    g.add_argument("--paths", type=positive_int("--paths", 10**8), default=10_000, metavar="N",
                   help="Monte Carlo paths per DMFT run (default: %(default)s)")
    add_seed_argument(g, "seed of the first replicate")
    g.add_argument("--replicates", type=positive_int("--replicates", 1000), default=3, metavar="N",
                   help="searches, for the standard error (default: %(default)s)")
    g.add_argument("--null-rtol", type=null_rtol, default=None, metavar="X",
                   help="innovation cut-off (default: 1e-4; m >= 2, long: 1e-3)")
    g.add_argument("--tails", choices=("sample", "strict"), default="sample", metavar="NAME",
                   help="unbounded law of D: sample or strict (default: %(default)s)")
    add_progress_argument(g)
    g.add_argument("--verbose", action="store_true", help="also the table of every evaluation")
    add_output_arguments(p)
    p.set_defaults(func=run)


_TUPLE = re.compile(r"\((-?[0-9][0-9.e+-]*), (-?[0-9][0-9.e+-]*)\)")


def _split(message: str) -> list[str]:
    """``message`` split at the top-level '; ' (not inside brackets)."""
    parts, depth, cur = [], 0, ""
    for i, ch in enumerate(message):
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == ";" and depth == 0 and message[i + 1:i + 2] == " ":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p]


def _tidy(text: str) -> str:
    """Brackets printed as ``[a, b]`` (4 significant digits), never as a Python tuple or None."""
    text = _TUPLE.sub(lambda mt: f"[{float(mt.group(1)):.4g}, {float(mt.group(2)):.4g}]", text)
    return text.replace("the bracket is None", "there is no bracket (no threshold in the range)")


def _notes(res: Any) -> list[str]:
    """The search's message as consistent lines.

    With replicates the time rule is applied to the means; the first replicate's own
    single-seed time rule (which can disagree with it on Monte Carlo noise alone) is
    dropped here and shown per replicate in the replicate table instead.
    """
    message = _tidy(res.message)
    if len(res.replicates) > 1 and "; first replicate: " in message:
        combined, first = message.split("; first replicate: ", 1)
        lines = _split(combined)
        seed = res.replicates[0]["seed"]
        lines += [f"seed {seed}: {p}" for p in _split(first) if p.startswith("warning")]
    else:
        lines = _split(message)
    # the answer is printed once, last (_answer): not again as the search's first note
    lines = [ln for ln in lines if not ln.startswith("δ_NN = ")]
    for w in getattr(res, "warnings", None) or ():
        w = _tidy(str(w))
        w = w if w.startswith("warning") else f"warning: {w}"
        if w not in lines:
            lines.append(w)
    return lines


def _bracket(br: Any) -> str:
    return "-" if br is None else f"[{br[0]:.4g}, {br[1]:.4g}]"


def _answer(res: Any) -> str:
    """The one-line answer, printed last."""
    if res.delta_nn is None:
        return f"delta_NN: none ({res.status.value})"
    n = len(res.replicates)
    if res.stderr is not None:
        text = (f"delta_NN = {format_pm(res.delta_nn, res.stderr)} (mean ± standard error over "
                f"{n} DMFT seeds, bisection resolution included)")
    else:
        text = (f"delta_NN = {res.delta_nn:.4g} (bracket {_bracket(res.bracket)}; one seed, "
                "Monte Carlo error not measured)")
    return text + ("" if res.ok else f" [{res.status.value}]")


def run(args: argparse.Namespace) -> int:
    from dmftsolve.thresholds.hessian_threshold import delta_nn
    from dmftsolve.thresholds.settings import ThresholdSettings

    if given(args, "steps"):
        warn(args, f"--steps {args.steps} is ignored: threshold takes the Hessian at --t, or at "
                   "--long-time and half of it")
    problem = problem_from_args(args)
    from dmftsolve.population import check_sampling

    check_sampling(problem, args.paths, "--paths")
    settings = ThresholdSettings(criterion=args.criterion, bracket=args.bracket, grid=args.grid,
                                 xtol=args.xtol, n_paths=args.paths, seed=args.seed,
                                 long_time=args.long_time, tails=args.tails, replicates=args.replicates,
                                 null_rtol=args.null_rtol)
    if args.t != "tti":
        steps = args.long_time if args.t is None else args.t
        memory, seconds = dmft_cost(problem, args.paths, steps=steps, replicate=False)
        # grid points plus about log2(range/xtol) bisection steps, per replicate
        lo, hi = args.bracket
        evals = args.grid + max(1.0, math.log2(max((hi - lo) / args.xtol, 2.0))) + 2
        check_cost(args, "this threshold search", memory, seconds * evals * args.replicates,
                   "use fewer --paths, --replicates or a smaller --long-time/--t")
    res = delta_nn(problem, args.t, settings=settings, progress=want_progress(args), throw=False)
    notes = _notes(res)
    times = sorted({str(e["t"]) for e in res.evaluations}, key=lambda v: (len(v), v))

    def table() -> str:
        t = {None: f"long-time rule (T={args.long_time})", "tti": "TTI fixed point"}.get(res.t, res.t)
        # the problem's own T (--steps) plays no part here: the time is --t / --long-time
        lines = [f"dmftsolve threshold: {re.sub(r', T=[0-9]+', '', problem.describe())}",
                 f"hard directions: {list(res.hard)}; t: {t}; {len(res.replicates)} replicate(s), "
                 f"{args.paths} paths per DMFT run", ""]
        if args.verbose:
            lines += ["evaluations"]
            ev = [[e["seed"], e["delta"], e["t"], e["has_outlier"],
                   ", ".join(f"{o['location']:.4g} ({o['overlap2']:.2f})" for o in e["outliers"]) or "-",
                   e["left_edge"], e["status"]] for e in res.evaluations]
            heads = ["seed", "delta", "t", "outlier", "outliers (overlap²)", "left edge", "status"]
            lines += [format_table(heads, ev), ""]
        if len(res.replicates) > 1:
            heads = ["seed"] + [f"bracket t={tt}" for tt in times] + ["status (own time rule)"]
            rows = [[r["seed"], *(_bracket(r["brackets"].get(tt, {}).get("bracket")) for tt in times),
                     r["status"]] for r in res.replicates]
            lines += ["single-seed brackets", format_table(heads, rows), ""]
        lines += notes + [""]
        rows = [["delta_alg", res.delta_alg],
                ["evaluations", res.diagnostics["evaluations"]],
                ["elapsed [s]", round(res.elapsed, 1)],
                ["status", res.status.value],
                ["bracket" if len(res.replicates) < 2 else "hull of the replicate brackets",
                 None if res.bracket is None else _bracket(res.bracket)]]
        lines += [format_table(["quantity", "value"], rows), "",
                  "(the d -> infinity Hessian threshold; GD's finite-d 50 % point: "
                  "dmftsolve transition --d D)",
                  _answer(res)]
        return "\n".join(lines)

    payload = res.to_dict()
    payload["message"] = "; ".join(notes)
    emit(args, payload, table)
    if not res.ok:
        reason = next((n for n in notes if "NOT met" in n or "not converged" in n), notes[0] if notes
                      else "")
        raise CommandError(f"{res.status.value}: {reason}")
    return 0
