"""The checks against GD in ``validation/`` on tiny configurations (seconds each), and their
figures redrawn from the committed JSON into a temporary directory.

``dmft_vs_simulation``, ``thresholds_vs_simulation`` and ``learned_outliers_vs_simulation`` run
with ``--tiny --out-dir``: every output is written, the numbers are finite, and what holds
whatever the sample holds (the DMFT's ‖w_0‖² is q0 = 1, GD's is ‖w_0‖² ≈ 1; success rates are
rates). One theory curve of ``transition_vs_simulation`` runs end to end on a tiny setting.
The figure functions of ``transition_vs_simulation``, ``spectrum_vs_simulation``,
``dmft_vs_simulation`` and ``thresholds_vs_simulation`` redraw from the committed results.
(``gd_transition_counts``, ``hard_overlap_vs_simulation``, ``spectrum_vs_simulation`` and
``results_table`` have their own test files.)
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from validation import dmft_vs_simulation as dvs
from validation import spectrum_vs_simulation as svs
from validation import thresholds_vs_simulation as thvs
from validation import transition_vs_simulation as tvs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "validation" / "results"


def run(script: str, *args: str) -> None:
    """``python -m validation.<script> args`` from the repository root, as a user runs it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-m", f"validation.{script}", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def all_finite(x: object) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


def is_png(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 5000 and path.read_bytes()[:4] == b"\x89PNG"


def test_dmft_vs_simulation_tiny(tmp_path: Path) -> None:
    res = dvs.main(["--tiny", "--out-dir", str(tmp_path)])
    assert set(res["cases"]) == set(dvs.CASES)
    for name, case in res["cases"].items():
        g0 = float(case["dmft"]["gram_diag"]["value"][0])
        assert math.isclose(g0, 1.0, abs_tol=1e-9), name  # q0 = 1, and M0² + Q0 = 1 for the warm start
        (sim,) = case["sim"].values()
        # GD's ‖w_0‖² (per unit): mean 1, sd √(2/d) per trial, 2 trials
        assert abs(float(sim["curves"]["gram_diag"]["mean"][0]) - 1.0) < 5 * math.sqrt(2 / 60 / 2), name
        for gap in sim["gaps"].values():
            assert math.isfinite(gap["max_gap"]) and gap["max_gap"] >= 0
    assert (tmp_path / "dmft_vs_simulation.md").read_text().startswith("# DMFT vs finite-d GD")
    assert is_png(tmp_path / "dmft_vs_simulation.png")


def test_thresholds_vs_simulation_tiny(tmp_path: Path) -> None:
    run("thresholds_vs_simulation", "--tiny", "--out-dir", str(tmp_path))
    res = json.loads((tmp_path / "thresholds_vs_simulation.json").read_text())
    assert res["settings"]["tiny"] is True and res["settings"]["d"] == [40]
    for name in ("gelu", "quad"):
        th = res["theory"][name]
        assert set(th["per_t"]) == {"2", "4"}
        for e in th["per_t"].values():
            br = e["bracket"]
            assert br is None or (2.0 <= br[0] <= br[1] <= 30.0)
        (sim,) = res["simulation"][name].values()
        rate = np.asarray(sim["success_rate"], float)
        assert np.all((rate >= 0) & (rate <= 1)) and len(rate) == 2
        for steps in sim["escape_steps"]:
            assert all(s is None or 0 <= s <= 20 for s in steps)
        assert res["tti"][name]["status"] == "not run (--tiny)"
    assert "--tiny" in (tmp_path / "thresholds_vs_simulation.md").read_text()
    assert is_png(tmp_path / "thresholds_vs_simulation.png")


def test_thresholds_delta_50_by_hand() -> None:
    assert thvs.delta_50(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.25, 0.75])) == 2.5
    assert thvs.delta_50(np.array([1.0, 2.0]), np.array([0.5, 1.0])) == 1.0
    assert thvs.delta_50(np.array([1.0, 2.0]), np.array([0.0, 0.25])) is None


def test_learned_outliers_vs_simulation_tiny(tmp_path: Path) -> None:
    run("learned_outliers_vs_simulation", "--tiny", "--out-dir", str(tmp_path))
    res = json.loads((tmp_path / "learned_outliers_vs_simulation.json").read_text())
    assert res["n_seeds"] == 2 and res["ds"] == [150]
    text = (tmp_path / "learned_outliers_vs_simulation.md").read_text()
    assert text.startswith("#") and "quad_min_d6" in text and "quad_min_warm" in text


@pytest.fixture
def out_to(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[ModuleType], Path]:
    """Point a validation module's ``OUT`` at a temporary directory (the committed PNGs stay)."""
    def point(mod: ModuleType) -> Path:
        monkeypatch.setattr(mod, "OUT", tmp_path)
        return tmp_path
    return point


def test_transition_figures_from_committed_json(out_to: Callable[[ModuleType], Path]) -> None:
    res = json.loads((RESULTS / "transition_vs_simulation.json").read_text())
    out = out_to(tvs)
    tvs.plot(res)
    tvs.plot_front(res)
    assert is_png(out / "transition_vs_simulation.png") and is_png(out / "transition_front.png")
    assert tvs.pretty_target("Min(z**2, 3)") == "min(z², 3)"
    assert tvs.case_title({"activation": "quad", "target": "z**2 - 1", "d": 2000, "case": "quad_z2m1"}) \
        == "r², y = z² − 1, d = 2000, T = 600"
    bars = tvs.clipped([0.0, 0.5, 1.0], [0.2, 0.2, 0.2])
    assert bars.tolist() == [[0.0, 0.2, 0.2], [0.2, 0.2, 0.0]]


def test_spectrum_and_dmft_and_thresholds_figures_from_committed_json(
        out_to: Callable[[ModuleType], Path]) -> None:
    for name, mod in (("spectrum_vs_simulation", svs), ("dmft_vs_simulation", dvs),
                      ("thresholds_vs_simulation", thvs)):
        out = out_to(mod)
        res = json.loads((RESULTS / f"{name}.json").read_text())
        if name == "dmft_vs_simulation":
            mod.plot(res, out)
        else:
            mod.plot(res)
        assert is_png(out / f"{name}.png"), name


def test_transition_curve_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One theory curve of ``transition_vs_simulation`` (2 δ, 2 draws, 400 kernel paths, 40 steps)
    written to a temporary JSON, without GD counts: GD's stored counts are by step 400."""
    monkeypatch.setattr(tvs, "JSON", tmp_path / "transition_vs_simulation.json")
    case = {**tvs.CASES["gelu_z2m1"], "T": 40}
    from dmftsolve import Problem

    p = Problem.build(target=case["target"], activation=case["activation"], eta=case["eta"], steps=40)
    res: dict = {"curves": {}}
    tvs.run_curve(res, "tiny", "gelu_z2m1", case, p, 1000, (6.0, 12.0), "forced", 2, n_paths=400,
                  force_weights="paired", write_report=False)
    c = res["curves"]["tiny"]
    assert np.asarray(c["draws"]).tolist() == [2, 2] and np.asarray(c["deltas"]).tolist() == [6.0, 12.0]
    assert np.all((np.asarray(c["p"]) >= 0) & (np.asarray(c["p"]) <= 1))
    assert all(-1 <= e <= 40 for steps in c["escape_steps"] for e in np.asarray(steps).tolist())  # -1: none
    # GD's stored counts are by step 400, not by this horizon (40): none are joined
    assert c["gd"] is None and math.isnan(c["gd_delta_50"])
    saved = json.loads((tmp_path / "transition_vs_simulation.json").read_text())
    assert "tiny" in saved["curves"]
