"""``validation/investigations/give_up.py`` on its tiny configuration, and the identity between
its two ways of counting the draws a factor would lose.

References: at δ = 9 (far above the transition at T = 60, d = 300) draws of GeLU on ``z² − 1``
pass and at δ = 4 none does (the tiny configuration of ``test_width_transition.py``'s
give-up tests); a draw that passed is lost at factor ``F`` exactly when the factor it needed
exceeds ``F`` (the rule stops at ``t`` iff ``F < (1/2 − p_t) W / (growth (T − t))``), so the
``lost`` counts must equal the counts of needed factors above ``F``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np


def test_tiny_configuration_counts_consistently(load_validation: Callable[[str], ModuleType]) -> None:
    gu = load_validation("give_up")
    out = gu.main(["--tiny"])["tiny"]
    assert out["draws_total"] == 8
    assert 0 < out["passed"] < 8  # some pass at δ = 9, none at δ = 4
    needed = np.array(out["needed"])
    assert needed.size == out["passed"] and np.all(needed >= 0)
    previous = None
    for F in gu.FACTORS:
        v = out["by_factor"][f"{F:g}"]
        assert v["lost"] == int(np.sum(needed > F))
        assert v["stopped"] <= out["draws_total"] - out["passed"]
        assert 0.0 <= v["steps_saved"] < 1.0
        if previous is not None:  # a larger factor never loses more nor stops more
            assert v["lost"] <= previous["lost"] and v["stopped"] <= previous["stopped"]
        previous = v
    assert out["by_factor"][f"{gu.GIVE_UP_FACTOR:g}"]["stopped"] > 0  # the δ = 4 draws stall


def test_needed_factor_of_a_stall_and_of_steady_growth(load_validation: Callable[[str], ModuleType]) -> None:
    """Closed forms with T = 8 (W = 1, checked from t = 2, margin 0.1 below 1/2): a statistic
    that stalls at a checked step below 0.4 needs an infinite factor, and one that stalls at 0.45
    none; one growing by 0.1 a step from 0.05 needs, at t = 2 (p = 0.25, 6 steps left),
    (0.4 − 0.25)/(0.1 · 6) = 1/4, the largest over t = 2, 3 (t = 4 is at 0.45)."""
    gu = load_validation("give_up")
    assert gu.needed_factor(np.array([0.1, 0.2, 0.2, 0.3, 0.6]), 8) == np.inf
    assert gu.needed_factor(np.array([0.3, 0.45, 0.45, 0.45, 0.6]), 8) == 0.0
    p = 0.05 + 0.1 * np.arange(9)
    np.testing.assert_allclose(gu.needed_factor(p, 8), 0.15 / 0.6)
