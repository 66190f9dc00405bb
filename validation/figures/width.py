"""Figure: GD's δ_50 against the width m, with the finite-d theory (d = 1000, y = z² − 1).

Reads ``validation/results/width_transition.json`` (written by ``validation/width_transition.py``;
both sides by the same self-bracketing search and success criterion, refitted with
``probit_fit(shrink="fit", error="posterior")``) and draws δ_50 ± error against m = 1–4 for the GeLU (η = 0.5,
400 steps) and r² neurons, second-layer weights 1. The r² points use a step GD survives at
each width (η = 0.1 and 600 steps at m = 1; 0.05 and 600 at m = 2–3; 0.025 and 1200 at m = 4):
at η = 0.1, GD diverges at widths 2–4 (``docs/findings.md`` §10.1). A hollow marker is a
search with failed DMFT draws or diverged GD trials. The theory's point is the case run with
the defaults of ``dmftsolve transition`` (``<case>_defaults``, 0.7.1) where that was run (m = 2
and 3), else the case's own search (m = 4, earlier versions). A point that was not run is left
out; the table under the figure in ``docs/results.md`` lists the same numbers.

Run: ``python -m validation.figures.width [--out validation/results/figures/width.png]``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from validation import script_parser

ROOT = Path(__file__).resolve().parents[1]
JSON = ROOT / "results" / "width_transition.json"
OUT = ROOT / "results" / "figures" / "width.png"
SERIES: dict[str, tuple[str, dict[int, str]]] = {
    "gelu": ("GeLU, η = 0.5, T = 400", {m: f"gelu_z2m1_m{m}" for m in range(1, 5)}),
    "quad": ("r², η·T = 60 (m = 1), 30 (m ≥ 2)", {1: "quad_z2m1_m1", 2: "quad_z2m1_m2_eta05",
                                                  3: "quad_z2m1_m3_eta025", 4: "quad_z2m1_m4_eta025"}),
}


#: One GeLU neuron at d = 1000 by the same criterion from the earlier grid runs, where the width
#: search did not run it: GD (40 trials per δ, ``validation/results/gd_transition_counts.md``)
#: and the theory (paired weights, 16 draws per δ, ``validation/results/transition_vs_simulation.md``).
REFERENCE = {("gelu_z2m1_m1", "gd"): (6.89, 0.07), ("gelu_z2m1_m1", "theory"): (6.88, 0.14)}


def points(data: dict[str, Any], cases: dict[int, str], side: str,
           d: int = 1000) -> list[tuple[int, float, float, bool]]:
    """``(m, δ_50, error, clean)`` for m = 1–4 where ``side`` ("gd" or "theory") was run (m = 1
    of the GeLU series from :data:`REFERENCE` when the search did not run it); ``clean`` is
    False for a search with failed DMFT draws or diverged GD trials."""
    from validation.width_transition import _refit  # the one error model of the report

    out = []
    for m, case in sorted(cases.items()):
        raw = data.get(f"{case}|{d}|{side}")
        if side == "theory" and f"{case}_defaults|{d}|theory" in data:  # as the command runs today
            raw = data[f"{case}_defaults|{d}|theory"]
        v = _refit(raw)
        if v is not None and math.isfinite(v["delta_50"]):
            bad = sum((raw.get("failed_draws") or {}).values()) + sum((raw.get("diverged") or {}).values())
            out.append((m, float(v["delta_50"]), float(v["err"]), bad == 0))
        elif (case, side) in REFERENCE and d == 1000:
            out.append((m, *REFERENCE[(case, side)], True))
    return out


def draw(data: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.4), sharey=False)
    for ax, (_, (title, cases)) in zip(axes, SERIES.items(), strict=True):
        for side, marker, colour, label in (("gd", "s", "C1", "GD (float32)"),
                                            ("theory", "o", "C0", "theory (dmftsolve transition)")):
            pts = points(data, cases, side)
            if pts:
                m, y, e, clean = (np.array(c) for c in zip(*pts, strict=True))
                x = m + (-0.06 if side == "gd" else 0.06)
                ax.errorbar(x, y, e, fmt=marker + "-", color=colour, capsize=2, label=label)
                if not clean.all():  # hollow: failed draws or diverged trials
                    ax.plot(x[~clean], y[~clean], marker, mfc="white", mec=colour, ms=6, zorder=3)
        ax.set_xticks([1, 2, 3, 4])
        ax.set_xlabel("hidden units m (second-layer weights 1)")
        ax.set_ylabel("δ_50 (50 % success by step T)")
        ax.set_title(f"Width and the transition: {title}\ny = z² − 1, d = 1000", fontsize=8)
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=7, loc="lower left", frameon=False)
    axes[1].text(0.98, 0.98, "hollow: a search with failed draws\nor diverged GD trials",
                 transform=axes[1].transAxes, ha="right", va="top", fontsize=6)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    from dmftsolve._files import savefig

    try:
        savefig(fig, out, "figure", dpi=120)
    finally:
        plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> Path:
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--json", type=Path, default=JSON)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    return draw(json.loads(a.json.read_text()), a.out)


if __name__ == "__main__":
    print(main())
