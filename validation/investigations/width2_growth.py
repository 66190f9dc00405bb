"""How fast the hard overlaps grow at width 2: GD against the finite-d theory (the z² remainder).

At width 2 the theory's δ_50 is high on the non-centred label ``z²`` (+0.35 at d = 1000,
+0.69 at 2000) and within the bar on ``z² − 1`` (findings §10.1). This measures, at one δ near
each δ_50 (d = 1000, GeLU, η = 0.5), the squared hard overlap of both neurons,
``d‖M_t‖² = d Σ_j (θ*ᵀw_j)²``, along the first ``T`` steps:

* ``start="random"``: GD from a random start, and the theory's draws as ``dmftsolve transition``
  runs them (:func:`~dmftsolve.thresholds.finite_d_transition.solve_draw`, the draws' starts of
  :func:`~dmftsolve.thresholds.finite_d_transition.draw_starts`);
* ``start="zero"``: the same with the hard overlaps started at exactly 0 (GD: a warm start with
  ``M_0 = 0`` and ``Q_0 = I``; theory: ``m_0 = 0``), so only GD's finite-n force seeds them
  (the noise part of findings §9.6, there for one neuron).

Reported per time: the mean of ``d‖M_t‖²`` ± its standard error, its median, and the mean of
``log d‖M_t‖²`` ± standard error (the mean is carried by the runs escaping; the log by the bulk).

Run: ``python validation/investigations/width2_growth.py`` (every configuration, about 30 CPU-min;
``--only z2:gd:random,…`` a subset; ``--report`` rewrites the table from the JSON) →
``validation/investigations/results/width2_growth.{md,json}``. Configurations run in separate
processes write the one JSON under a lock.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # validation/: the checks
from width_transition import merge_json  # noqa: E402

from dmftsolve import Problem, simulate  # noqa: E402
from dmftsolve.thresholds.finite_d_transition import (  # noqa: E402
    TransitionSettings,
    draw_starts,
    solve_draw,
    transition_directions,
)

OUT = Path(__file__).resolve().parent / "results"
#: label name -> target, δ (near GD's width-2 δ_50 at d = 1000: 5.19 and 3.35)
LABELS = {"z2": ("z**2", 5.3), "z2m1": ("z**2 - 1", 3.4)}
FULL = {"d": 1000, "T": 120, "runs": 48, "times": (2, 5, 10, 20, 40, 60, 80, 100, 120),
        "gd_seed": 11, "theory_seed": 5}
QUICK = {"d": 100, "T": 6, "runs": 4, "times": (0, 2, 6), "gd_seed": 11, "theory_seed": 5,
         "paths_scale": 1 / 50}
#: side -> kernel paths of the theory's draws (None for GD)
SIDES = {"gd": None, "theory": 20_000, "theory8e4": 80_000}


def paths_of(side: str, cfg: dict[str, Any]) -> int | None:
    """Kernel paths of ``side`` (scaled down in the quick configuration)."""
    n = SIDES[side]
    return None if n is None else int(n * cfg.get("paths_scale", 1))


def problem_of(label: str, T: int) -> Problem:
    return Problem.build(target=LABELS[label][0], activation="gelu", m=2, eta=0.5, steps=T)


def overlaps(label: str, side: str, start: str, cfg: dict[str, Any]) -> np.ndarray:
    """``M_t`` of each run, shape ``(runs, T + 1, m)`` (the one hard direction)."""
    d, T, K = cfg["d"], cfg["T"], cfg["runs"]
    delta = LABELS[label][1]
    p = problem_of(label, T)
    if side == "gd":
        q = p if start == "random" else p.replace(M0=[[0.0, 0.0]], Q0=np.eye(2).tolist())
        r = simulate(q, d=d, delta=delta, seed=cfg["gd_seed"], trials=K, dtype=np.float32)
        return np.asarray(r.overlaps[:, :, 0, :], dtype=float)
    hard = transition_directions(p)
    s = TransitionSettings(draws=K, seed=cfg["theory_seed"], n_paths=paths_of(side, cfg),
                           stein_regression=False)  # as stored: the draws before 0.5.0
    X = draw_starts(p, delta, d, s, hard) if start == "random" else np.zeros((K, p.k, p.m))
    out = []
    for k in range(K):
        r = solve_draw(p, delta, d, k, X[k], s, T, hard, stop=False)
        out.append(np.asarray(r.M, dtype=float).reshape(T + 1, p.k, p.m)[:, 0, :])
    return np.array(out)


def summarise(M: np.ndarray, cfg: dict[str, Any]) -> dict[str, Any]:
    K = M.shape[0]
    m2 = cfg["d"] * (M**2).sum(axis=-1)
    rows = {}
    for t in cfg["times"]:
        x = m2[:, t]
        with np.errstate(divide="ignore"):
            lx = np.log(x)  # -inf at t = 0 from a zero start
        pos = bool(np.all(x > 0))
        rows[str(t)] = {"mean": float(x.mean()), "mean_err": float(x.std(ddof=1) / np.sqrt(K)),
                        "median": float(np.median(x)), "log_mean": float(lx.mean()) if pos else None,
                        "log_mean_err": float(lx.std(ddof=1) / np.sqrt(K)) if pos else None}
    return rows


def report(data: dict[str, Any], cfg: dict[str, Any]) -> str:
    L = ["# Hard-overlap growth at width 2: GD against the finite-d theory", "",
         f"`python validation/investigations/width2_growth.py`: GeLU, m = 2, η = 0.5, d = {cfg['d']}, "
         f"{cfg['runs']} GD trials (float32, seed {cfg['gd_seed']}) and {cfg['runs']} theory draws "
         f"(seed {cfg['theory_seed']}) per row; `d‖M_t‖²` summed over both neurons. "
         "Each cell: mean ± standard error / median / mean of the log ± standard error.", ""]
    for label, (target, delta) in LABELS.items():
        for start in ("random", "zero"):
            if not any(f"{label}|{s}|{start}" in data for s in SIDES):
                continue
            L += [f"## `{target}`, δ = {delta}, start: {start}", "",
                  "| t | " + " | ".join(s for s in SIDES if f"{label}|{s}|{start}" in data) + " |",
                  "|---|" + "---|" * sum(f"{label}|{s}|{start}" in data for s in SIDES)]
            for t in cfg["times"]:
                cells = []
                for s in SIDES:
                    e = data.get(f"{label}|{s}|{start}")
                    if e is None:
                        continue
                    r = e["rows"][str(t)]
                    lg = "–" if r["log_mean"] is None else f"{r['log_mean']:.2f} ± {r['log_mean_err']:.2f}"
                    cells.append(f"{r['mean']:.1f} ± {r['mean_err']:.1f} / {r['median']:.1f} / {lg}")
                L.append(f"| {t} | " + " | ".join(cells) + " |")
            L.append("")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated label:side:start (default: all)")
    ap.add_argument("--report", action="store_true", help="rewrite the table from the JSON only")
    ap.add_argument("--quick", action="store_true", help="a tiny configuration (tests)")
    ap.add_argument("--out", type=Path, default=OUT, help="output folder")
    a = ap.parse_args(argv)
    cfg = QUICK if a.quick else FULL
    path = a.out / ("width2_growth_quick.json" if a.quick else "width2_growth.json")
    todo = [k.split(":") for k in a.only.split(",") if k] or [
        [lab, s, st] for lab in LABELS for st in ("random", "zero") for s in SIDES]
    for item in todo:
        ok = len(item) == 3 and item[0] in LABELS and item[1] in SIDES and item[2] in ("random", "zero")
        if not ok:
            ap.error(f"--only items are label:side:start with label in {list(LABELS)}, side in "
                     f"{list(SIDES)}, start random|zero; got {':'.join(item)!r}")
    if not a.report:
        for label, side, start in todo:
            t0 = time.process_time()
            M = overlaps(label, side, start, cfg)
            merge_json(path, f"{label}|{side}|{start}",
                    {"rows": summarise(M, cfg), "cpu_seconds": time.process_time() - t0,
                     "settings": {**cfg, "delta": LABELS[label][1], "target": LABELS[label][0],
                                  "n_paths": paths_of(side, cfg)}})
            print(f"{label} {side} {start}: {time.process_time() - t0:.0f} CPU-s", file=sys.stderr,
                  flush=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    path.with_suffix(".md").write_text(report(data, cfg))
    return data


if __name__ == "__main__":
    main()
