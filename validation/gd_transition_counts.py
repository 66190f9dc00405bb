"""Issue 9, GD side: GD success counts near the finite-d transition, ≥ 40 trials per point.

For each case (the problem definitions of ``validation/transition_vs_simulation.py``: single
GeLU or r² neuron, no bias, random start ``q0 = 1``, full-batch GD with step η for ``T`` steps, float32
data) and input dimension ``d``, GD is run ``trials`` times at each ``δ`` of a grid around the
transition with :func:`dmftsolve.simulation.sweeps.sweep` (serial, or ``--workers`` processes; BLAS on one
thread). Every trial records

* ``escape_step``: the first recorded step whose cosine exceeds 1/2 (``None`` if none), with
  the cosine recorded every ``RECORD_EVERY = 5`` steps (and at step ``T``), so success *by step
  T'* for any ``T' ≤ T`` is ``escape_step ≤ T'`` (up to the 5-step recording grid);
* ``final_cosine`` (at step ``T``), ``max_cosine`` and ``min_cosine_after_escape`` (is the
  escape permanent?).

A point's success count is the number of trials with ``escape_step ≤ T`` (first passage, the
criterion of the theory in :mod:`dmftsolve.finite_d`); the count by final
cosine is reported beside it. δ_50 per (case, d) is
:func:`~dmftsolve.finite_d.probit_fit` (maximum likelihood ``P = Φ((δ − δ_50)/w)``,
bootstrap standard error).

Seeds: one fixed root ``SeedSequence`` entropy per (case, d) (``ROOT_SEEDS``); the trials of a
point are run in chunks, chunk ``c`` at ``δ`` uses ``SeedSequence(root, spawn_key=(round(1000 δ),
c))`` as the sweep's root, so trial ``j`` of the chunk is trial ``j`` of
``simulate(problem, d, δ, seed=SeedSequence(root, spawn_key=(round(1000 δ), c, 0)), trials=j + 1)``;
its own ``SeedSequence`` (spawn key ``(round(1000 δ), c, 0, j)``) is written to the JSON. Adding
trials or δ values never changes finished ones.

The JSON is also the cache: a rerun loads it and skips every finished chunk, so an interrupted
run resumes per (case, d, δ) at chunk granularity and never recomputes finished work (settings
that change the numbers — problem, d, record_every, dtype — are checked, and a mismatch is an
error). Progress goes to stderr; the JSON and the Markdown report are rewritten after every chunk.

Run (everything, ~100 min budget on one core)::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m validation.gd_transition_counts \\
        --budget-minutes 100

``--cases 1,2`` runs a subset (numbers as in ``RUNS``), ``--trials`` changes the trials per point
of the fixed-count runs, ``--report`` only rebuilds the Markdown from the JSON, ``--quick`` is a
tiny configuration for the test (d = 60, 2 δ, 2 trials; writes ``gd_transition_counts_quick.*``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.finite_d import probit_fit
from dmftsolve.results import jsonable
from dmftsolve.seeds import child, seed_record
from dmftsolve.simulation.sweeps import sweep
from validation import script_parser

OUT = Path(__file__).resolve().parent / "results"
STEM = "gd_transition_counts"
RECORD_EVERY = 5
THRESHOLD = 0.5
CHUNK = 8
DTYPE = "float32"

#: the problem definitions of validation/transition_vs_simulation.py (CASES there; the test
#: checks that these fields agree with it): Problem.build(target, activation, eta, steps=T),
#: default init (q0 = 1, M0 = None: random start), no bias, square loss, λ = 0.
CASES: dict[str, dict[str, Any]] = {
    "gelu_z2m1": {"target": "z**2 - 1", "activation": "gelu", "eta": 0.5, "T": 400},
    "gelu_z2": {"target": "z**2", "activation": "gelu", "eta": 0.5, "T": 400},
    "gelu_min3": {"target": "Min(z**2, 3)", "activation": "gelu", "eta": 0.5, "T": 400},
    "quad_z2": {"target": "z**2", "activation": "quad", "eta": 0.1, "T": 600},
    "quad_z2m1": {"target": "z**2 - 1", "activation": "quad", "eta": 0.1, "T": 600},
}

#: run number -> (case, d, δ grid, trials per δ or None = as many as fit, round-robin, up to
#: ``--fill-trials``). Priority order: runs are done in this order until the budget runs out.
RUNS: dict[int, dict[str, Any]] = {
    1: {"case": "gelu_z2m1", "d": 1000, "deltas": (5.5, 6, 6.5, 7, 7.5, 8), "trials": 40},
    2: {"case": "gelu_z2m1", "d": 500, "deltas": (5, 5.5, 6, 6.5, 7, 7.5, 8), "trials": 40},
    3: {"case": "gelu_z2", "d": 500, "deltas": (8, 9, 10, 11, 12, 13), "trials": 40},
    4: {"case": "gelu_min3", "d": 1000, "deltas": (8, 9, 10, 11, 12), "trials": 40},
    5: {"case": "gelu_z2m1", "d": 2000, "deltas": (6.5, 7, 7.5), "trials": None},
    6: {"case": "gelu_z2m1", "d": 4000, "deltas": (7, 7.5), "trials": 40},
    7: {"case": "gelu_z2m1", "d": 4000, "deltas": (6.5,), "trials": 24},
    8: {"case": "quad_z2m1", "d": 500, "deltas": (3, 3.6, 4.2, 5, 6), "trials": 40},
    9: {"case": "quad_z2", "d": 500, "deltas": (4, 5, 6, 7, 8), "trials": 40},
    10: {"case": "gelu_min3", "d": 500, "deltas": (8, 9, 10, 11, 12), "trials": 40},
    11: {"case": "gelu_z2", "d": 1000, "deltas": (8, 9, 10, 11, 12, 13), "trials": 120},  # 40 before 0.9.0
    12: {"case": "quad_z2m1", "d": 1000, "deltas": (3, 3.6, 4.2, 5, 6), "trials": 40},
    13: {"case": "quad_z2", "d": 1000, "deltas": (4, 5, 6, 7, 8), "trials": 40},
    14: {"case": "gelu_min3", "d": 2000, "deltas": (9, 10, 11, 12), "trials": 40},
    15: {"case": "gelu_z2", "d": 2000, "deltas": (10, 11, 12, 13), "trials": 40},
    16: {"case": "gelu_min3", "d": 4000, "deltas": (10.5, 11.5, 12.5), "trials": None},
    17: {"case": "gelu_z2", "d": 4000, "deltas": (11, 12, 13), "trials": None},
    18: {"case": "quad_z2m1", "d": 2000, "deltas": (3.6, 4.2, 5, 6), "trials": 40},
    19: {"case": "quad_z2", "d": 2000, "deltas": (5, 6, 7, 8), "trials": 40},
    20: {"case": "quad_z2m1", "d": 4000, "deltas": (3.6, 4.2, 4.6, 5), "trials": None},
    21: {"case": "quad_z2", "d": 4000, "deltas": (5, 6, 7, 8), "trials": None},
    22: {"case": "gelu_z2m1", "d": 3000, "deltas": (6.5, 7, 7.5), "trials": 40},
    23: {"case": "quad_z2m1", "d": 3000, "deltas": (3.6, 4.2, 4.6, 5), "trials": 24},
    24: {"case": "quad_z2", "d": 3000, "deltas": (5, 6, 7), "trials": 24},
    25: {"case": "gelu_z2", "d": 3000, "deltas": (11, 12, 13), "trials": None},
}
QUICK_RUNS: dict[int, dict[str, Any]] = {
    1: {"case": "gelu_z2m1", "d": 60, "deltas": (3, 12), "trials": 2},
}

#: fixed root seed (SeedSequence entropy) per (case, d)
ROOT_SEEDS: dict[str, int] = {
    "gelu_z2m1|1000": 9_101_000, "gelu_z2m1|500": 9_100_500, "gelu_z2m1|2000": 9_102_000,
    "gelu_z2|500": 9_200_500, "gelu_min3|1000": 9_301_000, "gelu_z2m1|60": 9_100_060,
    "gelu_z2m1|4000": 9_104_000, "quad_z2m1|500": 9_500_500, "quad_z2|500": 9_400_500,
    "gelu_min3|500": 9_300_500, "gelu_z2|1000": 9_201_000, "quad_z2m1|1000": 9_501_000,
    "quad_z2|1000": 9_401_000, "gelu_min3|2000": 9_302_000, "gelu_z2|2000": 9_202_000,
    "gelu_min3|4000": 9_304_000, "gelu_z2|4000": 9_204_000,
    "quad_z2m1|2000": 9_502_000, "quad_z2|2000": 9_402_000,
    "quad_z2m1|4000": 9_504_000, "quad_z2|4000": 9_404_000,
    "gelu_z2m1|3000": 9_103_000, "quad_z2m1|3000": 9_503_000, "quad_z2|3000": 9_403_000,
    "gelu_z2|3000": 9_203_000,
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def problem_of(case: str) -> Problem:
    c = CASES[case]
    return Problem.build(target=c["target"], activation=c["activation"], eta=c["eta"], steps=c["T"])


def dkey(delta: float) -> str:
    return f"{float(delta):g}"


def chunk_seed(root: int, delta: float, c: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(root, spawn_key=(int(round(1000 * float(delta))), int(c)))


# --------------------------------------------------------------------------- one chunk
def trial_records(steps: np.ndarray, cosine: np.ndarray,
                  threshold: float = THRESHOLD) -> list[dict[str, Any]]:
    """Per trial (rows of ``cosine``, columns at ``steps``): escape step, final / max cosine.

    ``escape_step`` is the first recorded step with cosine ``> threshold`` (None if none; a
    non-finite cosine never counts); ``min_cosine_after_escape`` is the smallest recorded cosine
    from the escape on (None without an escape).
    """
    out = []
    for row in np.asarray(cosine, float):
        above = np.flatnonzero(np.isfinite(row) & (row > threshold))
        e = int(above[0]) if above.size else None
        out.append({
            "escape_step": None if e is None else int(steps[e]),
            "final_cosine": float(row[-1]) if np.isfinite(row[-1]) else None,
            "max_cosine": float(np.nanmax(row)) if np.isfinite(row).any() else None,
            "min_cosine_after_escape": None if e is None else float(np.nanmin(row[e:])),
            "nonfinite": bool(not np.isfinite(row).all()),
        })
    return out


def run_chunk(case: str, d: int, delta: float, root: int, c: int, trials: int,
              executor: Executor | None = None, workers: int = 1) -> dict[str, Any]:
    """``trials`` GD runs at ``(case, d, δ)`` from chunk seed ``c`` (one sweep; its trials on
    ``executor`` if given, which does not change them: each trial has its own seed)."""
    ss = chunk_seed(root, delta, c)
    t0 = time.perf_counter()
    res = sweep(problem_of(case), d, [float(delta)], trials=trials, seed=ss, progress=False,
                dtype=DTYPE, record_every=RECORD_EVERY, blas_threads=1, executor=executor)
    run = res.runs[0]
    recs = trial_records(np.asarray(run.steps), np.asarray(run.cosine))
    for j, r in enumerate(recs):
        r["seed"] = seed_record(child(child(ss, 0), j))
    return {"chunk": c, "sweep_seed": seed_record(ss), "n": int(res.settings["n"][0]),
            "seconds": time.perf_counter() - t0, "workers": workers, "status": res.status.value,
            "trials": recs}


# --------------------------------------------------------------------------- bookkeeping
def new_entry(case: str, d: int, root: int) -> dict[str, Any]:
    c = CASES[case]
    return {"case": case, "d": d, "target": c["target"], "activation": c["activation"],
            "eta": c["eta"], "T": c["T"], "q0": 1.0, "bias": False, "root_seed": root,
            "record_every": RECORD_EVERY, "dtype": DTYPE, "points": {}}


def check_entry(entry: dict[str, Any], case: str, d: int, root: int) -> None:
    ref = new_entry(case, d, root)
    for k in ("target", "activation", "eta", "T", "root_seed", "record_every", "dtype", "d"):
        if entry[k] != ref[k]:
            raise ValueError(f"cached {case}|{d} has {k} = {entry[k]!r}, this script {ref[k]!r}; "
                             "move the JSON away or restore the settings")


def n_done(entry: dict[str, Any], delta: float) -> int:
    pt = entry["points"].get(dkey(delta))
    return sum(len(ch["trials"]) for ch in pt["chunks"]) if pt else 0


BY_T = (100, 200, 300)


def summarise(entry: dict[str, Any], by_t: bool = False) -> dict[str, Any]:
    """Counts, p ± binomial error per δ (success = escape by T) and the probit fit; with ``by_t``
    also the fit to the counts by the earlier steps ``BY_T`` (re-read from the escape steps)."""
    T = entry["T"]
    rows = []
    for k in sorted(entry["points"], key=float):
        pt = entry["points"][k]
        trs = [r for ch in pt["chunks"] for r in ch["trials"]]
        n = len(trs)
        if not n:
            continue
        s = sum(1 for r in trs if r["escape_step"] is not None and r["escape_step"] <= T)
        sf = sum(1 for r in trs if r["final_cosine"] is not None and r["final_cosine"] > THRESHOLD)
        lost = sum(1 for r in trs if r["escape_step"] is not None
                   and (r["min_cosine_after_escape"] or 0.0) <= THRESHOLD)
        es = [r["escape_step"] for r in trs if r["escape_step"] is not None]
        p = s / n if n else math.nan
        secs = sum(ch["seconds"] for ch in pt["chunks"])
        rows.append({"delta": float(k), "n": pt["chunks"][0]["n"],
                     "trials": n, "successes": s, "successes_final": sf, "lost_after_escape": lost,
                     "p": p, "p_err": math.sqrt(p * (1 - p) / n) if n else math.nan,
                     "escape_median": float(np.median(es)) if es else None,
                     "escape_max": max(es) if es else None,
                     "escapes_last_quarter": sum(1 for e in es if 0.75 * T < e <= T),
                     "nonfinite": sum(1 for r in trs if r["nonfinite"]),
                     "seconds_per_trial": secs / n if n else math.nan})
    fit = (math.nan, math.nan, math.nan)
    if len(rows) >= 2 and all(r["trials"] > 0 for r in rows):
        fit = probit_fit(np.array([r["delta"] for r in rows]), np.array([r["successes"] for r in rows]),
                         np.array([r["trials"] for r in rows]))
    out = {"rows": rows, "delta_50": fit[0], "delta_50_err": fit[1], "width": fit[2]}
    if by_t and len(rows) >= 2:
        out["by_T"] = {}
        for t in (*[x for x in BY_T if x < T], T):
            xs, ks, ns = counts_by(entry, t)
            f = probit_fit(xs, ks, ns)
            out["by_T"][str(t)] = {"successes": ks.tolist(), "delta_50": f[0], "delta_50_err": f[1],
                                   "width": f[2]}
    return out


def counts_by(entry: dict[str, Any], t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(deltas, successes, trials)`` of one run's points with trials, a success being a first
    passage of the cosine above 1/2 at a recorded step ≤ ``t``."""
    xs, ks, ns = [], [], []
    for k in sorted(entry["points"], key=float):
        trs = [r for ch in entry["points"][k]["chunks"] for r in ch["trials"]]
        if trs:
            xs.append(float(k))
            ks.append(sum(1 for r in trs if r["escape_step"] is not None and r["escape_step"] <= t))
            ns.append(len(trs))
    return np.array(xs), np.array(ks), np.array(ns)


def write(res: dict[str, Any], out: Path, stem: str, final: bool = False) -> None:
    """Rewrite ``<stem>.json`` (atomically) and ``<stem>.md``; ``final`` adds the δ_50-by-step fits."""
    for key, entry in res["runs"].items():
        res["summary"][key] = summarise(entry, by_t=final)
    path = out / f"{stem}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(jsonable(res), indent=1))
    os.replace(tmp, path)
    (out / f"{stem}.md").write_text(report(res))


# --------------------------------------------------------------------------- report
def fmt(x: Any, e: Any, nd: int = 2) -> str:
    if x is None or not math.isfinite(float(x)):
        return "–"
    if e is None or not math.isfinite(float(e)):
        return f"{float(x):.{nd}f}"
    return f"{float(x):.{nd}f} ± {float(e):.{nd}f}"


def report(res: dict[str, Any]) -> str:
    st = res["settings"]
    L = ["# GD success counts near the finite-d transition", "",
         f"Generated by `{st['command']}` (rerun it to extend or regenerate: finished chunks are "
         "read from the JSON and not recomputed; `--report` only rebuilds this file).", "",
         "Problems as in `validation/transition_vs_simulation.py`: single neuron, no bias, random "
         "start q0 = 1, square loss; GeLU with η = 0.5 and T = 400, r² (`quad`) with η = 0.1 and "
         "T = 600 full-batch GD steps; float32 data "
         "(`dmftsolve.simulation.sweep`, serial, BLAS on one thread). The cosine is recorded every "
         f"{st['record_every']} steps; a trial **succeeds** when its cosine first exceeds 1/2 at a "
         "recorded step ≤ T (first passage, the theory's criterion; `escape_step` in the JSON, so "
         "success by any earlier step can be re-read). `final` counts trials whose cosine at step T "
         "is above 1/2, `lost` those that escaped and later fell back to ≤ 1/2. p ± √(p(1−p)/N). "
         "δ_50 and the probit width w: `dmftsolve.thresholds.probit_fit` (maximum likelihood "
         "P = Φ((δ − δ_50)/w) on the by-T counts, ± bootstrap standard error).", "",
         "**Is T = 400 long enough?** Checked only from existing data (`convention_hunt.json` of the "
         "investigations archive, docs/investigations.md; GD run to 1000 steps, 6–8 trials per δ, "
         "cosine every 10 steps): for `z**2 - 1` (variant V4, d = 500 / 1000 / 2000) none of the 61 "
         "escapes in 112 trials came after step 400 (latest: 330, 400, 290); "
         "for `z**2` (V0) 5 of 46 escapes did (at 530; 420, 630, 750; 420), so for the uncentred label "
         "the counts here are success *by step 400*, not at long times, and some runs counted as "
         "failures would escape later. `Min(z**2, 3)` has no longer GD runs. The escape-step columns "
         "below show escapes up to step 400 at several δ, i.e. the by-T count still moves with T; "
         "compare with theory at the same T (the theory's T is the case's T). The column "
         "'escapes in (3T/4, T]' counts the escapes in the last quarter of the run.", "",
         "## δ_50", "", "| case | target | d | δ grid | trials per δ | δ_50 | width w | root seed |",
         "|---|---|---|---|---|---|---|---|"]
    for key, entry in res["runs"].items():
        sm = res["summary"][key]
        trials = sorted({r["trials"] for r in sm["rows"]}) or [0]
        grid = ", ".join(f"{r['delta']:g}" for r in sm["rows"])
        L.append(f"| {entry['case']} | `{entry['target']}` | {entry['d']} | "
                 f"{grid} | "
                 f"{'–'.join(map(str, [trials[0], trials[-1]] if len(trials) > 1 else trials))} | "
                 f"{fmt(sm['delta_50'], sm['delta_50_err'])} | {fmt(sm['width'], None)} | "
                 f"{entry['root_seed']} |")
    if any("by_T" in sm for sm in res["summary"].values()):
        L += ["", "### δ_50 by step T' (the same trials, success = escape at a recorded step ≤ T')", "",
              "| case | d | " + " | ".join(f"T' = {t}" for t in (*BY_T, "T")) + " |",
              "|---|---|" + "---|" * (len(BY_T) + 1)]
        for key, entry in res["runs"].items():
            bt = res["summary"][key].get("by_T")
            if not bt:
                continue
            cells = [fmt(bt[str(t)]["delta_50"], bt[str(t)]["delta_50_err"]) if str(t) in bt else "–"
                     for t in (*BY_T, entry["T"])]
            L.append(f"| {entry['case']} | {entry['d']} | " + " | ".join(cells) + " |")
    L += ["", "## Counts", ""]
    for key, entry in res["runs"].items():
        sm = res["summary"][key]
        L += [f"### {entry['case']} (`{entry['target']}`), d = {entry['d']}", "",
              "| δ | n | successes by T / N | p | final | lost | median / max escape step | "
              "escapes in (3T/4, T] | s per trial |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in sm["rows"]:
            esc = ("–" if r["escape_median"] is None
                   else f"{r['escape_median']:g} / {r['escape_max']}")
            L.append(f"| {r['delta']:g} | {r['n']} | {r['successes']}/{r['trials']} | "
                     f"{fmt(r['p'], r['p_err'])} | {r['successes_final']} | {r['lost_after_escape']} | "
                     f"{esc} | {r.get('escapes_last_quarter', '–')} | {r['seconds_per_trial']:.2f} |")
        L.append("")
    if res.get("not_run"):
        L += ["## Not run (budget)", "",
              "Trials planned but not launched because they would not finish in the budget (for the "
              "as-many-as-fit run, counted up to its cap of "
              f"{st['fill_trials']} per δ):", ""] + [f"* {x}" for x in res["not_run"]] + [""]
    L += ["## Settings", "",
          f"record_every = {st['record_every']}, dtype = {st['dtype']}, chunk = {st['chunk']} trials, "
          f"success threshold = {st['threshold']}. Chunk c at δ uses "
          "`SeedSequence(root_seed, spawn_key=(round(1000 δ), c))` as the sweep's root; trial j of the "
          "chunk is trial j of `simulate(problem, d, δ, seed=SeedSequence(root_seed, "
          "spawn_key=(round(1000 δ), c, 0)), trials=j + 1, record_every=5, dtype=float32)`; each "
          "trial's SeedSequence is in the JSON.", ""]
    return "\n".join(L)


# --------------------------------------------------------------------------- driver
def plan(runs: dict[int, dict[str, Any]], selected: list[int], trials: int | None,
         fill_trials: int) -> list[tuple[int, float, int, int]]:
    """Chunks ``(run, δ, chunk index, size)`` in execution order: runs by priority, within a run
    round-robin over δ so a partial run has balanced counts."""
    out = []
    for r in selected:
        spec = runs[r]
        target = spec["trials"] if spec["trials"] is not None else fill_trials
        if spec["trials"] is not None and trials is not None:
            target = trials
        size = min(CHUNK, target)
        nchunks = math.ceil(target / size)
        for c in range(nchunks):
            m = min(size, target - c * size)
            out += [(r, float(x), c, m) for x in spec["deltas"]]
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run (or resume) the sweeps and write ``<out>/<stem>.{json,md}``; returns the results dict."""
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--cases", default=",".join(map(str, RUNS)),
                    help="comma-separated run numbers of RUNS, in priority order (default: all)")
    ap.add_argument("--budget-minutes", type=float, default=100.0,
                    help="stop launching chunks that would end after this many minutes (default 100)")
    ap.add_argument("--trials", type=int, default=None,
                    help="trials per δ for the fixed-count runs (default: RUNS, 40)")
    ap.add_argument("--fill-trials", type=int, default=400,
                    help="cap on trials per δ for the as-many-as-fit runs (default 400)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny configuration (d = 60, 2 δ, 2 trials), written as "
                    "gd_transition_counts_quick.*")
    ap.add_argument("--out-dir", default=str(OUT), help="output directory (default validation/results)")
    ap.add_argument("--report", action="store_true", help="only rebuild the Markdown from the JSON")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes for the trials of a chunk (default 1: serial); the trials do not "
                    "depend on it, the wall time per chunk does")
    args = ap.parse_args(argv)
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.budget_minutes <= 0:
        raise ValueError(f"--budget-minutes must be > 0, got {args.budget_minutes}")
    if args.trials is not None and args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    if args.fill_trials < 1:
        raise ValueError(f"--fill-trials must be >= 1, got {args.fill_trials}")
    runs = QUICK_RUNS if args.quick else RUNS
    stem = f"{STEM}_quick" if args.quick else STEM
    try:
        selected = [int(x) for x in args.cases.split(",") if x.strip()] if not args.quick else list(runs)
    except ValueError:
        raise ValueError(f"--cases must be comma-separated integers, got {args.cases!r}") from None
    bad = [r for r in selected if r not in runs]
    if bad:
        raise ValueError(f"--cases: unknown run number(s) {bad}; known {sorted(runs)}")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stem}.json"
    res: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    res.setdefault("runs", {})
    res["summary"] = {}
    cmd = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m validation.gd_transition_counts"
    if args.quick:
        cmd += " --quick"
    res["settings"] = {"record_every": RECORD_EVERY, "dtype": DTYPE, "chunk": CHUNK,
                       "threshold": THRESHOLD, "command": cmd, "root_seeds": ROOT_SEEDS,
                       "runs": {str(k): v for k, v in runs.items()}, "fill_trials": args.fill_trials}
    if args.report:
        write(res, out, stem, final=True)
        return res
    for r in selected:
        spec = runs[r]
        key = f"{spec['case']}|{spec['d']}"
        root = ROOT_SEEDS[key]
        if key in res["runs"]:
            check_entry(res["runs"][key], spec["case"], spec["d"], root)
        else:
            res["runs"][key] = new_entry(spec["case"], spec["d"], root)
    chunks = plan(runs, selected, args.trials, args.fill_trials)
    t_start = time.perf_counter()
    budget = 60.0 * args.budget_minutes
    rate: dict[int, float] = {}  # seconds per (n · d · T) per d, from the chunks run here
    not_run: list[str] = []
    pool = ProcessPoolExecutor(args.workers) if args.workers > 1 else nullcontext(None)
    with threadpool_limits(1), pool as ex:
        for i, (r, delta, c, size) in enumerate(chunks):
            spec = runs[r]
            key = f"{spec['case']}|{spec['d']}"
            entry = res["runs"][key]
            if any(ch["chunk"] == c for ch in entry["points"].get(dkey(delta), {"chunks": []})["chunks"]):
                continue
            d = spec["d"]
            n = int(round(delta * d))
            work = n * d * CASES[spec["case"]]["T"] * size
            known = rate.get(d, max(rate.values()) * 2 if rate else 0.0)
            elapsed = time.perf_counter() - t_start
            if elapsed + known * work > budget:
                not_run.append(f"run {r} ({key}) δ = {delta:g} chunk {c} ({size} trials)")
                continue
            ch = run_chunk(spec["case"], d, delta, entry["root_seed"], c, size, ex, args.workers)
            pt = entry["points"].setdefault(dkey(delta), {"delta": delta, "chunks": []})
            pt["chunks"].append(ch)
            pt["chunks"].sort(key=lambda x: x["chunk"])
            rate[d] = ch["seconds"] / work
            s = sum(1 for t in ch["trials"] if t["escape_step"] is not None)
            left = len(chunks) - i - 1
            write(res, out, stem)  # before the log line: a chunk that was logged is on disk
            log(f"run {r} {key} δ={delta:g} chunk {c}: {s}/{size} escaped, "
                f"{ch['seconds'] / size:.2f} s/trial; N at δ = {n_done(entry, delta)}; "
                f"{(time.perf_counter() - t_start) / 60:.1f} min used, ≤ {left} chunks left")
    # group the skipped chunks per (run, δ) for the report
    grouped: dict[str, int] = {}
    for x in not_run:
        head, _, tail = x.partition(" chunk ")
        grouped[head] = grouped.get(head, 0) + int(tail.split("(")[1].split()[0])
    # chunks skipped by earlier invocations stay listed unless this one planned their run
    kept = [x for x in res.get("not_run", []) if not any(x.startswith(f"run {r} ") for r in selected)]
    res["not_run"] = kept + [f"{h}: {k} trials" for h, k in grouped.items()]
    write(res, out, stem, final=True)
    for key, sm in res["summary"].items():
        log(f"{key}: δ_50 = {fmt(sm['delta_50'], sm['delta_50_err'])}, width {fmt(sm['width'], None)}")
    return res


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:  # bad arguments: one line, not a traceback
        sys.exit(f"gd_transition_counts.py: error: {e}")
