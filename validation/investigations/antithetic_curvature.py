"""How correlated are the curvature summands of an antithetic pair of kernel paths?

A forced draw's curvature along θ* is the weighted mean over its N paths of the summand
``c = z² D`` (times the response). ``force_weights="paired"`` tops its noise up to GD's
``Var(c)/n`` assuming the paths' own share is ``2 Var(c)/N``: the ``N/2`` reflection pairs
counted as independent (``curvature_excess``). The two members of an antithetic pair (``ζ`` and
``−ζ``) share ``V*``, so their summands are correlated, with coefficient ρ; the paths' own share
is then ``2 (1 + ρ) Var(c)/N``. This script measures ρ on the kept paths of a restricted DMFT
(the draws' paths before their escape: reflection pairs along the hard direction, responses by
regression, 2·10⁴ paths) at a few steps, for the centred and the uncentred GeLU label at δ near
their δ_50 at d = 1000. The reflected pair's correlation is printed as a check (its summands
are equal at ``M = 0``: 1).

Usage (from the repository root)::

    python validation/investigations/antithetic_curvature.py [--paths 20000] [--steps 0,50,150,300]

writes ``validation/investigations/results/antithetic_curvature.{md,json}`` (about 20 CPU-s).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import solve_dmft

OUT = Path(__file__).resolve().parent / "results" / "antithetic_curvature"

#: (target, δ): near the default search's δ_50 at d = 1000 (6.96 and 11.10 with 0.7.0)
CASES: tuple[tuple[str, float], ...] = (("z**2 - 1", 7.0), ("z**2", 11.0))


def correlations(target: str, delta: float, *, paths: int, steps: tuple[int, ...],
                 seed: int = 1) -> dict[int, dict[str, float]]:
    """ρ of ``c = z² D`` between the antithetic members (copies 0 and 1 of each batch) and
    between the reflected ones (copies 0 and 2), at each step of ``steps``."""
    p = Problem.build(target=target, activation="gelu", eta=0.5, steps=max(steps), hold_zero=(0,))
    r = solve_dmft(p, delta, n_paths=paths, seed=seed, reflect=(0,), errors="none", test_loss="none",
                   keep_samples_at=steps, stein_regression=True)
    if not r.ok:
        raise SystemExit(f"the DMFT failed ({target}, δ = {delta}): {r.message}")
    B, N = r.settings["n_batches"], r.settings["n_paths"]
    nbase = N // B // 4  # each batch: (+ζ, V*), (−ζ, V*), (+ζ, −V*), (−ζ, −V*), n_base paths each
    out: dict[int, dict[str, float]] = {}
    for t in steps:
        smp = r.samples(t)
        c = (smp["Vstar"][:, 0] ** 2 * smp["D"][:, 0, 0]).reshape(B, 4, nbase)
        out[t] = {"antithetic": float(np.corrcoef(c[:, 0].ravel(), c[:, 1].ravel())[0, 1]),
                  "reflected": float(np.corrcoef(c[:, 0].ravel(), c[:, 2].ravel())[0, 1])}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", type=int, default=20_000)
    ap.add_argument("--steps", default="0,50,150,300")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    steps = tuple(int(x) for x in a.steps.split(","))
    res = {f"{tgt}|{delta:g}": correlations(tgt, delta, paths=a.paths, steps=steps) for tgt, delta in CASES}
    lines = ["# Antithetic correlation of the curvature summand `c = z² D`", "",
             f"Restricted DMFT, GeLU, η = 0.5, {a.paths} paths, seed 1, responses by regression "
             "(`python validation/investigations/antithetic_curvature.py`).", "",
             "| label, δ | step | ρ, antithetic pair | ρ, reflected pair (check: 1) |", "|---|---|---|---|"]
    for key, rows in res.items():
        tgt, delta = key.split("|")
        for t, v in rows.items():
            lines.append(f"| `{tgt}`, {delta} | {t} | {v['antithetic']:.3f} | {v['reflected']:.3f} |")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps({"paths": a.paths, "steps": steps, "results": res},
                                                     indent=1) + "\n")
    print("\n".join(lines))
    return res


if __name__ == "__main__":
    main()
