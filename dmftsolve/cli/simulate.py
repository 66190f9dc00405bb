"""``dmftsolve simulate``: the finite-d GD simulator over one or several ``δ``.

With no options it runs the common default problem (a GeLU single neuron on
``y = z² − 1``, ``_common.PROBLEM_DEFAULTS``) at ``d = 300`` for a few sample ratios,
reporting the success rate (final cosine with the target > 1/2) per ``δ``.
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from dmftsolve.cli._common import (
    CommandError,
    add_output_arguments,
    add_problem_arguments,
    add_progress_argument,
    add_seed_argument,
    check_cost,
    check_output_path,
    command_parser,
    emit,
    finite_float,
    floats,
    format_table,
    ints,
    positive_int,
    problem_from_args,
    want_progress,
    warn,
    write_figure,
)

#: Defaults of the headline job beyond the common problem defaults (``_common.PROBLEM_DEFAULTS``:
#: GeLU on z**2 - 1, η = 0.5, 400 steps, seed 0).
DEFAULTS: dict[str, Any] = {
    "d": 300, "delta": [4.0, 8.0, 12.0, 16.0], "trials": 10, "record_every": 10,
}

DESCRIPTION = """\
Run full-batch gradient descent at finite d on the problem: x ~ N(0, I_d),
n = round(delta d) samples, fresh data, labels and start for every (delta,
trial), the trials in parallel on --workers processes. Per delta: the
successes (final cosine with the target above --success-threshold; at any
recorded step with --first-passage) and their rate with its error, percentiles
of the final cosine and the final losses. With one delta also the mean
trajectory, and with --hessian-at the extreme Hessian eigenvalues and their
overlap with the hard directions. Without options: a GeLU neuron on z**2 - 1.
"""

EXAMPLES = """\
dmftsolve simulate
dmftsolve simulate --d 1000 --delta 6 --trials 20 --hessian-at 0,100
dmftsolve simulate --delta 5,6,7 --trials 40 --first-passage --json > gd.json
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` command to ``subparsers``."""
    parser = command_parser(subparsers, "simulate",
                            "finite-d GD simulator: success rate vs δ, trajectories, Hessian eigenpairs",
                            DESCRIPTION, EXAMPLES)
    add_problem_arguments(parser)
    g = parser.add_argument_group("simulation")
    g.add_argument("--d", type=positive_int("--d", 10**7), default=DEFAULTS["d"], metavar="N",
                   help="input dimension d (default: %(default)s)")
    g.add_argument("--delta", type=floats, default=DEFAULTS["delta"], metavar="LIST",
                   help="sample ratios n/d (default: 4,8,12,16)")
    g.add_argument("--trials", type=positive_int("--trials", 10**6), default=DEFAULTS["trials"],
                   metavar="N", help="independent runs per delta (default: %(default)s)")
    add_seed_argument(g, "root seed, whatever --workers")
    g.add_argument("--workers", type=positive_int("--workers", 1024), default=None, metavar="N",
                   help="processes; 1: serial (default: the CPUs available)")
    g.add_argument("--record-every", type=positive_int("--record-every"), default=DEFAULTS["record_every"],
                   metavar="N", help="record every N steps and the last (default: %(default)s)")
    g.add_argument("--n-test", type=positive_int("--n-test"), default=None, metavar="N",
                   help="fresh samples for the test loss (default: n)")
    g.add_argument("--hessian-at", type=ints, default=[], metavar="LIST",
                   help="steps of Hessian eigenpairs (default: none)")
    g.add_argument("--n-eigs", type=positive_int("--n-eigs", 1000), default=4, metavar="N",
                   help="eigenpairs at each end of it (default: %(default)s)")
    g.add_argument("--dtype", choices=("float64", "float32"), default="float64", metavar="NAME",
                   help="float64 or float32 data (default: %(default)s)")
    g.add_argument("--success-threshold", type=finite_float, default=0.5, metavar="X",
                   help="success: a cosine above X (default: %(default)s)")
    g.add_argument("--first-passage", action="store_true",
                   help="success at any recorded step, as in transition")
    add_progress_argument(g)
    g.add_argument("--plot", metavar="FILE", default=None,
                   help="write a figure, needs matplotlib (default: none)")
    add_output_arguments(parser)
    parser.set_defaults(func=run)


def _workers(requested: int | None, jobs: int) -> int:
    if requested is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            cpus = os.cpu_count() or 1
        return max(1, min(cpus, jobs))
    if requested < 1:
        raise ValueError(f"--workers must be >= 1, got {requested}")
    return requested


def simulate_cost(problem: Any, d: int, deltas: list[float], trials: int, workers: int, *,
                  n_test: int | None = None, dtype: str = "float64", hessian: int = 0
                  ) -> tuple[float, float]:
    """Estimated peak memory (bytes) and wall time (seconds) of a sweep.

    Memory: each worker holds one run's data ``X`` (n × d) and test set, about twice
    over with temporaries. Time: one GD step costs about 1e-4 s + 1.5e-9 s · n·d·m of
    CPU (measured on this machine for d = 20…1000), runs spread over ``workers``;
    a Lanczos Hessian costs about 100 steps.
    """
    item = 4 if dtype == "float32" else 8
    m, steps = problem.m, problem.training.steps
    ns = [max(1, round(v * d)) for v in deltas]
    n_max = max(ns)
    memory = 2.0 * item * d * (n_max + (n_test or n_max)) * min(workers, len(deltas) * trials)
    cpu = sum(trials * (steps + 100 * hessian) * (1e-4 + 1.5e-9 * n * d * m) for n in ns)
    return memory, cpu / max(1, workers)


def _plot(path: str, result: Any, threshold: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result.runs
    if len(runs) == 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        run = runs[0]
        for c in run.cosine:
            ax.plot(run.steps, c, lw=1)
        ax.axhline(threshold, color="k", ls=":", lw=1)
        ax.set_title(f"d={run.settings['d']}, δ={run.settings['delta']:g}")
        ax.set_xlabel("GD step")
        ax.set_ylabel("cosine with target")
    else:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        err = result.success_error  # the one binomial rule: never a zero bar at 0 or 1
        a1.errorbar(result.deltas, result.success_rate,
                    yerr=[np.minimum(err, result.success_rate), np.minimum(err, 1 - result.success_rate)],
                    marker="o", capsize=3)
        a1.set_xlabel("δ = n/d")
        a1.set_ylabel(f"success rate (cosine > {threshold:g})")
        a1.set_ylim(-0.05, 1.05)
        for run in runs:
            a2.plot(run.steps, run.mean("cosine"), label=f"δ={run.settings['delta']:g}")
        a2.axhline(threshold, color="k", ls=":", lw=1)
        a2.set_xlabel("GD step")
        a2.set_ylabel("mean cosine")
        a2.legend()
    fig.tight_layout()
    write_figure(fig, path)


def _trajectory_rows(run: Any, count: int = 11) -> list[list[Any]]:
    idx = np.unique(np.linspace(0, len(run.steps) - 1, count).round().astype(int))
    cos, cse = run.mean("cosine"), run.stderr("cosine")
    if run.trials < 2:  # no standard error from one trial: leave the column empty, not NaN
        return [[int(run.steps[i]), float(cos[i]), None, float(run.mean("train_loss")[i]),
                 float(run.mean("test_loss")[i]), float(run.mean("grad_norm")[i])] for i in idx]
    tr, te = run.mean("train_loss"), run.mean("test_loss")
    gn = run.mean("grad_norm")
    return [[int(run.steps[i]), float(cos[i]), float(cse[i]), float(tr[i]), float(te[i]),
             float(gn[i])] for i in idx]


def _hessian_rows(run: Any) -> list[list[Any]]:
    h = run.hessian
    rows = []
    for j, t in enumerate(h["steps"]):
        for end in ("low", "high"):
            vals = run.mean(end)[j]
            hard = run.mean(f"{end}_overlap_hard")[j]
            rows += [[int(t), end, float(v), float(o)] for v, o in zip(vals, hard, strict=True)]
    return rows


def run(args: argparse.Namespace) -> int:
    """Execute ``dmftsolve simulate``."""
    from dmftsolve.simulation.sweeps import sweep

    problem = problem_from_args(args)
    plot_path = check_output_path(args.plot)
    if not args.delta:
        raise ValueError("--delta needs at least one value")
    for v in args.delta:
        if not v > 0:
            raise ValueError(f"--delta values must be > 0, got {v:g}")
    from dmftsolve.population import check_sampling

    check_sampling(problem, max(1, int(round(min(args.delta) * args.d))), "the samples n = δd")
    jobs = len(args.delta) * args.trials
    workers = _workers(args.workers, jobs)
    memory, seconds = simulate_cost(problem, args.d, args.delta, args.trials, workers,
                                    n_test=args.n_test, dtype=args.dtype, hessian=len(args.hessian_at))
    check_cost(args, f"this simulation ({jobs} runs of {problem.training.steps} steps at d={args.d})",
               memory, seconds, "use fewer --steps, --trials, --delta values or a smaller --d")
    kwargs = {"record_every": args.record_every, "n_test": args.n_test,
              "hessian_at": tuple(args.hessian_at), "n_eigs": args.n_eigs, "dtype": args.dtype}
    progress = want_progress(args)
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            result = sweep(problem, args.d, args.delta, trials=args.trials, seed=args.seed,
                           executor=pool, progress=progress,
                           success_threshold=args.success_threshold,
                           first_passage=args.first_passage, **kwargs)
    else:
        result = sweep(problem, args.d, args.delta, trials=args.trials, seed=args.seed,
                       progress=progress, success_threshold=args.success_threshold,
                       first_passage=args.first_passage, **kwargs)
    if not result.ok and not args.json:
        # no table of NaNs: say which runs failed, and how, on one line
        nonfinite = result.diagnostics.get("nonfinite")
        counts = ("" if not nonfinite else " (non-finite runs per δ: " + ", ".join(
            f"δ={d:g}: {c}/{args.trials}" for d, c in zip(args.delta, nonfinite, strict=False)) + ")")
        first = result.message.split("; ")[0]
        raise CommandError(f"{result.status.value}: {first}{counts}; GD diverged: try a smaller --eta")
    for r in result.runs:  # finite but exploding: say so (exit 0: the numbers are what GD did)
        tr = r.mean("train_loss")
        if np.isfinite(tr).all() and tr[-1] > 1e6 * max(tr[0], 1e-12):
            warn(args, f"at δ={r.settings['delta']:g} the train loss grew from {tr[0]:.3g} to "
                       f"{tr[-1]:.3g}: GD is diverging; try a smaller --eta")
    if plot_path:
        _plot(plot_path, result, args.success_threshold)

    trajectories = []
    for r in result.runs:
        trajectories.append({
            "delta": r.settings["delta"], "n": r.settings["n"], "steps": r.steps,
            "cosine_mean": r.mean("cosine"), "cosine_stderr": r.stderr("cosine"),
            "train_loss_mean": r.mean("train_loss"), "test_loss_mean": r.mean("test_loss"),
            "final_cosine": r.cosine[:, -1],
            "success": r.success(args.success_threshold, first_passage=args.first_passage),
            "hessian": r.hessian,
        })
        if problem.bias:
            trajectories[-1] |= {"bias_mean": r.mean("bias"), "bias_stderr": r.stderr("bias")}
    summary = result.to_dict(runs=False)
    summary["success_error"] = result.success_error  # binomial_error: the rate's error, by one rule
    payload = {"command": "simulate", "workers": workers, "summary": summary, "runs": trajectories}

    def table() -> str:
        s = result.settings
        lines = [f"dmftsolve simulate: {problem.describe()}",
                 f"d={s['d']}, trials={s['trials']}, seed={args.seed}, workers={workers}, "
                 f"success = {'cosine at some recorded step' if args.first_passage else 'final cosine'}"
                 f" > {s['success_threshold']:g}", ""]
        lines.append(format_table(
            ["delta", "success", "rate", "cos q30", "cos median", "cos q70",
             "train loss", "test loss"], result.rows()))
        if len(result.runs) == 1:
            run0 = result.runs[0]
            lines += ["", f"mean trajectory over {run0.trials} trials (δ={run0.settings['delta']:g})",
                      format_table(["step", "cosine", "±se", "train loss", "test loss",
                                    "|grad|"], _trajectory_rows(run0))]
        for r in result.runs:
            if r.hessian:
                lines += ["", f"Hessian extreme eigenvalues, δ={r.settings['delta']:g} "
                              f"(mean over trials; overlap = squared overlap with the hard "
                              f"subspace {r.hessian['hard']})",
                          format_table(["step", "end", "eigenvalue", "overlap"],
                                       _hessian_rows(r))]
        if not result.ok:
            lines += ["", f"warning: {result.status.value}: {result.message}"]
        lines.append(f"\nelapsed {result.elapsed:.1f} s")
        if plot_path:
            lines.append(f"figure written to {plot_path}")
        return "\n".join(lines)

    emit(args, payload, table)
    if not result.ok:  # --json: the object above carries the status; exit non-zero all the same
        raise CommandError(f"{result.status.value}: {result.message.split('; ')[0]}")
    return 0
