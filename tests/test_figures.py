"""The figure scripts of ``validation/figures/`` and ``validation/results_table.py`` on their ``--quick``
configurations: each writes its PNG and JSON (or Markdown and JSON) into a temporary
directory, the JSON states the settings it ran with and holds finite numbers, and a second run
with ``--replot`` redraws from the cache without computing anything.

The scripts run in subprocesses (as a user runs them; their numerical warnings are not errors
there). The closed-form spectral overlap is checked against direct quadrature.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

from validation import results_table as rt
from validation import width_transition as wt
from validation.figures.common import all_finite

ROOT = Path(__file__).resolve().parents[1]


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m script args`` from the repository root, as a user runs it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-m", script, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def finite(values: object) -> bool:
    return all_finite(values)


def check_outputs(out: Path, name: str) -> dict:
    png, js = out / f"{name}.png", out / f"{name}.json"
    assert png.exists() and png.stat().st_size > 5000, f"{png} missing or empty"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads(js.read_text())
    assert data["settings"]["figure"] == name
    assert data["settings"]["quick"] is True
    assert "--quick" in data["command"]
    return data


def replot_computes_nothing(script: str, out: Path, name: str) -> None:
    run(script, "--quick", "--out", str(out), "--replot")
    data = json.loads((out / f"{name}.json").read_text())
    assert data["diagnostics"]["computed"] == 0
    assert data["diagnostics"]["cache_hits"] > 0


def test_success_curves_quick(tmp_path: Path) -> None:
    script = "validation.figures.success_curves"
    run(script, "--quick", "--out", str(tmp_path))
    data = check_outputs(tmp_path, "success_curves")
    s = data["settings"]
    assert s["trials"] == 2 and s["ds"] == [40] and s["cases"] == ["gelu_z2m1", "quad_z2"]
    for name in s["cases"]:
        pts = data["data"]["cases"][name]["gd"]["40"]
        assert [p["delta"] for p in pts] == [2.0, 6.0, 12.0]
        for p in pts:
            assert p["trials"] == 2 and 0 <= p["successes"] <= 2
            assert p["rate"] == p["successes"] / 2
            assert math.isclose(p["rate_se"], math.sqrt(p["rate"] * (1 - p["rate"]) / 2))
            assert finite([p["rate"], p["cos_q30"], p["cos_median"], p["cos_q70"], p["final_cosine"]])
            assert 0 <= p["cos_q30"] <= p["cos_median"] <= p["cos_q70"] <= 1
        th = data["data"]["cases"][name]["theory"]["40"]
        # the theory either ran (finite probabilities) or says why not
        assert ("error" in th) or (finite(th["p"]) and len(th["p"]) == 3)
    replot_computes_nothing(script, tmp_path, "success_curves")
    # --from-json redraws the PNG from the JSON alone and leaves the JSON as it was
    before = (tmp_path / "success_curves.json").read_text()
    (tmp_path / "success_curves.png").unlink()
    run(script, "--from-json", "--out", str(tmp_path))
    assert (tmp_path / "success_curves.png").stat().st_size > 5000
    assert (tmp_path / "success_curves.json").read_text() == before


def test_success_curves_by_step_and_clipped_bars(load_validation) -> None:
    sc = load_validation("success_curves")
    p, se = sc.by_step({"escape_step": [10, 390, 410, None]}, 400)
    assert p == 0.5 and math.isclose(se, math.sqrt(0.25 / 4))
    bars = sc.clipped(np.array([0.0, 0.5, 1.0]), np.array([0.1, 0.1, 0.1]))
    assert bars.tolist() == [[0.0, 0.1, 0.1], [0.1, 0.1, 0.0]]


def test_spectral_init_quick(tmp_path: Path) -> None:
    script = "validation.figures.spectral_init"
    run(script, "--quick", "--out", str(tmp_path))
    data = check_outputs(tmp_path, "spectral_init")
    assert data["settings"]["preprocessing"] == "lal" and data["settings"]["trials"] == 2
    check = data["overlap_check"]
    assert [c["delta"] for c in check] == [0.4, 2.0, 6.0]
    for c in check:
        assert finite([c["simulated"], c["closed_form"]]) and 0 <= c["simulated"] <= 1
    # far above δ_alg the spectral start is already aligned, at d = 60 too
    assert check[-1]["simulated"] > 0.9
    chk = data["data"]["overlap_check_spectral_only"]
    assert [q["delta"] for q in chk] == [1.0, 4.0] and all(q["trials"] == 3 for q in chk)
    assert all(finite([q["overlaps"], q["mean"], q["closed_form"]]) for q in chk)
    th = data["data"]["cases"]["gelu_z2m1"]["theory"]
    assert th[0]["rho2"] == 0.0 and th[0]["final_cosine"] == 0.0  # δ = 0.4 < δ_alg
    assert all(finite(q["final_cosine"]) for q in th)
    replot_computes_nothing(script, tmp_path, "spectral_init")


def test_spectral_overlap_closed_form_matches_quadrature() -> None:
    """ρ²(δ) from the erfcx closed form against the defining equation by direct quadrature:
    (1 − r) E[h²/(1 + r h)] = 1/δ with h = z² − 1 (scipy.integrate.quad over z ~ N(0, 1))."""
    from validation.figures.spectral_init import spectral_overlap2

    def lhs(r: float) -> float:
        f = lambda z: (1 - r) * (z * z - 1) ** 2 / (1 + r * (z * z - 1)) * math.exp(-z * z / 2)  # noqa: E731
        return quad(f, -np.inf, np.inf, epsabs=1e-13, limit=200)[0] / math.sqrt(2 * math.pi)

    for delta in (0.6, 1.0, 2.0, 4.0):
        ref = brentq(lambda r, x=delta: lhs(r) - 1 / x, 1e-6, 1 - 1e-9, xtol=1e-13)
        assert abs(spectral_overlap2(delta) - ref) < 1e-8, delta
    assert spectral_overlap2(0.5) == 0.0 and spectral_overlap2(0.3) == 0.0
    assert 0 < spectral_overlap2(0.5001) < 1e-3


def test_grokking_quick(tmp_path: Path) -> None:
    script = "validation.figures.grokking"
    run(script, "--quick", "--out", str(tmp_path))
    data = check_outputs(tmp_path, "grokking")
    s = data["settings"]
    assert s["convention"] == "centred_bias" and s["bias"] is True and s["target"] == "z**2 - 1"
    assert s["d"] == 100 and s["delta"] == 17.5 and s["n"] == 1750
    gd = data["data"]["gd"]
    assert finite([gd["cosine"], gd["train_loss"], gd["test_loss"], gd["plateau_train"]])
    assert len(gd["steps"]) == len(gd["cosine"][0])
    for key in ("restricted", "escape"):
        th = data["data"]["theory"][key]
        assert "error" in th or finite([th["train_loss"], th["cosine"]])
    replot_computes_nothing(script, tmp_path, "grokking")


def test_hessian_spectra_quick(tmp_path: Path) -> None:
    script = "validation.figures.hessian_spectra"
    run(script, "--quick", "--out", str(tmp_path))
    data = check_outputs(tmp_path, "hessian_spectra")
    s = data["settings"]
    assert s["times"] == [0, 3] and s["ds"] == [120] and s["dynamics"].startswith("restricted")
    sim = data["data"]["sim"]["120"]
    spec = np.asarray(sim["spectrum"])
    assert spec.shape == (1, 2, 120) and np.all(np.isfinite(spec))
    # the recorded lowest eigenvalue is the minimum of the full spectrum
    assert np.allclose(np.asarray(sim["low"])[:, :, 0], spec.min(axis=2))
    th = data["data"]["theory"]["times"]
    for t in ("0", "3"):
        assert finite(th[t]["density"]) and th[t]["right_edge"] is not None
    replot_computes_nothing(script, tmp_path, "hessian_spectra")


def test_results_table_quick(tmp_path: Path) -> None:
    script = "validation.results_table"
    run(script, "--quick", "--out", str(tmp_path))
    md = (tmp_path / "results.md").read_text()
    data = json.loads((tmp_path / "results_table.json").read_text())
    assert data["settings"]["quick"] is True and data["settings"]["n_paths"] == 1000
    rows = data["rows"]
    assert [(r["target"], r["activation"], r["m"]) for r in rows] == [
        ("z**2 - 1", "gelu", 1), ("z1 + z1*z2", "gelu", 1), ("abs(z)", "quad", 2)]
    first = rows[0]
    # δ_alg of a noiseless even label is exactly 1/2 (literature.md §1.4: 1/Var(z²))
    assert abs(first["alg"]["value"] - 0.5) < 1e-6
    for k in ("nn_early", "nn_long", "d50"):
        q = first[k]
        assert (q["value"] is not None and math.isfinite(q["value"])) or q["why"], (k, q)
    # every row with a hard direction has a δ_50 search, one without is refused by the library
    assert rows[2]["d50"]["status"] != "refused" and rows[2]["d50"]["total_draws"] >= 8
    assert rows[1]["alg"]["value"] == 0.0
    assert "hard direction" in rows[1]["nn_early"]["why"]
    assert rows[1]["d50"]["status"] == "refused" and "no hard direction" in rows[1]["d50"]["why"]
    assert "| 2 | `z1 + z1*z2` |" in md and "undefined: no hard direction (refused" in md
    assert "theory not run" not in md
    assert "dmftsolve threshold --target 'z**2 - 1'" in md
    # the exact command of each δ_50 cell: the quick settings are passed as options
    assert ("`dmftsolve transition --target 'abs(z)' --activation quad --m 2 --eta 0.05 --steps 10 "
            "--d 40 --seed 1 --start 6 --paths 400 --draws 4 --max-draws 24 --tol 2`") in md
    run(script, "--quick", "--out", str(tmp_path), "--replot")
    again = json.loads((tmp_path / "results_table.json").read_text())
    assert again["diagnostics"]["computed"] == 0 and again["rows"] == rows
    # --only selects what to compute; the page keeps every row (from the cache)
    run(script, "--quick", "--out", str(tmp_path), "--replot", "--only", "abs")
    subset = json.loads((tmp_path / "results_table.json").read_text())
    assert subset["rows"] == rows
    bad = subprocess.run([sys.executable, "-m", script, "--quick", "--out", str(tmp_path), "--only",
                          "xyz"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "--only matches no target" in bad.stderr.strip().splitlines()[-1]


def test_results_table_gd_checks(tmp_path: Path) -> None:
    """A ``dmftsolve simulate --json`` output named ``gd_check_*.json`` becomes a row of the GD
    spot-check section: its counts, a probit δ_50 (at the centre of symmetric counts),
    theory − GD against the matching row's δ_50 cell, and the command that reproduces it; a run at another
    d is flagged as not the row's set-up (no difference shown)."""
    settings = {"d": 1000, "deltas": [4.0, 6.0, 8.0], "trials": 10, "success_threshold": 0.5,
                "root_seed": {"entropy": 3, "spawn_key": []}, "simulate": {"dtype": "float32"},
                "problem": {"target": "z**2 - 1", "activation": "relu", "m": 1, "eta": 0.5,
                            "steps": 400}}
    summary = {"settings": settings, "success_rate": [0.0, 0.5, 1.0]}
    (tmp_path / "gd_check_a.json").write_text(json.dumps({"summary": summary}))
    other = {**summary, "settings": {**settings, "d": 500}}
    (tmp_path / "gd_check_b.json").write_text(json.dumps({"summary": other}))
    rows = [{"target": "z**2 - 1", "activation": "relu", "m": 1, "eta": 0.5,
             "d50": {"value": 7.0, "error": 0.5, "status": "success"}}]
    lines = rt.gd_checks(rows, rt.FULL, results=tmp_path)
    a, b = (ln for ln in lines if ln.startswith("| 1 "))
    cells = [c.strip() for c in a.split("|")[1:-1]]
    assert cells[1] == "0/10 at 4, 5/10 at 6, 10/10 at 8"
    # counts symmetric about δ = 6 (0, 5, 10 of 10): the probit MLE puts δ_50 at 6 exactly
    assert cells[2].startswith("6.0 ± ") and cells[3] == "+1.00"
    assert "--delta 4,6,8 --trials 10" in cells[4] and "--seed 3" in cells[4]
    assert "not the row's set-up" in b and b.split("|")[4].strip() == "—"
    assert rt.gd_checks(rows, rt.FULL, results=tmp_path / "none") == []


def test_results_table_d50_cell_from_gd(tmp_path: Path) -> None:
    """A row's GD δ_50 comes from a spot check at its own set-up (d, η, T) and is shown beside
    the theory's; a check at another d is not used; a spot check without a 50 % point gives a
    bound and no start for the search."""
    settings = {"d": 1000, "deltas": [4.0, 6.0, 8.0], "trials": 10, "success_threshold": 0.5,
                "root_seed": {"entropy": 3, "spawn_key": []}, "simulate": {"dtype": "float32"},
                "problem": {"target": "z**2 - 1", "activation": "gelu", "m": 2, "eta": 0.5,
                            "steps": 400}}
    (tmp_path / "gd_check_m2.json").write_text(json.dumps(
        {"summary": {"settings": settings, "success_rate": [0.0, 0.5, 1.0]}}))
    rows = [{"target": "z**2 - 1", "activation": "gelu", "m": 1, "eta": 0.5},
            {"target": "z**2 - 1", "activation": "gelu", "m": 2, "eta": 0.5}]
    found = rt.gd_sources(rows, rt.FULL, results=tmp_path)
    spot = [g for g in found[2] if g["source"] == "spot check"]
    assert len(spot) == 1 and not spot[0]["first_passage"] and spot[0]["trials"] == 30
    # counts symmetric about δ = 6: the probit MLE is 6 exactly, and the search starts there
    assert spot[0]["text"].startswith("6.0 ± ") and rt.d50_start(spot[0]) == 6.0
    theory = {"value": 6.4, "error": 0.14, "status": "success", "why": ""}
    assert rt.d50_cell(theory, spot[0]) == f"6.40 ± 0.14 (GD: {spot[0]['text']}, spot check)"
    assert rt.d50_cell(theory, None) == "6.40 ± 0.14"
    assert 1 not in found or all(g["source"] != "spot check" for g in found[1])
    # the counts of gd_transition_counts at the row's set-up (d = 1000, T = 400; not d = 500)
    summary = {"gelu_z2m1|1000": {"rows": [{"trials": 40}] * 6, "delta_50": 6.892, "delta_50_err": 0.0715},
               "gelu_z2m1|500": {"rows": [{"trials": 40}] * 7, "delta_50": 6.27, "delta_50_err": 0.09}}
    (tmp_path / "gd_transition_counts.json").write_text(json.dumps({"summary": summary}))
    counts = [g for g in rt.gd_sources(rows, rt.FULL, results=tmp_path)[1] if g["source"] == "counts"]
    assert len(counts) == 1 and counts[0]["trials"] == 240 and counts[0]["text"] == "6.89 ± 0.07"
    assert counts[0]["what"] == "`python -m validation.gd_transition_counts --cases 1`"
    (tmp_path / "gd_transition_counts.json").unlink()
    # no trial succeeded anywhere: a bound, no 50 % point, the search starts at the default
    (tmp_path / "gd_check_m2.json").write_text(json.dumps(
        {"summary": {"settings": settings, "success_rate": [0.0, 0.0, 0.0]}}))
    (none,) = [g for g in rt.gd_sources(rows, rt.FULL, results=tmp_path)[2] if g["source"] == "spot check"]
    assert none["value"] is None and none["text"] == "> 8 (no GD trial succeeded at any δ of the grid)"
    assert rt.d50_start(none) == rt.D50_START
    settings["d"] = 500
    (tmp_path / "gd_check_m2.json").write_text(json.dumps(
        {"summary": {"settings": settings, "success_rate": [0.0, 0.5, 1.0]}}))
    assert all(g["source"] != "spot check" for g in rt.gd_sources(rows, rt.FULL, results=tmp_path).get(2, []))
    # the reproducing command names the width (it was missing before 2026-12-02: m = 1 ran instead)
    assert "--activation gelu --m 2 --eta 0.5" in rt.simulate_command(settings)
    assert "--m" not in rt.simulate_command({**settings, "problem": {**settings["problem"], "m": 1}})


def test_results_table_best_gd_and_start() -> None:
    """GD's δ_50 shown beside a row: a first passage (the theory's criterion) before a final
    cosine, then the most trials; the search starts at it rounded to 0.1."""
    spot = {"source": "spot check", "first_passage": False, "trials": 500, "value": 6.0}
    search = {"source": "search", "first_passage": True, "trials": 120, "value": 3.354}
    counts = {"source": "counts", "first_passage": True, "trials": 720, "value": 10.8249}
    assert rt.best_gd([spot, search]) is search and rt.best_gd([search, counts, spot]) is counts
    assert rt.best_gd([]) is None and rt.best_gd(None) is None
    assert rt.d50_start(search) == 3.4 and rt.d50_start(counts) == 10.8 and rt.d50_start(None) == 6.0


def test_results_table_d50_cells_say_why() -> None:
    """A δ_50 cell: value ± error; the status and reason when the search stopped before its
    tolerance; a bound when no draw passed up to the search's largest δ; 'undefined' when the
    library refuses a label without a hard direction (its message in the JSON)."""
    assert rt.fmt_d50({"value": 7.123, "error": 0.146, "status": "success", "why": ""}) == "7.12 ± 0.15"
    stopped = rt.fmt_d50({"value": 12.3, "error": 0.4, "status": "not_converged",
                          "why": "max trials (600) spent before the error reached tol: delta_50 "
                                 "error 0.4 > tol 0.15"})
    assert stopped.startswith("12.3 ± 0.4 (not_converged: max trials (600) spent")
    edge = {"value": None, "error": None, "status": "no_root",
            "why": "success rate is 0 or 1 at every δ: no success by step T up to delta = 200"}
    assert rt.fmt_d50(edge) == "> 200 (no_root: no draw passed by step T at any δ up to 200)"
    refused = {"value": None, "status": "refused",
               "why": "target 'z1 + z1*z2' has no hard direction (every direction is learned in O(1) steps)"}
    assert rt.fmt_d50(refused).startswith("undefined: no hard direction")
    other = rt.fmt_d50({"value": None, "status": "refused", "why": "lam must be below 1/eta = 2"})
    assert other == "refused: lam must be below 1/eta = 2"
    failed = rt.fmt_d50({"value": None, "status": "failed", "why": "2 of 5 points had failed draws"})
    assert failed == "— (failed: 2 of 5 points had failed draws)"
    assert rt.fmt_d50(None) == "not run yet"


def test_results_table_d50_command_is_the_cached_call() -> None:
    """The command printed for a δ_50 cell parses (with the command's own parser) to the problem
    and the TransitionSettings fields of the cell's cache key, whose kernel paths are the
    library's default for the width and label."""
    from dmftsolve.cli import build_parser
    from dmftsolve.cli._common import problem_from_args
    from dmftsolve.finite_d import default_kernel_paths, label_is_uncentred

    for cfg in (rt.FULL, rt.QUICK):
        for target, act, m, start in (("z**2 + 0.5*eps", "quad", 2, 4.4), ("z1*z2", "tanh", 1, 6.0)):
            cmd = rt.transition_command(target, act, m, cfg, start)
            args = build_parser().parse_args(shlex.split(cmd)[1:])
            p = rt.row_problem(target, act, m, cfg["transition_steps"])
            assert problem_from_args(args).to_dict() == p.to_dict()
            key = rt.d50_key(target, act, m, cfg, start)["transition"]
            assert args.d == cfg["d"] and (args.seed, args.start) == (key["seed"], key["start"]) == (1, start)
            assert (args.draws, args.tol, args.max_draws) == (key["draws"], key["tol"], key["max_draws"])
            paths = default_kernel_paths(m, label_is_uncentred(p)) if args.paths is None else args.paths
            assert key["n_paths"] == paths and key["steps"] == cfg["transition_steps"]
            assert key["stein_regression"] and key["history"] == "compact" and key["give_up_factor"]


def test_results_table_same_cells() -> None:
    """The note on identical δ_NN cells names the first two rows that share value and error."""
    a = {"value": 4.79, "error": 0.25}
    rows = [{"nn_early": {"value": 5.0, "error": 0.2}}, {"nn_early": a}, {"nn_long": None},
            {"nn_early": {"value": 4.79, "error": 0.3}, "nn_long": dict(a)}]
    assert rt.same_cells(rows) == " (here rows 2 and 4: 4.79 ± 0.25)"
    assert rt.same_cells(rows[:3]) == ""


def test_results_table_not_converged_cell() -> None:
    """A long-time δ_NN whose rule was not met shows its value at T (and at T/2 when the message
    has it) instead of a cut message; the messages are in the form of
    ``hessian_threshold.combine``'s."""
    head = ("δ_NN = 10.857 ± 0.24 (mean ± standard error over 3 independent DMFT seeds, bisection "
            "resolution included; replicate brackets [10.76, 11.38]); long-time rule NOT met: ")
    tail = "δ_NN(T/2=100) = 9.31 ± 0.31 vs δ_NN(T=200) = 10.857 ± 0.24 (tolerance 0.78)"
    assert rt.fmt({"value": None, "status": "not_converged", "why": head + tail}) == (
        "10.86 ± 0.24 at T = 200, 9.3 ± 0.3 at T = 100: not converged in T")
    cut = rt.fmt({"value": None, "status": "not_converged", "why": head + "δ_"})
    assert cut.startswith("10.86 ± 0.24 at T = 200, not converged")
    # a cut message names no T: the cell shows the T the rule ran at (the quick table's 10)
    cut_quick = rt.fmt({"value": None, "status": "not_converged", "why": head + "δ_"}, long_time=10)
    assert cut_quick.startswith("10.86 ± 0.24 at T = 10, not converged")
    other = rt.fmt({"value": None, "status": "not_converged", "why": "no bracket at T/2"})
    assert other.startswith("— (not_converged: no bracket")


@pytest.mark.slow
@pytest.mark.dask
def test_success_curves_on_a_dask_cluster_equals_serial(tmp_path: Path) -> None:
    """``--dask ADDRESS`` sends the GD runs to a dask.distributed cluster; the seeds do not depend
    on the executor, so the numbers equal the serial run's."""
    distributed = pytest.importorskip("distributed")
    script = "validation.figures.success_curves"
    args = ["--quick", "--no-theory", "--cases", "gelu_z2m1"]
    run(script, *args, "--out", str(tmp_path / "serial"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        run(script, *args, "--out", str(tmp_path / "dask"), "--dask", cluster.scheduler_address)
    a, b = (json.loads((tmp_path / k / "success_curves.json").read_text())["data"]
            for k in ("serial", "dask"))
    strip = lambda pts: [{k: v for k, v in p.items() if k != "seconds_per_run"} for p in pts]  # noqa: E731
    assert strip(a["cases"]["gelu_z2m1"]["gd"]["40"]) == strip(b["cases"]["gelu_z2m1"]["gd"]["40"])


def test_success_from_counts(tmp_path: Path) -> None:
    """``success_from_counts.py`` redraws Figures 4/5 from the committed JSONs. Its GD numbers per
    δ match a recount of the raw trials here (first passage by T, final cosine above 1/2, final
    cosine percentiles), and its theory curve is the committed default-construction curve.
    Bad input: one error line, exit status 2."""
    script = "validation.figures.success_from_counts"
    run(script, "--cases", "gelu_z2m1", "--no-nn", "--out", str(tmp_path))
    data = json.loads((tmp_path / "success_from_counts.json").read_text())
    assert (tmp_path / "success_from_counts.png").stat().st_size > 5000
    assert data["settings"]["figure"] == "success_from_counts" and data["settings"]["delta_nn"] == "none"
    counts = json.loads((ROOT / "validation" / "results" / "gd_transition_counts.json").read_text())
    e = data["cases"]["gelu_z2m1"]
    assert sorted(e["ds"], key=int) == ["500", "1000", "2000", "3000", "4000"]
    for d, dd in e["ds"].items():
        run_ = counts["runs"][f"gelu_z2m1|{d}"]
        raw = {pt["delta"]: [t for ch in pt["chunks"] for t in ch["trials"]]
               for pt in run_["points"].values()}
        assert [p["delta"] for p in dd["gd"]] == sorted(raw)
        for p in dd["gd"]:
            trs = raw[p["delta"]]
            fin = np.array([t["final_cosine"] for t in trs], float)
            first = sum(1 for t in trs if t["escape_step"] is not None and t["escape_step"] <= run_["T"])
            final = int(np.sum(fin > 0.5))
            assert (p["successes"], p["successes_final"], p["trials"]) == (first, final, len(trs))
            assert [p["cos_q30"], p["cos_median"], p["cos_q70"]] == pytest.approx(
                np.percentile(fin, [30, 50, 70]).tolist())
    theory = json.loads((ROOT / "validation" / "results" / "transition_vs_simulation.json").read_text())
    ref = theory["curves"]["gelu_z2m1|4000|forced@pps2@paired"]
    assert e["ds"]["4000"]["theory"]["delta_50"] == pytest.approx(ref["delta_50"])
    assert e["ds"]["4000"]["theory"]["successes"] == ref["successes"]
    bad = subprocess.run([sys.executable, "-m", script, "--cases", "nope", "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "--cases must name" in bad.stderr.strip().splitlines()[-1]
    (tmp_path / "bad.json").write_text("{}")
    bad = subprocess.run([sys.executable, "-m", script, "--counts", str(tmp_path / "bad.json"), "--no-nn",
                          "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "not the JSON of" in bad.stderr.strip().splitlines()[-1]


def test_results_table_width_search_is_seed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row's δ_50 cell takes a width_transition search only when it ran exactly as the row's
    search would: seed 1 (``<case>_defaults``, not ``<case>_defaults_seed2``), responses by
    regression, the default kernel paths and cut-off of the width and label, the default tol and
    budget; GD's own search of the case gives the row's GD."""
    from dmftsolve import Problem
    from dmftsolve.finite_d import TransitionSettings, resolve_settings

    base = TransitionSettings()
    res = resolve_settings(base, Problem.build(target="z**2 - 1", activation="gelu", m=2))
    paths = res.n_paths

    def search(x: float, **settings: object) -> dict:
        return {"delta_50": x, "err": 0.1, "deltas": [x - 1, x, x + 1], "successes": [0, 4, 8],
                "trials": [8, 8, 8], "status": "success", "message": "", "seconds": 60.0,
                "settings": {"stein_regression": True, "n_paths": paths, "tol": base.tol,
                             "max_draws": base.max_draws, "draws": base.draws, "seed": 1,
                             "history": "compact", "path_dtype": "float32",
                             "paths_per_sample": res.paths_per_sample, "null_rtol": res.null_rtol,
                             "construction": "forced", "version": "0.13.0"} | settings}

    data = {"gelu_z2m1_m2_defaults|1000|theory": search(3.3),
            "gelu_z2m1_m2_defaults_seed2|1000|theory": search(3.6, seed=2),
            "gelu_z2m1_m2|1000|theory": search(3.9, stein_regression=False),
            "gelu_z2m1_m2|1000|gd": search(3.35),
            "gelu_z1z2_m2_defaults|1000|theory": search(4.3, n_paths=paths // 4),
            "gelu_abs_m2_defaults|1000|theory": search(8.0, max_draws=160),
            "gelu_easyhard_m2_defaults|1000|theory": search(3.7, null_rtol=1e-4)}
    monkeypatch.setattr(rt, "_width_data", lambda: (wt, data))
    out = rt.width_theory(rt.FULL)
    assert set(out) == {("z**2 - 1", "gelu", 2, 0.5)}
    cell = out[("z**2 - 1", "gelu", 2, 0.5)]
    assert cell["value"] == pytest.approx(3.3, abs=0.05) and cell["case"] == "gelu_z2m1_m2_defaults"
    assert cell["start"] == wt.CASES["gelu_z2m1_m2_defaults"]["start"]
    assert rt.width_theory(rt.QUICK) == {}  # other settings: no stored search applies
    rows = [{"target": "z**2 - 1", "activation": "gelu", "m": 2, "eta": 0.5}]
    (gd,) = rt.gd_sources(rows, rt.FULL, results=Path("/nonexistent"))[1]
    assert gd["source"] == "search" and gd["value"] == pytest.approx(3.35, abs=0.05)
    assert "--side gd --only gelu_z2m1_m2`" in gd["what"]
