r"""Figure 1's other curves: GD from the optimal spectral initialisation beside the random one.

Spectral estimator
------------------
``v̂`` = top eigenvector of ``D_n = (1/n) Σ_i T(y_i) x_i x_iᵀ`` (formed densely and
``eigh`` for d ≤ 3000; Lanczos on ``v ↦ Xᵀ(T(y) ∘ Xv)/n`` above), scaled to the norm of the random start
of the same trial, ``W⁰ = v̂ ‖W⁰_random‖`` (so both starts have ``‖w‖² ≈ q0``).

Preprocessing (``--preprocessing``), with ``h(y) = E[z² | y] − 1``:

* ``lal`` (default): ``T*(y) = h/(1 + h) = 1 − 1/E[z²|y]``, the preprocessing of Luo,
  Alghamdi & Lu, "Optimal spectral initialization for signal recovery with applications to
  phase retrieval" (IEEE TSP 67, 2019), which maximises the limiting overlap at **every** δ.
  Derivation (``/work/shared/notes/literature.md`` §1.2–1.3, from Lu & Li, arXiv:1702.06435):
  with ``Z = T(Y)`` and ``f = Z/(λ* − Z)`` the overlap is
  ``ρ² = (1/δ − E f²)/(1/δ + E[f² h])`` under the constraint ``E[f h] = 1/δ``; stationarity
  in ``f`` gives ``f = κ h/(1 + ρ² h)`` and the constraints force ``κ = 1 − ρ²``, hence
  ``T = f/(1 + f) ∝ h/(1 + h)``, independent of δ.
* ``mm``: ``T_δ(y) = h/(h + √δ)``, i.e. ``(E[z²|y] − 1)/(E[z²|y] + √δ − 1)``, Mondelli &
  Montanari, "Fundamental limits of weak recovery with applications to phase retrieval"
  (arXiv:1708.05932), as implemented in PhasePack's ``initOptimalSpectral.m``; it reaches the
  weak-recovery threshold but not the largest overlap above it. The closed form below is
  for ``lal`` only.

For ``y = z²`` ``E[z²|y] = y``; for ``y = z² − 1`` ``E[z²|y] = y + 1``: both labels generate
the same σ-algebra, so ``h`` and everything below are the same for the two.

Closed-form overlap of ``T*`` (derived here)
-------------------------------------------
With ``f = (1 − r) h/(1 + r h)`` (``r = ρ²``) the constraint ``E[f h] = 1/δ`` reads
``(1 − r) E[h²/(1 + r h)] = 1/δ``. For ``h = z² − 1`` put ``v = 1 − r + r z²`` (so ``E v = 1``
and ``r h = v − 1``): ``E[h²/(1 + r h)] = (E[1/v] − 1)/r²`` and, with ``a = r/(1 − r)``,
``E[1/v] = (1 − r)^{-1} √(π/(2a)) erfcx(1/√(2a))`` (``E[1/(1 + a z²)] = √(π/2a) e^{1/2a}
erfc(1/√(2a))``). So ``ρ²(δ)`` is the root in ``(0, 1)`` of

    F(r) = (1 − r)(E[1/v] − 1)/r² = 1/δ,

``F`` decreasing from ``F(0⁺) = E[h²] = 2`` to ``F(1) = 0``: a root exists iff ``δ > 1/2 =
δ_alg`` (weak recovery, ``docs/theory.md``), and ``ρ² = 0`` below. It reproduces the
literature note's table (ρ² = 0.0206, 0.1112, 0.2307, 0.6389, 0.9245, 0.9917 at δ = 0.55,
0.75, 1, 2, 4, 10). The script checks it against the simulator's spectral estimator
(``overlap_check`` in the JSON: mean ± s.e. of ``|⟨v̂, θ*⟩|`` over the GD trials at every δ;
and ``overlap_check_spectral_only``: the estimator alone at d = 1000, 10 trials per δ).
Measured (``validation/results/figures/cache/spectral_init/``, seed 0): at δ = 0.55, 0.75, 1,
1.5, 2, 3, 4, 6 the d = 1000 overlap is 0.179 ± 0.026, 0.350 ± 0.029, 0.401 ± 0.052,
0.675 ± 0.009, 0.806 ± 0.005, 0.917 ± 0.001, 0.961 ± 0.001, 0.9861 ± 0.0003 against the closed
form 0.144, 0.334, 0.480, 0.676, 0.799, 0.920, 0.962, 0.9862 (all within 1.6 s.e.; 2–5 s per δ).

Theory for the spectral start
-----------------------------
A warm-start DMFT (``d → ∞``, :func:`dmftsolve.solve_dmft`) from ``M0 = ρ √q0``,
``Q0 = q0 (1 − ρ²)`` (``Problem.build(M0=..., Q0=...)``), ``--theory-steps`` steps (default
1000, GD's own number of steps; the figure was first drawn with 200, docs/figures.md §2),
``--theory-paths`` paths; its final cosine, and success iff above 1/2. Caveat: the DMFT
warm start takes the orthogonal part of ``W⁰`` independent of the data, while the spectral
vector's orthogonal part is a function of ``X``; the figure shows how far that matters.
Below ``δ_alg`` the warm start is ``M0 = 0`` and the theory's cosine is 0 (no run).

Simulator
---------
Trial ``i`` at ``(d, δ)`` uses the data and random start of trial ``i`` of
``dmftsolve.sweep(problem, d, [δ], seed=SeedSequence([seed, d, round(1000 δ)]))`` — the runs
of ``success_curves.py`` with the same seed — obtained with the public
:func:`dmftsolve.simulation.trials.replay_trial`; both starts are then stepped together with
:func:`dmftsolve.simulation.kernels.gd_step_batch` (one GEMM per block of ``X``), so the
random-start column is the library's trajectory and the spectral column differs only by
``W⁰``. The simulator itself is not changed. Each ``(d, δ)`` point's trials go through the
executor (``--workers``/``--dask``) and the point is cached.

Run
---
Full size (not run with this default δ list; the run that made the figure is below)::

    python -m validation.figures.spectral_init --trials 20 --workers 2

(defaults: GeLU, η = 0.5, 1000 GD steps, on ``z² − 1`` and on ``z²`` (``--cases``; the r²
cases use η = 0.1, 2000 steps), d = 1000 and 2000, δ = 1, 2, …, 8, 20 trials per point,
cosine recorded every 10 steps, seed 0, preprocessing ``lal``.) Cost (one worker, the other
core busy): a trial (both starts stepped together, 1000 steps, plus the
spectral vector) takes about 1 s per unit of δ at d = 1000 (0.7 s at δ = 0.75, 9.2 s at
δ = 9), so 20 trials at δ = 1, …, 8 cost ≈ 12 min per case at d = 1000 and ≈ 4× that at
d = 2000: the full default ≈ 2 CPU-hours. The theory, one warm-start DMFT of 1000 steps with 2·10⁴ paths per
δ, takes about 1 min (57–58 s measured with both other cores busy; 200 steps took 2 s). Run so far::

    python -m validation.figures.spectral_init --cases gelu_z2m1,gelu_z2 --ds 1000,2000 \
        --deltas 0.75,1,1.5,2,2.5,3,4,5,7,9 --trials 20 --workers 1

(d = 1000: 30 min; d = 2000: 104 min on one core with the other busy.)

``--quick`` (the test): d = 60, one case, 3 δ, 2 trials.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import erfcx

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

NAME = "spectral_init"
SUCCESS = 0.5
DELTA_ALG = 0.5

#: name -> problem keywords and E[z²|y] as a function of the label
CASES: dict[str, dict[str, Any]] = {
    "gelu_z2m1": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "steps": 1000, "shift": 1.0},
    "gelu_z2": {"target": "z**2", "activation": "gelu", "eta": 0.5, "steps": 1000, "shift": 0.0},
    "quad_z2m1": {"target": "z**2 - 1", "activation": "quad", "eta": 0.1, "steps": 2000, "shift": 1.0},
    "quad_z2": {"target": "z**2", "activation": "quad", "eta": 0.1, "steps": 2000, "shift": 0.0},
}
FULL = {"ds": [1000, 2000], "trials": 20, "deltas": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        "cases": ["gelu_z2m1", "gelu_z2"], "theory_steps": 1000, "theory_paths": 20_000,
        "record_every": 10, "check_d": 1000, "check_trials": 10,
        "check_deltas": [0.55, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]}
QUICK = {"ds": [60], "trials": 2, "deltas": [0.4, 2.0, 6.0], "cases": ["gelu_z2m1"],
         "theory_steps": 10, "theory_paths": 1000, "record_every": 5, "steps": 30,
         "check_d": 60, "check_trials": 3, "check_deltas": [1.0, 4.0]}


# --------------------------------------------------------------------------- theory of T*
def _F(r: float) -> float:
    """``(1 − r) E[h²/(1 + r h)]`` for ``h = z² − 1`` (closed form, module docstring)."""
    a = r / (1.0 - r)
    e_inv_v = math.sqrt(math.pi / (2.0 * a)) * erfcx(1.0 / math.sqrt(2.0 * a)) / (1.0 - r)
    return (1.0 - r) * (e_inv_v - 1.0) / (r * r)


def spectral_overlap2(delta: float) -> float:
    """Limiting squared overlap ``ρ²(δ)`` of the ``T*`` spectral estimator for ``y = z²`` (or
    ``z² − 1``): the root of ``F(r) = 1/δ`` (module docstring); 0 for ``δ ≤ 1/2``."""
    if not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a positive finite number, got {delta!r}")
    if delta <= DELTA_ALG:
        return 0.0
    lo = 1e-4
    target = 1.0 / delta
    if target >= _F(lo):  # within 1e-4 of δ_alg: F is linear there, F(r) ≈ 2 − (2 − F(lo)) r/lo
        return max(0.0, (2.0 - target) / (2.0 - _F(lo)) * lo)
    return float(brentq(lambda r: _F(r) - target, lo, 1.0 - 1e-12, xtol=1e-14))


def preprocess(y: np.ndarray, shift: float, kind: str, delta: float) -> np.ndarray:
    """``T(y)`` with ``E[z²|y] = y + shift`` (``shift`` 0 for ``z²``, 1 for ``z² − 1``)."""
    ez2 = np.maximum(np.asarray(y, float) + shift, 1e-300)
    h = ez2 - 1.0
    if kind == "lal":
        return 1.0 - 1.0 / ez2
    if kind == "mm":
        return h / (h + math.sqrt(delta))
    raise ValueError(f"preprocessing must be 'lal' or 'mm', got {kind!r}")


# --------------------------------------------------------------------------- simulator
def spectral_vector(X: np.ndarray, y: np.ndarray, shift: float, kind: str, delta: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Unit top eigenvector of ``(1/n) Σ T(y_i) x_i x_iᵀ`` and its eigenvalue, with the
    preprocessing ``kind`` (:func:`preprocess`): the library's estimator,
    :func:`dmftsolve.finite_d.spectral.spectral_vector` (dense up to ``DENSE_LIMIT``, Lanczos above;
    ``T*`` is unbounded below, so near δ_alg Lanczos for the largest eigenvalue converges slowly and
    the dense route takes seconds there)."""
    from dmftsolve.finite_d.spectral import spectral_vector as estimator

    return estimator(X, preprocess(y, shift, kind, delta), rng)


def overlap_trial(problem: Problem, d: int, delta: float, seed: list[int], i: int, shift: float,
                  kind: str) -> float:
    """``|⟨v̂, θ*⟩|`` of the spectral estimator on the data of trial ``i`` (no GD)."""
    from threadpoolctl import threadpool_limits

    from dmftsolve.seeds import child
    from dmftsolve.simulation.trials import replay_trial

    with threadpool_limits(1):
        X, y, _, _ = replay_trial(problem, d, delta, child(np.random.SeedSequence(seed), 0), i,
                                  dtype=np.float32)
        v, _ = spectral_vector(X, y, shift, kind, delta, np.random.default_rng([*seed, i, 99]))
    return float(abs(v[0]))


def spectral_trial(problem: Problem, d: int, delta: float, seed: list[int], i: int, shift: float,
                   kind: str, record_every: int) -> dict[str, Any]:
    """Trial ``i``: spectral vector, then GD from the random and the spectral start together."""
    from threadpoolctl import threadpool_limits

    from dmftsolve.seeds import child
    from dmftsolve.simulation.kernels import gd_step_batch, make_grad_rows
    from dmftsolve.simulation.trials import replay_trial

    t0 = time.perf_counter()
    with threadpool_limits(1):
        X, y, W0, _ = replay_trial(problem, d, delta, child(np.random.SeedSequence(seed), 0), i,
                                   dtype=np.float32)
        v, top = spectral_vector(X, y, shift, kind, delta, np.random.default_rng([*seed, i, 99]))
        vals = [top]
        overlap = float(abs(v[0]))
        t_spec = time.perf_counter() - t0
        W = np.concatenate([W0, v[:, None] * np.linalg.norm(W0)], axis=1)
        rows = make_grad_rows(problem, y, trials=2)
        T = problem.training.steps
        steps, cos = [], []
        with np.errstate(all="ignore"):
            for t in range(T + 1):
                if t % record_every == 0 or t == T:
                    norms = np.linalg.norm(W, axis=0)
                    steps.append(t)
                    cos.append(np.where(norms > 0, np.abs(W[0]) / np.maximum(norms, 1e-300), np.nan))
                if t == T:
                    break
                W = gd_step_batch(problem, X, y, W, rows=rows).W
    cos_a = np.array(cos)  # (R, 2)
    out: dict[str, Any] = {"overlap_spectral": overlap, "top_eigenvalue": float(vals[0]),
                           "seconds_spectral": t_spec, "seconds": time.perf_counter() - t0}
    for j, name in enumerate(("random", "spectral")):
        c = cos_a[:, j]
        above = np.flatnonzero(np.isfinite(c) & (c > SUCCESS))
        out[name] = {"initial_cosine": float(c[0]), "final_cosine": float(c[-1]),
                     "escape_step": int(steps[above[0]]) if above.size else None}
    return out


def run_point(case: dict[str, Any], steps: int, d: int, delta: float, trials: int, seed: int,
              kind: str, record_every: int, executor: Any) -> dict[str, Any]:
    p = Problem.build(target=case["target"], activation=case["activation"], eta=case["eta"], steps=steps)
    root = [seed, d, int(round(1000 * delta))]
    args = [(p, d, delta, root, i, case["shift"], kind, record_every) for i in range(trials)]
    if executor is None:
        res = [spectral_trial(*a) for a in args]
    else:
        res = [f.result() for f in [executor.submit(spectral_trial, *a) for a in args]]
    summary: dict[str, Any] = {"trials": trials, "runs": res}
    ov = np.array([r["overlap_spectral"] for r in res])
    summary["overlap_mean"] = float(ov.mean())
    summary["overlap_se"] = float(ov.std(ddof=1) / math.sqrt(ov.size)) if ov.size > 1 else None
    for name in ("random", "spectral"):
        fc = np.array([r[name]["final_cosine"] for r in res])
        ok = np.isfinite(fc) & (fc > SUCCESS)
        pr = float(ok.mean())
        summary[name] = {"successes": int(ok.sum()), "rate": pr, "rate_se": math.sqrt(pr * (1 - pr) / trials),
                         "cos_median": float(np.nanmedian(fc)),
                         "cos_q30": float(np.nanpercentile(fc, 30)),
                         "cos_q70": float(np.nanpercentile(fc, 70))}
    return summary


def overlap_check_point(case: dict[str, Any], d: int, delta: float, trials: int, seed: int,
                        kind: str, executor: Any) -> dict[str, Any]:
    """Spectral estimator only (no GD) at ``(d, δ)``: its overlaps against the closed form."""
    p = Problem.build(target=case["target"], activation=case["activation"], eta=case["eta"], steps=1)
    root = [seed, d, int(round(1000 * delta))]
    args = [(p, d, delta, root, i, case["shift"], kind) for i in range(trials)]
    if executor is None:
        ov = np.array([overlap_trial(*a) for a in args])
    else:
        ov = np.array([f.result() for f in [executor.submit(overlap_trial, *a) for a in args]])
    rho = math.sqrt(spectral_overlap2(delta))
    se = float(ov.std(ddof=1) / math.sqrt(ov.size)) if ov.size > 1 else None
    return {"d": d, "delta": delta, "trials": trials, "overlaps": ov.tolist(), "mean": float(ov.mean()),
            "se": se, "closed_form": rho, "z": None if not se else (float(ov.mean()) - rho) / se}


# --------------------------------------------------------------------------- theory
def theory_point(case: dict[str, Any], delta: float, steps: int, n_paths: int, seed: int) -> dict[str, Any]:
    """Warm-start DMFT from the spectral overlap ``ρ(δ)`` (``d → ∞``)."""
    rho2 = spectral_overlap2(delta)
    out: dict[str, Any] = {"rho2": rho2, "rho": math.sqrt(rho2), "steps": steps, "n_paths": n_paths}
    if rho2 == 0.0:
        out.update(final_cosine=0.0, success=False, note="δ ≤ δ_alg: ρ = 0, the start is M0 = 0")
        return out
    from dmftsolve import solve_dmft

    q0 = 1.0
    p = Problem.build(target=case["target"], activation=case["activation"], eta=case["eta"], steps=steps,
                      M0=[[math.sqrt(q0 * rho2)]], Q0=[[q0 * (1.0 - rho2)]])
    t0 = time.perf_counter()
    try:
        r = solve_dmft(p, delta, n_paths=n_paths, seed=seed, errors="batch", throw=False, test_loss="none")
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    c = np.asarray(r.cosine, float)
    out.update(final_cosine=float(c[-1]), success=bool(c[-1] > SUCCESS), status=r.status.value,
               cosine_every10=c[::10].tolist(), elapsed=time.perf_counter() - t0)
    return out


# --------------------------------------------------------------------------- plot
def plot(data: dict[str, Any], settings: dict[str, Any]) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(data["cases"])
    n = len(names)
    fig, axes = plt.subplots(3, n, figsize=(7.6 * n, 9.6), squeeze=False, sharex="col")
    # each column: its axes, then their legends to the right (off the data)
    fig.subplots_adjust(left=0.08 / n, right=1 - 0.36 / n, wspace=0.75, top=0.9, hspace=0.25)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for c, name in enumerate(names):
        entry, case = data["cases"][name], CASES[name]
        a1, a2, a3 = axes[:, c]
        for i, (d, pts) in enumerate(sorted(entry["sim"].items(), key=lambda kv: int(kv[0]))):
            col = colors[i % len(colors)]
            x = np.array([q["delta"] for q in pts])
            for start, ls, mk in (("random", ":", "s"), ("spectral", "-", "o")):
                r = np.array([q[start]["rate"] for q in pts], float)
                e = np.array([q[start]["rate_se"] for q in pts], float)
                a1.errorbar(x, r, yerr=np.vstack([np.minimum(e, r), np.minimum(e, 1 - r)]),
                            ls=ls, marker=mk, ms=4, capsize=2, color=col, label=f"GD {start}, d={d}")
                a2.plot(x, [q[start]["cos_median"] for q in pts], ls=ls, marker=mk, ms=4, color=col,
                        label=f"{start}, d={d}")
                a2.fill_between(x, [q[start]["cos_q30"] for q in pts], [q[start]["cos_q70"] for q in pts],
                                color=col, alpha=0.12)
            a3.errorbar(x, [q["overlap_mean"] for q in pts], yerr=[q["overlap_se"] or 0 for q in pts],
                        marker="o", ms=4, ls="none", capsize=2, color=col, label=f"spectral v̂, d={d}")
        th = entry.get("theory") or []
        if th:
            xt = [q["delta"] for q in th]
            a2.plot(xt, [q.get("final_cosine", np.nan) for q in th], "k--", lw=1.2,
                    label=f"DMFT from spectral ρ (T={th[0]['steps']})")
            a1.plot(xt, [1.0 if q.get("success") else 0.0 for q in th], "k--", lw=1.2,
                    label="DMFT (d=∞) from spectral ρ")
        chk = data.get("overlap_check_spectral_only") or []
        if chk:
            a3.errorbar([q["delta"] for q in chk], [q["mean"] for q in chk], yerr=[q["se"] or 0 for q in chk],
                        marker="x", ls="none", color="k", capsize=2,
                        label=f"v̂ only, d={chk[0]['d']} ({chk[0]['trials']} trials)")
        xs = np.linspace(0.05, max(max(entry["deltas"]), 1.0) * 1.05, 300)
        a3.plot(xs, [math.sqrt(spectral_overlap2(float(v))) for v in xs], "k-", lw=1.2,
                label="closed form ρ(δ)" if settings["preprocessing"] == "lal" else "ρ(δ) of T* (lal)")
        for ax in (a1, a2, a3):
            ax.axvline(DELTA_ALG, color="0.5", ls=":", lw=1)
        act = {"gelu": "GeLU", "quad": "r²"}.get(case["activation"], case["activation"])
        target = case["target"].replace("**2", "²").replace(" - ", " − ")
        pre = "optimal (Luo–Alghamdi–Lu)" if settings["preprocessing"] == "lal" else settings["preprocessing"]
        a1.set_title(f"{act} neuron, y = {target}, η = {case['eta']:g}, {entry['steps']} GD steps\n"
                     f"{settings['trials']} trials per point; spectral start with {pre} preprocessing",
                     fontsize=9)
        a1.set_ylabel("P(final cosine > 1/2)")
        a2.set_ylabel("final cosine (median, 30–70 %)")
        a3.set_ylabel("|⟨v̂, θ*⟩| of the spectral start")
        a3.set_xlabel("δ = n/d   (dotted: δ_alg = 1/2)")
        for ax in (a1, a2, a3):
            ax.set_ylim(-0.03, 1.03)
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.suptitle("GD from a spectral start (optimal preprocessing) against GD from a random start",
                 fontsize=10)
    return fig


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__spec__, __doc__.split("\n\n")[0])
    p.add_argument("--cases", default=None, help=f"comma-separated subset of {', '.join(CASES)}")
    p.add_argument("--preprocessing", choices=("lal", "mm"), default="lal",
                   help="T*(y) = 1 − 1/E[z²|y] (lal, default) or (E[z²|y] − 1)/(E[z²|y] + √δ − 1) (mm)")
    p.add_argument("--theory-steps", type=int, default=None)
    p.add_argument("--theory-paths", type=int, default=None)
    p.add_argument("--no-theory", action="store_true")
    p.add_argument("--check-d", type=int, default=None,
                   help="d of the spectral-estimator-only overlap check (default 1000)")
    p.add_argument("--check-trials", type=int, default=None, help="trials per δ of that check")
    args = p.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    names = args.cases.split(",") if args.cases else cfg["cases"]
    bad = [n for n in names if n not in CASES]
    if bad:
        p.error(f"unknown case(s) {bad}; choose from {list(CASES)}")
    ds, trials = args.ds or cfg["ds"], args.trials or cfg["trials"]
    deltas = args.deltas or cfg["deltas"]
    th_steps = args.theory_steps or cfg["theory_steps"]
    th_paths = args.theory_paths or cfg["theory_paths"]
    settings = {"figure": NAME, "cases": names, "ds": ds, "trials": trials, "deltas": deltas,
                "seed": args.seed, "preprocessing": args.preprocessing, "dtype": "float32",
                "record_every": cfg["record_every"], "success": "final cosine > 1/2",
                "spectral_scale": "‖W0‖ of the random start of the same trial",
                "theory": None if args.no_theory else {"steps": th_steps, "n_paths": th_paths},
                "overlap_check": {"d": args.check_d or cfg["check_d"],
                                  "trials": args.check_trials or cfg["check_trials"],
                                  "deltas": cfg["check_deltas"]},
                "quick": bool(args.quick)}
    cache = PointCache(args.out, NAME, replot=args.replot)
    data: dict[str, Any] = {"cases": {}}
    t0 = time.perf_counter()
    try:
        with make_executor(args.workers, args.dask) as ex:
            for name in names:
                case = CASES[name]
                steps = cfg.get("steps", case["steps"])
                entry: dict[str, Any] = {"steps": steps, "deltas": deltas, "sim": {}, "theory": []}
                for d in ds:
                    pts = []
                    for x in deltas:
                        key = {"kind": "spectral_gd", "target": case["target"],
                               "activation": case["activation"], "eta": case["eta"], "steps": steps,
                               "d": d, "delta": x, "trials": trials,
                               "seed": args.seed, "preprocessing": args.preprocessing,
                               "record_every": cfg["record_every"]}
                        val = cache.get_or_compute(key, run_point, case, steps, d, x, trials, args.seed,
                                                   args.preprocessing, cfg["record_every"], ex)
                        pts.append({"delta": x, **val})
                        print(f"[{name} d={d} δ={x:g}] spectral overlap {val['overlap_mean']:.3f} "
                              f"(theory {math.sqrt(spectral_overlap2(x)):.3f}); success random "
                              f"{val['random']['successes']}/{trials}, "
                              f"spectral {val['spectral']['successes']}/{trials}",
                              file=sys.stderr, flush=True)
                    entry["sim"][str(d)] = pts
                if not args.no_theory:
                    for x in deltas:
                        key = {"kind": "spectral_dmft", "target": case["target"],
                               "activation": case["activation"], "eta": case["eta"],
                               "steps": min(th_steps, steps), "delta": x,
                               "n_paths": th_paths, "seed": args.seed}
                        th = cache.get_or_compute(key, theory_point, case, x, min(th_steps, steps), th_paths,
                                                  args.seed)
                        entry["theory"].append({"delta": x, **th})
                data["cases"][name] = entry
            oc = settings["overlap_check"]
            case0 = CASES[names[0]]
            data["overlap_check_spectral_only"] = [
                cache.get_or_compute({"kind": "overlap_check", "shift": case0["shift"], "d": oc["d"],
                                      "delta": x, "trials": oc["trials"], "seed": args.seed,
                                      "preprocessing": args.preprocessing},
                                     overlap_check_point, case0, oc["d"], x, oc["trials"], args.seed,
                                     args.preprocessing, ex)
                for x in oc["deltas"]]
            for q in data["overlap_check_spectral_only"]:
                print(f"[overlap check d={q['d']} δ={q['delta']:g}] {q['mean']:.4f} ± {q['se'] or 0:.4f} "
                      f"vs closed form {q['closed_form']:.4f}", file=sys.stderr)
    except CacheMiss as exc:
        print(f"spectral_init: {exc}", file=sys.stderr)
        return 1
    check = []
    for name, entry in data["cases"].items():
        for d, pts in entry["sim"].items():
            for q in pts:
                rho = math.sqrt(spectral_overlap2(q["delta"]))
                se = q["overlap_se"]
                check.append({"case": name, "d": int(d), "delta": q["delta"], "simulated": q["overlap_mean"],
                              "se": se, "closed_form": rho,
                              "z": None if not se else (q["overlap_mean"] - rho) / se})
    cmd = command_line(argv and [sys.argv[0], *argv])
    payload = {"settings": settings, "command": cmd,
               "diagnostics": {"elapsed": time.perf_counter() - t0, "cache_hits": cache.hits,
                               "computed": cache.computed},
               "overlap_check": check, "data": data}
    caption = cmd + "\n" + caption_text({k: settings[k] for k in ("trials", "ds", "deltas", "seed",
                                                                   "preprocessing", "dtype")}
                                        | {"theory": "none" if args.no_theory else
                                           f"warm-start DMFT T={th_steps}, {th_paths} paths"})
    jp, pp = write_outputs(args.out, NAME, payload, plot(data, settings), caption)
    print(f"wrote {jp} and {pp}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
