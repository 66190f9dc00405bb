"""``validation/investigations/probit_scale.py`` on synthetic counts. Reference: the law that
generated them: counts set to their expectation under a probit in log δ (δ_50 = 8, w = 0.15,
10⁴ trials per δ) are refitted to that δ_50 by the log-δ fit, which is then the more likely."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
from scipy.special import ndtr


def test_log_probit_counts_are_recognised(tmp_path: Path,
                                          load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("probit_scale")
    x = np.array([5.0, 6.5, 8.0, 10.0, 13.0])
    n = 10_000
    k = np.round(n * ndtr(np.log(x / 8.0) / 0.15))
    rows = [{"delta": float(a), "successes": int(b), "trials": n} for a, b in zip(x, k, strict=True)]
    path = tmp_path / "counts.json"
    path.write_text(json.dumps({"summary": {"synthetic|1000": {"rows": rows}}}))
    out = mod.main(["--counts", str(path), "--out", str(tmp_path / "scale")])
    (r,) = out["rows"]
    assert abs(r["delta_50_log"] - 8.0) < 0.01 and abs(r["w_log"] - 0.15) < 0.002
    assert out["total"] > 10  # 5 × 10⁴ trials tell the two shapes apart
    assert r["delta_50"] > 8.05  # the skewed curve's linear fit sits above its median
    assert "synthetic, d = 1000" in (tmp_path / "scale.md").read_text()
    assert math.isfinite(r["loglik"])
