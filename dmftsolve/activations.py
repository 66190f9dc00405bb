"""Named activation functions, as sympy expressions in the pre-activation ``r``.

Any other activation is given as an expression string in ``r``
(e.g. ``"r**3 - r"``); its derivatives are taken by sympy.
"""

from __future__ import annotations

import sympy as sp

#: The pre-activation ``r``, the variable of every activation expression.
R = sp.Symbol("r", real=True)

#: Activation name -> sympy expression in :data:`R`.
NAMED_ACTIVATIONS: dict[str, sp.Expr] = {
    "gelu": R * (1 + sp.erf(R / sp.sqrt(2))) / 2,
    "quad": R**2,
    "relu": sp.Max(R, 0),
    "tanh": sp.tanh(R),
    "erf": sp.erf(R),
    "linear": R,
}
