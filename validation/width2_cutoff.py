"""Width 2: the draws' zero-variance cut-off and kernel paths against GD's δ_50 (findings §10.6).

Each run is the self-bracketing search of ``dmftsolve transition`` at its defaults for one case of
:mod:`validation.width_transition` (its first δ, GeLU or r², T = 400 or 600), with the kernel paths
``--paths`` and the cut-off ``--null-rtol`` given, against that module's stored GD δ_50.

Run ``python -m validation.width2_cutoff CASE D --paths N --null-rtol X [--seed S]``: prints one
JSON line (appended by hand to ``validation/results/width2_cutoff.jsonl``); ``--report`` writes
``width2_cutoff.md`` from the stored lines.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from validation.width_transition import CASES, JSON, _key, problem_of

OUT = Path(__file__).resolve().parent / "results" / "width2_cutoff.jsonl"


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


def report(rows: list[dict[str, Any]]) -> str:
    L = ["# Width 2: the draws' zero-variance cut-off against GD", "",
         "`python -m validation.width2_cutoff` (module docstring). "
         "Bar: max(0.3, 5 % of GD's δ_50).", "",
         "| case | d | paths | null_rtol | seed | theory δ_50 (draws) | GD δ_50 | theory − GD "
         "| within? | wall s |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["null_rtol"], r["paths"], r["case"], r["d"], r["seed"])):
        g, ge = r["gd"]
        off = r["delta_50"] - g
        ok = abs(off) <= max(0.3, 0.05 * g)
        L.append(f"| {r['case']} | {r['d']} | {r['paths']} | {r['null_rtol']:g} | {r['seed']} | "
                 f"{r['delta_50']:.2f} ± {r['err']:.2f} ({r['draws']}) | {g:.2f} ± {ge:.2f} | {off:+.2f} | "
                 f"{'yes' if ok else 'no'} | {r['wall']:.0f} |")
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
