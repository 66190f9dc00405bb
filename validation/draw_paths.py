"""The draws' kernel paths and zero-variance cut-off against GD's δ_50 (findings §10.6, §10.7).

Each run is the self-bracketing search of ``dmftsolve transition`` at its defaults for one case of
:mod:`validation.width_transition` (its first δ, GeLU or r², widths 2–4, T = 400 or 600), with the
kernel paths (``--paths N``, or ``--paths-per-sample X`` for ``round(X n)`` at ``n = δd``) and the
cut-off ``--null-rtol`` given, against that module's stored GD δ_50.

Run ``python -m validation.draw_paths CASE D [--paths N | --paths-per-sample X] --null-rtol X
[--seed S] [--workers W]``: prints one JSON line (appended by hand to
``validation/results/draw_paths.jsonl``); ``--report`` writes ``draw_paths.md`` from the stored
lines. Each line records the kernel paths at the search's δ_50 and the search's CPU time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from validation.width_transition import CASES, JSON, _key, problem_of

OUT = Path(__file__).resolve().parent / "results" / "draw_paths.jsonl"


def search(case: str, d: int, paths: int | None, null_rtol: float | None, seed: int = 0,
           workers: int = 2, paths_per_sample: float | None = None) -> dict[str, Any]:
    """One search (module docstring) and the stored GD δ_50 of the case."""
    from dmftsolve.finite_d.curve import transition
    from dmftsolve.finite_d.settings import TransitionSettings, kernel_paths, resolve_settings

    c = CASES[case]
    p = problem_of(case)
    s = resolve_settings(TransitionSettings(seed=seed, start=c["start"], workers=workers, n_paths=paths,
                                            paths_per_sample=paths_per_sample, null_rtol=null_rtol), p)
    t0, c0 = time.perf_counter(), time.process_time()
    res = transition(p, d, None, settings=s, throw=False, progress=False)
    gd = json.loads(JSON.read_text()).get(_key(c.get("gd_of", case), d, "gd")) or {}
    n = int(round(res.delta_50 * d)) if np.isfinite(res.delta_50) else None
    return {"case": case, "d": d, "paths": s.n_paths if paths_per_sample is None else None,
            "paths_per_sample": paths_per_sample, "paths_at_delta_50": kernel_paths(s, n) if n else None,
            "cpu": time.process_time() - c0, "null_rtol": s.null_rtol, "seed": seed,
            "delta_50": res.delta_50, "err": res.delta_50_err, "draws": int(np.sum(res.draws)),
            "wall": time.perf_counter() - t0, "status": res.status.value,
            "gd": [gd.get("delta_50"), gd.get("err")]}


def _paths(r: dict[str, Any]) -> str:
    if r.get("paths_per_sample") is None:
        return str(r["paths"])
    return f"{r['paths_per_sample']:g}n ({r['paths_at_delta_50']} at δ_50)"


def report(rows: list[dict[str, Any]]) -> str:
    L = ["# The draws' kernel paths and zero-variance cut-off against GD", "",
         "`python -m validation.draw_paths` (module docstring). "
         "Bar: max(0.3, 5 % of GD's δ_50). Wall and CPU time of the search (one process unless "
         "the wall time is below the CPU time).", "",
         "| case | d | paths | null_rtol | seed | theory δ_50 (draws) | GD δ_50 | theory − GD "
         "| within? | wall s | CPU s |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["null_rtol"], r.get("paths_per_sample") is None,
                                         r["paths"] or 0, r["case"], r["d"], r["seed"])):
        g, ge = r["gd"]
        off = r["delta_50"] - g
        ok = abs(off) <= max(0.3, 0.05 * g)
        cpu = f"{r['cpu']:.0f}" if "cpu" in r else "—"
        L.append(f"| {r['case']} | {r['d']} | {_paths(r)} | {r['null_rtol']:g} | {r['seed']} | "
                 f"{r['delta_50']:.2f} ± {r['err']:.2f} ({r['draws']}) | {g:.2f} ± {ge:.2f} | {off:+.2f} | "
                 f"{'yes' if ok else 'no'} | {r['wall']:.0f} | {cpu} |")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", nargs="?")
    ap.add_argument("d", nargs="?", type=int)
    ap.add_argument("--paths", type=int, default=None)
    ap.add_argument("--paths-per-sample", type=float, default=None)
    ap.add_argument("--null-rtol", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args(argv)
    if a.report:
        rows = [json.loads(x) for x in OUT.read_text().splitlines() if x.strip()]
        OUT.with_suffix(".md").write_text(report(rows))
        return
    if a.case not in CASES or a.d is None:
        ap.error(f"give a case of validation.width_transition and d; got {a.case!r}, {a.d!r}")
    print(json.dumps(search(a.case, a.d, a.paths, a.null_rtol, a.seed, a.workers,
                                  a.paths_per_sample)), flush=True)


if __name__ == "__main__":
    main()
