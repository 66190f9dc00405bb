"""Easy/hard split of the target directions (docs/theory.md §4.1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve.thresholds.directions import split_directions

# Expected splits follow from symmetry (a direction is hard when y is invariant
# under its sign flip given the others) or from an explicit non-zero moment
# (a direction is easy when E[z_i ψ(y)] ≠ 0 for some ψ; the moment is named).
CASES = [
    ("z**2", (), (0,)),                      # y even in z
    ("abs(z)", (), (0,)),
    ("z**2 + 0.5*eps", (), (0,)),
    ("z", (0,), ()),                          # E[z y] = 1
    ("z1 + z2**2", (0,), (1,)),               # E[z1 y] = 1; y even in z2
    ("z1*z2", (), (0, 1)),                    # invariant under (z1, z2) -> (-z1, -z2) and flips... both hard
    ("z1**2 + z2**2", (), (0, 1)),
    ("sign(z1*z2)", (), (0, 1)),
    ("z1 + z1*z2", (0, 1), ()),               # E[z1 y] = 1, E[z2 y²] = 2
    ("z1*z2*z3", (), (0, 1, 2)),
]


@pytest.mark.parametrize(("target", "easy", "hard"), CASES)
def test_split_matches_symmetry(target: str, easy: tuple, hard: tuple) -> None:
    split = split_directions(target)
    assert split.easy_indices == easy
    assert split.hard_indices == hard
    np.testing.assert_allclose(split.easy.T @ split.hard, 0.0, atol=1e-12)


def test_nonlinear_dependence_without_correlation_is_easy() -> None:
    # y = z² + z³ − 3z = He2 + He3 + 1: E[z y] = 0 exactly (Hermite orthogonality),
    # yet E[z | y] ≠ 0 — e.g. E[z y²] = E[z (He2+He3+1)²] = 2 E[z He2 He3] = 2·6·E[...]≠0.
    rng = np.random.default_rng(0)
    z = rng.standard_normal(400_000)
    y = z**2 + z**3 - 3 * z
    assert abs(np.mean(z * y)) < 5 * np.std(z * y) / np.sqrt(z.size)  # uncorrelated
    split = split_directions("z**2 + z**3 - 3*z")
    assert split.easy_indices == (0,)
    assert split.singular_values[0].max() > 0.1  # a clear margin, not a rounding effect


def test_rotated_hard_direction_is_not_axis_aligned() -> None:
    # y = (z1 + z2)²: y is even in u = (z1+z2)/√2 and does not depend on (z1−z2)/√2
    split = split_directions("(z1 + z2)**2")
    assert split.hard.shape == (2, 2) and split.easy.shape == (2, 0)
    split = split_directions("(z1 + z2) + (z1 - z2)**2")
    assert split.easy_indices is None and split.hard_indices is None
    u = np.array([1.0, -1.0]) / np.sqrt(2)
    np.testing.assert_allclose(abs(split.hard[:, 0] @ u), 1.0, atol=1e-8)


@settings(max_examples=15, deadline=None)
@given(c=st.one_of(st.just(0.0), st.floats(0.01, 2), st.floats(-2, -0.01)), p=st.sampled_from([2, 4]))
@example(c=0.0, p=2)
def test_even_functions_are_hard_odd_parts_easy(c: float, p: int) -> None:
    # y = z^p + c·z: hard iff c = 0 (then y is even), else E[z y] = c + E[z^{p+1}] = c ≠ 0.
    # |c| < tol-ish is genuinely easy but below the test's resolution, hence |c| >= 0.01.
    split = split_directions(f"z**{p} + ({c})*z")
    assert split.hard_indices == ((0,) if c == 0 else ())


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="tol must be"):
        split_directions("z**2", tol=-1)
    with pytest.raises(ValueError, match="nodes must be"):
        split_directions("z**2", nodes=2)
    with pytest.raises(ValueError, match="too large"):
        split_directions("z1*z2*z3*z4*z5 + eps")
