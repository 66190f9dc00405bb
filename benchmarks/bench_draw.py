"""Benchmark: one DMFT draw of ``dmftsolve transition``, float64 against float32 path history.

A draw is a forced DMFT solve (:func:`dmftsolve.thresholds.finite_d_transition.solve_draw`)
with 2·10⁴ reflection-paired kernel paths; its cost is reading the path history twice a step
(``O(N T²)`` in all). This times the same draw (a start too small to escape, so every draw
runs all ``T`` steps) with ``path_dtype="float64"`` (the baseline) and ``"float32"``, in the
same process and one BLAS thread, ``--repeat`` times each, interleaved, and prints the median
times and their ratio, for widths 1 and 2.

Run ``python benchmarks/bench_draw.py [--d 2000] [--steps 400] [--repeat 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.thresholds.finite_d_transition import TransitionSettings, solve_draw

#: width -> δ below the theory's δ_50 (GeLU on ``z² − 1``, d = 2000: 7.3 at m = 1, 3.8 at m = 2)
DELTA = {1: 5.5, 2: 2.5}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--paths", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--widths", default="1,2")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    out: dict = {"d": a.d, "steps": a.steps, "paths": a.paths, "repeat": a.repeat}
    with threadpool_limits(1):
        for m in (int(x) for x in a.widths.split(",")):
            p = Problem.build(target="z**2 - 1", activation="gelu", m=m, eta=0.5, steps=a.steps)
            m0 = np.full((1, m), 0.05)
            times: dict[str, list[float]] = {"float64": [], "float32": []}
            for _ in range(a.repeat):
                for dt in times:
                    s = TransitionSettings(n_paths=a.paths, path_dtype=dt)
                    t0 = time.perf_counter()
                    r = solve_draw(p, DELTA[m], a.d, 0, m0, s, a.steps)
                    times[dt].append(time.perf_counter() - t0)
                    if not r.ok:
                        raise SystemExit(f"draw failed (m = {m}, {dt}): {r.message}")
            med = {dt: float(np.median(v)) for dt, v in times.items()}
            out[f"m{m}"] = {"seconds": med, "ratio_float64_over_float32": med["float64"] / med["float32"]}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"GeLU, z² − 1, d = {a.d}, T = {a.steps}, {a.paths} kernel paths, one draw to step T")
        for key, v in out.items():
            if key.startswith("m"):
                print(f"m = {key[1:]}: float64 {v['seconds']['float64']:.2f} s, float32 "
                      f"{v['seconds']['float32']:.2f} s, ratio {v['ratio_float64_over_float32']:.2f}")
    return out


if __name__ == "__main__":
    main()
