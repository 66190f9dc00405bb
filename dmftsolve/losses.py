"""Named per-sample losses ``loss(y, f)``, as sympy expressions in ``y`` and ``f``.

Any other loss is given as an expression string in ``y`` and ``f``
(e.g. ``"log(1 + exp(-y*f))"``); its derivatives are taken by sympy.
"""

from __future__ import annotations

import sympy as sp

#: The label ``y``.
Y = sp.Symbol("y", real=True)
#: The network output ``f``.
F = sp.Symbol("f", real=True)

#: Loss name -> sympy expression in :data:`Y` and :data:`F`.
NAMED_LOSSES: dict[str, sp.Expr] = {
    "square": (Y - F) ** 2 / 2,
    "logistic": sp.log(1 + sp.exp(-Y * F)),
}
