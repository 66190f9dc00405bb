"""The equivalent label ``δ_alg`` is computed on (``docs/theory.md`` §5.5).

``δ_alg`` depends on the label only through the σ-algebra it generates, so
before any method runs the label is standardised (:func:`standardize`): an
additive constant and a constant factor are removed symbolically
(:func:`strip_constants`; ``1e-300*z**2`` or ``z**2 + 1e300`` would lose every
digit of ``y`` in double precision), on request the latents the label does not
use are dropped (they add a zero block to ``F``; :func:`embed` maps the results
back), and a label that double precision cannot resolve
(``log(1 + 1e-20*z**2)``) is refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy as sp

from dmftsolve.admissibility import label_resolution
from dmftsolve.problem import Target

__all__ = ["embed", "standardize", "strip_constants"]


def strip_constants(expr: sp.Expr, syms: list[sp.Symbol]) -> sp.Expr:
    """``expr`` without an additive constant and a constant factor (repeatedly).

    ``δ_alg`` depends on the label only through the σ-algebra it generates, so
    ``y ↦ a·y + b`` (``a ≠ 0``) leaves it unchanged; removing ``a`` and ``b``
    symbolically keeps ``1e-300*z**2`` and ``z**2 + 1e300`` from losing every
    digit of ``y`` in double precision.
    """
    for _ in range(8):
        previous = expr
        const, rest = expr.as_independent(*syms, as_Add=True)
        if rest != 0 and const != 0:
            expr = rest
        coeff, rest = expr.as_independent(*syms, as_Add=False)
        if rest != 1 and coeff != 1 and coeff.is_nonzero:
            expr = rest
        if expr.is_Add:  # a common scale of the terms: divide by the largest numeric coefficient
            coeffs = [term.as_coeff_Mul()[0] for term in expr.args]
            big = max(coeffs, key=lambda c: abs(float(c)) if abs(c) < _HUGE else math.inf)
            if big != 1 and big.is_nonzero:
                expr = sp.Add(*[term / big for term in expr.args])
        if expr == previous:
            break
    return expr


_HUGE = sp.Float(1e300)


def _precision_loss(target: Target) -> str | None:
    """Why ``y`` evaluated in double precision does not resolve the label, or None.

    See :func:`dmftsolve.admissibility.label_resolution`: when the double-precision
    values miss the variation of the exact ones (``log(1 + 1e-20*z**2)`` is 0 in
    doubles), every method would see a constant label and report ``δ_alg = ∞``.
    """
    res = label_resolution(target)
    if res is None or res[3] <= 1e-3:
        return None
    spread, center, miss, _ = res
    return (f"target={target.expr!r} is too flat for double precision: the label varies by "
            f"{spread} around {center}, and double-precision "
            f"evaluation misses that by {miss}; rewrite it without the constant it is "
            "dominated by (δ_alg is unchanged by y -> a*y + b and by any invertible map of y)")


def standardize(target: Target, reduce: bool) -> tuple[Target, list[int], list[str]]:
    """An equivalent target for the computation, the latents it keeps, and notes.

    Removes an additive constant and a constant factor from the label (see
    :func:`strip_constants`) and, with ``reduce``, the latents the label does
    not depend on: a latent independent of ``y`` contributes a zero row and
    column to ``G(y) = E[zzᵀ − I | y]``, so ``ρ(F)`` is that of the label in the
    latents it uses (``z2**2`` with ``k = 2`` has the ``δ_alg = 1/2`` of ``z**2``).

    Raises
    ------
    ValueError
        If the label is too flat for double precision: the double-precision values
        miss its variation (see :func:`~dmftsolve.admissibility.label_resolution`).
    """
    expr = target.sympy_expr
    zs, eps = list(target.symbols[:-1]), target.symbols[-1]
    free = expr.free_symbols
    used = [i for i, z in enumerate(zs) if z in free] if reduce else list(range(len(zs)))
    if not used:  # the label does not depend on z: G ≡ 0 whatever the rest
        return target, list(range(len(zs))), []
    notes: list[str] = []
    stripped = strip_constants(expr, [*(zs[i] for i in used), eps])
    if stripped != expr:
        notes.append("computed for the equivalent label without its additive constant and constant "
                     "factor (δ_alg is invariant under y -> a*y + b)")
    kept = len(used)
    if kept < len(zs):
        names = ["z"] if kept == 1 else [f"z{j + 1}" for j in range(kept)]
        new = [sp.Symbol(n, real=True) for n in names]
        stripped = stripped.xreplace({zs[i]: new[j] for j, i in enumerate(used)})
        notes.append(f"the label depends on {kept} of the k={len(zs)} latents; the others "
                     "are independent of y and add nothing to F")
    work = target if (stripped == expr and kept == len(zs)) else Target._from_sympy(stripped, kept)
    # a scale left inside a product or a function (z**2*(1e-301*z + 1e-300)): rescale numerically
    pts = np.random.default_rng(7).standard_normal((256, kept + 1))
    with np.errstate(all="ignore"):
        yv = work(pts[:, :-1], pts[:, -1])
    if np.all(np.isfinite(yv)):
        scale = float(np.median(np.abs(yv - np.median(yv))))
        if scale > 0 and not 1e-100 < scale < 1e100:
            stripped = stripped / sp.Float(scale, 30)
            work = Target._from_sympy(stripped, kept)
    reason = _precision_loss(work)
    if reason is not None:
        raise ValueError(reason)
    return work, used, notes


def embed(diagnostics: dict[str, Any], used: list[int], k: int) -> None:
    """Map the ``k'×k'`` matrices of a reduced computation back to the ``k`` latents."""
    if len(used) == k:
        return
    idx = np.asarray(used)
    for key in ("easy_subspace", "trivial_gram"):
        if key in diagnostics:
            small = np.asarray(diagnostics[key], dtype=float)
            full = np.zeros((k, k))
            full[np.ix_(idx, idx)] = small
            diagnostics[key] = full
    if "F_eigenvalues" in diagnostics:
        w = np.asarray(diagnostics["F_eigenvalues"], dtype=float)
        diagnostics["F_eigenvalues"] = np.sort(np.r_[np.zeros(k * (k + 1) // 2 - w.size), w])
    diagnostics["latents_used"] = [int(i) for i in used]
