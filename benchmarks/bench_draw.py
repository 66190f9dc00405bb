"""Benchmark: one DMFT draw of ``dmftsolve transition``, a baseline against the default.

A draw is a forced DMFT solve (:func:`dmftsolve.finite_d.solve_draw`) with reflection-paired kernel
paths; its cost is reading the stored path history each step. This times the same draw (a start too
small to escape, so every draw runs all ``T`` steps) under two settings, in the same process and one
BLAS thread, ``--repeat`` times each, interleaved, and prints the median times and their ratio, for
widths 1 and 2:

* ``--compare dtype`` (default): float64 path history (the baseline) against float32;
* ``--compare regression``: the plain Stein mean (the baseline) against the responses by
  regression on the innovations (``TransitionSettings.stein_regression``);
* ``--compare compact``: every path's ``g`` history read each step (``history="full"``, the
  baseline) against the memory terms at the non-null innovations only (``history="compact"``);
* ``--compare support``: the parameter side reading every row of the ``R`` and ``Q`` stores (the
  baseline: the Stein estimator declaring ``zero_at_null = False``) against reading the rows of
  the non-null innovations only, where its ``Γ`` rows can be non-zero.

Run ``python benchmarks/bench_draw.py [--compare dtype|regression|compact|support] [--d 2000] [--steps 400]
[--repeat 3] [--paths 20000] [--widths 1,2] [--null-rtol X] [--json]``; widths 1–4. Each width also
reports the draw's non-null innovations at step T (``nonnull_innovations``: what a step's memory
work scales with), and ``--null-rtol`` sets the draws' zero-variance cut-off (default: the width's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics.stein import SteinResponse
from dmftsolve.finite_d import TransitionSettings, resolve_settings, solve_draw

#: width -> δ below the theory's δ_50 (GeLU on ``z² − 1``, d = 2000: 7.3 at m = 1, 3.8 at m = 2,
#: 3.2 at m = 3, 3.0 at m = 4)
DELTA = {1: 5.5, 2: 2.5, 3: 2.2, 4: 2.0}

#: comparison -> (baseline, default): each a (label, path dtype, regress, history, read every row)
VARIANTS = {
    "dtype": (("float64", "float64", True, "compact", False), ("float32", "float32", True, "compact", False)),
    "regression": (("plain mean", "float32", False, "compact", False),
                   ("regression", "float32", True, "compact", False)),
    "compact": (("full history", "float32", True, "full", False),
                ("compact history", "float32", True, "compact", False)),
    "support": (("every row", "float32", True, "compact", True),
                ("non-null rows", "float32", True, "compact", False)),
}


@contextlib.contextmanager
def _every_row(on: bool) -> Iterator[None]:
    """The Stein estimator declaring ``zero_at_null = False`` while ``on``: the parameter side
    then reads every row of the kernel stores."""
    old = SteinResponse.zero_at_null
    SteinResponse.zero_at_null = old and not on
    try:
        yield
    finally:
        SteinResponse.zero_at_null = old


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", choices=sorted(VARIANTS), default="dtype")
    ap.add_argument("--d", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--paths", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--widths", default="1,2")
    ap.add_argument("--null-rtol", type=float, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    widths = [int(x) for x in a.widths.split(",")]
    if any(m not in DELTA for m in widths):
        ap.error(f"--widths must be among {sorted(DELTA)}, got {a.widths!r}")
    base, new = VARIANTS[a.compare]
    out: dict = {"compare": a.compare, "d": a.d, "steps": a.steps, "paths": a.paths, "repeat": a.repeat,
                 "baseline": base[0], "default": new[0], "null_rtol": a.null_rtol}
    with threadpool_limits(1):
        for m in widths:
            p = Problem.build(target="z**2 - 1", activation="gelu", m=m, eta=0.5, steps=a.steps)
            m0 = np.full((1, m), 0.05)
            times: dict[str, list[float]] = {base[0]: [], new[0]: []}
            nonnull = 0
            for _ in range(a.repeat):
                for label, dtype, reg, hist, every in (base, new):
                    s = resolve_settings(TransitionSettings(n_paths=a.paths, path_dtype=dtype,
                                                            stein_regression=reg, history=hist,
                                                            null_rtol=a.null_rtol), p)
                    with _every_row(every):
                        t0 = time.perf_counter()
                        r = solve_draw(p, DELTA[m], a.d, 0, m0, s, a.steps)
                        times[label].append(time.perf_counter() - t0)
                    if not r.ok:
                        raise SystemExit(f"draw failed (m = {m}, {label}): {r.message}")
                    null = np.asarray(r.diagnostics["zero_variance_innovations"])
                    nonnull = int((a.steps + 1) * m - null.sum())
            med = {label: float(np.median(v)) for label, v in times.items()}
            out[f"m{m}"] = {"seconds": med, "ratio_baseline_over_default": med[base[0]] / med[new[0]],
                            "nonnull_innovations": nonnull, "null_rtol": s.null_rtol}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"GeLU, z² − 1, d = {a.d}, T = {a.steps}, {a.paths} kernel paths, one draw to step T")
        for key, v in out.items():
            if key.startswith("m") and isinstance(v, dict):
                sec = v["seconds"]
                print(f"m = {key[1:]}: {base[0]} {sec[base[0]]:.2f} s, {new[0]} {sec[new[0]]:.2f} s, "
                      f"ratio {v['ratio_baseline_over_default']:.2f}; {v['nonnull_innovations']} non-null "
                      f"innovations (null_rtol {v['null_rtol']:g})")
    return out


if __name__ == "__main__":
    main()
