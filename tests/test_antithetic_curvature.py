"""``validation/investigations/antithetic_curvature.py`` on a tiny configuration (4000 paths,
steps 0 and 5). References: at step 0 (``M = 0``, fields ``±U`` with ``U ~ N(0, 1)``) the
reflected members have equal summands (correlation 1) and the antithetic correlation is that of
``z² D(y, U)`` and ``z² D(y, −U)``, computed here by an independent Monte Carlo over 4·10⁵
draws of ``(z, U)`` (closed form not available for GeLU)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from dmftsolve import Problem


def test_tiny_run_measures_the_antithetic_correlation(tmp_path: Path,
                                                      load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("antithetic_curvature")
    res = mod.main(["--paths", "4000", "--steps", "0,5", "--out", str(tmp_path / "ac")])
    rng = np.random.default_rng(0)
    z, u = rng.standard_normal(400_000), rng.standard_normal(400_000)
    for tgt, delta in mod.CASES:
        p = Problem.build(target=tgt, activation="gelu")
        y = p.labels(z[:, None], np.zeros(z.size))
        c_plus = z**2 * p.hess(y, u[:, None])[:, 0, 0]
        c_minus = z**2 * p.hess(y, -u[:, None])[:, 0, 0]
        rho = float(np.corrcoef(c_plus, c_minus)[0, 1])  # 0.92 and 0.94
        row = res[f"{tgt}|{delta:g}"]
        assert row[0]["reflected"] == pytest.approx(1.0, abs=1e-12)
        # 1000 antithetic pairs: the estimate's sd is about (1 − ρ²)/√1000 ≈ 0.005
        assert row[0]["antithetic"] == pytest.approx(rho, abs=0.03)
        assert set(row) == {0, 5}
    assert "| `z**2`, 11 | 0 |" in (tmp_path / "ac.md").read_text()
