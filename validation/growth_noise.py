"""How the kernel paths move a draw's linear growth: the hard overlap from a tiny warm start.

A draw of ``dmftsolve transition`` is an unrestricted DMFT solve whose kernels come from ``N``
Monte Carlo paths. This measures what those paths do to the growth of the hard overlap while it
is still small, with nothing else random: GeLU on ``z² − 1`` (η = 0.5, T = 200), the overlap
started at ``M_0 = 10⁻³`` (width 1) or ``(10⁻³, −5·10⁻⁴)`` (width 2), ``Q_0 = I``, no force
(the ``"initial"`` construction's solve), the draws' solver settings (reflection-paired paths,
float32, compact history, responses by regression). Each solve's growth is
``G_t = log(‖M_t‖ / ‖M_0‖)``; at ``N = ∞`` it is one number per (width, δ, t), so its
seed-to-seed spread is the kernel paths' noise and the drift of its mean with ``N`` their bias.

Configurations (``CONFIGS``): the width-2 point δ = 3.4 and the width-1 point δ = 7 (near each
width's δ_50 at d = 1000) at several ``N``; the slope ``dG/dδ`` at δ ± 0.5 with 1.6·10⁵ paths;
``null_rtol`` 10⁻³ and 10⁻² at width 2 with 2·10⁴ paths.

Run ``python -m validation.growth_noise [--only NAME,…] [--report]`` →
``validation/results/growth_noise.{json,md}``; every configuration takes about 20 CPU-min.
Finished configurations are kept unless ``--redo``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.dynamics.stein import Stein

OUT = Path(__file__).resolve().parent / "results"
JSON = OUT / "growth_noise.json"
#: steps of the solve, and the steps at which G_t is reported
T = 200
TIMES = (25, 50, 100, 150, 200)
#: the steps at which the mean Q(t,t) is reported
Q_TIMES = (50, 100, 200)
#: name -> width, δ, kernel paths, seeds (start, stop), extra DMFTSettings
CONFIGS: dict[str, dict[str, Any]] = {
    "m2_2e4": {"m": 2, "delta": 3.4, "n_paths": 20_000, "seeds": (100, 180)},
    "m2_8e4": {"m": 2, "delta": 3.4, "n_paths": 80_000, "seeds": (100, 160)},
    "m2_3.2e5": {"m": 2, "delta": 3.4, "n_paths": 320_000, "seeds": (100, 116)},
    "m2_2e4_nullrtol1e-3": {"m": 2, "delta": 3.4, "n_paths": 20_000, "seeds": (100, 164),
                            "extra": {"null_rtol": 1e-3}},
    "m2_2e4_nullrtol1e-2": {"m": 2, "delta": 3.4, "n_paths": 20_000, "seeds": (100, 164),
                            "extra": {"null_rtol": 1e-2}},
    "m1_2e4": {"m": 1, "delta": 7.0, "n_paths": 20_000, "seeds": (100, 164)},
    "m1_8e4": {"m": 1, "delta": 7.0, "n_paths": 80_000, "seeds": (100, 148)},
    "m2_slope_2.9": {"m": 2, "delta": 2.9, "n_paths": 160_000, "seeds": (200, 208)},
    "m2_slope_3.9": {"m": 2, "delta": 3.9, "n_paths": 160_000, "seeds": (200, 208)},
    "m1_slope_6.5": {"m": 1, "delta": 6.5, "n_paths": 160_000, "seeds": (200, 208)},
    "m1_slope_7.5": {"m": 1, "delta": 7.5, "n_paths": 160_000, "seeds": (200, 208)},
}


def warm_start_problem(m: int, scale: float = 1e-3) -> Problem:
    """GeLU on ``z² − 1`` at width ``m``, started at the tiny hard overlap of the module docstring
    (``scale`` is ``M_0`` of the first neuron; the second, at width 2, starts at ``−scale/2``)."""
    M0 = np.full((1, m), scale)
    if m == 2:
        M0[0, 1] = -scale / 2
    p = Problem.build(target="z**2 - 1", activation="gelu", m=m, eta=0.5, steps=T)
    return p.replace(M0=M0.tolist(), Q0=np.eye(m).tolist(), hold_zero=[])


def growth(m: int, delta: float, n_paths: int, seed: int, extra: dict[str, Any] | None = None,
           scale: float = 1e-3) -> dict[str, Any]:
    """``G_t`` at :data:`TIMES` and the mean ``Q(t,t)`` of one solve."""
    kw: dict[str, Any] = {"n_paths": n_paths, "reflect": (0,), "path_dtype": "float32",
                          "method": Stein(regression=True), "history": "compact", "errors": "none",
                          "test_loss": "none", "throw": False, "steps": T} | (extra or {})
    t0 = time.process_time()
    r = solve_dmft(warm_start_problem(m, scale), delta, seed=seed, **kw)
    M = np.asarray(r.M, dtype=float).reshape(T + 1, -1)
    q = np.asarray(r.q_diag, dtype=float)
    qd = np.diagonal(q, axis1=1, axis2=2) if q.ndim == 3 else q.reshape(T + 1, -1)
    norm0 = np.sqrt((M[0] ** 2).sum())
    return {"seed": seed, "ok": bool(r.ok), "cpu_s": time.process_time() - t0,
            "G": [float(np.log(np.sqrt((M[t] ** 2).sum()) / norm0)) for t in TIMES],
            "Q": [float(qd[t].mean()) for t in Q_TIMES]}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± standard error, spread, median and 10 % quantile of ``G`` per time, over the seeds."""
    G = np.array([r["G"] for r in runs])
    n = G.shape[0]
    return {"n": n, "mean": G.mean(0).tolist(), "se": (G.std(0, ddof=1) / np.sqrt(n)).tolist(),
            "sd": G.std(0, ddof=1).tolist(), "median": np.median(G, 0).tolist(),
            "q10": np.quantile(G, 0.1, axis=0).tolist(),
            "Q_mean": np.mean([r["Q"] for r in runs], axis=0).tolist(),
            "cpu_s_per_solve": float(np.mean([r["cpu_s"] for r in runs]))}


def report(data: dict[str, Any]) -> str:
    L = ["# A draw's linear growth and its kernel paths", "",
         "`python -m validation.growth_noise` (module docstring): GeLU, `z² − 1`, η = 0.5, no force, "
         "tiny warm start; `G_t = log(‖M_t‖/‖M_0‖)` over seeds.", "",
         "| config | m | δ | paths | seeds | G_100 | G_200 (mean ± se) | sd of G_200 | median | 10 % "
         "| Q(200,200) |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, cfg in CONFIGS.items():
        e = data.get(name)
        if e is None:
            continue
        s = e["summary"]
        i100, i200 = TIMES.index(100), TIMES.index(200)
        L.append(f"| {name} | {cfg['m']} | {cfg['delta']:g} | {cfg['n_paths']:.2g} | {s['n']} | "
                 f"{s['mean'][i100]:.2f} ± {s['se'][i100]:.2f} | "
                 f"{s['mean'][i200]:.2f} ± {s['se'][i200]:.2f} | "
                 f"{s['sd'][i200]:.2f} | {s['median'][i200]:.2f} | {s['q10'][i200]:.2f} | "
                 f"{s['Q_mean'][Q_TIMES.index(200)]:.3f} |")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help=f"comma-separated names of {list(CONFIGS)}")
    ap.add_argument("--report", action="store_true", help="rewrite the table from the JSON only")
    ap.add_argument("--redo", action="store_true", help="rerun stored configurations")
    ap.add_argument("--out", type=Path, default=JSON, help="the JSON (the table is written beside it)")
    a = ap.parse_args(argv)
    names = [x for x in a.only.split(",") if x] or list(CONFIGS)
    bad = [x for x in names if x not in CONFIGS]
    if bad:
        ap.error(f"--only: unknown configuration {bad[0]!r}; choose from {list(CONFIGS)}")
    data = json.loads(a.out.read_text()) if a.out.exists() else {}
    if not a.report:
        for name in names:
            if name in data and not a.redo:
                continue
            cfg = CONFIGS[name]
            with threadpool_limits(1):
                runs = [growth(cfg["m"], cfg["delta"], cfg["n_paths"], s, cfg.get("extra"))
                        for s in range(*cfg["seeds"])]
            data[name] = {"settings": dict(cfg), "runs": runs,
                          "summary": summarise(runs)}
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(data, indent=1))
            print(f"{name}: {sum(r['cpu_s'] for r in runs):.0f} CPU-s", flush=True)
    a.out.with_suffix(".md").write_text(report(data))
    return data


if __name__ == "__main__":
    main()
