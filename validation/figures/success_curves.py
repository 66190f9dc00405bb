"""The paper's Figures 1, 4, 5: GD's success probability and final cosine against δ.

Single neuron ``f = σ(wᵀx)`` (a = 1, no bias), square loss ``(y − f)²/2``, full-batch GD from
``w⁰ ~ N(0, I/d)`` for a fixed number of steps; success = final ``|cos(w, θ*)| > 1/2``.
Four cases (``--cases``): GeLU (η = 0.5, 1000 steps) and r² (``quad``, η = 0.1, 2000 steps),
each on ``y = z²`` and on the centred ``y = z² − 1`` (the convention under which GD's
transition sits at the paper's 6.0 for GeLU: ``docs/findings.md`` §3.1); d = 1000, 2000,
3000, 4000. For r² the paper's 3.6 was approached only with a trained output scale *and* bias
(δ_50 = 3.71–3.75, findings §3.1); the library cannot train the output scale, so the r² panels
show the plain neuron on both labels (δ_50 ≈ 4.0 for ``z² − 1`` and 5.5 for ``z²`` there).

For each (case, d, δ) the script runs ``--trials`` GD runs through
:func:`dmftsolve.sweep` (float32 data, one BLAS thread per run, the runs spread over
``--workers`` processes or a dask cluster) and records the success rate with its binomial
standard error ``√(p(1 − p)/trials)``, the median and 30/70 percentiles of the final cosine,
the escape steps (first recorded step with cosine > 1/2) and the final losses.

Theory on the same axes:

* **finite-d success curve** (dashed): :func:`dmftsolve.finite_d.transition`
  (helper D's finite-n DMFT; ``--theory-draws`` draws per δ, horizon ``--theory-steps``
  GD steps, default 400: the DMFT's ``N = δd``-path solves can blow up long after an escape,
  see that module); drawn only where it ran — a failure is recorded in the JSON and the
  caption says so. ``--no-theory`` skips it.
* **δ_NN** (vertical dashed line with its standard error as a band):
  ``dmftsolve.delta_nn(problem, t)`` at ``t·η = 1`` (the early-time threshold, the one near
  GD's finite-d transition, findings §4.3), 3 seeds × 10⁴ paths. The paper's value
  (6.0 GeLU, 3.6 r²) is the grey dotted line.

Every finished point (one δ of one case at one d; one theory curve; one δ_NN) is cached in
``<out>/cache/success_curves/`` under the hash of its settings, so
``--replot`` redraws the figure without running anything.

Run
---
Default settings: 40 trials per point (the issue asks for at least 20 near the transition),
cosine recorded every 10 steps, float32 data, seed 0, and per case the δ grid (``--deltas``
overrides it for every case): GeLU on ``z² − 1``: 4, 5, 5.5, 6, 6.5, 7, 7.5, 8.5, 10; GeLU on
``z²``: 6, 8, 9, 10, 11, 12, 13, 15; r² on ``z² − 1``: 3, 3.5, 4, 4.5, 5, 6, 7; r² on ``z²``: 3,
4, 4.5, 5, 5.5, 6, 7, 8.

Full size (not run yet; estimate from the measured ≈ 3 s per GD run of 1000 steps at
d = 1000, δ ≈ 7 on one idle core, scaling like d²·δ·steps; on the loaded machine the one
d = 1000 run below took 13.6 s per GD run)::

    python -m validation.figures.success_curves --trials 40 --workers 2

≈ 40 trials × (8 δ) × [1 + 4 + 9 + 16] (d = 1000…4000, relative cost) × 3 s × 4 cases
× (1 GeLU, 2·0.6 r² steps·δ factor) ≈ 3·10⁵ s ≈ 80 CPU-hours, plus the theory
(≈ 5 s per draw at d = 1000, T = 400, growing ∝ d: 16 draws × 8 δ × 4 d × 4 cases ≈ 8
CPU-hours). On a cluster: ``--dask tcp://scheduler:8786``. A single case at d = 1000:
``python -m validation.figures.success_curves --cases gelu_z2m1 --ds 1000 --trials 20
--deltas 5,6,6.5,7,8`` (measured cost in ``validation/results/figures/success_curves.json``,
``diagnostics.gd_seconds_per_run``).

Measured (the one run so far, a subset of the full size, cached in
``validation/results/figures/cache/success_curves/`` and drawn in
``validation/results/figures/success_curves.png``: GeLU on ``z² − 1``, d = 1000, 20 trials at
δ = 5, 6, 6.5, 7, 8, one worker on the shared 2-core machine): 1784 s wall, of which GD
13.6 s per run on average (6.7–29.5 s: the machine was loaded), the theory curve 420 s
(16 draws × 5 δ) and δ_NN 3 s. Successes 2, 4, 8, 11, 19 of 20 (GD probit δ_50 = 6.71 ± 0.15);
theory δ_50 = 7.29 ± 0.19; δ_NN(t·η = 1) = 6.50 ± 0.75.

The two r² cases at d = 1000 with their default δ grids and 20 trials are their own figure
(``--cases quad_z2m1,quad_z2 --ds 1000 --trials 20 --workers 2 --out
validation/results/figures/success_r2``; 806 s for ``quad_z2m1`` and 1256 s more for ``quad_z2``
on 2 idle cores, GD 2.6–10.6 s per run of 2000 steps, theory 526 / 708 s): GD δ_50 = 3.83 ± 0.13
and 5.23 ± 0.14, theory (by step 400) 4.34 ± 0.16 and 5.82 ± 0.19, δ_NN(t·η = 1) = 5.58 ± 0.11
and 7.15 ± 0.30 (``docs/figures.md`` §1a).

``--quick`` (the test): d = 40, two cases, 3 δ, 2 trials, 30 steps, tiny theory; seconds.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from dmftsolve import Problem
from dmftsolve.finite_d import TransitionSettings
from validation.figures.common import (
    CacheMiss,
    PointCache,
    base_parser,
    caption_text,
    command_line,
    make_executor,
    write_outputs,
)

NAME = "success_curves"

#: name -> problem keywords, the paper's δ and the default δ grid
CASES: dict[str, dict[str, Any]] = {
    "gelu_z2m1": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 1000,
                  "paper": 6.0, "deltas": (4.0, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.5, 10.0)},
    "gelu_z2": {"target": "z**2", "activation": "gelu", "eta": 0.5, "steps": 1000,
                "paper": 6.0, "deltas": (6.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 15.0)},
    "quad_z2m1": {"target": "z**2 - 1", "activation": "quad", "eta": 0.1, "steps": 2000,
                  "paper": 3.6, "deltas": (3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0), "nn_bracket": (2.5, 40.0)},
    "quad_z2": {"target": "z**2", "activation": "quad", "eta": 0.1, "steps": 2000,
                "paper": 3.6, "deltas": (3.0, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0), "nn_bracket": (2.5, 40.0)},
}
FULL = {"ds": [1000, 2000, 3000, 4000], "trials": 40, "theory_draws": 16, "theory_steps": 400,
        "nn_paths": 10_000, "nn_replicates": 3, "record_every": 10}
QUICK = {"ds": [40], "trials": 2, "theory_draws": 2, "theory_steps": 20, "nn_paths": 1000,
         "nn_replicates": 1, "record_every": 5, "steps": 30, "cases": ["gelu_z2m1", "quad_z2"],
         "deltas": [2.0, 6.0, 12.0]}
SUCCESS = 0.5


def problem_of(case: dict[str, Any], steps: int) -> Problem:
    return Problem.build(target=case["target"], activation=case["activation"], eta=case["eta"],
                         steps=steps)


# --------------------------------------------------------------------------- GD points
def gd_point(case: dict[str, Any], steps: int, d: int, delta: float, trials: int, seed: int,
             record_every: int, executor: Any) -> dict[str, Any]:
    """``trials`` GD runs at ``(d, δ)`` through :func:`dmftsolve.sweep`; summary statistics."""
    from dmftsolve import sweep

    p = problem_of(case, steps)
    ss = np.random.SeedSequence([seed, d, int(round(1000 * delta))])
    res = sweep(p, d, [delta], trials=trials, seed=ss, executor=executor, progress=False,
                success_threshold=SUCCESS, dtype=np.float32, record_every=record_every)
    run = res.runs[0]
    cos = run.cosine
    final = cos[:, -1]
    esc = []
    for j in range(trials):
        above = np.flatnonzero(np.isfinite(cos[j]) & (cos[j] > SUCCESS))
        esc.append(int(run.steps[above[0]]) if above.size else None)
    succ = int(np.sum(np.isfinite(final) & (final > SUCCESS)))
    return {
        "successes": succ, "trials": trials, "rate": float(res.success_rate[0]),
        "rate_se": float(res.success_stderr[0]), "cos_q30": float(res.cosine_q30[0]),
        "cos_median": float(res.cosine_median[0]), "cos_q70": float(res.cosine_q70[0]),
        "final_cosine": final.tolist(), "escape_step": esc,
        "train_loss": float(res.train_loss[0]), "test_loss": float(res.test_loss[0]),
        "nonfinite": int(res.diagnostics["nonfinite"][0]),
        "seconds_per_run": float(np.mean(run.diagnostics["trial_elapsed"])),
        "status": res.status.value,
    }


def gd_probit(pts: list[dict[str, Any]]) -> dict[str, Any]:
    """GD's δ_50: the probit fit of helper D's :func:`probit_fit` to the success counts."""
    try:
        from dmftsolve.finite_d import probit_fit

        mu, se, w = probit_fit(np.array([p["delta"] for p in pts]), np.array([p["successes"] for p in pts]),
                               np.array([p["trials"] for p in pts]))
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"delta_50": mu, "delta_50_err": se, "width": w,
            "fit": "probit maximum likelihood, bootstrap se (dmftsolve.thresholds.probit_fit)"}


# --------------------------------------------------------------------------- theory
#: the theory curve's settings, part of the cache key: fixed here rather than the library's
#: defaults, so that the stored curves are redrawn with what computed them (2·10⁴ kernel paths,
#: the cut-off 10⁻⁴ and the plain Stein mean; the float32 path history gave the float64 outcome in
#: 191 of 192 paired draws, ``path_precision`` in ``docs/investigations.md``).
THEORY_SETTINGS: dict[str, Any] = {"construction": "forced", "n_paths": 20_000, "paths_per_sample": None,
                                   "force_weights": "paired"}
THEORY_NULL_RTOL = 1e-4


def theory_curve(case: dict[str, Any], steps: int, d: int, deltas: list[float], draws: int,
                 seed: int) -> dict[str, Any]:
    """Helper D's finite-d success curve; an ``error`` entry if it is unavailable or fails."""
    t0 = time.perf_counter()
    try:
        from dmftsolve.finite_d import transition

        curve = transition(problem_of(case, steps), d, deltas,
                           settings=TransitionSettings(steps=steps, draws=draws, seed=seed,
                                                       stein_regression=False, null_rtol=THEORY_NULL_RTOL,
                                                       n_paths=THEORY_SETTINGS["n_paths"]),
                           throw=False)
    except Exception as exc:  # noqa: BLE001 - recorded and drawn without the theory
        return {"error": f"{type(exc).__name__}: {exc}", "elapsed": time.perf_counter() - t0}
    return {"deltas": curve.deltas.tolist(), "p": curve.p.tolist(), "p_err": curve.p_err.tolist(),
            "delta_50": curve.delta_50, "delta_50_err": curve.delta_50_err,
            "status": curve.status.value, "message": curve.message, "elapsed": curve.elapsed,
            **THEORY_SETTINGS}


def delta_nn_early(case: dict[str, Any], n_paths: int, replicates: int, seed: int,
                   quick: bool) -> dict[str, Any]:
    """``δ_NN(t)`` at ``t·η = 1`` (3 seeds in full size); an ``error`` entry on failure."""
    t0 = time.perf_counter()
    t = max(1, int(round(1.0 / case["eta"])))
    try:
        from dmftsolve import ThresholdSettings, delta_nn

        kw: dict[str, Any] = {"n_paths": n_paths, "replicates": replicates, "seed": seed,
                              "bracket": case.get("nn_bracket", (1.0, 40.0)), "workers": 1}
        if quick:
            kw.update(grid=4, xtol=2.0)
        th = delta_nn(problem_of(case, t), t, settings=ThresholdSettings(**kw), throw=False)
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}", "t": t, "elapsed": time.perf_counter() - t0}
    return {"t": t, "t_eta": t * case["eta"], "delta_nn": th.delta_nn, "stderr": th.stderr,
            "bracket": th.bracket, "status": th.status.value, "message": th.message[:300],
            "elapsed": time.perf_counter() - t0}


# --------------------------------------------------------------------------- plot
ACTIVATION_NAMES = {"gelu": "GeLU", "quad": "r²"}


def pretty_target(target: str) -> str:
    """``z**2 - 1`` → ``z² − 1`` (figure titles)."""
    return target.replace("**2", "²").replace(" - ", " − ")


def by_step(pt: dict[str, Any], T: int) -> tuple[float, float]:
    """GD's fraction of trials whose cosine first passed 1/2 by step ``T`` (the theory's criterion),
    with its binomial standard error."""
    esc = pt.get("escape_step") or []
    n = len(esc)
    if not n:
        return float("nan"), float("nan")
    p = sum(1 for e in esc if e is not None and e <= T) / n
    return p, math.sqrt(max(p * (1 - p), 0.25 / n) / n)


def clipped(p: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Asymmetric error bars that keep ``p ± err`` inside [0, 1]."""
    return np.vstack([np.minimum(err, p), np.minimum(err, 1.0 - p)])


def plot(data: dict[str, Any], settings: dict[str, Any], caption: str) -> Any:
    """Top: P(success) against δ: GD at its horizon (filled), GD by the theory's horizon
    (hollow) and the theory's curve with its error band; bottom: GD's final cosine. One column per
    case, each panel's legend to its right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(data["cases"])
    th_T = (settings.get("theory") or {}).get("steps")
    n = len(names)
    fig, axes = plt.subplots(2, n, figsize=(8.4 * n, 8.6), squeeze=False, sharex="col")
    # each column: its axes, then its legends to the right of them (off the data)
    fig.subplots_adjust(left=0.07 / n, right=1 - 0.42 / n, wspace=0.85, top=0.86, hspace=0.3)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for c, name in enumerate(names):
        entry = data["cases"][name]
        case = CASES[name]
        a1, a2 = axes[0, c], axes[1, c]
        for i, (d, pts) in enumerate(sorted(entry["gd"].items(), key=lambda kv: int(kv[0]))):
            col = colors[i % len(colors)]
            x = np.array([p["delta"] for p in pts])
            rate = np.array([p["rate"] for p in pts])
            se = np.array([p["rate_se"] for p in pts])
            fit = entry.get("gd_delta_50", {}).get(d, {})
            lab = f"GD, d = {d}, final cosine at step {entry['steps']}"
            if fit.get("delta_50") is not None and np.isfinite(fit["delta_50"]):
                lab += f": δ_50 = {fit['delta_50']:.2f} ± {fit['delta_50_err']:.2f}"
            a1.errorbar(x, rate, yerr=clipped(rate, se), marker="o", ms=4, capsize=2, color=col, label=lab)
            if th_T and th_T < entry["steps"]:
                pe = np.array([by_step(p, th_T) for p in pts])
                if np.all(np.isfinite(pe[:, 0])):
                    a1.errorbar(x + 0.03, pe[:, 0], yerr=clipped(pe[:, 0], pe[:, 1]), marker="o", ms=4,
                                mfc="white", capsize=2, color=col, ls=":", lw=1,
                                label=f"GD, d = {d}, escaped by step {th_T}")
            med = np.array([p["cos_median"] for p in pts])
            a2.plot(x, med, marker="o", ms=4, color=col,
                    label=f"GD, d = {d}: median final cosine (band 30–70 %)")
            a2.fill_between(x, [p["cos_q30"] for p in pts], [p["cos_q70"] for p in pts],
                            color=col, alpha=0.2)
            th = entry["theory"].get(str(d))
            if th and "p" in th:
                tp = np.asarray(th["p"], float)
                te = np.asarray(th.get("p_err") or np.zeros(len(tp)), float)
                a1.plot(th["deltas"], tp, ls="--", color=col, lw=1.2,
                        label=f"theory, d = {d}, by step {th_T}: δ_50 = {th['delta_50']:.2f} ± "
                              f"{th['delta_50_err']:.2f}")
                a1.fill_between(th["deltas"], np.clip(tp - te, 0, 1), np.clip(tp + te, 0, 1), color=col,
                                alpha=0.12, lw=0)
        nn = entry.get("delta_nn") or {}
        if nn.get("delta_nn") is not None:
            for ax in (a1, a2):
                ax.axvline(nn["delta_nn"], color="k", ls="--", lw=1)
                if nn.get("stderr"):
                    ax.axvspan(nn["delta_nn"] - nn["stderr"], nn["delta_nn"] + nn["stderr"],
                               color="k", alpha=0.08)
            a1.plot([], [], color="k", ls="--",
                    label=f"δ_NN(t·η = {nn['t_eta']:g}) = {nn['delta_nn']:.2f} (band ± s.e.)")
        for ax in (a1, a2):
            ax.axvline(case["paper"], color="0.5", ls=":", lw=1)
        a1.plot([], [], color="0.5", ls=":", label=f"paper's threshold {case['paper']}")
        act = ACTIVATION_NAMES.get(case["activation"], case["activation"])
        a1.set_title(f"{act} neuron, y = {pretty_target(case['target'])}, η = {case['eta']:g}\n"
                     f"GD: {settings['trials']} trials per δ, {entry['steps']} steps"
                     + (f"; theory: by step {th_T}" if th_T else ""), fontsize=9)
        a1.set_ylim(-0.03, 1.03)
        a2.set_ylim(-0.02, 1.02)
        a1.set_ylabel("P(success)")
        a2.set_ylabel("GD's final cosine with θ*")
        a2.set_xlabel("δ = n/d")
        a1.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        a2.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.suptitle("GD's success and final cosine against δ from a random start; theory: "
                 "dmftsolve transition and δ_NN", fontsize=10)
    return fig


def redraw_from_json(out: Path) -> int:
    """Redraw the PNG from the committed JSON (its data, settings and command), writing nothing else."""
    import matplotlib.pyplot as plt

    payload = json.loads((out / f"{NAME}.json").read_text())
    st = payload["settings"]
    th = st.get("theory") or {}
    cap_settings = {"trials/point": st["trials"], "d": st["ds"], "seed": st["seed"], "dtype": st["dtype"],
                    "success": "cos>1/2", "loss": "(y-f)^2/2", "init": "N(0,I/d)",
                    "theory draws/δ": th.get("draws", "none"), "theory T": th.get("steps", "none")}
    notes = payload.get("diagnostics", {}).get("notes") or []
    caption = (f"{payload['command']}\n" + caption_text(cap_settings)
               + ("\n" + "\n".join(notes) if notes else ""))
    fig = plot(payload["data"], st, caption)
    n_lines = caption.count("\n") + 1
    fig.subplots_adjust(bottom=min(0.5, (0.11 * n_lines + 0.6) / fig.get_size_inches()[1]))
    fig.text(0.01, 0.01, caption, fontsize=6.5, family="monospace", va="bottom", ha="left")
    from dmftsolve._files import savefig

    try:
        savefig(fig, out / f"{NAME}.png", "figure", dpi=110)
    finally:
        plt.close(fig)
    print(f"redrew {out / f'{NAME}.png'} from {out / f'{NAME}.json'}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = base_parser(__spec__, __doc__.split("\n\n")[0])
    p.add_argument("--cases", default=None,
                   help=f"comma-separated subset of {', '.join(CASES)} (default: all)")
    p.add_argument("--theory-draws", type=int, default=None, help="DMFT draws per δ of the theory")
    p.add_argument("--theory-steps", type=int, default=None, help="horizon of the theory (GD steps)")
    p.add_argument("--no-theory", action="store_true", help="skip the theory curves and δ_NN")
    p.add_argument("--from-json", action="store_true",
                   help="redraw <out>/success_curves.png from <out>/success_curves.json alone")
    args = p.parse_args(argv)
    if args.from_json:
        return redraw_from_json(Path(args.out))
    cfg = dict(QUICK if args.quick else FULL)
    names = (args.cases.split(",") if args.cases else cfg.get("cases", list(CASES)))
    bad = [n for n in names if n not in CASES]
    if bad:
        p.error(f"unknown case(s) {bad}; choose from {list(CASES)}")
    ds = args.ds or cfg["ds"]
    trials = args.trials or cfg["trials"]
    draws = args.theory_draws or cfg["theory_draws"]
    th_steps = args.theory_steps or cfg["theory_steps"]
    settings = {"figure": NAME, "cases": names, "ds": ds, "trials": trials, "seed": args.seed,
                "dtype": "float32", "record_every": cfg["record_every"], "success": "final cosine > 1/2",
                "theory": None if args.no_theory else {"draws": draws, "steps": th_steps},
                "delta_nn": None if args.no_theory else {"t_eta": 1, "n_paths": cfg["nn_paths"],
                                                         "replicates": cfg["nn_replicates"]},
                "quick": bool(args.quick)}
    cache = PointCache(args.out, NAME, replot=args.replot)
    data: dict[str, Any] = {"cases": {}}
    t0 = time.perf_counter()
    notes: list[str] = []
    try:
        with make_executor(args.workers, args.dask) as ex:
            for name in names:
                case = CASES[name]
                steps = cfg.get("steps", case["steps"])
                deltas = args.deltas or cfg.get("deltas") or list(case["deltas"])
                entry: dict[str, Any] = {"steps": steps, "deltas": deltas, "gd": {}, "theory": {}}
                for d in ds:
                    pts = []
                    for x in deltas:
                        key = {"kind": "gd", "case": {k: case[k] for k in ("target", "activation", "eta")},
                               "steps": steps, "d": d, "delta": x, "trials": trials, "seed": args.seed,
                               "dtype": "float32", "record_every": cfg["record_every"]}
                        val = cache.get_or_compute(key, gd_point, case, steps, d, x, trials, args.seed,
                                                   cfg["record_every"], ex)
                        pts.append({"delta": x, **val})
                        print(f"[{name} d={d} δ={x:g}] {val['successes']}/{val['trials']} "
                              f"median cos {val['cos_median']:.3f}", file=sys.stderr, flush=True)
                    entry["gd"][str(d)] = pts
                    if not args.no_theory:
                        tsteps = min(th_steps, steps)
                        key = {"kind": "transition",
                               "case": {k: case[k] for k in ("target", "activation", "eta")},
                               "steps": tsteps, "d": d, "deltas": deltas, "draws": draws, "seed": args.seed,
                               **THEORY_SETTINGS}
                        th = cache.get_or_compute(key, theory_curve, case, tsteps, d, deltas, draws,
                                                  args.seed)
                        entry["theory"][str(d)] = th
                        if "error" in th:
                            notes.append(f"{name} d={d}: theory curve not drawn ({th['error'][:120]})")
                if not args.no_theory:
                    key = {"kind": "delta_nn", "case": {k: case[k] for k in ("target", "activation", "eta")},
                           "t_eta": 1, "n_paths": cfg["nn_paths"], "replicates": cfg["nn_replicates"],
                           "seed": args.seed, "quick": bool(args.quick)}
                    if "nn_bracket" in case:  # r²: from 2.5 (at η = 0.1 the DMFT at δ = 1.5 diverges)
                        key["bracket"] = case["nn_bracket"]
                    nn = cache.get_or_compute(key, delta_nn_early, case, cfg["nn_paths"],
                                              cfg["nn_replicates"], args.seed, args.quick)
                    entry["delta_nn"] = nn
                    if nn.get("delta_nn") is None:
                        why = nn.get("error") or nn.get("message", "")
                        notes.append(f"{name}: δ_NN not drawn ({why[:120]})")
                data["cases"][name] = entry
    except CacheMiss as exc:
        print(f"success_curves: {exc}", file=sys.stderr)
        return 1
    for entry in data["cases"].values():
        entry["gd_delta_50"] = {}
        for d, pts in entry["gd"].items():
            entry["gd_delta_50"][d] = gd_probit(pts)
    per_run = [pt["seconds_per_run"] for e in data["cases"].values() for pts in e["gd"].values()
               for pt in pts]
    diagnostics = {"elapsed": time.perf_counter() - t0, "cache_hits": cache.hits,
                   "computed": cache.computed, "gd_seconds_per_run": float(np.mean(per_run)),
                   "notes": notes}
    cap_settings = {"trials/point": trials, "d": ds, "seed": args.seed, "dtype": "float32",
                    "success": "cos>1/2", "loss": "(y-f)^2/2", "init": "N(0,I/d)",
                    "theory draws/δ": draws if not args.no_theory else "none",
                    "theory T": th_steps if not args.no_theory else "none"}
    caption = (f"{command_line(argv and [sys.argv[0], *argv])}\n" + caption_text(cap_settings)
               + ("\n" + "\n".join(notes) if notes else ""))
    payload = {"settings": settings, "command": command_line(argv and [sys.argv[0], *argv]),
               "diagnostics": diagnostics, "data": data}
    fig = plot(data, settings, caption)
    jp, pp = write_outputs(args.out, NAME, payload, fig, caption)
    print(f"wrote {jp} and {pp} ({diagnostics['elapsed']:.0f} s; {cache.hits} cached, "
          f"{cache.computed} computed)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
