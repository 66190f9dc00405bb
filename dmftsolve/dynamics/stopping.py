"""Ending a DMFT solve early (``DMFTSettings.stop``).

A :class:`StopRule` looks at each step's projections of the target directions onto ``span(W^t)``
(:func:`dmftsolve.success.direction_projections`) before the step is taken and may end the solve
there, as a *passage* (the success criterion is met) or as *given up* (it will not be met). The
result keeps status success; every array after that step is NaN and ``diagnostics`` names the step.
The finite-d transition's rule is :class:`dmftsolve.finite_d.stopping.FirstPassage`.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import numpy as np

__all__ = ["StopRule", "StopCheck", "Verdict"]

Verdict = Literal["passed", "gave_up"] | None


class StopCheck(Protocol):
    """The rule of one solve of ``T`` steps."""

    def __call__(self, t: int, projections: np.ndarray) -> Verdict:
        """Whether to end the solve at step ``t``; ``projections`` is ``(T+1, k)``, filled up to ``t``."""
        ...

    def diagnostics(self, passed: int | None, gave_up: int | None) -> dict[str, int | None]:
        """The entries of ``DMFTResult.diagnostics`` that say where the solve ended."""
        ...


class StopRule(Protocol):
    """Options of a stopping rule, frozen and checked on construction."""

    def check(self, k: int) -> None:
        """Raise ``ValueError`` if the rule cannot apply to ``k`` target directions."""
        ...

    def build(self, steps: int, k: int) -> StopCheck:
        """The rule of one solve of ``steps`` steps and ``k`` directions."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        ...
