"""The paper's Figure 2: train and test loss and cosine against GD steps at d = 5000, δ = 17.5.

Convention (``--convention``, default ``centred_bias``)
-----------------------------------------------------
* ``centred_bias`` (default): GeLU neuron with a **trained bias** ``f = σ(wᵀx + b)``, ``b⁰ = 0``
  (``Problem.build(..., bias=True)``), on the **centred** label ``y = z² − 1``, loss
  ``(y − f)²/2``, η = 0.5, ``w⁰ ~ N(0, I/d)``. This is the only convention found under which
  the losses plateau at the paper's ≈ 0.6: ``docs/findings.md`` §3.2 (the population optimum
  of the aligned neuron is 0.597; GD at d = 5000 gave train / test 0.603 / 0.588 in
  ``convention_hunt``'s variant V5b, ``docs/investigations.md``).
* ``centred``: ``y = z² − 1``, no bias (plateau 0.791 / 0.789 there).
* ``plain``: ``y = z²``, no bias (plateau 0.872 / 0.856 there).

Simulator
---------
``--trials`` GD runs (default 1, float32 data, recorded every ``--record-every`` steps) through
:func:`dmftsolve.sweep` (executor: ``--workers``/``--dask``); the whole run is one cached point.

Theory
------
* **First phase** (before the escape): the DMFT of the restricted dynamics (hard direction
  held at zero, ``hold_zero=[0]``), ``d → ∞``: its train and test loss are the plateau GD sits
  on while its hard overlap is ``O(1/√d)``.
* **Escape**: the unrestricted DMFT started at the median overlap of a random start,
  ``M0 = 0.674 √q0/√d`` (``Φ⁻¹(3/4) = 0.674``: the median of ``|N(0, q0)|/√d``), with paths
  paired by reflection ``z → −z`` (``reflect=(0,)``, so Monte Carlo noise does not seed the
  hard direction: ``docs/findings.md`` §2.4). The predicted escape time is its first step with
  cosine > 1/2; the run also gives the losses after the escape. Caveat (findings §2.4): this
  construction escapes later than GD at d = 500–2000 for δ near the transition; at
  δ = 17.5, far above it, the check is this figure.

Both are cached points (``--theory-steps``, ``--theory-paths``; ``--no-theory`` skips them).

Run
---
Full size (run: 11.6 min wall, 1.8 GB peak on the shared 2-core machine, the GD run 674 s;
GD escape at step 10, predicted 16, plateau train/test 0.595/0.610; cached in
``validation/results/figures/cache/grokking/``)::

    python -m validation.figures.grokking

(defaults: convention ``centred_bias``, one run, d = 5000, δ = 17.5, η = 0.5, 1500 GD steps
recorded every 5, seed 0; theory 300 steps, 2·10⁴ paths.) d = 5000, n = 87 500 (X in float32:
1.75 GB): one run took 214 s on one core
(``convention_hunt.md``, V5b); the theory (restricted and unrestricted DMFT, 300 steps,
2·10⁴ paths) a few minutes. ``--trials 4 --workers 2`` gives an error band (≈ 15 min, 7 GB).
``--quick`` (the test): d = 100, 40 steps, tiny DMFTs; seconds.
"""

from __future__ import annotations

import math
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

NAME = "grokking"
SUCCESS = 0.5
MEDIAN_ABS_NORMAL = 0.6744897501960817  # Φ⁻¹(3/4)

CONVENTIONS: dict[str, dict[str, Any]] = {
    "centred_bias": {"target": "z**2 - 1", "bias": True,
                     "label": "GeLU, y = z² − 1 (centred), trained bias b, loss (y−f)²/2"},
    "centred": {"target": "z**2 - 1", "bias": False, "label": "GeLU, y = z² − 1 (centred), no bias"},
    "plain": {"target": "z**2", "bias": False, "label": "GeLU, y = z², no bias"},
}
FULL = {"d": 5000, "delta": 17.5, "trials": 1, "steps": 1500, "record_every": 5,
        "theory_steps": 300, "theory_paths": 20_000}
QUICK = {"d": 100, "delta": 17.5, "trials": 1, "steps": 40, "record_every": 2,
         "theory_steps": 20, "theory_paths": 1000}
ETA = 0.5


def problem_of(conv: dict[str, Any], steps: int, **kw: Any) -> Problem:
    return Problem.build(target=conv["target"], activation="gelu", eta=ETA, steps=steps,
                         bias=conv["bias"], **kw)


def gd_runs(conv: dict[str, Any], d: int, delta: float, steps: int, trials: int, seed: int,
            record_every: int, executor: Any) -> dict[str, Any]:
    """GD trajectories (cosine, train and test loss, bias) of ``trials`` runs."""
    from dmftsolve import sweep

    res = sweep(problem_of(conv, steps), d, [delta], trials=trials,
                seed=np.random.SeedSequence([seed, d, int(round(1000 * delta))]), executor=executor,
                progress=False, dtype=np.float32, record_every=record_every)
    run = res.runs[0]
    out: dict[str, Any] = {"steps": run.steps.tolist(), "cosine": run.cosine.tolist(),
                           "train_loss": run.train_loss.tolist(), "test_loss": run.test_loss.tolist(),
                           "seconds_per_run": run.diagnostics["trial_elapsed"], "status": res.status.value}
    if getattr(run, "bias", None) is not None:
        out["bias"] = np.asarray(run.bias).reshape(trials, len(run.steps), -1)[..., 0].tolist()
    esc = []
    for c in run.cosine:
        above = np.flatnonzero(np.isfinite(c) & (c > SUCCESS))
        esc.append(int(run.steps[above[0]]) if above.size else None)
    out["escape_step"] = esc
    n_tail = max(1, len(run.steps) // 5)
    out["plateau_train"] = float(np.mean(run.train_loss[:, -n_tail:]))
    out["plateau_test"] = float(np.mean(run.test_loss[:, -n_tail:]))
    return out


def dmft_run(conv: dict[str, Any], delta: float, d: int, steps: int, n_paths: int, seed: int,
             restricted: bool) -> dict[str, Any]:
    """Restricted DMFT (first phase) or the unrestricted one from the median random overlap."""
    from dmftsolve import solve_dmft

    t0 = time.perf_counter()
    if restricted:
        p = problem_of(conv, steps, hold_zero=[0])
        kw: dict[str, Any] = {}
    else:
        m0 = MEDIAN_ABS_NORMAL / math.sqrt(d)
        p = problem_of(conv, steps, M0=[[m0]], Q0=[[1.0 - m0 * m0]])
        kw = {"reflect": (0,)}
    try:
        r = solve_dmft(p, delta, n_paths=n_paths, seed=seed, errors="batch", throw=False, **kw)
    except Exception as exc:  # noqa: BLE001 - recorded, the figure is drawn without it
        return {"error": f"{type(exc).__name__}: {exc}", "elapsed": time.perf_counter() - t0}
    c = np.asarray(r.cosine, float)
    above = np.flatnonzero(np.isfinite(c) & (c > SUCCESS))
    return {"t": list(range(len(c))), "cosine": c.tolist(), "train_loss": r.train_loss.tolist(),
            "test_loss": r.test_loss.tolist(), "train_loss_err": r.train_loss_err.tolist(),
            "bias": np.asarray(r.b)[:, 0].tolist(), "status": r.status.value,
            "escape_step": int(above[0]) if above.size else None,
            "elapsed": time.perf_counter() - t0}


def plot(data: dict[str, Any], settings: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 6.0))
    fig.subplots_adjust(top=0.72, wspace=0.25)  # the legends go above the axes, off the data
    gd = data["gd"]
    s = np.asarray(gd["steps"]) + 1
    for j in range(len(gd["cosine"])):
        lab = j == 0
        a1.plot(s, gd["train_loss"][j], color="C0", lw=1.2, label="GD train" if lab else None)
        a1.plot(s, gd["test_loss"][j], color="C1", lw=1.2, label="GD test" if lab else None)
        a2.plot(s, gd["cosine"][j], color="C0", lw=1.2, label="GD" if lab else None)
    for key, ls, name in (("restricted", ":", "DMFT first phase (hard dir. held at 0)"),
                          ("escape", "--", "DMFT from median random overlap")):
        th = data["theory"].get(key) or {}
        if "t" not in th:
            continue
        t = np.asarray(th["t"]) + 1
        a1.plot(t, th["train_loss"], color="C0", ls=ls, lw=1, label=f"{name}: train")
        a1.plot(t, th["test_loss"], color="C1", ls=ls, lw=1, label=f"{name}: test")
        if key == "escape":
            a2.plot(t, th["cosine"], color="k", ls=ls, lw=1, label=name)
            if th.get("escape_step") is not None:
                for ax in (a1, a2):
                    ax.axvline(th["escape_step"] + 1, color="k", ls=ls, lw=0.8)
                a2.plot([], [], color="k", ls=ls, lw=0.8,
                        label=f"predicted escape t={th['escape_step']}")
    obs = [e for e in gd["escape_step"] if e is not None]
    if obs:
        a2.plot([], [], " ", label=f"GD escape (cos>1/2) at t={obs}")
    a1.axhline(0.6, color="0.5", lw=0.8, ls="-.", label="paper plateau ≈ 0.6")
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.set_xlabel("GD step t + 1")
    a1.set_ylabel("loss (y − f)²/2")
    a2.set_ylabel("|cos(w, θ*)|, cosine with the hidden direction")
    a2.set_ylim(-0.02, 1.02)
    a1.legend(fontsize=6.5, loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=2, frameon=False)
    a2.legend(fontsize=6.5, loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=2, frameon=False)
    fig.suptitle(f"{settings['label']}; d={settings['d']}, δ={settings['delta']:g}, η={ETA}; "
                 f"plateau train/test {gd['plateau_train']:.3f}/{gd['plateau_test']:.3f}", fontsize=9,
                 y=0.98)
    return fig


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__spec__, __doc__.split("\n\n")[0])
    p.add_argument("--convention", choices=list(CONVENTIONS), default="centred_bias")
    p.add_argument("--steps", type=int, default=None, help="GD steps")
    p.add_argument("--record-every", type=int, default=None)
    p.add_argument("--theory-steps", type=int, default=None)
    p.add_argument("--theory-paths", type=int, default=None)
    p.add_argument("--no-theory", action="store_true")
    args = p.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    conv = CONVENTIONS[args.convention]
    if args.ds and len(args.ds) != 1 or args.deltas and len(args.deltas) != 1:
        p.error("grokking takes one d (--ds) and one δ (--deltas)")
    d = args.ds[0] if args.ds else cfg["d"]
    delta = args.deltas[0] if args.deltas else cfg["delta"]
    trials = args.trials or cfg["trials"]
    steps = args.steps or cfg["steps"]
    rec = args.record_every or cfg["record_every"]
    th_steps = min(args.theory_steps or cfg["theory_steps"], steps)
    th_paths = args.theory_paths or cfg["theory_paths"]
    settings = {"figure": NAME, "convention": args.convention, "label": conv["label"],
                "target": conv["target"], "bias": conv["bias"], "activation": "gelu", "eta": ETA,
                "loss": "(y - f)**2/2", "q0": 1.0, "d": d, "delta": delta, "n": int(round(d * delta)),
                "trials": trials, "steps": steps, "record_every": rec, "dtype": "float32",
                "seed": args.seed, "theory": None if args.no_theory else
                {"steps": th_steps, "n_paths": th_paths,
                 "escape_start": "M0 = 0.674/sqrt(d), reflect=(0,)"},
                "quick": bool(args.quick)}
    cache = PointCache(args.out, NAME, replot=args.replot)
    t0 = time.perf_counter()
    data: dict[str, Any] = {"theory": {}}
    base = {k: settings[k] for k in ("target", "bias", "activation", "eta", "d", "delta", "seed")}
    try:
        with make_executor(args.workers, args.dask) as ex:
            data["gd"] = cache.get_or_compute({"kind": "gd", **base, "steps": steps, "trials": trials,
                                               "record_every": rec, "dtype": "float32"},
                                              gd_runs, conv, d, delta, steps, trials, args.seed, rec, ex)
        if not args.no_theory:
            for key, restricted in (("restricted", True), ("escape", False)):
                data["theory"][key] = cache.get_or_compute(
                    {"kind": f"dmft_{key}", **base, "steps": th_steps, "n_paths": th_paths},
                    dmft_run, conv, delta, d, th_steps, th_paths, args.seed, restricted)
    except CacheMiss as exc:
        print(f"grokking: {exc}", file=sys.stderr)
        return 1
    notes = [f"theory {k}: {v['error'][:150]}" for k, v in data["theory"].items() if "error" in v]
    summary = {"gd_escape_step": data["gd"]["escape_step"], "gd_plateau_train": data["gd"]["plateau_train"],
               "gd_plateau_test": data["gd"]["plateau_test"],
               "predicted_escape_step": (data["theory"].get("escape") or {}).get("escape_step"),
               "first_phase_train_loss_at_escape": None}
    esc = summary["predicted_escape_step"]
    rth = data["theory"].get("restricted") or {}
    if esc is not None and "train_loss" in rth and esc < len(rth["train_loss"]):
        summary["first_phase_train_loss_at_escape"] = rth["train_loss"][esc]
    cmd = command_line(argv and [sys.argv[0], *argv])
    payload = {"settings": settings, "command": cmd, "summary": summary, "notes": notes,
               "diagnostics": {"elapsed": time.perf_counter() - t0, "cache_hits": cache.hits,
                               "computed": cache.computed}, "data": data}
    caption = cmd + "\n" + caption_text({k: settings[k] for k in ("convention", "d", "delta", "n", "trials",
                                                                   "steps", "dtype", "seed")}
                                        | ({"theory": "none"} if args.no_theory else
                                           {"theory T": th_steps, "paths": th_paths})) \
        + ("\n" + "\n".join(notes) if notes else "")
    jp, pp = write_outputs(args.out, NAME, payload, plot(data, settings), caption)
    print(f"wrote {jp} and {pp}; GD escape {summary['gd_escape_step']}, predicted {esc}; plateau "
          f"{summary['gd_plateau_train']:.3f}/{summary['gd_plateau_test']:.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
