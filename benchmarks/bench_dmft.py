"""Benchmark of the DMFT solver: single GeLU neuron on y = z², 10⁵ paths.

Reports the time of 100 and 200 steps (target: 100 steps < 5 s; 200 steps
<= 5 × 100 steps, i.e. no worse than T²), for the default Stein responses
with replicate errors and with cheap batch errors, the pathwise method on a
shorter run, and the peak RSS of a 1000-step run (in a subprocess).

Issue 10 ratios (``--ratios``, run first; baseline in the same process, same inputs):

* the per-step cosine: the scalar ``largest_cosine`` called once per batch (B = 20) plus once
  for all paths, as the solver did, against one vectorised ``largest_cosines`` call on the
  same stack (201 steps of the threshold's DMFT, m = k = 1, and m = 2, k = 1);
* a threshold's DMFT run (restricted GeLU on y = z², η = 0.5, δ = 21, 10⁴ paths, 200 steps,
  batch errors, paths kept at 100 and 200) with the Monte Carlo test loss against
  ``test_loss="none"`` (what the threshold search now asks for).

Run: python benchmarks/bench_dmft.py [--ratios] [--skip-1000]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import numpy as np

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import largest_cosines, solve_dmft


def _scalar_cosine(M: np.ndarray, Q: np.ndarray) -> float:
    """The solver's former per-batch cosine (verbatim, for the baseline)."""
    M = np.atleast_2d(M)
    G = M.T @ M + Q
    G = (G + G.T) / 2
    w, U = np.linalg.eigh(G)
    scale = max(float(w.max(initial=0.0)), 1e-300)
    keep = w > 1e-12 * scale
    if not keep.any():
        return 0.0
    Gih = (U[:, keep] / np.sqrt(w[keep])) @ U[:, keep].T
    s = np.linalg.svd(M @ Gih, compute_uv=False)
    return float(min(1.0, s.max(initial=0.0)))


def cosine_ratio(k: int, m: int, steps: int = 201, batches: int = 20) -> dict:
    rng = np.random.default_rng(0)
    M = rng.standard_normal((steps, batches + 1, k, m))
    A = rng.standard_normal((steps, batches + 1, m, m))
    Q = A @ np.swapaxes(A, -1, -2)
    t0 = time.perf_counter()
    loop = [[_scalar_cosine(M[t, b], Q[t, b]) for b in range(batches + 1)] for t in range(steps)]
    t_loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    vec = [largest_cosines(M[t], Q[t]) for t in range(steps)]
    t_vec = time.perf_counter() - t0
    assert np.allclose(np.array(loop), np.array(vec), rtol=1e-10, atol=1e-12)
    return {"k": k, "m": m, "loop_s": t_loop, "vectorised_s": t_vec, "ratio": t_loop / t_vec}


def skip_test_loss_ratio(repeats: int = 3) -> dict:
    p = Problem.build(target="z**2", activation="gelu", eta=0.5, hold_zero=(0,))
    kw = dict(n_paths=10_000, seed=0, steps=200, errors="batch", keep_samples_at=(100, 200))
    solve_dmft(p, 21.0, **(kw | {"steps": 5, "keep_samples_at": ()}))  # warm-up (compiled derivatives)
    best = {}
    for source in ("mc", "none"):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            solve_dmft(p, 21.0, test_loss=source, **kw)
            times.append(time.perf_counter() - t0)
        best[source] = min(times)
    return {"mc_s": best["mc"], "none_s": best["none"], "ratio": best["mc"] / best["none"]}


def ratios() -> dict:
    out = {"cosine_m1": cosine_ratio(1, 1), "cosine_m2": cosine_ratio(1, 2),
           "test_loss": skip_test_loss_ratio()}
    for key in ("cosine_m1", "cosine_m2"):
        r = out[key]
        print(f"cosine per step (k={r['k']}, m={r['m']}, 21 estimates × 201 steps): "
              f"loop {r['loop_s']:.3f} s, "
              f"vectorised {r['vectorised_s']:.3f} s, ratio {r['ratio']:.1f}x", flush=True)
    r = out["test_loss"]
    print(f"threshold DMFT run (δ=21, 1e4 paths, 200 steps): test_loss='mc' {r['mc_s']:.2f} s, "
          f"'none' {r['none_s']:.2f} s, ratio {r['ratio']:.2f}x (best of 3)", flush=True)
    return out


def problem(steps: int) -> Problem:
    return Problem.build(target="z**2", activation="gelu", eta=0.2, steps=steps, hold_zero=(0,))


def timed(steps: int, **kw) -> float:
    t0 = time.perf_counter()
    r = solve_dmft(problem(steps), 4.0, n_paths=100_000, seed=0, **kw)
    assert r.ok
    return time.perf_counter() - t0


def rss_run(steps: int, errors: str) -> dict:
    code = (
        "import resource, time, json\n"
        "from dmftsolve import Problem\n"
        "from dmftsolve.dynamics.dmft import solve_dmft\n"
        f"p = Problem.build(target='z**2', activation='gelu', eta=0.2, steps={steps}, hold_zero=(0,))\n"
        "t0 = time.perf_counter()\n"
        f"r = solve_dmft(p, 4.0, n_paths=100_000, seed=0, errors='{errors}')\n"
        "print(json.dumps({'seconds': time.perf_counter() - t0, 'ok': r.ok, "
        "'peak_rss_GiB': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    report = {}
    if "--ratios" in sys.argv:
        report["ratios"] = ratios()
        if "--only-ratios" in sys.argv:
            print(json.dumps(report, indent=1))
            return
    for errors in ("batch", "replicate"):
        t100 = timed(100, errors=errors)
        t200 = timed(200, errors=errors)
        report[f"stein/{errors}"] = {"100 steps s": t100, "200 steps s": t200,
                                     "ratio": t200 / t100}
        print(f"stein, errors={errors:9s}: 100 steps {t100:6.2f} s, 200 steps {t200:6.2f} s, "
              f"ratio {t200 / t100:.2f} (target <= 5)", flush=True)
    tp = timed(30, method="pathwise", errors="batch")
    ts = timed(30, errors="batch")
    report["pathwise/batch 30 steps s"] = tp
    print(f"30 steps: pathwise {tp:.2f} s vs stein {ts:.2f} s", flush=True)
    if "--skip-1000" not in sys.argv:
        r = rss_run(1000, "batch")
        report["1000 steps batch"] = r
        print(f"1000 steps (errors=batch): {r['seconds']:.1f} s, peak RSS {r['peak_rss_GiB']:.2f} GiB",
              flush=True)
    print(f"this process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
