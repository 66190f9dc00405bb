"""The restricted trajectory at late times, GD against the DMFT at N kernel paths.

The δ_50 remainder sits in the late escapes (``validation/investigations/late_escape.py``): the theory's draws
that have not escaped by step ~60 escape later less often than GD's. Their growth along θ* is
set by the restricted trajectory (hard direction held at zero). This script measures it at
late times, where the Stein kernels are least precise:

* **GD** (projected: ``w[0] = 0`` after every step; float32 data, ``θ* = e_1``), per trial:
  ``Q(t,t) = ‖w_t‖²`` and the curvature along θ*, ``RQ_t = θ*ᵀ H_t θ* = (1/n) Σ_i z_i² D_i^t``
  (``D`` the loss's second derivative in the pre-activation, :meth:`Problem.hess`). Reported:
  the mean over trials with its standard error, and the spread per trial.
* **DMFT** (restricted, ``reflect`` along θ*, ``errors="none"``) at several path counts and
  seeds: ``Q(t,t)`` and ``E[z² D^t]`` over the kept paths.

Written to ``validation/investigations/results/late_kernels.{md,json}``; each (case, N, seed) solve is kept in
the JSON, so a rerun only adds what is missing. Run: ``python validation/investigations/late_kernels.py``
(about 15 min on an idle core), ``--quick`` (seconds, for the test), ``--report``.
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
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # validation/: the checks these build on
sys.path.insert(0, str(HERE))
from transition_vs_simulation import CASES  # noqa: E402

from dmftsolve import Problem  # noqa: E402
from dmftsolve.dynamics.dmft import solve_dmft  # noqa: E402

OUT = HERE / "results"
CHECKS = HERE.parent / "results"  # the checks' committed output

#: case -> d, δ near the transition, GD trials, the times (steps) and the DMFT (paths, seeds)
FULL: dict[str, dict[str, Any]] = {
    "quad_z2": {"d": 500, "delta": 7.0, "trials": 40, "times": (25, 50, 100, 200, 400, 600),
                "solves": [(n, s) for n in (20_000, 80_000) for s in (3, 4, 5)]},
    "gelu_z2m1": {"d": 1000, "delta": 6.5, "trials": 40, "times": (25, 50, 100, 200, 400),
                  "solves": [(n, s) for n in (20_000, 80_000) for s in (3, 4, 5)] + [(160_000, 3)]},
    # the uncentred label near its δ_50, with the draws' responses by regression (0.5.0 on):
    # where does the search's +0.3 at 2·10⁴ paths (z2_path_count.py) sit in the kernels?
    "gelu_z2": {"d": 1000, "delta": 11.0, "trials": 40, "times": (25, 50, 100, 200, 400),
                "solves": [(n, s) for n in (10_000, 20_000, 40_000, 80_000) for s in range(3, 13)],
                "stein_regression": True, "solves_plain": [(20_000, s) for s in range(3, 13)]},
}
QUICK: dict[str, dict[str, Any]] = {
    "gelu_z2m1": {"d": 60, "delta": 4.0, "trials": 6, "times": (0, 2, 4), "solves": [(2000, 3), (4000, 3)]},
}


def problem_of(name: str, steps: int) -> Problem:
    c = CASES[name]
    return Problem.build(target=c["target"], activation=c["activation"], eta=c["eta"], steps=steps)


def gd_restricted(name: str, d: int, delta: float, trials: int, times: tuple[int, ...],
                  seed: int = 31) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, RQ)``, each ``(trials, len(times))``, of projected GD (``w[0] = 0``).

    Its own loop rather than :func:`~dmftsolve.simulation.simulator.simulate`: ``RQ`` needs the
    per-sample ``D_i^t`` and ``z_i`` at the recorded steps, which the simulator does not return."""
    T = max(times)
    p = problem_of(name, T)
    eta = CASES[name]["eta"]
    n = int(round(delta * d))
    Q, RQ = np.zeros((trials, len(times))), np.zeros((trials, len(times)))
    for j, ss in enumerate(np.random.SeedSequence([seed, d]).spawn(trials)):
        rng = np.random.default_rng(ss)
        X = rng.standard_normal((n, d), dtype=np.float32)
        z = X[:, 0].astype(np.float64)
        y = np.asarray(p.labels(z[:, None], np.zeros(n)), float)
        w = rng.standard_normal(d) / math.sqrt(d)
        w[0] = 0.0
        for t in range(T + 1):
            V = (X @ w.astype(np.float32)).astype(np.float64)
            if t in times:
                i = times.index(t)
                D = np.asarray(p.hess(y, V[:, None]), float).reshape(n)
                Q[j, i], RQ[j, i] = w @ w, np.mean(z**2 * D)
            if t == T:
                break
            g = p.grad(y, V[:, None])[:, 0]
            w = w - (eta / n) * (X.T @ g.astype(np.float32)).astype(np.float64)
            w[0] = 0.0
    return Q, RQ


def dmft_restricted(name: str, delta: float, times: tuple[int, ...], n_paths: int,
                    seed: int, stein_regression: bool = False) -> dict[str, Any]:
    """``Q(t,t)`` and ``E[z² D^t]`` of the restricted DMFT at ``times`` (the plain Stein mean,
    or the responses by regression of the transition's draws)."""
    t0 = time.perf_counter()
    p = problem_of(name, max(times)).replace(hold_zero=[0])
    r = solve_dmft(p, delta, n_paths=n_paths, reflect=(0,), keep_samples_at=tuple(times),
                   errors="none", test_loss="none", seed=seed, throw=False,
                   stein_regression=stein_regression)
    out: dict[str, Any] = {"n_paths": n_paths, "seed": seed, "status": r.status.value, "Q": [], "RQ": [],
                           "stein_regression": stein_regression}
    for t in times:
        if not r.ok:
            break
        law = r.law(t)
        out["Q"].append(float(r.q_diag[t, 0, 0]))
        out["RQ"].append(float(np.mean(law.Vstar[:, 0] ** 2 * law.D.reshape(-1))))
    out["seconds"] = time.perf_counter() - t0
    return out


def run(cfg: dict[str, dict[str, Any]], res: dict[str, Any], save: Any) -> None:
    for name, c in cfg.items():
        e = res.setdefault(name, {"d": c["d"], "delta": c["delta"], "times": list(c["times"]), "dmft": {}})
        if "gd" not in e:
            t0 = time.perf_counter()
            Q, RQ = gd_restricted(name, c["d"], c["delta"], c["trials"], tuple(c["times"]))
            e["gd"] = {"trials": c["trials"], "seconds": time.perf_counter() - t0}
            for label, x in (("Q", Q), ("RQ", RQ)):
                sd = x.std(axis=0, ddof=1)
                e["gd"] |= {label: x.mean(axis=0).tolist(), f"{label}_se": (sd / math.sqrt(len(x))).tolist(),
                            f"{label}_sd": sd.tolist()}
            print(f"{name}: GD {c['trials']} trials, {e['gd']['seconds']:.0f} s", flush=True)
            save()
        reg = c.get("stein_regression", False)
        todo = [(n, s, reg, "") for n, s in c["solves"]] + \
            [(n, s, False, "|plain") for n, s in c.get("solves_plain", [])]  # the other estimator
        for n_paths, seed, regression, tag in todo:
            key = f"{n_paths}|{seed}{tag}"
            if key in e["dmft"]:
                continue
            e["dmft"][key] = dmft_restricted(name, c["delta"], tuple(c["times"]), n_paths, seed, regression)
            print(f"{name}: DMFT N={n_paths} seed={seed}, {e['dmft'][key]['seconds']:.0f} s", flush=True)
            save()


def _summary(e: dict[str, Any]) -> list[str]:
    """Mean ± standard error over the seeds of each (N, estimator), against GD."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for v in sorted(e["dmft"].values(), key=lambda r: (not r.get("stein_regression"), r["n_paths"])):
        label = f"N = {v['n_paths']}, " + ("regression" if v.get("stein_regression") else "plain mean")
        if len(v["Q"]) == len(e["times"]):
            groups.setdefault(label, []).append(v)
    g = e.get("gd")
    out: list[str] = []
    for q in ("Q", "RQ"):
        head = f"| t | GD {q} | " + " | ".join(f"{k} ({len(v)} seeds)" for k, v in groups.items()) + " |"
        out += [head, "|" + "---|" * (2 + len(groups))]
        for i, t in enumerate(e["times"]):
            cells = []
            for v in groups.values():
                x = np.array([r[q][i] for r in v])
                se = x.std(ddof=1) / math.sqrt(x.size) if x.size > 1 else float("nan")
                cells.append(f"{x.mean():.3f} ± {se:.3f}")
            gq = f"{g[q][i]:.3f} ± {g[q + '_se'][i]:.3f}" if g else "–"
            out.append(f"| {t} | {gq} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def report(res: dict[str, Any]) -> str:
    lines = ["# The restricted trajectory at late times: GD against the DMFT at N paths", "",
             "Generated by `python validation/investigations/late_kernels.py`. Hard direction held at zero.",
             "GD: mean over trials ± its standard error, and the spread per trial (sd).",
             "DMFT: one solve per (N, seed).",
             "RQ = θ*ᵀHθ* = E[z² D^t], the curvature along θ*.", ""]
    for name, e in res.items():
        g = e.get("gd")
        reg = any(v.get("stein_regression") for v in e["dmft"].values())
        lines += [f"## {name}, d = {e['d']}, δ = {e['delta']:g}"
                  + (" (DMFT: responses by regression)" if reg else " (DMFT: plain Stein mean)"), ""]
        if len(e["dmft"]) > 8:  # many seeds: their mean ± standard error per (N, estimator)
            lines += _summary(e)
            continue
        head = "| t | GD Q (sd) | " + " | ".join(f"N = {k.split('|')[0]}, seed {k.split('|')[1]}"
                                                 for k in e["dmft"]) + " |"
        lines += [head, "|" + "---|" * (2 + len(e["dmft"]))]
        for i, t in enumerate(e["times"]):
            gq = f"{g['Q'][i]:.3f} ± {g['Q_se'][i]:.3f} ({g['Q_sd'][i]:.3f})" if g else "–"
            cells = [f"{v['Q'][i]:.3f}" if i < len(v["Q"]) else "–" for v in e["dmft"].values()]
            lines.append(f"| {t} | {gq} | " + " | ".join(cells) + " |")
        lines += ["", head.replace("GD Q (sd)", "GD RQ (sd)"), "|" + "---|" * (2 + len(e["dmft"]))]
        for i, t in enumerate(e["times"]):
            gq = f"{g['RQ'][i]:.3f} ± {g['RQ_se'][i]:.3f} ({g['RQ_sd'][i]:.3f})" if g else "–"
            cells = [f"{v['RQ'][i]:.3f}" if i < len(v["RQ"]) else "–" for v in e["dmft"].values()]
            lines.append(f"| {t} | {gq} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny configuration (seconds), for the test")
    ap.add_argument("--report", action="store_true", help="redraw the markdown from the JSON only")
    ap.add_argument("--out-dir", default=str(OUT))
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    stem = "late_kernels_quick" if args.quick else "late_kernels"
    js, md = out / f"{stem}.json", out / f"{stem}.md"
    res: dict[str, Any] = json.loads(js.read_text()) if js.exists() else {}

    def save() -> None:
        out.mkdir(parents=True, exist_ok=True)
        js.write_text(json.dumps(res, indent=1))

    if not args.report:
        with threadpool_limits(1):
            run(QUICK if args.quick else FULL, res, save)
    text = report(res)
    out.mkdir(parents=True, exist_ok=True)
    md.write_text(text)
    print(text)
    return res


if __name__ == "__main__":
    main()
