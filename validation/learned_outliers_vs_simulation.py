"""Hessian outliers along the learned directions: theory (DMFT) against finite-d GD.

The GD Hessian ``∇²L(W_t) = (1/n) Σ_i x_i x_iᵀ ⊗ D_i`` has, besides outliers along the hard
target directions (``validation/spectrum_vs_simulation.py``), outliers whose eigenvectors lie
in ``span(W_t) ⊗ R^m`` (and, once easy directions are learned, in ``span(Θ*)``).
:func:`dmftsolve.hessian.outlier_equation.training_outliers` predicts them from the spiked-model outlier
equation over ``span(Θ*) ⊕ span(W_t)``, with the DMFT law of ``(V*, V^t, D)``. At ``t = 0``
(``W`` independent of the data) that equation is exact; at ``t > 0`` it is a conjecture,
tested here.

Cases (same :class:`~dmftsolve.problem.Problem` for theory and simulation):

* ``quad_min_d6``: σ(r) = r², ``y = min(z², 3)``, δ = 6, η = 0.1, hard direction held at
  zero (restricted dynamics), t = 0, 2, 5, 10: hard outlier below, learned one above.
* ``quad_min_warm``: the same, unrestricted, from a warm start ``M0 = 0.5``, ``Q0 = 0.75``
  (cosine 1/2): ``W_t`` has a component along ``θ*``, so the spike subspace mixes the target
  and the learned direction and the outlier matrix is not block diagonal.

Theory: ``n_seeds`` independent DMFT runs (60 000 paths each); the reported error is the
standard error over seeds. (Splitting one run's paths in two halves underestimates it: the
kernels ``Q``, ``R`` estimated from all paths are common to both halves. For
``quad_min_d6``, t = 5, the half-split error was 0.003 where the seed-to-seed standard
deviation of the hard outlier is about 0.04.) Simulator: the dense Hessian of
:func:`dmftsolve.simulation.simulator.simulate`'s trajectories (replayed by
``spectrum_vs_simulation.gd_states``), all eigenpairs, at d = 1000 and 2000; for each
predicted outlier the simulated eigenvalue whose eigenvector has the largest overlap with the
predicted part of the spike subspace.

Outputs: ``validation/results/learned_outliers_vs_simulation.{md,json}``.
Run: ``python -m validation.learned_outliers_vs_simulation [--quick]`` (about 10 min on one
core; ``--quick`` about 1 min; ``--tiny`` seconds, for ``tests/test_validation_checks.py``;
``--out-dir DIR`` writes elsewhere).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.hessian.outlier_equation import training_outliers
from dmftsolve.results import jsonable
from dmftsolve.simulation.simulator import dense_hessian_matrix
from validation import script_parser
from validation.spectrum_vs_simulation import gd_states

OUT = (Path(sys.argv[sys.argv.index("--out-dir") + 1]) if "--out-dir" in sys.argv[:-1]
       else Path(__file__).resolve().parent / "results")
QUICK = "--quick" in sys.argv
#: the test's configuration (``--tiny``, seconds)
TINY = "--tiny" in sys.argv
N_PATHS = 4000 if TINY else 20_000 if QUICK else 60_000
N_SEEDS = 2 if QUICK or TINY else 5
DS = (150,) if TINY else (600,) if QUICK else (1000, 2000)
TRIALS = 1 if QUICK or TINY else 2


def cases() -> dict[str, dict[str, Any]]:
    return {
        "quad_min_d6": dict(
            problem=Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.1, steps=10,
                                  hold_zero=(0,)),
            delta=6.0, times=(0, 2, 5, 10), hard=(0,),
            flags=dict(unbounded_below=False, unbounded_above=False)),
        "quad_min_warm": dict(
            problem=Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.1, steps=10,
                                  M0=[[0.5]], Q0=[[0.75]]),
            delta=6.0, times=(0, 5, 10), hard=(),
            flags=dict(unbounded_below=False, unbounded_above=False)),
    }


def theory(problem: Problem, delta: float, times: tuple[int, ...], hard: tuple[int, ...],
           flags: dict[str, bool]) -> dict[int, list[dict[str, Any]]]:
    """Outliers per seed and time: a list (over seeds) of lists of outlier dicts."""
    out: dict[int, list[Any]] = {t: [] for t in times}
    for seed in range(N_SEEDS):
        r = solve_dmft(problem, delta, n_paths=N_PATHS, seed=1000 + seed, keep_samples_at=times,
                       errors="batch")
        for t in times:
            s = r.samples(t)
            o = training_outliers(s["D"], s["Vstar"], s["V"], r.M[t], r.Q[t, t], delta, hard=hard,
                                  throw=False, **flags)
            out[t].append({"status": o.status.value, "message": o.message,
                           "left_edge": o.left_edge, "right_edge": o.right_edge,
                           "outliers": [x.to_dict() for x in o.outliers]})
    return out


def simulation(problem: Problem, delta: float, times: tuple[int, ...], hard: tuple[int, ...],
               d: int, trials: int) -> dict[int, list[dict[str, Any]]]:
    """All Hessian eigenpairs' squared overlaps with the hard, easy and learned subspaces."""
    out: dict[int, list[Any]] = {t: [] for t in times}
    k = problem.k
    easy = [j for j in range(k) if j not in hard]
    for j in range(trials):
        for t, X, y, W in gd_states(problem, d, delta, 77, j, times):
            H = dense_hessian_matrix(problem, X, y, W)
            ev, U = scipy.linalg.eigh(H, overwrite_a=True, check_finite=False)
            m = problem.m
            Uv = U.reshape(d, m, -1)
            Wp = W.copy()
            Wp[:k] = 0.0  # the part of W orthogonal to span(Θ*) (Θ* = first k axes)
            basis = scipy.linalg.orth(Wp) if np.linalg.norm(Wp) > 0 else np.zeros((d, 0))
            ov = {"hard": (Uv[list(hard)] ** 2).sum(axis=(0, 1)),
                  "target": (Uv[easy] ** 2).sum(axis=(0, 1)) if easy else np.zeros(ev.size),
                  "learned": (np.einsum("dk,dmj->kmj", basis, Uv) ** 2).sum(axis=(0, 1))}
            out[t].append({"eigs": ev, "overlaps": ov, "M": W[:k].copy()})
    return out


def match(pred: dict[str, Any], sim: dict[str, Any]) -> dict[str, Any]:
    """The simulated eigenpair on the predicted side with the largest overlap with the
    predicted part (the largest of hard / target / learned)."""
    part = max(pred["parts"], key=pred["parts"].get)
    ev, ov = sim["eigs"], sim["overlaps"]
    n_ext = 10
    idx = np.arange(n_ext) if pred["side"] == "left" else np.arange(ev.size - n_ext, ev.size)
    best = int(idx[np.argmax(ov[part][idx])])
    return {"part": part, "location": float(ev[best]),
            "overlap2": {p: float(ov[p][best]) for p in ov}}


def _se(a: np.ndarray) -> float:
    return float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan


def summarize(th: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and standard error over seeds, outlier by outlier (matched by side and order)."""
    keyed: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in th:
        counts: dict[str, int] = {}
        for o in run["outliers"]:
            i = counts.get(o["side"], 0)
            counts[o["side"]] = i + 1
            keyed.setdefault((o["side"], i), []).append(o)
    rows = []
    for (side, i), lst in sorted(keyed.items()):
        loc = np.array([o["location"] for o in lst])
        ov = np.array([o["overlap2"] for o in lst])
        parts = {p: float(np.mean([o["parts"][p] for o in lst])) for p in lst[0]["parts"]}
        rows.append({"side": side, "index": i, "found_in": len(lst), "of": len(th),
                     "location": float(loc.mean()), "location_se": _se(loc),
                     "location_sd": float(loc.std(ddof=1)) if loc.size > 1 else math.nan,
                     "overlap2": float(ov.mean()), "overlap2_se": _se(ov), "parts": parts})
    return rows


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    results: dict[str, Any] = {"n_paths": N_PATHS, "n_seeds": N_SEEDS, "ds": DS, "trials": TRIALS}
    with threadpool_limits(1):
        for name, c in cases().items():
            t0 = time.perf_counter()
            th = theory(c["problem"], c["delta"], c["times"], c["hard"], c["flags"])
            sims = {d: simulation(c["problem"], c["delta"], c["times"], c["hard"], d, TRIALS) for d in DS}
            rec: dict[str, Any] = {"problem": c["problem"].to_dict(), "delta": c["delta"], "times": {}}
            for t in c["times"]:
                rows = summarize(th[t])
                for row in rows:
                    pred = {"side": row["side"], "parts": row["parts"]}
                    row["sim"] = {d: [match(pred, s) for s in sims[d][t]] for d in DS}
                edges = [(r["left_edge"], r["right_edge"]) for r in th[t]]
                sim_ext = {d: [(float(s["eigs"][0]), float(s["eigs"][-1]), s["M"].ravel().tolist())
                               for s in sims[d][t]] for d in DS}
                rec["times"][t] = {"rows": rows, "edges": edges, "sim_extremes": sim_ext,
                                   "status": [r["status"] for r in th[t]]}
                print(f"[{name}] t={t} " + "; ".join(
                    f"{r['side']} {r['location']:.4f}±{r['location_se']:.4f} ov² {r['overlap2']:.3f} "
                    f"({max(r['parts'], key=r['parts'].get)}) sim "
                    + " ".join(f"{m['location']:.4f}/{m['overlap2'][m['part']]:.2f}"
                               for d in DS for m in r["sim"][d]) for r in rows), flush=True)
            rec["seconds"] = time.perf_counter() - t0
            results[name] = rec
    results["total_seconds"] = time.perf_counter() - t_all
    (OUT / "learned_outliers_vs_simulation.json").write_text(json.dumps(jsonable(results)))
    write_markdown(results)


def write_markdown(results: dict[str, Any]) -> None:
    L = ["# Hessian outliers along the learned directions: DMFT vs finite-d GD", "",
         f"Theory: `training_outliers` on {results['n_seeds']} independent DMFT runs of "
         f"{results['n_paths']} paths; ± = standard error over the runs (sd = spread of one run). "
         f"Simulator: dense Hessian of GD, d = {', '.join(map(str, results['ds']))}, "
         f"{results['trials']} trials each; for each predicted outlier, the simulated eigenpair "
         "(among the 10 extreme ones on that side) with the largest squared overlap with the "
         "predicted part (hard / target / learned) of the spike subspace.", "",
         f"Total time {results['total_seconds']:.0f} s.", ""]
    for name in cases():
        rec = results.get(name)
        if rec is None:
            continue
        L += [f"## {name} (δ = {rec['delta']})", "",
              "| t | side | part | predicted λ ± se (sd) | predicted overlap² (hard / target / learned) "
              "| found in | sim λ / overlap² of the part, per d and trial | largest d: sim − predicted "
              "| theory edges (seed 0) |",
              "|---|---|---|---|---|---|---|---|---|"]
        for t, tr in rec["times"].items():
            e0 = tr["edges"][0]
            edge = ", ".join("none" if v is None else f"{v:.4f}" for v in e0)
            if not tr["rows"]:
                ext = "; ".join(f"d={d}: " + " ".join(f"[{a:.3f}, {b:.3f}]" for a, b, _ in v)
                                for d, v in tr["sim_extremes"].items())
                L.append(f"| {t} | – | – | none | – | – | sim extremes {ext} | – | {edge} |")
            for r in tr["rows"]:
                part = max(r["parts"], key=r["parts"].get)
                sims = "; ".join(f"d={d}: " + " ".join(f"{m['location']:.4f}/{m['overlap2'][m['part']]:.2f}"
                                                       for m in ms) for d, ms in r["sim"].items())
                parts = " / ".join(f"{r['parts'][p]:.3f}" for p in ("hard", "target", "learned"))
                big = r["sim"][max(r["sim"], key=int)]
                gap = float(np.mean([m["location"] for m in big])) - r["location"]
                L.append(f"| {t} | {r['side']} | {part} | {r['location']:.4f} ± {r['location_se']:.4f} "
                         f"({r['location_sd']:.4f}) | {parts} | {r['found_in']}/{r['of']} | {sims} "
                         f"| {gap:+.4f} | {edge} |")
        L.append("")
    (OUT / "learned_outliers_vs_simulation.md").write_text("\n".join(L) + "\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options (read by the module's constants); ``--help`` prints them."""
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 600, 2·10⁴ paths, 2 seeds (about 1 min)")
    ap.add_argument("--tiny", action="store_true", help="d = 150, 4000 paths (seconds; the test)")
    ap.add_argument("--out-dir", type=Path, default=OUT, help=f"output directory (default {OUT})")
    return ap.parse_args(argv)


if __name__ == "__main__":
    parse_args()
    main()
