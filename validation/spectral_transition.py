"""Figure 1 of the paper, predicted: GD's success probability from the spectral and the random start.

For each label (GeLU on ``z² − 1`` and on ``z²``, η = 0.5, T = 1000 steps) and d (1000, 2000):

* **GD**: the stored trials of ``python -m validation.figures.spectral_init`` (its point cache,
  20 float32 trials per δ, both starts stepped on the same data): success from the spectral start
  is the cosine at step T above 1/2, from the random start the first passage above 1/2 by step T;
* **theory**: :func:`dmftsolve.finite_d.transition` with ``init="spectral"`` (each draw samples the
  start's finite-d overlap from the estimator on its own data; success at step T) and with the
  random start, at the command's defaults, by its adaptive search (``--tol``), or on GD's δ grid
  (``--grid``).

δ_50 of both sides is the probit fit of the counts (:func:`dmftsolve.thresholds.delta50.probit_fit`).
Each finished search is stored in ``validation/results/spectral_transition.json`` (rerun skips it);
``--report`` rewrites ``spectral_transition.md`` and the figure ``spectral_transition.png``.

Run::

    python -m validation.spectral_transition --ds 1000,2000
    python -m validation.spectral_transition --report
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from dmftsolve import Problem, __version__
from dmftsolve.finite_d import TransitionSettings, transition
from dmftsolve.results import cpu_model, git_commit
from dmftsolve.thresholds.delta50 import probit_fit
from validation import script_parser
from validation.width_transition import merge_json

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
JSON = OUT / "spectral_transition.json"
CACHE = OUT / "figures" / "cache" / "spectral_init"

#: label -> problem keywords and the first δ of each start's search
CASES: dict[str, dict[str, Any]] = {
    "gelu_z2m1": {"target": "z**2 - 1", "start": {"spectral": 3.0, "random": 6.5}},
    "gelu_z2": {"target": "z**2", "start": {"spectral": 1.8, "random": 9.0}},
}
STEPS = 1000
INITS = ("spectral", "random")


def problem_of(case: str) -> Problem:
    return Problem.build(target=CASES[case]["target"], activation="gelu", eta=0.5, steps=STEPS)


def gd_counts(case: str, d: int, init: str, cache: Path = CACHE) -> dict[str, list[float]]:
    """GD's counts per δ from the stored trials of ``validation.figures.spectral_init``."""
    by_delta: dict[float, list[int]] = {}
    for f in sorted(cache.glob("*.json")):
        entry = json.loads(f.read_text())
        st = entry.get("settings", {})
        if (st.get("kind") != "spectral_gd" or st.get("target") != CASES[case]["target"]
                or st.get("d") != d or st.get("steps") != STEPS):
            continue
        runs = entry["value"]["runs"]
        if init == "spectral":
            ok = [r["spectral"]["final_cosine"] > 0.5 for r in runs]
        else:
            ok = [r["random"]["escape_step"] is not None for r in runs]
        k, n = by_delta.get(float(st["delta"]), [0, 0])
        by_delta[float(st["delta"])] = [k + int(sum(ok)), n + len(ok)]
    xs = sorted(by_delta)
    return {"deltas": xs, "successes": [by_delta[x][0] for x in xs], "trials": [by_delta[x][1] for x in xs]}


def fit(counts: dict[str, list[float]], error: str = "bootstrap") -> tuple[float, float, float]:
    x, k, n = (np.asarray(counts[key], float) for key in ("deltas", "successes", "trials"))
    if x.size < 2 or not (0 < k.sum() < n.sum()):
        return float("nan"), float("nan"), float("nan")
    return tuple(float(v) for v in probit_fit(x, k, n, shrink="half", error=error))  # type: ignore[return-value]


def theory_search(case: str, d: int, init: str, *, tol: float, seed: int, workers: int,
                  grid: list[float] | None) -> dict[str, Any]:
    p = problem_of(case)
    s = TransitionSettings(seed=seed, tol=tol, start=CASES[case]["start"][init], init=init, workers=workers)
    t0 = time.perf_counter()
    c = transition(p, d, grid, settings=s, throw=False, progress=True)
    return {"deltas": c.deltas, "successes": c.successes, "trials": c.draws, "delta_50": c.delta_50,
            "err": c.delta_50_err, "width": c.width, "status": c.status.value, "message": c.message,
            "seconds": time.perf_counter() - t0, "starts": [pt.m0.tolist() for pt in c.points],
            "settings": {"tol": tol, "seed": seed, "workers": workers, "grid": grid, "init": init,
                         "steps": STEPS, "n_paths": c.settings.get("n_paths"), "version": __version__,
                         "commit": git_commit(), "cpu": cpu_model()}}


def _bracketed(counts: dict[str, list[float]]) -> bool:
    """Whether GD's grid has a δ where at most half and one where at least half the trials learn."""
    frac = np.asarray(counts["successes"], float) / np.asarray(counts["trials"], float)
    return bool(frac.min() <= 0.5 <= frac.max())


def report(data: dict[str, Any], cache: Path = CACHE) -> str:
    lines = ["# Figure 1, predicted: GD from the spectral and the random start",
             "",
             "GeLU, η = 0.5, T = 1000 steps. GD: 20 float32 trials per δ of "
             "`python -m validation.figures.spectral_init` (success from the spectral start: cosine at "
             "step T above 1/2; from the random start: first passage by step T). Theory: "
             "`dmftsolve transition --init spectral` / `--init random` with the command's defaults "
             "(`python -m validation.spectral_transition`). δ_50: probit fit (GD: bootstrap error on "
             "its grid; theory: the search's posterior error).",
             "",
             "| label | start | d | GD δ_50 | theory δ_50 (draws) | theory − GD | within max(0.3, 5 %)? |",
             "|---|---|---|---|---|---|---|"]
    for case in CASES:
        for init in INITS:
            for d in (1000, 2000, 4000):
                th = data.get(f"{case}|{init}|{d}")
                gd = gd_counts(case, d, init, cache)
                mu_g, se_g, _ = fit(gd)
                if th is None and not np.isfinite(mu_g):
                    continue
                mu_t = th["delta_50"] if th else float("nan")
                se_t = th["err"] if th else float("nan")
                draws = int(np.sum(th["trials"])) if th else 0
                gap = mu_t - mu_g
                within = abs(gap) <= max(0.3, 0.05 * mu_g)
                ok = "" if not np.isfinite(gap) else ("yes" if within else "**no**")
                if np.isfinite(mu_g) and not _bracketed(gd):
                    ok = f"GD not bracketed (its grid ends at δ = {max(gd['deltas']):g})"
                gd_text = f"{mu_g:.2f} ± {se_g:.2f}" if np.isfinite(mu_g) else "–"
                th_text = f"{mu_t:.2f} ± {se_t:.2f} ({draws})" if th else "not run"
                gap_text = f"{gap:+.2f}" if np.isfinite(gap) else "–"
                lines.append(f"| `{CASES[case]['target']}` | {init} | {d} | {gd_text} | {th_text} | "
                             f"{gap_text} | {ok} |")
    return "\n".join(lines) + "\n"


def plot(data: dict[str, Any], path: Path, cache: Path = CACHE) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.special import ndtr

    fig, axes = plt.subplots(1, len(CASES), figsize=(5.2 * len(CASES), 3.8), squeeze=False)
    colours = {("spectral", 1000): "tab:orange", ("spectral", 2000): "tab:red",
               ("random", 1000): "tab:blue", ("random", 2000): "tab:purple"}
    for ax, case in zip(axes[0], CASES, strict=True):
        for init in INITS:
            for d in (1000, 2000):
                c = colours[(init, d)]
                gd = gd_counts(case, d, init, cache)
                if gd["deltas"]:
                    k, n = np.asarray(gd["successes"], float), np.asarray(gd["trials"], float)
                    err = np.sqrt(np.clip(k * (n - k), 0, None) / n) / n
                    ax.errorbar(gd["deltas"], k / n, yerr=err, fmt="s", ms=4, color=c, alpha=0.7,
                                label=f"GD, {init}, d={d}")
                th = data.get(f"{case}|{init}|{d}")
                if th and np.isfinite(th["delta_50"]):
                    x = np.linspace(0.5, 12, 300)
                    ax.plot(x, ndtr((x - th["delta_50"]) / th["width"]), "-", color=c, lw=1.5,
                            label=f"theory, {init}, d={d}")
        ax.set_xscale("log")
        ax.set_xlabel("δ = n/d")
        ax.set_ylabel("P(success)")
        ax.set_title(f"GeLU, y = {CASES[case]['target']}, T = {STEPS}")
        ax.legend(fontsize=6)
    fig.tight_layout()
    from dmftsolve._files import savefig

    savefig(fig, path, what="figure", dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--ds", default="1000,2000", help="comma-separated d (default: 1000,2000)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated labels")
    ap.add_argument("--inits", default=",".join(INITS), help="comma-separated starts")
    ap.add_argument("--tol", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--grid", action="store_true", help="the theory on GD's δ grid instead of its search")
    ap.add_argument("--report", action="store_true", help="only rewrite the markdown and the figure")
    ap.add_argument("--redo", action="store_true")
    a = ap.parse_args(argv)
    data = json.loads(JSON.read_text()) if JSON.exists() else {}
    if not a.report:
        for case in a.cases.split(","):
            for init in a.inits.split(","):
                for d in (int(x) for x in a.ds.split(",")):
                    key = f"{case}|{init}|{d}"
                    if key in data and not a.redo:
                        continue
                    grid = gd_counts(case, d, init)["deltas"] if a.grid else None
                    data[key] = theory_search(case, d, init, tol=a.tol, seed=a.seed, workers=a.workers,
                                              grid=grid or None)
                    merge_json(JSON, key, data[key])
                    print(f"{key}: {data[key]['delta_50']:.2f} ± {data[key]['err']:.2f} "
                          f"({data[key]['seconds']:.0f} s)", flush=True)
        data = json.loads(JSON.read_text())
    text = report(data)
    from dmftsolve._files import write_text

    write_text(OUT / "spectral_transition.md", text, what="report")
    plot(data, OUT / "spectral_transition.png")
    print(text)
    return data


if __name__ == "__main__":
    main()
