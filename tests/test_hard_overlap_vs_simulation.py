"""``validation/hard_overlap_vs_simulation.py`` in its ``--quick`` configuration.

Checks what holds exactly whatever the sample: the noise part starts at ``m_0 = 0`` in GD and
in the forced DMFT (Poisson and paired force weights); the forced DMFT's ``Var m_0`` is the
mean square of its stratified ``N(0, 1)`` starts (within the stratification error); GD's
``Var m_0`` is the sample variance of ``√d w_0[0]`` with ``w_0 ~ N(0, I/d)``; the r² cases run
5 times the steps of the GeLU cases; a rerun reads the cache; bad arguments fail with a message.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> Any:
    sys.path.insert(0, str(ROOT / "validation"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "validation" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


hov = _load("hard_overlap_vs_simulation")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("hov")
    hov.main(["--quick", "--out-dir", str(out), "--cases", "gelu_z2m1,quad_z2"])
    return out, json.loads((out / "hard_overlap_vs_simulation_quick.json").read_text())


def test_initial_values(quick: tuple[Path, dict[str, Any]]) -> None:
    _, res = quick
    assert set(res["cases"]) == {"gelu_z2m1", "quad_z2"}
    for e in res["cases"].values():
        for key in ("forced_100", "forced_100_paired"):  # Poisson and paired force weights
            fo = e["theory"][key]
            assert fo["var_noise"][0] == 0.0
            # stratified quantiles of N(0, 1): mean square within ~1/K of 1 for K = 8 draws
            assert abs(fo["var"][0] - 1.0) < 0.35
            assert np.all(np.isfinite(fo["var"])) and fo["failed"] == 0
        # the two weights draw different forces: the noise parts differ after the first step
        assert e["theory"]["forced_100"]["var_noise"][-1] != e["theory"]["forced_100_paired"]["var_noise"][-1]
        g = e["gd"]["100"]
        assert g["var_noise"][0] == 0.0
        # sample variance of 8 N(0, 1) draws: within 4 standard errors √(2/7)
        assert abs(g["var"][0] - 1.0) < 4 * math.sqrt(2 / 7)
        assert np.all(np.asarray(g["var"]) >= 0) and np.all(np.isfinite(fo["var"]))


def test_step_scale(quick: tuple[Path, dict[str, Any]]) -> None:
    _, res = quick
    T = hov.QUICK["T"]
    assert len(res["cases"]["gelu_z2m1"]["gd"]["100"]["var"]) == T + 1
    assert len(res["cases"]["quad_z2"]["gd"]["100"]["var"]) == 5 * T + 1
    assert len(res["cases"]["quad_z2"]["theory"]["pathwise"]["var"]) == 5 * hov.QUICK["pathwise_T"] + 1


def test_report_and_resume(quick: tuple[Path, dict[str, Any]]) -> None:
    out, res = quick
    md = (out / "hard_overlap_vs_simulation_quick.md").read_text()
    T = hov.QUICK["T"]
    assert "## quad_z2" in md and f"| {5 * T} |" in md and f"| {T} |" in md
    again = hov.main(["--quick", "--out-dir", str(out), "--cases", "gelu_z2m1,quad_z2"])
    for name in res["cases"]:
        assert again["cases"][name]["gd"]["100"]["seconds"] == res["cases"][name]["gd"]["100"]["seconds"]


def test_bad_case(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        hov.main(["--quick", "--out-dir", str(tmp_path), "--cases", "nope"])
    with pytest.raises(SystemExit):
        hov.main(["--quick", "--out-dir", str(tmp_path), "--weights", "uniform"])
