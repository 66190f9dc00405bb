"""DMFT (``dmftsolve.solve_dmft``) against finite-d GD (``dmftsolve.simulate``).

Cases (square loss, q0 = 1 unless stated):

1. ``gelu_z2_hold``  GeLU neuron, y = z², hard direction held at zero, δ = 4, η = 0.2, 50 steps.
2. ``quad_z2_hold``  r² neuron, y = z², held at zero, δ = 3, η = 0.05, 50 steps (docs/theory.md §2.9 check).
3. ``gelu_z2_warm``  GeLU neuron, y = z², warm start M0 = 0.5, Q0 = 0.75, δ = 4, η = 0.2, 50 steps.
4. ``gelu_easy_hard`` GeLU neuron, y = z1 + z2², unrestricted GD, δ = 4, η = 0.2, 40 steps.
5. ``width2_staircase`` two GeLU units (a = 1, 1), y = z1 + z1·z2, δ = 4, η = 0.2, 40 steps.

For d in (500, 1000, 2000, 4000) and several seeds it records, per step, the
simulator mean over trials and its standard error, and the gap
max_t |DMFT − sim| for the Gram diagonal (W_tᵀW_t), the overlaps M_t, train
and test loss and cosine. Outputs in ``validation/results/``:
``dmft_vs_simulation.md`` (tables), ``dmft_vs_simulation.json`` (all numbers)
and ``dmft_vs_simulation.png`` (trajectories and gap vs d).

Run: ``python -m validation.dmft_vs_simulation [--quick]`` (about 10 min on 2 cores);
``--tiny`` (d = 60, 2 trials, 2000 paths; seconds, for ``tests/test_validation_checks.py``) with
``--out-dir DIR`` writes elsewhere; ``--plot`` redraws the figure from the committed JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.results import jsonable
from dmftsolve.simulation.simulator import simulate
from validation import script_parser

OUT = Path(__file__).resolve().parent / "results"
QUICK = "--quick" in sys.argv
DS = (500, 1000) if QUICK else (500, 1000, 2000, 4000)
TRIALS = {500: 8, 1000: 6, 2000: 4, 4000: 3}
N_PATHS = 50_000 if QUICK else 200_000
#: the test's configuration (``--tiny``): every case at one small d
TINY = {"ds": (60,), "trials": {60: 2}, "n_paths": 2000}

CASES = {
    "gelu_z2_hold": (Problem.build(target="z**2", activation="gelu", eta=0.2, steps=50,
                                   hold_zero=(0,)), 4.0),
    "quad_z2_hold": (Problem.build(target="z**2", activation="quad", eta=0.05, steps=50,
                                   hold_zero=(0,)), 3.0),
    "gelu_z2_warm": (Problem.build(target="z**2", activation="gelu", eta=0.2, steps=50,
                                   M0=[[0.5]], Q0=[[0.75]]), 4.0),
    "gelu_easy_hard": (Problem.build(target="z1 + z2**2", activation="gelu", eta=0.2,
                                     steps=40), 4.0),
    "width2_staircase": (Problem.build(target="z1 + z1*z2", activation="gelu", m=2, eta=0.2,
                                       steps=40), 4.0),
}


def dmft_curves(r) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    g = r.gram
    m = g.shape[-1]
    idx = np.arange(m)
    return {
        "gram_diag": (g[:, idx, idx].mean(axis=1), r.Q_err[:, idx, idx].mean(axis=1)
                      + 2 * np.abs(r.M).sum(axis=(1, 2)) * r.M_err.max(axis=(1, 2))),
        "M_abs": (np.abs(r.M).sum(axis=(1, 2)), r.M_err.sum(axis=(1, 2))),
        "train_loss": (r.train_loss, r.train_loss_err),
        "test_loss": (r.test_loss, r.test_loss_err),
        "cosine": (r.cosine, r.cosine_err),
    }


def sim_curves(s) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    m = s.gram.shape[-1]
    idx = np.arange(m)
    arrays = {
        "gram_diag": s.gram[:, :, idx, idx].mean(axis=-1),
        "M_abs": np.abs(s.overlaps).sum(axis=(2, 3)),
        "train_loss": s.train_loss,
        "test_loss": s.test_loss,
        "cosine": s.cosine,
    }
    n = s.gram.shape[0]
    return {k: (a.mean(axis=0), a.std(axis=0, ddof=1) / math.sqrt(n)) for k, a in arrays.items()}


def main(argv: list[str] | None = None) -> dict:
    """Run the comparison (``--quick``, ``--tiny``, ``--out-dir``) and write its outputs."""
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[argv.index("--out-dir") + 1]) if "--out-dir" in argv else OUT
    ds, trials, n_paths = ((TINY["ds"], TINY["trials"], TINY["n_paths"]) if "--tiny" in argv
                           else (DS, TRIALS, N_PATHS))
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    results: dict = {"settings": {"d": ds, "trials": trials, "n_paths": n_paths}, "cases": {}}
    for name, (p, delta) in CASES.items():
        t0 = time.perf_counter()
        r = solve_dmft(p, delta, n_paths=n_paths, seed=2024)
        dm = dmft_curves(r)
        case = {"problem": p.to_dict(), "delta": delta, "dmft_seconds": r.elapsed,
                "dmft": {k: {"value": v, "err": e} for k, (v, e) in dm.items()}, "sim": {}}
        for d in ds:
            s = simulate(p, d=d, delta=delta, seed=d, trials=trials[d])
            sc = sim_curves(s)
            gaps = {}
            for key, (v, e) in dm.items():
                sv, se = sc[key]
                diff = np.abs(v - sv)
                gaps[key] = {"max_gap": float(np.nanmax(diff)),
                             "max_gap_over_err": float(np.nanmax(diff / np.hypot(e, se).clip(1e-12))),
                             "at_T": float(diff[-1])}
            case["sim"][str(d)] = {"curves": {k: {"mean": v, "se": e} for k, (v, e) in sc.items()},
                                   "gaps": gaps, "seconds": s.elapsed}
            print(f"{name:18s} d={d:5d}: " + ", ".join(
                f"{k} gap {g['max_gap']:.3g} ({g['max_gap_over_err']:.1f}σ)" for k, g in gaps.items()),
                flush=True)
        case["seconds"] = time.perf_counter() - t0
        results["cases"][name] = case
    results["total_seconds"] = time.perf_counter() - t_all
    (out / "dmft_vs_simulation.json").write_text(json.dumps(jsonable(results)))
    write_markdown(results, out)
    plot(results, out)
    print(f"total {results['total_seconds']:.0f} s")
    return results


def write_markdown(results: dict, out: Path = OUT) -> None:
    keys = ("gram_diag", "M_abs", "train_loss", "test_loss", "cosine")
    lines = ["# DMFT vs finite-d GD", "",
             f"DMFT: {results['settings']['n_paths']} paths, Stein responses, replicate errors. "
             "Simulator: mean over trials (trials per d: "
             + ", ".join(f"{d}: {results['settings']['trials'][d]}" for d in results['settings']['d'])
             + "). Gap = max over t of |DMFT − sim mean|; in brackets the same gap divided by the "
               "combined standard error (DMFT replicate error ⊕ simulator trial SE).", ""]
    for name, case in results["cases"].items():
        p = case["problem"]
        lines += [f"## {name}", "",
                  f"target `{p['target']}`, σ = {p['activation']}, m = {p['m']}, δ = {case['delta']}, "
                  f"η = {p['eta']}, T = {p['steps']}, hold_zero = {p['hold_zero']}, "
                  f"M0 = {p['M0']}, Q0 = {p['Q0']}", "",
                  "| d | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
        for d, sim in case["sim"].items():
            g = sim["gaps"]
            lines.append(f"| {d} | " + " | ".join(
                f"{g[k]['max_gap']:.3g} ({g[k]['max_gap_over_err']:.1f}σ)" for k in keys) + " |")
        T = p["steps"]
        dm = case["dmft"]
        last = list(case["sim"].values())[-1]["curves"]
        lines += ["", f"At t = {T}: DMFT vs largest-d simulation", "",
                  "| quantity | DMFT | sim |", "|---|---|---|"]
        for k in keys:
            lines.append(f"| {k} | {dm[k]['value'][T]:.4f} ± {dm[k]['err'][T]:.4f} | "
                         f"{last[k]['mean'][T]:.4f} ± {last[k]['se'][T]:.4f} |")
        lines.append("")
    lines.append(f"Total time {results['total_seconds']:.0f} s.")
    (out / "dmft_vs_simulation.md").write_text("\n".join(lines) + "\n")


#: each case in words, for the figure
CASE_TITLES = {
    "gelu_z2_hold": "GeLU, y = z², δ = 4, hard direction held at 0",
    "quad_z2_hold": "r², y = z², δ = 3, hard direction held at 0",
    "gelu_z2_warm": "GeLU, y = z², δ = 4, warm start M₀ = 0.5",
    "gelu_easy_hard": "GeLU, y = z1 + z2², δ = 4",
    "width2_staircase": "2 GeLU neurons, y = z1 + z1·z2, δ = 4",
}
QUANTITY_NAMES = {"gram_diag": "‖w_t‖²", "train_loss": "train loss", "cosine": "cosine with θ*",
                  "M_abs": "|overlap M_t|"}


def plot(results: dict, out: Path = OUT) -> None:
    """Top row: the DMFT's curves against GD's (GD's points darker at larger d); bottom row: the
    largest gap over t against d, with the 1/√d reference."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:  # pragma: no cover
        print("matplotlib not installed: no plot")
        return
    cases = results["cases"]
    fig, axes = plt.subplots(2, len(cases), figsize=(4 * len(cases), 7.4))
    for j, (name, case) in enumerate(cases.items()):
        ax = axes[0, j]
        ds_text = ", ".join(sorted(case["sim"], key=int))
        for key, color in (("gram_diag", "C0"), ("train_loss", "C1"), ("cosine", "C2")):
            v = np.asarray(case["dmft"][key]["value"], dtype=float)
            ax.plot(v, color=color, label=f"DMFT: {QUANTITY_NAMES[key]}")
            for d, sim in case["sim"].items():
                c = sim["curves"][key]
                ax.errorbar(np.arange(len(c["mean"])), np.asarray(c["mean"], dtype=float),
                            yerr=np.asarray(c["se"], dtype=float), fmt=".", ms=2, color=color,
                            alpha=0.25 + 0.75 * int(d) / 4000, lw=0.5)
        ax.set_title(CASE_TITLES.get(name, name), fontsize=9)
        ax.set_xlabel("GD step t", fontsize=8)
        ax.set_ylabel("value (lines: DMFT; points: GD)", fontsize=8)
        ax.tick_params(labelsize=7)
        if j == 0:
            ax.legend(fontsize=7, frameon=False, loc="center right", title=f"GD at d = {ds_text}",
                      title_fontsize=6)
        ax = axes[1, j]
        ds = np.array(sorted(int(d) for d in case["sim"]))
        for key in ("gram_diag", "M_abs", "train_loss", "cosine"):
            gaps = [case["sim"][str(d)]["gaps"][key]["max_gap"] for d in ds]
            ax.loglog(ds, gaps, "o-", label=QUANTITY_NAMES[key])
        ax.loglog(ds, 1 / np.sqrt(ds), "k--", label="1/√d")
        ax.set_xticks(ds)
        ax.set_xticklabels([str(d) for d in ds], fontsize=7)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(labelsize=7)
        ax.set_xlabel("input dimension d", fontsize=8)
        ax.set_ylabel("largest gap over t, |DMFT − GD|", fontsize=8)
        if j == 0:
            ax.legend(fontsize=7, frameon=False, loc="lower left")
    fig.suptitle("DMFT against finite-d GD over a finite horizon", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))
    fig.savefig(out / "dmft_vs_simulation.png", dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options (read again by the module and :func:`main`); ``--help`` prints them."""
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 500 and 1000, 5·10⁴ paths")
    ap.add_argument("--tiny", action="store_true", help="d = 60, 2 trials, 2000 paths (the test)")
    ap.add_argument("--out-dir", type=Path, default=OUT, help=f"output directory (default {OUT})")
    ap.add_argument("--plot", action="store_true", help="redraw the figure from the committed JSON")
    return ap.parse_args(argv)


if __name__ == "__main__":
    if parse_args().plot:  # redraw the figure from the committed JSON (seconds)
        plot(json.loads((OUT / "dmft_vs_simulation.json").read_text()))
    else:
        main()
