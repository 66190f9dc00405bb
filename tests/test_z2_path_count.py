"""``validation/investigations/z2_path_count.py``: its command lines and its report, on synthetic
runs whose mean and spread are known in closed form (no DMFT is run)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType


def _fake_run(path: Path, seed: int, d50: float, err: float) -> None:
    path.write_text(json.dumps({"result": {"settings": {"seed": seed}, "delta_50": d50,
                                           "delta_50_err": err, "draws": [8, 16, 8],
                                           "elapsed": 12.0, "version": "test"}}))


def test_commands_pass_the_paths_only_when_not_the_default(
        load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("z2_path_count")
    assert mod.command(20000, 3) == ["dmftsolve", "transition", "--target", "z**2", "--d", "1000",
                                     "--seed", "3", "--json"]
    assert mod.command(80000, 0) == ["dmftsolve", "transition", "--target", "z**2", "--d", "1000",
                                     "--paths", "80000", "--seed", "0", "--json"]


def test_report_gives_the_seeds_mean_and_its_standard_error(
        tmp_path: Path, load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("z2_path_count")
    # 2·10⁴ paths: 10.9, 11.0, 11.2 (mean 11.033…, sd 0.1528, s.e. 0.0882); 8·10⁴: one run
    for seed, v in enumerate((10.9, 11.0, 11.2)):
        _fake_run(tmp_path / f"paths20000_seed{seed}.json", seed, v, 0.15)
    _fake_run(tmp_path / "paths80000_seed0.json", 0, 10.8, 0.14)
    out = mod.report(tmp_path, tmp_path)
    a = out["by_paths"]["paths20000"]
    sd = math.sqrt(((10.9 - 33.1 / 3) ** 2 + (11.0 - 33.1 / 3) ** 2 + (11.2 - 33.1 / 3) ** 2) / 2)
    assert a["n_runs"] == 3 and [r["seed"] for r in a["runs"]] == [0, 1, 2]
    assert math.isclose(a["mean"], 33.1 / 3) and math.isclose(a["seed_sd"], sd)
    assert math.isclose(a["mean_se"], sd / math.sqrt(3))
    assert math.isclose(a["mean_minus_gd"], 33.1 / 3 - 10.72)
    assert math.isnan(out["by_paths"]["paths80000"]["mean_se"])  # one seed: no spread
    md = (tmp_path / "z2_path_count.md").read_text()
    assert "| 2·10⁴ paths (the default) | 1 | 11.00 ± 0.15 | 32 | 12 |" in md
    assert json.loads((tmp_path / "z2_path_count.json").read_text())["by_paths"]["paths20000"]["runs"][2][
        "delta_50"] == 11.2


def test_quarter_weights_average_the_force_over_a_quarter_of_the_paths(
        load_validation: Callable[[str], ModuleType]) -> None:
    """The weighted mean over all N paths equals the original weights' mean over the first N/4
    (the same random stream), and the other paths weigh nothing."""
    import numpy as np

    from dmftsolve.dynamics.dmft import paired_force_weights

    mod = load_validation("z2_path_count")
    g = np.random.default_rng(1).standard_normal(8 * 6)
    w = mod.quarter_weights(paired_force_weights)(np.random.default_rng(2), 8, 6, 40)
    w_sub = paired_force_weights(np.random.default_rng(2), 2, 6, 40)
    assert np.all(w[12:] == 0)
    assert np.isclose(np.mean(w * g), np.mean(w_sub * g[:12]))
