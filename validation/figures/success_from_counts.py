"""The paper's Figures 4 and 5 from the committed GD counts: success and final cosine against δ.

The full-size ``success_curves.py`` figure (GD's final cosine after 1000 / 2000 steps,
d = 1000–4000, 40 trials per point) is estimated at ≈ 80 CPU-hours and has not been run.
This script draws the same layout, **without running anything**, from the GD runs that
the finite-d transition check already made:

* **GD**: ``validation/results/gd_transition_counts.json``
  (``validation/gd_transition_counts.py``: single neuron, no bias, random start ``q0 = 1``,
  float32 data, ≥ 40 trials per δ near the transition, cosine recorded every 5 steps; 24 for the
  r² cases at d = 3000), d = 500, 1000, 2000, 3000, 4000 (the paper has 1000–4000). Horizon T =
  400 steps for GeLU (η = 0.5), 600 for r² (η = 0.1): shorter than ``success_curves.py``'s 1000
  / 2000, so the curves sit at slightly larger δ (findings §1.4, §9.4). Top row:
  P(success), success = cosine first above 1/2 by step T (the theory's criterion), binomial
  standard error; the fraction whose *final* cosine is above 1/2 (the paper's criterion) is
  drawn as open markers. Bottom row: the final cosine's median and 30/70 % percentiles over the
  trials.
* **Theory**: the finite-d success curve of ``dmftsolve transition`` in its default
  construction at each d, as selected by ``default_curve`` of
  ``validation/transition_vs_simulation.py`` (paired force weights, N = 2n kernel paths where
  run, seeds pooled; where only a Poisson-weighted curve exists it stands in and the legend
  says "poisson"), from ``validation/results/transition_vs_simulation.json``.
* **δ_NN(t·η = 1)**, the early-time Hessian threshold (3 seeds × 10⁴ paths; vertical line with
  its standard error as a band), computed with ``success_curves.delta_nn_early`` and cached in
  ``<out>/cache/success_curves/`` (the same cache as ``success_curves.py``; 3–30 s per case);
  ``--no-nn`` leaves it out. For r² the bisection starts at δ = 2.5 (``nn_bracket`` of
  ``success_curves.CASES``): at η = 0.1 the DMFT at δ = 1.5 has non-finite kernels by step 7.
  The paper's value (6.0 GeLU, 3.6 r²) is the grey dotted line.

Run
---
::

    python -m validation.figures.success_from_counts

writes ``validation/results/figures/success_from_counts.{png,json}`` in seconds (plus the
δ_NN computations the first time). ``--cases`` selects panels (default: GeLU and r², each on
``z² − 1`` and ``z²``; ``gelu_min3`` is also available), ``--counts`` and ``--theory`` read
other JSON files (the test uses them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from validation import script_parser
from validation.figures.common import DEFAULT_OUT, PointCache, caption_text, command_line, write_outputs

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "validation" / "results"
NAME = "success_from_counts"
DEFAULT_CASES = ["gelu_z2m1", "gelu_z2", "quad_z2m1", "quad_z2"]
SUCCESS = 0.5
NN = {"nn_paths": 10_000, "nn_replicates": 3, "seed": 0}


def gd_points(run: dict[str, Any], gtc: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per δ of one ``gd_transition_counts`` run: its own summary rows (first-passage and
    final-cosine successes by the horizon, :func:`gd_transition_counts.summarise`) with a
    binomial error floored at ``1/(2√n)`` (never zero), and the final cosine's median and
    30/70 % percentiles over all trials; plus the summary (its probit δ_50)."""
    sm = gtc.summarise(run)
    out = []
    for r in sm["rows"]:
        pt = run["points"][next(k for k in run["points"] if float(k) == r["delta"])]
        fin = np.array([t["final_cosine"] if t["final_cosine"] is not None else np.nan
                        for ch in pt["chunks"] for t in ch["trials"]])
        q30, med, q70 = np.nanpercentile(fin, [30, 50, 70])
        n, p = r["trials"], r["p"]
        out.append({"delta": r["delta"], "trials": n, "successes": r["successes"],
                    "successes_final": r["successes_final"], "p": p,
                    "p_err": float(np.sqrt(max(p * (1 - p), 0.25 / n) / n)),
                    "p_final": r["successes_final"] / n, "cos_q30": float(q30), "cos_median": float(med),
                    "cos_q70": float(q70)})
    return out, sm


def build(cases: list[str], counts: dict[str, Any], theory: dict[str, Any], tvs: Any, gtc: Any,
          nn: dict[str, Any]) -> dict[str, Any]:
    """The figure's data: per case, per d, GD points, GD's probit δ_50 and the default theory curve."""
    data: dict[str, Any] = {"cases": {}}
    for name in cases:
        case = tvs.CASES[name]
        entry: dict[str, Any] = {"target": case["target"], "activation": case["activation"],
                                 "eta": case["eta"], "T": case["T"], "ds": {},
                                 "delta_nn": nn.get(name)}
        runs = sorted((r for r in counts["runs"].values() if r["case"] == name), key=lambda r: r["d"])
        for run in runs:
            pts, sm = gd_points(run, gtc)
            if len(pts) < 2:
                continue
            th = tvs.default_curve(theory, name, int(run["d"]))
            entry["ds"][str(run["d"])] = {
                "gd": pts, "gd_delta_50": sm["delta_50"], "gd_delta_50_err": sm["delta_50_err"],
                "gd_width": sm["width"],
                "theory": None if th is None else {k: th[k] for k in (
                    "deltas", "p", "p_err", "successes", "draws", "delta_50", "delta_50_err", "width",
                    "run", "keys")}}
        data["cases"][name] = entry
    return data


NEURON_NAMES = {"gelu": "GeLU", "quad": "r²"}


def pretty_target(target: str) -> str:
    """``z**2 - 1`` → ``z² − 1``, ``Min(z**2, 3)`` → ``min(z², 3)`` (figure titles)."""
    return target.replace("**2", "²").replace(" - ", " − ").replace("Min(", "min(")


def clipped(p: Any, err: Any) -> np.ndarray:
    """Asymmetric error bars that keep ``p ± err`` inside [0, 1]."""
    p, err = np.asarray(p, float), np.asarray(err, float)
    return np.vstack([np.minimum(err, p), np.minimum(err, 1.0 - p)])


def plot(data: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(data["cases"])
    fig, axes = plt.subplots(3, len(names), figsize=(max(4.2 * len(names), 8.5), 10.0), squeeze=False,
                             gridspec_kw={"height_ratios": [1, 1, 0.62]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    paper = {"gelu": 6.0, "quad": 3.6}
    for c, name in enumerate(names):
        e = data["cases"][name]
        a1, a2, a3 = axes[0, c], axes[1, c], axes[2, c]
        a2.sharex(a1)
        for i, (d, dd) in enumerate(sorted(e["ds"].items(), key=lambda kv: int(kv[0]))):
            col = colors[i % len(colors)]
            pts = dd["gd"]
            x = np.array([p["delta"] for p in pts])
            a1.errorbar(x, [p["p"] for p in pts], clipped([p["p"] for p in pts], [p["p_err"] for p in pts]),
                        fmt="s-", ms=4, capsize=2,
                        color=col, label=f"GD d={d}: {dd['gd_delta_50']:.2f} ± {dd['gd_delta_50_err']:.2f}")
            a1.plot(x, [p["p_final"] for p in pts], "o", mfc="none", ms=5, color=col)
            a2.plot(x, [p["cos_median"] for p in pts], "s-", ms=4, color=col)
            a2.fill_between(x, [p["cos_q30"] for p in pts], [p["cos_q70"] for p in pts], color=col,
                            alpha=0.18)
            th = dd["theory"]
            if th:
                tp, te = np.asarray(th["p"], float), np.asarray(th["p_err"], float)
                a1.fill_between(th["deltas"], np.clip(tp - te, 0, 1), np.clip(tp + te, 0, 1), color=col,
                                alpha=0.08, lw=0)
                a1.errorbar(th["deltas"], tp, clipped(tp, te), fmt="--", lw=1.1, capsize=1.5, color=col,
                            label=f"theory d={d}: {th['delta_50']:.2f} ± {th['delta_50_err']:.2f}"
                                  + (" (poisson)" if th["run"].startswith("poisson") else ""))
        nn = e.get("delta_nn") or {}
        if nn.get("delta_nn") is not None:
            for ax in (a1, a2):
                ax.axvline(nn["delta_nn"], color="k", ls="--", lw=1)
                if nn.get("stderr"):
                    ax.axvspan(nn["delta_nn"] - nn["stderr"], nn["delta_nn"] + nn["stderr"], color="k",
                               alpha=0.08)
            a1.plot([], [], color="k", ls="--",
                    label=f"δ_NN(tη={nn['t_eta']:g}) = {nn['delta_nn']:.1f} ± {nn.get('stderr') or 0:.1f}")
        elif nn:
            a1.plot([], [], color="k", ls="--", label=f"δ_NN(tη=1) not drawn: {nn.get('status', 'failed')}")
        ref = paper.get(e["activation"])
        if ref is not None:
            for ax in (a1, a2):
                ax.axvline(ref, color="0.5", ls=":", lw=1)
            a1.plot([], [], color="0.5", ls=":", label=f"paper {ref:g}")
        a1.plot([], [], "ko", mfc="none", label="GD, final cosine > 1/2")
        a1.set_title(f"{NEURON_NAMES.get(e['activation'], e['activation'])} neuron, "
                     f"y = {pretty_target(e['target'])}, η = {e['eta']:g}, T = {e['T']} steps", fontsize=9)
        a1.set_ylim(-0.05, 1.05)
        a2.set_ylim(-0.02, 1.02)
        a1.set_ylabel("P(cosine > 1/2 by step T)")
        a2.set_ylabel("GD's final cosine (median, 30–70 %)")
        a2.set_xlabel("δ = n/d")
        a3.axis("off")
        a3.legend(*a1.get_legend_handles_labels(), fontsize=6.5, loc="upper center", ncol=1,
                  title=r"$\delta_{50}$ (probit fit, bootstrap error)", title_fontsize=6.5, frameon=False)
    fewest = min(p["trials"] for e in data["cases"].values() for dd in e["ds"].values() for p in dd["gd"])
    fig.suptitle(f"GD (≥ {fewest} float32 trials per δ) against dmftsolve transition, from the "
                 "committed counts", fontsize=10)
    return fig


def main(argv: list[str] | None = None) -> int:
    p = script_parser(__spec__, __doc__)
    p.add_argument("--cases", default=",".join(DEFAULT_CASES),
                   help="comma-separated panels, of gelu_z2m1, gelu_z2, gelu_min3, quad_z2m1, quad_z2")
    p.add_argument("--counts", type=Path, default=RESULTS / "gd_transition_counts.json",
                   help="GD counts (validation/gd_transition_counts.py's JSON)")
    p.add_argument("--theory", type=Path, default=RESULTS / "transition_vs_simulation.json",
                   help="theory curves (validation/transition_vs_simulation.py's JSON)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    p.add_argument("--no-nn", action="store_true", help="do not draw (or compute) δ_NN(t·η = 1)")
    args = p.parse_args(argv)
    from validation import gd_transition_counts as gtc
    from validation import transition_vs_simulation as tvs
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in tvs.CASES]
    if not cases or bad:
        p.error(f"--cases must name some of {list(tvs.CASES)}, got {args.cases!r}")
    for flag, path in (("--counts", args.counts), ("--theory", args.theory)):
        if not path.is_file():
            p.error(f"{flag}: no such file {str(path)!r}")
    try:
        counts = json.loads(args.counts.read_text())
        theory = json.loads(args.theory.read_text())
        if not isinstance(counts.get("runs"), dict) or not isinstance(theory.get("curves"), dict):
            raise ValueError("expected a 'runs' table in --counts and a 'curves' table in --theory")
    except (ValueError, AttributeError) as exc:
        p.error(f"--counts / --theory: not the JSON of gd_transition_counts.py / "
                f"transition_vs_simulation.py ({str(exc)[:120]})")
    tvs.migrate(theory)
    nn: dict[str, Any] = {}
    if not args.no_nn:
        from validation.figures import success_curves as sc
        cache = PointCache(args.out, sc.NAME)
        for name in cases:
            case = {**sc.CASES.get(name, {}), "target": tvs.CASES[name]["target"],
                    "activation": tvs.CASES[name]["activation"], "eta": tvs.CASES[name]["eta"]}
            # the key success_curves.py uses, so either script's result serves the other
            key = {"kind": "delta_nn", "case": {k: case[k] for k in ("target", "activation", "eta")},
                   "t_eta": 1, "n_paths": NN["nn_paths"], "replicates": NN["nn_replicates"],
                   "seed": NN["seed"], "quick": False}
            if "nn_bracket" in case:
                key["bracket"] = case["nn_bracket"]
            nn[name] = cache.get_or_compute(key, sc.delta_nn_early, case, NN["nn_paths"],
                                            NN["nn_replicates"], NN["seed"], False)
    data = build(cases, counts, theory, tvs, gtc, nn)
    gd_src = str(args.counts.relative_to(ROOT)) if args.counts.is_relative_to(ROOT) else str(args.counts)
    settings = {"figure": NAME, "gd": gd_src, "theory": "default_curve of transition_vs_simulation.json",
                "success": "cosine > 1/2 by T", "delta_nn": "none" if args.no_nn
                else f"t·η = 1, {NN['nn_replicates']} × {NN['nn_paths']} paths"}
    payload = {"figure": NAME, "command": command_line(argv), "settings": settings, **data}
    jpath, ppath = write_outputs(args.out, NAME, payload, plot(data), caption_text(settings))
    for name, e in data["cases"].items():
        parts = []
        for d, dd in sorted(e["ds"].items(), key=lambda kv: int(kv[0])):
            th = dd["theory"]
            parts.append(f"d={d}: GD {dd['gd_delta_50']:.2f}±{dd['gd_delta_50_err']:.2f}"
                         + (f" / theory {th['delta_50']:.2f}±{th['delta_50_err']:.2f}" if th else ""))
        print(f"{name}: {', '.join(parts)}")
    print(f"wrote {jpath} and {ppath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
