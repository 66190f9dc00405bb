"""Triangular solves for the many small systems of a DMFT step, straight to LAPACK's ``trtrs``.

:func:`scipy.linalg.solve_triangular` validates and converts its inputs on every call (about
15 µs); a DMFT step solves four systems of a few dozen unknowns, each a few µs of arithmetic.
:func:`solve_lower` makes the same ``trtrs`` call that :func:`scipy.linalg.solve_triangular`
makes for a lower-triangular float matrix (the transposed upper system when the matrix is not
Fortran-ordered), so the two give the same bits; it checks nothing but LAPACK's status.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from scipy.linalg import LinAlgError, get_lapack_funcs

__all__ = ["solve_lower"]


@functools.cache
def _trtrs(char: str) -> Any:
    return get_lapack_funcs(("trtrs",), (np.empty(0, dtype=char),))[0]


def solve_lower(L: np.ndarray, b: np.ndarray, trans: bool = False) -> np.ndarray:
    """``x`` with ``L x = b`` (``Lᵀ x = b`` if ``trans``), ``L`` lower triangular and finite.

    Parameters
    ----------
    L : numpy.ndarray
        Lower-triangular matrix, shape ``(k, k)``, float64 or float32 like ``b``.
    b : numpy.ndarray
        Right-hand sides, shape ``(k,)`` or ``(k, r)``.
    trans : bool
        Solve the transposed system.

    Returns
    -------
    numpy.ndarray
        The solution, shaped like ``b``.

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``L`` has a zero on its diagonal.

    Examples
    --------
    >>> import numpy as np
    >>> solve_lower(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([2.0, 3.0]))
    array([1., 2.])
    """
    trtrs = _trtrs(np.result_type(L, b).char)
    if L.flags.f_contiguous:
        x, info = trtrs(L, b, lower=1, trans=int(trans))
    else:  # the transposed (upper) system: trtrs wants Fortran order, L.T is
        x, info = trtrs(L.T, b, lower=0, trans=int(not trans))
    if info > 0:
        raise LinAlgError(f"singular matrix: zero on the diagonal at {info - 1}")
    if info < 0:
        raise ValueError(f"illegal value in argument {-info} of trtrs")
    return x
