"""Benchmark: the speed of ``dmftsolve threshold`` (issue 10), and its cost against the simulator's.

Speed ratios (``--speed``, the default; each baseline in the same process, same seeds):

a. bisection tolerance: the README main job (GeLU, ``y = z²``, η = 0.5, long-time rule
   T = 200, 10⁴ paths, 3 replicates) with ``xtol = 0.25`` (the old CLI default) against
   ``xtol = 1.0`` (about the replicate standard error, 1.1), both serial (``workers=1``):
   DMFT evaluations, CPU time and wall time, and both answers;
b. replicates over the cores: the same search with ``xtol = 1.0``, ``workers=1`` against
   ``workers=None`` (the available cores), wall time; the answers must be identical;
c. outlier scan points: ``outliers`` on the DMFT laws of the main job (seed 0, 8 δ from 6.6
   to 40, t = 100 and 200) with ``npoints = 400`` (the old search) against 100 (the new
   ``ThresholdSettings.outlier_points``): time, and whether edges and outliers agree.

(a) and (b) run with the current defaults of everything else (``outlier_points = 100``).
Under Linux autogroup scheduling a process pool gets no more CPU than one process while
other sessions keep the cores busy; (b) then shows no gain.

The machine load (``os.getloadavg``) is printed beside each timing: on a shared machine
the process-pool ratio is bounded by the idle cores.

Edge march passes (``--edge-march``): :func:`dmftsolve.hessian._resolvent.left_edge_march`
with one pass (``passes=1``) against the default refining passes, on the m = 2 laws where
the single pass stepped over an island (r² on ``y = z²``, δ = 1.5, t = 20, 10⁴ paths, DMFT seeds
0 and 1): time ratio and both edges.

Small solves (``--small-solve``, :func:`small_solve`): the m = 2 unrolled elimination for
``D (D + δR)^{-1}`` in the resolvent map against ``numpy.linalg.solve`` (micro and end to end
on an m = 2 threshold search), and the matmul Jacobian moment against the einsum it replaced.

Cost against the simulator (``--simulator``):

1. Runs ``dmftsolve threshold`` as a subprocess (GeLU neuron on ``y = z²``,
   η = 0.5, ``--t 20``, 4000 paths, bracket 2..40, grid 6, xtol 0.5) and times
   it end to end (interpreter start-up, imports and the search included).
2. Times single simulator runs (:func:`dmftsolve.simulation.simulator.simulate`, one
   trial, float32 data, one BLAS thread, unrestricted GD, same problem) at
   ``d = 500, 1000, 2000`` and ``δ = 10``, each for a few hundred steps, and
   scales them to a full run: time ∝ steps × δ (the step reads ``X`` once,
   ``n = δ d`` rows).
3. Estimates what the simulator needs to locate the same threshold to the
   same δ precision: the same δ points the threshold search evaluated (grid
   plus bisection), ``TRIALS`` runs per point (enough to tell a success rate
   of 1/2 from 0 or 1 at about two binomial standard errors), ``STEPS`` GD
   steps per run (escape takes hundreds of steps at η = 0.5 near the
   transition), at each d of ``DS`` (a finite-size extrapolation needs
   several d). A single-d, 10-trial estimate is given as a lower bound.

The ratio (simulator estimate / threshold time) is printed; both are timed
in the same process on the same machine. Caveat: the two locate different
quantities (the DMFT gives δ_NN(t) at d = ∞; the simulator a finite-d,
finite-time success transition; see ``docs/findings.md``); the comparison
is of cost only.

Run: ``python benchmarks/bench_threshold.py [--speed] [--simulator] [--edge-march] [--small-solve]
[--json]`` (speed: about 4 min on 2 idle cores; simulator: about 2 min; small solves: about 5 min).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

from dmftsolve import Problem
from dmftsolve.simulation.simulator import simulate
from dmftsolve.thresholds.hessian_threshold import delta_nn
from dmftsolve.thresholds.settings import ThresholdSettings

MAIN = {"bracket": (2.0, 40.0), "grid": 6, "n_paths": 10_000, "seed": 0, "long_time": 200, "replicates": 3}

CLI = ["threshold", "--activation", "gelu", "--eta", "0.5", "--t", "20", "--paths", "4000",
       "--bracket", "2,40", "--grid", "6", "--xtol", "0.5", "--replicates", "1", "--json", "--no-progress"]
DS = (500, 1000, 2000)
TIMED_STEPS = {500: 400, 1000: 200, 2000: 60}
DELTA_TIMED = 10.0
TRIALS = 20
STEPS = 1000


def run_cli() -> tuple[float, dict]:
    exe = shutil.which("dmftsolve")
    cmd = [exe, *CLI] if exe else [sys.executable, "-m", "dmftsolve.cli", *CLI]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        out = {"stdout": proc.stdout[-2000:], "stderr": proc.stderr[-2000:]}
    out["returncode"] = proc.returncode
    return wall, out


def time_per_step(d: int) -> float:
    """Seconds per GD step at (d, δ = DELTA_TIMED), best of two short runs."""
    steps = TIMED_STEPS[d]
    p = Problem.build(target="z**2", activation="gelu", eta=0.5, steps=steps)
    best = np.inf
    for seed in (0, 1):
        t0 = time.perf_counter()
        simulate(p, d, DELTA_TIMED, seed=seed, record_every=10, dtype=np.float32, throw=False)
        best = min(best, time.perf_counter() - t0)
    return best / steps


def _cpu() -> float:
    """CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _main_job(**changes) -> dict:
    """The README main job through the library, with ``changes`` to its settings."""
    problem = Problem.build(target="z**2", activation="gelu", eta=0.5)
    settings = ThresholdSettings(**(MAIN | changes))
    load, cpu, wall = os.getloadavg()[0], _cpu(), time.perf_counter()
    res = delta_nn(problem, None, settings=settings, throw=False)
    return {"settings": changes, "wall_s": time.perf_counter() - wall, "cpu_s": _cpu() - cpu,
            "load_before": load, "load_after": os.getloadavg()[0], "delta_nn": res.delta_nn,
            "stderr": res.stderr, "status": res.status.value, "evaluations": len(res.evaluations),
            "dmft_runs": len({(e["seed"], e["delta"]) for e in res.evaluations}),
            "brackets": [r["bracket"] for r in res.replicates]}


def outlier_points_ratio() -> dict:
    """(c): outliers with 400 and 100 scan points on the same laws."""
    from dmftsolve.dynamics.dmft import solve_dmft
    from dmftsolve.hessian.outlier_equation import outliers
    from dmftsolve.thresholds.restricted_hessian import restricted

    prob, hard = restricted(Problem.build(target="z**2", activation="gelu", eta=0.5))
    times = {400: 0.0, 100: 0.0}
    agree = True
    for d in (6.63, 12.07, 18.0, 20.1, 20.7, 21.97, 24.3, 40.0):
        r = solve_dmft(prob, d, n_paths=10_000, seed=0, steps=200, keep_samples_at=(100, 200),
                       errors="batch", test_loss="none")
        for t in (100, 200):
            law = r.law(t)
            res = {}
            for n in (400, 100):
                t0 = time.perf_counter()
                res[n] = outliers(law, law.Vstar[:, list(hard)], d, unbounded_below=False, npoints=n,
                                  throw=False)
                times[n] += time.perf_counter() - t0
            a, b = res[400], res[100]
            agree &= (a.left_edge == b.left_edge and len(a.outliers) == len(b.outliers)
                      and np.allclose(a.locations, b.locations, rtol=1e-9, atol=1e-12))
    return {"npoints_400_s": times[400], "npoints_100_s": times[100], "ratio": times[400] / times[100],
            "identical_edges_and_outliers": bool(agree)}


def edge_march_passes() -> dict:
    """(d): the left-edge march with one pass against the default passes, same laws."""
    from dmftsolve.hessian._resolvent import left_edge_march, prepare_law
    from dmftsolve.thresholds.restricted_hessian import hard_spectrum

    prob = Problem.build(target="z**2", activation="quad", m=2, eta=0.05)
    out: dict = {"one_pass_s": 0.0, "default_s": 0.0, "laws": []}
    for seed in (0, 1):
        law = hard_spectrum(prob, 1.5, 20, settings=ThresholdSettings(n_paths=10_000, seed=seed, workers=1),
                            throw=False).law
        wl = prepare_law(law, 1.5, 0.0, None)
        row = {"seed": seed}
        for key, passes in (("one_pass", 1), ("default", 5)):
            t0 = time.perf_counter()
            edge, info = left_edge_march(wl, xtol=1e-10 * wl.scale, tol=1e-12, maxiter=100, passes=passes)
            dt = time.perf_counter() - t0
            out[f"{key}_s"] += dt
            row |= {f"{key}_edge": edge, f"{key}_s": dt, f"{key}_steps": info["edge_steps"]}
        out["laws"].append(row)
    out["ratio"] = out["default_s"] / out["one_pass_s"]
    return out


def small_solve() -> dict:
    """(e): the m = 2 unrolled elimination for ``D (D + δR)^{-1}`` against ``numpy.linalg.solve``.

    Micro: both on a stack of 10⁴ random symmetric 2 × 2 systems (complex ``R``, as on the upper
    half plane, and real ``R``, as on the real-axis branch that the edge and outlier scans
    follow), and the
    Jacobian moment ``Σ w B ⊗ B`` by matmul against the three-operand einsum it replaced.
    End to end: ``delta_nn`` (GeLU, m = 2, ``y = z²``, η = 0.5, long-time rule T = 40,
    10⁴ paths, one replicate, serial) with the elimination and with ``numpy.linalg.solve``
    patched back in (the matmul moment is in both); same seed, so the answers must agree.
    """
    from unittest import mock

    from dmftsolve.hessian import _resolvent, outlier_equation

    def lapack(D: np.ndarray, S: np.ndarray) -> np.ndarray:
        return np.swapaxes(np.linalg.solve(D + S[None], D), 1, 2)

    def best_of(f, reps: int = 200) -> float:
        f()
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        return (time.perf_counter() - t0) / reps

    rng = np.random.default_rng(0)
    A = rng.normal(size=(10_000, 2, 2))
    D = A + np.swapaxes(A, 1, 2)
    S = np.array([[1.0 + 0.3j, 0.2], [0.2, 0.7 - 0.1j]])
    w = np.full(len(D), 1.0 / len(D))
    Bf = _resolvent.d_times_inverse(D, S).reshape(-1, 4)
    Sr = S.real.copy()
    micro = {"solve_lapack_ms": 1e3 * best_of(lambda: lapack(D, S)),
             "solve_unrolled_ms": 1e3 * best_of(lambda: _resolvent.d_times_inverse(D, S)),
             "solve_real_lapack_ms": 1e3 * best_of(lambda: lapack(D, Sr)),
             "solve_real_unrolled_ms": 1e3 * best_of(lambda: _resolvent.d_times_inverse(D, Sr)),
             "moment_einsum_ms": 1e3 * best_of(lambda: np.einsum("i,ip,iq->pq", w, Bf, Bf)),
             "moment_matmul_ms": 1e3 * best_of(lambda: (w[:, None] * Bf).T @ Bf)}
    prob = Problem.build(target="z**2", activation="gelu", m=2, eta=0.5, steps=40)
    st = ThresholdSettings(bracket=(1.0, 40.0), grid=6, xtol=1.0, n_paths=10_000, replicates=1,
                           long_time=40, workers=1)
    runs = {}
    for key in ("lapack", "unrolled"):
        with mock.patch.object(_resolvent, "d_times_inverse", lapack if key == "lapack" else
                               _resolvent.d_times_inverse), \
             mock.patch.object(outlier_equation, "d_times_inverse", lapack if key == "lapack" else
                               outlier_equation.d_times_inverse):
            load, t0 = os.getloadavg()[0], time.perf_counter()
            r = delta_nn(prob, None, settings=st, throw=False)
            runs[key] = {"wall_s": time.perf_counter() - t0, "load_before": load, "delta_nn": r.delta_nn,
                         "status": r.status.value}
    return micro | {"runs": runs, "ratio_solve": micro["solve_lapack_ms"] / micro["solve_unrolled_ms"],
                    "ratio_solve_real": micro["solve_real_lapack_ms"] / micro["solve_real_unrolled_ms"],
                    "ratio_moment": micro["moment_einsum_ms"] / micro["moment_matmul_ms"],
                    "ratio_end_to_end": runs["lapack"]["wall_s"] / runs["unrolled"]["wall_s"],
                    "same_answer": runs["lapack"]["delta_nn"] == runs["unrolled"]["delta_nn"]}


def speed() -> dict:
    """Ratios (a) xtol 0.25 -> 1.0 and (b) serial -> process pool, baseline first, same seeds."""
    fine = _main_job(xtol=0.25, workers=1)
    coarse = _main_job(xtol=1.0, workers=1)
    pooled = _main_job(xtol=1.0, workers=None)
    same = (pooled["delta_nn"], pooled["stderr"], pooled["brackets"]) == \
        (coarse["delta_nn"], coarse["stderr"], coarse["brackets"])
    return {"outlier_points": outlier_points_ratio(),
            "xtol_0.25_serial": fine, "xtol_1_serial": coarse, "xtol_1_pool": pooled,
            "ratio_xtol_wall": fine["wall_s"] / coarse["wall_s"],
            "ratio_xtol_cpu": fine["cpu_s"] / coarse["cpu_s"],
            "ratio_xtol_dmft_runs": fine["dmft_runs"] / coarse["dmft_runs"],
            "ratio_pool_wall": coarse["wall_s"] / pooled["wall_s"], "pool_answer_identical": same,
            "ratio_both_wall": fine["wall_s"] / pooled["wall_s"]}


def main() -> None:
    as_json = "--json" in sys.argv
    report = {}
    if "--edge-march" in sys.argv:
        report["edge_march"] = em = edge_march_passes()
        if not as_json:
            for r in em["laws"]:
                print(f"seed {r['seed']}: one pass edge {r['one_pass_edge']:.6f} ({r['one_pass_s']:.2f} s, "
                      f"{r['one_pass_steps']} steps); default {r['default_edge']:.6f} "
                      f"({r['default_s']:.2f} s, {r['default_steps']} steps)")
            print(f"ratio default / one pass: {em['ratio']:.2f}x")
    if "--small-solve" in sys.argv:
        report["small_solve"] = ss = small_solve()
        if not as_json:
            print(f"D (D + S)^-1, 10^4 2x2 systems, complex S: LAPACK {ss['solve_lapack_ms']:.2f} ms, "
                  f"unrolled {ss['solve_unrolled_ms']:.2f} ms, ratio {ss['ratio_solve']:.1f}x; real S: "
                  f"LAPACK {ss['solve_real_lapack_ms']:.2f} ms, unrolled "
                  f"{ss['solve_real_unrolled_ms']:.2f} ms, ratio {ss['ratio_solve_real']:.1f}x")
            print(f"moment sum w B (x) B: einsum {ss['moment_einsum_ms']:.2f} ms, matmul "
                  f"{ss['moment_matmul_ms']:.2f} ms, ratio {ss['ratio_moment']:.1f}x")
            for key, r in ss["runs"].items():
                print(f"delta_nn m = 2, T = 40, {key:6s}: {r['wall_s']:.1f} s, delta_nn {r['delta_nn']:.4g} "
                      f"({r['status']}), load {r['load_before']:.1f}")
            print(f"ratio end to end: {ss['ratio_end_to_end']:.2f}x (same answer: {ss['same_answer']})")
    special = ("--simulator", "--edge-march", "--small-solve")
    if not any(a in sys.argv for a in special) or "--speed" in sys.argv:
        report["speed"] = speed()
        if not as_json:
            sp = report["speed"]
            for key in ("xtol_0.25_serial", "xtol_1_serial", "xtol_1_pool"):
                r = sp[key]
                print(f"{key:17s}: wall {r['wall_s']:6.1f} s, cpu {r['cpu_s']:6.1f} s, "
                      f"{r['dmft_runs']} DMFT runs, "
                      f"delta_nn {r['delta_nn']:.4g} ± {r['stderr']:.2g} ({r['status']}), "
                      f"load {r['load_before']:.1f}->{r['load_after']:.1f}", flush=True)
            print(f"ratio xtol 0.25 -> 1.0: wall {sp['ratio_xtol_wall']:.2f}x, "
                  f"cpu {sp['ratio_xtol_cpu']:.2f}x, "
                  f"DMFT runs {sp['ratio_xtol_dmft_runs']:.2f}x")
            op = sp["outlier_points"]
            print(f"outliers, 16 laws: 400 points {op['npoints_400_s']:.2f} s, 100 points "
                  f"{op['npoints_100_s']:.2f} s, ratio {op['ratio']:.2f}x, identical: "
                  f"{op['identical_edges_and_outliers']}")
            print(f"ratio serial -> pool: wall {sp['ratio_pool_wall']:.2f}x (answer identical: "
                  f"{sp['pool_answer_identical']}); both: {sp['ratio_both_wall']:.2f}x")
    if "--simulator" in sys.argv:
        report["simulator"] = simulator_comparison(as_json)
    if as_json:
        print(json.dumps(report, indent=1))


def simulator_comparison(as_json: bool) -> dict:
    wall, th = run_cli()
    evaluated = sorted({float(e["delta"]) for e in th.get("evaluations", [])})
    per_step = {d: time_per_step(d) for d in DS}

    def run_time(d: int, delta: float) -> float:
        return per_step[d] * STEPS * delta / DELTA_TIMED

    full = sum(TRIALS * run_time(d, x) for d in DS for x in evaluated)
    single = sum(10 * run_time(DS[0], x) for x in evaluated)
    report = {
        "threshold_cli": {"command": "dmftsolve " + " ".join(CLI), "wall_s": wall,
                          "returncode": th.get("returncode"), "bracket": th.get("bracket"),
                          "delta_nn": th.get("delta_nn"), "status": th.get("status"),
                          "delta_points": evaluated},
        "simulator": {"seconds_per_step_at_delta10": per_step, "steps_per_run": STEPS,
                      "trials_per_point": TRIALS, "d": list(DS),
                      "estimate_s": full, "estimate_single_d_10_trials_s": single},
        "ratio_full": full / wall if wall > 0 else None,
        "ratio_single_d": single / wall if wall > 0 else None,
    }
    if as_json:
        return report
    print(f"dmftsolve threshold ({' '.join(CLI[1:])}):")
    print(f"  wall {wall:.1f} s, status {th.get('status')}, bracket {th.get('bracket')}, "
          f"{len(evaluated)} δ points")
    print("simulator, seconds per GD step at δ=10 (float32, 1 BLAS thread): "
          + ", ".join(f"d={d}: {per_step[d] * 1e3:.2f} ms" for d in DS))
    print(f"simulator estimate, {len(evaluated)} δ points × {TRIALS} trials × {STEPS} steps × "
          f"d in {DS}: {full:.0f} s  -> ratio {report['ratio_full']:.0f}x")
    print(f"lower bound, d={DS[0]} only, 10 trials: {single:.0f} s  -> ratio "
          f"{report['ratio_single_d']:.1f}x")
    return report


if __name__ == "__main__":
    main()
