"""GeLU on ``y = z²`` at d = 1000: the search's δ_50 over seeds, with 2·10⁴ and 8·10⁴ kernel paths.

One seed of each (0.5.x) put the theory +0.3 above GD with 2·10⁴ paths and on GD with 8·10⁴
(10.66 ± 0.15). This runs ``dmftsolve transition --target "z**2" --d 1000 [--paths 80000]
--seed S --json`` for several seeds of each (the command line, every other setting its
default: two workers, tol 0.15), keeps each run's JSON in ``results/z2_path_count/``, and
reports the seeds' δ_50, their mean with its standard error (the seeds' spread / √runs) and
the mean reported error, against GD's 10.72 ± 0.15 (the same search on GD, 400 trials;
``python validation/width_transition.py --side gd --only gelu_z2_m1 --ds 1000``).

``--force-quarter`` runs the same search in this process with 8·10⁴ kernel paths but the
finite-n force (and its curvature along θ*) averaged over a quarter of them
(:func:`quarter_weights`): it tells whether what more paths change is in the kernels or in the
force's noise.

Run ``python validation/investigations/z2_path_count.py [--seeds 0,1,2,3,4,5] [--paths
20000,80000] [--force-quarter]`` (about 50 s per run at 2·10⁴ paths and 3.5 min at 8·10⁴ on
two idle cores); ``--report`` only rebuilds the report from the stored runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "z2_path_count"
#: GD's δ_50 on the same problem by the same search (docs/findings.md §10.4)
GD = (10.72, 0.15)


#: run label -> what it is
LABELS = {"paths20000": "2·10⁴ paths (the default)", "paths80000": "8·10⁴ paths",
          "paths80000_force4": "8·10⁴ paths for the kernels, the force from 2·10⁴ of them"}


def run_path(label: str, seed: int) -> Path:
    return OUT / f"{label}_seed{seed}.json"


def command(paths: int, seed: int) -> list[str]:
    """The command line of one run (2·10⁴ paths is the default, so not passed)."""
    cmd = ["dmftsolve", "transition", "--target", "z**2", "--d", "1000", "--seed", str(seed), "--json"]
    if paths != 20000:
        cmd[6:6] = ["--paths", str(paths)]
    return cmd


def run(paths: int, seed: int) -> None:
    cmd = command(paths, seed)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.strip().splitlines()[-1:]}")
    run_path(f"paths{paths}", seed).write_text(proc.stdout)


def quarter_weights(orig: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Force weights on the first quarter of the batches only (``orig``'s weights for those
    ``N/4`` paths, times 4, zero elsewhere): the weighted mean over all ``N`` paths, the force
    and its curvature along θ*, is then the mean over ``N/4`` paths, while the kernels still
    average over all ``N``."""
    def weights(rng: np.random.Generator, n_batches: int, batch: int, n_samples: int) -> np.ndarray:
        k = n_batches // 4
        if k == 0:
            raise ValueError(f"{n_batches} batches: too few for a quarter")
        w = np.zeros(n_batches * batch)
        w[: k * batch] = (n_batches / k) * orig(rng, k, batch, n_samples)
        return w
    return weights


def run_force_quarter(seed: int, paths: int = 80000) -> None:
    """The command's search in this process (``TransitionSettings`` has the command's
    defaults; two workers, forked, so they see the patch) with :func:`quarter_weights`."""
    import dmftsolve.dynamics.dmft as dm
    from dmftsolve import Problem
    from dmftsolve.results import jsonable
    from dmftsolve.thresholds.finite_d_transition import TransitionSettings, transition

    orig = dm.paired_force_weights
    dm.paired_force_weights = quarter_weights(orig)
    try:
        p = Problem.build(target="z**2", activation="gelu", eta=0.5, steps=400)
        c = transition(p, 1000, None, settings=TransitionSettings(seed=seed, n_paths=paths, workers=2),
                       throw=False)
    finally:
        dm.paired_force_weights = orig
    run_path(f"paths{paths}_force4", seed).write_text(json.dumps({"result": jsonable(c.to_dict())}))


def summarise(rows: list[dict]) -> dict:
    d50 = np.array([r["delta_50"] for r in rows])
    err = np.array([r["delta_50_err"] for r in rows])
    k = d50.size
    sd = float(d50.std(ddof=1)) if k > 1 else float("nan")
    return {"n_runs": k, "mean": float(d50.mean()), "mean_se": sd / np.sqrt(k) if k > 1 else float("nan"),
            "seed_sd": sd, "mean_reported_err": float(err.mean()),
            "mean_minus_gd": float(d50.mean() - GD[0])}


def report(runs: Path = OUT, results: Path = HERE / "results") -> dict:
    """Collect the stored runs (``runs``) into ``results/z2_path_count.{md,json}``."""
    by: dict[str, list[dict]] = {}
    for f in sorted(runs.glob("paths*_seed*.json")):
        res = json.loads(f.read_text())["result"]
        by.setdefault(f.stem.rsplit("_seed", 1)[0], []).append({
            "seed": res["settings"]["seed"], "delta_50": res["delta_50"], "delta_50_err": res["delta_50_err"],
            "draws": int(sum(res["draws"])), "seconds": res["elapsed"], "version": res["version"]})
    out = {"gd": GD, "by_paths": {str(p): {"runs": sorted(v, key=lambda r: r["seed"]), **summarise(v)}
                                   for p, v in sorted(by.items(), key=lambda kv: (len(kv[0]), kv[0]))}}
    lines = ["# GeLU on `z²` at d = 1000: the search's δ_50 over seeds, by kernel paths", "",
             "Generated by `python validation/investigations/z2_path_count.py` (each run: "
             "`dmftsolve transition --target \"z**2\" --d 1000 [--paths 80000] --seed S --json`, "
             "defaults otherwise). GD: 10.72 ± 0.15 (same search, 400 trials).", "",
             "| run | seed | δ_50 | draws | wall s |", "|---|---|---|---|---|"]
    for p, v in out["by_paths"].items():
        for r in v["runs"]:
            lines.append(f"| {LABELS.get(p, p)} | {r['seed']} | {r['delta_50']:.2f} ± "
                         f"{r['delta_50_err']:.2f} | {r['draws']} | {r['seconds']:.0f} |")
    lines += ["", "| run | runs | mean δ_50 ± s.e. (seeds' spread) | seeds' sd | mean reported error "
              "| mean − GD |", "|---|---|---|---|---|---|"]
    for p, v in out["by_paths"].items():
        lines.append(f"| {LABELS.get(p, p)} | {v['n_runs']} | {v['mean']:.2f} ± {v['mean_se']:.2f} "
                     f"| {v['seed_sd']:.2f} | {v['mean_reported_err']:.2f} | {v['mean_minus_gd']:+.2f} ± "
                     f"{np.hypot(v['mean_se'], GD[1]):.2f} |")
    (results / "z2_path_count.md").write_text("\n".join(lines) + "\n")
    (results / "z2_path_count.json").write_text(json.dumps(out, indent=1) + "\n")
    print("\n".join(lines))
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2,3,4,5")
    ap.add_argument("--paths", default="20000,80000")
    ap.add_argument("--force-quarter", action="store_true",
                    help="instead: 8·10⁴ kernel paths with the force from a quarter of them (in-process)")
    ap.add_argument("--report", action="store_true", help="only rebuild the report from the stored runs")
    a = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if a.force_quarter and not a.report:
        for seed in (int(x) for x in a.seeds.split(",")):
            print(f"8·10⁴ paths, force from a quarter, seed {seed} ...", flush=True)
            run_force_quarter(seed)
    elif not a.report:
        for paths in (int(x) for x in a.paths.split(",")):
            for seed in (int(x) for x in a.seeds.split(",")):
                print(f"paths {paths}, seed {seed} ...", flush=True)
                run(paths, seed)
    return report()


if __name__ == "__main__":
    main()
