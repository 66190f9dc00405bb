"""Does GD itself diverge on the r² network at width m ≥ 2?

The width cases of ``validation/width_transition.py`` ran r² (``σ(x) = x²``) on ``z² − 1`` with
η = 0.1 at widths 2–4, and both sides counted a run whose loss overflowed as a failure to learn.
This script counts GD's diverged trials (non-finite training loss within the first ``--steps``
steps) at a few δ per (width, η), from a random start, d = 1000, float32.

Per sample the field's own step is ``−(η/δ) g_i``; with ``f = Σ_j V_j²`` the per-sample curvature
grows like ``V²`` and the output's scale like m, so a sample with a large field overshoots and
the run blows up within a few steps, more often at small δ and large m.

Usage (from the repository root)::

    python validation/investigations/r2_divergence.py [--trials 16] [--steps 30]

writes ``validation/investigations/results/r2_divergence.{md,json}`` (about 3 CPU-min).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from dmftsolve import Problem
from dmftsolve.simulation.simulator import simulate

OUT = Path(__file__).resolve().parent / "results" / "r2_divergence"

#: width -> δ tried (around each width's η = 0.1 "δ_50" of width_transition: 2.9, 4.0, 5.7)
GRID: dict[int, list[float]] = {1: [2.6, 3.5, 5.0], 2: [2.6, 3.5, 5.0], 3: [3.0, 4.0, 5.0],
                                4: [4.5, 5.6, 7.0]}


def count(m: int, eta: float, delta: float, *, d: int, trials: int, steps: int, seed: int) -> int:
    """GD trials (of ``trials``) whose training loss is non-finite by step ``steps``."""
    p = Problem.build(target="z**2 - 1", activation="quad", m=m, eta=eta, steps=steps)
    r = simulate(p, d, delta, seed=seed, trials=trials, dtype=np.float32, record_every=5, n_test=64,
                 throw=False)
    return int((~np.isfinite(np.asarray(r.train_loss, dtype=float)).all(axis=1)).sum())


def report(data: dict[str, Any]) -> str:
    s = data["settings"]
    lines = ["# GD on the r² network: diverged trials", "",
             f"`python validation/investigations/r2_divergence.py` (r² on `z² − 1`, random start, "
             f"d = {s['d']}, {s['trials']} float32 trials per cell, loss non-finite within "
             f"{s['steps']} steps; seed {s['seed']}).", "",
             "| m | η | diverged trials at δ |", "|---|---|---|"]
    for row in data["rows"]:
        cells = ", ".join(f"{c['diverged']}/{s['trials']} at {c['delta']:g}" for c in row["cells"])
        lines.append(f"| {row['m']} | {row['eta']:g} | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--widths", default="1,2,3,4")
    ap.add_argument("--etas", default="0.1,0.05")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    rows = []
    for m in (int(x) for x in a.widths.split(",")):
        for eta in (float(x) for x in a.etas.split(",")):
            cells = [{"delta": x, "diverged": count(m, eta, x, d=a.d, trials=a.trials, steps=a.steps,
                                                    seed=a.seed)} for x in GRID[m]]
            rows.append({"m": m, "eta": eta, "cells": cells})
            print(f"m = {m}, η = {eta:g}: " + ", ".join(f"{c['diverged']} at {c['delta']:g}" for c in cells),
                  flush=True)
    data = {"settings": {"trials": a.trials, "steps": a.steps, "d": a.d, "seed": a.seed}, "rows": rows}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".json").write_text(json.dumps(data, indent=1))
    a.out.with_suffix(".md").write_text(report(data))
    return data


if __name__ == "__main__":
    main()
