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
    emit,
    finite_float,
    floats,
    format_pm,
    format_table,
    positive_int,
    problem_from_args,
    want_progress,
)

DESCRIPTION = """\
Predict the probability that full-batch GD from a random start learns the hard
direction(s) of the target at input dimension d, and its 50 % point delta_50 with
a standard error. Success, for GD and theory alike (dmftsolve.success): every hard
direction's projection onto span(W) exceeds 1/2 by step T (for one neuron and one
direction: the cosine). This is the number to compare with experiments at finite
d; the long-time delta_NN of `dmftsolve threshold` is a different quantity and
lies well above GD's transition at d = 500-4000.

Without --delta the transition is found by itself: batches of --draws draws
bracket it from --start (stepping delta by a factor 1.4), then go where they
inform the probit fit most (delta_50 +- 0.8 w), until the error of delta_50 is at
most --tol (or --max-draws are spent); the two batches placed there run at once.
The search's error is the posterior standard deviation of delta_50 (flat priors
on delta_50 and the log of the curve's width): against known curves the true
error was 0.9-1.1x the printed one (docs/accuracy.md). With --delta the draws
run on that grid, and the error is a bootstrap's.

How: each draw is one unrestricted DMFT run started at the overlaps M_0 = X/sqrt(d)
of a random start (X a k x m matrix of N(0, q0) entries). With the default
construction "forced" its kernels use --paths Monte Carlo paths paired by a joint
reflection of the hard directions, and its overlap update is driven by GD's
finite-n gradient: the paths reweighted by quenched weights of n = delta*d samples,
which carries the gradient noise of n samples and the finite-n curvature along the
target (dmftsolve.thresholds.finite_d_transition). Easy directions are learned by
the DMFT itself. A draw stops at its first passage. Other constructions
(--construction): "quenched", "finite_n" (N = n unpaired paths: wider curves),
"initial" (the random initial overlap only). Each draw's responses are the
least-squares coefficients of the paths' gradients on their Gaussian innovations
(--stein-regression, the default since 0.5.0): the plain Stein mean's own noise
biased the kernels upward at late times and left too few late escapes (GeLU on
z**2 at d = 1000: 11.35 without, 11.05 with; GD 10.7; docs/findings.md 9.5).

The paths' own noise: the default paired weights give the curvature along the
target GD's noise when there are at least 2n paths; above that (large d) the
excess 2n/N - 1 remains (per point in the JSON as curvature_excess) and a warning
is printed when it exceeds 1: --paths-per-sample 2 removes it, at a cost that
grows with n. Of 10 one-neuron searches at d = 2000-4000 that warned, 6 were
within max(0.3, 5 %) of GD at the defaults and 9 with --paths-per-sample 2 (1.1-9x
the CPU time; validation/results/transition_defaults.md, docs/findings.md 9.2).

Any width --m and any number of directions; the label must be invariant under
reflecting its hard directions jointly (e.g. z**2 - 1, z1*z2, z1 + z2**2 - 1);
random start, no bias or ridge.

Kernel paths (--paths): 80000 by default at width --m 2, 20000 at every other
width, and 80000 at width 1 on a label with a non-zero mean (mean above 0.1 sd:
z**2, abs(z), Min(z**2, 3); since 0.10.0). With 20000 paths the width-2 hard
overlaps grow too slowly from GD's finite-n force after about step 10, and
delta_50 sat above GD's by more than max(0.3, 5 %) in 5 of 9 checks (e.g. GeLU
at d = 1000: +0.35 on z**2, +0.36 on z1*z2, +0.57 on abs(z)); with 80000, in 1
of 9 (docs/findings.md 10.1). With the responses by regression, 20000 paths at
width 2 were within in all five cases run at d = 1000, but high by 0.17-0.27 in
four, and at d = 2000 GeLU on z**2 was +0.69 with 20000 and +0.16 with 80000:
--paths 20000 is a 4x cheaper, biased choice. At widths 1, 3 and 4, 20000 paths
were within in every case run on centred labels (plain Stein mean). On the
uncentred z**2 at width 1 (GeLU, d = 1000) six seeds averaged 11.03 with 20000
paths and 10.82 with 80000, GD 10.79 ± 0.09: hence the width-1 default there. On
a label with a non-zero mean the command warns when the paths are fewer than
80000 at width 1 or twice the width's default at other widths (160000 at width
2): on such labels the theory ran 0.1-0.6 above GD with 20000 (also r2 on z**2
at d = 1000), and on abs(z) at width 2 +0.52 with 80000 paths and +0.18 with
160000 (docs/findings.md 9.2, 10.1, 10.4).

Cost: one DMFT run of at most T steps with --paths paths per draw (T = 400,
d = 2000, float32 path history, compact history, a draw that does not escape,
one core: about 0.36 s for one neuron with 20000 paths, 0.95 s for two neurons
with 20000 and 3.5 s with 80000 (0.7.0); less if it escapes or gives up; the
cost grows with --paths and with T times the non-null innovations, not with d).
A draw that is not growing gives up from step T/4 on (--give-up-factor): near
delta_50 about half the draws never pass, and giving up saves about half the
steps of a search without changing its counts in the draws checked
(docs/findings.md 9.10). Draws run on --workers processes.

--sim FILE.json overlays simulator points in the table and the plot: a JSON object
{"deltas": [...], "successes": [...], "trials": [...]} (e.g. from `dmftsolve
simulate --first-passage` runs, which count success as this command does); their
probit delta_50 is printed beside the theory's.

Examples:
  dmftsolve transition                                      # GeLU on z**2 - 1, d = 1000
  dmftsolve transition --target "z**2" --tol 0.3            # the uncentred label: a wider curve
  dmftsolve transition --m 2 --d 1000 --start 3.5
  dmftsolve transition --target "z**2 - 1" --d 1000 --delta 5.5,6,6.5,7,7.5,8.5 --draws 16
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("transition", help="predicted GD success curve over delta at finite d, "
                                                 "and delta_50", description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(p)
    g = p.add_argument_group("transition")
    g.add_argument("--d", type=positive_int("--d", 10**7), default=1000,
                   help="input dimension d (default: %(default)s)")
    g.add_argument("--delta", type=floats, default=None,
                   help="comma-separated sample ratios (default: none, the transition is found by "
                        "the adaptive search)")
    g.add_argument("--draws", type=positive_int("--draws", 10**5), default=8,
                   help="DMFT draws per delta on a grid, or per batch of the search (default: %(default)s)")
    g.add_argument("--tol", type=finite_float, default=0.15,
                   help="search: stop once the error of delta_50 is at most this (default: %(default)s)")
    g.add_argument("--max-draws", type=positive_int("--max-draws", 10**5), default=600,
                   help="search: draws at most (default: %(default)s)")
    g.add_argument("--start", type=finite_float, default=None,
                   help="search: the first delta tried (default: 6)")
    g.add_argument("--seed", type=int, default=0, help="root seed (default: %(default)s)")
    g.add_argument("--construction", choices=("forced", "quenched", "finite_n", "initial"), default="forced",
                   help="how a draw carries GD's finite-n sources (see above; default: %(default)s)")
    g.add_argument("--paths", type=positive_int("--paths", 10**7), default=None,
                   help="kernel paths of the forced and initial constructions (default: 80000 at "
                        "--m 2 and at --m 1 on a label with a non-zero mean, 20000 otherwise; see above)")
    g.add_argument("--paths-per-sample", type=float, default=None,
                   help="forced / initial: use round(X * n) kernel paths at each delta (n = delta*d) "
                        "instead of --paths, so the paths' own noise shrinks with GD's (default: off)")
    g.add_argument("--force-weights", choices=("paired", "poisson"), default="paired",
                   help="forced: the weights of the force; 'paired' gives the curvature along the "
                        "target GD's noise when there are at least 2n paths, 'poisson' adds the "
                        "paths' own (see above; default: %(default)s)")
    g.add_argument("--path-dtype", choices=("float32", "float64"), default="float32",
                   help="precision of each draw's stored path history; float32 makes a draw "
                        "1.6-1.9x faster and gave the same outcome on 191 of 192 paired draws; "
                        "float64 reproduces versions before 0.3.0 (docs/findings.md section 7; "
                        "default: %(default)s)")
    g.add_argument("--stein-regression", action=argparse.BooleanOptionalAction, default=True,
                   help="estimate each draw's responses by regressing g on the innovations, which "
                        "removes most of the Stein noise that biases the kernels upward at late "
                        "times; --no-stein-regression gives the draws of 0.4 (docs/findings.md "
                        "section 9.5; default: on)")
    g.add_argument("--history", choices=("compact", "full"), default="compact",
                   help="what each draw's paths keep of their past: 'compact' keeps the memory "
                        "terms at the non-null innovations (about a fifth of the steps at width 1; "
                        "a draw 1.6-1.9x cheaper, the same overlaps up to round-off); 'full' keeps "
                        "every gradient, as versions before 0.7.0 (default: %(default)s)")
    g.add_argument("--give-up-factor", type=finite_float, default=20.0,
                   help="end a draw as a failure from step T/4 on once even this many times its "
                        "growth over the last T/8 steps, kept up to step T, would leave it more "
                        "than 0.1 below the success cosine; about half a search's steps are in such "
                        "draws. It "
                        "stopped none of the draws that passed among those checked "
                        "(docs/findings.md section 9.10; default: %(default)g)")
    g.add_argument("--no-give-up", action="store_true",
                   help="run every draw that does not pass to step T, as before 0.9.0")
    g.add_argument("--workers", type=positive_int("--workers", 256), default=None,
                   help="processes for the draws (default: the CPUs this process may use)")
    g.add_argument("--plot", type=Path, default=None, help="write the curve to this image file")
    g.add_argument("--sim", type=Path, default=None,
                   help="JSON of simulator success counts to show beside the theory (see above)")
    add_progress_argument(g, "; a line per batch, with the current delta_50 and the time left")
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
    path and step at width 1 and 110 ns at width 2 with the float32, compact-history draws of
    0.7.0 (``python benchmarks/bench_draw.py --compare compact``, T = 400: 0.36 s with 2·10⁴
    paths, 3.55 s with 8·10⁴ at width 2), hence ``m^1.3``; the full history adds a term
    growing like ``T²`` (0.61 s at width 1), float64 about 1.6×."""
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
    ``n = δd`` (``--paths-per-sample``, the ``finite_n`` and ``quenched`` constructions) a
    search is checked at the δ it starts from (``--start``, default 6), not at the largest δ it
    could reach (200): that refused the ``--paths-per-sample 2`` the command's own warning
    suggests at d = 3000 (32.6 GiB for 2.4·10⁶ paths at δ = 200 with ``--paths-per-sample 4``).
    A draw at a larger δ checks its own memory before it allocates (``solve_dmft``)."""
    from dmftsolve.cli._common import check_cost, dmft_cost
    from dmftsolve.thresholds.finite_d_transition import kernel_paths

    if args.delta is not None:
        deltas = args.delta
    elif s.paths_per_sample is not None or args.construction in ("finite_n", "quenched"):
        deltas = [6.0 if s.start is None else float(s.start)]  # where the search starts
    else:
        deltas = [200.0]  # the search's largest δ (the kernel paths do not depend on it)
    n_max = max(int(round(x * args.d)) for x in deltas)
    N = kernel_paths(s, n_max) if args.construction in ("forced", "initial") else \
        (n_max if args.construction == "finite_n" else 4 * s.copies * n_max)
    draws = s.draws * len(deltas) if args.delta is not None else s.max_draws
    from dmftsolve.cli._common import MAX_SECONDS

    memory, _ = dmft_cost(problem, N, replicate=False)
    total = _draw_seconds(problem, N, s) * draws / max(1, s.workers)
    if args.delta is None and total <= MAX_SECONDS:
        total = 0.0  # the search stops long before --max-draws as a rule; its progress shows the time left
    check_cost(args, f"{draws} DMFT draws of {problem.training.steps} steps with up to {N} paths",
               memory, total, "use fewer --draws / --max-draws, a larger --tol, or fewer --paths")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from dmftsolve.results import format_binomial
    from dmftsolve.thresholds.finite_d_transition import (
        TransitionSettings,
        label_mean_warning,
        probit_fit,
        resolve_settings,
        transition,
        transition_directions,
    )

    if args.plot is not None:  # shared check (cli/_common): directory, writability, format
        from dmftsolve.cli._common import check_output_path

        args.plot = Path(check_output_path(str(args.plot)))
    if args.M0 is not None or args.Q0 is not None or args.hold_zero:
        raise ValueError("--M0, --Q0 and --hold-zero do not apply: each draw starts from a random "
                         f"overlap m_0/sqrt(d) (got --M0 {args.M0}, --Q0 {args.Q0}, "
                         f"--hold-zero {args.hold_zero})")
    sim = _load_sim(args.sim)
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
                           n_paths=args.paths, workers=workers, paths_per_sample=args.paths_per_sample,
                           force_weights=args.force_weights, tol=args.tol,
                           path_dtype=args.path_dtype, stein_regression=args.stein_regression,
                           history=args.history, max_draws=max(args.max_draws, args.draws), start=args.start,
                           give_up_factor=None if args.no_give_up else args.give_up_factor)
    s = resolve_settings(s, problem)  # --paths: the width's default when not given
    _check_transition_cost(args, problem, s)
    transition_directions(problem)  # an unsupported problem fails first, with its one line
    early = label_mean_warning(problem, s)  # known before the search: said first, so one can stop
    if early:
        print(f"warning: {early}", file=sys.stderr, flush=True)
    c = transition(problem, args.d, args.delta, settings=s, throw=False, progress=want_progress(args))
    sim_fit = None
    if sim is not None:
        sim_fit = probit_fit(np.array(sim["deltas"]), np.array(sim["successes"]), np.array(sim["trials"]))
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
        fig.savefig(args.plot, dpi=110)
        plt.close(fig)
    payload = {"result": c.to_dict(), "simulator": sim,
               "simulator_delta_50": None if sim_fit is None else {"delta_50": sim_fit[0], "err": sim_fit[1]}}

    def table() -> str:
        rows = [[f"{x:g}", f"{k}/{n}", format_binomial(int(k), int(n))]
                for x, k, n in zip(c.deltas, c.successes, c.draws, strict=True)]
        search = "adaptive search" if args.delta is None else "grid"
        gave_up = c.diagnostics.get("given_up_draws", 0)
        out = [f"Predicted GD success probability at d = {args.d}, T = {problem.training.steps} "
               f"({search}, construction {args.construction}, {int(c.draws.sum())} draws, "
               f"{gave_up} of them gave up)",
               format_table(["delta", "escapes", "P(success)"], rows)]
        if sim_fit is not None:
            out.append(f"simulator delta_50 = {sim_fit[0]:.2f} ± {sim_fit[1]:.2f} (probit fit)")
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
