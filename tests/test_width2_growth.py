"""``validation/investigations/width2_growth.py`` in its ``--quick`` configuration.

Reference values are exact: at t = 0 a zero start has ``d‖M_0‖² = 0`` on both sides; the
theory's random start is the draws' ``√d M_0`` of ``draw_starts`` and GD's is the first row of
each trial's initial weights (``initial_weights`` on the trial's ``init`` stream), which the
script must report unchanged (GD to float32 rounding). From a zero start only the finite-n
force moves the overlaps, so they must be non-zero by t = 2 (the force is on).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from dmftsolve.seeds import as_seed_sequence
from dmftsolve.simulation.trials import initial_weights, trial_generators, trial_seed
from dmftsolve.thresholds.finite_d_transition import TransitionSettings, draw_starts, transition_directions


def test_quick_run_starts_and_force(tmp_path: Path, load_validation: Callable[[str], ModuleType]) -> None:
    w2 = load_validation("width2_growth")
    data = w2.main(["--quick", "--out", str(tmp_path), "--only",
                    "z2:gd:random,z2:theory:random,z2:gd:zero,z2:theory:zero"])
    cfg = w2.QUICK
    for side in ("gd", "theory"):
        zero = data[f"z2|{side}|zero"]["rows"]
        assert zero["0"]["mean"] == 0.0
        assert zero["2"]["mean"] > 0.0  # the finite-n force acts
    p = w2.problem_of("z2", cfg["T"])
    s = TransitionSettings(draws=cfg["runs"], seed=cfg["theory_seed"], n_paths=w2.paths_of("theory", cfg))
    X = draw_starts(p, w2.LABELS["z2"][1], cfg["d"], s, transition_directions(p))
    want = (X[:, 0, :] ** 2).sum(axis=1)
    assert np.isclose(data["z2|theory|random"]["rows"]["0"]["mean"], want.mean(), rtol=1e-9)
    assert np.isclose(data["z2|theory|random"]["rows"]["0"]["median"], np.median(want), rtol=1e-9)
    root = as_seed_sequence(cfg["gd_seed"])
    W0 = [initial_weights(p, cfg["d"], trial_generators(trial_seed(root, j)).init)
          for j in range(cfg["runs"])]
    gd = np.array([cfg["d"] * float((W[0] ** 2).sum()) for W in W0])
    assert np.isclose(data["z2|gd|random"]["rows"]["0"]["mean"], gd.mean(), rtol=1e-5)
    assert (tmp_path / "width2_growth_quick.md").read_text().count("| 6 |") == 2
