"""Admissibility of user expressions: is a label, an activation or a loss fit to train on?

The data model (:mod:`dmftsolve.problem`) parses the expression; the rules here
decide, numerically and at fixed test points, whether the theory and the
simulator can use it, and say why not in one line:

* :func:`target_problem`: the label is not real and finite for Gaussian latents
  (``sqrt(z)``, ``log(z)``), has a pole of order ``>= 1/2`` (``1/z``), or grows
  too fast for a finite variance (``exp(z**2)``);
* :func:`activation_problem`, :func:`loss_problem`: σ, σ', σ'' (or the loss and
  its first two derivatives in ``f``) are not finite at real test points;
* :func:`resolution_problem`: double precision does not resolve the label's
  variation (``z**2 + 1e300``), measured by :func:`label_resolution`.

Each verdict is remembered by the expression's text (the checks compile and
evaluate it, which takes milliseconds, and :meth:`~dmftsolve.problem.Problem.replace`
rebuilds often).

Examples
--------
>>> from dmftsolve.admissibility import target_problem
>>> from dmftsolve import Target
>>> print(target_problem(Target("z**2")))
None
>>> Target("1/z")  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
ValueError: target='1/z' has no finite variance: it has a pole where 'z' = 0, of order 1 >= 1/2, ...
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp

from dmftsolve._symbolic import compile_expression
from dmftsolve.checks import short_repr

if TYPE_CHECKING:
    from dmftsolve.problem import Loss, Network, Target

__all__ = ["activation_problem", "label_resolution", "loss_problem", "resolution_problem", "target_problem"]

#: Verdicts of the numerical checks of targets, activations and losses, by their text: the
#: checks compile and evaluate the expression (milliseconds), and Problem.replace rebuilds often.
_CHECKED: dict[tuple[Any, ...], Any] = {}


def _cached(key: tuple[Any, ...], check: Callable[[], Any]) -> Any:
    """``check()``, remembered under ``key`` (at most 1024 entries)."""
    if key not in _CHECKED:
        if len(_CHECKED) >= 1024:
            _CHECKED.clear()
        _CHECKED[key] = check()
    return _CHECKED[key]


def _domain_problem(target: Target) -> str | None:
    """Why the label is not real and finite for ``z ~ N(0, I)`` (and ``ε``), or None (one line).

    The label is evaluated at 256 fixed Gaussian points: ``sqrt(z)``, ``log(z)``,
    ``z**0.5`` are NaN for half of them. Unrefused, such a label makes GD's gradient
    non-finite, which reads as a step size at fault.
    """
    pts = np.random.default_rng(2026).standard_normal((256, len(target.symbols)))
    with np.errstate(all="ignore"):
        y = target(pts[:, :-1], pts[:, -1])
    bad = np.nonzero(~np.isfinite(y))[0]
    if bad.size == 0:
        return None
    i = int(bad[0])
    names = target.variable_names[:3]
    where = ", ".join(f"{n} = {pts[i, j]:.3g}" for j, n in enumerate(names))
    if target.noisy:
        where += f", eps = {pts[i, -1]:.3g}"
    return (f"target={short_repr(target.expr)} is not real and finite for Gaussian latents: at {where} "
            f"it is {y[i]} ({bad.size} of 256 test points; a square root, logarithm or fractional power "
            "of a negative number, or a pole?); labels must be finite real numbers")


def _growth_problem(target: Target) -> str | None:
    """Why ``y`` grows too fast for a finite variance (``exp(c z²)``, ``c >= 1/4``), or None.

    ``log|h|`` is evaluated at ``t = 6, 8, 10`` along each latent axis (the first 50),
    the diagonal and the noise axis, both ways; its second difference estimates the
    coefficient ``c`` of ``t²``. ``E[exp(2c z²)]`` diverges for ``c >= 1/4``
    (``exp(z**2)``), and a label that overflows double precision at ``|z| = 10`` is
    refused too.
    """
    k = len(target.symbols) - 1
    free = target.sympy_expr.free_symbols
    used = [i for i in range(k) if target.symbols[i] in free][:50]  # the latents the label uses
    eye = np.eye(k + 1)
    dirs = [eye[i] for i in used]
    if len(used) > 1:
        dirs.append(eye[used].sum(axis=0) / math.sqrt(len(used)))
    if target.noisy:
        dirs.append(eye[k])
    if not dirs:  # a constant label
        return None
    t = np.array([6.0, 8.0, 10.0])
    pts = np.array([s * tt * d for d in dirs for s in (1.0, -1.0) for tt in t])
    typical = np.random.default_rng(2029).standard_normal((256, k + 1))
    with np.errstate(all="ignore"):
        y = target(pts[:, :-1], pts[:, -1])
        g = np.log(np.abs(y)).reshape(-1, 3)
        base = float(np.log(np.median(np.abs(target(typical[:, :-1], typical[:, -1])))))
    for row, (vals, yy) in enumerate(zip(g, y.reshape(-1, 3), strict=True)):
        d = dirs[row // 2]
        along = ("the noise" if target.noisy and d[-1] == 1 else "the diagonal" if np.count_nonzero(d) > 1
                 else target.variable_names[int(np.argmax(d))])
        if not np.all(np.isfinite(yy)):
            return (f"target={short_repr(target.expr)} overflows double precision at |{along}| = 10 (it is "
                    f"{yy[~np.isfinite(yy)][0]}): too steep for a label of Gaussian latents")
        if not np.all(np.isfinite(vals)):
            continue  # a zero of h at a test point: no growth to measure there
        c = (vals[2] - 2 * vals[1] + vals[0]) / 8.0
        # growing (not an oscillation near a zero of h), and far above the label's typical size
        grows = vals[0] < vals[1] < vals[2] and (not math.isfinite(base) or vals[2] - base >= 20.0)
        if c >= 0.245 and grows:
            return (f"target={short_repr(target.expr)} has no finite variance: along {along} it grows like "
                    f"exp({c:.3g}·t²), and E[exp(2c z²)] is infinite for c >= 1/4")
    return None


def label_resolution(target: Target) -> tuple[str, str, str, float] | None:
    """How well double precision resolves the label: ``(spread, center, miss, miss/spread)``, or None.

    The label is evaluated at 16 fixed Gaussian points in double precision and in
    50-digit mpmath arithmetic. ``spread`` is the range of the exact values,
    ``center`` their median and ``miss`` the largest error of the double-precision
    values (the ratio is taken in mpmath: both may be below the smallest double).
    ``miss`` comparable to ``spread`` means the doubles do not see the
    variation of ``y`` (``z**2 + 1e300`` and ``(1/2)**3000*z**2`` are constant in
    double precision). None when mpmath cannot evaluate the label or it is constant.

    Parameters
    ----------
    target : Target
        The label.

    Returns
    -------
    tuple or None
        ``spread``, ``center`` and ``miss`` as text (they may be below the smallest
        double: ``(1/2)**3000*z**2``), and ``miss/spread`` as a float.
    """
    syms = list(target.symbols)
    pts = np.random.default_rng(20261203).standard_normal((16, len(syms))) * 1.5
    with np.errstate(all="ignore"):
        y = target(pts[:, :-1], pts[:, -1])
    try:
        import mpmath

        exact_fn = sp.lambdify(syms, target.sympy_expr, modules="mpmath")
        # enough digits that 1e300 + z**2 keeps its z**2: 40 more than the largest decade of a
        # number in the expression
        decades = [abs(float(mpmath.log10(abs(mpmath.mpf(a))))) for a in target.sympy_expr.atoms(sp.Number)
                   if a != 0 and a.is_finite]
        with mpmath.workdps(40 + min(int(max(decades, default=0)), 1200)):
            exact = [mpmath.mpf(exact_fn(*map(mpmath.mpf, row.tolist()))) for row in pts]
            if not all(mpmath.isfinite(v) for v in exact) or not np.all(np.isfinite(y)):
                return None
            spread_mp = max(exact) - min(exact)
            if not spread_mp > 0:
                return None
            miss_mp = max(abs(mpmath.mpf(float(a)) - b) for a, b in zip(y, exact, strict=True))
            # the ratio in mpmath: spread and miss may both be below the smallest double
            ratio = float(miss_mp / spread_mp)
            spread, miss = mpmath.nstr(spread_mp, 3), mpmath.nstr(miss_mp, 3)
            center = mpmath.nstr(sorted(exact)[len(exact) // 2], 6)
    except Exception:  # noqa: BLE001 - a function mpmath lacks, a complex value: no verdict
        return None
    return spread, center, miss, ratio


def _pole_candidates(expr: sp.Expr, power: float = 1.0) -> list[tuple[sp.Expr, float]]:
    """``(base, order)`` for each ``base**(-order)`` (and ``tan``) that can make ``|y|`` unbounded.

    The tree is walked through sums, products, powers, ``Abs``, ``Max``, ``Min`` and
    ``tan``; bounded functions (``sin``, ``tanh``, ``erf``, …) and others (``exp``,
    ``log``) are not entered, so ``sin(1/z)`` is not a candidate.
    """
    if not expr.free_symbols:
        return []
    out: list[tuple[sp.Expr, float]] = []
    if isinstance(expr, sp.Pow) and expr.exp.is_number and expr.exp.is_real:
        e = float(expr.exp)
        if e < 0 and expr.base.free_symbols:
            base = expr.base
            while isinstance(base, sp.Abs):  # |u|**(-p): the zero of u, where u changes sign
                base = base.args[0]
            out.append((base, -e * power))
        return out + _pole_candidates(expr.base, power * abs(e))
    if isinstance(expr, sp.tan):
        return [(sp.cos(expr.args[0]), power)]
    if isinstance(expr, (sp.Add, sp.Mul, sp.Abs, sp.Max, sp.Min)):
        for arg in expr.args:
            out += _pole_candidates(arg, power)
    return out


def _find_pole(expr: sp.Expr, symbols: list[sp.Symbol], evaluate: Callable[[np.ndarray], np.ndarray],
               scale: float) -> tuple[str, float] | None:
    """``(base, order)`` of a pole of ``expr`` of order ``>= 1/2`` on the real points it is evaluated
    at, or None: for each candidate ``base**(-p)`` (:func:`_pole_candidates`) the base is evaluated at
    fixed Gaussian points (``scale`` times standard normals, one column per symbol); where it changes
    sign between two points its zero on the segment is found by bisection, and ``evaluate`` (the
    expression on an ``(n, len(symbols))`` array) is taken next to it: a non-finite value or
    ``|value| > 1e6 (1 + median |value|)`` confirms the pole (a removable one, as in
    ``(z**2 - 1)/(z - 1)``, stays finite)."""
    candidates = [(b, p) for b, p in _pole_candidates(expr) if p >= 0.5]
    if not candidates:
        return None
    rng = np.random.default_rng(30)
    pts = rng.standard_normal((4096, len(symbols))) * scale
    with np.errstate(all="ignore"):
        typical = 1.0 + float(np.nanmedian(np.abs(evaluate(pts))))
        for base, order in candidates:
            f = compile_expression(base, symbols)
            b = f(*pts.T)
            sign = np.sign(b)
            pos, neg = np.nonzero(sign > 0)[0], np.nonzero(sign < 0)[0]
            zero = np.nonzero(b == 0)[0]
            roots = [pts[i] for i in zero[:4]]
            for i, j in zip(pos[:8], neg[:8], strict=False):
                lo, hi = pts[i], pts[j]  # b(lo) > 0 > b(hi)
                for _ in range(80):
                    mid = (lo + hi) / 2
                    if f(*mid) > 0:
                        lo = mid
                    else:
                        hi = mid
                roots.append(lo)
            for r in roots:
                near = r + 1e-13 * (1 + np.abs(r))
                v = evaluate(near[None, :])
                if not np.all(np.isfinite(v)) or float(np.abs(v).max()) > 1e6 * typical:
                    return str(base), order
    return None


def _pole_problem(target: Target) -> str | None:
    """Why ``y`` has no finite variance because of a pole, or None (one line): a pole of order
    ``p >= 1/2`` (:func:`_find_pole`) on a set of positive density makes ``E[y²] = ∞``
    (``∫ |u|^(-2p) du`` diverges at 0)."""
    found = _find_pole(target.sympy_expr, list(target.symbols),
                       lambda pts: target(pts[:, :-1], pts[:, -1]), 1.5)
    if found is None:
        return None
    base, order = found
    return (f"target={short_repr(target.expr)} has no finite variance: it has a pole "
            f"where {short_repr(base, 40)} = 0, of order {order:g} >= 1/2, so "
            "E[y²] is infinite; the theory and the simulator need labels with a "
            "finite variance")


def _activation_pole_problem(network: Network) -> str | None:
    """Why σ or σ' has no finite variance under Gaussian pre-activations because of a pole, or None:
    the rule of :func:`_pole_problem` (the same for a label), on ``r``. GD's gradient carries
    ``σ'(V)`` and its output ``σ(V)``, with ``V`` Gaussian at a random start."""
    from dmftsolve.activations import R

    sym = [sp.Symbol(R.name, real=True)]
    for order, expr in enumerate((network.sympy_expr, sp.diff(network.sympy_expr, R))):
        expr = expr.subs(R, sym[0])
        found = _find_pole(expr, sym, lambda pts, o=order: network.sigma(pts[:, 0], o), 3.0)
        if found is not None:
            base, p = found
            what = ("it", "its derivative")[order]
            return (f"activation={short_repr(network.activation)} has no finite variance under Gaussian "
                    f"pre-activations: {what} has a pole where {short_repr(base, 40)} = 0, of order "
                    f"{p:g} >= 1/2, so E[σ{chr(39) * order}(V)²] is infinite; the theory and the simulator "
                    "need activations that are square-integrable, with their derivative, under a "
                    "Gaussian")
    return None


def _activation_domain_problem(network: Network) -> str | None:
    """Why σ, σ' or σ'' is not finite at 256 fixed real test points, or None."""
    r = np.random.default_rng(2027).standard_normal(256) * 3.0
    for order in (0, 1, 2):
        with np.errstate(all="ignore"):
            v = network.sigma(r, order)
        bad = np.nonzero(~np.isfinite(v))[0]
        if bad.size:
            what = ("it is", "its derivative is", "its second derivative is")[order]
            return (f"activation={short_repr(network.activation)} is not finite on the real line: at "
                    f"r = {r[bad[0]]:.3g} {what} {v[bad[0]]} ({bad.size} of 256 test points; a "
                    "square root, logarithm or fractional power of a negative number, or a pole?)")
    return None


def _loss_pole_problem(loss: Loss) -> str | None:
    """Why the loss or its derivative in ``f`` has no finite mean square over Gaussian ``(y, f)``
    because of a pole, or None: the rule of :func:`_pole_problem`, on ``(y, f)``."""
    from dmftsolve.losses import F, Y

    sym = [sp.Symbol(Y.name, real=True), sp.Symbol(F.name, real=True)]
    for order, expr in enumerate((loss.sympy_expr, sp.diff(loss.sympy_expr, F))):
        expr = expr.subs({Y: sym[0], F: sym[1]})
        found = _find_pole(expr, sym, lambda pts, o=order: loss(pts[:, 0], pts[:, 1], o), 2.0)
        if found is not None:
            base, p = found
            what = ("it", "its derivative in f")[order]
            return (f"loss={short_repr(loss.name)} has no finite mean square: {what} has a pole where "
                    f"{short_repr(base, 40)} = 0, of order {p:g} >= 1/2; the theory and the simulator "
                    "need a loss that is square-integrable, with its derivative, near every (y, f)")
    return None


def _loss_domain_problem(loss: Loss) -> str | None:
    """Why the loss or its first two f-derivatives is not finite at 256 test points, or None."""
    pts = np.random.default_rng(2028).standard_normal((2, 256)) * 2.0
    for order in (0, 1, 2):
        with np.errstate(all="ignore"):
            v = loss(pts[0], pts[1], order)
        bad = np.nonzero(~np.isfinite(v))[0]
        if bad.size:
            what = ("it is", "its derivative in f is", "its second derivative in f is")[order]
            i = bad[0]
            return (f"loss={short_repr(loss.name)} is not finite: at y = {pts[0, i]:.3g}, f = "
                    f"{pts[1, i]:.3g} {what} {v[i]} ({bad.size} of 256 test points; a square root, "
                    "logarithm or fractional power of a negative number, or a pole?)")
    return None


# --------------------------------------------------------------------------- the public rules
def target_problem(target: Target) -> str | None:
    """Why the label ``y = h(z, ε)`` is unfit for Gaussian latents, or None (one line).

    Three rules, in order, the first that applies giving the reason: the label
    is not real and finite at 256 fixed Gaussian points; it has a pole of order
    ``>= 1/2`` (``E[y²] = ∞``); it grows like ``exp(c z²)`` with ``c >= 1/4`` or
    overflows double precision at ``|z| = 10``. The verdict is remembered by
    ``(target.expr, target.k)``.

    Parameters
    ----------
    target : Target
        The parsed label.

    Returns
    -------
    str or None
        The reason, naming the target, or None if it is admissible.

    Examples
    --------
    >>> from dmftsolve import Target
    >>> from dmftsolve.admissibility import target_problem
    >>> Target("sqrt(z)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: target='sqrt(z)' is not real and finite for Gaussian latents: at z = ... it is nan ...
    """
    return _cached(("target", target.expr, target.k),
                   lambda: _domain_problem(target) or _pole_problem(target) or _growth_problem(target))


def activation_problem(network: Network) -> str | None:
    """Why the activation σ, σ' or σ'' is not finite at 256 fixed real points, or None (one line).

    The points are ``3·N(0, 1)`` draws with a fixed seed; ``sqrt(r)`` and
    ``log(r)`` fail there. The verdict is remembered by the activation's text.

    Parameters
    ----------
    network : Network
        The network whose activation is checked.

    Returns
    -------
    str or None
        The reason, naming the activation, or None if it is admissible.
    """
    return _cached(("activation", network.activation),
                   lambda: _activation_domain_problem(network) or _activation_pole_problem(network))


def loss_problem(loss: Loss) -> str | None:
    """Why the loss or its first two derivatives in ``f`` is not finite at 256 fixed points, or None.

    The points ``(y, f)`` are ``2·N(0, 1)`` draws with a fixed seed. The verdict
    is remembered by the loss's text.

    Parameters
    ----------
    loss : Loss
        The loss checked.

    Returns
    -------
    str or None
        The reason (one line, naming the loss), or None if it is admissible.
    """
    return _cached(("loss", loss.name), lambda: _loss_domain_problem(loss) or _loss_pole_problem(loss))


def resolution_problem(target: Target, max_ratio: float = 0.1) -> str | None:
    """Why double precision does not resolve the label's variation, or None (one line).

    GD sees the labels in double precision: when the largest double-precision
    error of the label at the test points of :func:`label_resolution` exceeds
    ``max_ratio`` times the label's spread there, GD would train on a constant.
    The measurement is remembered by ``(target.expr, target.k)``.

    Parameters
    ----------
    target : Target
        The label.
    max_ratio : float, optional
        Largest admissible ``miss/spread``; default 0.1.

    Returns
    -------
    str or None
        The reason, naming the target, or None if it is resolved (or mpmath
        cannot evaluate it: no verdict).

    Examples
    --------
    >>> from dmftsolve import Target
    >>> from dmftsolve.admissibility import resolution_problem
    >>> print(resolution_problem(Target("z**2 + 1e300")))  # doctest: +ELLIPSIS
    target='z**2 + 1e300' is too flat for double precision: the label varies by ... around 1.0e+300, ...
    >>> print(resolution_problem(Target("z**2 + 1")))
    None
    """
    res = _cached(("resolution", target.expr, target.k), lambda: label_resolution(target))
    if res is None or res[3] <= max_ratio:
        return None
    spread, center, miss, _ = res
    return (f"target={short_repr(target.expr)} is too flat for double precision: the label varies "
            f"by {spread} around {center}, which doubles miss by {miss}, so GD would "
            "train on a constant; remove the constant that dominates it or rescale it")
