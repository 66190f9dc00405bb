"""``dmftsolve dmft``: solve the discrete-time DMFT of GD (docs/theory.md §2)."""

from __future__ import annotations

import argparse

import numpy as np

from dmftsolve.cli._common import (
    NULL_RTOL_HELP,
    CommandError,
    add_output_arguments,
    add_problem_arguments,
    add_progress_argument,
    add_seed_argument,
    check_cost,
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
n/d = delta: the kernels Q (Gram of the part of W orthogonal to the target),
the responses Gamma and R, the overlaps M_t, and per step the train loss, test
loss, gradient norm and cosine, with Monte Carlo standard errors.

The sample side is Monte Carlo over --paths paths; the parameter side is exact
linear algebra. --method stein (default) estimates the responses by Gaussian
integration by parts, O(N T^2); --method pathwise differentiates every path,
O(N T^3) time and O(N T^2) memory, and gives less noisy Gamma/R kernels.

Example:
  dmftsolve dmft --target 'z**2' --activation gelu --eta 0.5 --steps 20 \\
      --hold-zero 0 --delta 4 --paths 100000 --seed 0
"""

#: Default Monte Carlo paths: at the common 400 steps a run takes about 20 s on one core
#: (N = 2·10⁴, replicate errors); the cost grows as N·T².
DEFAULT_PATHS = 20_000


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dmft", help="discrete-time DMFT of GD (kernels, overlaps, losses)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_problem_arguments(p)
    g = p.add_argument_group("solver")
    g.add_argument("--delta", type=finite_float, required=True, help="sample ratio n/d")
    g.add_argument("--paths", type=positive_int("--paths", 10**9), default=DEFAULT_PATHS,
                   help="Monte Carlo paths of the sample process (default: %(default)s)")
    add_seed_argument(g, "random seed of the Monte Carlo paths")
    g.add_argument("--method", choices=("stein", "pathwise"), default="stein",
                   help="response estimator (default: %(default)s)")
    g.add_argument("--batches", type=positive_int("--batches", 10_000), default=20,
                   help="batches / replicates for the error bars (default: %(default)s)")
    g.add_argument("--errors", choices=("replicate", "batch"), default="replicate",
                   help="replicate: honest errors from independent sub-solves (2x cost); batch: "
                        "cheap batch means conditional on earlier kernels (default: %(default)s)")
    g.add_argument("--no-antithetic", action="store_true", help="disable antithetic pairs")
    g.add_argument("--null-rtol", type=null_rtol, default=None, help=NULL_RTOL_HELP)
    g.add_argument("--rows", type=positive_int("--rows"), default=10,
                   help="number of steps shown in the table (default: %(default)s)")
    add_progress_argument(g)
    add_output_arguments(p)
    p.set_defaults(func=run)


def _pm(value: float, err: float, fmt: str = ".4g") -> str:
    """``value ± err``; ``non-finite`` instead of NaN/inf, no ``± nan`` for an unknown error."""
    if not np.isfinite(value):
        return "non-finite"
    return format(value, fmt) + (f" ± {err:.2g}" if np.isfinite(err) else "")


def run(args: argparse.Namespace) -> int:
    from dmftsolve.dynamics.dmft import solve_dmft

    problem = problem_from_args(args)
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
        rows_t = np.unique(np.linspace(0, last, min(args.rows, last + 1)).round().astype(int))
        rows = []
        for t in rows_t:
            q = res.q_diag[t]
            qs = f"{q[0, 0]:.4g}" if q.shape[0] == 1 else "diag " + ", ".join(
                f"{v:.3g}" for v in np.diag(q))
            rows.append([int(t), _pm(res.train_loss[t], res.train_loss_err[t]),
                         _pm(res.test_loss[t], res.test_loss_err[t]),
                         _pm(res.cosine[t], res.cosine_err[t], ".4f"),
                         qs if np.isfinite(q).all() else "non-finite"])
            if problem.bias:
                rows[-1].append(", ".join(f"{v:.4g}" for v in res.b[t]))
        head = (f"DMFT {problem.describe()}, δ={args.delta:g}, N={res.settings['n_paths']}, "
                f"method={args.method}, seed={res.settings['seed']}: {res.status.value}"
                f"{' (' + res.message + ')' if res.message else ''}, {res.elapsed:.2f}s\n")
        headers = ["t", "train loss", "test loss", "cosine", "Q(t,t)"] + (["b"] if problem.bias else [])
        return head + format_table(headers, rows)

    emit(args, payload, table)
    if not res.ok:
        where = "" if finite.all() else f" (first non-finite value at step {last})"
        raise CommandError(f"{res.status.value}{where}: {res.message or 'the DMFT failed'}")
    return 0
