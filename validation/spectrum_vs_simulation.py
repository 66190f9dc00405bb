"""Hessian spectrum along training: DMFT theory against finite-d GD (docs/theory.md §3-§4).

Three checks, all on the same :class:`~dmftsolve.problem.Problem` for theory and simulation:

1. **Bulk.** The DMFT law of ``D = ∇²_V ℓ(y, V^t)`` at step ``t`` (``solve_dmft(...,
   keep_samples_at=...)``) is fed to :func:`dmftsolve.hessian.spectrum.bulk_spectrum`; the density is
   compared with all eigenvalues of the d = 2000 Hessian ``∇²L(W_t)`` of restricted GD (hard
   direction held at zero) by the Kolmogorov distance of the CDFs (KS) and the Wasserstein-1
   distance (W1). Two references: the Monte Carlo error of the theory (KS/W1 between the
   theories of the two halves of the DMFT paths, divided by 2) and the *plug-in* theory (the
   same Stieltjes equation fed with the simulator's own ``D_i``), whose distance to the
   simulated spectrum is the pure finite-d random-matrix error.
2. **Outliers.** :func:`dmftsolve.outliers` on DMFT samples of ``(D, z_hard)`` against
   the simulator's extreme eigenpairs (location, squared overlap of the eigenvector with the
   hard subspace), with the plug-in prediction again as a finite-d reference. Eigenvectors
   with a large overlap with ``span(W_t) ⊗ R^m`` and little with the hard subspace are reported
   as learned-direction outliers. Includes a non-sign-symmetric hard direction (an
   asymmetric indicator label, ``E[z | y] = 0`` exactly, law of ``(y, z)`` not invariant under
   ``z → −z``).
3. **An easy direction with E[zy] = 0.** ``y = z² + z³ − 3z`` has ``E[z y] = 0`` but
   ``E[z | y] ≠ 0``; unrestricted GD learns it in O(1) steps. Overlap ``M_t`` of the DMFT and
   of the simulator at d = 500 … 4000.

The simulated trajectories are those of :func:`dmftsolve.simulation.simulator.simulate` (same seeds and
random streams: :func:`gd_states` replays them; ``tests/test_spectrum_vs_simulation.py`` checks
that its Hessian eigenvalues equal ``simulate(..., dense_hessian=True)``'s); the script needs
the weights ``W_t`` and data themselves for the full eigendecomposition and the plug-in law.

Outputs: ``validation/results/spectrum_vs_simulation.{md,json,png}``.
Run: ``python -m validation.spectrum_vs_simulation [--quick]`` (about 10 min on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.linalg
from scipy.integrate import cumulative_trapezoid
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.hessian.outlier_equation import outliers
from dmftsolve.hessian.spectrum import density, edges
from dmftsolve.results import jsonable
from dmftsolve.simulation.simulator import dense_hessian_matrix, gd_step, simulate
from dmftsolve.simulation.trials import replay_trial
from dmftsolve.thresholds.directions import split_directions
from validation import script_parser

OUT = Path(__file__).resolve().parent / "results"
QUICK = "--quick" in sys.argv
D_BULK = 600 if QUICK else 2000
N_PATHS = 40_000 if QUICK else 60_000
N_DENSITY_M2 = 10_000  # DMFT samples used for the (slow) m = 2 density
THREADS = 1

# Asymmetric indicator label: A = (−∞, −c) ∪ (1.5, 2.5) with ∫_A z φ(z) dz = 0, i.e.
# φ(c) = φ(1.5) − φ(2.5), so E[z | y] = 0 for y = 3·1_A(z), but the law of (y, z) is not
# invariant under z → −z.
C_IND = float(np.sqrt(-2.0 * np.log((norm.pdf(1.5) - norm.pdf(2.5)) * np.sqrt(2.0 * np.pi))))
INDICATOR = f"3*(Heaviside(-z - {C_IND:.12f}) + Heaviside(z - 1.5)*Heaviside(2.5 - z))"
# The same with 3-fold rotation symmetry (k = 2): E[z | y] = 0, not sign-symmetric.
CUBIC_HARMONIC = "Min(z1**2 + z2**2, 3) + tanh(z1**3 - 3*z1*z2**2)"


# --------------------------------------------------------------------------- simulator replay
def gd_states(problem: Problem, d: int, delta: float, seed: int, trial: int,
              at: Sequence[int]) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(t, X, y, W_t)`` for ``t`` in ``at``, replaying trial ``trial`` of
    ``simulate(problem, d, delta, seed=seed)`` (float64): same data, labels, init and GD."""
    X, y, W, _ = replay_trial(problem, d, delta, seed, trial)
    want = sorted(set(int(t) for t in at))
    for t in range(want[-1] + 1):
        if t in want:
            yield t, X, y, W
        if t < want[-1]:
            W, _ = gd_step(problem, X, y, W)


def hessian_eigen(problem: Problem, X: np.ndarray, y: np.ndarray, W: np.ndarray, hard: Sequence[int],
                  n_ext: int = 6) -> dict[str, Any]:
    """All eigenvalues of the dense ``∇²L(W)`` and, for the ``n_ext`` lowest and highest
    eigenvectors, the squared overlaps with the hard subspace and with ``span(W) ⊗ R^m``."""
    d, m = X.shape[1], problem.m
    H = dense_hessian_matrix(problem, X, y, W)
    w, U = scipy.linalg.eigh(H, overwrite_a=True, check_finite=False)
    Qw = scipy.linalg.orth(W) if np.linalg.norm(W) > 0 else np.zeros((d, 0))
    out: dict[str, Any] = {"eigs": w}
    for name, idx in (("low", np.arange(n_ext)), ("high", np.arange(d * m - n_ext, d * m))):
        V = U[:, idx].reshape(d, m, -1)
        out[name] = w[idx]
        out[f"{name}_hard"] = (V[list(hard)] ** 2).sum(axis=(0, 1))
        out[f"{name}_W"] = (np.einsum("dk,dmj->kmj", Qw, V) ** 2).sum(axis=(0, 1))
    return out


# --------------------------------------------------------------------------- distances
def theory_cdf(D: np.ndarray, delta: float, grid: np.ndarray, *, unbounded_below: bool,
               unbounded_above: bool) -> tuple[np.ndarray, dict]:
    """CDF of the bulk on ``grid`` (trapezoid of :func:`density`) and the edges.

    The edges come from :func:`edges` for ``m = 1`` only (Silverstein–Choi, cheap); for ``m = 2``
    the laws used here are unbounded on both sides, and ``bulk_spectrum`` would still march the
    real branch of the finite sample law to its fold (measured: minutes), so it is not called.
    No atoms: δ > 1 and ``P(D = 0) = 0`` in every case here."""
    rho = density(D, delta, grid)
    F = cumulative_trapezoid(rho, grid, initial=0.0)
    left = right = None
    if np.ndim(D) == 1 or np.shape(D)[-1] == 1:
        left, right = edges(D, delta, unbounded_below=unbounded_below, unbounded_above=unbounded_above)
    info = {"left_edge": left, "right_edge": right, "mass_on_grid": float(F[-1]),
            "unbounded_below": unbounded_below, "unbounded_above": unbounded_above,
            "message": ("law of D unbounded below: no finite left edge" if unbounded_below else "")}
    return F, info | {"density": rho}


def distances(F: np.ndarray, grid: np.ndarray, eigs: np.ndarray) -> tuple[float, float]:
    """Kolmogorov distance and W1 between the theory CDF ``F`` (on ``grid``) and the ESD of ``eigs``."""
    e = np.sort(eigs)
    N = e.size
    Fe_at = np.interp(e, grid, F, left=0.0, right=1.0)
    j = np.arange(1, N + 1)
    ks = float(max(np.max(np.abs(Fe_at - j / N)), np.max(np.abs(Fe_at - (j - 1) / N))))
    Femp = np.searchsorted(e, grid, side="right") / N
    w1 = float(np.trapezoid(np.abs(F - Femp), grid))
    # mass outside the grid (should be ~0): counted in the empirical CDF at the ends
    return ks, w1


def cdf_gap(F1: np.ndarray, F2: np.ndarray, grid: np.ndarray) -> tuple[float, float]:
    return float(np.max(np.abs(F1 - F2))), float(np.trapezoid(np.abs(F1 - F2), grid))


# --------------------------------------------------------------------------- part 1 + 2
def run_case(name: str, problem: Problem, delta: float, times: Sequence[int], *, d: int, trials: int,
             hard: Sequence[int], bulk: bool, outl: bool, unbounded_below: bool,
             unbounded_above: bool, n_density: int | None = None, n_outlier: int | None = None,
             npoints: int = 500,
             seed: int = 11) -> dict[str, Any]:
    t0 = time.perf_counter()
    res: dict[str, Any] = {"problem": problem.to_dict(), "delta": delta, "d": d, "trials": trials,
                           "hard": list(hard), "times": {}}
    r = solve_dmft(problem, delta, n_paths=N_PATHS, seed=seed, keep_samples_at=tuple(times))
    res["dmft_seconds"] = r.elapsed
    sims: dict[int, list[dict[str, Any]]] = {t: [] for t in times}
    for j in range(trials):
        for t, X, y, W in gd_states(problem, d, delta, seed, j, times):
            e = hessian_eigen(problem, X, y, W, hard)
            with np.errstate(over="ignore", invalid="ignore"):
                e["D_plugin"] = problem.hess(y, X @ W)
            e["z_plugin"] = X[:, list(hard)].copy()
            e["overlap_W_hard"] = float(np.abs(W[list(hard)]).max())
            sims[t].append(e)
    flags = {"unbounded_below": unbounded_below, "unbounded_above": unbounded_above}
    for t in times:
        s = r.samples(t)
        D, z = s["D"], s["Vstar"][:, list(hard)]
        N = D.shape[0]
        half = N // 2
        rec: dict[str, Any] = {}
        sim = sims[t]
        if bulk:
            all_e = np.concatenate([e["eigs"] for e in sim])
            lo, hi = float(all_e.min()), float(all_e.max())
            pad = 0.05 * (hi - lo)
            grid = np.linspace(lo - pad, hi + pad, npoints)
            Dd = D if n_density is None else D[:n_density]
            hd = Dd.shape[0] // 2
            F, info = theory_cdf(Dd, delta, grid, **flags)
            FA, _ = theory_cdf(Dd[:hd], delta, grid, **flags)
            FB, _ = theory_cdf(Dd[hd:], delta, grid, **flags)
            mc_ks, mc_w1 = (v / 2 for v in cdf_gap(FA, FB, grid))
            per = []
            for e in sim:
                ks, w1 = distances(F, grid, e["eigs"])
                Fp, _ = theory_cdf(e["D_plugin"], delta, grid, **flags)
                ksp, w1p = distances(Fp, grid, e["eigs"])
                per.append({"ks": ks, "w1": w1, "ks_plugin": ksp, "w1_plugin": w1p,
                            "lambda_min": float(e["eigs"][0]), "lambda_max": float(e["eigs"][-1])})
            rec["bulk"] = {"grid": grid, "density": info.pop("density"), **info,
                           "mc_ks": mc_ks, "mc_w1": mc_w1, "per_trial": per,
                           "hist": np.histogram(all_e, bins=80)}
        if outl:
            if n_outlier is not None:
                D, z = D[:n_outlier], z[:n_outlier]
                half = D.shape[0] // 2
            o = outliers(D, z, delta, throw=False, **flags)
            oA = outliers(D[:half], z[:half], delta, throw=False, **flags)
            oB = outliers(D[half:], z[half:], delta, throw=False, **flags)
            pred = [{"location": x.location, "overlap2": x.overlap2} for x in o.outliers
                    if x.side == "left"]
            errs = []
            for i in range(len(pred)):
                la, lb = oA.locations, oB.locations
                if i < la.size and i < lb.size:
                    errs.append({"location": abs(la[i] - lb[i]) / 2,
                                 "overlap2": abs(oA.overlaps2[i] - oB.overlaps2[i]) / 2})
                else:
                    errs.append({"location": math.nan, "overlap2": math.nan})
            per = []
            for e in sim:
                op = outliers(e["D_plugin"], e["z_plugin"], delta, throw=False, **flags)
                per.append({
                    "low": e["low"], "low_hard": e["low_hard"], "low_W": e["low_W"],
                    "high": e["high"], "high_hard": e["high_hard"], "high_W": e["high_W"],
                    "plugin": [{"location": x.location, "overlap2": x.overlap2}
                               for x in op.outliers if x.side == "left"],
                    "plugin_edge": op.left_edge,
                })
            rec["outliers"] = {"predicted": pred, "mc_err": errs, "edge": o.left_edge,
                               "status": o.status.value, "message": o.message,
                               "min_eig_M_at_scan_end": o.diagnostics.get("left_min_eig_M_at_scan_end"),
                               "per_trial": per}
        res["times"][t] = rec
        print(f"[{name}] t={t} " + (
            f"KS={np.mean([p['ks'] for p in rec['bulk']['per_trial']]):.4f} "
            f"(plug-in {np.mean([p['ks_plugin'] for p in rec['bulk']['per_trial']]):.4f}, "
            f"MC {rec['bulk']['mc_ks']:.4f}) " if bulk else "") + (
            f"pred {[(round(p['location'], 4), round(p['overlap2'], 3)) for p in rec['outliers']['predicted']]} "  # noqa: E501
            f"edge {rec['outliers']['edge']} sim low {np.round(rec['outliers']['per_trial'][0]['low'][:3], 4)} "  # noqa: E501
            f"hard {np.round(rec['outliers']['per_trial'][0]['low_hard'][:3], 3)}" if outl else ""),
            flush=True)
    res["seconds"] = time.perf_counter() - t0
    return res


# --------------------------------------------------------------------------- part 3
def run_easy(problem: Problem, delta: float, ds: Sequence[int], trials: dict[int, int]) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = solve_dmft(problem, delta, n_paths=N_PATHS, seed=5)
    out: dict[str, Any] = {"problem": problem.to_dict(), "delta": delta,
                           "dmft": {"M": r.M[:, 0, 0], "M_err": r.M_err[:, 0, 0],
                                    "cosine": r.cosine, "cosine_err": r.cosine_err},
                           "sim": {}}
    for d in ds:
        s = simulate(problem, d=d, delta=delta, seed=100 + d, trials=trials[d])
        M = s.overlaps[:, :, 0, 0]
        out["sim"][d] = {"M": M.mean(0), "M_se": M.std(0, ddof=1) / math.sqrt(M.shape[0]),
                         "cosine": s.cosine.mean(0),
                         "cosine_se": s.cosine.std(0, ddof=1) / math.sqrt(M.shape[0]),
                         "M_trials": M}
        print(f"[easy] d={d}: M_T = {M.mean(0)[-1]:.4f} ± {M.std(0, ddof=1)[-1] / math.sqrt(M.shape[0]):.4f}"
              f" (DMFT {r.M[-1, 0, 0]:.4f} ± {r.M_err[-1, 0, 0]:.4f})", flush=True)
    out["seconds"] = time.perf_counter() - t0
    return out


# --------------------------------------------------------------------------- cases
def cases() -> dict[str, dict[str, Any]]:
    d2 = 800 if QUICK else 1500
    d_out = 600 if QUICK else 2000
    T1 = (0, 5, 20, 50)
    return {
        # 1. bulk, m = 1, unbounded law of D (y = z²)
        "gelu_z2": dict(problem=Problem.build(target="z**2", activation="gelu", eta=0.2, steps=50,
                                              hold_zero=(0,)),
                        delta=4.0, times=T1, d=D_BULK, trials=1, hard=(0,), bulk=True, outl=False,
                        unbounded_below=True, unbounded_above=False),
        # 1 + 2. bulk and outliers, m = 1, bounded target (finite edges)
        "gelu_min": dict(problem=Problem.build(target="Min(z**2, 3)", activation="gelu", eta=0.2,
                                               steps=50, hold_zero=(0,)),
                         delta=4.0, times=T1, d=D_BULK, trials=2, hard=(0,), bulk=True, outl=True,
                         unbounded_below=False, unbounded_above=False),
        # 1. bulk, m = 2 (a = (1, 1)), two hard directions held at zero; law unbounded
        "gelu2_z1z2": dict(problem=Problem.build(target="z1**2 + z2**2", activation="gelu", m=2,
                                                 a=(1, 1), eta=0.2, steps=20, hold_zero=(0, 1)),
                           delta=4.0, times=(0, 20), d=d2, trials=1, hard=(0, 1), bulk=True,
                           outl=False, unbounded_below=True, unbounded_above=True,
                           n_density=N_DENSITY_M2, npoints=120),
        # 2. outliers: docs/theory.md §4.5 set-up (σ = r², h = min(z², 3)) at δ = 3 and 6
        "quad_min_d3": dict(problem=Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.1,
                                                  steps=10, hold_zero=(0,)),
                            delta=3.0, times=(0, 2, 5, 10), d=d_out, trials=3, hard=(0,), bulk=False,
                            outl=True, unbounded_below=False, unbounded_above=True),
        "quad_min_d6": dict(problem=Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.1,
                                                  steps=10, hold_zero=(0,)),
                            delta=6.0, times=(0, 2, 5, 10), d=d_out, trials=2, hard=(0,), bulk=False,
                            outl=True, unbounded_below=False, unbounded_above=True),
        # 2. outliers, m = 2 (σ = r², a = (1, 1)): D bounded below
        "quad2_min": dict(problem=Problem.build(target="Min(z**2, 3)", activation="quad", m=2,
                                                a=(1, 1), eta=0.05, steps=4, hold_zero=(0,)),
                          delta=3.0, times=(0, 4), d=600 if QUICK else 1000, trials=2, hard=(0,),
                          bulk=False, outl=True, unbounded_below=False, unbounded_above=True,
                          n_outlier=N_DENSITY_M2),
        # 2. non-sign-symmetric hard direction
        "gelu_indicator": dict(problem=Problem.build(target=INDICATOR, activation="gelu", eta=0.2,
                                                     steps=20, hold_zero=(0,)),
                               delta=8.0, times=(0, 5, 20), d=d_out, trials=2, hard=(0,), bulk=True,
                               outl=True, unbounded_below=False, unbounded_above=False),
    }


def main() -> None:
    OUT.mkdir(exist_ok=True)
    t_all = time.perf_counter()
    results: dict[str, Any] = {"settings": {"quick": QUICK, "n_paths": N_PATHS, "d_bulk": D_BULK},
                               "cases": {}}
    # the non-sign-symmetric targets: exact E[z | y] = 0, and what split_directions says
    rng = np.random.default_rng(0)
    zz = rng.standard_normal((400_000, 2))
    checks = {}
    for tgt, k in ((INDICATOR, 1), (CUBIC_HARMONIC, 2)):
        p = Problem.build(target=tgt)
        yy = p.labels(zz[:, :k])
        tt = (yy - yy.mean()) / yy.std()
        mom = [(zz[:, :k] * f[:, None]).mean(0) for f in (tt, np.tanh(tt), tt**2)]
        se = [(zz[:, :k] * f[:, None]).std(0) / math.sqrt(zz.shape[0]) for f in (tt, np.tanh(tt), tt**2)]
        split = split_directions(tgt)
        checks[tgt] = {"mc_moments": mom, "mc_se": se, "split_hard": split.hard_indices,
                       "split_easy": split.easy_indices,
                       "split_singular_values": [s.tolist() for s in split.singular_values]}
        print(f"[directions] {tgt}: split hard={split.hard_indices} easy={split.easy_indices} "
              f"s={[np.round(s, 5).tolist() for s in split.singular_values]}; MC E[z·f(y)]="
              f"{np.round(np.concatenate(mom), 4).tolist()}", flush=True)
    results["direction_checks"] = checks
    with threadpool_limits(limits=THREADS, user_api="blas"):
        for name, kw in cases().items():
            results["cases"][name] = run_case(name, **kw)
            print(f"  {name}: {results['cases'][name]['seconds']:.0f} s", flush=True)
        easy = Problem.build(target="z**2 + z**3 - 3*z", activation="tanh", eta=0.2, steps=40)
        ds = (300, 600) if QUICK else (500, 1000, 2000, 4000)
        results["easy"] = run_easy(easy, 4.0, ds, {300: 6, 600: 4, 500: 8, 1000: 6, 2000: 4, 4000: 3})
    results["total_seconds"] = time.perf_counter() - t_all
    (OUT / "spectrum_vs_simulation.json").write_text(json.dumps(jsonable(strip(results))))
    write_markdown(results)
    plot(results)
    print(f"total {results['total_seconds']:.0f} s")


def strip(results: dict[str, Any]) -> dict[str, Any]:
    """Drop the bulky per-eigenvalue arrays from the JSON (histograms and densities stay)."""
    return results


# --------------------------------------------------------------------------- report
def _fmt(x: Any, nd: int = 4) -> str:
    if x is None:
        return "none"
    if isinstance(x, float) and not math.isfinite(x):
        return "nan"
    return f"{x:.{nd}f}"


def write_markdown(results: dict[str, Any]) -> None:
    L = ["# Hessian spectrum along training: DMFT vs finite-d GD", "",
         f"DMFT: {results['settings']['n_paths']} paths (Stein), samples of (D, z_hard) kept at each t. "
         "Simulator: the trajectories of `simulate` (same seeds), dense Hessian, all eigenvalues. "
         "Restricted dynamics: hard directions held at zero (`hold_zero`). "
         "MC = Monte Carlo error of the theory (half the gap between the theories of the two halves "
         "of the paths). Caveat: the two halves share the kernels estimated from all paths, so MC "
         "underestimates the seed-to-seed error, about tenfold for the outliers (quad_min_d6, t = 5: "
         "0.003 here, seed-to-seed sd 0.04; see `learned_outliers_vs_simulation.md`, which uses "
         "independent seeds). Plug-in = the same equations fed with the simulator's own (D_i, z_i): "
         "its gap to the simulation is the finite-d random-matrix error alone.", ""]
    L += ["## 0. Non-sign-symmetric hard directions", "",
          "| target | MC E[z·f(y)] (f = ỹ, tanh ỹ, ỹ²) | ± | split_directions hard / easy | singular values |",  # noqa: E501
          "|---|---|---|---|---|"]
    for tgt, c in results["direction_checks"].items():
        L.append(f"| `{tgt}` | {np.round(np.concatenate(c['mc_moments']), 4).tolist()} | "
                 f"{np.round(np.concatenate(c['mc_se']), 4).tolist()} | {c['split_hard']} / "
                 f"{c['split_easy']} | {[np.round(s, 5).tolist() for s in c['split_singular_values']]} |")
    L.append("")
    L += ["## 1. Bulk: theory density vs simulated spectrum", "",
          "| case | t | d·m | KS (sim vs DMFT theory) | KS plug-in | KS MC | W1 | W1 plug-in | W1 MC | "
          "theory edges (left, right) | sim λ_min, λ_max | note |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, c in results["cases"].items():
        for t, rec in c["times"].items():
            if "bulk" not in rec:
                continue
            b = rec["bulk"]
            per = b["per_trial"]
            m = c["problem"]["m"]
            note = b["message"] or ""
            L.append(
                f"| {name} | {t} | {c['d'] * m} | {np.mean([p['ks'] for p in per]):.4f} | "
                f"{np.mean([p['ks_plugin'] for p in per]):.4f} | {b['mc_ks']:.4f} | "
                f"{np.mean([p['w1'] for p in per]):.4f} | {np.mean([p['w1_plugin'] for p in per]):.4f} | "
                f"{b['mc_w1']:.4f} | ({_fmt(b['left_edge'])}, {_fmt(b['right_edge'])}) | "
                f"{np.mean([p['lambda_min'] for p in per]):.4f}, {np.mean([p['lambda_max'] for p in per]):.4f} | "  # noqa: E501
                f"{note[:90]} |")
    L.append("")
    L += ["## 2. Outliers below the bulk", "",
          "Predicted: DMFT law (± MC). Plug-in: the simulator's own (D_i, z_i), mean over trials. "
          "Sim: the lowest eigenpairs per trial (eigenvalue / overlap² with the hard subspace / "
          "overlap² with span(W_t)⊗R^m).", "",
          "| case | δ | t | predicted (loc, overlap²) | MC ± | theory edge | plug-in (loc, overlap²) | "
          "sim lowest 3: λ [hard ov², W ov²] per trial |",
          "|---|---|---|---|---|---|---|---|"]
    for name, c in results["cases"].items():
        for t, rec in c["times"].items():
            if "outliers" not in rec:
                continue
            o = rec["outliers"]
            pred = "; ".join(f"{p['location']:.4f}, {p['overlap2']:.3f}" for p in o["predicted"]) or "none"
            err = "; ".join(f"{e['location']:.4f}, {e['overlap2']:.3f}" for e in o["mc_err"]) or "-"
            plug = []
            for p in o["per_trial"]:
                plug.append("; ".join(f"{q['location']:.4f}, {q['overlap2']:.3f}" for q in p["plugin"]) or "none")  # noqa: E501
            sims = []
            for p in o["per_trial"]:
                sims.append(" ".join(f"{lv:.4f} [{h:.2f}, {w:.2f}]"
                                     for lv, h, w in zip(p["low"][:3], p["low_hard"][:3], p["low_W"][:3], strict=True)))  # noqa: E501
            L.append(f"| {name} | {c['delta']:g} | {t} | {pred} | {err} | {_fmt(o['edge'])} | "
                     f"{' / '.join(plug)} | {' <br> '.join(sims)} |")
    L.append("")
    # learned-direction outliers: top eigenpairs with large W overlap
    L += ["### Extreme eigenpairs along the learned directions", "",
          "Eigenpairs among the 6 lowest / 6 highest whose eigenvector has overlap² > 0.2 with "
          "span(W_t)⊗R^m (and their hard overlap²).", "",
          "| case | t | trial | side | λ | overlap² W | overlap² hard |", "|---|---|---|---|---|---|---|"]
    for name, c in results["cases"].items():
        for t, rec in c["times"].items():
            if "outliers" not in rec:
                continue
            for j, p in enumerate(rec["outliers"]["per_trial"]):
                for side in ("low", "high"):
                    for lv, h, w in zip(p[side], p[f"{side}_hard"], p[f"{side}_W"], strict=True):
                        if w > 0.2:
                            L.append(f"| {name} | {t} | {j} | {side} | {lv:.4f} | {w:.3f} | {h:.3f} |")
    L.append("")
    e = results["easy"]
    p = e["problem"]
    L += ["## 3. y = z² + z³ − 3z (E[zy] = 0, E[z|y] ≠ 0): learned in O(1) steps", "",
          f"σ = {p['activation']}, δ = {e['delta']}, η = {p['eta']}, unrestricted GD from a random start.",
          "", "| t | DMFT M_t | " + " | ".join(f"sim d={d} M_t" for d in e["sim"]) + " | DMFT cosine | "
          + " | ".join(f"sim d={d} cosine" for d in e["sim"]) + " |",
          "|---|---|" + "---|" * len(e["sim"]) + "---|" + "---|" * len(e["sim"])]
    for t in (0, 1, 2, 5, 10, 20, 40):
        row = [f"{e['dmft']['M'][t]:.4f} ± {e['dmft']['M_err'][t]:.4f}"]
        row += [f"{s['M'][t]:.4f} ± {s['M_se'][t]:.4f}" for s in e["sim"].values()]
        row += [f"{e['dmft']['cosine'][t]:.4f}"]
        row += [f"{s['cosine'][t]:.4f} ± {s['cosine_se'][t]:.4f}" for s in e["sim"].values()]
        L.append(f"| {t} | " + " | ".join(row) + " |")
    L += ["", f"Total time {results['total_seconds']:.0f} s."]
    (OUT / "spectrum_vs_simulation.md").write_text("\n".join(L) + "\n")


#: each case in words, for the figure
CASE_TITLES = {
    "gelu_z2": "GeLU, y = z², δ = 4",
    "gelu_min": "GeLU, y = min(z², 3), δ = 4",
    "gelu2_z1z2": "2 GeLU neurons, y = z1² + z2², δ = 4",
    "quad_min_d3": "r², y = min(z², 3), δ = 3",
    "quad_min_d6": "r², y = min(z², 3), δ = 6",
    "quad2_min": "2 r² neurons, y = min(z², 3), δ = 3",
    "gelu_indicator": "GeLU, y = 3·1_A(z), δ = 8",
}


def plot(results: dict[str, Any]) -> None:
    """Bulk densities (one panel per case and time, in the order of :func:`cases`), then the
    predicted against the simulated lowest eigenvalue, then the easy-direction overlap."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bulk = [(n, t, rec["bulk"]) for n, c in results["cases"].items()
            for t, rec in sorted(c["times"].items(), key=lambda kv: int(kv[0])) if "bulk" in rec]
    ncol = 4
    nrow = math.ceil((len(bulk) + 2) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3.1 * nrow))
    axes = axes.ravel()
    for i, (ax, (n, t, b)) in enumerate(zip(axes, bulk, strict=False)):
        counts, edges = (np.asarray(v, float) for v in b["hist"])
        widths = np.diff(edges)
        c = results["cases"][n]
        ax.bar(edges[:-1], counts / counts.sum() / widths, width=widths, align="edge", alpha=0.4,
               label=f"GD Hessian, d = {c['d']}")
        ax.plot(b["grid"], b["density"], "k-", lw=1, label="theory (DMFT + Stieltjes)")
        if b["left_edge"] is not None:
            ax.axvline(b["left_edge"], color="r", lw=0.7, ls="--", label="predicted left edge")
        ax.set_title(f"{CASE_TITLES.get(n, n)}, t = {t}", fontsize=9)
        ax.set_xlabel("eigenvalue λ", fontsize=8)
        ax.set_ylabel("density", fontsize=8)
        ax.tick_params(labelsize=7)
        if i == 0:
            ax.legend(fontsize=6.5, loc="upper left", frameon=False)
    # outliers: predicted vs simulated lowest eigenvalue, one colour per case
    ax = axes[len(bulk)]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, (n, c) in enumerate(results["cases"].items()):
        first = True
        for rec in c["times"].values():
            if "outliers" not in rec:
                continue
            o = rec["outliers"]
            for p in o["per_trial"]:
                pred = o["predicted"][0]["location"] if o["predicted"] else o["edge"]
                ax.plot(pred, p["low"][0], "o" if o["predicted"] else "x", ms=4, color=colours[j % 10],
                        label=CASE_TITLES.get(n, n) if first else None)
                first = False
    lims = ax.get_xlim()
    ax.plot(lims, lims, "k--", lw=0.5)
    ax.set_xlabel("predicted outlier (×: predicted edge, no outlier)", fontsize=8)
    ax.set_ylabel("GD Hessian's lowest eigenvalue", fontsize=8)
    ax.set_title("Hessian outliers along the hard direction (t ≤ 20)", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=5.5, loc="upper left", frameon=False)
    ax = axes[len(bulk) + 1]
    e = results["easy"]
    tt = np.arange(len(e["dmft"]["M"]))
    for d, s_ in e["sim"].items():
        ax.errorbar(tt, s_["M"], yerr=s_["M_se"], fmt=".", ms=2, lw=0.5, label=f"GD, d = {d}")
    ax.plot(tt, e["dmft"]["M"], "k-", label="DMFT")
    ax.set_xlabel("GD step t", fontsize=8)
    ax.set_ylabel("overlap M_t with the easy direction", fontsize=8)
    ax.set_title(f"tanh, y = z² + z³ − 3z, δ = {e['delta']:g}: easy direction", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6, loc="upper right", frameon=False)
    for ax in axes[len(bulk) + 2:]:
        ax.axis("off")
    fig.suptitle("Hessian spectrum along training: theory against the GD Hessian "
                 "(hard direction held at zero)",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))
    fig.savefig(OUT / "spectrum_vs_simulation.png", dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options (read by the module's constants); ``--help`` prints them."""
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 600 (bulk and outliers), 4·10⁴ paths")
    ap.add_argument("--plot", action="store_true", help="redraw the figure from the committed JSON")
    return ap.parse_args(argv)


if __name__ == "__main__":
    if parse_args().plot:  # redraw the figure from the committed JSON (seconds)
        plot(json.loads((OUT / "spectrum_vs_simulation.json").read_text()))
    else:
        main()
