"""Benchmark: one DMFT draw of ``dmftsolve transition``, a baseline against the default.

A draw is a forced DMFT solve (:func:`dmftsolve.finite_d.solve_draw`)
with 2·10⁴ reflection-paired kernel paths; its cost is reading the stored path history each
step (``O(N T²)`` in all). This times the same draw (a start too small to escape, so every
draw runs all ``T`` steps) under two settings, in the same process and one BLAS thread,
``--repeat`` times each, interleaved, and prints the median times and their ratio, for
widths 1 and 2:

* ``--compare dtype`` (default): float64 path history (the baseline) against float32;
* ``--compare history``: the ``g`` history read twice a step (the baseline, before 0.4.0)
  against once, in cache-sized column blocks (``_Run._history_pass``), both float32;
* ``--compare regression``: the plain Stein mean (the baseline, before 0.5.0) against the
  responses by regression on the innovations (``TransitionSettings.stein_regression``);
* ``--compare gemv``: the history pass with one matrix product per cached block (the
  baseline, 0.5.0) against one matrix-vector product per neuron on blocks of about 4 MiB
  (``_Run.GEMV_MAX_WIDTH``);
* ``--compare compact``: every path's ``g`` history read each step (``history="full"``, the
  baseline, 0.6) against the memory terms at the non-null innovations only
  (``history="compact"``, the default since 0.7.0).

Run ``python benchmarks/bench_draw.py [--compare dtype|history|regression|gemv|compact]
[--d 2000] [--steps 400] [--repeat 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import _Run
from dmftsolve.finite_d import TransitionSettings, solve_draw

#: width -> δ below the theory's δ_50 (GeLU on ``z² − 1``, d = 2000: 7.3 at m = 1, 3.8 at m = 2)
DELTA = {1: 5.5, 2: 2.5}

#: comparison -> (baseline, default): each a (label, path dtype, fuse the history pass, regress,
#: widths read by matrix-vector products in the history pass, history)
VARIANTS = {
    "dtype": (("float64", "float64", True, True, 4, "full"), ("float32", "float32", True, True, 4, "full")),
    "history": (("two passes", "float32", False, True, 4, "full"),
                ("one pass", "float32", True, True, 4, "full")),
    "regression": (("plain mean", "float32", True, False, 4, "full"),
                   ("regression", "float32", True, True, 4, "full")),
    "gemv": (("matrix products", "float32", True, True, 0, "full"),
             ("matrix-vector", "float32", True, True, 4, "full")),
    "compact": (("full history", "float32", True, True, 4, "full"),
                ("compact history", "float32", True, True, 4, "compact")),
}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", choices=sorted(VARIANTS), default="dtype")
    ap.add_argument("--d", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--paths", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--widths", default="1,2")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    base, new = VARIANTS[a.compare]
    out: dict = {"compare": a.compare, "d": a.d, "steps": a.steps, "paths": a.paths, "repeat": a.repeat,
                 "baseline": base[0], "default": new[0]}
    try:
        with threadpool_limits(1):
            for m in (int(x) for x in a.widths.split(",")):
                p = Problem.build(target="z**2 - 1", activation="gelu", m=m, eta=0.5, steps=a.steps)
                m0 = np.full((1, m), 0.05)
                times: dict[str, list[float]] = {base[0]: [], new[0]: []}
                for _ in range(a.repeat):
                    for label, dtype, fuse, reg, gemv, hist in (base, new):
                        _Run.fuse_history = fuse
                        _Run.GEMV_MAX_WIDTH = gemv
                        s = TransitionSettings(n_paths=a.paths, path_dtype=dtype, stein_regression=reg,
                                               history=hist)
                        t0 = time.perf_counter()
                        r = solve_draw(p, DELTA[m], a.d, 0, m0, s, a.steps)
                        times[label].append(time.perf_counter() - t0)
                        if not r.ok:
                            raise SystemExit(f"draw failed (m = {m}, {label}): {r.message}")
                med = {label: float(np.median(v)) for label, v in times.items()}
                out[f"m{m}"] = {"seconds": med, "ratio_baseline_over_default": med[base[0]] / med[new[0]]}
    finally:
        _Run.fuse_history = True
        _Run.GEMV_MAX_WIDTH = 4
    if a.json:
        print(json.dumps(out))
    else:
        print(f"GeLU, z² − 1, d = {a.d}, T = {a.steps}, {a.paths} kernel paths, one draw to step T")
        for key, v in out.items():
            if key.startswith("m") and isinstance(v, dict):
                sec = v["seconds"]
                print(f"m = {key[1:]}: {base[0]} {sec[base[0]]:.2f} s, {new[0]} {sec[new[0]]:.2f} s, "
                      f"ratio {v['ratio_baseline_over_default']:.2f}")
    return out


if __name__ == "__main__":
    main()
