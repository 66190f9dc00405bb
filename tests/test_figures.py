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
    # a row that cannot have δ_NN or δ_50 says why, in the JSON and on the page
    assert rows[1]["alg"]["value"] == 0.0
    assert "hard direction" in rows[1]["nn_early"]["why"]
    assert rows[1]["d50"]["status"] == "n/a" and rows[2]["d50"]["status"] == "n/a"
    assert "| 2 | `z1 + z1*z2` |" in md and "no hard direction" in md
    assert "dmftsolve threshold --target 'z**2 - 1'" in md
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
    theory − GD against the matching row, and the command that reproduces it; a run at another
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
    assert cells[2].startswith("6.0 ± ") and cells[3] == "7.0 ± 0.5" and cells[4] == "+1.00"
    assert "--delta 4,6,8 --trials 10" in cells[5] and "--seed 3" in cells[5]
    assert "not the row's set-up" in b and b.split("|")[5].strip() == "—"
    assert rt.gd_checks(rows, rt.FULL, results=tmp_path / "none") == []


def test_results_table_d50_cell_from_gd(tmp_path: Path) -> None:
    """A width-2 row without a theory search shows GD's δ_50 from a spot check at its own set-up; a row
    with a theory value keeps it, and a check at another d does not fill the cell."""
    settings = {"d": 1000, "deltas": [4.0, 6.0, 8.0], "trials": 10, "success_threshold": 0.5,
                "root_seed": {"entropy": 3, "spawn_key": []}, "simulate": {"dtype": "float32"},
                "problem": {"target": "z**2 - 1", "activation": "gelu", "m": 2, "eta": 0.5,
                            "steps": 400}}
    (tmp_path / "gd_check_m2.json").write_text(json.dumps(
        {"summary": {"settings": settings, "success_rate": [0.0, 0.5, 1.0]}}))
    na = {"value": None, "status": "n/a"}
    rows = [{"target": "z**2 - 1", "activation": "gelu", "m": 1, "eta": 0.5,
             "d50": {"value": 7.0, "error": 0.5, "status": "success"}},
            {"target": "z**2 - 1", "activation": "gelu", "m": 2, "eta": 0.5, "d50": na}]
    (check,) = rt.load_gd_checks(rows, rt.FULL, results=tmp_path)
    assert check["row"] == 2 and check["same"]
    # counts symmetric about δ = 6: the probit MLE is 6 exactly
    assert rt.d50_cell(na, check).startswith("GD: 6.0 ± ") and "theory not run" in rt.d50_cell(na, check)
    assert rt.d50_cell(na, None) == "theory not run"
    assert rt.d50_cell(rows[0]["d50"], check) == "7.0 ± 0.5"
    # where the width searches ran, both sides' δ_50 fill the cell instead
    search = {"theory": {"delta_50": 3.524, "err": 0.056}, "gd": {"delta_50": 3.354, "err": 0.096}}
    assert rt.d50_cell(na, check, search) == "3.52 ± 0.06 (GD: 3.35 ± 0.10; search)"
    # the reproducing command names the width (it was missing before 2026-12-02: m = 1 ran instead)
    assert "--activation gelu --m 2 --eta 0.5" in rt.simulate_command(settings)
    assert "--m" not in rt.simulate_command({**settings, "problem": {**settings["problem"], "m": 1}})
    # no trial succeeded anywhere: the probit has no 50 % point; the cell gives the bound
    none = {**check, "counts": [(0, 10, 4.0), (0, 10, 6.0), (0, 10, 8.0)], "d50": float("nan")}
    assert rt.d50_cell(na, none) == ("GD: > 8 (no GD trial succeeded at any δ of the grid) "
                                     "(theory not run)")
    settings["d"] = 500
    (tmp_path / "gd_check_m2.json").write_text(json.dumps(
        {"summary": {"settings": settings, "success_rate": [0.0, 0.5, 1.0]}}))
    (check,) = rt.load_gd_checks(rows, rt.FULL, results=tmp_path)
    assert not check["same"]


def test_results_table_merge_d50() -> None:
    """A δ_50 row at the end of its grid is refitted to the counts of the grid and its extension:
    symmetric counts about δ = 10 give δ_50 = 10; no escape anywhere says '> last δ'; a failed
    extension keeps the grid's cell."""
    base = {"value": 12.9, "error": 3.5, "status": "success", "why": "",
            "p": [0.0, 0.0, 0.5], "deltas": [2.0, 6.0, 10.0], "elapsed": 1.0}
    assert rt.needs_extension(base) and not rt.needs_extension({**base, "p": [0.0, 0.5, 0.75]})
    ext = {"p": [1.0, 1.0], "deltas": [14.0, 18.0], "elapsed": 2.0, "status": "success"}
    merged = rt.merge_d50(base, ext, draws=8)
    assert merged["deltas"] == [2.0, 6.0, 10.0, 14.0, 18.0] and merged["elapsed"] == 3.0
    assert merged["value"] == pytest.approx(10.0, abs=0.05) and merged["error"] > 0
    assert rt.fmt(merged).endswith("(grid extended to 18)")
    none = rt.merge_d50({**base, "p": [0.0, 0.0, 0.0]}, {**ext, "p": [0.0, 0.0]}, draws=8)
    assert none["value"] is None and rt.fmt(none) == "> 18 (no draw escaped at any δ of the grid)"
    failed = rt.merge_d50(base, {"value": None, "status": "error", "why": "boom"}, draws=8)
    assert failed["value"] == 12.9 and failed["extension_failed"] == "boom"


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
    # a δ_50 whose draws never (always) escaped on its grid says which side of the grid it is on
    never = {"value": None, "status": "no_root", "why": "success rate is 0 or 1 at every δ",
             "p": [0.0, 0.0, 0.0], "deltas": [2.0, 6.5, 13.0]}
    assert rt.fmt(never) == "> 13 (no draw escaped at any δ of the grid)"
    assert rt.fmt({**never, "p": [1.0, 1.0, 1.0]}).startswith("< 2 (every draw escaped")
    assert rt.fmt({**never, "p": [0.0, 1.0, 1.0]}).startswith("— (no_root: success rate")
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
    """A row's δ_50 cell takes the seed-1 search (``<case>_defaults``, which the README's
    command lines reproduce), not a case with a seed of its own (``<case>_defaults_seed2``),
    whichever comes later; searches with the plain Stein mean are not used."""

    def search(x: float, **settings: object) -> dict:
        return {"delta_50": x, "err": 0.1, "deltas": [x - 1, x, x + 1], "successes": [0, 4, 8],
                "trials": [8, 8, 8], "settings": {"stein_regression": True, "n_paths": 80_000} | settings}

    data = {"gelu_z2m1_m2_defaults|1000|theory": search(3.3),
            "gelu_z2m1_m2_defaults_seed2|1000|theory": search(3.6),
            "gelu_z2m1_m2|1000|theory": search(3.9, stein_regression=False),
            "gelu_z2m1_m2|1000|gd": search(3.35)}
    monkeypatch.setattr(rt, "_width_data", lambda: (wt, data))
    out = rt.width_searches(rt.FULL)
    cell = out[("z**2 - 1", "gelu", 2, 0.5)]
    assert cell["theory"]["delta_50"] == pytest.approx(3.3, abs=0.05)
    assert cell["gd"]["delta_50"] == pytest.approx(3.35, abs=0.05)
