"""Benchmark: CPU time of one δ_50 against d and the width m, for the theory and for GD, in one run.

For each width ``m`` (``--ms``) and dimension ``d`` (``--ds``), on GeLU with ``y = z² − 1``
(η = 0.5, T = 400), in one process with one BLAS thread:

* **theory** — ``dmftsolve transition`` at its defaults (:func:`dmftsolve.finite_d.transition`,
  the self-bracketing search to ``--tol``, one worker): its CPU time and its number of draws;
* **GD** — ``--gd-trials`` float32 trials at the theory's δ_50
  (:func:`dmftsolve.simulation.simulator.simulate`), each stopped at its first passage as the
  theory's draws are, each timed (a success stops early, so the time varies by trial; the mean
  and its standard error are reported). GD measures δ_50 to the same error with as many trials as
  the search used draws (each is one Bernoulli outcome of the same criterion; the theory's starts
  are stratified, so its error is at most the binomial one), so GD's cost at equal error is the
  search's draw count times GD's time per trial.

Printed and stored (``--json``, ``--out``): per (m, d) both CPU times, their ratio with its
standard error (from GD's time per trial), and the fitted
growth exponents (CPU ∝ d^a) of each side per width; ``--plot`` draws the figure
(``benchmarks/results/bench_cost.png`` by default).

Run ``python benchmarks/bench_cost.py [--ms 1,2,3,4] [--ds 500,1000,2000,4000,8000] [--tol 0.15]
[--gd-trials 16] [--json] [--out FILE] [--plot FILE]``; ``--replot FILE`` redraws from a stored run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.cli._common import ints
from dmftsolve.finite_d import TransitionSettings, transition
from dmftsolve.results import cpu_model, jsonable
from dmftsolve.simulation.simulator import simulate

#: the first δ of the theory's search by width (GD's δ_50 at d = 1000: 6.9, 3.4, 2.9; width 4 a guess)
START = {1: 7.0, 2: 3.5, 3: 2.9, 4: 2.5}
RESULTS = Path(__file__).resolve().parent / "results"


def cpu() -> float:
    """CPU seconds of this process and its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def one_point(m: int, d: int, tol: float, gd_trials: int, seed: int) -> dict[str, Any]:
    p = Problem.build(target="z**2 - 1", activation="gelu", m=m, eta=0.5, steps=400)
    simulate(p.replace(steps=5), 50, 2.0, seed=seed, trials=1, dtype=np.float32, throw=False)  # warm-up
    c0 = cpu()
    curve = transition(p, d, None, settings=TransitionSettings(tol=tol, start=START.get(m, 2.5), seed=seed),
                       throw=False)
    theory = cpu() - c0
    x = float(np.round(curve.delta_50, 2)) if math.isfinite(curve.delta_50) else START.get(m, 2.5)
    per = []
    for k in range(gd_trials):  # one at a time: GD's cost varies by trial (a success stops early)
        c0 = cpu()
        simulate(p, d, x, seed=seed * 100_003 + k, trials=1, dtype=np.float32, record_every=5, n_test=512,
                 stop_cosine=0.5, throw=False)
        per.append(cpu() - c0)
    per_trial = float(np.mean(per))
    per_trial_err = float(np.std(per, ddof=1) / math.sqrt(gd_trials))
    draws = int(curve.draws.sum())
    ratio = per_trial * draws / theory
    return {"m": m, "d": d, "delta_50": curve.delta_50, "delta_50_err": curve.delta_50_err,
            "status": curve.status.value, "draws": draws, "theory_cpu_s": theory,
            "gd_cpu_s_per_trial": per_trial, "gd_cpu_s_per_trial_err": per_trial_err,
            "gd_cpu_s_at_equal_error": per_trial * draws,
            "ratio_gd_over_theory": ratio, "ratio_err": ratio * per_trial_err / per_trial}


def growth(rows: list[dict[str, Any]], key: str) -> dict[int, float]:
    """Least-squares slope of log CPU against log d, per width."""
    out: dict[int, float] = {}
    for m in sorted({r["m"] for r in rows}):
        pts = [(math.log(r["d"]), math.log(r[key])) for r in rows if r["m"] == m and r[key] > 0]
        if len(pts) >= 2:
            x, y = np.array(pts).T
            out[m] = float(np.polyfit(x, y, 1)[0])
    return out


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dmftsolve._files import savefig

    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for i, m in enumerate(sorted({r["m"] for r in rows})):
        rs = sorted((r for r in rows if r["m"] == m), key=lambda r: r["d"])
        ds = [r["d"] for r in rs]
        colour = f"C{i}"
        ax.plot(ds, [r["theory_cpu_s"] for r in rs], "o-", color=colour, label=f"theory, m = {m}")
        ax.plot(ds, [r["gd_cpu_s_at_equal_error"] for r in rs], "s--", color=colour, label=f"GD, m = {m}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("d")
    ax.set_ylabel("CPU seconds for δ_50 to ± 0.15")
    ax.set_title("GeLU, y = z² − 1, T = 400: the theory's search against GD's trials", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    savefig(fig, path, what="--plot", dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ms", type=ints, default=[1, 2, 3, 4])
    ap.add_argument("--ds", type=ints, default=[500, 1000, 2000, 4000, 8000])
    ap.add_argument("--tol", type=float, default=0.15)
    ap.add_argument("--gd-trials", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="store the rows as they finish (JSON)")
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--replot", type=Path, default=None, help="redraw and reprint from a stored run")
    a = ap.parse_args(argv)
    if min(a.ms) < 1 or min(a.ds) < 2:
        ap.error(f"--ms must be widths >= 1 and --ds dimensions >= 2, got {a.ms} and {a.ds}")
    if a.gd_trials < 2:
        ap.error(f"--gd-trials must be at least 2 (for its standard error), got {a.gd_trials}")
    if not 0 < a.tol < math.inf:
        ap.error(f"--tol must be a positive number, got {a.tol}")
    if a.replot is not None:
        out = json.loads(a.replot.read_text())
    else:
        out = {"cpu": cpu_model(), "cores": os.cpu_count(), "tol": a.tol, "gd_trials": a.gd_trials,
               "rows": []}
        done = {}
        if a.out is not None and a.out.exists():
            done = {(r["m"], r["d"]): r for r in json.loads(a.out.read_text())["rows"]}
        with threadpool_limits(1):
            for m in a.ms:
                for d in a.ds:
                    row = done.get((m, d)) or one_point(m, d, a.tol, a.gd_trials, a.seed)
                    out["rows"].append(row)
                    if a.out is not None:
                        from dmftsolve._files import write_text

                        write_text(a.out, json.dumps(jsonable(out), indent=1), what="--out")
                    print(f"m = {m}, d = {d}: theory {row['theory_cpu_s']:.0f} CPU-s ({row['draws']} draws, "
                          f"delta_50 = {row['delta_50']:.2f} ± {row['delta_50_err']:.2f}), GD "
                          f"{row['gd_cpu_s_at_equal_error']:.0f} CPU-s ({row['gd_cpu_s_per_trial']:.2f} a "
                          f"trial), GD / theory {row['ratio_gd_over_theory']:.1f}"
                          + (f" ± {row['ratio_err']:.1f}" if "ratio_err" in row else ""), flush=True)
    out["growth_theory"] = growth(out["rows"], "theory_cpu_s")
    out["growth_gd"] = growth(out["rows"], "gd_cpu_s_at_equal_error")
    if a.plot is not None:
        plot(out["rows"], a.plot)
    if a.json:
        print(json.dumps(jsonable(out)))
    else:
        for m, g in out["growth_theory"].items():
            print(f"m = {m}: theory CPU ∝ d^{g:.2f}, GD ∝ d^{out['growth_gd'].get(m, math.nan):.2f}")
    return out


if __name__ == "__main__":
    main()
