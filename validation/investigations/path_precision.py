"""Does a draw's path history in float32 move the theory's success curve?

``TransitionSettings.path_dtype = "float32"`` (``DMFTSettings.path_dtype``) stores each draw's
path history in single precision, which halves the memory traffic that dominates a draw. Its
rounding does not stay small: the Stein solve drops innovations whose variance falls below
``null_rtol`` of ``Q(t, t)``, and single-precision rounding flips some of those decisions, so
a draw's late-time kernels move by about as much as another seed moves them. This script
runs the same fixed grid, with the same seeds and starts, in both precisions and compares

* draw by draw: the fraction of draws with the same outcome (success by step T or not) and the
  first-passage steps of the draws that succeed in both;
* the curves: δ_50 ± error of each (probit fit on the grid) and the summed success counts;
* the cost: wall time of each curve (same workers, run one after the other).

Usage (from the repository root)::

    python validation/investigations/path_precision.py [--cases m1,m2] [--workers 2]

writes ``validation/investigations/results/path_precision.{md,json}``; about 25 CPU-min for
both cases (96 draws a precision and case).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from width_transition import merge_json  # noqa: E402

from dmftsolve import Problem  # noqa: E402
from dmftsolve.thresholds.finite_d_transition import TransitionSettings, transition  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "path_precision"

#: name -> problem keywords, d and the δ grid (around GD's δ_50: 6.99 for m = 1, 3.65 for m = 2).
CASES: dict[str, dict[str, Any]] = {
    "m1": {"target": "z**2 - 1", "activation": "gelu", "m": 1, "eta": 0.5, "steps": 400,
           "d": 2000, "grid": [6.5, 7.0, 7.5, 8.0]},
    "m2": {"target": "z**2 - 1", "activation": "gelu", "m": 2, "eta": 0.5, "steps": 400,
           "d": 2000, "grid": [3.3, 3.8, 4.3, 4.8]},
}


def problem_of(name: str) -> Problem:
    c = CASES[name]
    return Problem.build(target=c["target"], activation=c["activation"], m=c["m"], eta=c["eta"],
                         steps=c["steps"])


def run_case(name: str, *, draws: int, workers: int, seed: int) -> dict[str, Any]:
    """Both precisions on the case's grid; per-draw escapes, δ_50 and wall time of each."""
    c = CASES[name]
    out: dict[str, Any] = {"case": c, "draws": draws, "seed": seed, "workers": workers}
    for dt in ("float64", "float32"):
        s = TransitionSettings(draws=draws, seed=seed, workers=workers, path_dtype=dt,
                               stein_regression=False)  # as stored: the draws before 0.5.0
        t0 = time.perf_counter()
        cur = transition(problem_of(name), c["d"], c["grid"], settings=s, throw=False)
        out[dt] = {"wall_s": time.perf_counter() - t0, "delta_50": cur.delta_50,
                   "delta_50_err": cur.delta_50_err, "width": cur.width,
                   "successes": cur.successes.tolist(), "draws": cur.draws.tolist(),
                   "escape_step": [p.escape_step.tolist() for p in cur.points],
                   "status": cur.status.value}
        print(f"[{name}] {dt}: δ_50 = {cur.delta_50:.2f} ± {cur.delta_50_err:.2f}, "
              f"{sum(cur.successes)} successes, {out[dt]['wall_s']:.0f} s", file=sys.stderr, flush=True)
    a = np.array(out["float64"]["escape_step"])
    b = np.array(out["float32"]["escape_step"])
    both = (a >= 0) & (b >= 0)
    out["paired"] = {"same_outcome": float(((a >= 0) == (b >= 0)).mean()),
                     "only_float64": int(((a >= 0) & (b < 0)).sum()),
                     "only_float32": int(((a < 0) & (b >= 0)).sum()),
                     "both_succeed": int(both.sum()),
                     "same_passage_step": int((a[both] == b[both]).sum()),
                     "passage_diff_median_abs":
                         float(np.median(np.abs(a[both] - b[both]))) if both.any() else None}
    return out


def report(data: dict[str, Any]) -> str:
    lines = ["# float32 path history against float64: the same draws", "",
             "`python validation/investigations/path_precision.py` (same grid, seeds and starts in "
             "both precisions; default settings otherwise: forced construction, paired weights, "
             "2·10⁴ kernel paths; GeLU on `z² − 1`, η = 0.5, T = 400, d = 2000).", "",
             "| case | grid | draws per δ | δ_50 float64 | δ_50 float32 | successes f64 / f32 | "
             "same outcome | only f64 / only f32 | same passage step (both succeed) | wall f64 / f32 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in data.items():
        a, b, pr = v["float64"], v["float32"], v["paired"]
        lines.append(
            f"| {name} (m = {v['case']['m']}) | {', '.join(f'{x:g}' for x in v['case']['grid'])} | "
            f"{v['draws']} | {a['delta_50']:.2f} ± {a['delta_50_err']:.2f} | "
            f"{b['delta_50']:.2f} ± {b['delta_50_err']:.2f} | "
            f"{sum(a['successes'])} / {sum(b['successes'])} | "
            f"{pr['same_outcome']:.1%} | {pr['only_float64']} / {pr['only_float32']} | "
            f"{pr['same_passage_step']} of {pr['both_succeed']} "
            f"(median diff {pr['passage_diff_median_abs']:g}) | "
            f"{a['wall_s']:.0f} s / {b['wall_s']:.0f} s ({a['wall_s'] / b['wall_s']:.2f}×) |")
    lines += ["", f"Wall times with {next(iter(data.values()))['workers']} worker processes, run one "
              "after the other on the same machine."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="m1,m2", help="comma-separated case names (m1, m2)")
    ap.add_argument("--draws", type=int, default=24, help="draws per δ (default 24)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT, help="output stem (default: results/path_precision)")
    args = ap.parse_args(argv)
    for name in args.cases.split(","):
        if name not in CASES:
            raise SystemExit(f"unknown case {name!r}; known: {', '.join(CASES)}")
        merge_json(args.out.with_suffix(".json"), name,
                   run_case(name, draws=args.draws, workers=args.workers, seed=args.seed))
    data = json.loads(args.out.with_suffix(".json").read_text())
    args.out.with_suffix(".md").write_text(report(data))
    print(report(data))
    return data


if __name__ == "__main__":
    main()
