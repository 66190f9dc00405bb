"""Benchmark the simulator's GD step and its Hessian eigensolver.

1. One GD step (:func:`dmftsolve.simulation.simulator.gd_step`, a single blocked pass
   over ``X``) at ``d = 4000``, ``δ = 6``, ``m = 1``, as a ratio to the two
   bare BLAS matrix-vector products ``X @ w`` and ``X.T @ g`` on the same
   ``X``, timed in the same process (best of several repeats), in float64
   and float32, for several block sizes, with BLAS on one thread (as
   ``simulate`` runs it) and with BLAS's default threads. A ratio below 1
   means the blocked pass beats reading ``X`` twice.
2. Lanczos (``eigsh``) extreme eigenpairs of the Hessian against dense
   ``eigh`` at ``d = 2000``: time and largest eigenvalue difference.
3. A batch of ``B`` trials sharing ``X`` (:func:`dmftsolve.simulation.kernels.gd_step_batch`,
   one GEMM per block of ``X``) against ``B`` per-trial GD steps on the same
   ``X`` (baseline timed first, then interleaved, best of several repeats,
   one BLAS thread): the speed-up ratio per trial-step, and the cost of a
   batched trial-step in units of the two bare matrix-vector products. Then
   whole runs, ``simulate_shared(batch=False)`` (baseline, first) against
   ``simulate_shared(batch=True)``, same seeds, with their largest difference.

Run ``python benchmarks/bench_simulator.py [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

import numpy as np
import scipy.linalg
import scipy.sparse.linalg as spla

from dmftsolve import Problem
from dmftsolve.simulation.kernels import (
    blas_threads,
    default_block_rows,
    dense_hessian_matrix,
    gd_step,
    gd_step_batch,
    hessian_operator,
    make_grad_rows,
)
from dmftsolve.simulation.simulator import simulate_shared


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def interleaved_best(candidates: dict[str, Callable[[], object]], repeats: int,
                     warmup: int = 2) -> dict[str, float]:
    """Best wall time of each candidate over ``repeats`` interleaved rounds (after warm-up)."""
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    best = {name: float("inf") for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def bench_step(d: int, delta: float, dtype: type, repeats: int, blocks: list[int | None],
               threads: int | None, seed: int = 0) -> list[dict]:
    """Time one GD step against the two bare matvecs; one row per block size."""
    rng = np.random.default_rng(seed)
    n = int(round(delta * d))
    problem = Problem.build(target="z**2", activation="gelu", eta=0.2)
    X = np.empty((n, d), dtype=dtype)
    rng.standard_normal(out=X, dtype=dtype)
    y = np.asarray(X[:, 0], dtype=np.float64) ** 2
    W = rng.standard_normal((d, 1)) / np.sqrt(d)
    w = W.astype(dtype)
    g = rng.standard_normal((n, 1)).astype(dtype)
    rows = make_grad_rows(problem, y)
    V = np.empty((n, 1), dtype=dtype)
    candidates: dict[str, Callable[[], object]] = {"X@w": lambda: X @ w, "X.T@g": lambda: X.T @ g}
    for b in blocks:
        candidates[f"step:{b}"] = (
            lambda b=b: gd_step(problem, X, y, W, block_rows=b, rows=rows, V_out=V))
    # interleaved rounds, best of each, so that slow phases hit every candidate alike
    with blas_threads(threads):
        best = interleaved_best(candidates, repeats)
    t_mv, t_rmv = best["X@w"], best["X.T@g"]
    bare = t_mv + t_rmv
    out = []
    for b in blocks:
        t_step = best[f"step:{b}"]
        out.append({
            "dtype": np.dtype(dtype).name, "d": d, "n": n,
            "blas_threads": "default" if threads is None else threads,
            "block_rows": b if b is not None else default_block_rows(d, np.dtype(dtype).itemsize),
            "default": b is None,
            "X_matvec_s": t_mv, "XT_matvec_s": t_rmv, "step_s": t_step, "ratio": t_step / bare,
            "GB_per_s_step": X.nbytes / t_step / 1e9,
        })
    return out


def bench_lanczos(d: int, delta: float, n_eigs: int, seed: int = 0) -> dict:
    """Lanczos extreme eigenpairs vs dense ``eigh`` for the Hessian at a random ``W``."""
    rng = np.random.default_rng(seed)
    n = int(round(delta * d))
    problem = Problem.build(target="z**2", activation="quad", eta=0.05)
    X = rng.standard_normal((n, d))
    y = X[:, 0] ** 2
    W = rng.standard_normal((d, 1)) / np.sqrt(d)
    t0 = time.perf_counter()
    with blas_threads(1):  # as simulate runs it
        op = hessian_operator(problem, X, y, W)
        v0 = rng.standard_normal(d)
        lo = spla.eigsh(op, k=n_eigs, which="SA", v0=v0, tol=1e-10, return_eigenvectors=False)
        hi = spla.eigsh(op, k=n_eigs, which="LA", v0=v0, tol=1e-10, return_eigenvectors=False)
    t_lanczos = time.perf_counter() - t0
    t0 = time.perf_counter()
    H = dense_hessian_matrix(problem, X, y, W)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    w = scipy.linalg.eigh(H, eigvals_only=True)
    t_eigh = time.perf_counter() - t0
    diff = max(np.abs(np.sort(lo) - w[:n_eigs]).max(), np.abs(np.sort(hi) - w[-n_eigs:]).max())
    return {"d": d, "n": n, "n_eigs": n_eigs, "lanczos_s": t_lanczos,
            "dense_build_s": t_build, "dense_eigh_s": t_eigh, "max_eig_diff": float(diff),
            "min_eig": float(w[0]), "max_eig": float(w[-1])}


def bench_batch(d: int, delta: float, batches: list[int], repeats: int, seed: int = 0) -> list[dict]:
    """Per trial-step time of ``B`` per-trial GD steps vs one batched step of ``B`` trials on one ``X``."""
    rng = np.random.default_rng(seed)
    n = int(round(delta * d))
    problem = Problem.build(target="z**2", activation="gelu", eta=0.2)
    X = rng.standard_normal((n, d))
    y = X[:, 0] ** 2
    w = rng.standard_normal((d, 1)) / np.sqrt(d)
    g = rng.standard_normal((n, 1))
    out = []
    for B in batches:
        Ws = [rng.standard_normal((d, 1)) / np.sqrt(d) for _ in range(B)]
        Wcat = np.concatenate(Ws, axis=1)
        rows1, rowsB = make_grad_rows(problem, y), make_grad_rows(problem, y, trials=B)
        V1, VB = np.empty((n, 1)), np.empty((n, B))
        candidates: dict[str, Callable[[], object]] = {
            "per_trial": lambda Ws=Ws, rows1=rows1, V1=V1: [
                gd_step(problem, X, y, W, rows=rows1, V_out=V1) for W in Ws],
            "batch": lambda Wcat=Wcat, rowsB=rowsB, VB=VB: gd_step_batch(
                problem, X, y, Wcat, rows=rowsB, V_out=VB),
            "bare": lambda: (X @ w, X.T @ g),
        }
        with blas_threads(1):
            best = interleaved_best(candidates, repeats)
        out.append({"d": d, "n": n, "trials": B, "per_trial_s": best["per_trial"] / B,
                    "batch_s": best["batch"] / B, "speedup": best["per_trial"] / best["batch"],
                    "batch_in_gemv_pairs": best["batch"] / B / best["bare"],
                    "per_trial_in_gemv_pairs": best["per_trial"] / B / best["bare"]})
    return out


def bench_shared_run(d: int, delta: float, trials: int, steps: int, seed: int = 0) -> dict:
    """Whole ``simulate_shared`` runs, trial by trial (baseline, first) and batched; same seeds."""
    problem = Problem.build(target="z**2", activation="gelu", eta=0.2, steps=steps)
    etas = list(np.linspace(0.1, 0.3, trials))
    t0 = time.perf_counter()
    base = simulate_shared(problem, d, delta, seed=seed, trials=trials, eta=etas, batch=False)
    t_base = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = simulate_shared(problem, d, delta, seed=seed, trials=trials, eta=etas, batch=True)
    t_fast = time.perf_counter() - t0
    diff = float(np.max(np.abs(base.overlaps - fast.overlaps)))
    return {"d": d, "n": int(round(delta * d)), "trials": trials, "steps": steps,
            "per_trial_s": t_base, "batch_s": t_fast, "speedup": t_base / t_fast,
            "max_overlap_diff": diff}


def blas_info() -> dict:
    info: dict = {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                  "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                  "cpu_count": os.cpu_count()}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        info["threadpoolctl"] = "not installed"
    else:
        info["threadpools"] = [{k: p.get(k) for k in ("internal_api", "num_threads", "version",
                                                      "architecture")} for p in threadpool_info()]
    return info


def _table(headers: list[str], rows: list[list]) -> str:
    cells = [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, default=4000, help="dimension for the GD step (4000)")
    parser.add_argument("--delta", type=float, default=6.0, help="sample ratio n/d (6)")
    parser.add_argument("--repeats", type=int, default=7, help="repeats; the best is kept (7)")
    parser.add_argument("--blocks", default="default,64,128,256,512",
                        help="comma list of block sizes in rows ('default' = the library's)")
    parser.add_argument("--lanczos-d", type=int, default=2000,
                        help="dimension for Lanczos vs dense eigh (2000; 0 to skip)")
    parser.add_argument("--n-eigs", type=int, default=4, help="extreme eigenpairs per end (4)")
    parser.add_argument("--batches", default="1,4,16,64",
                        help="trial batch sizes for part 3 (comma list; empty to skip)")
    parser.add_argument("--run-d", type=int, default=1000,
                        help="dimension of the whole-run comparison of part 3 (1000; 0 to skip)")
    parser.add_argument("--skip-step", action="store_true", help="skip part 1 (the GD step)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    blocks = [None if b.strip() == "default" else int(b) for b in args.blocks.split(",")]

    steps = []
    for threads in () if args.skip_step else (1, None):
        for dtype in (np.float64, np.float32):
            steps += bench_step(args.d, args.delta, dtype, args.repeats, blocks, threads)
    lanczos = bench_lanczos(args.lanczos_d, 3.0, args.n_eigs) if args.lanczos_d else None
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    batch = bench_batch(args.d, args.delta, batches, args.repeats) if batches else []
    run = bench_shared_run(args.run_d, 4.0, 16, 30) if args.run_d else None
    report = {"gd_step": steps, "lanczos_vs_eigh": lanczos, "batch_step": batch, "batch_run": run,
              "blas": blas_info()}
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if steps:
        print(f"One GD step, GeLU single neuron, d={args.d}, delta={args.delta:g}, m=1 "
              f"(best of {args.repeats}); ratio = step / (X@w + X.T@g)")
        print(_table(["BLAS threads", "dtype", "block_rows", "X@w [ms]", "X.T@g [ms]", "step [ms]",
                      "ratio", "GB/s"],
                     [[r["blas_threads"], r["dtype"], f"{r['block_rows']}{'*' if r['default'] else ''}",
                       1e3 * r["X_matvec_s"], 1e3 * r["XT_matvec_s"], 1e3 * r["step_s"], r["ratio"],
                       r["GB_per_s_step"]] for r in steps]))
        print("(* = the library default)")
    if batch:
        print(f"\nTrials sharing X, GeLU single neuron, d={args.d}, delta={args.delta:g}, one BLAS thread "
              f"(best of {args.repeats}); per trial-step; pairs = in units of X@w + X.T@g")
        print(_table(["trials", "per-trial [ms]", "batched [ms]", "speed-up", "per-trial [pairs]",
                      "batched [pairs]"],
                     [[r["trials"], 1e3 * r["per_trial_s"], 1e3 * r["batch_s"], r["speedup"],
                       r["per_trial_in_gemv_pairs"], r["batch_in_gemv_pairs"]] for r in batch]))
    if run:
        print(f"\nWhole runs, simulate_shared, d={run['d']}, n={run['n']}, {run['trials']} trials, "
              f"{run['steps']} steps: trial by trial {run['per_trial_s']:.3g} s, batched "
              f"{run['batch_s']:.3g} s, speed-up {run['speedup']:.3g}x, "
              f"max |overlap difference| {run['max_overlap_diff']:.2g}")
    if lanczos:
        print(f"\nHessian extreme eigenpairs, quad neuron, d={lanczos['d']}, n={lanczos['n']}, "
              f"{lanczos['n_eigs']} per end")
        print(_table(["Lanczos [s]", "dense build [s]", "dense eigh [s]", "max |Δλ|"],
                     [[lanczos["lanczos_s"], lanczos["dense_build_s"], lanczos["dense_eigh_s"],
                       lanczos["max_eig_diff"]]]))
    print("\nBLAS:", json.dumps(report["blas"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
