"""Options shared by every command: the problem description and output format."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from dmftsolve.problem import Problem
from dmftsolve.results import jsonable


def _numbers(text: str, cast: type, kind: str) -> list:
    try:
        return [cast(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated {kind}, got {text!r}") from None


def _floats(text: str) -> list[float]:
    return _numbers(text, float, "numbers")


def _ints(text: str) -> list[int]:
    return _numbers(text, int, "integers")


def _matrix(text: str) -> list[list[float]]:
    """``"0.5,0;0,0.5"`` -> [[0.5, 0], [0, 0.5]] (rows separated by ';')."""
    return [_floats(row) for row in text.split(";")]


def add_problem_arguments(parser: argparse.ArgumentParser, **defaults: Any) -> None:
    """Add the options that build a :class:`~dmftsolve.problem.Problem`.

    ``defaults`` overrides the per-command default of any option (by its
    :meth:`Problem.build` keyword).
    """
    d = {"target": "z**2", "activation": "gelu", "m": 1, "loss": "square", "eta": 0.1,
         "lam": 0.0, "steps": 100, "q0": 1.0, **defaults}
    g = parser.add_argument_group("problem (target, network, loss, training)")
    g.add_argument("--target", default=d["target"],
                   help="link y = h(z, eps) as a sympy expression in z (k=1) or z1..zk, with eps "
                        "standard Gaussian noise, e.g. 'z**2', 'abs(z)', 'z1*z2 + 0.5*eps' "
                        "(default: %(default)s)")
    g.add_argument("--k", type=int, default=None,
                   help="latent dimension if larger than the largest index the target uses")
    g.add_argument("--activation", default=d["activation"],
                   help="gelu, quad (r**2), relu, tanh, erf, linear, or a sympy expression in r "
                        "(default: %(default)s)")
    g.add_argument("--m", type=int, default=d["m"], help="hidden units (default: %(default)s)")
    g.add_argument("--a", type=_floats, default=None,
                   help="second-layer weights, comma-separated (default: all ones)")
    g.add_argument("--loss", default=d["loss"],
                   help="square ((y-f)**2/2), logistic, or a sympy expression in y and f "
                        "(default: %(default)s)")
    g.add_argument("--eta", type=float, default=d["eta"], help="GD step size (default: %(default)s)")
    g.add_argument("--lam", type=float, default=d["lam"], help="ridge penalty λ (default: %(default)s)")
    g.add_argument("--steps", type=int, default=d["steps"], help="GD steps T (default: %(default)s)")
    g.add_argument("--q0", type=float, default=d["q0"],
                   help="random init scale: W0 columns ~ N(0, q0/d I) (default: %(default)s)")
    g.add_argument("--M0", type=_matrix, default=None,
                   help="warm start overlaps Θ*ᵀW0 (k×m), rows separated by ';', e.g. '0.5'")
    g.add_argument("--Q0", type=_matrix, default=None,
                   help="warm start Gram of the part of W0 orthogonal to Θ* (m×m); default q0·I")
    g.add_argument("--hold-zero", type=_ints, default=[],
                   help="0-based target directions whose overlap is held at zero (restricted GD)")
    g.add_argument("--bias", action="store_true",
                   help="train a per-unit bias b (f = Σ_j a_j σ(w_jᵀx + b_j), b0 = 0, no ridge on b)")


def problem_from_args(args: argparse.Namespace) -> Problem:
    """The :class:`~dmftsolve.problem.Problem` described by the options of :func:`add_problem_arguments`."""
    return Problem.build(
        target=args.target, activation=args.activation, m=args.m, a=args.a, loss=args.loss,
        eta=args.eta, lam=args.lam, steps=args.steps, q0=args.q0, M0=args.M0, Q0=args.Q0,
        hold_zero=args.hold_zero, k=args.k, bias=bool(getattr(args, "bias", False)),
    )


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object on stdout instead of tables")


def emit(args: argparse.Namespace, payload: dict[str, Any], table: Callable[[], str]) -> None:
    """Print ``payload`` as JSON (``--json``) or the human-readable ``table()``."""
    if getattr(args, "json", False):
        json.dump(jsonable(payload), sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(table().rstrip() + "\n")


def format_table(headers: list[str], rows: list[list[Any]], floatfmt: str = ".4g") -> str:
    """A plain aligned text table."""
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return format(v, floatfmt)
        return "" if v is None else str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)
