"""``validation/investigations/search_calibration.py`` on a tiny configuration (3 searches per
row). Reference: the search's own contract: stopped by ``tol``, every reported error is at most
``tol``; with a fixed budget, the trials spent reach the budget (batches of 8) and no more."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_tiny_calibration_rows(load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("search_calibration")
    rows = mod.main(["--tiny"])["rows"]
    assert [(r["curve"], r["stop"], r["error"]) for r in rows] == [
        (c, s, e) for c in ("narrow", "benchmark", "wide")
        for s, e in (("tol", "posterior"), ("tol", "bootstrap"), ("budget", "bootstrap"))]
    for r in rows:
        assert r["runs"] == 3
        if r["stop"] == "tol":
            assert r["mean_reported_se"] <= r["tol"]
        else:
            assert r["budget"] - 8 < r["median_trials"] <= r["budget"]
        # mean error of 3 searches: the committed 80-search table has rmse ≤ 0.18 per search,
        # so 0.6 is about 6 standard errors of a mean of 3; a search that lost the curve misses it
        assert abs(r["bias"]) < 0.6
