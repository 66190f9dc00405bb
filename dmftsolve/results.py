"""Result objects shared by every solver: a status, the settings used, diagnostics.

Modelled on optimistix/diffrax: a result carries whether it succeeded and
why not, the settings it was computed with, and how long it took; solvers
raise :class:`SolverError` on failure unless asked not to (``throw=False``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

import numpy as np

__all__ = ["Status", "SolverError", "ResultBase", "jsonable"]


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


class ResultBase:
    """Mixin for result dataclasses with fields ``status``, ``message``,
    ``settings`` (a dict), ``diagnostics`` (a dict) and ``elapsed`` (seconds)."""

    status: Status
    message: str
    settings: dict[str, Any]
    diagnostics: dict[str, Any]
    elapsed: float

    @property
    def ok(self) -> bool:
        return self.status.ok

    def raise_for_status(self) -> None:
        """Raise :class:`SolverError` unless the status is ``SUCCESS``."""
        if not self.status.ok:
            raise SolverError(f"{type(self).__name__} {self.status.value}: {self.message}", self)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} status={self.status.value} "
            f"elapsed={self.elapsed:.3g}s{': ' + self.message if self.message else ''}>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
