"""Parsing user expressions with sympy and compiling them to vectorised numpy.

This module is internal: :mod:`dmftsolve.problem` is the public face. Every
derivative the library uses is taken here symbolically by sympy and compiled
with :func:`sympy.lambdify`; nothing is differentiated by hand or numerically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import sympy as sp

# Names a user may use in an expression besides the declared variables.
_ALLOWED_FUNCTIONS: dict[str, object] = {
    name: getattr(sp, name)
    for name in (
        "exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "erf", "erfc",
        "Abs", "abs", "sign", "Max", "Min", "Heaviside", "atan", "asinh", "pi", "E",
    )
    if hasattr(sp, name)
}
_ALLOWED_FUNCTIONS["abs"] = sp.Abs
_ALLOWED_FUNCTIONS["max"] = sp.Max
_ALLOWED_FUNCTIONS["min"] = sp.Min
_ALLOWED_FUNCTIONS["relu"] = lambda u: sp.Max(u, 0)

# Modules for lambdify: scipy first so that erf and friends are vectorised.
_MODULES = [{"Heaviside": lambda x, h0=0.5: np.heaviside(x, 0.5)}, "scipy", "numpy"]


def parse_expression(text: str, variables: Sequence[str], *, parameter: str) -> sp.Expr:
    """Parse ``text`` as a sympy expression in ``variables``.

    Parameters
    ----------
    text : str
        The expression, in Python/sympy syntax (``"z**2"``, ``"abs(z)"``).
    variables : sequence of str
        Names of the symbols the expression may contain.
    parameter : str
        Name of the user-facing parameter, used in error messages.

    Raises
    ------
    ValueError
        If ``text`` is not a string, does not parse, or contains a symbol not in
        ``variables`` or a function the library does not know.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{parameter} must be a non-empty expression string, got {text!r}")
    local = dict(_ALLOWED_FUNCTIONS)
    symbols = {v: sp.Symbol(v, real=True) for v in variables}
    local.update(symbols)
    try:
        expr = sp.sympify(text, locals=local, convert_xor=False)
    except (sp.SympifyError, SyntaxError, TypeError, AttributeError) as exc:
        raise ValueError(f"{parameter}={text!r} does not parse as an expression: {exc}") from None
    if not isinstance(expr, sp.Expr):
        raise ValueError(f"{parameter}={text!r} is not a scalar expression")
    unknown = sorted(str(s) for s in expr.free_symbols if str(s) not in symbols)
    if unknown:
        raise ValueError(
            f"{parameter}={text!r} contains unknown symbol(s) {unknown}; "
            f"allowed: {sorted(symbols)}"
        )
    undefined = sorted(
        str(f.func) for f in expr.atoms(sp.Function) if isinstance(f.func, sp.core.function.UndefinedFunction)
    )
    if undefined:
        raise ValueError(f"{parameter}={text!r} calls unknown function(s) {undefined}")
    return expr


def _drop_distributions(expr: sp.Expr) -> sp.Expr:
    """Replace Dirac deltas (derivatives of kinks) by zero: derivatives hold almost everywhere."""
    return expr.replace(lambda e: isinstance(e, sp.DiracDelta), lambda e: sp.Integer(0))


def compile_expression(expr: sp.Expr, variables: Sequence[sp.Symbol]) -> Callable[..., np.ndarray]:
    """Compile ``expr`` to a numpy function of ``variables`` that broadcasts.

    The returned function always returns a float array of the broadcast shape
    of its arguments, also for expressions that do not depend on every variable.
    """
    expr = _drop_distributions(sp.sympify(expr))
    raw = sp.lambdify(list(variables), expr, modules=_MODULES)

    def compiled(*args: np.ndarray) -> np.ndarray:
        arrays = [np.asarray(a, dtype=float) for a in args]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        with np.errstate(invalid="ignore", over="ignore"):
            out = raw(*arrays)
        return np.broadcast_to(np.asarray(out, dtype=float), shape).copy()

    compiled.expr = expr  # type: ignore[attr-defined]
    return compiled


def derivatives(expr: sp.Expr, var: sp.Symbol, order: int) -> list[sp.Expr]:
    """Return ``[expr, expr', …, expr^(order)]`` in ``var``, simplified lightly."""
    out = [expr]
    for _ in range(order):
        out.append(sp.diff(out[-1], var))
    return [_drop_distributions(e) for e in out]
