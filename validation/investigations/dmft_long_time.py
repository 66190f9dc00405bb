"""Long-time accuracy of the DMFT solver: Stein vs pathwise responses vs finite-d GD.

Case: single GeLU neuron, y = z², hard direction held at zero (``hold_zero=(0,)``),
square loss, q0 = 1, δ = 4, η = 0.5 (the case where the Stein DMFT was ~5 % below
the simulator's ‖w_t‖² at t = 600).

Stages (each run cached as .npz in ``$DMFT_LONG_TIME_CACHE``, default
``<tmpdir>/dmft_long_time_cache``; kept out of the repository, ~80 MB):

``sim``    finite-d GD (``dmftsolve.simulation.simulator.simulate``) at d = 1000, 2000, 4000,
           several trials, T_SIM steps, Gram recorded every 10 steps.
``dmft``   ``solve_dmft`` runs listed in ``DMFT_RUNS``: pathwise and Stein on the same
           seeds (4e4 paths, 100 steps; pathwise is the O(N T³) reference for the
           kernels), and Stein at 2e4, 4e4, 1e5 paths up to 400–600 steps (for the
           1/N extrapolation).
``report`` tables (GD vs d, DMFT vs N, 1/N and 1/d extrapolations, same-seed kernels
           and their gauge-invariant combinations), JSON and plot.

Outputs: ``validation/investigations/results/dmft_long_time.md`` (tables),
``dmft_long_time.json`` (numbers) and ``dmft_long_time.png`` (plots).

Run: ``python validation/investigations/dmft_long_time.py [sim|dmft|report ...]`` (no argument: all;
about 6 min for ``sim`` and 12 min for ``dmft`` on an unloaded core).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.simulation.simulator import simulate

OUT = Path(__file__).resolve().parent / "results"
CACHE = Path(os.environ.get("DMFT_LONG_TIME_CACHE",
                           Path(tempfile.gettempdir()) / "dmft_long_time_cache"))
DELTA, ETA = 4.0, 0.5
T_SIM = 400
SIM_DS = {1000: 8, 2000: 6, 4000: 4}  # d -> trials
SIM_SEED = 3


def problem(steps: int) -> Problem:
    return Problem.build(target="z**2", activation="gelu", eta=ETA, steps=steps, q0=1.0,
                         hold_zero=(0,))


def run_sim() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    for d, trials in SIM_DS.items():
        f = CACHE / f"sim_d{d}.npz"
        if f.exists():
            continue
        t0 = time.perf_counter()
        s = simulate(problem(T_SIM), d=d, delta=DELTA, seed=SIM_SEED, trials=trials,
                     record_every=10)
        np.savez(f, steps=s.steps, gram=s.gram[:, :, 0, 0], train=s.train_loss,
                 seconds=time.perf_counter() - t0)
        print(f"sim d={d}: {time.perf_counter() - t0:.0f} s", flush=True)


# (method, steps, n_paths, seeds): pathwise vs Stein on the same paths, Stein at long times
DMFT_RUNS = [
    ("pathwise", 100, 40_000, (11, 12, 13, 14)),
    ("stein", 100, 40_000, (11, 12, 13, 14)),
    ("stein", 400, 100_000, (1, 2, 3)),
    ("stein", 600, 20_000, (1, 2, 3, 4)),
    ("stein", 400, 40_000, (1, 2, 3)),
]


def run_dmft() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    for method, T, N, seeds in DMFT_RUNS:
        for seed in seeds:
            f = CACHE / f"dmft_{method}_T{T}_N{N}_s{seed}.npz"
            if f.exists():
                continue
            t0 = time.perf_counter()
            r = solve_dmft(problem(T), DELTA, n_paths=N, seed=seed, method=method, errors="batch")
            np.savez(f, gram=r.gram[:, 0, 0], Q=r.Q[:, :, 0, 0], Gamma=r.Gamma[:, :, 0, 0],
                     R=r.R[:, :, 0, 0], Cg=r.Cg[:, :, 0, 0], Q_err=r.Q_err[:, 0, 0],
                     train=r.train_loss, seconds=time.perf_counter() - t0)
            print(f"dmft {method} T={T} N={N} seed={seed}: {time.perf_counter() - t0:.0f} s",
                  flush=True)


TIMES = (10, 20, 50, 100, 200, 300, 400, 600)


def _mean_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    se = a.std(axis=0, ddof=1) / math.sqrt(a.shape[0]) if a.shape[0] > 1 else np.full(a.shape[1:], np.nan)
    return a.mean(axis=0), se


def _fmt(m: float, e: float) -> str:
    return "—" if not np.isfinite(m) else f"{m:.3f} ± {e:.3f}"


def _wfit(x: np.ndarray, y: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares y = c0 + c1 x; returns (c, covariance)."""
    A = np.stack([np.ones_like(x), x], axis=1) / e[:, None]
    cov = np.linalg.inv(A.T @ A)
    return cov @ (A.T @ (y / e)), cov


def report() -> None:
    data: dict = {"case": {"target": "z**2", "activation": "gelu", "hold_zero": [0], "delta": DELTA,
                           "eta": ETA, "q0": 1.0}, "sim": {}, "dmft": {}}
    lines = ["# DMFT at long times: Stein vs pathwise vs finite-d GD", "",
             f"GeLU neuron, y = z², hold_zero = [0], δ = {DELTA}, η = {ETA}, q0 = 1, square loss.",
             "Entries: ‖w_t‖² = M_t² + Q(t,t); ± is the standard error over independent trials "
             "(simulator) or seeds (DMFT), never the solver's batch error.", ""]
    # ---------------------------------------------------------------- simulator
    sim = {}
    for d in SIM_DS:
        f = CACHE / f"sim_d{d}.npz"
        if f.exists():
            z = np.load(f)
            sim[d] = (z["steps"], z["gram"])
    head = "| t | " + " | ".join(f"sim d={d} (n={sim[d][1].shape[0]})" for d in sim)
    # ---------------------------------------------------------------- DMFT
    runs = {}
    for method, T, N, seeds in DMFT_RUNS:
        got = [np.load(CACHE / f"dmft_{method}_T{T}_N{N}_s{s}.npz") for s in seeds
               if (CACHE / f"dmft_{method}_T{T}_N{N}_s{s}.npz").exists()]
        if got:
            runs[(method, T, N)] = got
    head += "".join(f" | {m} N={N} T={T} (seeds {len(g)})" for (m, T, N), g in runs.items()) + " |"
    lines += ["## ‖w_t‖²", "", head, "|" + "---|" * (1 + len(sim) + len(runs))]
    for t in TIMES:
        row = [str(t)]
        for d, (steps, g) in sim.items():
            j = np.flatnonzero(steps == t)
            if j.size:
                m, e = _mean_se(g[:, j[0]])
                row.append(_fmt(float(m), float(e)))
                data["sim"].setdefault(str(d), {})[t] = [float(m), float(e), float(g[:, j[0]].std(ddof=1))]
            else:
                row.append("—")
        for (meth, T, N), got in runs.items():
            if t <= T:
                a = np.array([z["gram"][t] for z in got])
                m, e = _mean_se(a)
                row.append(_fmt(float(m), float(e)))
                data["dmft"].setdefault(f"{meth}_N{N}_T{T}", {})[t] = [float(v) for v in a]
            else:
                row.append("—")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Trial-to-trial standard deviation of the simulator's ‖w_t‖² (one run):", "",
              "| t | " + " | ".join(f"d={d}" for d in sim) + " |", "|" + "---|" * (1 + len(sim))]
    for t in TIMES:
        row = [str(t)]
        for steps, g in sim.values():
            j = np.flatnonzero(steps == t)
            row.append(f"{g[:, j[0]].std(ddof=1):.3f}" if j.size else "—")
        lines.append("| " + " | ".join(row) + " |")
    # ---------------------------------------------------------------- extrapolations
    lines += ["", "## Extrapolations (weighted linear fits; ± from the fit)", "",
              "Stein DMFT mean over seeds vs 1/N (all Stein runs reaching t) and GD mean over "
              "trials vs 1/d; the shift columns are the fitted excess at N = 1e4 paths and at "
              "d = 1000.", "",
              "| t | Stein N→∞ | Stein shift at N=1e4 | GD d→∞ (1/d fit) | GD shift at d=1000 |",
              "|---|---|---|---|---|"]
    data["extrapolation"] = {}
    for t in (100, 200, 300, 400):
        xs, ys, es = [], [], []
        for (meth, T, N), got in runs.items():
            if meth == "stein" and t <= T and len(got) > 1:
                a = np.array([z["gram"][t] for z in got])
                xs.append(1.0 / N)
                ys.append(a.mean())
                es.append(a.std(ddof=1) / math.sqrt(a.size))
        xd, yd, ed = [], [], []
        for d, (steps, g) in sim.items():
            j = np.flatnonzero(steps == t)
            if j.size:
                xd.append(1.0 / d)
                yd.append(g[:, j[0]].mean())
                ed.append(g[:, j[0]].std(ddof=1) / math.sqrt(g.shape[0]))
        row = [str(t)]
        for x, yv, e, scale in ((xs, ys, es, 1e-4), (xd, yd, ed, 1e-3)):
            if len(x) >= 2:
                (c0, c1), cov = _wfit(np.array(x), np.array(yv), np.array(e))
                row += [f"{c0:.3f} ± {math.sqrt(cov[0, 0]):.3f}",
                        f"{c1 * scale:.2f} ± {math.sqrt(cov[1, 1]) * scale:.2f}"]
                data["extrapolation"].setdefault(str(t), []).append(
                    [float(c0), float(math.sqrt(cov[0, 0]))])
            else:
                row += ["—", "—"]
        lines.append("| " + " | ".join(row) + " |")
    # ---------------------------------------------------------------- same-seed kernels
    pw, st = runs.get(("pathwise", 100, 40_000), []), runs.get(("stein", 100, 40_000), [])
    n = min(len(pw), len(st))
    if n:
        lines += ["", "## Kernels, same paths (N = 40000, seeds as above): pathwise vs Stein", "",
                  "Raw entries Γ(t,t), R(t,t−1) depend on the gauge Γ → Γ + Δ with ΔQ = 0 that "
                  "Stein fixes by zeroing the dropped innovations; E[g^t Ξ^t] = Σ_s Γ(t,s)Q(s,t) "
                  "and (R C_g)(t,t−1) = Σ_a R(t,a+1) C_g(a,t−1) are invariant.", "",
                  "| t | quantity | pathwise | Stein |", "|---|---|---|---|"]
        kern: dict = {}
        for t in (5, 10, 20, 40, 80):
            q = {}
            for name, rs in (("pathwise", pw[:n]), ("stein", st[:n])):
                gq = np.array([z["Gamma"][t, : t + 1] @ z["Q"][: t + 1, t] for z in rs])
                rc = np.array([z["R"][t, 1: t + 1] @ z["Cg"][:t, t - 1] for z in rs])
                q[name] = {"Gamma(t,t)": np.array([z["Gamma"][t, t] for z in rs]),
                           "R(t,t-1)": np.array([z["R"][t, t - 1] for z in rs]),
                           "E[g Xi](t,t)": gq, "(R Cg)(t,t-1)": rc,
                           "Q(t,t)": np.array([z["Q"][t, t] for z in rs])}
            for key in q["stein"]:
                a, b = _mean_se(q["pathwise"][key]), _mean_se(q["stein"][key])
                lines.append(f"| {t} | {key} | {_fmt(*map(float, a))} | {_fmt(*map(float, b))} |")
                kern.setdefault(str(t), {})[key] = {"pathwise": q["pathwise"][key].tolist(),
                                                    "stein": q["stein"][key].tolist()}
        data["kernels_same_seed"] = kern
    lines += ["", "## Findings", "",
              "* The ~5 % gap reported at t = 100–600 (Stein, 2e4 paths, one seed, vs GD at "
              "d = 1000, 2 trials) is not a Stein bias. It is the sum of (i) the trial-to-trial "
              "spread of GD at d = 1000 (one-trial s.d. ≈ 0.4 on ‖w‖² ≈ 6), (ii) GD's finite-d "
              "excess (d = 1000 sits above d = 4000 by ≈ 0.2 at t ≥ 200), and (iii) the Stein "
              "finite-N bias and seed spread at 2e4 paths (mean over 4 seeds ≈ +0.4 above the "
              "1e5-path value, one-seed s.d. ≈ 0.2; batch errors report ≈ 0.02).",
              "* Extrapolated to N → ∞ and d → ∞ the two agree within their errors at every t "
              "in the table above.",
              "* Pathwise is the noisier method at long times (heavy-tailed D·J), not a better "
              "reference for Q beyond t ≈ 30 at affordable N; it is the reference for the "
              "individual kernel entries, which Stein does not give (gauge). The gauge-invariant "
              "combinations agree up to t ≈ 40; at t = 80 they part together with Q, where the "
              "pathwise Q is itself ≈ 7 % below GD."]
    secs = {f"{m}_T{T}_N{N}": [float(z["seconds"]) for z in g] for (m, T, N), g in runs.items()}
    data["seconds"] = secs
    lines += ["", "Run times (s, on a shared 2-core machine): " + json.dumps(
        {k: round(float(np.mean(v)), 1) for k, v in secs.items()})]
    (OUT / "dmft_long_time.md").write_text("\n".join(lines) + "\n")
    (OUT / "dmft_long_time.json").write_text(json.dumps(data, indent=1))
    print("\n".join(lines))
    _plot(sim, runs)


def _plot(sim: dict, runs: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(16, 4.6))
    colors = {1000: "tab:gray", 2000: "tab:olive", 4000: "tab:brown"}
    for d, (steps, g) in sim.items():
        m, e = _mean_se(g)
        ax[0].fill_between(steps, m - 2 * e, m + 2 * e, color=colors.get(d, "k"), alpha=0.3,
                           label=f"GD d={d} (±2 SE, {g.shape[0]} trials)")
    styles = {"pathwise": "tab:red", "stein": "tab:blue"}
    for (meth, T, N), got in runs.items():
        for i, z in enumerate(got):
            ax[0].plot(z["gram"], color="navy" if N >= 100_000 else styles[meth], lw=0.8, alpha=0.7,
                       ls="-" if N >= 40_000 else ":",
                       label=f"DMFT {meth} N={N} T={T}" if i == 0 else None)
    ax[0].set(xlabel="GD step t", ylabel="‖w_t‖²", title="‖w_t‖²: DMFT seeds against GD")
    ax[0].legend(fontsize=7)
    pw, st = runs.get(("pathwise", 100, 40_000), []), runs.get(("stein", 100, 40_000), [])
    for name, rs, c in (("pathwise", pw, "tab:red"), ("stein", st, "tab:blue")):
        for i, z in enumerate(rs):
            t = np.arange(1, z["R"].shape[0])
            ax[1].plot(t, z["R"][t, t - 1], color=c, lw=0.8, label=f"R(t,t−1) {name}" if i == 0 else None)
            ax[1].plot(t, z["Gamma"][t, t], color=c, lw=0.8, ls="--",
                       label=f"Γ(t,t) {name}" if i == 0 else None)
            gq = [z["Gamma"][s, : s + 1] @ z["Q"][: s + 1, s] for s in t]
            ax[2].plot(t, gq, color=c, lw=0.8, label=f"E[g^t Ξ^t] {name}" if i == 0 else None)
            rc = [z["R"][s, 1: s + 1] @ z["Cg"][:s, s - 1] for s in t]
            ax[2].plot(t, rc, color=c, lw=0.8, ls="--",
                       label=f"(R C_g)(t,t−1) {name}" if i == 0 else None)
    ax[1].set(xlabel="GD step t", ylabel="kernel entry",
              title="Gauge-dependent kernel entries (N = 40000 paths)")
    ax[1].legend(fontsize=7)
    ax[2].set(xlabel="GD step t", ylabel="value",
              title="Gauge-invariant combinations (N = 40000 paths)")
    ax[2].legend(fontsize=7)
    fig.suptitle(f"DMFT at long times: GeLU neuron, y = z², δ = {DELTA}, η = {ETA}, "
                 "hard direction held at zero", fontsize=10)
    fig.tight_layout()
    fig.savefig(OUT / "dmft_long_time.png", dpi=110)


if __name__ == "__main__":
    stages = sys.argv[1:] or ["sim", "dmft", "report"]
    if "sim" in stages:
        run_sim()
    if "dmft" in stages:
        run_dmft()
    if "report" in stages:
        report()
