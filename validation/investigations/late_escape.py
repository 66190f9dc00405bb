"""Where in time the forced DMFT and GD part ways (the δ_50 remainder).

Two parts, written to ``validation/investigations/results/late_escape.{md,json}``:

* **Escape-step split of the committed curves** (no new runs, a second): for every (case, d)
  that has both the forced theory curve (``transition_vs_simulation.json``) and GD's 40-trial
  counts (``gd_transition_counts.json``), the trials of the δ values both measured are split
  into *early* escapes (first passage of the cosine above 1/2 at step ≤ ``cut``), *late* ones
  (``cut`` < step ≤ T) and none; pooled over δ, with binomial standard errors. GD records the
  cosine every 5 steps, so ``cut`` is a multiple of 5 and GD's early count is exact.
* **Trajectories at one point** (``--trajectories``): GD trials and forced-DMFT draws (the
  construction ``dmftsolve transition`` uses: 2·10⁴ reflection-paired kernel paths, quenched
  Poisson force of n = δd samples, stratified ``m_0``) at the same (case, d, δ), every step
  recorded. Reported: ``P(escape ≤ t)`` for both, and the quantiles of ``|m_t| = √d |M_t|``
  among the runs that have not escaped by ``t``; so a deficit of late escapes can be placed
  either in the slow-growing population (its ``|m_t|`` lower in the theory) or in the last
  stretch of the escape.

Run: ``python validation/investigations/late_escape.py`` (split only),
``python validation/investigations/late_escape.py --trajectories gelu_z2m1:1000:6.5 --gd-trials 200
--draws 96 --steps 200``; ``--report`` redraws from the JSON. GD runs on the library's
simulator and the theory draws are those of ``dmftsolve transition`` (same starts and seeds).
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
from dmftsolve.results import jsonable  # noqa: E402
from dmftsolve.simulation.simulator import simulate  # noqa: E402
from dmftsolve.thresholds.finite_d_transition import (  # noqa: E402
    TransitionSettings,
    sane_steps,
    solve_draw,
    stratified_starts,
)

OUT = HERE / "results"
CHECKS = HERE.parent / "results"  # the checks' committed output
CUTS = (30, 60)
REPORT_TIMES = (10, 20, 30, 60, 100, 150, 200, 300, 400, 600)


def log(msg: str) -> None:
    print(msg, flush=True)


def _rate(k: int, n: int) -> tuple[float, float]:
    p = k / n
    return p, math.sqrt(p * (1 - p) / n)


def escape_split(theory: dict[str, Any], gd: dict[str, Any], cuts: tuple[int, ...] = CUTS
                 ) -> dict[str, Any]:
    """Early / late / no escape, theory against GD, per (case, d) and pooled.

    ``theory``: the ``curves`` of ``transition_vs_simulation.json``; ``gd``: the ``runs`` of
    ``gd_transition_counts.json``. Only the δ values present in both enter.
    """
    rows: list[dict[str, Any]] = []
    pooled = {c: np.zeros(6, dtype=int) for c in cuts}
    for key, run in gd.items():
        th = theory.get(f"{key}|forced")
        if th is None:
            continue
        T = int(th["T"])
        for cut in cuts:
            cnt = np.zeros(6, dtype=int)  # GD early, late, n; theory early, late, n
            for p in run["points"].values():
                if p["delta"] not in th["deltas"]:
                    continue
                i = th["deltas"].index(p["delta"])
                es = np.array([t["escape_step"] if t["escape_step"] is not None else 10**9
                               for c in p["chunks"] for t in c["trials"]])
                et = np.array([s if (s is not None and s >= 0) else 10**9 for s in th["escape_steps"][i]])
                cnt += [(es <= cut).sum(), ((es > cut) & (es <= T)).sum(), es.size,
                        (et <= cut).sum(), ((et > cut) & (et <= T)).sum(), et.size]
            if cnt[2] == 0:
                continue
            pooled[cut] += cnt
            rows.append({"key": key, "cut": cut, "T": T, **_counts(cnt)})
    return {"rows": rows, "pooled": [{"key": "all", "cut": c, **_counts(v)} for c, v in pooled.items()]}


def _counts(c: np.ndarray) -> dict[str, Any]:
    ge, gl, gn, te, tl, tn = (int(x) for x in c)
    out: dict[str, Any] = {"gd_trials": gn, "theory_draws": tn}
    for name, k, n in (("gd_early", ge, gn), ("gd_late", gl, gn), ("th_early", te, tn), ("th_late", tl, tn)):
        out[name], out[name + "_err"] = _rate(k, n)
    return out


# ---------------------------------------------------------------------------- trajectories
def problem_of(case: dict[str, Any], steps: int) -> Problem:
    return Problem.build(target=case["target"], activation=case["activation"], eta=case["eta"], steps=steps)


def gd_trajectories(case: dict[str, Any], d: int, delta: float, trials: int, steps: int,
                    seed: int = 21) -> tuple[np.ndarray, np.ndarray]:
    """``(√d M_t, cosine_t)``, each ``(trials, steps + 1)``: the library's simulator
    (:func:`~dmftsolve.simulation.simulator.simulate`: full-batch GD, float32 data, random
    start ``q0 = 1``, ``θ* = e_1``), every step recorded."""
    root = np.random.SeedSequence([seed, d, int(round(1000 * delta))])
    r = simulate(problem_of(case, steps), d, delta, seed=root, trials=trials, dtype=np.float32, n_test=2)
    return math.sqrt(d) * r.overlaps[:, :, 0, 0], np.asarray(r.cosine, float)


def theory_trajectories(case: dict[str, Any], d: int, delta: float, draws: int, steps: int,
                        paths: int = 20_000, seed: int = 1,
                        force_weights: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(√d M_t, cosine_t)`` of the forced DMFT, ``(draws, steps + 1)``: the draws of
    :func:`~dmftsolve.thresholds.finite_d_transition.success_probability` (same starts and
    seeds, :func:`~dmftsolve.thresholds.finite_d_transition.solve_draw`; ``force_weights`` as
    in ``TransitionSettings``; None takes its default); NaN after a failure or blow-up."""
    p = problem_of(case, steps)
    fw = {} if force_weights is None else {"force_weights": force_weights}
    s = TransitionSettings(draws=draws, seed=seed, n_paths=paths, stein_regression=False, **fw)  # as stored
    m = np.full((draws, steps + 1), np.nan)
    cos = np.full((draws, steps + 1), np.nan)
    for k, x in enumerate(stratified_starts(p, delta, d, s)):
        r = solve_draw(p, delta, d, k, float(x), s, steps)
        upto = sane_steps(r)
        m[k, :upto] = r.M[:upto, 0, 0] * math.sqrt(d)
        cos[k, :upto] = np.asarray(r.cosine, float)[:upto]
    return m, cos


def trajectory_summary(m: np.ndarray, cos: np.ndarray, times: tuple[int, ...],
                       threshold: float = 0.5) -> dict[str, Any]:
    """``P(escape ≤ t)`` with its binomial error, and the quartiles of ``|m_t|`` among the runs
    not escaped by ``t``."""
    above = np.nan_to_num(cos, nan=0.0) > threshold
    first = np.where(above.any(axis=1), above.argmax(axis=1), 10**9)
    out: dict[str, Any] = {"runs": int(m.shape[0]), "times": [], "p_escaped": [], "p_err": [],
                           "survivor_quartiles": [], "survivors": []}
    for t in times:
        if t >= m.shape[1]:
            break
        p, e = _rate(int((first <= t).sum()), m.shape[0])
        alive = (first > t) & np.isfinite(m[:, t]) & np.isfinite(cos[:, t])
        q = np.percentile(np.abs(m[alive, t]), [25, 50, 75]).tolist() if alive.sum() >= 4 else None
        out["times"].append(t)
        out["p_escaped"].append(p)
        out["p_err"].append(e)
        out["survivor_quartiles"].append(q)
        out["survivors"].append(int(alive.sum()))
    return out


# ---------------------------------------------------------------------------- report
def report(res: dict[str, Any]) -> str:
    lines = ["# Where theory and GD part ways: early and late escapes", "",
             "Generated by `python validation/investigations/late_escape.py`. Forced theory curves from",
             "`transition_vs_simulation.json` (16 draws per δ), GD from `gd_transition_counts.json`",
             "(40 trials per δ, float32, cosine every 5 steps); same δ values, pooled; binomial",
             "standard errors. Early: first passage above 1/2 at step ≤ cut; late: cut < step ≤ T.", ""]
    sp = res.get("split")
    if sp:
        lines += ["| case, d | cut | GD early | theory early | GD late | theory late | GD trials "
                  "| theory draws |", "|---|---|---|---|---|---|---|---|"]
        for r in sp["rows"] + sp["pooled"]:
            def f(k: str, r: dict[str, Any] = r) -> str:
                return f"{r[k]:.3f} ± {r[k + '_err']:.3f}"
            lines.append(f"| {r['key']} | {r['cut']} | {f('gd_early')} | {f('th_early')} | {f('gd_late')} | "
                         f"{f('th_late')} | {r['gd_trials']} | {r['theory_draws']} |")
        lines.append("")
    for key, tr in res.get("trajectories", {}).items():
        lines += [f"## Trajectories at {key}", "",
                  f"GD {tr['gd']['runs']} trials ({tr['gd_seconds']:.0f} s), forced theory"
                  f"{' with paired force weights' if tr.get('force_weights') == 'paired' else ''} "
                  f"{tr['theory']['runs']} draws ({tr['theory_seconds']:.0f} s), {tr['steps']} steps.", "",
                  "| t | P(escaped) GD | P(escaped) theory | survivors' |m_t| quartiles, GD | theory |",
                  "|---|---|---|---|---|"]
        # recomputed from the stored trajectories, so --report follows REPORT_TIMES
        g = trajectory_summary(np.asarray(tr["gd_m"], float), np.asarray(tr["gd_cos"], float), REPORT_TIMES)
        h = trajectory_summary(np.asarray(tr["theory_m"], float), np.asarray(tr["theory_cos"], float),
                               REPORT_TIMES)
        for i, t in enumerate(g["times"]):
            if i >= len(h["times"]):
                break
            q = lambda x: "–" if x is None else "/".join(f"{v:.1f}" for v in x)  # noqa: E731
            lines.append(f"| {t} | {g['p_escaped'][i]:.3f} ± {g['p_err'][i]:.3f} | "
                         f"{h['p_escaped'][i]:.3f} ± {h['p_err'][i]:.3f} | "
                         f"{q(g['survivor_quartiles'][i])} ({g['survivors'][i]}) | "
                         f"{q(h['survivor_quartiles'][i])} ({h['survivors'][i]}) |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trajectories", default=None,
                    help="CASE:D:DELTA, e.g. gelu_z2m1:1000:6.5 (a key of transition_vs_simulation.CASES)")
    ap.add_argument("--gd-trials", type=int, default=200)
    ap.add_argument("--draws", type=int, default=96)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--paths", type=int, default=20_000)
    ap.add_argument("--force-weights", choices=("poisson", "paired"), default="poisson",
                    help="the theory draws' force weights (TransitionSettings.force_weights; default "
                         "poisson, the weighting of the stored CASE|D|DELTA entries); paired runs are "
                         "keyed CASE|D|DELTA@paired and reuse the stored GD trajectories of CASE|D|DELTA "
                         "when their steps and trials match")
    ap.add_argument("--report", action="store_true", help="redraw the markdown from the JSON only")
    ap.add_argument("--out-dir", default=str(OUT))
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    js, md = out / "late_escape.json", out / "late_escape.md"
    res: dict[str, Any] = json.loads(js.read_text()) if js.exists() else {}
    for name in ("gd_trials", "draws", "steps", "paths"):
        if getattr(args, name) < 1:
            ap.exit(2, f"late_escape: --{name.replace('_', '-')} must be ≥ 1, got {getattr(args, name)}\n")
    if not args.report:
        tv, gc = CHECKS / "transition_vs_simulation.json", CHECKS / "gd_transition_counts.json"
        if tv.exists() and gc.exists():
            res["split"] = escape_split(json.loads(tv.read_text())["curves"],
                                        json.loads(gc.read_text())["runs"])
        if args.trajectories:
            try:
                name, d_s, delta_s = args.trajectories.split(":")
                case, d, delta = CASES[name], int(d_s), float(delta_s)
            except (ValueError, KeyError):
                ap.exit(2, f"late_escape: --trajectories must be CASE:D:DELTA with CASE in {sorted(CASES)}, "
                           f"got {args.trajectories!r}\n")
            base = f"{name}|{d}|{delta:g}"
            key = base + ("@paired" if args.force_weights == "paired" else "")
            old = res.get("trajectories", {}).get(base)
            with threadpool_limits(1):
                if (old is not None and old["steps"] == args.steps
                        and np.asarray(old["gd_m"]).shape[0] == args.gd_trials):
                    gm, gcos, tg = (np.asarray(old["gd_m"], float), np.asarray(old["gd_cos"], float),
                                    old["gd_seconds"])
                    log(f"GD {args.gd_trials} trials: reused from {base}")
                else:
                    t0 = time.perf_counter()
                    gm, gcos = gd_trajectories(case, d, delta, args.gd_trials, args.steps)
                    tg = time.perf_counter() - t0
                    log(f"GD {args.gd_trials} trials: {tg:.0f} s")
                t0 = time.perf_counter()
                hm, hcos = theory_trajectories(case, d, delta, args.draws, args.steps, args.paths,
                                               force_weights=args.force_weights)
                th = time.perf_counter() - t0
                log(f"theory {args.draws} draws: {th:.0f} s")
            res.setdefault("trajectories", {})[key] = {
                "steps": args.steps, "paths": args.paths, "force_weights": args.force_weights,
                "gd_seconds": tg, "theory_seconds": th,
                "gd": trajectory_summary(gm, gcos, REPORT_TIMES),
                "theory": trajectory_summary(hm, hcos, REPORT_TIMES),
                # 4 decimals: the JSON stays small, the summaries do not move
                "gd_m": gm.round(4), "gd_cos": gcos.round(4), "theory_m": hm.round(4),
                "theory_cos": hcos.round(4)}
        out.mkdir(parents=True, exist_ok=True)
        js.write_text(json.dumps(jsonable(res)))
    md.write_text(report(res))
    print(report(res))
    return res


if __name__ == "__main__":
    main()
