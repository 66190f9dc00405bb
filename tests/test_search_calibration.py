"""``validation/investigations/search_calibration.py`` on a tiny configuration (3 searches per
row). Reference: the search's own contract: stopped by ``tol``, every reported error is at most
``tol``; with a fixed budget, the trials spent reach the budget (batches of 8) and no more."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_tiny_calibration_rows(load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("search_calibration")
    rows = mod.main(["--tiny"])["rows"]
    assert [(r["curve"], r["stop"]) for r in rows] == [(c, s) for c in ("narrow", "benchmark", "wide")
                                                       for s in ("tol", "budget")]
    for r in rows:
        assert r["runs"] == 3
        if r["stop"] == "tol":
            assert r["mean_reported_se"] <= r["tol"]
        else:
            assert r["budget"] - 8 < r["median_trials"] <= r["budget"]
        assert abs(r["bias"]) < 4 * r["w"]  # a search that lost the curve would be far off
