"""Benchmark: the predicted success curve (theory) against the GD sweep that measures it.

One ``d``, 8 values of δ, ``--units`` draws (theory) and trials (GD) per δ, the same horizon
``T`` for both, in the same process, one BLAS thread, theory first then GD:

* theory: :func:`dmftsolve.thresholds.finite_d_transition.transition` (default construction
  ``"forced"``: one DMFT run of ``T`` steps with ``N = 2·10⁴`` paths per draw, whatever ``d``;
  ``--construction finite_n`` uses ``N = δd``);
* GD: :func:`dmftsolve.simulation.sweeps.sweep` (float32 data, one worker).

Equal error: both give a binomial success fraction per δ from the same number of units (the
theory's ``m_0`` is stratified, so its error is at most the binomial one), so the curve "to
the same error" costs the same number of units; the ratio of the two wall times is reported,
with the time per unit of each. The cost per unit scales like ``N T²`` (theory, ``N`` fixed for
``"forced"``) and ``δ d² T`` (GD): the ratio falls like ``1/d²`` as ``d`` grows.

Run ``python benchmarks/bench_transition.py [--d 1000] [--units 2] [--steps 400]
[--construction forced] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dmftsolve import Problem
from dmftsolve.simulation.sweeps import sweep
from dmftsolve.thresholds.finite_d_transition import TransitionSettings, transition

DELTAS = (5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 9.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--units", type=int, default=2, help="draws (theory) = trials (GD) per δ")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--construction", default="forced", choices=("forced", "quenched", "finite_n", "initial"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=args.steps)
    t0 = time.perf_counter()
    c = transition(p, args.d, DELTAS, settings=TransitionSettings(draws=args.units, seed=0,
                                                                  construction=args.construction),
                   throw=False)
    t_theory = time.perf_counter() - t0
    t0 = time.perf_counter()
    sw = sweep(p, args.d, DELTAS, trials=args.units, seed=0, progress=False, dtype=np.float32)
    t_gd = time.perf_counter() - t0
    units = len(DELTAS) * args.units
    out = {"d": args.d, "steps": args.steps, "construction": args.construction, "deltas": DELTAS,
           "units_per_delta": args.units,
           "theory_seconds": t_theory, "gd_seconds": t_gd, "theory_per_unit": t_theory / units,
           "gd_per_unit": t_gd / units, "ratio_theory_over_gd": t_theory / t_gd,
           "theory_p": c.p.tolist(), "gd_p": sw.success_rate.tolist()}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"d = {args.d}, T = {args.steps}, 8 δ × {args.units} units")
        print(f"theory ({args.construction}): {t_theory:.1f} s  ({t_theory / units:.2f} s per draw)")
        print(f"GD sweep (float32):     {t_gd:.1f} s  ({t_gd / units:.2f} s per trial)")
        print(f"time ratio theory / GD at equal error: {t_theory / t_gd:.2f}")


if __name__ == "__main__":
    main()
