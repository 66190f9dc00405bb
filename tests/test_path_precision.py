"""``validation/investigations/path_precision.py`` on a tiny configuration.

References: at δ = 20 (far above the transition at T = 20) every draw of GeLU on ``z² − 1``
escapes and at δ = 2 none does, in either precision (the doctest of
``finite_d_transition.transition`` is the same problem); the paired summary must count those
draws exactly as the per-draw first passages say.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


def test_tiny_case_pairs_the_draws(tmp_path: Path, load_validation: Callable[[str], ModuleType],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pp = load_validation("path_precision")
    monkeypatch.setitem(pp.CASES, "tiny", {"target": "z**2 - 1", "activation": "gelu", "m": 1,
                                            "eta": 0.5, "steps": 20, "d": 200, "grid": [2.0, 20.0]})
    data = pp.main(["--cases", "tiny", "--draws", "2", "--workers", "1", "--out", str(tmp_path / "pp")])
    v = data["tiny"]
    for dt in ("float64", "float32"):
        assert v[dt]["successes"] == [0, 2], dt
        assert all(s < 0 for s in v[dt]["escape_step"][0]) and all(s > 0 for s in v[dt]["escape_step"][1])
    pr = v["paired"]
    assert pr["same_outcome"] == 1.0 and pr["only_float64"] == pr["only_float32"] == 0
    assert pr["both_succeed"] == 2
    assert (tmp_path / "pp.md").read_text().count("| tiny (m = 1) |") == 1
