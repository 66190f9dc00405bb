"""Benchmark: the cost of the predicted δ_50, against the GD experiment and the fixed grid.

One problem (``--target``, ``--m``), one ``d``, one process, one BLAS thread, in this order:

1. **search** — :func:`dmftsolve.finite_d.transition` without a grid: the
   self-bracketing search to ``--tol``, each draw stopping at its first passage or giving up
   (``give_up_factor``; the default ``dmftsolve transition``);
1b. **search without giving up** — the same search with ``give_up_factor=None`` (0.8's draws):
   every draw that does not pass runs to step ``T``. The two searches see the same draws up to
   where one gives up, so they find the same δ_50 from the same counts unless a draw that gave
   up would have passed (printed: "same counts");
2. **fixed grid** — the main job before the search existed: 6 δ × 16 draws on
   ``--grid``, every draw run to step ``T`` (``stop_at_passage=False``);
3. **GD** — ``--gd-trials`` (16) float32 trials at the search's δ_50
   (:func:`dmftsolve.simulation.simulator.simulate`), timed per trial, twice: run to step
   ``T`` (the GD sweep as the issue that set the 10× target measured it), and the same trials
   stopped at their first passage (``stop_cosine=0.5``; the outcomes are the same), as the
   theory's draws stop: the like-for-like ratio. A third GD cost applies the theory's
   give-up rule to the trials' recorded cosines (every 5 steps;
   :func:`~dmftsolve.finite_d.give_up_step`): the stopped trials' time
   scaled by the steps they would have run, had GD also given up (not exact for GD either).

Equal error: a GD trial and a theory draw each give one Bernoulli outcome of the same success
criterion (the theory's starts are stratified, so its error is at most the binomial one), so
GD measures δ_50 to the search's error with as many trials as the search used draws, placed by
the same search: GD's cost at equal error is the search's draw count times GD's time per trial
near δ_50. Printed: the times, and the ratios GD / search and fixed grid / search, with the two
δ_50 of the theory (they agree within their errors if nothing but the cost changed).

Run ``python benchmarks/bench_transition.py [--d 2000] [--m 1] [--tol 0.15] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.finite_d import TransitionSettings, give_up_step, transition
from dmftsolve.finite_d.stopping import GIVE_UP_FACTOR
from dmftsolve.results import cpu_model
from dmftsolve.simulation.simulator import simulate


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", type=int, default=2000)
    ap.add_argument("--target", default="z**2 - 1")
    ap.add_argument("--activation", default="gelu")
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--eta", type=float, default=0.5)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--tol", type=float, default=0.15)
    ap.add_argument("--start", type=float, default=None)
    ap.add_argument("--grid", default="6,6.5,7,7.5,8,9", help="the fixed grid (6 δ × --grid-draws)")
    ap.add_argument("--grid-draws", type=int, default=16)
    ap.add_argument("--gd-trials", type=int, default=16,
                    help="GD trials timed (default 16; with 4–6, the time per trial moved 4.9–6.4 s "
                         "between runs)")
    ap.add_argument("--paths", type=int, default=20_000)
    ap.add_argument("--skip-grid", action="store_true")
    ap.add_argument("--skip-no-give-up", action="store_true", help="skip the search without giving up")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    p = Problem.build(target=a.target, activation=a.activation, m=a.m, eta=a.eta, steps=a.steps)
    out: dict = {"d": a.d, "target": a.target, "activation": a.activation, "m": a.m, "steps": a.steps,
                 "tol": a.tol, "paths": a.paths, "cpu": cpu_model(), "cores": os.cpu_count()}
    with threadpool_limits(1):
        t0 = time.perf_counter()
        s = TransitionSettings(draws=8, seed=0, tol=a.tol, start=a.start, n_paths=a.paths)
        c = transition(p, a.d, None, settings=s, throw=False)
        out["search_seconds"] = time.perf_counter() - t0
        out["search_draws"] = int(c.draws.sum())
        out["search_delta_50"] = [c.delta_50, c.delta_50_err]
        out["search_status"] = c.status.value
        out["search_given_up_draws"] = int(sum(pt.diagnostics.get("given_up_draws", 0) for pt in c.points))
        if not a.skip_no_give_up:
            t0 = time.perf_counter()
            s0 = TransitionSettings(draws=8, seed=0, tol=a.tol, start=a.start, n_paths=a.paths,
                                    give_up_factor=None)
            c0 = transition(p, a.d, None, settings=s0, throw=False)
            out["no_give_up_seconds"] = time.perf_counter() - t0
            out["no_give_up_draws"] = int(c0.draws.sum())
            out["no_give_up_delta_50"] = [c0.delta_50, c0.delta_50_err]
            out["same_counts"] = bool(np.array_equal(c0.deltas, c.deltas)
                                      and np.array_equal(c0.successes, c.successes)
                                      and np.array_equal(c0.draws, c.draws))
        if not a.skip_grid:
            grid = [float(x) for x in a.grid.split(",")]
            t0 = time.perf_counter()
            gs = TransitionSettings(draws=a.grid_draws, seed=0, n_paths=a.paths, stop_at_passage=False)
            g = transition(p, a.d, grid, settings=gs, throw=False)
            out["grid_seconds"] = time.perf_counter() - t0
            out["grid_draws"] = int(g.draws.sum())
            out["grid_delta_50"] = [g.delta_50, g.delta_50_err]
        x = float(np.round(c.delta_50, 2)) if np.isfinite(c.delta_50) else float(grid[len(grid) // 2])
        t0 = time.perf_counter()
        full = simulate(p, a.d, x, seed=0, trials=a.gd_trials, dtype=np.float32, record_every=5,
                        n_test=512, throw=False)
        per = (time.perf_counter() - t0) / a.gd_trials
        # the steps each trial runs when stopped at its first passage, and when it also gives up
        run_stop, run_give_up = [], []
        for cos in full.cosine:
            above = np.nonzero(cos > 0.5)[0]
            passed = int(full.steps[above[0]]) if above.size else a.steps
            g = give_up_step(cos, a.steps, GIVE_UP_FACTOR, steps=full.steps)
            run_stop.append(passed)
            run_give_up.append(passed if g is None else min(passed, g))
        t0 = time.perf_counter()  # the same trials, each stopped at its first passage
        simulate(p, a.d, x, seed=0, trials=a.gd_trials, dtype=np.float32, record_every=5, n_test=512,
                 stop_cosine=0.5, throw=False)
        per_stop = (time.perf_counter() - t0) / a.gd_trials
    out["gd_seconds_per_trial"] = per
    out["gd_seconds_at_equal_error"] = per * out["search_draws"]
    out["ratio_gd_over_search"] = out["gd_seconds_at_equal_error"] / out["search_seconds"]
    out["gd_stop_seconds_per_trial"] = per_stop
    out["ratio_gd_stop_over_search"] = per_stop * out["search_draws"] / out["search_seconds"]
    out["gd_give_up_step_fraction"] = sum(run_give_up) / max(sum(run_stop), 1)
    out["ratio_gd_give_up_over_search"] = out["ratio_gd_stop_over_search"] * out["gd_give_up_step_fraction"]
    if "no_give_up_seconds" in out:
        out["ratio_no_give_up_over_search"] = out["no_give_up_seconds"] / out["search_seconds"]
    if "grid_seconds" in out:
        out["ratio_grid_over_search"] = out["grid_seconds"] / out["search_seconds"]
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{a.activation}, {a.target}, m = {a.m}, d = {a.d}, T = {a.steps}, {a.paths} paths; "
              f"{out['cpu']}, {out['cores']} cores")
        print(f"search:      {out['search_seconds']:.0f} s, {out['search_draws']} draws "
              f"({out['search_given_up_draws']} gave up), "
              f"delta_50 = {c.delta_50:.2f} ± {c.delta_50_err:.2f} ({c.status.value})")
        if "no_give_up_seconds" in out:
            d0, e0 = out["no_give_up_delta_50"]
            print(f"search without giving up: {out['no_give_up_seconds']:.0f} s, {out['no_give_up_draws']} "
                  f"draws, delta_50 = {d0:.2f} ± {e0:.2f}; "
                  f"same counts: {'yes' if out['same_counts'] else 'NO'}; ratio "
                  f"{out['ratio_no_give_up_over_search']:.2f}")
        if "grid_seconds" in out:
            print(f"fixed grid:  {out['grid_seconds']:.0f} s, {out['grid_draws']} draws, "
                  f"delta_50 = {out['grid_delta_50'][0]:.2f} ± {out['grid_delta_50'][1]:.2f}")
        print(f"GD:          {per:.2f} s per trial at delta = {x:g}; "
              f"{out['gd_seconds_at_equal_error']:.0f} s for {out['search_draws']} trials")
        print(f"GD stopping at first passage: {per_stop:.2f} s per trial; giving up as the theory "
              f"does would run {out['gd_give_up_step_fraction']:.2f} of those steps")
        print(f"ratio GD / search at equal error: {out['ratio_gd_over_search']:.2f} "
              f"(GD trials to step T), {out['ratio_gd_stop_over_search']:.2f} (stopped at first passage), "
              f"{out['ratio_gd_give_up_over_search']:.2f} (GD also giving up)")
        if "ratio_grid_over_search" in out:
            print(f"ratio fixed grid / search:        {out['ratio_grid_over_search']:.2f}")
    return out


if __name__ == "__main__":
    main()
