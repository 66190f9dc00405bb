"""Result objects shared by every solver: a status, the settings used, diagnostics.

Modelled on optimistix/diffrax: a result carries whether it succeeded and
why not, the settings it was computed with, and how long it took; solvers
raise :class:`SolverError` on failure unless asked not to (``throw=False``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import time
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from dmftsolve._version import __version__

__all__ = ["Status", "SolverError", "Result", "jsonable"]


class Status(enum.Enum):
    """Outcome of a computation."""

    SUCCESS = "success"
    NONFINITE = "nonfinite"
    NOT_CONVERGED = "not_converged"
    NO_ROOT = "no_root"
    FAILED = "failed"

    @property
    def ok(self) -> bool:
        return self is Status.SUCCESS


class SolverError(RuntimeError):
    """Raised when a computation fails and ``throw=True`` (the default)."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


def jsonable(obj: Any) -> Any:
    """Convert numpy arrays, enums, dataclasses and non-finite floats to JSON-ready values."""
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


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class Result:
    """Base of every result: the outcome, the settings used, diagnostics, time and version.

    Subclasses are frozen keyword-only dataclasses declared with
    ``@dataclass(frozen=True, kw_only=True, repr=False)`` (``repr=False``
    keeps the short :meth:`__repr__` below). Build a result complete, or
    derive a changed copy with :func:`dataclasses.replace`; never ``setattr``.

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
    >>> r.to_dict()["status"]
    'success'
    """

    status: Status
    message: str = ""
    settings: dict[str, Any]
    diagnostics: dict[str, Any]
    elapsed: float
    version: str = __version__
    warnings: tuple[str, ...] = ()

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
        return (
            f"<{type(self).__name__} status={self.status.value} "
            f"elapsed={self.elapsed:.3g}s{extra}{': ' + self.message if self.message else ''}>"
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (see :func:`jsonable`)."""
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
