"""Result objects shared by every solver: a status, the settings used, diagnostics.

Modelled on optimistix/diffrax: a result carries whether it succeeded and
why not, the settings it was computed with, and how long it took; solvers
raise :class:`SolverError` on failure unless asked not to (``throw=False``).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from dmftsolve._version import __version__

__all__ = ["Status", "SolverError", "Result", "jsonable", "git_commit", "cpu_model", "format_pm",
           "binomial_error", "format_binomial"]


class Status(enum.Enum):
    """Outcome of a computation.

    Examples
    --------
    >>> Status.SUCCESS.ok, Status("not_converged").ok, Status.NO_ROOT.value
    (True, False, 'no_root')
    """

    SUCCESS = "success"
    NONFINITE = "nonfinite"
    NOT_CONVERGED = "not_converged"
    NO_ROOT = "no_root"
    FAILED = "failed"

    @property
    def ok(self) -> bool:
        return self is Status.SUCCESS


class SolverError(RuntimeError):
    """Raised when a computation fails and ``throw=True`` (the default).

    Parameters
    ----------
    message : str
        What failed and why.
    result : Result, optional
        The failed result, with its diagnostics (``None`` if there is none).

    Examples
    --------
    >>> r = Result(status=Status.NOT_CONVERGED, message="no bracket", settings={},
    ...            diagnostics={}, elapsed=0.1)
    >>> try:
    ...     r.raise_for_status()
    ... except SolverError as exc:
    ...     print(exc, exc.result is r)
    Result not_converged: no bracket True
    """

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


def jsonable(obj: Any) -> Any:
    """Convert numpy arrays, enums, dataclasses and non-finite floats to JSON-ready values.

    Not a ``json.JSONEncoder`` subclass: its ``default`` hook is never called for floats, so
    it cannot turn NaN/inf into ``null`` (strict JSON); ``orjson`` can, but is a compiled
    dependency for one function.

    Parameters
    ----------
    obj : Any
        A result field: nested dicts, lists, tuples, arrays, enums, dataclasses, numbers.

    Returns
    -------
    Any
        The same structure of dicts, lists, str, int, float, bool and None
        (non-finite floats become None).

    Examples
    --------
    >>> jsonable({"x": np.array([1.0, np.nan]), "s": Status.SUCCESS, 3: np.int64(2)})
    {'x': [1.0, None], 's': 'success', '3': 2}
    """
    if isinstance(obj, enum.Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_dict"):
            return jsonable(obj.to_dict())
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


#: Written by the build (``setup.py``) into an installed copy: the commit it was built from.
STAMP_FILE = Path(__file__).resolve().parent / "_commit.txt"


def _is_commit(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def stamped_commit(path: Path | None = None) -> str | None:
    """The commit id an installed copy was built from (the file ``path``, default
    :data:`STAMP_FILE`), else ``None``.

    Examples
    --------
    >>> stamped_commit(Path("/nonexistent")) is None
    True
    """
    try:
        text = (STAMP_FILE if path is None else path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _is_commit(text) else None


def cpu_model(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The CPU's model name, for the metadata of timings and of float32 results.

    Timings depend on the machine as much as on the code, and so do results in single
    precision: the rounding of vectorised float32 arithmetic differs between CPUs, and it
    flips some of the DMFT's zero-variance decisions (``docs/findings.md`` §7), so a seed
    does not reproduce bit for bit on another CPU.

    Parameters
    ----------
    cpuinfo : str or pathlib.Path, optional
        The file to read the first ``model name`` line from (``/proc/cpuinfo``); when it does
        not exist or has none, :func:`platform.processor` is used, else ``"unknown"``.

    Returns
    -------
    str
        For example ``"AMD EPYC"`` or ``"Intel(R) Xeon(R) CPU @ 2.20GHz"``.

    Examples
    --------
    >>> isinstance(cpu_model(), str) and cpu_model() != ""
    True
    """
    info = Path(cpuinfo)
    try:
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@functools.cache
def git_commit() -> str | None:
    """The git commit id of the ``dmftsolve`` code that runs, else ``None``.

    Read once: ``git rev-parse HEAD`` in the package directory when that
    directory's parent is the top of a git work tree (a checkout, or an
    editable install), so a copy inside some other repository is not stamped
    with that repository's commit; otherwise the commit the build stamped an
    installed copy with (:func:`stamped_commit`; ``pip install .`` from a
    checkout). Never raises: without either, or on any error, it returns
    ``None``. Uncommitted changes are not recorded.

    Returns
    -------
    str or None
        40 hexadecimal digits, or ``None``.

    Examples
    --------
    >>> c = git_commit()
    >>> c is None or len(c) == 40
    True
    """
    try:
        here = Path(__file__).resolve().parent
        if (here.parent / ".git").exists():
            out = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=here,
                                 capture_output=True, text=True, timeout=10, check=False)
            if out.returncode == 0:
                top, commit = out.stdout.split()[:2]
                if Path(top).resolve() == here.parent and _is_commit(commit):
                    return commit
    except Exception:  # noqa: BLE001 - metadata only: never fail a computation over it
        pass
    return stamped_commit()


def format_pm(value: float | None, err: float | None) -> str:
    """``value ± err`` with the value rounded at the error's leading digit(s).

    The one rounding rule of the package (command output, reprs, tables). The
    error keeps two significant digits when they start with 1 or 2, else one;
    a missing error (one seed) prints four significant digits and ``± ?``.

    Parameters
    ----------
    value : float or None
        The estimate (``None`` prints ``none``).
    err : float or None
        Its error (standard error or bound); ``None`` or non-finite: unknown.

    Returns
    -------
    str

    Examples
    --------
    >>> format_pm(-2.96912, 0.0063)
    '-2.969 ± 0.006'
    >>> format_pm(22.018, 1.13)
    '22.0 ± 1.1'
    >>> format_pm(0.3, 0.5)
    '0.3 ± 0.5'
    """
    if value is None or not math.isfinite(value):
        return "none" if value is None else str(value)
    if err is None or not math.isfinite(err):
        return f"{value:.4g} ± ?"
    if err < 1e-10:  # nothing is resolved below the solvers' tolerances
        return "0" if abs(value) < 1e-10 else f"{value:.10g}"
    exp = math.floor(math.log10(err))
    lead = err / 10**exp
    sig = 2 if lead < 3 else 1
    dec = sig - 1 - exp
    if dec > 0:
        return f"{value:.{dec}f} ± {err:.{dec}f}"
    q = 10 ** (-dec)
    return f"{round(value / q) * q:.0f} ± {math.ceil(err / q) * q:.0f}"


#: Confidence of the one-sided bound :func:`binomial_error` gives for 0 of n or n of n.
BINOMIAL_CONFIDENCE = 0.95


def binomial_error(successes: int, trials: int) -> float:
    """The package's one rule for the error of an observed success rate ``k/n``.

    ``0 < k < n``: the standard error ``√(p(1 − p)/n)`` with ``p = k/n``.
    ``k = 0`` or ``k = n``, where that formula gives 0: the distance from the
    observed 0 (or 1) to the exact one-sided 95 % Clopper–Pearson bound,
    ``1 − 0.05^(1/n)`` (about ``3/n`` for large ``n``, the "rule of three").
    So no observed rate is ever reported with a zero error.

    Parameters
    ----------
    successes : int
        Observed successes ``k``, ``0 <= k <= n``.
    trials : int
        Trials ``n >= 1``.

    Returns
    -------
    float
        The error of ``k/n`` (see :func:`format_binomial` for the text).

    Examples
    --------
    >>> round(binomial_error(3, 12), 4)
    0.125
    >>> round(binomial_error(0, 6), 3), round(binomial_error(6, 6), 3)
    (0.393, 0.393)
    """
    k, n = int(successes), int(trials)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {k} of {n}")
    if 0 < k < n:
        p = k / n
        return math.sqrt(p * (1 - p) / n)
    return 1.0 - (1.0 - BINOMIAL_CONFIDENCE) ** (1.0 / n)


def format_binomial(successes: int, trials: int) -> str:
    """An observed success rate as text, by the rule of :func:`binomial_error`.

    ``0 < k < n``: ``rate ± standard error`` (rounded by :func:`format_pm`);
    ``k = 0``: ``0 (< bound)``; ``k = n``: ``1 (> bound)``, with the one-sided
    95 % bound.

    Parameters
    ----------
    successes : int
        Observed successes ``k``.
    trials : int
        Trials ``n >= 1``.

    Returns
    -------
    str

    Examples
    --------
    >>> format_binomial(3, 10)
    '0.30 ± 0.14'
    >>> format_binomial(0, 6), format_binomial(20, 20)
    ('0 (< 0.39)', '1 (> 0.86)')
    """
    k, n = int(successes), int(trials)
    err = binomial_error(k, n)
    if k == 0:
        return f"0 (< {err:.2g})"
    if k == n:
        return f"1 (> {1 - err:.2g})"
    return format_pm(k / n, err)


def _headline_text(obj: Any, names: Sequence[str]) -> str:
    """``name=value`` for each of ``names``; an error name (see :attr:`Result._headline`)
    is printed as ``± error`` after the value before it."""
    def one(v: Any) -> str:
        if v is None:
            return "none"
        if isinstance(v, (bool, np.bool_, str, enum.Enum)):
            return str(v.value if isinstance(v, enum.Enum) else v)
        if isinstance(v, (int, np.integer)):
            return str(int(v))
        if isinstance(v, (float, np.floating)):
            return f"{float(v):.6g}"
        a = np.asarray(v)
        if a.dtype.kind in "biuf" and a.ndim >= 1:
            if a.size > 6:
                return f"array(shape={a.shape})"
            return "[" + ", ".join(f"{x:.4g}" for x in a.ravel().astype(float)) + "]"
        text = repr(v)
        return text if len(text) <= 40 else text[:39] + "…"

    def pm(v: Any, e: Any) -> str:
        try:
            if np.ndim(v) == 0 and np.ndim(e) == 0 and v is not None and e is not None:
                return format_pm(float(v), float(e))
        except (TypeError, ValueError):
            pass
        return f"{one(v)} ± {one(e)}"

    parts: list[tuple[str, Any, str]] = []  # (name, raw value, text)
    for name in names:
        try:
            value = getattr(obj, name)
        except Exception:  # noqa: BLE001 - a repr never raises
            value = "?"
        if parts and Result._is_error_name(name):
            prev_name, prev_value, _ = parts.pop()
            parts.append((prev_name, prev_value, pm(prev_value, value)))
        else:
            parts.append((name, value, one(value)))
    return " ".join(f"{n}={text}" for n, _, text in parts)


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class Result:
    """Base of every result: the outcome, the settings used, diagnostics, time and version.

    Subclasses are frozen keyword-only dataclasses declared with
    ``@dataclass(frozen=True, kw_only=True, repr=False)`` (``repr=False``
    keeps the short :meth:`__repr__` below). Build a result complete, or
    derive a changed copy with :func:`dataclasses.replace`; never ``setattr``.

    A subclass shows its answer in the repr by naming it in the class
    attribute ``_headline``: a tuple of attribute (or property) names, each
    printed as ``name=value``; a name that is an error (``error``,
    ``stderr``, or ending in ``_err``, ``_error``, ``_stderr``, ``_se``) is
    printed as ``± error`` after the name before it, e.g. ``_headline =
    ("delta_alg", "error")`` gives ``<AlgThreshold delta_alg=0.500 ± 0.002
    status=success elapsed=0.11s>``.

    Attributes
    ----------
    status : Status
        Outcome of the computation.
    message : str
        Why it did not succeed (empty on success).
    settings : dict
        The settings the result was computed with.
    diagnostics : dict
        Solver-specific diagnostics (iterations, error estimates, timings).
    elapsed : float
        Wall time in seconds.
    version : str
        The ``dmftsolve`` version that computed it.
    commit : str or None
        The git commit of the ``dmftsolve`` checkout that computed it
        (:func:`git_commit`; ``None`` for an installed release).
    warnings : tuple of str
        Caveats of a result that still succeeded (a list is accepted and
        stored as a tuple); never appended to :attr:`message`.

    Examples
    --------
    >>> r = Result(status=Status.SUCCESS, settings={}, diagnostics={}, elapsed=0.5,
    ...            warnings=["few samples"])
    >>> r.ok, r.warnings
    (True, ('few samples',))
    >>> r
    <Result status=success elapsed=0.5s warnings=1>
    >>> @dataclasses.dataclass(frozen=True, kw_only=True, repr=False, eq=False)
    ... class Answer(Result):
    ...     _headline = ("x", "x_err")
    ...     x: float
    ...     x_err: float
    >>> Answer(status=Status.SUCCESS, settings={}, diagnostics={}, elapsed=0.5, x=1.2345, x_err=0.012)
    <Answer x=1.234 ± 0.012 status=success elapsed=0.5s>
    >>> r.to_dict()["status"]
    'success'
    """

    status: Status
    message: str = ""
    settings: dict[str, Any]
    diagnostics: dict[str, Any]
    elapsed: float
    version: str = __version__
    commit: str | None = dataclasses.field(default_factory=git_commit)
    warnings: tuple[str, ...] = ()

    #: Names of the answer (and its error) shown by :meth:`__repr__` (see above).
    _headline: ClassVar[tuple[str, ...]] = ()

    @staticmethod
    def _is_error_name(name: str) -> bool:
        """Whether ``name`` in :attr:`_headline` is the error of the name before it."""
        return name in ("error", "stderr", "err") or name.endswith(("_err", "_error", "_stderr", "_se"))

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            raise ValueError(f"status must be a Status, got {self.status!r}")
        if isinstance(self.warnings, str):
            raise ValueError(f"warnings must be a sequence of str, got the str {self.warnings!r}")
        object.__setattr__(self, "warnings", tuple(str(w) for w in self.warnings))

    @classmethod
    def finish(cls, *, start: float, messages: Sequence[str] = (), throw: bool = False,
               **fields: Any) -> Self:
        """Build a result whose ``message`` joins ``messages`` with ``"; "`` and whose
        ``elapsed`` runs from ``start`` (a :func:`time.perf_counter` value); with ``throw``,
        raise :class:`SolverError` unless its status is ``SUCCESS``."""
        res = cls(message="; ".join(messages), elapsed=time.perf_counter() - start, **fields)
        if throw:
            res.raise_for_status()
        return res

    @property
    def ok(self) -> bool:
        """True iff the status is ``SUCCESS``."""
        return self.status.ok

    def raise_for_status(self) -> None:
        """Raise :class:`SolverError` unless the status is ``SUCCESS``."""
        if not self.status.ok:
            raise SolverError(f"{type(self).__name__} {self.status.value}: {self.message}", self)

    def __repr__(self) -> str:
        extra = f" warnings={len(self.warnings)}" if self.warnings else ""
        head = _headline_text(self, self._headline)
        return (
            f"<{type(self).__name__} {head + ' ' if head else ''}status={self.status.value} "
            f"elapsed={self.elapsed:.3g}s{extra}{': ' + self.message if self.message else ''}>"
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (see :func:`jsonable`)."""
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
