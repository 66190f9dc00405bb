""":func:`dmftsolve._lapack.solve_lower` against :func:`scipy.linalg.solve_triangular`.

Reference: SciPy's triangular solve, which makes the same LAPACK ``trtrs`` call; the two must give
the same bits on C-ordered, Fortran-ordered and sliced (non-contiguous) factors, both
orientations, one or several right-hand sides, float64 and float32.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve._lapack import solve_lower


def _factor(rng: np.random.Generator, k: int, layout: str, dtype: type) -> np.ndarray:
    big = (np.tril(rng.standard_normal((k + 3, k + 3))) + 3 * np.eye(k + 3)).astype(dtype)
    return {"C": np.ascontiguousarray(big[:k, :k]), "F": np.asfortranarray(big[:k, :k]),
            "slice": big[:k, :k]}[layout]


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 30), r=st.integers(0, 4), layout=st.sampled_from(["C", "F", "slice"]),
       trans=st.booleans(), single=st.booleans(), seed=st.integers(0, 2**16))
@example(k=1, r=0, layout="C", trans=False, single=False, seed=0)
@example(k=17, r=3, layout="slice", trans=True, single=False, seed=1)
def test_same_bits_as_scipy(k: int, r: int, layout: str, trans: bool, single: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dtype = np.float32 if single else np.float64
    L = _factor(rng, k, layout, dtype)
    b = rng.standard_normal(k if r == 0 else (k, r)).astype(dtype)
    if r > 1:
        b = b[:, ::-1]  # a non-contiguous right-hand side, as the solver passes transposes
    want = sla.solve_triangular(L, b, lower=True, trans="T" if trans else "N", check_finite=False)
    got = solve_lower(L, b, trans=trans)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def test_solves_the_system() -> None:
    """Closed form: a 2×2 lower system and its transpose."""
    L = np.array([[2.0, 0.0], [1.0, 4.0]])
    np.testing.assert_allclose(solve_lower(L, np.array([2.0, 9.0])), [1.0, 2.0])
    np.testing.assert_allclose(solve_lower(L, np.array([4.0, 8.0]), trans=True), [1.0, 2.0])


def test_singular_raises() -> None:
    with pytest.raises(np.linalg.LinAlgError, match="diagonal at 1"):
        solve_lower(np.array([[1.0, 0.0], [1.0, 0.0]]), np.ones(2))
