"""Input checks: one-line ``ValueError`` messages that name the parameter and its value.

Every public function of the package checks its inputs early with these helpers,
so that a bad value fails at the call with a message such as
``delta must be > 0, got 0`` rather than deep inside a solver.

Examples
--------
>>> from dmftsolve.checks import check_integer, check_real
>>> check_real("eta", 0.5, positive=True)
0.5
>>> check_integer("m", 3.0, minimum=1)
3
>>> check_real("eta", True)
Traceback (most recent call last):
    ...
ValueError: eta must be a real number, got the boolean True
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["check_delta", "check_integer", "check_matrix", "check_real", "check_sequence", "short_repr"]


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr`` of ``value`` cut to ``limit`` characters (then ``…``), for one-line error messages.

    Examples
    --------
    >>> from dmftsolve.checks import short_repr
    >>> short_repr("z**2")
    "'z**2'"
    >>> short_repr("x" * 100, 10)
    "'xxxxxxxxx…"
    """
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def check_real(name: str, value: Any, *, positive: bool = False, nonnegative: bool = False) -> float:
    """Return ``value`` as a float, raising ``ValueError`` naming ``name`` if it is unfit.

    Accepted: Python and numpy integers and floats (and other real number
    types such as :class:`fractions.Fraction`) whose value is finite in double
    precision. Refused: booleans (``True`` is not the number 1 here), strings
    and bytes (``"12"`` is text, not a number), complex numbers, NaN, infinities
    and integers too large for a double (``10**400``).

    Parameters
    ----------
    name : str
        The parameter's name, used in the message.
    value : object
        The value to check.
    positive, nonnegative : bool
        Require ``value > 0`` or ``value >= 0``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        One line naming ``name`` and ``value``.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a real number, got the boolean {value!r}")
    if isinstance(value, (str, bytes)) or not isinstance(value, numbers.Real):
        if not (isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"):
            raise ValueError(f"{name} must be a real number, got {short_repr(value)}")
    try:
        v = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be finite in double precision, got {short_repr(value, 40)}") from None
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {short_repr(value)}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {short_repr(value, 40)}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {short_repr(value, 40)}")
    if nonnegative and v < 0:
        raise ValueError(f"{name} must be >= 0, got {short_repr(value, 40)}")
    return v


def check_integer(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int in ``[minimum, maximum]``, raising ``ValueError`` naming ``name`` otherwise.

    Booleans and strings are refused; a float is accepted only if it is a
    whole number (``3.0``).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer, got {short_repr(value, 40)}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {short_repr(value, 40)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {short_repr(value, 40)}")
    return int(value)


def check_delta(delta: Any) -> float:
    """Validate the sample ratio ``δ = n/d`` and return it as a float.

    Parameters
    ----------
    delta : real number
        The number of samples per input dimension, ``δ = n/d``: a finite real
        number ``> 0`` (a Python or numpy int or float; not a boolean or a
        string). Checked by :func:`check_real`.

    Returns
    -------
    float
        ``delta`` as a float.

    Raises
    ------
    ValueError
        One line naming ``delta``, if it is not a finite real number ``> 0``.

    Examples
    --------
    >>> from dmftsolve import check_delta
    >>> check_delta(2)
    2.0
    >>> check_delta(0)
    Traceback (most recent call last):
        ...
    ValueError: delta must be > 0, got 0
    >>> check_delta("4")
    Traceback (most recent call last):
        ...
    ValueError: delta must be a real number, got '4'
    """
    return check_real("delta", delta, positive=True)


def check_sequence(name: str, value: Any) -> tuple[Any, ...]:
    """``value`` as a tuple, raising ``ValueError`` naming ``name`` for text, mappings and scalars.

    ``tuple("12")`` would silently give ``("1", "2")``; this raises instead. A
    1-d numpy array is accepted. The entries are not checked: the caller checks
    them (:func:`check_real`, :func:`check_integer`).

    Examples
    --------
    >>> from dmftsolve.checks import check_sequence
    >>> check_sequence("a", [1, -1])
    (1, -1)
    >>> check_sequence("a", "12")
    Traceback (most recent call last):
        ...
    ValueError: a must be a sequence of numbers (a list or tuple), got '12'
    """
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return tuple(value.tolist())
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a sequence of numbers (a list or tuple), got {short_repr(value)}")
    return tuple(value)


def check_matrix(name: str, value: Any) -> np.ndarray:
    """``value`` as a 2-d float array, raising ``ValueError`` naming ``name`` if it is unfit.

    Text, booleans, ragged nesting, numbers too large for a double and arrays of
    more than two dimensions are refused; a scalar or a vector becomes one row.
    Finiteness is not checked (NaN passes): the caller decides.

    Examples
    --------
    >>> from dmftsolve.checks import check_matrix
    >>> check_matrix("M0", [[0.5, 0]])
    array([[0.5, 0. ]])
    >>> check_matrix("M0", [[1], [2, 3]])
    Traceback (most recent call last):
        ...
    ValueError: M0 must be a matrix of real numbers, got [[1], [2, 3]]
    """
    try:
        raw = np.asarray(value)
    except ValueError:  # ragged nesting
        raise ValueError(f"{name} must be a matrix of real numbers, got {short_repr(value)}") from None
    if raw.dtype == object:
        flat = raw.ravel().tolist()
        if not flat or not all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                               for v in flat):
            raise ValueError(f"{name} must be a matrix of real numbers, got {short_repr(value)}")
    elif raw.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a matrix of real numbers, got {short_repr(value)}")
    try:
        out = np.atleast_2d(raw.astype(float))
    except OverflowError:
        raise ValueError(f"{name} must be finite in double precision, got {short_repr(value)}") from None
    if out.ndim != 2:
        raise ValueError(f"{name} must be a matrix (2-d), got shape {out.shape}")
    return out
