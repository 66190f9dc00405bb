"""``validation/investigations/late_escape.py``: the early/late escape split and the trajectory summary.

Reference values are counted by hand from the synthetic inputs written here; the tiny
trajectory run checks what holds whatever the sample (m_0 of GD is √d w_0[0], the cosine is
|w_0[0]|/‖w_0‖ ≤ 1, a run that has escaped is not a survivor) and that bad arguments exit 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest


@pytest.fixture(scope="module")
def le(load_validation: Callable[[str], ModuleType]) -> ModuleType:
    return load_validation("late_escape")


def _gd_run(points: dict[float, list[int | None]]) -> dict[str, Any]:
    return {"points": {str(k): {"delta": k, "chunks": [{"trials": [{"escape_step": e} for e in v]}]}
                       for k, v in points.items()}}


def test_escape_split_counts_by_hand(le: ModuleType) -> None:
    # δ = 6: GD escapes at 15, 45, 100, never; theory at 10, 70, never, never (T = 80)
    # δ = 9 is GD-only and must not enter
    theory = {"c|500|forced": {"T": 80, "deltas": [6.0], "escape_steps": [[10, 70, -1, -1]]}}
    gd = {"c|500": _gd_run({6.0: [15, 45, 100, None], 9.0: [5, 5, 5, 5]})}
    out = le.escape_split(theory, gd, cuts=(30,))
    (row,) = out["rows"]
    assert row["gd_trials"] == 4 and row["theory_draws"] == 4
    assert row["gd_early"] == 0.25 and row["gd_late"] == 0.25  # 45 is late, 100 > T is none
    assert row["th_early"] == 0.25 and row["th_late"] == 0.25
    assert math.isclose(row["gd_early_err"], math.sqrt(0.25 * 0.75 / 4))
    assert out["pooled"][0]["gd_trials"] == 4


def test_trajectory_summary_by_hand(le: ModuleType) -> None:
    cos = np.array([[0.1, 0.6, 0.2],   # escapes at 1 (and falls back: still escaped)
                    [0.1, 0.2, 0.7],   # escapes at 2
                    [0.1, 0.2, 0.3],
                    [0.1, 0.1, 0.1],
                    [0.1, 0.2, np.nan]])  # failed at 2: not escaped, not a survivor at 2
    m = np.arange(15, dtype=float).reshape(5, 3)
    s = le.trajectory_summary(m, cos, (0, 1, 2, 5))
    assert s["times"] == [0, 1, 2]  # 5 is past the end
    assert s["p_escaped"] == [0.0, 0.2, 0.4]
    assert s["survivors"] == [5, 4, 2]
    assert s["survivor_quartiles"][1] == np.percentile([4.0, 7.0, 10.0, 13.0], [25, 50, 75]).tolist()
    assert s["survivor_quartiles"][2] is None  # fewer than 4 survivors


def test_tiny_trajectories_and_bad_arguments(le: ModuleType, tmp_path: Path) -> None:
    case = le.CASES["gelu_z2m1"]
    m, cos = le.gd_trajectories(case, 50, 4.0, 3, 5)
    assert m.shape == cos.shape == (3, 6)
    assert np.all((cos >= 0) & (cos <= 1))
    # the theory trajectories are the transition's own draws: same first passage
    from dmftsolve.thresholds.finite_d_transition import TransitionSettings, success_probability

    p = le.problem_of(case, 40)
    # the investigation keeps the draws of its stored runs (the plain Stein mean, before 0.5.0)
    sp = success_probability(p, 12.0, 60, settings=TransitionSettings(draws=3, seed=1, n_paths=400,
                                                                      stein_regression=False))
    hm, hcos = le.theory_trajectories(case, 60, 12.0, 3, 40, paths=400, seed=1)
    first = [int(np.argmax(c > 0.5)) if np.any(c > 0.5) else -1 for c in np.nan_to_num(hcos)]
    assert first == sp.escape_step.tolist()
    assert np.allclose(hm[:, 0], sp.m0)
    res = le.main(["--trajectories", "gelu_z2m1:60:5", "--gd-trials", "4", "--draws", "2",
                   "--steps", "4", "--paths", "400", "--out-dir", str(tmp_path)])
    tr = res["trajectories"]["gelu_z2m1|60|5"]
    assert tr["gd"]["runs"] == 4 and tr["theory"]["runs"] == 2
    assert (tmp_path / "late_escape.md").exists()
    for bad in (["--trajectories", "nope:1:2"], ["--trajectories", "gelu_z2m1:x"], ["--draws", "0"]):
        with pytest.raises(SystemExit) as e:
            le.main([*bad, "--out-dir", str(tmp_path)])
        assert e.value.code == 2
