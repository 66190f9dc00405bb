"""δ_NN(t) and δ_NN(∞) from the DMFT beside the simulator's success rate (cosine > 1/2).

Problem: single neuron (m = 1, a = 1), square loss ``(y − f)²/2``, target
``y = z²``, random init ``q0 = 1``, no ridge. Two neurons:

* ``gelu``: GeLU, η = 0.5. Theory: δ_NN(t) at t = 2, 20, 100, 200
  (t·η = 1, 10, 50, 100); the long-time rule is δ_NN(200) with the T/2 = 100
  check (the same rule as ``delta_nn(problem, None)`` with ``long_time=200``).
* ``quad``: σ(r) = r², η = 0.1. Theory: δ_NN(t) at t = 10, 100, 200
  (t·η = 1, 10, 20); long-time rule at T = 200 (T/2 = 100). (T = 400 costs
  4× more per δ and did not fit the time budget on a shared machine.)

For each δ evaluated, one DMFT run (10⁴ paths) serves every t: the script
drives the library's own bracketing (``ThresholdPredicate`` and ``search_threshold``
of ``dmftsolve.thresholds.hessian_threshold``, exactly what ``delta_nn`` uses) once per t
on a shared cache.
The time-translation-invariant fixed point ``delta_nn(problem, "tti")`` is
reported beside them.

Simulator: unrestricted full-batch GD (``dmftsolve.simulation.sweeps.sweep``, float32
data) at d = 250, 500, 1000 on a δ grid around the theory and the paper's
values, success = final cosine > 1/2; GeLU 1000 steps (t·η = 500), r² 2000
steps (t·η = 200). The first recorded step at which the cosine exceeds 1/2
(the escape step) is kept per run.

Everything runs on a 2-process pool (about 15 min on 2 idle cores).

Outputs in ``validation/results/``: ``thresholds_vs_simulation.md`` (tables),
``.json`` (all numbers), ``.png`` (success rate vs δ per d with the δ_NN(t)
lines and the paper's values).

``--investigate`` runs the small side experiments of ``docs/findings.md``
instead (about 10 min): the linear-response amplification of the hard
overlap along the restricted DMFT trajectory, and the dependence of
δ_NN(t) on q0 and η. Outputs ``thresholds_vs_simulation.investigate.{md,json}``.

Run: ``python -m validation.thresholds_vs_simulation [--quick] [--investigate]``; ``--tiny``
(seconds: d = 40, short horizons, no TTI search; ``tests/test_validation_checks.py``) with
``--out-dir DIR`` writes elsewhere; ``--plot`` redraws the figure from the committed JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.results import SolverError, jsonable
from dmftsolve.simulation.sweeps import sweep
from dmftsolve.thresholds.directions import split_directions
from dmftsolve.thresholds.hessian_threshold import ThresholdPredicate, delta_nn, search_threshold
from dmftsolve.thresholds.settings import ThresholdSettings
from validation import script_parser

OUT = (Path(sys.argv[sys.argv.index("--out-dir") + 1]) if "--out-dir" in sys.argv[:-1]
       else Path(__file__).resolve().parent / "results")
QUICK = "--quick" in sys.argv
#: the test's configuration (``--tiny``, seconds): short times, d = 40, no TTI search
TINY = "--tiny" in sys.argv
INVESTIGATE = "--investigate" in sys.argv
WORKERS = 2
PAPER = {"gelu": 6.0, "quad": 3.6}
DELTA_ALG = 0.5

CASES: dict[str, dict[str, Any]] = {
    "gelu": {"activation": "gelu", "eta": 0.5, "times": (2, 20, 100, 200),
             "sim_steps": 1000,
             "grid": (4.0, 6.0, 8.0, 10.0, 13.0, 16.0, 21.0)},
    "quad": {"activation": "quad", "eta": 0.1, "times": (10, 100, 200),
             "sim_steps": 2000,
             "grid": (3.0, 3.6, 4.2, 5.0, 6.0, 8.0, 12.0)},
}
DS = (250, 500) if QUICK else (250, 500, 1000)
TRIALS = {250: 6, 500: 4, 1000: 2}
SETTINGS = ThresholdSettings(bracket=(2.0, 40.0), grid=6, xtol=0.5,
                             n_paths=4000 if QUICK else 10_000, seed=0)
if TINY:
    CASES = {"gelu": {**CASES["gelu"], "times": (2, 4), "sim_steps": 20, "grid": (4.0, 21.0)},
             "quad": {**CASES["quad"], "times": (2, 4), "sim_steps": 20, "grid": (3.0, 12.0)}}
    DS, TRIALS, WORKERS = (40,), {40: 2}, 1
    SETTINGS = ThresholdSettings(bracket=(2.0, 30.0), grid=3, xtol=4.0, n_paths=1000, seed=0)


def problem(name: str, **changes: Any) -> Problem:
    c = CASES[name]
    kw = {"target": "z**2", "activation": c["activation"], "eta": c["eta"],
          "steps": c["sim_steps"], **changes}
    return Problem.build(**kw)


# --------------------------------------------------------------------------- theory
def thresholds_over_time(prob: Problem, times: tuple[int, ...],
                         settings: ThresholdSettings = SETTINGS) -> dict[str, Any]:
    """δ_NN(t) for every t in ``times`` (one DMFT run per δ serves all t).

    The last two entries of ``times`` also give the long-time rule:
    δ_NN(T) is accepted when its bracket overlaps that of δ_NN(T/2) within xtol.
    """
    warnings.filterwarnings("ignore")
    start = time.perf_counter()
    split = split_directions(prob.target)
    pred = ThresholdPredicate(prob, tuple(times), settings, split, progress=False)
    out: dict[str, Any] = {"times": list(times), "eta": prob.training.eta, "per_t": {}}
    for t in reversed(times):
        pred.t = t
        try:
            st, msg, br = search_threshold(pred, settings)
        except SolverError as exc:
            st, msg, br = None, str(exc), None
        out["per_t"][str(t)] = {"t": t, "t_eta": t * prob.training.eta,
                                "status": None if st is None else st.value, "message": msg,
                                "bracket": br,
                                "delta_nn": None if br is None else 0.5 * (br[0] + br[1])}
    T, T2 = times[-1], times[-2]
    b1, b2 = out["per_t"][str(T)]["bracket"], out["per_t"][str(T2)]["bracket"]
    conv = (b1 is not None and b2 is not None and not (b2[0] > b1[1] + settings.xtol
                                                      or b2[1] < b1[0] - settings.xtol))
    out["long_time"] = {"T": T, "T_half": T2, "bracket": b1, "converged": bool(conv)}
    evals = []
    for d in pred.cache:
        for t, hs in pred.spectra[d].items():
            evals.append({"delta": d, "t": t, "ok": hs.ok,
                          "has_outlier": hs.has_outlier(settings.criterion) if hs.ok else None,
                          "outliers": [o.location for o in hs.outliers.outliers if o.side == "left"],
                          "left_edge": hs.left_edge,
                          "train_loss": hs.diagnostics.get("dmft_train_loss")})
    out["evaluations"] = evals
    out["elapsed"] = time.perf_counter() - start
    return out


def tti_threshold(prob: Problem) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    r = delta_nn(prob, "tti", settings=SETTINGS, throw=False)
    return {"status": r.status.value, "bracket": r.bracket, "delta_nn": r.delta_nn,
            "message": r.message, "elapsed": r.elapsed}


def amplification(prob: Problem, delta: float, T: int, n_paths: int, seed: int = 0) -> dict[str, Any]:
    """Linear response ``A(t) = ∂M_t/∂M_0`` of the hard overlap at ``M = 0``.

    Along the restricted DMFT trajectory (hard overlap held at 0), a small
    hard overlap ``M_0`` perturbs the training fields by ``dV^t = z·dM_t −
    (η/δ) Σ_{s<t} R(t, s+1) D^s dV^s`` (the memory term of the sample
    process, differentiated), and ``dM_{t+1} = (1 − ηλ) dM_t − η E[z D^t dV^t]``.
    The kernels ``Q, R, Γ`` are even in ``M`` (sign symmetry of ``z²``), so
    they do not move at first order. At finite d, ``M_0 ~ N(0, q0/d)`` and the
    cosine is ``≈ |A(t) M_0| / √Q(t,t)`` while it is small.
    """
    warnings.filterwarnings("ignore")
    p = prob.replace(hold_zero=[0], steps=T)
    r = solve_dmft(p, delta, n_paths=n_paths, seed=seed, steps=T, keep_samples_at=tuple(range(T + 1)),
                   throw=False)
    if not r.ok:
        return {"delta": delta, "status": r.status.value, "A": None}
    z = r.samples(0)["Vstar"][:, 0]
    D = np.stack([r.samples(t)["D"][:, 0, 0] for t in range(T + 1)])
    Rk = r.R[:, :, 0, 0]
    eta, lam = p.training.eta, p.training.lam
    a = np.zeros(T + 1)
    a[0] = 1.0
    DdV = np.zeros_like(D)
    for t in range(T + 1):
        dV = z * a[t]
        if t:
            dV = dV - (eta / delta) * (Rk[t, 1:t + 1] @ DdV[:t])
        DdV[t] = D[t] * dV
        if t < T:
            a[t + 1] = (1 - eta * lam) * a[t] - eta * float(np.mean(z * DdV[t]))
    return {"delta": delta, "status": r.status.value, "A": a.tolist(),
            "Q": r.q_diag[:, 0, 0].tolist(), "n_paths": n_paths, "seed": seed}


# --------------------------------------------------------------------------- simulation
def escape_steps(run) -> list[float]:
    """Per trial: first recorded step with cosine > 1/2 (NaN if never; the run may fall back)."""
    out = []
    for c in run.cosine:
        idx = np.flatnonzero(np.isfinite(c) & (c > 0.5))
        out.append(float(run.steps[idx[0]]) if idx.size else math.nan)
    return out


def delta_50(deltas: np.ndarray, rate: np.ndarray) -> float | None:
    """δ where the success rate first reaches 1/2 (linear interpolation)."""
    for i in range(len(deltas)):
        if rate[i] >= 0.5:
            if i == 0:
                return float(deltas[0])
            x0, x1, r0, r1 = deltas[i - 1], deltas[i], rate[i - 1], rate[i]
            return float(x0 + (0.5 - r0) * (x1 - x0) / (r1 - r0))
    return None


# --------------------------------------------------------------------------- main
def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results: dict[str, Any] = {"settings": {
        "cases": {k: {**v, "times": list(v["times"]), "grid": list(v["grid"])} for k, v in CASES.items()},
        "d": list(DS), "trials": TRIALS, "threshold_settings": vars(SETTINGS), "paper": PAPER,
        "delta_alg": DELTA_ALG, "quick": QUICK, "tiny": TINY, "sim_dtype": "float32",
        "success": "final cosine > 0.5"}}
    with ProcessPoolExecutor(WORKERS) as pool:
        theo = {name: pool.submit(thresholds_over_time, problem(name), c["times"])
                for name, c in CASES.items()}
        tti = {name: pool.submit(tti_threshold, problem(name)) for name in CASES if not TINY}
        sims: dict[str, dict[int, Any]] = {name: {} for name in CASES}
        for d in DS:
            for name, c in CASES.items():
                s = time.perf_counter()
                res = sweep(problem(name), d, list(c["grid"]), trials=TRIALS[d], seed=1000 + d,
                            executor=pool, progress=False, record_every=10, dtype=np.float32)
                sims[name][d] = {
                    "deltas": res.deltas.tolist(), "success_rate": res.success_rate.tolist(),
                    "success_stderr": res.success_stderr.tolist(),
                    "cosine_median": res.cosine_median.tolist(),
                    "train_loss": res.train_loss.tolist(), "test_loss": res.test_loss.tolist(),
                    "escape_steps": [escape_steps(r) for r in res.runs],
                    "delta_50": delta_50(res.deltas, res.success_rate),
                    "status": res.status.value, "nonfinite": res.diagnostics["nonfinite"],
                    "wall": time.perf_counter() - s,
                }
                print(f"[{time.perf_counter() - t0:6.0f}s] sim {name} d={d}: "
                      f"{np.round(res.success_rate, 2).tolist()}", flush=True)
        theory = {name: f.result() for name, f in theo.items()}
        ttis = {name: (tti[name].result() if name in tti else
                       {"status": "not run (--tiny)", "bracket": None, "delta_nn": None, "message": "",
                        "elapsed": 0.0}) for name in CASES}
    results["theory"] = theory
    results["tti"] = ttis
    results["simulation"] = sims
    results["elapsed"] = time.perf_counter() - t0
    (OUT / "thresholds_vs_simulation.json").write_text(json.dumps(jsonable(results), indent=1))
    write_markdown(results)
    plot(results)
    print(f"done in {results['elapsed']:.0f}s")


def _fmt_br(br: Any) -> str:
    return "—" if br is None else f"[{br[0]:.2f}, {br[1]:.2f}]"


def write_markdown(res: dict[str, Any]) -> None:
    L = ["# δ_NN vs simulator success rate (single neuron, y = z², square loss, q0 = 1)", "",
         f"Generated by `python -m validation.thresholds_vs_simulation{' --quick' if QUICK else ''}"
         f"{' --tiny' if TINY else ''}` "
         f"in {res['elapsed']:.0f} s. DMFT: {SETTINGS.n_paths} paths per δ, bracket xtol "
         f"{SETTINGS.xtol}, criterion '{SETTINGS.criterion}'. Simulator: unrestricted GD, "
         "float32 data, success = final cosine > 1/2.", ""]
    for name, c in CASES.items():
        th = res["theory"][name]
        L += [f"## {name} (η = {c['eta']})", "", "| quantity | t | t·η | δ bracket |", "|---|---|---|---|"]
        for t in th["times"]:
            e = th["per_t"][str(t)]
            extra = "" if e["bracket"] is not None else f" ({e['message']})"
            L.append(f"| δ_NN(t) | {t} | {t * c['eta']:g} | {_fmt_br(e['bracket'])}{extra} |")
        lt = th["long_time"]
        L.append(f"| δ_NN long-time rule (T={lt['T']}, T/2={lt['T_half']}) | {lt['T']} | "
                 f"{lt['T'] * c['eta']:g} | {_fmt_br(lt['bracket'])} "
                 f"({'converged' if lt['converged'] else 'NOT converged'}) |")
        tt = res["tti"][name]
        L.append(f"| δ_NN TTI fixed point (global branch) | ∞ | ∞ | {_fmt_br(tt['bracket'])} "
                 f"({tt['status']}) |")
        L.append(f"| paper | | | ≈ {PAPER[name]} |")
        L.append(f"| δ_alg | | | {DELTA_ALG} |")
        L += ["", f"Simulator ({c['sim_steps']} steps, t·η = {c['sim_steps'] * c['eta']:g}): "
              "successes per δ and δ_50 (success rate crosses 1/2, linear interpolation)", ""]
        grid = c["grid"]
        L.append("| d | trials | " + " | ".join(f"δ={x:g}" for x in grid) + " | δ_50 |")
        L.append("|---|---|" + "---|" * len(grid) + "---|")
        for d, s in res["simulation"][name].items():
            cells = [f"{round(r * TRIALS[int(d)])}/{TRIALS[int(d)]}" for r in s["success_rate"]]
            d50 = "—" if s["delta_50"] is None else f"{s['delta_50']:.2f}"
            L.append(f"| {d} | {TRIALS[int(d)]} | " + " | ".join(cells) + f" | {d50} |")
        L += ["", ("Median first recorded step with cosine > 1/2, over runs that ever crossed it (a run "
              "may cross and fall back, so this can be finite where the final success count is 0):"), ""]
        L.append("| d | " + " | ".join(f"δ={x:g}" for x in grid) + " |")
        L.append("|---|" + "---|" * len(grid))
        for d, s in res["simulation"][name].items():
            cells = []
            for es in s["escape_steps"]:
                v = [x for x in es if x is not None and np.isfinite(x)]
                cells.append(f"{np.median(v):.0f}" if v else "—")
            L.append(f"| {d} | " + " | ".join(cells) + " |")
        L.append("")
    (OUT / "thresholds_vs_simulation.md").write_text("\n".join(L) + "\n")


NEURON_NAMES = {"gelu": "GeLU neuron", "quad": "r² neuron"}


def plot(res: dict[str, Any]) -> None:
    """GD's success rate against δ per d (binomial error bars clipped to [0, 1]) with the
    theory's thresholds as vertical lines; legends under the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (name, c) in zip(axes, CASES.items(), strict=True):
        ticks: set[float] = set()
        for i, (d, s) in enumerate(res["simulation"][name].items()):
            p, e = np.asarray(s["success_rate"], float), np.asarray(s["success_stderr"], float)
            ax.errorbar(s["deltas"], p, yerr=np.vstack([np.minimum(e, p), np.minimum(e, 1 - p)]), marker="o",
                        capsize=2, color=colors[i], label=f"GD, d = {d} ({TRIALS[int(d)]} trials per δ)")
            ticks |= set(map(float, s["deltas"]))
        th = res["theory"][name]
        styles = [":", "-.", "--", "-"]
        for j, t in enumerate(th["times"]):
            br = th["per_t"][str(t)]["bracket"]
            if br is not None:
                ax.axvline(0.5 * (br[0] + br[1]), color="0.35", ls=styles[j % 4], lw=1.2,
                           label=f"theory δ_NN(t) at t·η = {t * c['eta']:g} (one seed)")
        tt = res["tti"][name]
        if tt["bracket"] is not None:
            ax.axvline(0.5 * sum(tt["bracket"]), color="tab:purple", lw=1.2,
                       label="theory δ_NN at the fixed point (global branch)")
        ax.axvline(PAPER[name], color="k", lw=2, alpha=0.6, label=f"paper's threshold ≈ {PAPER[name]}")
        ax.set_xscale("log")
        ax.set_xticks(sorted(ticks))
        ax.set_xticklabels([f"{x:g}" for x in sorted(ticks)])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("δ = n/d (log scale)")
        ax.set_ylabel("GD success rate (final cosine > 1/2)")
        ax.set_title(f"{NEURON_NAMES.get(name, name)}, y = z², η = {c['eta']}, {c['sim_steps']} GD steps")
        ax.set_ylim(-0.03, 1.03)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(OUT / "thresholds_vs_simulation.png", dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- investigation
def investigate() -> None:
    """Small side experiments (docs/findings.md)."""
    OUT.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    res: dict[str, Any] = {}
    with ProcessPoolExecutor(WORKERS) as pool:
        # 1. amplification of the hard overlap, early times (reliable) and its MC spread
        amp_jobs = {}
        for name, T, deltas in (("gelu", 40, (4.0, 6.0, 8.0, 12.0, 20.0)),
                                ("quad", 100, (3.0, 4.0, 5.0, 6.0, 10.0))):
            for dlt in deltas:
                for seed in (0, 1):
                    amp_jobs[name, dlt, seed] = pool.submit(amplification, problem(name), dlt, T,
                                                            20_000, seed)
        # 2. δ_NN(t) under q0 and η changes (GeLU, same t·η = 10 and 50)
        st = ThresholdSettings(bracket=(2.0, 40.0), grid=6, xtol=0.5, n_paths=10_000, seed=0)
        var_jobs = {
            "gelu q0=1 eta=0.5": pool.submit(thresholds_over_time, problem("gelu"), (20, 100), st),
            "gelu q0=0.25 eta=0.5": pool.submit(thresholds_over_time, problem("gelu", q0=0.25),
                                                (20, 100), st),
            "gelu q0=1 eta=0.25": pool.submit(thresholds_over_time, problem("gelu", eta=0.25),
                                              (40, 200), st),
        }
        amps = {f"{k[0]} delta={k[1]:g} seed={k[2]}": f.result() for k, f in amp_jobs.items()}
        variants = {k: f.result() for k, f in var_jobs.items()}
    res["amplification"] = amps
    res["variants"] = variants
    res["elapsed"] = time.perf_counter() - t0
    (OUT / "thresholds_vs_simulation.investigate.json").write_text(json.dumps(jsonable(res), indent=1))
    L = ["# Side experiments for docs/findings.md", "",
         "Generated by `python -m validation.thresholds_vs_simulation --investigate` in "
         f"{res['elapsed']:.0f} s.",
         "", "## Amplification A(t) = ∂M_t/∂M_0 of the hard overlap (restricted DMFT, 2·10⁴ paths, "
         "two seeds)", "", "| case | δ | seed | " + " | ".join(f"t={t}" for t in (2, 5, 10, 20, 40, 70, 100))
         + " |", "|---|---|---|" + "---|" * 7]
    for key, a in amps.items():
        name = key.split()[0]
        A = a["A"]
        cells = [f"{A[t]:.3g}" if A is not None and t < len(A) else "" for t in (2, 5, 10, 20, 40, 70, 100)]
        L.append(f"| {name} | {a['delta']:g} | {a['seed']} | " + " | ".join(cells) + " |")
    L += ["", "## δ_NN(t) under changes of q0 and η (GeLU)", "", "| variant | t | t·η | bracket |",
          "|---|---|---|---|"]
    for k, v in variants.items():
        for t in v["times"]:
            e = v["per_t"][str(t)]
            L.append(f"| {k} | {t} | {t * v['eta']:g} | {_fmt_br(e['bracket'])} |")
    (OUT / "thresholds_vs_simulation.investigate.md").write_text("\n".join(L) + "\n")
    print("\n".join(L))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options (read by the module's constants); ``--help`` prints them."""
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 250 and 500, 4000 paths")
    ap.add_argument("--tiny", action="store_true", help="d = 40, short horizons, no TTI search (the test)")
    ap.add_argument("--investigate", action="store_true",
                    help="the side experiments instead: amplification, q0 and η")
    ap.add_argument("--out-dir", type=Path, default=OUT, help=f"output directory (default {OUT})")
    ap.add_argument("--plot", action="store_true", help="redraw the figure from the committed JSON")
    return ap.parse_args(argv)


if __name__ == "__main__":
    if parse_args().plot:  # redraw the figure from the committed JSON (seconds)
        plot(json.loads((OUT / "thresholds_vs_simulation.json").read_text()))
    elif INVESTIGATE:
        investigate()
    else:
        main()
