"""``dmftsolve spectrum``: bulk Hessian spectrum and outliers at a step t (docs/theory.md §3–§4)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import numpy as np

from dmftsolve.cli._common import (
    StoreGiven,
    add_output_arguments,
    add_problem_arguments,
    add_progress_argument,
    add_seed_argument,
    check_cost,
    command_parser,
    dmft_cost,
    emit,
    format_pm,
    format_table,
    given,
    int_at_least,
    problem_from_args,
    want_progress,
)

DESCRIPTION = """\
The Hessian of the empirical risk after --t GD steps in the limit n, d ->
infinity with n/d = --delta: its bulk density, edges and atoms, the outliers
along the hard target directions (held at zero overlap) and along span(target)
+ span(W_t), and their eigenvectors' squared overlaps, each number with its
error. At t = 0 the law of the training fields is exact (quadrature; the error
is the change from 2/3 of the nodes); at t > 0 it comes from --replicates DMFT
runs of --paths paths, and a number is the mean over these seeds with its
standard error.
"""

EXAMPLES = """\
dmftsolve spectrum --target 'Min(z**2, 3)' --activation quad --delta 3
dmftsolve spectrum --target 'Min(z**2, 3)' --activation quad --delta 3 --t 2
dmftsolve spectrum --delta 3 --t 5 --paths 20000 --json > spectrum.json
"""

#: A run whose |Q(t,t)|, |M_t| or |D| exceeds this has diverged (GD blows up at this step size).
DIVERGENCE_LIMIT = 1e12
#: Default Monte Carlo paths per seed and seeds for t > 0 (see DESCRIPTION for the measured errors).
DEFAULT_PATHS = 400_000
DEFAULT_REPLICATES = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command_parser(subparsers, "spectrum", "Hessian bulk spectrum and outliers at step t, with errors",
                       DESCRIPTION, EXAMPLES, usage="--delta X [options]")
    add_problem_arguments(p, steps=None,
                          steps_help="the same as --t; if both are given, equal (default: --t)")
    g = p.add_argument_group("spectrum")
    g.add_argument("--delta", type=float, required=True, metavar="X", help="sample ratio n/d (required)")
    g.add_argument("--t", type=int_at_least("--t", 0), default=0, metavar="N", action=StoreGiven,
                   help="GD step of the Hessian (default: %(default)s)")
    g.add_argument("--paths", type=int_at_least("--paths", 1000, 10**8), default=DEFAULT_PATHS,
                   metavar="N", help="t > 0: DMFT paths per seed (default: %(default)s)")
    g.add_argument("--replicates", type=int_at_least("--replicates", 1, 1000), default=DEFAULT_REPLICATES,
                   metavar="N", help="t > 0: DMFT seeds for the errors (default: %(default)s)")
    add_seed_argument(g, "t > 0: the first seed")
    g.add_argument("--nodes", type=int_at_least("--nodes", 8, 2000), default=None, metavar="N",
                   help="t = 0: nodes per axis (default: 40000 atoms at most)")
    g.add_argument("--points", type=int_at_least("--points", 2, 100_000), default=200, metavar="N",
                   help="density grid points (default: %(default)s)")
    g.add_argument("--plot", metavar="FILE", default=None,
                   help="write the density figure (default: none)")
    add_progress_argument(g)
    add_output_arguments(p)
    p.set_defaults(func=run)


# --------------------------------------------------------------------------- formatting
def _stat(values: list[float]) -> dict[str, Any]:
    """Mean, standard error over seeds (``None`` with one value) and the values."""
    v = np.asarray(values, dtype=float)
    se = float(np.std(v, ddof=1) / math.sqrt(v.size)) if v.size > 1 else None
    return {"mean": float(v.mean()), "se": se, "values": [float(x) for x in v], "n": int(v.size)}


# --------------------------------------------------------------------------- one law
def _analyse(law: Any, delta: float, lam: float, hard: tuple[int, ...], M: np.ndarray, Q: np.ndarray,
             V: np.ndarray, hard_outliers: Any = None) -> dict[str, Any]:
    """Bulk edges and atoms, hard and training outliers of one law.

    ``hard_outliers``: the hard outliers already computed (:func:`hard_spectrum`), else computed here.
    """
    from dmftsolve.hessian.outlier_equation import outliers, training_outliers
    from dmftsolve.hessian.spectrum import bulk_spectrum

    bulk = bulk_spectrum(law, delta, lam=lam, npoints=0, throw=False)
    out: dict[str, Any] = {"bulk": bulk}
    if bulk.left_edge is not None:
        out["hard"] = hard_outliers if hard_outliers is not None else \
            outliers(law, law.Vstar[:, list(hard)], delta, lam=lam, throw=False)
    sides = [s for s, e in (("left", bulk.left_edge), ("right", bulk.right_edge)) if e is not None]
    if sides:
        side = "both" if len(sides) == 2 else sides[0]
        out["training"] = training_outliers(law, law.Vstar, V, M, Q, delta, hard=hard, side=side, lam=lam,
                                            throw=False)
    return out


def _grid(bulk: Any, law: Any, delta: float, lam: float, points: int) -> np.ndarray:
    """Density grid over the bulk; an unbounded side ends at ``λ +`` the 1e-3 quantile of the law of D."""
    w = law.probabilities
    D = law.D
    ev = D[:, 0, 0][:, None] if law.m == 1 else np.linalg.eigvalsh(D)
    order_lo, order_hi = np.argsort(ev[:, 0]), np.argsort(ev[:, -1])
    q_lo = float(np.interp(1e-3, np.cumsum(w[order_lo]), ev[order_lo, 0]))
    q_hi = float(np.interp(1 - 1e-3, np.cumsum(w[order_hi]), ev[order_hi, -1]))
    left = bulk.left_edge if bulk.left_edge is not None else lam + min(0.0, q_lo)
    right = bulk.right_edge if bulk.right_edge is not None else lam + max(0.0, q_hi)
    width = max(right - left, 1e-12)
    return np.linspace(left - 0.05 * width, right + 0.05 * width, points)


def _summarise(results: list[dict[str, Any]], kind: str, errors: list[dict[str, Any]] | None = None
               ) -> tuple[dict[str, Any], list[str]]:
    """Combine per-law results into values with errors.

    ``kind="replicates"``: mean ± standard error over ``results`` (one per seed).
    ``kind="quadrature"``: ``results[0]`` at the higher order; the error is the
    difference to ``results[1]`` (the lower order).
    """
    notes: list[str] = []

    def combine(vals: list[float]) -> dict[str, Any]:
        if kind == "replicates":
            return _stat(vals)
        err = None
        if len(vals) == 2:
            # below the solvers' tolerances (about 1e-10 relative) a difference means nothing
            err = abs(vals[0] - vals[1])
            err = 0.0 if err == 0.0 else max(err, 1e-9 * max(1.0, abs(vals[0])))
        return {"value": float(vals[0]), "error": err, "values": [float(v) for v in vals]}

    summary: dict[str, Any] = {}
    for name in ("left_edge", "right_edge"):
        vals = [getattr(r["bulk"], name) for r in results]
        if all(v is None for v in vals):
            summary[name] = None
        elif any(v is None for v in vals):
            notes.append(f"{name.replace('_', ' ')}: unbounded for some laws only")
            summary[name] = combine([v for v in vals if v is not None])
        else:
            summary[name] = combine(vals)
    masses = [sum(m for _, m in r["bulk"].atoms) for r in results]
    summary["atom_mass"] = combine(masses) if any(m > 0 for m in masses) else None
    summary["atom_location"] = float(results[0]["bulk"].settings["lam"])

    def rows(key: str, fields: tuple[str, ...], split_side: bool) -> list[dict[str, Any]]:
        groups: dict[str, list[list[Any]]] = {}
        for r in results:
            res = r.get(key)
            per_side: dict[str, list[Any]] = {}
            for o in (res.outliers if res is not None else []):
                per_side.setdefault(o.side if split_side else "left", []).append(o)
            for s in ("left", "right"):
                groups.setdefault(s, []).append(sorted(per_side.get(s, []), key=lambda o: o.location))
        out = []
        for s, per_law in groups.items():
            counts = [len(x) for x in per_law]
            if len(set(counts)) > 1:
                label = "hard" if key == "hard" else "training"
                notes.append(f"{label} {s} outliers: the number differs between "
                             f"{'seeds' if kind == 'replicates' else 'quadrature orders'} {counts} "
                             "(an outlier near the edge); each is averaged over the laws that have it")
            for j in range(max(counts, default=0)):
                have = [x[j] for x in per_law if len(x) > j]
                row: dict[str, Any] = {"side": s, "n_laws": len(have)}
                for f in fields:
                    vals = [o.location if f == "location" else
                            o.overlap2 if f == "overlap2" else o.parts[f] for o in have]
                    row[f] = combine(vals)
                out.append(row)
        return out

    summary["hard_outliers"] = rows("hard", ("location", "overlap2"), False)
    summary["training_outliers"] = rows("training", ("location", "hard", "target", "learned"), True)
    return summary, notes


def _pm(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "none"
    if "mean" in entry:
        return format_pm(entry["mean"], entry["se"])
    return format_pm(entry["value"], entry["error"])


# --------------------------------------------------------------------------- the command
def run(args: argparse.Namespace) -> int:
    from dmftsolve.checks import check_delta
    from dmftsolve.cli._common import check_output_path
    from dmftsolve.hessian.law import Law
    from dmftsolve.results import SolverError
    from dmftsolve.thresholds.restricted_hessian import hard_spectrum, restricted
    from dmftsolve.thresholds.settings import ThresholdSettings

    if given(args, "steps") and not given(args, "t"):  # --steps T alone: the Hessian at step T
        if args.steps < 0:
            raise ValueError(f"--steps must be >= 0, got {args.steps}")
        args.t = args.steps
    if args.steps is not None and args.steps != args.t:
        raise ValueError(f"--steps {args.steps} differs from --t {args.t}: spectrum runs exactly --t GD "
                         "steps; give one of them")
    args.steps = args.t
    delta = check_delta(args.delta)
    args.plot = check_output_path(args.plot)
    problem = problem_from_args(args)
    prob, hard = restricted(problem)
    lam = prob.training.lam
    t = args.t
    k, m = prob.k, prob.m
    failures: list[str] = []

    if t == 0:
        law_hi = Law.initial(prob, nodes=args.nodes)
        nodes = int(law_hi.diagnostics["nodes"])
        law_lo = Law.initial(prob, nodes=max(4, (2 * nodes) // 3), error=False)
        M0 = np.array(prob.training.init.overlaps(k, m), dtype=float)
        M0[list(prob.training.hold_zero), :] = 0.0
        Q0 = np.array(prob.training.init.gram(m), dtype=float)
        results = [_analyse(L, delta, lam, hard, M0, Q0, L.V) for L in (law_hi, law_lo)]
        x = _grid(results[0]["bulk"], law_hi, delta, lam, args.points)
        dens = _density(law_hi, delta, lam, x)
        summary, notes = _summarise(results, "quadrature")
        how = (f"t = 0: exact law by quadrature, {law_hi.n} atoms ({nodes} nodes per coordinate); "
               f"errors = difference to {law_lo.diagnostics['nodes']} nodes; no randomness")
        law_info = {"kind": "quadrature", "high": law_hi.summary(), "low": law_lo.summary()}
        if law_hi.diagnostics.get("unresolved_kinks"):
            notes.append(f"kinks not on a coordinate axis: {law_hi.diagnostics['unresolved_kinks']} "
                         "(slower quadrature convergence; see the error)")
        seeds: list[int] = []
        bulks = [results[0]["bulk"]]
    else:
        memory, seconds = dmft_cost(prob, args.paths, steps=t, replicate=False, keep_samples_at=(t,))
        check_cost(args, "this spectrum", memory, seconds * args.replicates,
                   "use fewer --paths or --replicates, or a smaller --t")
        seeds = [args.seed + r for r in range(args.replicates)]
        results, laws = [], []
        progress = want_progress(args)
        for i, seed in enumerate(seeds):
            if progress:
                print(f"dmftsolve spectrum: seed {seed} ({i + 1} of {len(seeds)}): DMFT with "
                      f"{args.paths} paths, {t} steps", file=sys.stderr, flush=True)
            # restricted problem -> DMFT -> law at t -> hard outliers; "strict" tails and 400 scan
            # points: an unbounded law has no left edge (no hard outliers), as in the bulk below
            hs = hard_spectrum(problem, delta, t, keep_law=True, throw=False, settings=ThresholdSettings(
                n_paths=args.paths, seed=seed, tails="strict", outlier_points=400))
            if hs.law is None:
                raise SolverError(f"DMFT at seed {seed}: {hs.status.value}: {hs.message} "
                                  "(GD diverges? try a smaller --eta)", hs)
            _check_divergence(hs, t, seed)
            laws.append(hs.law)
            # the learned coordinates are W_tᵀx: remove the (trained) bias from the pre-activations
            V = hs.law.V if hs.b is None else hs.law.V - hs.b
            results.append(_analyse(hs.law, delta, lam, hard, hs.M, hs.Q, V, hard_outliers=hs.outliers))
        x = _grid(results[0]["bulk"], laws[0], delta, lam, args.points)
        dens = _density(laws[0], delta, lam, x)  # one seed: the density is a picture, not a printed number
        summary, notes = _summarise(results, "replicates")
        how = (f"t = {t}: DMFT Monte Carlo, {len(seeds)} seed(s) {seeds[0]}..{seeds[-1]} × {args.paths} "
               "paths; values are mean ± standard error over the seeds")
        if len(seeds) == 1:
            notes.append("one seed: no error estimate (use --replicates >= 2)")
        law_info = {"kind": "monte_carlo", "paths": args.paths, "seeds": seeds}
        bulks = [r["bulk"] for r in results]

    for label, r in (("bulk", "bulk"), ("hard outliers", "hard"), ("training outliers", "training")):
        for j, res_j in enumerate(results):
            obj = res_j.get(r)
            if obj is not None and not obj.ok:
                who = f"seed {seeds[j]}" if seeds else ("quadrature" if j == 0 else "lower-order quadrature")
                failures.append(f"{label} ({who}): {obj.status.value}: {obj.message}")
    # the same caveat from every seed: once, without the per-seed numbers in parentheses
    warnings_seen = sorted({w.split(" (")[0] for b in bulks for w in b.warnings})

    def as_dict(res: Any) -> dict[str, Any] | None:
        if res is None:
            return None
        d = {key: v for key, v in res.to_dict().items() if key not in ("x", "density")}
        if hasattr(res, "outliers"):
            d["outliers"] = [o.to_dict() for o in res.outliers]
        return d

    payload = {"problem": prob.to_dict(), "delta": delta, "t": t, "hard": list(hard), "law": law_info,
               "method": how, "summary": summary, "notes": notes, "warnings": warnings_seen,
               "density": {"x": x.tolist(), "density": dens.tolist()},
               "per_law": [{"seed": seeds[j] if seeds else None, "bulk": as_dict(r["bulk"]),
                            "hard_outliers": as_dict(r.get("hard")),
                            "training_outliers": as_dict(r.get("training"))} for j, r in enumerate(results)],
               "failures": failures}

    def table() -> str:
        out = [f"dmftsolve spectrum: {prob.describe()}, δ={delta:g}, t={t}", how, ""]
        idx = np.linspace(0, x.size - 1, min(12, x.size)).astype(int)
        which = "" if t == 0 else f", first seed ({seeds[0]}) only"
        out += [f"density (coarse{which})", format_table(["x", "density"], [[x[i], dens[i]] for i in idx]),
                ""]
        le = _pm(summary["left_edge"]) if summary["left_edge"] is not None else \
            "none (law of D unbounded below)"
        re_ = _pm(summary["right_edge"]) if summary["right_edge"] is not None else \
            "none (law of D unbounded above)"
        atoms = "none" if summary["atom_mass"] is None else \
            f"at {summary['atom_location']:g}, mass {_pm(summary['atom_mass'])}"
        rows = [["left edge", le], ["right edge", re_], ["atoms", atoms]]
        out += [format_table(["quantity", "value"], rows), ""]
        out.append("outliers along span(target) + span(W_t) (overlap² split: hard, other target, learned)")
        lrows = [[r["side"], _pm(r["location"]), _pm(r["hard"]), _pm(r["target"]), _pm(r["learned"])]
                 for r in summary["training_outliers"]]
        out.append(format_table(["side", "location", "overlap² hard", "other target", "learned"], lrows)
                   if lrows else "none")
        out += ["", "hard outliers (below the left edge)"]
        hrows = [[_pm(r["location"]), _pm(r["overlap2"])] for r in summary["hard_outliers"]]
        if summary["left_edge"] is None:
            out.append("none: no left edge (law of D unbounded below), hard outliers are ill-posed")
        else:
            out.append(format_table(["location", "overlap² with hard subspace"], hrows) if hrows else "none")
        out += [f"note: {n}" for n in notes]
        out += [f"warning: {w}" for w in warnings_seen]
        out += [f"failed: {f}" for f in failures]
        return "\n".join(out)

    emit(args, payload, table)
    if args.plot:
        _plot(args.plot, x, dens, summary, delta, t)
    if failures:
        raise SolverError(f"{len(failures)} part(s) failed; first: {failures[0]}")
    return 0


def _density(law: Any, delta: float, lam: float, x: np.ndarray) -> np.ndarray:
    from dmftsolve.hessian.spectrum import density
    return density(law, delta, x, lam=lam)


def _check_divergence(hs: Any, t: int, seed: int) -> None:
    """Raise SolverError when the run at step ``t`` (a :class:`HardSpectrum` with its law) is
    non-finite or overflowing (GD diverged)."""
    from dmftsolve.results import SolverError

    checks = {"Q(t,t)": hs.Q, "M_t": hs.M, "D": hs.law.D, "V": hs.law.V}
    for name, arr in checks.items():
        a = np.asarray(arr, dtype=float)
        if not np.all(np.isfinite(a)):
            raise SolverError(f"DMFT at seed {seed}: non-finite {name} at step {t}: GD diverges at this "
                              "step size; try a smaller --eta")
        big = float(np.max(np.abs(a))) if a.size else 0.0
        if big > DIVERGENCE_LIMIT:
            raise SolverError(f"DMFT at seed {seed}: max |{name}| = {big:.3g} > {DIVERGENCE_LIMIT:.0e} at "
                              f"step {t}: GD diverges at this step size; try a smaller --eta")


def _plot(path: str, x: np.ndarray, dens: np.ndarray, summary: dict[str, Any], delta: float, t: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, dens, label="bulk density")
    for r in summary["hard_outliers"]:
        loc = r["location"].get("mean", r["location"].get("value"))
        ov = r["overlap2"].get("mean", r["overlap2"].get("value"))
        ax.axvline(loc, color="C3", ls="--", label=f"hard outlier (overlap² {ov:.2f})")
    ax.set_xlabel("eigenvalue")
    ax.set_title(f"Hessian spectrum, δ={delta:g}, t={t}")
    ax.legend()
    from dmftsolve.cli._common import write_figure

    write_figure(fig, path, dpi=100, bbox_inches="tight")
