"""Is the error the self-bracketing search reports for δ_50 honest?

The search (:func:`dmftsolve.thresholds.delta50.search_delta_50`) is run many times against a
known probit curve ``P = Φ((δ − δ_50)/w)``, batches of 8 binomial trials, exactly as it runs
the theory's draws. For each run it records ``(δ̂_50 − δ_50)/se``; if the reported error is
honest, that has standard deviation ≈ 1 and the root-mean-square error of δ̂_50 is ≈ the mean
reported se. Compared: the search's own rule (stop once se ≤ ``tol``) with each error model of
:func:`~dmftsolve.thresholds.delta50.probit_fit` (``"posterior"``, the search's since 0.6.0, and
``"bootstrap"``, before), and a fixed budget of trials (no optional stopping) with the bootstrap.

Run ``python validation/investigations/search_calibration.py [--runs 60] [--tiny]``;
writes ``results/search_calibration.{md,json}`` (about 2 CPU-min with the defaults).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy.special import ndtr

from dmftsolve.thresholds.delta50 import search_delta_50

OUT = Path(__file__).resolve().parent / "results"

#: (name, δ_50, w, tol, fixed budget of trials): a narrow curve like GeLU on ``z² − 1`` at
#: d = 1000 (w ≈ 0.7), the benchmark's (``benchmarks/bench_transition.py``: d = 2000) and a
#: wide one like the theory's on ``z²`` (w ≈ 2.4).
CURVES = [("narrow", 7.0, 0.6, 0.15, 64), ("benchmark", 7.3, 0.8, 0.15, 96), ("wide", 11.0, 2.4, 0.15, 512)]


def run_curve(mu: float, w: float, tol: float, budget: int, runs: int, stop: str,
              error: str = "posterior") -> dict:
    """``runs`` searches from δ = 6 with seeds 1000, 1001, …; ``stop`` is ``"tol"`` (the search's
    rule) or ``"budget"`` (``tol`` unreachable, ``budget`` trials); ``error`` the error model."""
    err, se, used = [], [], []
    for r in range(runs):
        rng = np.random.default_rng(1000 + r)

        def batch(x: float, b: int, rng: np.random.Generator = rng) -> tuple[int, int]:
            return int(rng.binomial(8, ndtr((x - mu) / w))), 8

        if stop == "tol":
            o = search_delta_50(batch, start=6.0, tol=tol, max_trials=4000, error=error)
        else:
            o = search_delta_50(batch, start=6.0, tol=1e-9, max_trials=budget, error=error)
        err.append(o.delta_50 - mu)
        se.append(o.delta_50_err)
        used.append(int(o.trials.sum()))
    e, s = np.array(err), np.array(se)
    z = e / s
    return {"runs": runs, "stop": stop, "error": error, "median_trials": float(np.median(used)),
            "bias": float(e.mean()), "bias_se": float(e.std(ddof=1) / math.sqrt(runs)),
            "rmse": float(np.sqrt(np.mean(e**2))), "mean_reported_se": float(s.mean()),
            "z_sd": float(z.std(ddof=1)), "z_beyond_2": int(np.sum(np.abs(z) > 2))}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--tiny", action="store_true", help="3 runs per row, nothing written (the test)")
    a = ap.parse_args(argv)
    if a.runs < 2:
        ap.error(f"--runs must be at least 2 (an error needs two searches), got {a.runs}")
    runs = 3 if a.tiny else a.runs
    rows = []
    for name, mu, w, tol, budget in CURVES:
        for stop, error in (("tol", "posterior"), ("tol", "bootstrap"), ("budget", "bootstrap")):
            row = {"curve": name, "delta_50": mu, "w": w, "tol": tol, "budget": budget,
                   **run_curve(mu, w, tol, budget, runs, stop, error)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = {"rows": rows, "command": "python validation/investigations/search_calibration.py "
                                    f"--runs {runs}"}
    if not a.tiny:
        OUT.mkdir(exist_ok=True)
        (OUT / "search_calibration.json").write_text(json.dumps(out, indent=1) + "\n")
        lines = ["# Calibration of the search's δ_50 error", "",
                 f"`{out['command']}`: searches against `P = Φ((δ − δ_50)/w)`, batches of 8, from "
                 "δ = 6; 'se ≤ tol' stops once the error ≤ tol (the search's rule), 'N trials' "
                 "spends a fixed number of trials; error: the posterior standard deviation (the "
                 "search's since 0.6.0) or the bootstrap's. Honest errors: rmse ≈ mean se, "
                 "z sd ≈ 1.", "",
                 "| curve | δ_50, w | stop | error | median trials | bias | rmse | mean reported se | "
                 "rmse / se | sd of (δ̂ − δ_50)/se | \\|z\\| > 2 |",
                 "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            stop = f"se ≤ {r['tol']:g}" if r["stop"] == "tol" else f"{r['budget']} trials"
            lines.append(f"| {r['curve']} | {r['delta_50']:g}, {r['w']:g} | {stop} | {r['error']} | "
                         f"{r['median_trials']:.0f} | {r['bias']:+.3f} ± {r['bias_se']:.3f} | "
                         f"{r['rmse']:.3f} | {r['mean_reported_se']:.3f} | "
                         f"{r['rmse'] / r['mean_reported_se']:.2f} | {r['z_sd']:.2f} | "
                         f"{r['z_beyond_2']} of {r['runs']} |")
        (OUT / "search_calibration.md").write_text("\n".join(lines) + "\n")
    return out


if __name__ == "__main__":
    main()
