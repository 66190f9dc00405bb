"""Does giving up on a draw that is not growing lose draws that would have passed?

``TransitionSettings.give_up_factor`` (default :data:`GIVE_UP_FACTOR`, since 0.9.0) ends a DMFT
draw of ``dmftsolve transition`` as a failure at the first step ``t ≥ T/4`` at which even ``F``
times its growth over the last ``W = T/8`` steps, kept up to step ``T``, would leave its success
statistic below 0.4 (1/2 less ``GIVE_UP_MARGIN``;
:func:`~dmftsolve.thresholds.finite_d_transition.give_up_step`). Near δ_50
about half the draws never pass and run all ``T`` steps, so giving up saves about half a
search's steps; a draw whose growth later speeds up more than ``F``-fold would be lost.

For each case this runs draws as the search does (stratified starts, each draw stopping at its
first passage) but **without** giving up, at δ around the case's δ_50, records each draw's
success statistic, and reports for each factor ``F`` how many draws that passed the rule would
have stopped ("lost"), how many that did not pass it stops, and the fraction of the steps it
saves; and, for every draw that passed, the smallest factor that keeps it (the largest, over the
steps it was checked at, of ``(0.4 − p_t)·W / (growth·(T − t))``). The first case is the one the
default was chosen on (the smallest of 2, 3, 4, 6 that lost none, then raised to 20 for margin);
the others check it. The margin was added after ``quad_z2m1_d2000`` showed a draw that stalled
at 0.48–0.49 and then passed.

``--cache DIR`` keeps each case's statistics (``DIR/CASE.npz``) and reuses them, so the report
can be rebuilt for another rule without the draws.

Run ``python validation/investigations/give_up.py [--only CASE,...] [--tiny]`` (about 15 CPU-min;
``--tiny`` is the test's configuration); output ``results/give_up.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem, __version__
from dmftsolve.dynamics.dmft import GIVE_UP_MARGIN, give_up_window
from dmftsolve.results import cpu_model, git_commit
from dmftsolve.thresholds.finite_d_transition import (
    GIVE_UP_FACTOR,
    TransitionSettings,
    draw_starts,
    give_up_step,
    sane_steps,
    solve_draw,
    transition_directions,
)

OUT = Path(__file__).resolve().parent / "results"
FACTORS = (2.0, 3.0, 4.0, 6.0, 10.0, GIVE_UP_FACTOR)

#: name -> problem, d, the δ of the draws, draws per δ, seed (the first: where F was chosen)
CASES: dict[str, dict[str, Any]] = {
    "gelu_z2m1_d2000": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 400, "m": 1,
                        "d": 2000, "deltas": (6.5, 7, 7.5, 8), "draws": 32, "seed": 7},
    "gelu_z2m1_d2000_seed12": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 400,
                               "m": 1, "d": 2000, "deltas": (6.5, 7, 7.5, 8), "draws": 32, "seed": 12},
    "gelu_z2m1_d500": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 400, "m": 1,
                       "d": 500, "deltas": (5.5, 6, 6.5, 7), "draws": 32, "seed": 11},
    "gelu_z2m1_d4000": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 400, "m": 1,
                        "d": 4000, "deltas": (6.5, 7, 7.5, 8, 8.5), "draws": 32, "seed": 11},
    "gelu_z2_d1000": {"target": "z**2", "activation": "gelu", "eta": 0.5, "steps": 400, "m": 1,
                      "d": 1000, "deltas": (9, 10, 11, 12, 13), "draws": 32, "seed": 11},
    "gelu_z2_d3000": {"target": "z**2", "activation": "gelu", "eta": 0.5, "steps": 400, "m": 1,
                      "d": 3000, "deltas": (10, 11, 12, 13, 14), "draws": 32, "seed": 11},
    "gelu_min3_d1000": {"target": "min(z**2, 3)", "activation": "gelu", "eta": 0.5, "steps": 400,
                        "m": 1, "d": 1000, "deltas": (9, 10, 11, 12, 13), "draws": 32, "seed": 11},
    "quad_z2_d1000": {"target": "z**2", "activation": "quad", "eta": 0.1, "steps": 600, "m": 1,
                      "d": 1000, "deltas": (5, 5.5, 6, 6.5, 7), "draws": 32, "seed": 11},
    "quad_z2m1_d2000": {"target": "z**2 - 1", "activation": "quad", "eta": 0.1, "steps": 600, "m": 1,
                        "d": 2000, "deltas": (3.5, 4, 4.5, 5), "draws": 32, "seed": 11},
    "gelu_z2m1_m2_d1000": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 400,
                           "m": 2, "d": 1000, "deltas": (3, 3.5, 4), "draws": 16, "seed": 11},
    "gelu_z2_m2_d1000": {"target": "z**2", "activation": "gelu", "eta": 0.5, "steps": 400, "m": 2,
                         "d": 1000, "deltas": (4.5, 5, 5.5, 6), "draws": 16, "seed": 11},
    "gelu_z1z2_m2_d1000": {"target": "z1*z2", "activation": "gelu", "eta": 0.5, "steps": 400, "m": 2,
                           "d": 1000, "deltas": (4, 4.5, 5), "draws": 16, "seed": 11},
    "gelu_easyhard_m2_d1000": {"target": "z1 + z2**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 400,
                               "m": 2, "d": 1000, "deltas": (3.5, 4, 4.5), "draws": 16, "seed": 11},
}
TINY = {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 60, "m": 1, "d": 300,
        "deltas": (4.0, 9.0), "draws": 4, "seed": 0, "n_paths": 2000}


def statistics(c: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    """Each draw's success statistic up to its passage or step ``T`` (no giving up), and the
    CPU seconds."""
    p = Problem.build(target=c["target"], activation=c["activation"], eta=c["eta"], steps=c["steps"],
                      m=c["m"])
    s = TransitionSettings(draws=c["draws"], seed=c["seed"], give_up_factor=None,
                           n_paths=c.get("n_paths"))
    hard = transition_directions(p)
    rows = []
    t0 = time.process_time()
    with threadpool_limits(1):
        for delta in c["deltas"]:
            starts = draw_starts(p, float(delta), c["d"], s, hard)
            for k in range(c["draws"]):
                r = solve_draw(p, float(delta), c["d"], k, starts[k], s, c["steps"], hard, stop=True)
                per = np.asarray(r.cosine_per_direction, dtype=float)[:, list(hard)].min(axis=1)
                upto = sane_steps(r)
                rows.append({"delta": float(delta), "ok": bool(r.ok), "statistic": per[:upto]})
    return rows, time.process_time() - t0


def cached_statistics(c: dict[str, Any], path: Path | None) -> tuple[list[dict[str, Any]], float]:
    """:func:`statistics`, read from ``path`` (an ``.npz`` of NaN-padded rows) when it holds the
    same case, else computed and written there."""
    if path is not None and path.exists():
        z = np.load(path)
        if json.loads(str(z["case"])) == json.loads(json.dumps(c)):
            rows = [{"delta": float(x), "ok": bool(o), "statistic": p[np.isfinite(p)]}
                    for x, o, p in zip(z["delta"], z["ok"], z["statistic"], strict=True)]
            return rows, float(z["cpu"])
    rows, cpu = statistics(c)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        width = max(r["statistic"].size for r in rows)
        P = np.full((len(rows), width), np.nan)
        for i, r in enumerate(rows):
            P[i, : r["statistic"].size] = r["statistic"]
        np.savez(path, case=json.dumps(c), cpu=cpu, statistic=P,
                 delta=[r["delta"] for r in rows], ok=[r["ok"] for r in rows])
    return rows, cpu


def needed_factor(p: np.ndarray, T: int, level: float = 0.5) -> float:
    """The smallest factor that keeps a draw that passes (0 if no step checks it; inf if it
    stalls more than ``GIVE_UP_MARGIN`` below ``level`` at a checked step)."""
    W = give_up_window(T)
    short = level - GIVE_UP_MARGIN
    above = np.nonzero(p > level)[0]
    end = int(above[0]) if above.size else p.size
    need = 0.0
    for t in range(W, end):
        if 4 * t < T or p[t] >= short:
            continue
        g = max(p[t] - p[t - W], 0.0)
        need = max(need, math.inf if g == 0 else (short - p[t]) * W / (g * (T - t)))
    return need


def summarise(name: str, c: dict[str, Any], rows: list[dict[str, Any]], cpu: float) -> dict[str, Any]:
    T = c["steps"]
    passed = [r for r in rows if np.any(r["statistic"] > 0.5)]
    steps_run = [int(np.argmax(r["statistic"] > 0.5)) if np.any(r["statistic"] > 0.5)
                 else r["statistic"].size - 1 for r in rows]
    out: dict[str, Any] = {"case": name, **{k: v for k, v in c.items() if k != "deltas"},
                           "deltas": list(c["deltas"]), "draws_total": len(rows), "passed": len(passed),
                           "failed_solves": sum(not r["ok"] for r in rows), "cpu_seconds": cpu,
                           "needed": sorted(needed_factor(r["statistic"], T) for r in passed)}
    by_factor = {}
    for F in FACTORS:
        lost = stopped = saved = 0
        for r, run in zip(rows, steps_run, strict=True):
            g = give_up_step(r["statistic"], T, F)
            if g is None:
                continue
            if np.any(r["statistic"] > 0.5):
                lost += 1
            else:
                stopped += 1
                saved += run - g
        share = saved / max(sum(steps_run), 1)
        by_factor[f"{F:g}"] = {"lost": lost, "stopped": stopped, "steps_saved": share}
    out["by_factor"] = by_factor
    return out


def report(results: dict[str, Any]) -> str:
    F = f"{GIVE_UP_FACTOR:g}"
    lines = [
        "# Giving up on draws that are not growing (`give_up_factor`)",
        "",
        "Generated by `python validation/investigations/give_up.py`. Draws as `dmftsolve transition` runs "
        "them (stratified starts, 2·10⁴ kernel paths at width 1 and 8·10⁴ at width 2, each stopping at its "
        "first passage) but run to step T when they do not pass; for each factor F, the draws that passed "
        "which the rule would have stopped (lost), the draws that did not pass which it stops, and the "
        "share of the steps it saves. Needed: for the draws that passed, the largest factor any of them "
        "needed to be kept. The first row is where the default was chosen.",
        "",
        f"| case | d | δ | draws (passed) | lost at F = 2 / 3 / 4 / 6 / 10 / {F} | steps saved at F = {F} "
        "| largest factor needed | CPU s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total = lost_default = passed = 0
    for name, r in results.items():
        bf = r["by_factor"]
        lost = " / ".join(str(bf[f"{x:g}"]["lost"]) for x in FACTORS)
        need = max(r["needed"], default=0.0)
        deltas = ", ".join(f"{x:g}" for x in r["deltas"])
        lines.append(f"| {name} (m = {r['m']}) | {r['d']} | {deltas} | {r['draws_total']} ({r['passed']}) | "
                     f"{lost} | {bf[F]['steps_saved']:.2f} | {need:.2f} | {r['cpu_seconds']:.0f} |")
        total += r["draws_total"]
        passed += r["passed"]
        lost_default += bf[F]["lost"]
    lines += ["", f"In all: {total} draws, {passed} passed, {lost_default} of them lost at F = {F}.",
              "Versions: " + ", ".join(sorted({str(r.get("version", "?")) for r in results.values()})) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--tiny", action="store_true", help="a small configuration, not stored (the test)")
    ap.add_argument("--cache", default=None, help="directory for each case's statistics (reused)")
    a = ap.parse_args(argv)
    cases = {"tiny": TINY} if a.tiny else (
        CASES if a.only is None else {k: CASES[k] for k in a.only.split(",")})
    path = OUT / "give_up.json"
    results = {} if a.tiny or not path.exists() else json.loads(path.read_text())
    for name, c in cases.items():
        print(f"{name} ...", flush=True)
        rows, cpu = cached_statistics(c, None if a.cache is None else Path(a.cache) / f"{name}.npz")
        results[name] = summarise(name, c, rows, cpu) | {"version": __version__, "commit": git_commit(),
                                                         "cpu": cpu_model()}
        if not a.tiny:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, indent=1))
            (OUT / "give_up.md").write_text(report(results))
    print(report(results))
    return results


if __name__ == "__main__":
    main()
