"""The entry point :func:`alg_threshold`: ``δ_alg`` by the method that applies, and its result.

The steps, each a function below: check the inputs; standardise the label
(:func:`~dmftsolve.thresholds.weak_recovery.standardize.standardize`); choose
the method (``"auto"``: the exact one that applies, else ``"binned"``); run it
through the method table :data:`METHODS` (every entry is called as
``estimate(target, options)`` and returns an
:class:`~dmftsolve.thresholds.weak_recovery.common.Estimate`), falling back to
``"binned"`` when an exact method cannot work under ``"auto"``; turn ``ρ(F)``
and the trivial test into ``δ_alg`` with its error and status.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from dmftsolve.gaussian import as_generator
from dmftsolve.problem import Target, as_target
from dmftsolve.results import Result, SolverError, Status
from dmftsolve.thresholds.weak_recovery import additive, binned, fibred, preimage
from dmftsolve.thresholds.weak_recovery.additive import MIN_NOISE_RATIO, additive_noise, noise_ratio
from dmftsolve.thresholds.weak_recovery.binned import MAX_BINNED_K
from dmftsolve.thresholds.weak_recovery.common import (
    MAX_PIECES,
    Estimate,
    MethodOptions,
    NotFinite,
    TooManyPieces,
)
from dmftsolve.thresholds.weak_recovery.fibred import fibre_axis, has_atoms, target_h2
from dmftsolve.thresholds.weak_recovery.standardize import embed, standardize

__all__ = ["METHODS", "AlgThreshold", "alg_threshold"]

#: The methods by name: each is called as ``estimate(target, options)`` with the standardised
#: target and a :class:`~dmftsolve.thresholds.weak_recovery.common.MethodOptions`.
METHODS: dict[str, Callable[[Target, MethodOptions], Estimate]] = {
    "preimage": preimage.estimate,
    "fibred": fibred.estimate,
    "additive": additive.estimate,
    "binned": binned.estimate,
}
_METHOD_NAMES = ("auto", *METHODS)


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class AlgThreshold(Result):
    """Result of :func:`alg_threshold`.

    Attributes
    ----------
    delta_alg : float
        The threshold ``δ_alg``; ``0`` if a trivial (linearly learnable) part
        exists, ``inf`` if ``G ≡ 0``.
    trivial : bool
        Whether ``E[z | y] ≠ 0``: some directions are learned at any ``δ > 0``.
    error : float
        Error estimate of ``delta_alg`` (quadrature difference, or Monte Carlo
        standard errors plus extrapolation for ``"binned"``).
    method : str
        The method that gave the answer: ``"preimage"``, ``"fibred"``, ``"additive"``
        or ``"binned"`` (a key of :data:`METHODS`).
    status, message, settings, diagnostics, elapsed
        See :class:`~dmftsolve.results.Result`. ``diagnostics`` holds
        ``spectral_radius`` (``ρ(F)``) and its error, the eigenvalues of ``F``,
        the Perron eigenmatrix (``easy_subspace``), the trivial statistic
        ``E_y‖E[z|y]‖²``-type top eigenvalue (``trivial_statistic``) and
        method-specific numbers.
    """

    _headline = ("delta_alg", "error")  # shown by the repr (Result.__repr__)

    delta_alg: float
    trivial: bool
    error: float
    method: str
    status: Status = Status.SUCCESS
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0


# --------------------------------------------------------------------------- steps
def _check_alg_inputs(method: Any, rtol: Any, n_samples: Any, n_scrambles: Any, max_pieces: Any) -> None:
    """Raise ``ValueError`` naming the first invalid argument of :func:`alg_threshold`."""
    if method not in _METHOD_NAMES:
        raise ValueError(f"method must be one of {_METHOD_NAMES}, got {method!r}")
    if not (isinstance(rtol, (int, float)) and not isinstance(rtol, bool)
            and math.isfinite(rtol) and 0 < rtol < 1):
        raise ValueError(f"rtol must be a number in (0, 1), got {rtol!r}")
    for name, v, lo in (("n_samples", n_samples, 2**10), ("n_scrambles", n_scrambles, 4)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if isinstance(max_pieces, bool) or not isinstance(max_pieces, (int, np.integer)) or max_pieces < 1:
        raise ValueError(f"max_pieces must be an integer >= 1, got {max_pieces!r}")


def _choose_method(target: Target, method: str, additive: tuple[sp.Expr, float] | None) -> str:
    """Resolve ``"auto"`` and check that an explicit method applies to ``target``."""
    k = target.k
    if method == "auto":
        if not target.noisy and k == 1:
            method = "preimage"
        elif (not target.noisy and k == 2 and fibre_axis(target) is not None
              and not has_atoms(target_h2(target), as_generator(12345))):
            method = "fibred"
        elif additive is not None and k <= 2 and noise_ratio(target, additive) >= MIN_NOISE_RATIO:
            method = "additive"
        else:
            method = "binned"
    if method == "preimage" and (target.noisy or k != 1):
        raise ValueError(f"method='preimage' needs a noiseless k=1 target, got {target.expr!r}")
    if method == "fibred" and (target.noisy or k != 2):
        raise ValueError(f"method='fibred' needs a noiseless k=2 target, got {target.expr!r}")
    if method == "fibred" and fibre_axis(target) is None:
        raise ValueError(f"method='fibred' needs h monotone along z1 or z2 on every line, "
                         f"got {target.expr!r}")
    if method == "additive" and additive is None:
        raise ValueError(f"method='additive' needs y = h0(z) + c*eps with constant c != 0, "
                         f"got {target.expr!r}")
    if method == "additive" and noise_ratio(target, additive) < MIN_NOISE_RATIO:
        raise ValueError(
            f"method='additive': the noise c = {additive[1]:.3g} is {noise_ratio(target, additive):.2g} "
            f"of the spread of h0 in {target.expr!r}, below the {MIN_NOISE_RATIO} its grid resolves "
            "(it read ρ(F) = 0 and answered ∞); use the binned method")
    return method


def _run_exact(target: Target, method: str, auto: bool, options: MethodOptions,
               notes: list[str]) -> Estimate | None:
    """The estimate of an exact method (``"preimage"``, ``"fibred"``), or None when ``auto`` must fall
    back to ``"binned"`` (too many pieces, or ``h`` not finite on the grid; the reason is noted)."""
    try:
        return METHODS[method](target, options)
    except TooManyPieces as exc:
        if not auto:
            raise ValueError(f"method={method}: {str(exc).split('; use method')[0]}; use the "
                             "binned method (Monte Carlo), or raise max_pieces to wait") from None
        notes.append(f"{exc.pieces} monotone pieces: the exact quadrature would take about "
                     f"{exc.seconds:.2g} s, used the binned Monte Carlo method")
    except NotFinite as exc:
        if not auto:
            raise ValueError(f"method={method}: {exc}") from None
        notes.append("h or h' is not finite at a point of the exact method's grid: used the "
                     "binned Monte Carlo method")
    return None


def _estimate(original: Target, target: Target, method: str, auto: bool, options: MethodOptions,
              settings: dict[str, Any], diagnostics: dict[str, Any],
              notes: list[str]) -> tuple[str, Estimate, bool]:
    """Run ``method`` from :data:`METHODS`, with the fallbacks of ``"auto"`` to ``"binned"``.

    Returns the method that answered, its estimate, and whether an exact method fell back
    for too many pieces or a non-finite ``h`` (then an infinite ``δ_alg`` is only a bound).
    """
    est = None
    fell_back = False
    if method in ("preimage", "fibred"):
        est = _run_exact(target, method, auto, options, notes)
        if est is None:
            fell_back = True
            method = settings["method"] = "binned"
    if method == "binned" and target.k > MAX_BINNED_K:
        raise ValueError(
            f"k={original.k}: the binned Monte Carlo method, the only one that applies to "
            f"target={original.expr!r}, handles at most {MAX_BINNED_K} latent directions (it "
            f"averages over the 2^k sign flips of z); use a smaller k")
    if method == "fibred" and auto and not est.converged:
        notes.append(f"fibred quadrature did not converge (error {est.spectral_radius_error:.2g} on "
                     "ρ(F)); used the binned Monte Carlo method")
        diagnostics["fibred_attempt"] = {"spectral_radius": est.spectral_radius,
                                         "error": est.spectral_radius_error}
        method = settings["method"] = "binned"
    if method in ("additive", "binned"):
        est = METHODS[method](target, options)
    return method, est, fell_back


def _explain_infinite(method: str, target: Target, options: MethodOptions, est: Estimate,
                      fell_back: bool, notes: list[str]) -> Status | None:
    """Reword the first note of an infinite ``δ_alg`` that is a bound rather than ``G ≡ 0``;
    the status to report instead (``NOT_CONVERGED``), or None to keep it."""
    lam, lam_err = est.spectral_radius, est.spectral_radius_error
    if method == "additive" and not est.trivial:
        ratio = noise_ratio(target, options.additive)
        if 1e4 < ratio < math.inf:  # a signal drowned in noise: ρ(F) ~ ratio^-4 is tiny, not 0
            notes[0] = (f"the noise is {ratio:.2g} times the spread of the rest of the label, so ρ(F) "
                        f"= {lam:.3g} ± {lam_err:.2g} is below what double precision resolves: δ_alg is "
                        "beyond 1e12, reported as ∞ (it is finite for any nonzero signal)")
    if fell_back:
        # the Monte Carlo cannot tell a small ρ(F) (or a weak E[z|y]) from 0: a bound, not ∞
        bound = 1.0 / (max(lam, 0.0) + lam_err) if lam_err > 0 else math.inf
        notes[0] = (f"the binned Monte Carlo cannot tell ρ(F) = {lam:.3g} ± {lam_err:.2g} from 0, so "
                    f"δ_alg >= {bound:.3g} is all it shows (a weak E[z|y] ≠ 0 would go unseen too)")
        return Status.NOT_CONVERGED
    return None


def _conclude(k: int, method: str, status: Status, lam: float, lam_err: float, trivial: bool,
              zero_tol: float, accept: float, notes: list[str]) -> tuple[float, float, Status]:
    """``(δ_alg, error, status)`` from the spectral radius ``ρ(F)`` and the trivial test."""
    if trivial:
        notes.insert(0, "E[z|y] ≠ 0: the directions in the range of E_y[E[z|y]E[z|y]ᵀ] are "
                        "learned by a linear step at any δ > 0, so δ_alg = 0"
                     + ("" if k == 1 else "; for the threshold of the remaining directions "
                        "once the learned ones are known, see dmftsolve.staged_alg_threshold"))
        return 0.0, 0.0, status
    if lam <= zero_tol and max(lam, 0.0) + lam_err > 1e-2:
        # an error this large is no evidence that ρ(F) = 0
        if lam > 2 * lam_err:  # resolved from 0, not to the tolerance: a value with its error
            notes.append(f"ρ(F) = {lam:.3g} ± {lam_err:.2g}: the error exceeds the tolerance")
            return 1.0 / lam, lam_err / lam**2, Status.NOT_CONVERGED
        # only δ_alg >= 1/(ρ + error) is known
        notes.insert(0, f"ρ(F) = {lam:.3g} ± {lam_err:.2g} cannot be told from 0 at this accuracy: "
                        f"δ_alg >= {1 / (max(lam, 0.0) + lam_err):.3g} is all that is known")
        return math.inf, math.inf, Status.NOT_CONVERGED
    if lam <= zero_tol:
        if lam > 10 * lam_err and lam > 0:  # resolved, but below the absolute floor of 1e-12
            notes.insert(0, f"ρ(F) = {lam:.3g} ± {lam_err:.2g} is below {zero_tol:.0e}, taken as 0: "
                            f"δ_alg >= {1 / zero_tol:.0e} (about {1 / lam:.3g}), reported as ∞")
        else:
            notes.insert(0, f"G(y) = E[zzᵀ − I | y] ≡ 0 (ρ(F) = {lam:.3g} ± {lam_err:.2g}): no "
                            "first-order method recovers the hard directions at any δ, δ_alg = ∞")
        return math.inf, math.inf, status
    delta = 1.0 / lam
    err = lam_err / lam**2
    if method == "binned" and err > accept * delta:
        status = Status.NOT_CONVERGED
        notes.append(f"Monte Carlo/binning error {err:.3g} exceeds {accept:g}·δ_alg; "
                     "raise n_samples")
    return delta, err, status


# --------------------------------------------------------------------------- entry point
def alg_threshold(
    target_or_problem: Any,
    *,
    method: str = "auto",
    rtol: float = 1e-8,
    n_samples: int = 2**20,
    n_scrambles: int = 16,
    seed: Any = 0,
    throw: bool = True,
    max_pieces: int = MAX_PIECES,
) -> AlgThreshold:
    """Weak-recovery threshold ``δ_alg`` of the target (see :mod:`dmftsolve.thresholds.weak_recovery`).

    Parameters
    ----------
    target_or_problem : Target, Problem or str
        The link ``y = h(z, ε)`` (a :class:`~dmftsolve.problem.Problem`
        contributes its target; a string is parsed as :class:`Target`).
    method : {"auto", "preimage", "fibred", "additive", "binned"}
        ``"auto"``: ``"preimage"`` for noiseless ``k = 1``, ``"fibred"`` for
        noiseless ``k = 2`` targets monotone along a coordinate on every line
        and without atoms, ``"additive"`` for ``h0(z) + c·eps`` with ``k <= 2``,
        else ``"binned"``.
    rtol : float
        Relative accuracy asked of the deterministic methods; ``"binned"`` is
        accepted if its error is below ``max(rtol, 1e-2)`` relative.
    n_samples, n_scrambles : int
        Sobol points (total) and independent scramblings for ``"binned"``.
    seed : None, int, SeedSequence or numpy.random.Generator
        Randomness for ``"binned"`` (default 0, reproducible; ``dmftsolve.seeds``).
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` unless the status is
        ``SUCCESS`` (default).
    max_pieces : int
        Most monotone pieces of ``h`` (on ``[-12, 12]``, or on a fibre) the exact
        methods take on (default :data:`MAX_PIECES`); their time grows like the
        square of the count (about ``0.06 s × pieces²``). Past it ``"auto"`` uses
        ``"binned"`` and an explicit ``"preimage"``/``"fibred"`` is refused at once.

    Returns
    -------
    AlgThreshold

    Raises
    ------
    ValueError
        Invalid inputs, or a method that does not apply to the target.
    NotImplementedError
        Cases no method handles reliably (e.g. ``"additive"`` with large ``k``).
    SolverError
        If ``throw`` and the result did not reach its tolerance.

    Examples
    --------
    For ``y = z²`` the label fixes ``z²``, so ``δ_alg = 1/Var(z²) = 1/2``:

    >>> from dmftsolve import alg_threshold
    >>> r = alg_threshold("z**2")
    >>> abs(r.delta_alg - 0.5) <= r.error < 1e-8, r.method
    (True, 'preimage')
    """
    start = time.perf_counter()
    original = as_target(target_or_problem)
    _check_alg_inputs(method, rtol, n_samples, n_scrambles, max_pieces)
    gen = as_generator(seed)
    auto = method == "auto"
    # the computation runs on an equivalent label: no constant offset or factor, and (auto)
    # only the latents it depends on; results are mapped back to original.k below
    target, used, notes = standardize(original, reduce=auto)
    found = additive_noise(target)
    method = _choose_method(target, method, found)
    settings = {"target": original.expr, "k": original.k, "method": method, "rtol": rtol}
    diagnostics: dict[str, Any] = {"k": original.k, "noisy": target.noisy}
    if target is not original:
        diagnostics["standardized_target"] = target.expr
    options = MethodOptions(rtol=rtol, max_pieces=max_pieces, n_samples=n_samples, n_scrambles=n_scrambles,
                            rng=gen, additive=found)

    method, est, fell_back = _estimate(original, target, method, auto, options, settings, diagnostics, notes)
    if method == "binned":
        settings.update({"n_samples": int(n_samples), "n_scrambles": int(n_scrambles),
                         "seed": seed if isinstance(seed, (int, np.integer)) else None})
    status = Status.SUCCESS if est.converged else Status.NOT_CONVERGED
    diagnostics.update(est.diagnostics)
    notes.extend(est.notes)
    lam, lam_err = est.spectral_radius, est.spectral_radius_error
    diagnostics.update({"spectral_radius": lam, "spectral_radius_error": lam_err})
    delta, err, status = _conclude(target.k, method, status, lam, lam_err, est.trivial, est.zero_tol,
                                   est.accept, notes)
    if math.isinf(delta):
        status = _explain_infinite(method, target, options, est, fell_back, notes) or status
    embed(diagnostics, used, original.k)
    result = AlgThreshold(delta_alg=delta, trivial=bool(est.trivial), error=err, method=method,
                          status=status, message="; ".join(notes), settings=settings,
                          diagnostics=diagnostics, elapsed=time.perf_counter() - start)
    if throw and not result.ok:
        raise SolverError(f"alg_threshold {status.value}: {result.message}", result)
    return result
