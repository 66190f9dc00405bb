"""The spectrum of the restricted Hessian along the hard directions at one ``δ`` and time.

The pipeline is :func:`hard_spectra` (one public function; the ``spectrum`` command uses the
same through :func:`hard_spectrum`): restricted problem (:func:`restricted`: the hard directions
held at zero overlap) → law of the training fields (:class:`~dmftsolve.hessian.law.Law`) →
outliers along the hard directions (:func:`dmftsolve.hessian.outlier_equation.outliers`). The
law is

* finite ``t``: the DMFT paths at step ``t`` (``DMFTResult.law(t)``,
  :func:`dmftsolve.dynamics.dmft.solve_dmft`), one DMFT run for every time asked at this ``δ``;
* ``t = "tti"``: the time-translation-invariant fixed point
  (``FixedPoint.law()``, :func:`dmftsolve.dynamics.fixed_point.solve_fixed_point`).
  This is fast, but only valid where GD converges to the fixed point it
  selects: for square loss on ``y = z²`` with GeLU or ``r²`` neurons the
  global proximal branch does not match long GD runs (``docs/findings.md``
  §2.3), so it is not the default.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dmftsolve.checks import check_delta
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.dynamics.fixed_point import solve_fixed_point
from dmftsolve.hessian.law import Law
from dmftsolve.hessian.outlier_equation import Outliers, outliers
from dmftsolve.hessian.spectrum import TAIL_INDEX_THRESHOLD, tail_index
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status
from dmftsolve.thresholds.directions import DirectionSplit, split_directions
from dmftsolve.thresholds.settings import ThresholdSettings

__all__ = ["HardSpectrum", "Time", "check_time", "hard_spectra", "hard_spectrum", "restricted"]


def restricted(problem: Problem, split: DirectionSplit | None = None) -> tuple[Problem, tuple[int, ...]]:
    """The problem with its hard directions held at zero overlap, and their indices.

    Parameters
    ----------
    problem : Problem
        The learning problem.
    split : DirectionSplit, optional
        Its easy/hard split (default: :func:`split_directions` of its target).

    Returns
    -------
    Problem
        ``problem`` with ``training.hold_zero`` set to the hard directions.
    tuple of int
        The indices of the hard directions.

    Raises
    ------
    ValueError
        If the target has no hard direction, or its hard subspace is not
        spanned by coordinate axes (then rewrite the target in rotated coordinates).

    Examples
    --------
    >>> from dmftsolve import Problem, restricted
    >>> q, hard = restricted(Problem.build(target="z1 + z2**2", activation="quad", eta=0.05))
    >>> hard, q.training.hold_zero
    ((1,), (1,))
    """
    split = split or split_directions(problem.target)
    hard = split.hard_indices
    if hard is None:
        raise ValueError(
            f"target={problem.target.expr!r}: the hard subspace is not spanned by coordinate axes; "
            "rewrite the target so that it is"
        )
    if not hard:
        raise ValueError(f"target={problem.target.expr!r} has no hard direction: every direction is "
                         "learned in O(1) steps, so there is no δ_NN")
    used = {sym.name for sym in problem.target.sympy_expr.free_symbols}
    names = problem.target.variable_names
    if not any(names[j] in used for j in hard):
        unused = ", ".join(names[j] for j in hard)
        raise ValueError(f"target={problem.target.expr!r} does not depend on {unused}: the label carries "
                         "no information about the hard direction(s), so no sample size recovers them "
                         "(δ_NN = δ_alg = ∞); a target must use the latent(s) it is to teach")
    held = tuple(sorted(set(problem.training.hold_zero) | set(hard)))
    return problem.replace(hold_zero=list(held)), hard


Time = int | Literal["tti"]


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class HardSpectrum(Result):
    """Bulk edge and hard-direction outliers of the Hessian at one ``(δ, t)``.

    ``law`` is the law of the training fields the spectrum was computed from
    (kept only when asked, :func:`hard_spectra`); ``M``, ``Q``, ``b`` are the
    DMFT overlaps ``M_t``, Gram ``Q(t,t)`` and bias ``b_t`` at that step
    (fixed point: its ``M``, ``Q`` and no bias).
    """

    _headline = ("delta", "t", "left_edge")  # shown by the repr (Result.__repr__)

    delta: float
    t: Time
    outliers: Outliers
    hard: tuple[int, ...]
    law: Law | None = field(default=None, repr=False)
    M: np.ndarray | None = None
    Q: np.ndarray | None = None
    b: np.ndarray | None = None

    @property
    def left_edge(self) -> float | None:
        return self.outliers.left_edge

    def has_outlier(self, criterion: str = "negative") -> bool:
        locs = [o.location for o in self.outliers.outliers if o.side == "left"]
        if criterion == "separated":
            return bool(locs)
        return any(x < 0 for x in locs)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["outliers"] = [o.to_dict() for o in self.outliers.outliers]
        out["left_edge"] = self.left_edge
        out["law"] = None if self.law is None else self.law.summary()
        return out


def check_time(t: Any) -> Time:
    """``t`` as a time of :func:`hard_spectra`: a step ``>= 0`` or ``"tti"``; ``ValueError`` otherwise."""
    if t == "tti":
        return "tti"
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
        raise ValueError(f"t must be a step >= 0 or 'tti', got {t!r}")
    return int(t)


@dataclass(frozen=True)
class _LawAt:
    """The law at one time and where it came from (the input of one hard spectrum)."""

    law: Law | None
    status: Status
    message: str
    unbounded_below: bool | None
    diagnostics: dict[str, Any]
    M: np.ndarray | None = None
    Q: np.ndarray | None = None
    b: np.ndarray | None = None


def _fixed_point_law(prob: Problem, delta: float, settings: ThresholdSettings) -> _LawAt:
    fp = solve_fixed_point(prob, delta, settings=settings.fixed_point_settings(prob.m), throw=False)
    # 1 + κD > 0 on every node: the law of D is bounded below
    return _LawAt(law=fp.law() if fp.ok else None, status=fp.status, message=fp.message,
                  unbounded_below=False, diagnostics={"fixed_point": fp.to_dict()}, M=fp.M, Q=fp.Q)


def _dmft_laws(prob: Problem, delta: float, steps: list[int],
               settings: ThresholdSettings) -> dict[Time, _LawAt]:
    # error bars and test loss of the DMFT are not used here (the replicates measure the error):
    # neither is computed; the paths are those of errors="batch" bit for bit
    res = solve_dmft(prob, delta, n_paths=settings.n_paths, seed=settings.seed, steps=max(steps),
                     keep_samples_at=tuple(steps), throw=False, errors="none", test_loss="none",
                     null_rtol=settings.null_rtol)
    out: dict[Time, _LawAt] = {}
    for t in steps:
        diag: dict[str, Any] = {"dmft_train_loss": float(res.train_loss[t])}
        law = res.law(t) if res.ok else None
        if law is not None:
            eig_min = np.linalg.eigvalsh(law.D)[:, 0]
            diag["tail_index_below"] = tail_index(-eig_min)
            diag["tail_unbounded"] = bool(diag["tail_index_below"] > TAIL_INDEX_THRESHOLD)
        out[t] = _LawAt(law=law, status=res.status, message=res.message,
                        unbounded_below=None if settings.tails == "strict" else False, diagnostics=diag,
                        M=res.M[t].copy(), Q=res.Q[t, t].copy(), b=res.b[t].copy() if prob.bias else None)
    return out


def hard_spectra(
    problem: Problem,
    delta: float,
    times: tuple[Time, ...],
    *,
    settings: ThresholdSettings | None = None,
    split: DirectionSplit | None = None,
    keep_law: bool = False,
) -> dict[Time, HardSpectrum]:
    """Hard spectra of the restricted problem at ``δ`` for each of ``times`` (one DMFT run serves all).

    Parameters
    ----------
    problem : Problem
        The learning problem; its hard directions are held at zero overlap.
    delta : float
    times : tuple of (int or "tti")
        GD steps (law from the DMFT paths) and/or ``"tti"`` (fixed point).
    settings : ThresholdSettings, optional
        ``n_paths``, ``seed``, ``tails`` and ``fixed_point`` are used.
    split : DirectionSplit, optional
        The easy/hard split (computed from the target if not given).
    keep_law : bool
        Keep the law in :attr:`HardSpectrum.law` (default False: the search
        only needs the outliers).

    Returns
    -------
    dict
        ``{t: HardSpectrum}``; a failed DMFT or fixed point gives a failure status, not an exception.
    """
    start = time.perf_counter()
    delta = check_delta(delta)
    settings = settings or ThresholdSettings()
    times = tuple(check_time(t) for t in times)
    prob, hard = restricted(problem, split)
    laws: dict[Time, _LawAt] = {}
    if "tti" in times:
        laws["tti"] = _fixed_point_law(prob, delta, settings)
    steps = [t for t in times if t != "tti"]
    if steps:
        laws |= _dmft_laws(prob, delta, steps, settings)
    out: dict[Time, HardSpectrum] = {}
    for t, src in laws.items():
        status, message, warnings = src.status, src.message, []
        if status.ok and src.law is not None:
            o = outliers(src.law, src.law.Vstar[:, list(hard)], delta, lam=prob.training.lam,
                         unbounded_below=src.unbounded_below, npoints=settings.outlier_points, throw=False)
            warnings = list(o.warnings)
            if not o.ok:
                status, message = o.status, o.message
            elif src.diagnostics.get("tail_unbounded"):
                warnings.append("the law of D looks unbounded below (tail index "
                                f"{src.diagnostics['tail_index_below']:.2f}); edge and outliers are those "
                                f"of the {settings.n_paths}-sample law")
        else:
            o = Outliers(outliers=[], left_edge=None, right_edge=None, status=status, message=message,
                         settings={}, diagnostics={}, elapsed=0.0)
        out[t] = HardSpectrum(
            delta=delta, t=t, outliers=o, hard=hard, status=status, message=message, warnings=warnings,
            law=src.law if keep_law else None, M=src.M, Q=src.Q, b=src.b,
            settings={"problem": prob.to_dict(), "delta": delta, "t": t, "n_paths": settings.n_paths,
                      "seed": settings.seed, "null_rtol": settings.null_rtol},
            diagnostics=src.diagnostics, elapsed=time.perf_counter() - start,
        )
    return out


def hard_spectrum(
    problem: Problem,
    delta: float,
    t: Time,
    *,
    settings: ThresholdSettings | None = None,
    keep_law: bool = True,
    throw: bool = True,
) -> HardSpectrum:
    """Hard-direction outliers of the restricted-dynamics Hessian at step ``t`` (:func:`hard_spectra`).

    Parameters
    ----------
    problem : Problem
    delta : float
    t : int or "tti"
        GD step (law of ``D`` from the DMFT) or ``"tti"`` (fixed point).
    settings : ThresholdSettings, optional
    keep_law : bool
        Return the law too (:attr:`HardSpectrum.law`, default True), e.g. for
        the bulk spectrum and the outliers along the learned directions.
    throw : bool
        Raise :class:`SolverError` on failure (default True).

    Returns
    -------
    HardSpectrum
        The bulk's left edge and the hard outliers at ``(δ, t)``.

    Examples
    --------
    The r² neuron on ``min(z², 3)`` at initialisation (``t = 0``, exact law,
    no Monte Carlo) has a negative hard outlier at ``δ = 3``:

    >>> from dmftsolve import Problem, hard_spectrum
    >>> p = Problem.build(target="Min(z**2, 3)", activation="quad", eta=0.05)
    >>> hs = hard_spectrum(p, 3.0, 0)
    >>> hs.has_outlier("negative"), hs.hard
    (True, (0,))
    """
    delta = check_delta(delta)
    t = check_time(t)
    result = hard_spectra(problem, delta, (t,), settings=settings, keep_law=keep_law)[t]
    if throw and not result.ok:
        raise SolverError(f"hard spectrum at delta={delta}, t={t}: {result.message}", result)
    return result
