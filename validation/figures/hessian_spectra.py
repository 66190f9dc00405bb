"""Hessian spectra along training: simulator histogram, predicted density, predicted and observed outliers.

Set-up (defaults; ``--target``, ``--activation``, ``--eta``, ``--times``): GeLU neuron on the
bounded label ``y = min(z², 3)``, δ = 4, η = 0.5, square loss, **restricted** GD (the hard
direction held at zero, ``hold_zero=[0]``: the first phase of training, whose Hessian the
threshold ``δ_NN(t)`` is about), Hessian ``∇²L(W_t)`` at t = 0, 5, 20, 50. The bounded label
keeps the law of ``D`` bounded below, so the left edge and the outliers below it are well
posed; for ``y = z²`` or ``z² − 1`` the law is unbounded below, the library reports no left
edge and the outlier search fails with that reason (recorded in the JSON, see
``docs/findings.md`` §5.1). For this target and δ, findings §6 reports an outlier at −1.03
(t = 0) and −0.81 (t = 5) and none from t = 20, but with η = 0.2
(``validation/spectrum_vs_simulation.py``, case ``gelu_min``): t = 0 is the same Hessian
(``W⁰`` does not depend on η), later times are not (t = 5 here is t·η = 2.5, there 1);
``--eta 0.2`` reproduces that case.

* **Simulator** (``--trials`` runs at each d, through :func:`dmftsolve.sweep` with
  ``hessian_at=times, full_spectrum=True``: all eigenvalues of the dense ``d × d`` Hessian,
  and the lowest/highest eigenpairs with the squared overlap of their eigenvector with θ*).
  Histogram of all eigenvalues pooled over trials; the observed outlier is the lowest
  eigenvalue and its overlap² with θ*.
* **Theory**: the restricted DMFT (``d → ∞``; ``--theory-paths`` paths, samples kept at the
  times) gives the law of the training fields ``DMFTResult.law(t)``; the bulk density is
  :func:`dmftsolve.bulk_spectrum` on it and the outliers (both sides, along θ* and the learned
  direction) :func:`dmftsolve.training_outliers`.

Law bounds (``--law-bounds``): a Monte Carlo law carries no flag saying whether ``D`` is
bounded, so the library estimates it from the sample's tail and, with a few thousand paths,
may call a bounded law unbounded. For the default case ``D = σ'² + (σ − y)σ''`` is bounded
below (``y ≤ 3`` and GeLU's ``σ''(u) = φ(u)(2 − u²)`` decays faster than ``σ`` grows), so the
default there is ``bounded-below`` (``unbounded_below=False`` passed to the spectrum and
outlier functions); for any other target or activation the default is ``auto`` (the library
decides).

Every (d, run) and the theory are cached points; ``--replot`` redraws.

Run
---
Full size (run: 1.5 min wall on the shared machine; cached in
``validation/results/figures/cache/hessian_spectra/``)::

    python -m validation.figures.hessian_spectra --ds 2000 --trials 2

(the simulator: 50 GD steps and 4 dense 2000 × 2000 eigendecompositions per run, ≈ 1 min per
run on one core; the DMFT with 6·10⁴ paths and 50 steps ≈ 1 min.) ``--quick`` (the test):
d = 120, 1 run, t = 0, 3, tiny DMFT; seconds.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from dmftsolve import Problem
from validation.figures.common import (
    CacheMiss,
    PointCache,
    base_parser,
    caption_text,
    command_line,
    make_executor,
    write_outputs,
)

NAME = "hessian_spectra"
DEFAULT_TARGET = "Min(z**2, 3)"
DEFAULT_ACTIVATION = "gelu"
FULL = {"ds": [2000], "trials": 2, "delta": 4.0, "times": [0, 5, 20, 50], "theory_paths": 60_000}
QUICK = {"ds": [120], "trials": 1, "delta": 4.0, "times": [0, 3], "theory_paths": 4000}


def problem_of(target: str, activation: str, eta: float, steps: int) -> Problem:
    return Problem.build(target=target, activation=activation, eta=eta, steps=steps, hold_zero=[0])


def sim_runs(p: Problem, d: int, delta: float, trials: int, times: list[int], seed: int,
             executor: Any) -> dict[str, Any]:
    """All Hessian eigenvalues at ``times`` (per run) and the extreme eigenpairs' overlaps."""
    from dmftsolve import sweep

    ss = np.random.SeedSequence([seed, d, int(round(1000 * delta))])
    res = sweep(p, d, [delta], trials=trials, seed=ss, executor=executor, progress=False,
                hessian_at=times, full_spectrum=True, n_eigs=3, hard=(0,), record_every=max(1, max(times)))
    h = res.runs[0].hessian
    return {"times": list(times), "spectrum": np.asarray(h["spectrum"]).tolist(),
            "low": np.asarray(h["low"]).tolist(),
            "low_overlap_hard": np.asarray(h["low_overlap_hard"]).tolist(),
            "high": np.asarray(h["high"]).tolist(),
            "high_overlap_target": np.asarray(h["high_overlap_target"]).tolist(),
            "seconds_per_run": res.runs[0].diagnostics["trial_elapsed"], "status": res.status.value}


def theory(p: Problem, delta: float, times: list[int], n_paths: int, seed: int,
           law_bounds: str) -> dict[str, Any]:
    """Bulk density and outliers from the restricted DMFT's law at each time."""
    from dmftsolve import bulk_spectrum, solve_dmft, training_outliers

    t0 = time.perf_counter()
    try:
        r = solve_dmft(p, delta, n_paths=n_paths, seed=seed, errors="batch", keep_samples_at=tuple(times),
                       throw=False)
    except Exception as exc:  # noqa: BLE001
        return {"error": f"DMFT: {type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"times": {}, "dmft_status": r.status.value, "law_bounds": law_bounds}
    flags = {"unbounded_below": False} if law_bounds == "bounded-below" else {}
    for t in times:
        entry: dict[str, Any] = {}
        law = r.law(t)
        try:
            b = bulk_spectrum(law, delta, npoints=300, throw=False, **flags)
            entry.update(x=b.x.tolist(), density=b.density.tolist(), left_edge=b.left_edge,
                         right_edge=b.right_edge, bulk_status=b.status.value, bulk_warnings=list(b.warnings))
        except Exception as exc:  # noqa: BLE001
            entry["bulk_error"] = f"{type(exc).__name__}: {exc}"
        try:
            o = training_outliers(law, None, None, r.M[t], r.Q[t, t], delta, hard=(0,), side="both",
                                  throw=False, **flags)
            entry.update(outliers=[{"location": x.location, "overlap2": x.overlap2, "side": x.side,
                                    "parts": x.parts} for x in o.outliers],
                         outlier_status=o.status.value, outlier_message=o.message[:300])
        except Exception as exc:  # noqa: BLE001
            entry["outlier_error"] = f"{type(exc).__name__}: {exc}"
        out["times"][str(t)] = entry
    out["elapsed"] = time.perf_counter() - t0
    return out


def plot(data: dict[str, Any], settings: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = settings["times"]
    fig, axes = plt.subplots(1, len(times), figsize=(max(3.6 * len(times), 8.5), 4.4), squeeze=False)
    th = data.get("theory") or {}
    for i, t in enumerate(times):
        ax = axes[0, i]
        for j, (d, sim) in enumerate(sorted(data["sim"].items(), key=lambda kv: int(kv[0]))):
            ev = np.concatenate([np.asarray(run[i]) for run in sim["spectrum"]])
            ax.hist(ev, bins=80, density=True, alpha=0.45, color=f"C{j}",
                    label=f"GD d={d} ({len(sim['spectrum'])} runs)")
            for k, run_low in enumerate(sim["low"]):
                lam, ov = run_low[i][0], sim["low_overlap_hard"][k][i][0]
                ax.plot(lam, 0.02 + 0.04 * k, marker="v", color=f"C{j}", ms=6,
                        label=f"GD lowest λ (overlap² {ov:.2f})" if k == 0 else None)
        e = (th.get("times") or {}).get(str(t), {})
        if "x" in e:
            ax.plot(e["x"], e["density"], "k-", lw=1.2, label="DMFT bulk density")
        for o in e.get("outliers", []):
            ax.axvline(o["location"], color="r", ls="--", lw=1,
                       label=f"predicted outlier {o['location']:.2f} (ov² {o['overlap2']:.2f})")
        if e.get("left_edge") is None and "x" in e:
            ax.text(0.02, 0.95, "no left edge (law of D unbounded below)", transform=ax.transAxes,
                    fontsize=6.5, va="top")
        ax.set_title(f"GD step t = {t}", fontsize=9)
        ax.set_xlabel("eigenvalue of ∇²L(W_t)")
        # headroom above the density so the legend sits off the data
        ax.set_ylim(0, 1.6 * ax.get_ylim()[1])
        ax.legend(fontsize=5.8, loc="upper right", frameon=False)
    axes[0, 0].set_ylabel("density")
    act = {"gelu": "GeLU", "quad": "r²", "relu": "ReLU", "tanh": "tanh"}.get(settings["activation"],
                                                                             settings["activation"])
    target = settings["target"].replace("**2", "²").replace("Min(", "min(").replace(" - ", " − ")
    fig.suptitle(f"Hessian spectrum along GD with the hard direction held at zero: {act} neuron, "
                 f"y = {target}, δ = {settings['delta']:g}, η = {settings['eta']:g}", fontsize=9)
    return fig


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__spec__, __doc__.split("\n\n")[0])
    p.add_argument("--target", default=DEFAULT_TARGET)
    p.add_argument("--activation", default=DEFAULT_ACTIVATION)
    p.add_argument("--law-bounds", choices=("auto", "bounded-below"), default=None,
                   help="how the theory treats the law of D (default: bounded-below for the default "
                        "case, auto otherwise)")
    p.add_argument("--eta", type=float, default=0.5)
    p.add_argument("--times", default=None, help="steps t, comma-separated")
    p.add_argument("--theory-paths", type=int, default=None)
    p.add_argument("--no-theory", action="store_true")
    args = p.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.deltas and len(args.deltas) != 1:
        p.error("hessian_spectra takes one δ (--deltas)")
    try:
        times = sorted({int(x) for x in args.times.split(",")}) if args.times else cfg["times"]
    except ValueError:
        p.error(f"--times must be comma-separated integers, got {args.times!r}")
    if min(times) < 0:
        p.error(f"--times must be >= 0, got {times}")
    delta = args.deltas[0] if args.deltas else cfg["delta"]
    ds, trials = args.ds or cfg["ds"], args.trials or cfg["trials"]
    paths = args.theory_paths or cfg["theory_paths"]
    steps = max(times)
    law_bounds = args.law_bounds or ("bounded-below" if (args.target, args.activation)
                                     == (DEFAULT_TARGET, DEFAULT_ACTIVATION) else "auto")
    try:
        prob = problem_of(args.target, args.activation, args.eta, steps)
    except ValueError as exc:
        p.error(str(exc))
    settings = {"figure": NAME, "target": args.target, "activation": args.activation, "eta": args.eta,
                "delta": delta, "times": times, "ds": ds, "trials": trials, "seed": args.seed,
                "dynamics": "restricted (hold_zero=[0])", "dtype": "float64",
                "theory": None if args.no_theory else {"n_paths": paths, "law_bounds": law_bounds},
                "quick": bool(args.quick)}
    base = {k: settings[k] for k in ("target", "activation", "eta", "delta", "times", "seed")}
    cache = PointCache(args.out, NAME, replot=args.replot)
    t0 = time.perf_counter()
    data: dict[str, Any] = {"sim": {}}
    try:
        with make_executor(args.workers, args.dask) as ex:
            for d in ds:
                data["sim"][str(d)] = cache.get_or_compute(
                    {"kind": "sim", **base, "d": d, "trials": trials},
                    sim_runs, prob, d, delta, trials, times, args.seed, ex)
        if not args.no_theory:
            data["theory"] = cache.get_or_compute({"kind": "dmft", **base, "n_paths": paths,
                                                   "law_bounds": law_bounds},
                                                  theory, prob, delta, times, paths, args.seed, law_bounds)
    except CacheMiss as exc:
        print(f"hessian_spectra: {exc}", file=sys.stderr)
        return 1
    compare = []
    th = (data.get("theory") or {}).get("times", {})
    for i, t in enumerate(times):
        e = th.get(str(t), {})
        left = [o for o in e.get("outliers", []) if o["side"] == "left"]
        for d, sim in data["sim"].items():
            compare.append({"t": t, "d": int(d),
                            "predicted_left_outliers": [(o["location"], o["overlap2"]) for o in left],
                            "predicted_left_edge": e.get("left_edge"),
                            "observed_lowest": [run[i][0] for run in sim["low"]],
                            "observed_lowest_overlap2": [ov[i][0] for ov in sim["low_overlap_hard"]]})
    cmd = command_line(argv and [sys.argv[0], *argv])
    payload = {"settings": settings, "command": cmd, "outliers": compare,
               "diagnostics": {"elapsed": time.perf_counter() - t0, "cache_hits": cache.hits,
                               "computed": cache.computed}, "data": data}
    keys = ("target", "activation", "eta", "delta", "times", "ds", "trials", "seed", "dynamics")
    caption = cmd + "\n" + caption_text({k: settings[k] for k in keys}
                                        | {"theory paths": "none" if args.no_theory else paths,
                                           "law bounds": law_bounds})
    jp, pp = write_outputs(args.out, NAME, payload, plot(data, settings), caption)
    print(f"wrote {jp} and {pp}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
