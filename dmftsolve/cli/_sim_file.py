"""Reading the ``--sim`` file of ``dmftsolve transition``: simulator success counts, validated.

The file is a JSON object ``{"deltas": [...], "successes": [...], "trials": [...]}``
(other keys are ignored). Everything is checked before any computation starts, so that
a bad file is one line naming ``--sim`` and the fault (exit 2), never a fit of garbage
or numpy's words after an hour of work:

* the path names a regular file (not a FIFO, a device such as ``/dev/zero``, or a
  directory), opened without blocking, of at most :data:`MAX_SIM_BYTES` bytes;
* UTF-8 JSON without ``NaN``/``Infinity``; the top level is an object with the three
  keys, each a JSON array (a string is not read character by character);
* equal lengths, at least 2 and at most :data:`MAX_SIM_POINTS` points;
* ``deltas``: real numbers (not booleans), finite and > 0;
* no key twice (JSON would silently keep the last);
* ``trials``: whole numbers from 1 to :data:`MAX_TRIALS`; ``successes``: whole numbers with
  ``0 <= successes <= trials`` (``3.0`` is accepted as 3, ``2.5`` and ``true`` are not).
"""

from __future__ import annotations

import errno
import json
import math
import os
from typing import Any

__all__ = ["MAX_SIM_BYTES", "MAX_SIM_POINTS", "load_success_counts"]

#: Largest ``--sim`` file read, in bytes.
MAX_SIM_BYTES = 4 * 2**20
#: Most points (δ values) in a ``--sim`` file.
MAX_SIM_POINTS = 10_000

#: Most trials at one δ (far more GD runs than any simulation makes; keeps the counts exact
#: in double precision and the fit's arithmetic finite).
MAX_TRIALS = 10**9

_KEYS = ("deltas", "successes", "trials")


def _fail(path: Any, problem: str) -> ValueError:
    shown = repr(str(path))
    if len(shown) > 80:
        shown = shown[:79] + "…"
    return ValueError(f"--sim {shown}: {problem}")


def _read_regular_file(path: Any) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most :data:`MAX_SIM_BYTES` bytes
    (:func:`dmftsolve._files.read_regular`: opened without blocking, type checked on the fd)."""
    from dmftsolve._files import FileReadError, read_regular

    try:
        fspath = os.fspath(path)
    except TypeError:
        raise _fail(path, f"expected a file path, got {type(path).__name__}") from None
    try:
        return read_regular(fspath, MAX_SIM_BYTES, "--sim")
    except FileNotFoundError:
        raise _fail(path, "no such file") from None
    except FileReadError as exc:
        if exc.errno == errno.EINVAL:  # not a regular file
            raise _fail(path, str(exc).split(": ", 1)[-1].replace(repr(fspath) + " ", "") +
                        "; give a regular JSON file") from None
        if exc.errno == errno.EFBIG:
            raise _fail(path, f"is more than {MAX_SIM_BYTES} bytes; at most {MAX_SIM_BYTES} are "
                              "read") from None
        if exc.errno == errno.EISDIR:
            raise _fail(path, "is a directory, not a JSON file") from None
        raise _fail(path, f"cannot be opened ({exc})") from None
    except (OSError, ValueError) as exc:  # a NUL in the name, …
        raise _fail(path, f"cannot be opened ({type(exc).__name__}: {exc})") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: a key given twice is refused (JSON keeps the last one silently)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Duplicate(key)
        seen[key] = value
    return seen


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_constant(name: str) -> None:
    raise ValueError(name)


def _whole(path: Any, key: str, i: int, v: Any, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _fail(path, f"{key}[{i}] must be a whole number, got {json.dumps(v)[:40]}")
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        raise _fail(path, f"{key}[{i}] must be a whole number, got {v!r}")
    if v < minimum:
        raise _fail(path, f"{key}[{i}] must be >= {minimum}, got {v!r}")
    return int(v)


def load_success_counts(path: str | os.PathLike[str]) -> dict[str, list[Any]]:
    """Read and validate a ``--sim`` file of simulator success counts.

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file (see the module docstring for the format and every check).

    Returns
    -------
    dict
        ``{"deltas": list of float, "successes": list of int, "trials": list of int}``,
        equal lengths >= 2.

    Raises
    ------
    ValueError
        One line, ``--sim '<path>': <fault>``, for the first fault found.

    Examples
    --------
    >>> import json, tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
    ...     json.dump({"deltas": [2, 3], "successes": [1, 4], "trials": [5, 5]}, fh)
    >>> load_success_counts(fh.name)
    {'deltas': [2.0, 3.0], 'successes': [1, 4], 'trials': [5, 5]}
    >>> os.unlink(fh.name)
    """
    raw = _read_regular_file(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(path, f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_no_duplicates)
    except _Duplicate as exc:
        raise _fail(path, f"key {json.dumps(exc.key)[:40]} appears twice; JSON would keep only the "
                          "last one, so the file is ambiguous") from None
    except RecursionError:
        raise _fail(path, "JSON nested too deeply") from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError):  # NaN, Infinity, -Infinity
            raise _fail(path, f"{exc} is not allowed; every number must be finite") from None
        raise _fail(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise _fail(path, f"expected a JSON object with keys {', '.join(_KEYS)}, got a "
                          f"{type(data).__name__}")
    missing = [k for k in _KEYS if k not in data]
    if missing:
        raise _fail(path, f"missing key(s) {', '.join(missing)}; expected {', '.join(_KEYS)}")
    for key in _KEYS:
        if not isinstance(data[key], list):
            raise _fail(path, f"{key} must be a JSON array of numbers, got "
                              f"{type(data[key]).__name__} {json.dumps(data[key])[:40]}")
    lengths = {k: len(data[k]) for k in _KEYS}
    if len(set(lengths.values())) != 1:
        raise _fail(path, "deltas, successes and trials differ in length ("
                          + ", ".join(f"{k}: {n}" for k, n in lengths.items()) + ")")
    n_points = lengths["deltas"]
    if n_points < 2:
        raise _fail(path, f"needs at least 2 points for a probit fit, got {n_points}")
    if n_points > MAX_SIM_POINTS:
        raise _fail(path, f"has {n_points} points; at most {MAX_SIM_POINTS} are allowed")
    deltas = []
    for i, v in enumerate(data["deltas"]):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _fail(path, f"deltas[{i}] must be a number, got {json.dumps(v)[:40]}")
        x = float(v) if not isinstance(v, int) or abs(v) < 2**1000 else math.inf
        if not math.isfinite(x) or x <= 0:
            raise _fail(path, f"deltas[{i}] must be finite and > 0, got {v!r}"[:200])
        deltas.append(x)
    trials = [_whole(path, "trials", i, v, 1) for i, v in enumerate(data["trials"])]
    for i, n in enumerate(trials):
        if n > MAX_TRIALS:
            raise _fail(path, f"trials[{i}] = {n} is more than {MAX_TRIALS:.0e}, more GD runs than any "
                              "simulation makes; give the counts themselves")
    successes = [_whole(path, "successes", i, v, 0) for i, v in enumerate(data["successes"])]
    for i, (k, n) in enumerate(zip(successes, trials, strict=True)):
        if k > n:
            raise _fail(path, f"successes[{i}] = {k} exceeds trials[{i}] = {n}")
    return {"deltas": deltas, "successes": successes, "trials": trials}
