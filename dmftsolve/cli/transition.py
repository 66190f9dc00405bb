"""``dmftsolve transition``: GD's predicted success curve over δ at finite d, and δ_50 (issue 9)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

from dmftsolve.cli._common import (
    CommandError,
    add_output_arguments,
    add_problem_arguments,
    add_progress_argument,
    command_parser,
    emit,
    finite_float,
    floats,
    format_pm,
    format_table,
    null_rtol,
    positive_int,
    problem_from_args,
    want_progress,
    write_figure,
)

DESCRIPTION = """\
Predict the probability that full-batch GD from a random start learns the hard
target direction(s) by step T at input dimension --d, as a function of
delta = n/d, and its 50 % point delta_50 with a standard error: the number to
compare with GD at finite d. Each draw is a DMFT run started at a random overlap
and driven by GD's finite-n gradient. Without --delta an adaptive search places
batches of --draws draws until the error of delta_50 is at most --tol; with
--delta the draws run on that grid. A ridge (--lam) and a trained bias (--bias)
are followed by the draws; a warm start is not (each draw starts from a random
overlap).
"""

EXAMPLES = """\
dmftsolve transition
dmftsolve transition --init spectral --target "z**2" --steps 1000 --start 2
dmftsolve transition --delta 5,6,7 --draws 16 --sim counts.json
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command_parser(subparsers, "transition",
                       "predicted GD success curve over delta at finite d, and delta_50",
                       DESCRIPTION, EXAMPLES)
    # each draw starts from a random overlap: a warm start and held directions are refused (run)
    add_problem_arguments(p, hide=("M0", "Q0", "hold_zero"))
    g = p.add_argument_group("transition")
    g.add_argument("--d", type=positive_int("--d", 10**7), default=1000, metavar="N",
                   help="input dimension d (default: %(default)s)")
    g.add_argument("--delta", type=floats, default=None, metavar="LIST",
                   help="a grid of n/d (default: the adaptive search)")
    g.add_argument("--draws", type=positive_int("--draws", 10**5), default=8, metavar="N",
                   help="draws per delta or search batch (default: %(default)s)")
    g.add_argument("--tol", type=finite_float, default=0.15, metavar="X",
                   help="search: error of delta_50 to reach (default: %(default)s)")
    g.add_argument("--max-draws", type=positive_int("--max-draws", 10**5), default=600, metavar="N",
                   help="search: draws at most (default: %(default)s)")
    g.add_argument("--start", type=finite_float, default=None, metavar="X",
                   help="search: the first delta tried (default: 6)")
    g.add_argument("--seed", type=int, default=0, metavar="N", help="root seed (default: %(default)s)")
    g.add_argument("--init", choices=("random", "spectral"), default="random", metavar="NAME",
                   help="GD start: random or spectral (default: random)")
    g.add_argument("--construction", choices=("forced", "finite_n", "initial"),
                   default="forced", metavar="NAME",
                   help="forced/finite_n/initial (default: forced)")
    g.add_argument("--paths", type=positive_int("--paths", 10**7), default=None, metavar="N",
                   help="kernel paths (default: by width and label)")
    g.add_argument("--null-rtol", type=null_rtol, default=None, metavar="X",
                   help="variance cut-off (default: by width and label)")
    g.add_argument("--paths-per-sample", type=float, default=None, metavar="X",
                   help="round(X n) paths (default: by width and label)")
    g.add_argument("--force-weights", choices=("paired", "poisson"), default="paired", metavar="NAME",
                   help="forced: paired or poisson (default: %(default)s)")
    g.add_argument("--path-dtype", choices=("float32", "float64"), default="float32", metavar="NAME",
                   help="path history float32 or float64 (default: %(default)s)")
    g.add_argument("--stein-regression", action=argparse.BooleanOptionalAction, default=True,
                   help="responses by regression (default: on)")
    g.add_argument("--history", choices=("compact", "full"), default="compact", metavar="NAME",
                   help="path history compact or full (default: %(default)s)")
    g.add_argument("--give-up-factor", type=finite_float, default=20.0, metavar="X",
                   help="end draws that are not growing (default: %(default)g)")
    g.add_argument("--no-give-up", action="store_true",
                   help="run every draw that does not pass to step T")
    g.add_argument("--workers", type=positive_int("--workers", 256), default=None, metavar="N",
                   help="processes (default: the CPUs available)")
    g.add_argument("--plot", type=Path, default=None, metavar="FILE",
                   help="write the curve to an image (default: none)")
    g.add_argument("--sim", type=Path, default=None, metavar="FILE",
                   help="GD success counts to show, JSON (default: none)")
    add_progress_argument(g)
    add_output_arguments(p)
    p.set_defaults(func=run)


def _load_sim(path: Path | None) -> dict[str, Any] | None:
    """The ``--sim`` counts, validated before any work (:func:`dmftsolve.cli._sim_file.load_success_counts`:
    a regular file under a size cap, the schema, whole counts ≤ trials); bad input exits 2."""
    if path is None:
        return None
    from dmftsolve.cli._sim_file import load_success_counts

    try:
        return load_success_counts(path)
    except ValueError as exc:
        raise CommandError(str(exc), 2) from None


def _draw_seconds(problem: Any, n_paths: int, s: Any) -> float:
    """Rough time of one draw that does not escape (``T`` steps, one core): about 45 ns per
    path and step at width 1 and 110 ns at width 2 with float32, compact-history draws
    (``python benchmarks/bench_draw.py --compare compact``, T = 400; docs/findings.md §7),
    hence ``m^1.3``; the full history adds a term growing like ``T²``, float64 about 1.6×."""
    T, m = problem.training.steps, problem.m
    per = 4.5e-8 * n_paths * T * m**1.3
    if s.history == "full":
        per += 4e-11 * n_paths * T * T * m**1.3
    return per * (1.6 if s.path_dtype == "float64" else 1.0)


def _check_transition_cost(args: argparse.Namespace, problem: Any, s: Any) -> None:
    """Refuse (exit 2) or warn before a run whose estimated time or memory is too large: at
    most ``--max-draws`` draws (search) or ``--draws`` per grid point, each one DMFT of
    ``T`` steps with the largest number of kernel paths the run will use.

    A grid's largest δ is known; a search's is not. Where the kernel paths grow with
    ``n = δd`` (``--paths-per-sample``, the ``finite_n`` construction) a
    search is checked at the δ it starts from (``--start``, default 6), not at the largest δ it
    could reach (200), which would refuse the ``--paths-per-sample 2`` the command's own
    warning suggests at large d. A draw at a larger δ checks its own memory before it
    allocates (``solve_dmft``)."""
    from dmftsolve.cli._common import check_cost, dmft_cost
    from dmftsolve.finite_d import kernel_paths

    if args.delta is not None:
        deltas = args.delta
    elif s.paths_per_sample is not None or args.construction == "finite_n":
        deltas = [6.0 if s.start is None else float(s.start)]  # where the search starts
    else:
        deltas = [200.0]  # the search's largest δ (the kernel paths do not depend on it)
    n_max = max(int(round(x * args.d)) for x in deltas)
    N = kernel_paths(s, n_max) if args.construction in ("forced", "initial") else n_max
    draws = s.draws * len(deltas) if args.delta is not None else s.max_draws
    from dmftsolve.cli._common import MAX_SECONDS

    memory, _ = dmft_cost(problem, N, replicate=False)
    total = _draw_seconds(problem, N, s) * draws / max(1, s.workers)
    what = f"{draws} DMFT draws of {problem.training.steps} steps with up to {N} paths"
    if args.delta is None and total <= MAX_SECONDS:
        # the search stops long before --max-draws as a rule, but its first batch of --draws
        # draws is certain: estimated from that, so a huge --draws is caught before it starts
        first = min(s.draws, s.max_draws)
        total = _draw_seconds(problem, N, s) * first / max(1, s.workers)
        what = f"the search's first batch of {first} DMFT draws of {problem.training.steps} steps"
    check_cost(args, what, memory, total,
               "use fewer --draws / --max-draws, a larger --tol, or fewer --paths")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from dmftsolve.finite_d import (
        TransitionSettings,
        label_mean_warning,
        resolve_settings,
        transition,
        transition_directions,
    )
    from dmftsolve.results import format_binomial

    if args.plot is not None:  # shared check (cli/_common): directory, writability, format
        from dmftsolve.cli._common import check_output_path

        args.plot = Path(check_output_path(str(args.plot)))
    if args.M0 is not None or args.Q0 is not None or args.hold_zero:
        raise ValueError("--M0, --Q0 and --hold-zero do not apply: each draw starts from a random "
                         f"overlap m_0/sqrt(d) (got --M0 {args.M0}, --Q0 {args.Q0}, "
                         f"--hold-zero {args.hold_zero})")
    sim = _load_sim(args.sim)
    sim_fit = None
    if sim is not None:  # fitted now: counts that cannot be fitted are refused before the work
        from dmftsolve.thresholds.delta50 import fit_counts

        try:
            sim_fit = fit_counts(sim["deltas"], sim["successes"], sim["trials"],
                                 what=f"--sim {str(args.sim)!r}"[:90])
        except ValueError as exc:
            raise CommandError(str(exc), 2) from None
    problem = problem_from_args(args)
    if args.paths is not None and args.paths < 40:
        raise ValueError(f"--paths must be at least 40, got {args.paths}")
    workers = args.workers
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if args.paths_per_sample is not None and not 0 < args.paths_per_sample <= 1000:
        raise ValueError(f"--paths-per-sample must be in (0, 1000], got {args.paths_per_sample}")
    if not args.give_up_factor >= 1:
        raise ValueError(f"--give-up-factor must be at least 1, got {args.give_up_factor:g}")
    if not 0 < args.tol:
        raise ValueError(f"--tol must be positive, got {args.tol}")
    if args.start is not None and not 0.25 <= args.start <= 200:
        raise ValueError(f"--start must lie in [0.25, 200], got {args.start}")
    if args.draws < 2:
        raise ValueError(f"--draws must be at least 2, got {args.draws}")
    workers = min(workers, args.draws)
    s = TransitionSettings(draws=args.draws, seed=args.seed, construction=args.construction,
                           n_paths=args.paths, null_rtol=args.null_rtol, workers=workers,
                           paths_per_sample=args.paths_per_sample,
                           force_weights=args.force_weights, tol=args.tol,
                           path_dtype=args.path_dtype, stein_regression=args.stein_regression,
                           history=args.history, max_draws=max(args.max_draws, args.draws), start=args.start,
                           give_up_factor=None if args.no_give_up else args.give_up_factor,
                           init=args.init)
    s = resolve_settings(s, problem)  # --paths: the width's default when not given
    _check_transition_cost(args, problem, s)
    transition_directions(problem)  # an unsupported problem fails first, with its one line
    early = label_mean_warning(problem, s)  # known before the search: said first, so one can stop
    if early:
        print(f"warning: {early}", file=sys.stderr, flush=True)
    c = transition(problem, args.d, args.delta, settings=s, throw=False, progress=want_progress(args))
    if args.plot is not None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from scipy.special import ndtr

        def clipped(pv: Any, ev: Any) -> Any:  # error bars inside [0, 1]
            pv, ev = np.asarray(pv, float), np.asarray(ev, float)
            return np.vstack([np.minimum(ev, pv), np.minimum(ev, 1 - pv)])

        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        xs = np.asarray(c.deltas, float)
        lo_x = float(xs.min()) if xs.size else 0.0
        hi_x = float(xs.max()) if xs.size else 1.0
        if math.isfinite(c.delta_50) and math.isfinite(c.width):
            grid = np.linspace(lo_x - 0.1 * (hi_x - lo_x), hi_x + 0.1 * (hi_x - lo_x), 200)
            w = max(c.width, 1e-6)
            ax.plot(grid, ndtr((grid - c.delta_50) / w), color="C0", lw=1,
                    label=f"theory probit fit, δ_50 = {c.delta_50:.2f} ± {c.delta_50_err:.2f}")
            if math.isfinite(c.delta_50_err):
                ax.fill_between(grid, ndtr((grid - c.delta_50 - c.delta_50_err) / w),
                                ndtr((grid - c.delta_50 + c.delta_50_err) / w), color="C0", alpha=0.15,
                                lw=0, label="δ_50 ± its error")
        ax.errorbar(xs, c.p, clipped(c.p, c.p_err), fmt="o", color="C0", capsize=2,
                    label=f"theory ({args.construction}), draws per point: "
                          + (f"{int(c.draws.min())}" if c.draws.min() == c.draws.max() else
                             f"{int(c.draws.min())}–{int(c.draws.max())}"))
        if sim is not None:
            k, n = np.array(sim["successes"]), np.array(sim["trials"])
            pg = k / n
            ax.errorbar(sim["deltas"], pg, clipped(pg, np.sqrt(np.maximum(pg * (1 - pg), 0.25 / n) / n)),
                        fmt="s", color="C1", capsize=2, label="simulator")
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("sample ratio δ = n/d")
        ax.set_ylabel("P(GD learns the hard directions)")
        ax.set_title(f"Predicted success of GD: {problem.target.expr}, {problem.network.activation}, "
                     f"m = {problem.m}, d = {args.d}, T = {problem.training.steps}", fontsize=8)
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.tight_layout()
        write_figure(fig, str(args.plot), dpi=110)
    payload = {"result": c.to_dict(), "simulator": sim,
               "simulator_delta_50": None if sim_fit is None else {"delta_50": sim_fit[0], "err": sim_fit[1]}}

    def table() -> str:
        rows = [[f"{x:g}", f"{k}/{n}", format_binomial(int(k), int(n))]
                for x, k, n in zip(c.deltas, c.successes, c.draws, strict=True)]
        search = "adaptive search" if args.delta is None else "grid"
        gave_up = c.diagnostics.get("given_up_draws", 0)
        retried = c.diagnostics.get("retried_draws", 0)
        again = f", {retried} solved again with more paths" if retried else ""
        out = [f"Predicted GD success probability at d = {args.d}, T = {problem.training.steps} "
               f"({search}, construction {args.construction}, {int(c.draws.sum())} draws, "
               f"{gave_up} of them gave up{again})",
               format_table(["delta", "escapes", "P(success)"], rows)]
        if sim_fit is not None:
            out.append(f"simulator delta_50 = {format_pm(sim_fit[0], sim_fit[1])} (probit fit, "
                       "posterior error)")
        if c.ok:
            out.append(f"delta_50 = {format_pm(c.delta_50, c.delta_50_err)}  (probit width {c.width:.2g})")
        else:
            out.append(f"delta_50: {c.message}")
        return "\n".join(out)

    emit(args, payload, table)
    for w in c.warnings:  # also in the JSON (result.warnings); the label's was said at the start
        if w != early:
            print(f"warning: {w}", file=sys.stderr)
    if not c.ok:
        raise CommandError(f"{c.status.value}: {c.message}")
    return 0
