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


# ----------------------------------------------------------------------------- the public steps
@settings(max_examples=30, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=6), st.integers(min_value=0, max_value=2**32 - 1))
@example([True, False], 0)
@example([False, False, False], 0)
def test_axis_indices_and_snap_on_rotated_axis_bases(mask: list, seed: int) -> None:
    """A basis of span(e_i, i in S) in any orthonormal mixture has axis_indices S, and snaps to
    the unit vectors; adding a non-axis vector makes it None and leaves the basis alone."""
    from dmftsolve.thresholds.directions import axis_indices, snap_to_axes

    k, S = len(mask), [i for i, m in enumerate(mask) if m]
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((len(S), len(S)))) if S else (np.zeros((0, 0)), None)
    basis = np.eye(k)[:, S] @ Q
    assert axis_indices(basis) == tuple(S)
    np.testing.assert_array_equal(snap_to_axes(basis), np.eye(k)[:, S])
    if k >= 2:
        tilted = np.zeros((k, 1))
        tilted[:2, 0] = [0.6, 0.8]
        assert axis_indices(tilted) is None
        assert snap_to_axes(tilted) is tilted


def test_label_features_and_moments_closed_forms() -> None:
    """For y = z the first feature is z itself, so the normalised moment E[z·z]/√E[z²] is 1
    (Gauss–Hermite is exact for it); for y = z² every moment vanishes by symmetry."""
    from dmftsolve.gaussian import gauss_hermite_rule
    from dmftsolve.thresholds.directions import direction_moments, label_features

    x, w = gauss_hermite_rule(1, 40)
    z = x[:, :1]
    psi = label_features(z[:, 0], w)
    assert psi.shape == (40, 20)
    np.testing.assert_allclose(psi[:, 0], z[:, 0], atol=1e-12)  # standardised z is z
    B = direction_moments(z, w, psi, np.zeros((1, 0)), np.eye(1))
    assert B.shape == (1, 20) and B[0, 0] == pytest.approx(1.0, abs=1e-12)
    B2 = direction_moments(z, w, label_features(z[:, 0] ** 2, w), np.zeros((1, 0)), np.eye(1))
    assert np.abs(B2).max() < 1e-12
    assert label_features(np.ones(40), w).shape == (40, 0)  # a constant label: no test function
