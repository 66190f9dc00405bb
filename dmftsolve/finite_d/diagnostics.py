"""Warnings of the finite-d transition: when a draw's settings are known to bias δ_50.

Two situations move the theory's δ_50 away from GD's beyond its error bar (``docs/findings.md``
§9.2–§9.3, §10.1): the kernel paths' own noise in the curvature along θ* exceeding GD's
(:func:`curvature_warning`, when ``n = δd`` is large against the kernel paths), and too few kernel
paths on a label with a non-zero mean (:func:`label_mean_warning`). Each warning names the option
that removes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dmftsolve.finite_d.settings import (
    TransitionSettings,
    default_kernel_paths,
    kernel_paths,
    label_is_uncentred,
    label_moments,
    recommended_kernel_paths,
)
from dmftsolve.problem import Problem

__all__ = ["curvature_excess", "curvature_warning", "label_mean_warning", "CURVATURE_EXCESS_WARN"]

#: :func:`curvature_excess` above which :func:`curvature_warning` warns: the paths' own noise in the
#: curvature along θ* then exceeds GD's
CURVATURE_EXCESS_WARN = 1.0


def curvature_excess(s: TransitionSettings, n: int) -> float:
    """The kernel paths' excess noise in a ``"forced"`` draw's curvature along θ*, as a
    fraction of GD's ``Var(c)/n`` (:class:`~dmftsolve.finite_d.force.BootstrapForce`; the ``N/2``
    reflection pairs counted as independent): ``2n/N`` with Poisson weights (which add a further
    ``E[c]²/n``), ``max(2n/N − 1, 0)`` with paired ones; NaN for the other constructions.

    Examples
    --------
    >>> curvature_excess(TransitionSettings(n_paths=20_000), 20_000)
    1.0
    """
    if s.construction != "forced":
        return math.nan
    r = 2.0 * n / kernel_paths(s, n)
    return r if s.force_weights == "poisson" else max(r - 1.0, 0.0)


def label_mean_warning(problem: Problem, s: TransitionSettings) -> str | None:
    """A warning when the label has a non-zero mean
    (:func:`~dmftsolve.finite_d.settings.label_is_uncentred`) and the draws use fewer kernel paths than
    :func:`~dmftsolve.finite_d.settings.recommended_kernel_paths`; None otherwise. On such labels
    the theory runs high with too few kernel paths (``docs/findings.md`` §9.2, §10.1)."""
    if s.construction != "forced" or s.paths_per_sample is not None:
        return None
    if not label_is_uncentred(problem):
        return None
    more = recommended_kernel_paths(problem.m, True)
    N = s.n_paths if s.n_paths is not None else default_kernel_paths(problem.m, True)
    if N >= more:
        return None
    mean, sd = label_moments(problem)
    return (f"the label's mean is {mean:.2g} (sd {sd:.2g}): on labels with a non-zero mean the theory "
            f"runs high with too few kernel paths (docs/findings.md 9.2, 10.1); these draws use {N}: "
            f"for a closer delta_50 pass n_paths={more} (--paths {more}), at about {more / N:.2g}x the cost")


def curvature_warning(s: TransitionSettings, d: int, deltas: Sequence[float]) -> str | None:
    """A warning when a ``"forced"`` draw's curvature along θ* carries more of the kernel paths' own
    noise than GD's (:data:`CURVATURE_EXCESS_WARN`) at some δ of ``deltas``; None otherwise. Names
    the δ, the paths and the remedy (``paths_per_sample=2``, or 4 where memory allows)."""
    n = max(int(round(x * d)) for x in deltas)  # the excess grows with n
    ex = curvature_excess(s, n)
    if not ex > CURVATURE_EXCESS_WARN:  # NaN (not "forced") or small
        return None
    x = n / d
    return (f"the kernel paths' own noise in the curvature along theta* is {ex:.2g} x GD's at "
            f"delta = {x:g} (N = {kernel_paths(s, n)} paths, n = {n} samples; {s.force_weights} "
            f"weights): delta_50 may be too high; pass paths_per_sample=2 (--paths-per-sample 2) "
            f"for N = 2n, or 4 if memory allows (docs/findings.md 9.2)")
