"""``dmftsolve dmft``: solve the discrete-time DMFT of GD (docs/theory.md §2)."""

from __future__ import annotations

import argparse
import math

import numpy as np

from dmftsolve.cli._common import (
    NULL_RTOL_HELP,
    CommandError,
    add_output_arguments,
    add_problem_arguments,
    add_progress_argument,
    add_seed_argument,
    check_cost,
    command_parser,
    dmft_cost,
    emit,
    finite_float,
    format_table,
    null_rtol,
    positive_int,
    problem_from_args,
    want_progress,
)

DESCRIPTION = """\
Solve the discrete-time DMFT of full-batch GD in the limit n, d -> infinity with
n/d = --delta: the kernels Q, Gamma and R, the overlaps M_t and, per step, the
train and test loss, the gradient norm and the cosine with the target, each with
its Monte Carlo standard error. The sample side is Monte Carlo over --paths
paths; the parameter side is exact. The table shows every k-th step and the
last (the header says which); --json gives every step and the kernels.
"""

EXAMPLES = """\
dmftsolve dmft --delta 4 --steps 20
dmftsolve dmft --target 'z**2' --delta 4 --steps 20 --hold-zero 0 --paths 4000
dmftsolve dmft --delta 4 --steps 100 --rows 20 --json > dmft.json
"""

#: Default Monte Carlo paths: at the common 400 steps a run takes about 20 s on one core
#: (N = 2·10⁴, replicate errors); the cost grows as N·T².
DEFAULT_PATHS = 20_000


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command_parser(subparsers, "dmft", "discrete-time DMFT of GD (kernels, overlaps, losses)",
                       DESCRIPTION, EXAMPLES, usage="--delta X [options]")
    add_problem_arguments(p)
    g = p.add_argument_group("solver")
    g.add_argument("--delta", type=finite_float, required=True, metavar="X",
                   help="sample ratio n/d (required)")
    g.add_argument("--paths", type=positive_int("--paths", 10**9), default=DEFAULT_PATHS, metavar="N",
                   help="Monte Carlo paths (default: %(default)s)")
    add_seed_argument(g, "seed of the paths")
    g.add_argument("--method", choices=("stein", "pathwise"), default="stein", metavar="NAME",
                   help="responses: stein or pathwise (default: %(default)s)")
    g.add_argument("--batches", type=positive_int("--batches", 10_000), default=20, metavar="N",
                   help="replicates or batches for errors (default: %(default)s)")
    g.add_argument("--errors", choices=("replicate", "batch"), default="replicate", metavar="NAME",
                   help="replicate or batch errors (default: %(default)s)")
    g.add_argument("--no-antithetic", action="store_true", help="no antithetic pairs of paths")
    g.add_argument("--null-rtol", type=null_rtol, default=None, metavar="X", help=NULL_RTOL_HELP)
    g.add_argument("--rows", type=positive_int("--rows"), default=10, metavar="N",
                   help="about this many table rows (default: %(default)s)")
    add_progress_argument(g)
    add_output_arguments(p)
    p.set_defaults(func=run)


def table_steps(last: int, rows: int) -> tuple[list[int], str]:
    """The steps the table shows, and the words that say which.

    Every ``k``-th step from 0, with ``k = ceil(last / rows)`` (so at most ``rows + 1``
    multiples), and ``last`` itself when it is not one of them: no step is left out
    without the header saying so, and the last step is always shown.

    Examples
    --------
    >>> table_steps(10, 10)
    ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'every step of t = 0..10')
    >>> table_steps(400, 10)[1]
    'every 40th step of t = 0..400'
    >>> table_steps(37, 10)
    ([0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 37], 'every 4th step of t = 0..37, and the last')
    """
    k = max(1, math.ceil(last / max(rows, 1)))
    shown = list(range(0, last + 1, k))
    if shown[-1] != last:
        shown.append(last)
    if k == 1:
        return shown, f"every step of t = 0..{last}"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(k % 10 if k % 100 not in (11, 12, 13) else 0, "th")
    text = f"every {k}{suffix} step of t = 0..{last}"
    return shown, text if last % k == 0 else f"{text}, and the last"


def _pm(value: float, err: float, fmt: str = ".4g") -> str:
    """``value ± err``; ``non-finite`` instead of NaN/inf, no ``± nan`` for an unknown error."""
    if not np.isfinite(value):
        return "non-finite"
    return format(value, fmt) + (f" ± {err:.2g}" if np.isfinite(err) else "")


def run(args: argparse.Namespace) -> int:
    from dmftsolve.dynamics.dmft import solve_dmft

    problem = problem_from_args(args)
    from dmftsolve.population import check_sampling

    check_sampling(problem, args.paths, "--paths")
    memory, seconds = dmft_cost(problem, args.paths, method=args.method,
                                replicate=args.errors == "replicate", n_batches=args.batches)
    check_cost(args, f"the DMFT with {problem.training.steps} steps and {args.paths} paths",
               memory, seconds, "use fewer --steps or --paths")
    res = solve_dmft(problem, args.delta, n_paths=args.paths, seed=args.seed, method=args.method,
                     antithetic=not args.no_antithetic, n_batches=args.batches,
                     errors=args.errors, null_rtol=args.null_rtol, throw=False,
                     progress=want_progress(args))
    T = res.steps
    finite = np.isfinite(res.train_loss) & np.isfinite(res.cosine)
    # the table stops at the first step that is not finite
    last = T if finite.all() else int(np.argmin(finite))
    payload = {
        "status": res.status, "message": res.message, "settings": res.settings,
        "elapsed": res.elapsed,
        "t": res.times, "M": res.M, "M_err": res.M_err, "Q_diag": res.q_diag, "Q_err": res.Q_err,
        "train_loss": res.train_loss, "train_loss_err": res.train_loss_err,
        "test_loss": res.test_loss, "test_loss_err": res.test_loss_err,
        "grad_norm": res.grad_norm, "grad_norm_err": res.grad_norm_err,
        "cosine": res.cosine, "cosine_err": res.cosine_err,
        "Q": res.Q, "Gamma": res.Gamma, "R": res.R, "Cg": res.Cg,
    }
    if problem.bias:
        payload |= {"b": res.b, "b_err": res.b_err}

    def table() -> str:
        shown, which = table_steps(last, args.rows)
        rows = []
        for t in shown:
            q, qe = np.diag(res.q_diag[t]), np.diag(res.Q_err[t])
            qs = _pm(q[0], qe[0]) if q.size == 1 else "diag " + ", ".join(
                _pm(v, e, ".3g") for v, e in zip(q, qe, strict=True))
            rows.append([t, _pm(res.train_loss[t], res.train_loss_err[t]),
                         _pm(res.test_loss[t], res.test_loss_err[t]),
                         _pm(res.cosine[t], res.cosine_err[t], ".4f"),
                         qs if np.isfinite(q).all() else "non-finite"])
            if problem.bias:
                rows[-1].append(", ".join(f"{v:.4g}" for v in res.b[t]))
        head = (f"DMFT {problem.describe()}, δ={args.delta:g}, N={res.settings['n_paths']}, "
                f"method={args.method}, seed={res.settings['seed']}: {res.status.value}"
                f"{' (' + res.message + ')' if res.message else ''}, {res.elapsed:.2f}s\n")
        stop = "" if last == T else f" (non-finite from step {last} of {T} on)"
        head += f"rows: {which}{stop}; --json has every step\n"
        headers = ["t", "train loss", "test loss", "cosine", "Q(t,t)"] + (["b"] if problem.bias else [])
        return head + format_table(headers, rows)

    emit(args, payload, table)
    if not res.ok:
        where = "" if finite.all() else f" (first non-finite value at step {last})"
        raise CommandError(f"{res.status.value}{where}: {res.message or 'the DMFT failed'}")
    return 0
