"""`dmftsolve transition` with every default, against GD, over the one-neuron cases and d = 500–4000.

For each one-neuron case of ``transition_vs_simulation.py`` (GeLU on ``z² − 1``, ``z²`` and
``min(z², 3)``, η = 0.5, T = 400; r² on ``z² − 1`` and ``z²``, η = 0.1, T = 600) and each d at which
GD's counts are stored, this runs the command a user runs,

    dmftsolve transition --target T --activation A --eta η --steps T --d D [--paths-per-sample K]

through :func:`dmftsolve.finite_d.transition` with the defaults of
:class:`~dmftsolve.finite_d.TransitionSettings` (the self-bracketing search
to an error of 0.15 from δ = 6, seed 0, the default kernel paths and cut-off of the label
(``KERNEL_PATHS``, ``NULL_RTOL``), paired force weights, responses by regression, float32 compact
history) and two worker processes, and compares its δ_50 with GD's:
the probit fit of GD's stored counts (``gd_transition_counts.json``, ≥ 40 float32 trials per δ;
:func:`transition_vs_simulation.gd_fit`, bootstrap error). ``--paths-per-sample K`` runs the same
searches with ``N = K n`` kernel paths instead (stored beside, under ``@ppsK``): what the command's
curvature warning suggests where ``n`` exceeds 10⁴; ``--paths N`` with ``N`` kernel paths (``@pathsN``:
what its label-mean warning suggests); ``--null-rtol X`` with the zero-variance cut-off ``X``
(``@rtolX``); ``--seed S`` with another seed (``@seedS``). Those rows are
shown in the report, not counted.

Results are cached per (case, d, options) in
``validation/results/transition_defaults.json`` (each search is written when it finishes, and a
stored one is skipped unless ``--redo``); ``--report`` only rewrites ``transition_defaults.md``.
``--tiny`` runs a small configuration (the test).

Run ``python -m validation.transition_defaults [--only CASE,...] [--ds D,...]
[--paths-per-sample K] [--paths N] [--null-rtol X] [--seed S] [--workers 2]``; the CPU time of
each search is in the report. A key without options holds the search at the current defaults;
searches at other settings are kept under the options that give them (``@paths20000@rtol0.0001``:
2·10⁴ paths with the cut-off 10⁻⁴).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from dmftsolve import Problem, __version__
from dmftsolve.finite_d import (
    TransitionSettings,
    default_kernel_paths,
    label_is_uncentred,
    resolve_settings,
    transition,
)
from dmftsolve.finite_d.diagnostics import CURVATURE_EXCESS_WARN
from dmftsolve.results import cpu_model, git_commit, jsonable
from validation import script_parser
from validation import transition_vs_simulation as TVS  # noqa: N812  (its cases, GD's stored counts and fit)
from validation.width_transition import merge_json

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
JSON = OUT / "transition_defaults.json"

#: the one-neuron cases (keys of ``transition_vs_simulation.CASES``)
CASES = ("gelu_z2m1", "gelu_z2", "gelu_min3", "quad_z2m1", "quad_z2")
DS = (500, 1000, 2000, 3000, 4000)


def problem_of(case: str) -> Problem:
    c = TVS.CASES[case]
    return Problem.build(target=c["target"], activation=c["activation"], eta=c["eta"], steps=c["T"])


def key(case: str, d: int, pps: float | None, seed: int = 0, paths: int | None = None,
        null_rtol: float | None = None) -> str:
    """``case|d``, then ``@ppsK`` for ``K`` paths per sample, ``@pathsN`` for ``N`` kernel paths,
    ``@rtolX`` for the zero-variance cut-off ``X`` and ``@seedS`` for a seed other than the
    default 0 (such rows are shown, not counted)."""
    return (f"{case}|{d}" + (f"@pps{pps:g}" if pps else "") + (f"@paths{paths}" if paths else "")
            + (f"@rtol{null_rtol:g}" if null_rtol else "") + (f"@seed{seed}" if seed else ""))


def parse_key(k: str) -> tuple[str, int, str, int]:
    """The inverse of :func:`key`: ``(case, d, options, seed)``, ``options`` the ``@…`` part
    before any ``@seedS`` (empty at the defaults)."""
    head, _, rest = k.partition("@")
    case, d = head.split("|")
    opts, _, seed = ("@" + rest if rest else "").partition("@seed")
    return case, int(d), opts.lstrip("@"), int(seed or 0)


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the draws' worker processes,
    which ``transition`` joins before it returns): a cost that other jobs on the machine do not
    inflate, unlike the wall time."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_one(case: str, d: int, *, pps: float | None = None, seed: int = 0, paths: int | None = None,
            workers: int = 2, null_rtol: float | None = None,
            settings: TransitionSettings | None = None) -> dict[str, Any]:
    """One search at the command's defaults (``pps``: ``paths_per_sample``) and what it used."""
    p = problem_of(case)
    s = resolve_settings(settings or TransitionSettings(workers=workers, paths_per_sample=pps, seed=seed,
                                                      n_paths=paths, null_rtol=null_rtol), p)
    t0, c0 = time.perf_counter(), _cpu()
    c = transition(p, d, None, settings=s, throw=False, progress=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    excess = [pt.diagnostics.get("curvature_excess", math.nan) for pt in c.points]
    return {"delta_50": c.delta_50, "err": c.delta_50_err, "width": c.width, "status": c.status.value,
            "message": c.message, "deltas": c.deltas, "successes": c.successes, "draws": c.draws,
            "seconds": wall, "cpu_seconds": cpu,
            "curvature_excess_max": max((x for x in excess if math.isfinite(x)), default=math.nan),
            "failed_draws": sum(len(pt.diagnostics.get("failures", [])) for pt in c.points),
            "warnings": list(c.warnings),
            "settings": {"seed": s.seed, "tol": s.tol, "start": s.start, "n_paths": s.n_paths,
                         "paths_per_sample": s.paths_per_sample, "workers": s.workers,
                         "null_rtol": s.null_rtol,
                         "version": __version__, "commit": git_commit(), "cpu": cpu_model()}}


def failed_draws(v: dict[str, Any]) -> int:
    """Draws whose DMFT failed (they count as failures of the search): recorded since 0.8.2; for
    the searches stored before, read from the message, which names at most three points."""
    if "failed_draws" in v:
        return int(v["failed_draws"])
    return sum(int(x) for x in re.findall(r"(\d+) DMFT draws? failed", v.get("message") or ""))


def gd_of(case: str, d: int) -> tuple[float, float, int] | None:
    """GD's δ_50, its bootstrap error and its trial count, or None where none is stored."""
    gd, fit = TVS.gd_fit(TVS.CASES[case], d)
    if gd is None or gd.get("source") != "gd_transition_counts.json":
        return None
    return fit[0], fit[1], int(sum(gd["trials"]))


def heeded_count(data: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """``(within, searches, warned, warned within at the defaults, warned within with N = 2n)``
    over the (case, d) with a default search and GD: a search whose curvature excess exceeds
    :data:`~dmftsolve.finite_d.CURVATURE_EXCESS_WARN` (the command warns)
    is replaced by its ``@pps2`` search where one is stored."""
    within = total = warned = warned_default = warned_pps2 = 0
    for k, v in data.items():
        if "@" in k:
            continue
        case, d = k.split("|")[0], int(k.split("|")[1])
        g = gd_of(case, d)
        if g is None:
            continue
        pick = v
        if v["curvature_excess_max"] > CURVATURE_EXCESS_WARN and f"{k}@pps2" in data:
            warned += 1
            warned_default += TVS.within(v["delta_50"], g[0])[1] == "yes"
            pick = data[f"{k}@pps2"]
            warned_pps2 += TVS.within(pick["delta_50"], g[0])[1] == "yes"
        total += 1
        within += TVS.within(pick["delta_50"], g[0])[1] == "yes"
    return within, total, warned, warned_default, warned_pps2


def _cutoff_summary(data: dict[str, Any]) -> list[str]:
    """One sentence per ``@rtolX`` option set: its searches within the bar, and their CPU time
    against the default searches of the same (case, d, seed)."""
    out = []
    parsed = {k: parse_key(k) for k in data}
    for opt in sorted({o for _, _, o, _ in parsed.values() if "rtol" in o}):
        ok, cpu, cpu_default = [], 0.0, 0.0
        for k, (case, d, o, seed) in parsed.items():
            if o != opt:
                continue
            base = key(case, d, None, seed)
            g = gd_of(case, d)
            if g is None or base not in data:
                continue
            ok.append(TVS.within(data[k]["delta_50"], g[0])[1] == "yes")
            cpu += data[k]["cpu_seconds"]
            cpu_default += data[base]["cpu_seconds"]
        if ok:
            out.append(f"With `{opt}` (seeds as stored): {sum(ok)} of {len(ok)} within, in {cpu:.0f} "
                       f"CPU-s against {cpu_default:.0f} for the default searches of the same case, d "
                       "and seed.")
    return out


def report(data: dict[str, Any]) -> str:
    lines = ["# `dmftsolve transition` with its defaults, against GD (one neuron, d = 500–4000)", "",
             "Generated by `python -m validation.transition_defaults --report` from "
             "`transition_defaults.json`. Theory: the command with every default (self-bracketing "
             "search to 0.15 from δ = 6, seed 0, the default kernel paths and cut-off unless the row "
             "says otherwise: N = 2n, at least 5000, with the cut-off 3·10⁻³ on the centred label "
             "`z² − 1`; 8·10⁴ with 10⁻⁴ on the uncentred ones, `z²` and `min(z², 3)`; draws giving up, "
             "paired force weights, responses by regression, float32 compact history; two worker "
             "processes; CPU s: the search's and its workers' CPU time), its posterior error. GD: the "
             "probit fit of `gd_transition_counts.json` "
             "(≥ 40 float32 trials per δ; bootstrap error). Bar: |theory − GD| ≤ max(0.3, 5 % of GD). "
             "Curvature excess: the largest over the search's δ of the kernel paths' own noise in "
             "the curvature along θ*, as a multiple of GD's; the command warns above 1.", "",
             "| case | η, T | d | kernel paths | theory δ_50 (draws, CPU s) | GD δ_50 (trials) | "
             "theory − GD | within? | curvature excess |",
             "|---|---|---|---|---|---|---|---|---|"]
    n_in = n_all = 0
    for case in CASES:
        c = TVS.CASES[case]
        for k in sorted((k for k in data if parse_key(k)[0] == case), key=lambda k: (parse_key(k)[1], k)):
            v = data[k]
            d = parse_key(k)[1]
            pps = v["settings"].get("paths_per_sample")
            default = default_kernel_paths(1, label_is_uncentred(problem_of(case)))
            paths = f"N = {pps:g} n" if pps else f"{v['settings']['n_paths'] or default}"
            if "@paths" in k:  # not this label's default: what --paths gives
                paths += " (--paths)" if not pps else f", at least {v['settings']['n_paths']}"
            if v["settings"].get("null_rtol") and "@rtol" in k:
                paths += f", cut-off {v['settings']['null_rtol']:g}"
            if v["settings"].get("seed"):
                paths += f", seed {v['settings']['seed']}"
            th = f"{v['delta_50']:.2f} ± {v['err']:.2f} ({sum(v['draws'])}, {v['cpu_seconds']:.0f})"
            nf = failed_draws(v)
            if nf:
                th += f" †{nf}"
            g = gd_of(case, d)
            gs, diff, ok = "not stored", "—", "—"
            if g is not None:
                gs = f"{g[0]:.2f} ± {g[1]:.2f} ({g[2]})"
                diff, ok = TVS.within(v["delta_50"], g[0])
                if ok in ("yes", "no") and "@" not in k:
                    n_all += 1
                    n_in += ok == "yes"
            ex = v["curvature_excess_max"]
            exs = f"{ex:.2f}" if math.isfinite(ex) else "—"
            lines.append(f"| {TVS.pretty_target(c['target'])}, {c['activation'].replace('quad', 'r²')} | "
                         f"{c['eta']}, {c['T']} | {d} | {paths} | {th} | {gs} | {diff} | {ok} | {exs} |")
    heeded = heeded_count(data)
    seeds = []
    parsed = [parse_key(k) for k in data]
    for seed in sorted({s for _, _, o, s in parsed if s and not o}):
        ok = [TVS.within(data[key(c, d, None, s)]["delta_50"], g[0])[1] == "yes"
              for c, d, o, s in parsed if s == seed and not o and (g := gd_of(c, d))]
        seeds.append(f"With seed {seed} (the default searches again): {sum(ok)} of {len(ok)} within.")
    seeds += _cutoff_summary(data)
    warned = (f"With the command's warning heeded (`--paths-per-sample 2` wherever the curvature "
              f"excess exceeds 1, {heeded[2]} searches), {heeded[0]} of {heeded[1]} are; of the searches "
              f"it warned on, within at the defaults: {heeded[3]}, with N = 2n: {heeded[4]}."
              if heeded[2] else "The command's curvature warning fired on none of them.")
    lines += ["", f"At the defaults, {n_in} of {n_all} searches are within the bar. {warned}"
              + "".join(" " + x for x in seeds), "",
              "† that many of the search's draws failed (the DMFT diverged or overflowed; `message` in the "
              "JSON says where); they count as failures, as the command counts them."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = script_parser(__spec__, __doc__)
    ap.add_argument("--only", default=None, help="comma-separated cases (default: all of CASES)")
    ap.add_argument("--ds", default=",".join(map(str, DS)), help="comma-separated d")
    ap.add_argument("--paths-per-sample", type=float, default=None,
                    help="N = K n kernel paths instead of the label's default (stored under @ppsK)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--paths", type=int, default=None,
                    help="N kernel paths instead of the width's default (stored under @pathsN)")
    ap.add_argument("--seed", type=int, default=0,
                    help="the searches' seed (default 0, the command's; others stored under @seedS)")
    ap.add_argument("--null-rtol", type=float, default=None,
                    help="the draws' zero-variance cut-off instead of the width's (stored under @rtolX)")
    ap.add_argument("--redo", action="store_true", help="run stored searches again")
    ap.add_argument("--report", action="store_true", help="only rewrite the markdown from the JSON")
    ap.add_argument("--tiny", action="store_true", help="a small configuration, not stored (the test)")
    a = ap.parse_args(argv)
    if a.tiny:
        s = TransitionSettings(n_paths=400, draws=4, tol=2.0, max_draws=16, workers=1)
        with threadpool_limits(1):
            v = run_one("gelu_z2m1", 100, settings=s)
        return {key("gelu_z2m1", 100, None): jsonable(v)}
    cases = a.only.split(",") if a.only else list(CASES)
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"--only: unknown case(s) {', '.join(bad)}; choose from {', '.join(CASES)}")
    try:
        ds = [int(x) for x in a.ds.split(",")]
    except ValueError:
        ap.error(f"--ds must be comma-separated integers, got {a.ds!r}")
    if min(ds) < 1 or a.seed < 0 or a.workers < 1:
        ap.error(f"--ds, --seed and --workers must be positive (seed ≥ 0), got {a.ds!r}, {a.seed}, "
                 f"{a.workers}")
    if a.paths is not None and a.paths < 40:
        ap.error(f"--paths must be at least 40, got {a.paths}")
    if a.paths_per_sample is not None and not 0 < a.paths_per_sample <= 1000:
        ap.error(f"--paths-per-sample must be in (0, 1000], got {a.paths_per_sample}")
    if a.null_rtol is not None and not 0 < a.null_rtol < 1:
        ap.error(f"--null-rtol must be in (0, 1), got {a.null_rtol}")
    if not a.report:
        done = json.loads(JSON.read_text()) if JSON.exists() else {}
        for case in cases:
            for d in ds:
                k = key(case, d, a.paths_per_sample, a.seed, a.paths, a.null_rtol)
                if gd_of(case, d) is None:
                    print(f"[{k}] skipped: no GD counts stored for {case} at d = {d}", flush=True)
                    continue
                if k in done and not a.redo:
                    continue
                print(f"[{k}]", flush=True)
                with threadpool_limits(1):
                    v = run_one(case, d, pps=a.paths_per_sample, seed=a.seed, paths=a.paths,
                                workers=a.workers, null_rtol=a.null_rtol)
                merge_json(JSON, k, v)
                print(f"[{k}] delta_50 = {v['delta_50']:.2f} ± {v['err']:.2f} ({v['cpu_seconds']:.0f} CPU s)",
                      flush=True)
    data = json.loads(JSON.read_text()) if JSON.exists() else {}
    (OUT / "transition_defaults.md").write_text(report(data))
    return data


if __name__ == "__main__":
    main()
