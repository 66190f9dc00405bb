"""Finite-d GD transitions from the DMFT: a warm start at the 1/√d overlap of a random start.

At finite ``d`` a random start has overlap ``θ*ᵀw0/‖w0‖ ~ N(0, 1/d)`` with the hard direction;
GD succeeds (final cosine > 1/2) when that overlap is amplified to O(1) within the time budget
(``docs/findings.md`` finding c). This script asks the DMFT directly: unrestricted GD from the
warm start ``M0 = c/√d``, ``Q0 = 1 − M0²`` (``q0 = 1``), with ``c = 0.674`` the median of
``|N(0, 1)|``, so the predicted 50 % point is the δ at which the median start succeeds. The
paths are paired by reflection ``V* → −V*`` (``solve_dmft(..., reflect=(0,))``), which removes
the ``N^{-1/2}`` Monte Carlo seeding of the hard direction (without it the overlap drifts to
O(1) from ``M0 = 0``).

For each case and ``d``: the smallest δ on a grid with final cosine > 1/2, refined by
bisection (``scipy.optimize.bisect`` on the sign of ``cosine_T − 1/2``), for two DMFT seeds.
Compared with the simulator's δ_50 from ``validation/investigations/results/convention_hunt.md`` (same
problems, 1000 GD steps; here ``T`` steps).

Outputs ``validation/investigations/results/finite_d_escape.{md,json}``.
Run: ``python validation/investigations/finite_d_escape.py [--quick]`` (about 10 min on one core).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import bisect

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.results import jsonable

OUT = Path(__file__).resolve().parent / "results"
QUICK = "--quick" in sys.argv
C_MEDIAN = 0.6745  # median of |N(0, 1)|
N_PATHS = 5000 if QUICK else 20_000
SEEDS = (1,) if QUICK else (1, 2)
DS = (500,) if QUICK else (500, 1000, 2000)
T = 100 if QUICK else 400

#: name -> (target, activation, η, δ grid, simulator δ_50 at d = 500/1000/2000 from convention_hunt.md)
CASES: dict[str, tuple[str, str, float, tuple[float, ...], dict[int, float]]] = {
    "gelu_z2": ("z**2", "gelu", 0.5, (4.0, 6.0, 8.0, 11.0, 15.0, 20.0), {500: 10.6, 1000: 10.1, 2000: 11.0}),
    "gelu_z2_centred": ("z**2 - 1", "gelu", 0.5, (3.0, 4.0, 5.0, 6.5, 8.0, 11.0),
                        {500: 6.67, 1000: 6.50, 2000: 6.75}),
}


def final_cosine(target: str, activation: str, eta: float, d: int, delta: float, seed: int) -> float:
    m0 = C_MEDIAN / math.sqrt(d)
    p = Problem.build(target=target, activation=activation, eta=eta, steps=T, M0=[[m0]],
                      Q0=[[1.0 - m0**2]])
    r = solve_dmft(p, delta, n_paths=N_PATHS, seed=seed, reflect=(0,), errors="batch", throw=False)
    if not r.ok:
        return math.nan
    return float(r.cosine[-1])


def threshold(target: str, activation: str, eta: float, grid: tuple[float, ...], d: int,
              seed: int) -> dict[str, Any]:
    seen: dict[float, float] = {}

    def f(delta: float) -> float:
        if delta not in seen:
            seen[delta] = final_cosine(target, activation, eta, d, delta, seed)
        return seen[delta] - 0.5

    prev = None
    for x in grid:
        if f(x) > 0:
            break
        prev = x
    else:
        return {"delta_50": None, "message": f"cosine < 1/2 up to δ = {grid[-1]}", "evaluations": seen}
    if prev is None:
        return {"delta_50": None, "message": f"cosine > 1/2 already at δ = {grid[0]}", "evaluations": seen}
    root = bisect(f, prev, x, xtol=0.1)
    lo = max(v for v, c in seen.items() if c <= 0.5 and v <= root + 0.1)
    hi = min(v for v, c in seen.items() if c > 0.5 and v >= lo)
    return {"delta_50": 0.5 * (lo + hi), "bracket": (lo, hi), "evaluations": seen}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    res: dict[str, Any] = {"settings": {"n_paths": N_PATHS, "seeds": SEEDS, "ds": DS, "T": T,
                                        "c": C_MEDIAN, "quick": QUICK}, "cases": {}}
    for name, (target, act, eta, grid, sim) in CASES.items():
        rows = {}
        for d in DS:
            per = [threshold(target, act, eta, grid, d, s) for s in SEEDS]
            vals = [r["delta_50"] for r in per if r["delta_50"] is not None]
            rows[d] = {"per_seed": per, "mean": float(np.mean(vals)) if vals else None,
                       "sim_delta_50": sim.get(d)}
            print(f"[{name}] d={d}: DMFT δ_50 {[r['delta_50'] for r in per]} sim {sim.get(d)}", flush=True)
        res["cases"][name] = {"target": target, "activation": act, "eta": eta, "rows": rows}
    res["seconds"] = time.perf_counter() - t0
    if QUICK:
        return
    (OUT / "finite_d_escape.json").write_text(json.dumps(jsonable(res)))
    L = ["# Finite-d GD transitions from the DMFT (warm start at the median 1/√d overlap)", "",
         f"DMFT: unrestricted, M0 = {C_MEDIAN}/√d, {N_PATHS} paths paired by reflection, T = {T} "
         f"steps, seeds {list(SEEDS)}; δ_50 = midpoint of the bisection bracket (width ≤ 0.1) of "
         "final cosine = 1/2. Simulator δ_50: `convention_hunt.md` (1000 steps, 8 trials per δ).",
         "", f"Total time {res['seconds']:.0f} s.", "",
         "| case | d | DMFT δ_50 per seed | mean | simulator δ_50 |", "|---|---|---|---|---|"]
    for name, c in res["cases"].items():
        for d, r in c["rows"].items():
            per = ", ".join("–" if x["delta_50"] is None else f"{x['delta_50']:.2f}" for x in r["per_seed"])
            mean = "–" if r["mean"] is None else f"{r['mean']:.2f}"
            L.append(f"| {name} | {d} | {per} | {mean} | {r['sim_delta_50']} |")
    (OUT / "finite_d_escape.md").write_text("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
