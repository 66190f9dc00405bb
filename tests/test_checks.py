"""dmftsolve.checks: the one-line input checks every public function uses."""

from __future__ import annotations

import fractions

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dmftsolve.checks import check_integer, check_matrix, check_real, check_sequence, short_repr


@given(st.text(max_size=200), st.integers(min_value=1, max_value=120))
@example("x" * 100, 10)
@example("", 1)
def test_short_repr_is_a_prefix_of_repr_at_most_limit_long(text: str, limit: int) -> None:
    out, full = short_repr(text, limit), repr(text)
    if len(full) <= limit:
        assert out == full
    else:  # cut: the first `limit` characters and an ellipsis
        assert out == full[:limit] + "…"


@given(st.floats(allow_nan=False, allow_infinity=False))
@example(0.0)
@example(-5e-324)
def test_check_real_returns_every_finite_float_unchanged(x: float) -> None:
    assert check_real("x", x) == x
    assert check_real("x", np.float32(1.5)) == 1.5


def test_check_real_takes_other_real_types_and_the_sign_options() -> None:
    assert check_real("x", fractions.Fraction(1, 4)) == 0.25
    assert check_real("x", 0, nonnegative=True) == 0.0
    with pytest.raises(ValueError, match=r"^x must be > 0, got 0$"):
        check_real("x", 0, positive=True)
    with pytest.raises(ValueError, match=r"^x must be >= 0, got -1$"):
        check_real("x", -1, nonnegative=True)


@pytest.mark.parametrize(("value", "kept"), [([1, -1], (1, -1)), ((0.5,), (0.5,)), ([], ()),
                                             (np.array([2.0, 3.0]), (2.0, 3.0))])
def test_check_sequence_keeps_lists_tuples_and_vectors(value: object, kept: tuple) -> None:
    assert check_sequence("a", value) == kept


@pytest.mark.parametrize("value", ["12", b"12", {"a": 1}, 3, 2.5, None, np.zeros((2, 2))])
def test_check_sequence_refuses_text_mappings_scalars_and_matrices(value: object) -> None:
    with pytest.raises(ValueError, match=r"^a must be a sequence of numbers \(a list or tuple\), got "):
        check_sequence("a", value)


def test_check_matrix_shapes() -> None:
    np.testing.assert_array_equal(check_matrix("M", [[1, 2], [3, 4]]), [[1.0, 2.0], [3.0, 4.0]])
    assert check_matrix("M", [1, 2, 3]).shape == (1, 3)  # a vector is one row
    assert check_matrix("M", 2.5).shape == (1, 1)
    assert check_matrix("M", [[1, 2]]).dtype == np.float64
    assert np.isnan(check_matrix("M", [[float("nan")]])[0, 0])  # finiteness is the caller's


@pytest.mark.parametrize(("value", "words"), [
    ([["0.1"]], "must be a matrix of real numbers"),
    ([[True]], "must be a matrix of real numbers"),
    ([[1], [2, 3]], "must be a matrix of real numbers"),
    ([[10**400]], "must be finite in double precision"),
    (np.zeros((2, 2, 2)), r"must be a matrix \(2-d\), got shape \(2, 2, 2\)"),
    ([[1 + 2j]], "must be a matrix of real numbers"),
])
def test_check_matrix_refuses(value: object, words: str) -> None:
    with pytest.raises(ValueError, match=f"^Q0 {words}"):
        check_matrix("Q0", value)


def test_check_integer_bounds() -> None:
    assert check_integer("n", np.int64(7), 0, 7) == 7
    with pytest.raises(ValueError, match=r"^n must be <= 7, got 8$"):
        check_integer("n", 8, 0, 7)
    with pytest.raises(ValueError, match=r"^n must be an integer, got 2.5$"):
        check_integer("n", 2.5, 0)
