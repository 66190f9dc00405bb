"""Parsing user expressions safely and compiling them to vectorised numpy.

This module is internal: :mod:`dmftsolve.problem` is the public face. Every
derivative the library uses is taken here symbolically by sympy and compiled
with :func:`sympy.lambdify`; nothing is differentiated by hand or numerically.

User text (a target, an activation, a loss) never reaches ``eval``,
:func:`sympy.sympify` or :func:`sympy.parsing.sympy_parser.parse_expr`. It is
first split into tokens by a strict tokenizer that accepts only numbers, the
declared variable names, the whitelisted functions and constants of
:data:`_FUNCTIONS` / :data:`_CONSTANTS`, the operators ``+ - * / **``,
parentheses, commas and blanks; a small recursive-descent parser then builds
the sympy expression directly from those tokens. Length, token count and
nesting depth are capped (:data:`MAX_EXPRESSION_LENGTH`,
:data:`MAX_EXPRESSION_TOKENS`, :data:`MAX_NESTING_DEPTH`) so that no input can
exhaust the stack or the memory; every rejection is a one-line ``ValueError``.
"""

from __future__ import annotations

import functools
import keyword
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

#: Longest expression text accepted, in characters.
MAX_EXPRESSION_LENGTH = 2000
#: Most tokens (numbers, names, operators, parentheses, commas) in one expression.
MAX_EXPRESSION_TOKENS = 500
#: Deepest nesting of parentheses, function calls, unary signs and exponents.
MAX_NESTING_DEPTH = 32
#: Most decimal digits an exact number built from literals (``10**100``) may have.
MAX_NUMBER_DIGITS = 1000
# Largest exact exponent of a numeric base (``1.5**10000``); sympy evaluates such powers.
_MAX_NUMERIC_EXPONENT = 10_000
#: Most nodes of an expression (or of a derivative of it) compiled to numpy.
MAX_COMPILED_NODES = 50_000
#: How many characters of the user's text an error message echoes.
_ECHO = 80


def _relu(u: sp.Expr) -> sp.Expr:
    return sp.Max(u, 0)


#: Function name -> (sympy callable, least and most number of arguments).
_FUNCTIONS: dict[str, tuple[Callable[..., sp.Expr], int, int | None]] = {
    **{name: (getattr(sp, name), 1, 1) for name in (
        "exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "erf", "erfc",
        "Abs", "sign", "atan", "asinh",
    )},
    "abs": (sp.Abs, 1, 1),
    "Heaviside": (sp.Heaviside, 1, 2),
    "Max": (sp.Max, 1, None),
    "Min": (sp.Min, 1, None),
    "max": (sp.Max, 1, None),
    "min": (sp.Min, 1, None),
    "relu": (_relu, 1, 1),
}
#: Constant name -> sympy constant.
_CONSTANTS: dict[str, sp.Expr] = {"pi": sp.pi, "E": sp.E}
#: Every name a user may use besides the declared variables (the whitelist).
_ALLOWED_FUNCTIONS: dict[str, object] = {
    **{name: f for name, (f, _, _) in _FUNCTIONS.items()}, **_CONSTANTS,
}

# Modules for lambdify: scipy first so that erf and friends are vectorised.
_MODULES = [{"Heaviside": lambda x, h0=0.5: np.heaviside(x, 0.5)}, "scipy", "numpy"]

# ----------------------------------------------------------------------------- tokenizer
_TOKEN = re.compile(
    r"(?P<blank>[ \t]+)"
    r"|(?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\*\*|[-+*/(),])",
    re.ASCII,
)
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.]", re.ASCII)
_HINTS: dict[str, str] = {
    "^": "use ** for powers",
    ".": "attribute access is not allowed",
    "'": "strings are not allowed",
    '"': "strings are not allowed",
    "[": "indexing and lists are not allowed",
    "]": "indexing and lists are not allowed",
    "{": "sets and dicts are not allowed",
    "}": "sets and dicts are not allowed",
    "=": "comparisons and assignments are not allowed",
    "<": "comparisons are not allowed",
    ">": "comparisons are not allowed",
    "!": "comparisons and factorials are not allowed",
    ";": "only one expression is allowed",
    ":": "only one expression is allowed",
    "\n": "line breaks are not allowed",
    "\r": "line breaks are not allowed",
    "\\": "backslashes are not allowed",
    "#": "comments are not allowed",
}


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", "name", "op" or "end"
    text: str
    column: int  # 1-based


def _echo(text: str, limit: int = _ECHO) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters: always one printable line."""
    if len(text) > limit:
        return repr(text[:limit]) + "…"
    return repr(text)


def _reject(parameter: str, text: str, problem: str, column: int | None = None) -> ValueError:
    where = "" if column is None else f" at column {column}"
    return ValueError(f"{parameter}: {problem}{where} of {_echo(text)}")


def _check_text(text: object, parameter: str) -> str:
    """Return ``text`` if it is a non-empty string of at most :data:`MAX_EXPRESSION_LENGTH` characters."""
    if not isinstance(text, str) or not text.strip():
        shown = _echo(text) if isinstance(text, str) else _echo(repr(text))
        raise ValueError(f"{parameter} must be a non-empty expression string, got {shown}")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ValueError(
            f"{parameter}: expression is {len(text)} characters long; at most "
            f"{MAX_EXPRESSION_LENGTH} are allowed"
        )
    return text


def _allowed_names(symbols: Sequence[str]) -> str:
    return (f"allowed symbols: {', '.join(symbols) or '(none)'}; "
            f"functions: {', '.join(_FUNCTIONS)}; constants: {', '.join(_CONSTANTS)}")


def _tokenize(text: object, parameter: str, symbols: Sequence[str]) -> list[_Token]:
    """Split ``text`` into whitelisted tokens, ending with an ``end`` token.

    Checks, left to right, the type, the length, the character set, the form
    of numbers, the names (against ``symbols``, :data:`_FUNCTIONS` and
    :data:`_CONSTANTS`) and the token count, so that the error names the
    first offending token.

    Raises
    ------
    ValueError
        One line naming ``parameter``, the offending character, number or
        name, and its column.
    """
    text = _check_text(text, parameter)
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            char = text[pos]
            if not char.isascii():
                hint = "only ASCII characters are allowed"
            else:
                hint = _HINTS.get(char, "not an operator of + - * / ** ( ) ,")
            raise _reject(parameter, text, f"unexpected character {char!r} ({hint})", pos + 1)
        kind = match.lastgroup
        assert kind is not None
        if kind == "number" and _NUMBER_TAIL.match(text, match.end()):
            end = match.end()
            while end < len(text) and _NUMBER_TAIL.match(text, end):
                end += 1
            raise _reject(parameter, text, f"malformed number {_echo(text[pos:end], 20)}", pos + 1)
        name = match.group()
        if kind == "name" and name not in symbols and name not in _ALLOWED_FUNCTIONS:
            called = text[match.end():].lstrip(" \t").startswith("(")
            what = "Python keyword" if keyword.iskeyword(name) else "function" if called else "symbol"
            raise ValueError(
                f"{parameter}: unknown {what} {_echo(name, 40)} at column {pos + 1} of "
                f"{_echo(text)}; {_allowed_names(symbols)}"
            )
        if kind != "blank":
            tokens.append(_Token(kind, name, pos + 1))
            if len(tokens) > MAX_EXPRESSION_TOKENS:
                raise _reject(
                    parameter, text,
                    f"expression has more than {MAX_EXPRESSION_TOKENS} tokens", pos + 1,
                )
        pos = match.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def expression_names(text: str, *, parameter: str) -> set[str]:
    """The ASCII identifiers in ``text``, after checking its type and length.

    Used to infer which variables an expression declares before it is parsed
    with :func:`parse_expression`; the names are not checked here.

    Parameters
    ----------
    text : str
        The expression.
    parameter : str
        Name of the user-facing parameter, used in error messages.

    Returns
    -------
    set of str
        Every identifier in ``text``.

    Raises
    ------
    ValueError
        If ``text`` is not a non-empty string of at most
        :data:`MAX_EXPRESSION_LENGTH` characters.
    """
    return set(_IDENTIFIER.findall(_check_text(text, parameter)))


# ----------------------------------------------------------------------------- parser
def _describe(tok: _Token) -> str:
    if tok.kind == "end":
        return "the end of the text"
    return f"{tok.kind} {_echo(tok.text, 20)}" if tok.kind != "op" else repr(tok.text)


def constant_problem(value: object) -> str | None:
    """Why a constant (symbol-free) sub-expression is unfit for a real-valued label, or None.

    ``zoo`` (``1/0``, ``log(0)``), ``oo``, ``nan`` and complex numbers
    (``sqrt(-1)``, ``log(-1)``, ``(-8)**(1/3)``) are unfit, and so is a finite
    real number beyond the range of double precision (it would become ``inf``
    when compiled). Expressions that still hold symbols are not judged here
    (``None``).

    Parameters
    ----------
    value : object
        A sympy object built by the parser.

    Returns
    -------
    str or None
        A phrase such as ``"is infinite or undefined (a division by zero or log(0)?)"``.
    """
    if not isinstance(value, sp.Expr):
        return None
    if not value.is_number:  # symbols left: only an infinite or undefined part is judged (r*(1/0))
        if value.has(sp.zoo, sp.oo, -sp.oo):
            return "is infinite (a division by zero or log(0)?)"
        if value.has(sp.nan):
            return "is undefined (nan)"
        return None
    if value.has(sp.zoo, sp.oo, -sp.oo):
        return "is infinite (a division by zero or log(0)?)"
    if value.has(sp.nan):
        return "is undefined (nan)"
    real = value.is_extended_real
    if real is None:  # sympy cannot decide: look at the number
        try:
            approx = complex(value.evalf(30))
        except (TypeError, ValueError, ArithmeticError):
            return "cannot be evaluated to a real number"
        real = approx.imag == 0 or abs(approx.imag) <= 1e-25 * max(1.0, abs(approx.real))
    if not real:
        return f"is not a real number (it is {_echo(str(value), 40)}); only real values are allowed"
    if value.is_finite is False:
        return "is infinite"
    try:
        big = abs(value) > _DOUBLE_MAX
    except TypeError:  # pragma: no cover - an undecidable comparison
        return None
    if big is sp.true or big is True:
        return "is larger than the largest double-precision number (about 1.8e308)"
    return None


#: Largest finite double, as an exact sympy number.
_DOUBLE_MAX = sp.Float(np.finfo(float).max, 30)


def _power_too_large(base: sp.Expr, exponent: sp.Expr) -> bool:
    """Whether sympy would evaluate ``base**exponent`` to an outsized number.

    Only numeric bases with an exact exponent are evaluated eagerly. The
    exponent may be at most ``_MAX_NUMERIC_EXPONENT`` in magnitude, and an upper
    bound on the digits of the exact result (the exponent times the summed
    digits of the rational numbers in ``base``) at most :data:`MAX_NUMBER_DIGITS`.
    """
    if not (base.is_number and isinstance(exponent, sp.Rational)) or exponent.p == 0:
        return False
    if abs(exponent.p) > _MAX_NUMERIC_EXPONENT * exponent.q:
        return True
    weight = sum(math.log10(max(abs(a.p), a.q, 2)) for a in base.atoms(sp.Rational))
    return abs(exponent.p) * weight > MAX_NUMBER_DIGITS * exponent.q


#: Left-associative binary operators of the grammar, by precedence level.
_ADDITIVE: dict[str, Callable[[sp.Expr, sp.Expr], sp.Expr]] = {"+": operator.add, "-": operator.sub}
_MULTIPLICATIVE: dict[str, Callable[[sp.Expr, sp.Expr], sp.Expr]] = {"*": operator.mul, "/": operator.truediv}


class _Parser:
    """Recursive descent over whitelisted tokens, building sympy objects directly.

    Grammar (Python's precedence and associativity)::

        expr   := term (("+" | "-") term)*
        term   := unary (("*" | "/") unary)*
        unary  := ("+" | "-") unary | power
        power  := atom ("**" unary)?
        atom   := NUMBER | NAME | NAME "(" expr ("," expr)* ")" | "(" expr ")"
    """

    def __init__(self, text: str, tokens: list[_Token], symbols: dict[str, sp.Symbol],
                 parameter: str) -> None:
        self.text, self.tokens, self.symbols, self.parameter = text, tokens, symbols, parameter
        self.i = 0

    # -------------------------------------------------------------- helpers
    def _error(self, problem: str, tok: _Token) -> ValueError:
        return _reject(self.parameter, self.text, problem, tok.column)

    def _peek(self) -> _Token:
        return self.tokens[self.i]

    def _next(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def _at(self, *ops: str) -> bool:
        tok = self._peek()
        return tok.kind == "op" and tok.text in ops

    def _expect(self, op: str) -> None:
        tok = self._next()
        if tok.kind != "op" or tok.text != op:
            raise self._error(f"does not parse: expected {op!r} but found {_describe(tok)}", tok)

    def _apply(self, fn: Callable[..., sp.Expr], args: Sequence[sp.Expr], tok: _Token) -> sp.Expr:
        try:
            out = fn(*args)
        except (TypeError, ValueError, ArithmeticError, AttributeError, NotImplementedError,
                RecursionError) as exc:
            reason = str(exc).splitlines()[0][:_ECHO] if str(exc) else type(exc).__name__
            raise self._error(f"cannot evaluate {_describe(tok)} ({reason})", tok) from None
        reason = constant_problem(out)
        if reason is not None:
            what = f"{tok.text}(…)" if tok.kind == "name" else f"the value of {tok.text!r}"
            raise self._error(f"{what} {reason}", tok)
        return out

    # -------------------------------------------------------------- grammar
    def parse(self) -> sp.Expr:
        expr = self._expr(0)
        tok = self._peek()
        if tok.kind != "end":
            raise self._error(f"does not parse: unexpected {_describe(tok)}", tok)
        return expr

    def _left_assoc(self, depth: int, operand: Callable[[int], sp.Expr],
                    ops: dict[str, Callable[[sp.Expr, sp.Expr], sp.Expr]]) -> sp.Expr:
        """``operand (op operand)*`` for the left-associative binary operators ``ops``."""
        left = operand(depth)
        while self._at(*ops):
            tok = self._next()
            right = operand(depth)
            left = self._apply(ops[tok.text], (left, right), tok)
        return left

    def _expr(self, depth: int) -> sp.Expr:
        return self._left_assoc(depth, self._term, _ADDITIVE)

    def _term(self, depth: int) -> sp.Expr:
        return self._left_assoc(depth, self._unary, _MULTIPLICATIVE)

    def _unary(self, depth: int) -> sp.Expr:
        if depth > MAX_NESTING_DEPTH:
            raise self._error(
                f"expression is nested deeper than {MAX_NESTING_DEPTH} levels", self._peek()
            )
        if self._at("+", "-"):
            tok = self._next()
            operand = self._unary(depth + 1)
            return operand if tok.text == "+" else self._apply(lambda a: -a, (operand,), tok)
        return self._power(depth)

    def _power(self, depth: int) -> sp.Expr:
        base = self._atom(depth)
        if not self._at("**"):
            return base
        tok = self._next()
        exponent = self._unary(depth + 1)
        if _power_too_large(base, exponent):
            raise self._error(
                f"number too large: this power of a number would exceed {MAX_NUMBER_DIGITS} "
                f"digits or an exponent of {_MAX_NUMERIC_EXPONENT}", tok,
            )
        return self._apply(lambda a, b: a**b, (base, exponent), tok)

    def _atom(self, depth: int) -> sp.Expr:
        tok = self._next()
        if tok.kind == "number":
            if "." in tok.text or "e" in tok.text or "E" in tok.text:
                value = float(tok.text)  # only to check the range: fast for any exponent
                mantissa = re.split("[eE]", tok.text)[0]
                if math.isinf(value) or (value == 0 and mantissa.strip("0.")):
                    raise self._error(
                        f"number {_echo(tok.text, 20)} is outside the range of double precision", tok
                    )
                return sp.Float(tok.text)
            if len(tok.text.lstrip("0")) > MAX_NUMBER_DIGITS:
                raise self._error(f"number too large: more than {MAX_NUMBER_DIGITS} digits", tok)
            return sp.Integer(int(tok.text))
        if tok.kind == "name":
            return self._name(tok, depth)
        if tok.kind == "op" and tok.text == "(":
            inner = self._expr(depth + 1)
            self._expect(")")
            return inner
        raise self._error(
            f"does not parse: expected a number, a name or '(' but found {_describe(tok)}", tok
        )

    def _name(self, tok: _Token, depth: int) -> sp.Expr:
        name = tok.text
        called = self._at("(")
        if name in self.symbols or name in _CONSTANTS:
            if called:
                raise self._error(f"{name!r} is not a function", self._peek())
            return self.symbols[name] if name in self.symbols else _CONSTANTS[name]
        if name in _FUNCTIONS:
            if not called:
                raise self._error(f"function {name!r} must be called, as in {name}(...)", tok)
            return self._call(tok, depth)
        # unreachable: the tokenizer rejects every other name
        raise self._error(f"unknown name {_echo(name, 40)}", tok)

    def _call(self, tok: _Token, depth: int) -> sp.Expr:
        fn, least, most = _FUNCTIONS[tok.text]
        self._expect("(")
        args: list[sp.Expr] = []
        if not self._at(")"):
            args.append(self._expr(depth + 1))
            while self._at(","):
                self._next()
                args.append(self._expr(depth + 1))
        self._expect(")")
        if len(args) < least or (most is not None and len(args) > most):
            count = str(least) if most == least else f"{least} or more" if most is None \
                else f"{least} to {most}"
            raise self._error(
                f"{tok.text}() takes {count} argument(s), got {len(args)}", tok
            )
        return self._apply(fn, args, tok)


def parse_expression(text: str, variables: Sequence[str], *, parameter: str) -> sp.Expr:
    """Parse ``text`` as a sympy expression in ``variables``, without evaluating any Python.

    Parameters
    ----------
    text : str
        The expression, in Python/sympy syntax (``"z**2"``, ``"abs(z)"``,
        ``"Min(z**2, 3)"``): numbers, the names in ``variables``, the
        functions ``exp log sqrt sin cos tan sinh cosh tanh erf erfc Abs abs
        sign Max Min max min Heaviside atan asinh relu``, the constants ``pi``
        and ``E``, the operators ``+ - * / **``, parentheses, commas and
        blanks. Integer literals are exact (``1/2`` is ``Rational(1, 2)``),
        literals with a point or an exponent are floats, as with
        :func:`sympy.sympify`.
    variables : sequence of str
        Names of the symbols the expression may contain; each becomes a real
        :class:`sympy.Symbol`.
    parameter : str
        Name of the user-facing parameter, used in error messages.

    Returns
    -------
    sympy.Expr
        The expression; its free symbols are among ``variables``.

    Raises
    ------
    ValueError
        With a one-line message naming ``parameter``, the offending token and
        its column, if ``text`` is not a non-empty string, is longer than
        :data:`MAX_EXPRESSION_LENGTH`, has more than :data:`MAX_EXPRESSION_TOKENS`
        tokens or nests deeper than :data:`MAX_NESTING_DEPTH`, holds any
        character, name or construct outside the whitelist, or does not parse.
    """
    tokens = _tokenize(text, parameter, list(variables))
    symbols = {v: sp.Symbol(v, real=True) for v in variables}
    expr = _Parser(text, tokens, symbols, parameter).parse()
    if not isinstance(expr, sp.Expr):
        raise ValueError(f"{parameter}: {_echo(text)} is not a scalar expression")
    reason = constant_problem(expr)
    if reason is not None:  # a lone number ("1e999" is refused by the tokenizer)
        raise ValueError(f"{parameter}: the value of {_echo(text)} {reason}")
    if expr.is_extended_real is False:
        raise ValueError(
            f"{parameter}: {_echo(text)} is not real-valued for real arguments "
            "(e.g. the square root or logarithm of a negative quantity)"
        )
    max_bits = math.ceil(MAX_NUMBER_DIGITS / math.log10(2))
    if any(max(abs(n.p), n.q).bit_length() > max_bits for n in expr.atoms(sp.Rational)):
        raise ValueError(
            f"{parameter}: {_echo(text)} holds an exact number with more than "
            f"{MAX_NUMBER_DIGITS} digits"
        )
    return expr


def _drop_distributions(expr: sp.Expr) -> sp.Expr:
    """Replace Dirac deltas (derivatives of kinks) by zero: derivatives hold almost everywhere."""
    return expr.replace(lambda e: isinstance(e, sp.DiracDelta), lambda e: sp.Integer(0))


def _as_expr(expr: object) -> sp.Expr:
    """``expr`` as a sympy object; plain numbers are converted, text is refused."""
    if isinstance(expr, sp.Basic):
        return expr  # type: ignore[return-value]
    if isinstance(expr, (bool, np.bool_)):
        raise TypeError(f"expected a sympy expression, got {expr!r}")
    if isinstance(expr, (int, np.integer)):
        return sp.Integer(int(expr))
    if isinstance(expr, (float, np.floating)):
        return sp.Float(float(expr))
    raise TypeError(
        f"expected a sympy expression, got {type(expr).__name__}; "
        "parse user text with parse_expression first"
    )


def _evaluate(raw: Callable[..., Any], args: Sequence[Any]
              ) -> tuple[list[np.ndarray], tuple[int, ...], Any]:
    """``raw`` (a lambdified function) at ``args`` as float arrays: ``(arrays, broadcast shape,
    output)``. Non-finite values are the callers' to judge (they check them); no warnings here."""
    arrays = [np.asarray(a, dtype=float) for a in args]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return arrays, shape, raw(*arrays)


def _real_output(expr: Any, out: Any, shape: tuple[int, ...], avoid: Sequence[np.ndarray]) -> np.ndarray:
    """``out`` as a float array of ``shape`` that shares no memory with ``avoid`` (a fresh copy
    when ``avoid`` is empty); ``ValueError`` if ``expr`` took complex values."""
    if np.iscomplexobj(out):
        raise ValueError(f"expression {_echo(str(expr))} takes complex values; "
                         "only real-valued expressions are allowed")
    o = np.asarray(out, dtype=float)
    if not avoid or o.shape != shape or any(np.may_share_memory(o, a) for a in avoid):
        o = np.broadcast_to(o, shape).copy()
    return o


@functools.lru_cache(maxsize=256)
def _lambdify(variables: tuple[sp.Symbol, ...], exprs: sp.Expr | tuple[sp.Expr, ...],
              cse: bool) -> Callable[..., Any]:
    """``sympy.lambdify`` of ``exprs``, cached: a problem rebuilt with other settings (each
    draw of ``transition`` is one) compiles the same activation and loss again, 6–7 ms a time."""
    return sp.lambdify(list(variables), list(exprs) if isinstance(exprs, tuple) else exprs,
                       modules=_MODULES, cse=cse)


def compile_expression(expr: sp.Expr, variables: Sequence[sp.Symbol]) -> Callable[..., np.ndarray]:
    """Compile ``expr`` to a numpy function of ``variables`` that broadcasts.

    Parameters
    ----------
    expr : sympy.Expr
        A sympy expression (from :func:`parse_expression` or built in code);
        plain ints and floats are accepted, strings are not.
    variables : sequence of sympy.Symbol
        The arguments of the compiled function, in order.

    Returns
    -------
    callable
        ``f(*arrays)``, always returning a float array of the broadcast shape
        of its arguments, also for expressions that do not depend on every
        variable. ``f.expr`` is the compiled expression.
    """
    expr = _drop_distributions(_as_expr(expr))
    try:
        raw = _lambdify(tuple(variables), expr, False)
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise ValueError(f"expression {_echo(str(expr))} is too large to compile "
                         f"({type(exc).__name__}); use a shorter expression") from None

    def compiled(*args: np.ndarray) -> np.ndarray:
        _, shape, out = _evaluate(raw, args)
        return _real_output(expr, out, shape, ())

    compiled.expr = expr  # type: ignore[attr-defined]
    return compiled


def compile_expressions(exprs: Sequence[sp.Expr], variables: Sequence[sp.Symbol]
                        ) -> Callable[..., tuple[np.ndarray, ...]]:
    """Compile several expressions of the same ``variables`` into one numpy function.

    The expressions share their common subexpressions (``sympy.lambdify(..., cse=True)``):
    the GeLU ``σ`` and ``σ'`` evaluate ``erf`` once instead of twice. Each output is what
    :func:`compile_expression` of that expression returns (a float array of the broadcast
    shape, never a view of an argument); complex values are refused the same way.

    Parameters
    ----------
    exprs : sequence of sympy.Expr
        The expressions, in the order of the outputs.
    variables : sequence of sympy.Symbol
        The arguments of the compiled function, in order.

    Returns
    -------
    callable
        ``f(*arrays)`` returning a tuple of ``len(exprs)`` arrays; ``f.exprs`` holds the
        compiled expressions.

    Examples
    --------
    >>> import numpy as np, sympy as sp
    >>> r = sp.Symbol("r")
    >>> f = compile_expressions([r**2, 2*r], [r])
    >>> [a.tolist() for a in f(np.array([1.0, 3.0]))]
    [[1.0, 9.0], [2.0, 6.0]]
    """
    exprs = [_drop_distributions(_as_expr(e)) for e in exprs]
    try:
        raw = _lambdify(tuple(variables), tuple(exprs), True)
    except (RecursionError, MemoryError, SyntaxError) as exc:
        raise ValueError(f"expressions {_echo(str(exprs))} are too large to compile "
                         f"({type(exc).__name__}); use shorter expressions") from None

    def compiled(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        arrays, shape, outs = _evaluate(raw, args)
        result: list[np.ndarray] = []
        for e, o in zip(exprs, outs, strict=True):
            result.append(_real_output(e, o, shape, (*arrays, *result)))
        return tuple(result)

    compiled.exprs = exprs  # type: ignore[attr-defined]
    return compiled


def expression_size(expr: sp.Expr, limit: int | None = None) -> int:
    """Number of nodes of ``expr``'s tree (counting stops just past ``limit``)."""
    n = 0
    for _ in sp.preorder_traversal(expr):
        n += 1
        if limit is not None and n > limit:
            break
    return n


def derivatives(expr: sp.Expr, var: sp.Symbol, order: int, *,
                parameter: str = "expression") -> list[sp.Expr]:
    """Return ``[expr, expr', …, expr^(order)]`` in ``var``, simplified lightly.

    Raises
    ------
    ValueError
        Naming ``parameter``, if a derivative has more than
        :data:`MAX_COMPILED_NODES` nodes: derivatives of deep compositions and long
        products swell (the third derivative of a product of 59 factors could not
        even be compiled: ``RecursionError``), and would take minutes to compile.
    """
    out = [expr]
    for i in range(order):
        out.append(sp.diff(out[-1], var))
        if expression_size(out[-1], MAX_COMPILED_NODES) > MAX_COMPILED_NODES:
            raise ValueError(
                f"{parameter}: its derivative of order {i + 1} has more than {MAX_COMPILED_NODES} "
                "operations, too large to compile; use a shorter expression (fewer nested functions "
                "or factors)")
    return [_drop_distributions(e) for e in out]
