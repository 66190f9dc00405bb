"""``validation/investigations/late_kernels.py`` in its ``--quick`` configuration.

At t = 0 the restricted field ``h`` is independent of ``z`` with ``h ~ N(0, q0 = 1)``, so GD's
and the DMFT's curvature along θ*, ``E[z² D(y(z), h)]``, must match a 2-d Gauss–Hermite
quadrature (the reference; numpy's ``hermegauss`` nodes) within their Monte Carlo errors, and
``Q(0,0)`` is ``‖w_0‖²`` (GD) and ``q0 = 1`` (DMFT). A rerun reads the cache.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np


def test_quick_run_matches_quadrature_at_t0_and_caches(tmp_path: Path,
                                                       load_validation: Callable[[str], ModuleType]) -> None:
    lk = load_validation("late_kernels")
    res = lk.main(["--quick", "--out-dir", str(tmp_path)])
    e = res["gelu_z2m1"]
    assert e["times"][0] == 0
    p = lk.problem_of("gelu_z2m1", 1)
    x, wt = np.polynomial.hermite_e.hermegauss(60)
    wt = wt / wt.sum()
    Z, H = np.meshgrid(x, x, indexing="ij")
    y = np.asarray(p.labels(Z.reshape(-1, 1), np.zeros(Z.size)), float)
    D = np.asarray(p.hess(y, H.reshape(-1, 1)), float).reshape(Z.shape)
    ref = float(np.einsum("i,j,ij->", wt, wt, Z**2 * D))
    g = e["gd"]
    n = round(e["delta"] * e["d"])
    assert abs(g["RQ"][0] - ref) < 4 * g["RQ_se"][0] + 1e-12
    # ‖w_0‖² with w_0[0] = 0: mean (d − 1)/d, sd √(2(d − 1))/d per trial
    d = e["d"]
    assert abs(g["Q"][0] - (d - 1) / d) < 4 * math.sqrt(2 * (d - 1)) / d / math.sqrt(g["trials"])
    for v in e["dmft"].values():
        assert v["status"] == "success"
        assert v["Q"][0] == 1.0
        # the DMFT's paths: sd of z² D is about that of GD's per-sample values
        sd_sample = g["RQ_sd"][0] * math.sqrt(n)
        assert abs(v["RQ"][0] - ref) < 4 * sd_sample / math.sqrt(v["n_paths"]) + 1e-12
    before = json.loads((tmp_path / "late_kernels_quick.json").read_text())
    again = lk.main(["--quick", "--out-dir", str(tmp_path)])
    assert again == before  # nothing recomputed
