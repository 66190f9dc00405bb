"""Issue 9: GD's finite-d success probability and δ_50(d) from the theory, against the simulator.

Two parts, each written to ``validation/results/transition_vs_simulation.{md,json,png}`` as
soon as it lands (the JSON is updated after every curve):

* **Var(m_t)** (``m_t = √d M_t``, GeLU, ``y = z² − 1``, η = 0.5, δ = 6): GD (random start,
  and the same data with ``M_0 = 0`` for the noise part) at d = 500 / 1000 / 2000, against
  the linearised law of :mod:`dmftsolve.finite_d.hard_overlap` (pathwise, t ≤ 20; the
  finite-d frozen-kernel estimator to t = 60) and the finite-n DMFT (``N = n`` unpaired
  paths, ``M_0 = 0``) used by :mod:`dmftsolve.finite_d`. GD numbers come from
  :func:`gd_var` (cached in ``validation/results/transition_gd_var.json``; ``--gd-var``
  recomputes them, about 5 min on one core).
* **Success curves and δ_50**: :func:`dmftsolve.finite_d.transition` per case and
  d, against GD's success counts (``validation/results/gd_transition_counts.json``, from
  ``python -m validation.gd_transition_counts``). GD's δ_50 here is the same probit fit as the
  theory's, so both carry a standard error.

Run: ``python -m validation.transition_vs_simulation [--only NAME] [--ds D,...] [--draws K] [--report]``
(one process, one BLAS thread). Finished curves are cached in the JSON and skipped: the 63
curves stored now took 24 CPU-hours in all (the ``seconds`` of each; 6.8 h at d = 500, 4.0 h
at 1000, 5.6 h at 2000, 1.9 h at 3000, 5.1 h at 4000), so a run from scratch is a day on
one core; ``--only`` and ``--ds`` select what to recompute.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.finite_d import TransitionSettings, probit_fit, transition
from dmftsolve.finite_d.hard_overlap import HardOverlapSettings, hard_overlap_law
from dmftsolve.results import jsonable
from validation import gd_transition_counts as _GTC  # the GD counts' own first-passage counting
from validation import script_parser

OUT = Path(__file__).resolve().parent / "results"
JSON = OUT / "transition_vs_simulation.json"
GD_VAR = OUT / "transition_gd_var.json"
VAR_TIMES = (5, 10, 20, 40, 60)

#: name -> target, activation, η, theory steps T and the δ grid per d of each theory construction
#: (``finite_n``: the 16-draw curves of the previous construction, kept for comparison).
CASES: dict[str, dict[str, Any]] = {
    "gelu_z2m1": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "T": 400,
                  "grid": {"forced": {500: (5, 5.5, 6, 6.5, 7, 7.5), 1000: (6, 6.5, 7, 7.5, 8),
                                      2000: (6, 6.5, 7, 7.5, 8), 3000: (6, 6.5, 7, 7.5, 8),
                                      4000: (6, 6.5, 7, 7.5, 8),
                                      # theory only (GD out of reach here): how δ_50 moves with d
                                      10_000: (6.5, 7, 7.5, 8, 8.5, 9.5),
                                      100_000: (7, 8, 8.5, 9, 10, 11)},
                           "finite_n": {d: (5.5, 6, 6.5, 7, 7.5, 8.5) for d in (500, 1000, 2000)},
                           "initial": {1000: (6, 7, 8, 9, 10)}}},
    "gelu_z2": {"target": "z**2", "activation": "gelu", "eta": 0.5, "T": 400,
                "grid": {"forced": {500: (8, 9, 10, 11, 12, 13), 1000: (8, 9, 10, 11, 12, 13),
                                    2000: (9, 10, 11, 12, 13, 14),
                                    3000: (9.5, 10.5, 11.5, 12.5, 13.5, 14.5),
                                    4000: (9.5, 10.5, 11.5, 12.5, 13.5, 14.5)},
                         "finite_n": {d: (7, 8.5, 10, 11.5, 13) for d in (500, 1000)}}},
    "gelu_min3": {"target": "Min(z**2, 3)", "activation": "gelu", "eta": 0.5, "T": 400,
                  "grid": {"forced": {500: (8, 9, 10, 11, 12), 1000: (8, 9, 10, 11, 12),
                                      2000: (9, 10, 11, 12, 13), 4000: (9.5, 10.5, 11.5, 12.5, 13.5)},
                           "finite_n": {1000: (7, 8.5, 10, 11.5, 13)}}},
    "quad_z2": {"target": "z**2", "activation": "quad", "eta": 0.1, "T": 600,
                "grid": {"forced": {500: (4, 5, 6, 7, 8), 1000: (4, 5, 6, 7, 8), 2000: (5, 6, 7, 8),
                                    3000: (5, 6, 7, 8), 4000: (5, 6, 7, 8)},
                         "finite_n": {500: (3, 4, 5, 6, 8)}}},
    "quad_z2m1": {"target": "z**2 - 1", "activation": "quad", "eta": 0.1, "T": 600,
                  "grid": {"forced": {500: (3, 3.6, 4.2, 5, 6), 1000: (3, 3.6, 4.2, 5, 6),
                                      2000: (3.6, 4.2, 5, 6), 3000: (3.6, 4.2, 4.6, 5),
                                      4000: (3.6, 4.2, 4.6, 5)},
                           "finite_n": {500: (3, 3.6, 4.2, 5, 6)}}},
}
#: the constructions reported; "quenched" is a stored curve of a construction the library no longer has
CONSTRUCTIONS = ("forced", "quenched", "finite_n", "initial")
GD_COUNTS = OUT / "gd_transition_counts.json"
#: finding (k), docs/findings.md: GeLU, y = min(z², 3), d = 1000, 400 steps, 8 trials
GD_MIN3 = {1000: {"deltas": [8.0, 10.0, 13.0], "successes": [0, 6, 8], "trials": [8, 8, 8],
                   "source": "findings (k)"}}


# --------------------------------------------------------------------------- GD
def gd_var(target: str, act: str, eta: float, delta: float, d: int, trials: int, T: int,
           seed: int = 11) -> np.ndarray:
    """``√d M_t`` for ``t ≤ T`` per trial: random start (``[:, 0]``) and ``M_0 = 0`` (``[:, 1]``).

    Plain full-batch GD on float32 data (the library's update), both runs on the same data and
    the same orthogonal part of ``w_0``; ``θ* = e_1``.
    """
    p = Problem.build(target=target, activation=act, eta=eta, steps=T)
    n = int(round(delta * d))
    ms = np.zeros((trials, 2, T + 1))
    root = np.random.SeedSequence([seed, d, int(1000 * delta)])
    for j, ss in enumerate(root.spawn(trials)):
        rng = np.random.default_rng(ss)
        X = rng.standard_normal((n, d), dtype=np.float32)
        y = np.asarray(p.labels(X[:, :1].astype(np.float64), np.zeros(n)), float)
        w0 = rng.standard_normal(d) / math.sqrt(d)
        for v in range(2):
            w = w0.copy()
            if v == 1:
                w[0] = 0.0
            for t in range(T + 1):
                ms[j, v, t] = math.sqrt(d) * w[0]
                if t == T:
                    break
                V = (X @ w.astype(np.float32)).astype(np.float64)
                g = p.grad(y, V[:, None])[:, 0]
                w = w - (eta / n) * (X.T @ g.astype(np.float32)).astype(np.float64)
    return ms


def var_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sample variance over axis 0 and its standard error (normal-theory, √(2/(n−1)) var)."""
    v = x.var(axis=0, ddof=1)
    return v, v * math.sqrt(2.0 / (x.shape[0] - 1))


def gd_counts(case: dict[str, Any], d: int) -> dict[str, Any] | None:
    """GD's successes per δ by the theory's horizon ``T``.

    From ``gd_transition_counts.json`` (``validation/gd_transition_counts.py``: ≥ 40 trials per
    δ, float32, cosine recorded every 5 steps, first passage above 1/2 by step T) when it has
    the case and d; otherwise finding (k) for ``min(z², 3)`` at d = 1000, else ``None``.
    """
    name = next((k for k, v in CASES.items() if v is case), None)
    if GD_COUNTS.exists() and name is not None:
        rows = [r for r in json.loads(GD_COUNTS.read_text())["summary"].get(f"{name}|{d}", {}).get("rows", [])
                if r.get("trials")]
        if len(rows) >= 2 and int(json.loads(GD_COUNTS.read_text())["runs"][f"{name}|{d}"]["T"]) == case["T"]:
            return {"deltas": [r["delta"] for r in rows], "successes": [r["successes"] for r in rows],
                    "trials": [r["trials"] for r in rows], "by_step": case["T"],
                    "source": "gd_transition_counts.json"}
    return GD_MIN3.get(d) if name == "gelu_min3" else None


_FITS: dict[tuple[Any, ...], tuple[float, float, float]] = {}


def cached_probit_fit(deltas: Any, successes: Any, trials: Any) -> tuple[float, float, float]:
    """:func:`probit_fit` memoised on its counts (a report refits the same GD counts for every
    curve of a case and d; the bootstrap makes each fit cost a fraction of a second)."""
    key = (tuple(map(float, deltas)), tuple(map(int, successes)), tuple(map(int, trials)))
    if key not in _FITS:
        _FITS[key] = probit_fit(np.array(key[0]), np.array(key[1]), np.array(key[2]))
    return _FITS[key]


def gd_fit(case: dict[str, Any], d: int) -> tuple[dict[str, Any] | None, tuple[float, float, float]]:
    gd = gd_counts(case, d)
    if not gd:
        return None, (math.nan, math.nan, math.nan)
    return gd, cached_probit_fit(gd["deltas"], gd["successes"], gd["trials"])


# --------------------------------------------------------------------------- parts
def part_var(res: dict[str, Any], recompute_gd: bool) -> None:
    target, act, eta, delta = "z**2 - 1", "gelu", 0.5, 6.0
    if recompute_gd or not GD_VAR.exists():
        gd = {str(d): gd_var(target, act, eta, delta, d, tr, 60).tolist()
              for d, tr in ((500, 200), (1000, 150), (2000, 60))}
        GD_VAR.write_text(json.dumps(gd))
    gd = {int(k): np.array(v) for k, v in json.loads(GD_VAR.read_text()).items()}
    out: dict[str, Any] = {"gd": {}, "theory": {}}
    for d, ms in gd.items():
        v, e = var_se(ms[:, 0])
        vn, en = var_se(ms[:, 1])
        out["gd"][d] = {"trials": ms.shape[0], "var": v, "var_err": e, "var_noise": vn, "var_noise_err": en}
    p = Problem.build(target=target, activation=act, eta=eta, steps=60)
    t0 = time.perf_counter()
    law = hard_overlap_law(p, delta, settings=HardOverlapSettings(steps=20, n_paths=20_000, replicates=4))
    out["theory"]["pathwise"] = {"var": law.var, "var_err": law.var_err, "var_noise": law.var_noise,
                                 "var_noise_err": law.var_noise_err, "A": law.A, "A_err": law.A_err,
                                 "seconds": time.perf_counter() - t0}
    for d in (500, 1000, 2000):
        t0 = time.perf_counter()
        fd = hard_overlap_law(p, delta, d=d, settings=HardOverlapSettings(
            steps=60, n_paths=4000, replicates=4, estimator="finite_d", draws=128))
        out["theory"][f"finite_d_{d}"] = {"var": fd.var, "var_err": fd.var_err, "var_noise": fd.var_noise,
                                          "var_noise_err": fd.var_noise_err,
                                          "seconds": time.perf_counter() - t0}
        # the finite-n DMFT of the transition module: N = n unpaired paths, M_0 = 0 (noise part)
        t0 = time.perf_counter()
        q = Problem.build(target=target, activation=act, eta=eta, steps=60, M0=[[0.0]], Q0=[[1.0]])
        m = np.array([solve_dmft(q, delta, n_paths=int(delta * d), seed=1000 + s, antithetic=False,
                                 errors="batch", n_batches=2).M[:, 0, 0] * math.sqrt(d) for s in range(60)])
        mean_sq = (m**2).mean(axis=0)
        out["theory"][f"dmft_n_{d}"] = {"var_noise": mean_sq,
                                        "var_noise_err": (m**2).std(axis=0, ddof=1) / math.sqrt(m.shape[0]),
                                        "draws": m.shape[0], "seconds": time.perf_counter() - t0}
        print(f"[var] d={d} done", flush=True)
    res["var"] = out


def migrate(res: dict[str, Any]) -> None:
    """Curves of the first version were keyed ``case|d`` (construction ``finite_n``, or
    ``gelu_z2m1_initial_only`` for ``initial``): re-key them ``case|d|construction``."""
    curves = res.get("curves", {})
    for key in [k for k in curves if k.count("|") == 1]:
        c = curves.pop(key)
        cons = "finite_n" if c.pop("noise", True) else "initial"
        c["case"] = c["case"].replace("_initial_only", "")
        c["construction"] = cons
        curves[f"{c['case']}|{c['d']}|{cons}"] = c


def part_curves(res: dict[str, Any], only: str | None, draws: int, ds: list[int] | None,
                constructions: list[str], n_paths: int | None = None, pps: float | None = None,
                workers: int = 1, force_weights: str = "poisson", seed: int = 1,
                write_report: bool = True) -> None:
    res.setdefault("curves", {})
    for name, case in CASES.items():
        if only and name != only:
            continue
        p = Problem.build(target=case["target"], activation=case["activation"], eta=case["eta"],
                          steps=case["T"])
        for cons in constructions:
            for d, grid in case["grid"].get(cons, {}).items():
                if ds and d not in ds:
                    continue
                key = (f"{name}|{d}|{cons}" + (f"@{n_paths}" if n_paths else "")
                       + (f"@pps{pps:g}" if pps else "")
                       + ("@paired" if force_weights == "paired" else "")
                       + (f"@seed{seed}" if seed != 1 else ""))
                if key in res["curves"]:
                    continue
                run_curve(res, key, name, case, p, d, grid, cons, draws, n_paths, pps, workers,
                          force_weights, seed, write_report)


def run_curve(res: dict[str, Any], key: str, name: str, case: dict[str, Any], p: Problem, d: int,
              grid: tuple[float, ...], cons: str, draws: int, n_paths: int | None = None,
              pps: float | None = None, workers: int = 1, force_weights: str = "poisson",
              seed: int = 1, write_report: bool = True) -> None:
    t0 = time.perf_counter()
    extra: dict[str, Any] = {"n_paths": n_paths} if n_paths else {}
    extra["force_weights"] = force_weights
    extra["workers"] = workers  # processes for the draws; the result does not depend on it
    if pps:
        extra["paths_per_sample"] = pps
    # the stored curves use the plain Stein mean (the draws before 0.5.0); pinned so a rerun matches
    settings = TransitionSettings(draws=draws, seed=seed, construction=cons, stein_regression=False, **extra)
    c = transition(p, d, grid, settings=settings, throw=False, progress=True)
    gd, fit = gd_fit(case, d)
    res["curves"][key] = {
        "case": name, "d": d, "construction": cons, "n_paths": n_paths, "paths_per_sample": pps,
        "force_weights": force_weights, "seed": seed, "workers": workers, "target": case["target"],
        "activation": case["activation"],
        "eta": case["eta"], "T": case["T"], "deltas": c.deltas, "p": c.p,
        "p_err": c.p_err, "successes": c.successes, "draws": c.draws, "delta_50": c.delta_50,
        "delta_50_err": c.delta_50_err, "width": c.width, "status": c.status.value,
        "escape_steps": [pt.escape_step for pt in c.points],
        "diverged": [pt.diagnostics["diverged_draws"] for pt in c.points],
        "curvature_excess": [pt.diagnostics["curvature_excess"] for pt in c.points],
        "gd": gd, "gd_delta_50": fit[0], "gd_delta_50_err": fit[1],
        "seconds": time.perf_counter() - t0}
    print(f"[curve] {key}: theory δ_50 {c.delta_50:.2f} ± {c.delta_50_err:.2f}, "
          f"GD {fit[0]:.2f} ± {fit[1]:.2f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    save(res)
    if write_report:
        report(res)


def save(res: dict[str, Any]) -> None:
    """Write ``res``, first taking in the curves other runs (other cases or d) wrote since."""
    disk = json.loads(JSON.read_text()) if JSON.exists() else {}
    migrate(disk)
    for k, v in disk.get("curves", {}).items():
        res.setdefault("curves", {}).setdefault(k, v)
    JSON.write_text(json.dumps(jsonable(res)))


# --------------------------------------------------------------------------- report
def fmt(x: Any, e: Any, nd: int = 2) -> str:
    if x is None or e is None or not (math.isfinite(float(x)) and math.isfinite(float(e))):
        return "–" if x is None or not math.isfinite(float(x)) else f"{float(x):.{nd}f}"
    return f"{float(x):.{nd}f} ± {float(e):.{nd}f}"


def label(c: dict[str, Any]) -> str:
    """A curve's construction, with its kernel paths when not the default."""
    n, pps = c.get("n_paths"), c.get("paths_per_sample")
    return (c["construction"] + (f" ({n:.0e} paths)".replace("e+0", "e") if n else "")
            + (f" ({pps:g} paths per sample)" if pps else "")
            + (", paired weights" if c.get("force_weights") == "paired" else "")
            + (f", seed {c['seed']}" if c.get("seed", 1) != 1 else ""))


def pooled(curves: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Curves of one configuration run with several seeds (keys ``…@seedN``), pooled: the counts
    summed per δ (:func:`summed_counts`) and one probit fit on the pooled counts. Configurations
    with a single seed are left out."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for key, c in curves.items():
        groups.setdefault(key.split("@seed")[0], []).append(c)
    out = {}
    for base, cs in groups.items():
        if len(cs) < 2:
            continue
        xs, succ, tot, _, _ = summed_counts(cs)
        fit = probit_fit(np.array(xs), succ, tot)
        out[base] = {"seeds": sorted(c.get("seed", 1) for c in cs), "deltas": xs,
                     "successes": succ.tolist(), "draws": tot.tolist(), "delta_50": fit[0],
                     "delta_50_err": fit[1], "width": fit[2], "curve": cs[0]}
    return out


def summed_counts(cs: list[dict[str, Any]]) -> tuple[list[float], np.ndarray, np.ndarray,
                                                       list[float], list[list[int]]]:
    """Curves' counts summed per δ (each seed's draws are an unbiased stratified sample, so the
    pooled fraction is too): ``(deltas, successes, draws, p_err, escape steps)``, with ``p_err``
    the curves' errors combined by draws and the draws' escape steps pooled (−1: none)."""
    per: dict[float, list[float]] = {}  # δ -> [successes, draws, Σ (draws · p_err)²]
    esc: dict[float, list[int]] = {}
    for c in cs:
        for x, k, n, e in zip(c["deltas"], c["successes"], c["draws"], c["p_err"], strict=True):
            acc = per.setdefault(float(x), [0, 0, 0.0])
            acc[0] += int(k)
            acc[1] += int(n)
            acc[2] += (n * e) ** 2
        for x, es in zip(c["deltas"], c.get("escape_steps") or [[]] * len(c["deltas"]), strict=True):
            esc.setdefault(float(x), []).extend(-1 if v is None else int(v) for v in es)
    xs = sorted(per)
    return (xs, np.array([per[x][0] for x in xs]), np.array([per[x][1] for x in xs]),
            [math.sqrt(per[x][2]) / per[x][1] for x in xs], [esc.get(x, []) for x in xs])


def default_curve(res: dict[str, Any], case: str, d: int) -> dict[str, Any] | None:
    """The theory curve of ``(case, d)`` closest to what ``dmftsolve transition`` does by default.

    Forced construction with paired force weights and the default 2·10⁴ kernel paths, or, where it
    was run, ``paths_per_sample = 2`` (N = 2n, which the paired weights need once n > 10⁴); the
    curves of several seeds of that configuration pooled (counts summed per δ, errors combined
    by draws). Without a paired curve, the Poisson-weighted one stands in and says so
    (``"weights": "poisson"``). ``None`` if ``(case, d)`` has no forced curve.
    """
    curves = {k: c for k, c in res.get("curves", {}).items()
              if c["case"] == case and int(c["d"]) == d and c["construction"] == "forced"
              and not c.get("n_paths")}
    paired = {k: c for k, c in curves.items() if c.get("force_weights") == "paired"}
    pick = ({k: c for k, c in paired.items() if c.get("paths_per_sample") == 2}
            or {k: c for k, c in paired.items() if not c.get("paths_per_sample")}
            or {k: c for k, c in curves.items() if c.get("force_weights", "poisson") == "poisson"
                and not c.get("paths_per_sample") and c.get("seed", 1) == 1})
    if not pick:
        return None
    cs = [pick[k] for k in sorted(pick)]
    xs, succ, tot, p_err, esc = summed_counts(cs)
    if len(cs) == 1:
        fit = (cs[0]["delta_50"], cs[0]["delta_50_err"], cs[0]["width"])
    else:
        fit = cached_probit_fit(xs, succ, tot)
    c0 = cs[0]
    weights = c0.get("force_weights", "poisson")
    run = (f"{weights}" + (", N = 2n" if c0.get("paths_per_sample") == 2 else ", N = 2·10⁴")
           + (f", {len(cs)} seeds pooled" if len(cs) > 1 else ""))
    return {"case": case, "d": d, "keys": sorted(pick), "weights": weights, "run": run,
            "deltas": xs, "successes": succ.tolist(), "draws": tot.tolist(),
            "escape_steps": esc, "p": (succ / tot).tolist(), "p_err": p_err,
            "delta_50": fit[0], "delta_50_err": fit[1], "width": fit[2], "gd": c0.get("gd"),
            "gd_delta_50": c0.get("gd_delta_50"), "gd_delta_50_err": c0.get("gd_delta_50_err"),
            "gd_width": c0.get("gd_width")}


Fit = tuple[float, float]


def by_horizon(q: dict[str, Any], Ts: tuple[int, ...]) -> dict[int, tuple[Fit, Fit]]:
    """δ_50 of theory and GD counting only escapes by step ``T`` (first passage above 1/2), for each
    ``T`` in ``Ts``: ``{T: ((theory δ_50, se), (GD δ_50, se))}`` from ``default_curve`` ``q`` (its
    draws' escape steps) and the per-trial escape steps of ``gd_transition_counts.json``.
    Empty when either side lacks escape steps (older curves, or GD from another source)."""
    runs = json.loads(GD_COUNTS.read_text())["runs"] if GD_COUNTS.exists() else {}
    run = runs.get(f"{q['case']}|{q['d']}")
    if run is None or not all(len(e) == n for e, n in zip(q["escape_steps"], q["draws"], strict=True)):
        return {}
    out = {}
    for T in Ts:
        k = [sum(1 for v in e if 0 <= v <= T) for e in q["escape_steps"]]
        th = cached_probit_fit(q["deltas"], k, q["draws"])
        gd = cached_probit_fit(*_GTC.counts_by(run, T))
        out[T] = ((th[0], th[1]), (gd[0], gd[1]))
    return out


def within(th: Any, ge: Any) -> tuple[str, str]:
    """The difference theory − GD and whether it meets max(0.3, 5 % of GD) ('–' if undefined)."""
    if th is None or ge is None or not (math.isfinite(th) and math.isfinite(ge)):
        return "–", "–"
    diff = round(th - ge, 2) + 0.0  # + 0.0: no '-0.00'
    return f"{diff:+.2f}", "yes" if abs(th - ge) <= max(0.3, 0.05 * ge) else "no"


def report(res: dict[str, Any]) -> None:
    for c in res.get("curves", {}).values():  # GD numbers always from their source, by the theory's T
        gd, fit = gd_fit(CASES[c["case"]], int(c["d"]))
        c["gd"], c["gd_delta_50"], c["gd_delta_50_err"], c["gd_width"] = gd, fit[0], fit[1], fit[2]
    L = ["# Finite-d transition: theory vs GD", "",
         "Generated by `python -m validation.transition_vs_simulation` (`--report` rebuilds this "
         "page from the JSON). Theory: `dmftsolve.finite_d.transition`, one "
         "unrestricted DMFT per draw started at `M_0 = m_0/√d` (`m_0` stratified over `N(0, 1)`), "
         "success = cosine first above 1/2 by step T; constructions (`TransitionSettings.construction`): "
         "**forced** (2·10⁴ reflection-paired kernel paths, overlap update driven by GD's "
         "finite-n gradient through Poisson bootstrap weights of n = δd samples; rows marked "
         "'paired weights' use the paired weights, the library's default since they were measured), "
         "**quenched** (GD's gradient "
         "over n quenched label samples, kernels over 2 copies of them), **finite_n** (N = n unpaired "
         "paths), **initial** (no finite-n sources). δ_50 of theory and GD: the same probit "
         "maximum-likelihood fit (`probit_fit`), ± bootstrap standard error. GD counts: "
         "`gd_transition_counts.json` (`python -m validation.gd_transition_counts`, ≥ 40 trials per "
         "δ, float32) where it has the case and d, else finding (k) for `min(z², 3)`; a run "
         "succeeds when its cosine first exceeds 1/2 at a recorded step ≤ T, the theory's "
         "criterion. The `source` column says which.", ""]
    if "curves" in res:
        L += ["## δ_50", "",
              "| case | d | construction | T | theory δ_50 (width) | GD δ_50 (width) | GD source | diff | "
              "within max(0.3, 5 %)? |",
              "|---|---|---|---|---|---|---|---|---|"]
        order = {c: i for i, c in enumerate(CONSTRUCTIONS)}
        for c in sorted(res["curves"].values(),
                        key=lambda c: (order[c["construction"]], c["case"], c["d"], c.get("n_paths") or 0,
                                       c.get("paths_per_sample") or 0, c.get("force_weights") or "",
                                       c.get("seed", 1))):
            th, ge = c["delta_50"], c["gd_delta_50"]
            diff, ok = within(th, ge)
            gw = c.get("gd_width")
            L.append(f"| {c['case']} | {c['d']} | {label(c)} | {c['T']} | "
                     f"{fmt(th, c['delta_50_err'])} ({c['width']:.2f}) | {fmt(ge, c['gd_delta_50_err'])}"
                     f"{f' ({gw:.2f})' if gw is not None and math.isfinite(gw) else ''} | "
                     f"{(c['gd'] or {}).get('source', '–')} | {diff} | {ok} |")
        pool = pooled(res["curves"])
        if pool:
            L += ["", "## Pooled over seeds", "",
                  "Curves of one configuration run with several `--seed`s: counts summed per δ, one "
                  "probit fit (`pooled`).", "",
                  "| configuration | seeds | draws per δ | theory δ_50 (width) | GD δ_50 | diff | "
                  "within max(0.3, 5 %)? |", "|---|---|---|---|---|---|---|"]
            for base, q in pool.items():
                c = q["curve"]
                ge = c["gd_delta_50"]
                diff, ok = within(q["delta_50"], ge)
                name = base.replace("|", " · ")  # a '|' would split the table's cell
                lo, hi = min(q["draws"]), max(q["draws"])  # grids of the seeds may differ
                L.append(f"| `{name}` | {', '.join(map(str, q['seeds']))} | "
                         f"{lo if lo == hi else f'{lo}–{hi}'} | "
                         f"{fmt(q['delta_50'], q['delta_50_err'])} ({q['width']:.2f}) | "
                         f"{fmt(ge, c['gd_delta_50_err'])} | {diff} | {ok} |")
        L += ["", "## The default construction against GD", "",
              "Per case and d, the curve closest to `dmftsolve transition`'s default (`default_curve`): "
              "forced, paired force weights, N = 2n kernel paths where run (else 2·10⁴), seeds pooled; "
              "'poisson' marks a (case, d) with no paired run, where the Poisson-weighted curve stands in.",
              "", "| case | d | run | theory δ_50 (width) | GD δ_50 (width) | diff | within max(0.3, 5 %)? |",
              "|---|---|---|---|---|---|---|"]
        for name in CASES:
            for d in sorted({int(c["d"]) for c in res["curves"].values() if c["case"] == name}):
                q = default_curve(res, name, d)
                if q is None:
                    continue
                diff, ok = within(q["delta_50"], q["gd_delta_50"])
                gw = q.get("gd_width")
                gws = f" ({gw:.2f})" if gw is not None and math.isfinite(gw) else ""
                L.append(f"| {name} | {d} | {q['run']} | {fmt(q['delta_50'], q['delta_50_err'])} "
                         f"({q['width']:.2f}) | {fmt(q['gd_delta_50'], q['gd_delta_50_err'])}{gws} | "
                         f"{diff} | {ok} |")
        Ts = (50, 100, 200, 400, 600)
        L += ["", "## δ_50 by horizon: escapes by step T only", "",
              "The default curves and GD counting an escape only if the cosine first passed 1/2 by "
              "step T (`by_horizon`; T beyond a case's horizon is left empty). Where theory and GD "
              "part as T grows, the difference is escapes that GD makes late and the theory does not.",
              "", "| case | d | " + " | ".join(f"T = {T}: theory / GD" for T in Ts) + " |",
              "|---|---|" + "---|" * len(Ts)]
        for name in CASES:
            for d in sorted({int(c["d"]) for c in res["curves"].values() if c["case"] == name}):
                q = default_curve(res, name, d)
                bh = by_horizon(q, tuple(T for T in Ts if T <= CASES[name]["T"])) if q else {}
                if not bh:
                    continue
                cells = [f"{fmt(*bh[T][0])} / {fmt(*bh[T][1])}" if T in bh else "" for T in Ts]
                L.append(f"| {name} | {d} | " + " | ".join(cells) + " |")
        L += ["", "## Success curves", ""]
        for key, c in res["curves"].items():
            L += [f"### {key} (theory {c['draws'][0]} draws per δ, {c['seconds']:.0f} s; GD: "
                  f"{(c['gd'] or {}).get('source', 'none')})", "",
                  "| δ | theory P | GD |", "|---|---|---|"]
            gd = c["gd"] or {"deltas": [], "successes": [], "trials": []}
            gdm = {float(x): (s, n)
                   for x, s, n in zip(gd["deltas"], gd["successes"], gd["trials"], strict=True)}
            allx = sorted(set(map(float, c["deltas"])) | set(gdm))
            thm = {float(x): (p, e, s, n) for x, p, e, s, n in
                   zip(c["deltas"], c["p"], c["p_err"], c["successes"], c["draws"], strict=True)}
            for x in allx:
                t = thm.get(x)
                g = gdm.get(x)
                ts = f"{t[2]}/{t[3]} = {t[0]:.2f} ± {t[1]:.2f}" if t else ""
                gs = ""
                if g:
                    pg = g[0] / g[1]
                    gs = f"{g[0]}/{g[1]} = {pg:.2f} ± {math.sqrt(max(pg * (1 - pg), 0.25 / g[1]) / g[1]):.2f}"
                L.append(f"| {x:g} | {ts} | {gs} |")
            L.append("")
    if "var" in res:
        v = res["var"]
        L += ["## Var(m_t), GeLU, y = z² − 1, η = 0.5, δ = 6", "",
              "GD: sample variance over trials ± √(2/(n−1))·var. Theory: `hard_overlap_law` "
              "(pathwise: 4 × 2·10⁴ paths, t ≤ 20; finite_d: frozen-kernel propagation at the "
              "physical amplitude, 4 × 4000 paths × 128 draws) and the finite-n DMFT (60 draws, "
              "N = n unpaired paths, M_0 = 0: noise part only). Errors: replicate spread.", "",
              "| t | d | GD Var m_t | GD noise part | pathwise Var | pathwise noise | finite_d Var | "
              "finite_d noise | finite-n DMFT noise |", "|---|---|---|---|---|---|---|---|---|"]
        pw = v["theory"]["pathwise"]
        for t in VAR_TIMES:
            for d in ("500", "1000", "2000"):
                g = v["gd"].get(d) or v["gd"].get(int(d))
                fd = v["theory"].get(f"finite_d_{d}")
                dn = v["theory"].get(f"dmft_n_{d}")
                pws = ((fmt(pw["var"][t], pw["var_err"][t], 1),
                        fmt(pw["var_noise"][t], pw["var_noise_err"][t], 1))
                       if t < len(pw["var"]) else ("–", "–"))
                L.append(f"| {t} | {d} | {fmt(g['var'][t], g['var_err'][t], 1)} | "
                         f"{fmt(g['var_noise'][t], g['var_noise_err'][t], 1)} | {pws[0]} | {pws[1]} | "
                         f"{fmt(fd['var'][t], fd['var_err'][t], 1) if fd else '–'} | "
                         f"{fmt(fd['var_noise'][t], fd['var_noise_err'][t], 1) if fd else '–'} | "
                         f"{fmt(dn['var_noise'][t], dn['var_noise_err'][t], 1) if dn else '–'} |")
        L.append("")
    (OUT / "transition_vs_simulation.md").write_text("\n".join(L) + "\n")
    plot(res)
    plot_front(res)


ACTIVATION_NAMES = {"gelu": "GeLU", "quad": "r²", "relu": "ReLU", "tanh": "tanh"}


def pretty_target(target: str) -> str:
    """``z**2 - 1`` → ``z² − 1``, ``Min(z**2, 3)`` → ``min(z², 3)`` (figure titles)."""
    return target.replace("**2", "²").replace(" - ", " − ").replace("Min(", "min(").replace("Abs(", "abs(")


def case_title(c: dict[str, Any]) -> str:
    """A curve's problem in words: activation, label, d and the horizon T."""
    act = ACTIVATION_NAMES.get(c["activation"], c["activation"])
    T = c.get("T") or CASES.get(c.get("case", ""), {}).get("T")
    return f"{act}, y = {pretty_target(c['target'])}, d = {c['d']}" + (f", T = {T}" if T else "")


def clipped(p: Any, err: Any) -> np.ndarray:
    """Asymmetric error bars for a probability ``p ± err`` that stay inside [0, 1]."""
    p, err = np.asarray(p, float), np.asarray(err, float)
    return np.vstack([np.minimum(err, p), np.minimum(err, 1.0 - p)])


def gd_points(ax: Any, c: dict[str, Any]) -> None:
    """GD's success fractions of curve ``c`` with binomial error bars (never zero, clipped to
    [0, 1]) and its δ_50."""
    gd = c["gd"]
    k, n = np.array(gd["successes"], float), np.array(gd["trials"], float)
    pg = k / n
    ax.errorbar(gd["deltas"], pg, clipped(pg, np.sqrt(np.maximum(pg * (1 - pg), 0.25 / n) / n)),
                fmt="ks--", capsize=2, ms=4,
                label=f"GD {fmt(c['gd_delta_50'], c['gd_delta_50_err'])}")


def theory_curve(ax: Any, c: dict[str, Any], fmt_: str, label_: str) -> None:
    """One theory curve: points with clipped binomial error bars and the error band."""
    x, p, e = np.asarray(c["deltas"], float), np.asarray(c["p"], float), np.asarray(c["p_err"], float)
    line = ax.errorbar(x, p, clipped(p, e), fmt=fmt_, capsize=2, ms=4, label=label_)
    ax.fill_between(x, np.clip(p - e, 0, 1), np.clip(p + e, 0, 1), color=line[0].get_color(), alpha=0.15,
                    lw=0)


def plot(res: dict[str, Any]) -> None:
    """One panel per (case, d), cases in the order of :data:`CASES` and d ascending: each theory
    construction's curve and GD's counts; legends under the panels."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = res.get("curves", {})
    if not curves:
        return
    panels: dict[tuple[int, int], list[dict[str, Any]]] = {}
    order = list(CASES)
    for c in curves.values():
        key = (order.index(c["case"]) if c["case"] in order else len(order), int(c["d"]))
        panels.setdefault(key, []).append(c)
    ncol = min(4, len(panels))
    nrow = -(-len(panels) // ncol)
    most = max(len(cs) for cs in panels.values()) + 1
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, (2.5 + 0.17 * most) * nrow), squeeze=False)
    style = {"forced": "o-", "quenched": "^-", "finite_n": "v:", "initial": "x:"}
    for ax, (_key, cs) in zip(axes.ravel(), sorted(panels.items()), strict=False):
        for c in sorted(cs, key=lambda c: (CONSTRUCTIONS.index(c["construction"]), c.get("n_paths") or 0)):
            variant = c.get("n_paths") or c.get("paths_per_sample") or c.get("force_weights") == "paired"
            theory_curve(ax, c, "d-." if variant else style[c["construction"]],
                         f"{label(c)} {fmt(c['delta_50'], c['delta_50_err'])}")
        c = cs[0]
        if c["gd"]:
            gd_points(ax, c)
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set_title(case_title(c), fontsize=8)
        ax.set_xlabel("δ = n/d", fontsize=8)
        ax.set_ylabel("P(success by T)", fontsize=8)
        ax.set_ylim(-0.03, 1.03)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=5.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    fig.suptitle("Predicted success curves (dmftsolve transition constructions) against GD; "
                 "success = cosine first above 1/2 by step T", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    fig.savefig(OUT / "transition_vs_simulation.png", dpi=110)
    plt.close(fig)


def plot_front(res: dict[str, Any]) -> None:
    """The README's figure: GeLU, y = z² − 1, the default construction (:func:`default_curve`)
    against GD at each d that has both."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds = sorted({int(c["d"]) for c in res.get("curves", {}).values() if c["case"] == "gelu_z2m1"})
    cs = [q for q in (default_curve(res, "gelu_z2m1", d) for d in ds) if q is not None and q.get("gd")]
    if not cs:
        return
    fig, axes = plt.subplots(1, len(cs), figsize=(2.9 * len(cs), 3.1), squeeze=False, sharey=True)
    for ax, c in zip(axes[0], cs, strict=True):
        theory_curve(ax, c, "o-", f"theory {fmt(c['delta_50'], c['delta_50_err'])}")
        gd_points(ax, c)
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set_title(f"d = {c['d']}\n{c['run']}", fontsize=7)
        ax.set_xlabel("δ = n/d", fontsize=8)
        ax.set_ylim(-0.03, 1.03)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6.5, loc="upper left", frameon=False)
    axes[0][0].set_ylabel("P(cosine > 1/2 by step 400)", fontsize=8)
    fig.suptitle("GeLU neuron, y = z² − 1, η = 0.5: predicted success probability (dmftsolve transition, "
                 "band ± 1 s.e.) against GD", fontsize=9)
    fig.tight_layout()
    fig.savefig(OUT / "transition_front.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--only", default=None, help="run only this curve case (a key of CASES)")
    ap.add_argument("--draws", type=int, default=16, help="theory draws per δ (default 16)")
    ap.add_argument("--ds", default="", help="comma-separated input dimensions to run (default: all)")
    ap.add_argument("--paths", type=int, default=None,
                    help="kernel paths of the theory (default: TransitionSettings' 2·10⁴); such "
                         "curves are keyed case|d|construction@PATHS and drawn beside the default")
    ap.add_argument("--paths-per-sample", type=float, default=None,
                    help="kernel paths per sample n = δd (TransitionSettings.paths_per_sample: the law "
                         "of D at GD's sample size); keyed case|d|construction@ppsX")
    ap.add_argument("--force-weights", choices=("poisson", "paired"), default="poisson",
                    help="forced: the force's weights (TransitionSettings.force_weights); paired "
                         "curves are keyed case|d|construction...@paired")
    ap.add_argument("--seed", type=int, default=1,
                    help="root seed of the theory draws (TransitionSettings.seed; default 1); curves "
                         "with another seed are keyed ...@seedN, and the report pools the seeds of "
                         "one configuration")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes for the theory draws (TransitionSettings.workers; default 1)")
    ap.add_argument("--var", action="store_true", help="also run the Var(m_t) part")
    ap.add_argument("--no-curves", action="store_true", help="skip the success curves")
    ap.add_argument("--gd-var", action="store_true", help="recompute the GD Var(m_t) numbers")
    ap.add_argument("--report", action="store_true", help="only rebuild the report from the JSON")
    ap.add_argument("--plots", action="store_true",
                    help="only redraw the two figures from the JSON (seconds; no fits redone)")
    ap.add_argument("--no-report", action="store_true",
                    help="save the JSON but skip rebuilding the report (about 3 CPU-min); for "
                         "chained runs, followed by one --report")
    ap.add_argument("--constructions", default="forced",
                    help=f"comma-separated theory constructions to run, of {', '.join(CONSTRUCTIONS)} "
                         "(default: forced)")
    args = ap.parse_args()
    if args.only is not None and args.only not in CASES:
        ap.error(f"--only: unknown case {args.only!r}; choose from {list(CASES)}")
    if args.paths is not None and args.paths < 2:
        ap.error(f"--paths must be an integer >= 2, got {args.paths}")
    if args.seed < 0:
        ap.error(f"--seed must be an integer >= 0, got {args.seed}")
    if args.workers < 1:
        ap.error(f"--workers must be an integer >= 1, got {args.workers}")
    if args.paths_per_sample is not None and not 0 < args.paths_per_sample <= 1000:
        ap.error(f"--paths-per-sample must be in (0, 1000], got {args.paths_per_sample}")
    cons = [c for c in args.constructions.split(",") if c]
    bad = sorted(set(cons) - set(CONSTRUCTIONS))
    if bad:
        ap.error(f"--constructions: unknown {bad}; choose from {list(CONSTRUCTIONS)}")
    res = json.loads(JSON.read_text()) if JSON.exists() else {}
    migrate(res)
    if args.plots:
        plot(res)
        plot_front(res)
        return
    if args.report:
        report(res)
        return
    with threadpool_limits(1):
        if not args.no_curves:
            part_curves(res, args.only, args.draws, [int(x) for x in args.ds.split(",") if x], cons,
                        args.paths, args.paths_per_sample, args.workers, args.force_weights, args.seed,
                        not args.no_report)
        if args.var:
            part_var(res, args.gd_var)
    save(res)
    if not args.no_report:
        report(res)


if __name__ == "__main__":
    main()
