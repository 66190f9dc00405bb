"""``validation/investigations/r2_divergence.py`` on a tiny configuration (d = 200, 4 trials,
10 steps, width 4). Reference: the simulator itself (the same counts at d = 1000 are in the
committed output): at η = 0.1 and δ = 4.5 GD diverges in every trial, at η = 0.05 in none, and
the report lists each cell."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType


def test_tiny_run_counts_diverged_trials(tmp_path: Path,
                                         load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("r2_divergence")
    data = mod.main(["--widths", "4", "--etas", "0.1,0.05", "--trials", "4", "--steps", "10", "--d", "200",
                     "--out", str(tmp_path / "r2")])
    fast, slow = data["rows"]
    assert (fast["eta"], slow["eta"]) == (0.1, 0.05)
    assert fast["cells"][0] == {"delta": 4.5, "diverged": 4}
    assert all(c["diverged"] == 0 for c in slow["cells"])
    assert "| 4 | 0.1 | 4/4 at 4.5," in (tmp_path / "r2.md").read_text()
