"""When a draw of the finite-d transition ends (``docs/theory.md`` §7.2, "Giving up").

Each draw stops at its *first passage*: the first step at which every hard direction's projection
onto ``span(W)`` exceeds the success cosine (:mod:`dmftsolve.success`; GD's escapes are permanent).
Optionally it also *gives up*, as a failure, at the first step ``t ≥ T/4`` at which its success
statistic ``p_t`` (the smallest of those projections) satisfies

    p_t + F · max(p_t − p_{t−W}, 0) · (T − t)/W < level − GIVE_UP_MARGIN,        W = T/8,

that is, when even ``F`` times its growth over the last ``W`` steps, kept up to ``T``, would leave it
short of the level by the margin. This is a heuristic, not a bound: a draw whose growth later speeds
up more than ``F``-fold is counted as a failure (the draws checked: ``docs/findings.md`` §9.10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dmftsolve.dynamics.stopping import Verdict

__all__ = ["FirstPassage", "GIVE_UP_FACTOR", "GIVE_UP_MARGIN", "give_up_window", "gives_up",
           "give_up_step"]

#: the default give-up factor ``F`` of the transition's draws (``TransitionSettings.give_up_factor``)
GIVE_UP_FACTOR = 20.0

#: a draw whose success statistic is within this of the level is never given up (a draw that
#: hovers just below the level and then passes is not lost)
GIVE_UP_MARGIN = 0.1


def give_up_window(T: int) -> int:
    """``W``, the steps over which the give-up rule measures a draw's growth: ``max(1, round(T/8))``."""
    return max(1, round(T / 8))


def gives_up(now: float, before: float, t: int, T: int, factor: float, level: float) -> bool:
    """The give-up rule at step ``t`` of ``T`` (module docstring): ``now`` is the success statistic
    at ``t`` and ``before`` at ``t − W``; true when ``t ≥ T/4`` and
    ``now + factor·max(now − before, 0)·(T − t)/W < level − GIVE_UP_MARGIN``.

    Examples
    --------
    >>> gives_up(0.1, 0.1, 100, 400, 20.0, 0.5), gives_up(0.1, 0.1, 99, 400, 20.0, 0.5)
    (True, False)
    """
    W = give_up_window(T)
    if 4 * t < T or t < W:
        return False
    return now + factor * max(now - before, 0.0) * (T - t) / W < level - GIVE_UP_MARGIN


def give_up_step(statistic: Any, T: int, factor: float, level: float = 0.5,
                 steps: Any = None) -> int | None:
    """The step at which a trajectory of the success statistic gives up, or None if it passes
    ``level`` first or never gives up: the first ``t`` at which :func:`gives_up` holds, before any
    value above ``level``.

    ``steps`` are the steps of the entries of ``statistic`` (default ``0, 1, …``); on a recording
    grid (e.g. GD's every 5 steps) the rule is checked where ``t − W`` is recorded too. The DMFT
    applies the same rule step by step (:class:`FirstPassage`).

    Examples
    --------
    >>> give_up_step([0.1] * 9, 8, 20.0)  # flat: gives up at T/4 = 2
    2
    >>> give_up_step([0.1, 0.2, 0.3, 0.4, 0.45, 0.49, 0.6, 0.7, 0.8], 8, 20.0) is None
    True
    """
    p = np.asarray(statistic, dtype=float)
    t_of = np.arange(p.size) if steps is None else np.asarray(steps, dtype=int)
    where = {int(t): i for i, t in enumerate(t_of)}
    for i, t in enumerate(t_of):
        if not np.isfinite(p[i]) or p[i] > level:
            return None
        j = where.get(int(t) - give_up_window(T))
        if j is not None and gives_up(p[i], p[j], int(t), T, factor, level):
            return int(t)
    return None


@dataclass(frozen=True)
class FirstPassage:
    """End a DMFT solve at the first passage of the success criterion, and optionally give up.

    Parameters
    ----------
    level : float
        The success cosine, in ``(0, 1)``: every direction of ``directions`` must have a
        projection onto ``span(W^t)`` above it.
    directions : tuple of int
        Target directions tested (default: all).
    give_up_factor : float, optional
        ``F`` of the give-up rule (module docstring); None: never give up.

    Examples
    --------
    >>> FirstPassage(0.5, (0,), give_up_factor=20.0).to_dict()
    {'stop_cosine': 0.5, 'stop_directions': [0], 'give_up_factor': 20.0}
    """

    level: float
    directions: tuple[int, ...] = ()
    give_up_factor: float | None = None

    def __post_init__(self) -> None:
        c = self.level
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.integer, np.floating)) \
                or not 0 < c < 1:
            raise ValueError(f"stop_cosine must be a number in (0, 1), got {c!r}")
        object.__setattr__(self, "level", float(c))
        dirs = self.directions
        if isinstance(dirs, (str, bytes)) or not hasattr(dirs, "__iter__") or any(
                isinstance(j, (bool, np.bool_)) or not isinstance(j, (int, np.integer)) or j < 0
                for j in dirs):
            raise ValueError(f"stop_directions must hold integers >= 0, got {dirs!r}")
        object.__setattr__(self, "directions", tuple(sorted({int(j) for j in dirs})))
        g = self.give_up_factor
        if g is not None:
            if isinstance(g, (bool, np.bool_)) or not isinstance(g, (int, float, np.integer, np.floating)) \
                    or not 1 <= g < math.inf:
                raise ValueError(f"give_up_factor must be a finite number >= 1 or None, got {g!r}")
            object.__setattr__(self, "give_up_factor", float(g))

    def check(self, k: int) -> None:
        if any(j >= k for j in self.directions):
            raise ValueError(f"stop_directions must hold target directions in [0, {k}), got "
                             f"{list(self.directions)!r}")

    def build(self, steps: int, k: int) -> _FirstPassageCheck:
        return _FirstPassageCheck(self, steps, list(self.directions) or list(range(k)))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stop_cosine": self.level, "stop_directions": list(self.directions)}
        if self.give_up_factor is not None:
            out["give_up_factor"] = self.give_up_factor
        return out


class _FirstPassageCheck:
    """:class:`FirstPassage` for one solve of ``T`` steps."""

    def __init__(self, rule: FirstPassage, steps: int, rows: list[int]) -> None:
        self.rule, self.T, self.rows = rule, steps, rows
        self.window = give_up_window(steps)

    def __call__(self, t: int, projections: np.ndarray) -> Verdict:
        now = projections[t, self.rows].min()
        if now > self.rule.level:
            return "passed"
        F = self.rule.give_up_factor
        if F is not None and t >= self.window and gives_up(
                now, projections[t - self.window, self.rows].min(), t, self.T, F, self.rule.level):
            return "gave_up"
        return None

    def diagnostics(self, passed: int | None, gave_up: int | None) -> dict[str, int | None]:
        out = {"stopped_at": passed}
        if self.rule.give_up_factor is not None:
            out["gave_up_at"] = gave_up
        return out
