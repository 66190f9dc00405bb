"""User expressions never reach Python: the whitelist parser of ``dmftsolve._symbolic``.

Targets, activations and losses arrive as text (``Problem.build``,
``Problem.from_dict``, the CLI). Every payload below must be refused with a
one-line ``ValueError`` and must never run: a canary file in a temporary
working directory must never appear.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dmftsolve import Problem, Target
from dmftsolve._symbolic import (
    MAX_EXPRESSION_LENGTH,
    MAX_EXPRESSION_TOKENS,
    MAX_NESTING_DEPTH,
    compile_expression,
    parse_expression,
)
from dmftsolve.cli import main

CANARY = "CANARY"

PAYLOADS: list[str] = [
    f"__import__('os').system('touch {CANARY}')",
    f"z + 0*__import__('os').system('touch {CANARY}')",
    "().__class__.__bases__[0].__subclasses__()",
    f'exec("open(\'{CANARY}\', \'w\')")',
    "eval('1')",
    "lambda: 1",
    "z.__class__",
    "open('/etc/passwd')",
    "[z for z in ()]",
    '"z"',
    "z; import os",
    "getattr(z, 'x')",
    "Symbol('a')",
    "sympify('1')",
    "Function('f')(z)",
    "z**2 if 1 else 0",
    "z == 1",
    "z^2",
    "z" + "+z" * 1000,  # 2001 characters
    "+".join(["z"] * 5000),
    "(" * 500 + "z" + ")" * 500,
    "-" * 200 + "z",
    "exp(" * 200 + "z" + ")" * 200,
    "\u0455in(z)",  # Cyrillic s
    "\uff5a**2",  # fullwidth z
    "z\x00",
    "z\n+1",
    "z\r",
    "z\u2028",
    "z @ z",
    "z // 2",
    "z % 2",
    "{z: 1}",
    "z[0]",
    "__builtins__",
    "__import__",
    "z.real",
    "1 .real",
    "1j*z",
    "0x10*z",
    "print(z)",
    "S('1')",
    "I*z",
    "oo",
    "Integer(1)",
    "Float('nan')",
    "Rational(1, 2)",
    "Piecewise((z, z > 0))",
    "z\\\n",
    "`z`",
    "z # comment",
    "9**9**9",
    "1e999",
]


def _one_line(message: str) -> None:
    assert message and "\n" not in message and "\r" not in message
    assert len(message.splitlines()) == 1
    assert "Traceback" not in message


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Work in an empty directory; the returned path must never be created."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / CANARY
    yield path
    assert not path.exists(), "a payload ran"


def _target_payload(payload: str) -> str:
    return payload


def _activation_payload(payload: str) -> str:
    return payload.replace("z", "r")


def _loss_payload(payload: str) -> str:
    return payload.replace("z", "f")


# ----------------------------------------------------------------------------- payloads


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize(
    "keyword", ["target", "activation", "loss"],
)
def test_payload_is_refused_by_build(payload: str, keyword: str, canary: Path) -> None:
    text = {"target": _target_payload, "activation": _activation_payload,
            "loss": _loss_payload}[keyword](payload)
    with pytest.raises(ValueError) as info:
        Problem.build(**{keyword: text})
    message = str(info.value)
    _one_line(message)
    assert keyword in message


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_is_refused_by_from_dict(payload: str, canary: Path) -> None:
    data = Problem.build().to_dict()
    for keyword, text in (("target", payload), ("activation", _activation_payload(payload)),
                          ("loss", _loss_payload(payload))):
        with pytest.raises(ValueError) as info:
            Problem.from_dict({**data, keyword: text})
        _one_line(str(info.value))
    with pytest.raises(ValueError):
        Target(payload)


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize(
    "argv",
    [
        ["alg-threshold", "--target"],
        ["dmft", "--delta", "1", "--steps", "1", "--target"],
        ["dmft", "--delta", "1", "--steps", "1", "--activation"],
        ["dmft", "--delta", "1", "--steps", "1", "--loss"],
    ],
    ids=["alg-threshold-target", "dmft-target", "dmft-activation", "dmft-loss"],
)
def test_payload_is_refused_by_cli(payload: str, argv: list[str], canary: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    text = {"--target": payload, "--activation": _activation_payload(payload),
            "--loss": _loss_payload(payload)}[argv[-1]]
    # "=" keeps argparse from reading a payload that starts with "-" as an option
    assert main([*argv[:-1], f"{argv[-1]}={text}"]) == 2
    err = capsys.readouterr().err
    assert err.endswith("\n")
    _one_line(err[:-1])
    assert err.startswith(f"dmftsolve {argv[0]}: error: ")


def test_original_exploit_does_not_run(canary: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line of issue #8."""
    payload = f"z**2 + 0*__import__('os').system('touch {CANARY}')"
    assert main(["alg-threshold", "--target", payload]) == 2
    err = capsys.readouterr().err
    assert "unknown function '__import__' at column 10" in err


# ----------------------------------------------------------------------------- messages


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("z**2 + __import__('os')", "target: unknown function '__import__' at column 8"),
        ("z^2", "unexpected character '^' (use ** for powers) at column 2"),
        ("z.real", "unexpected character '.' (attribute access is not allowed) at column 2"),
        ("z == 1", "unexpected character '=' (comparisons and assignments are not allowed)"),
        ("lambda: z", "unknown Python keyword 'lambda' at column 1"),
        ("z + w", "unknown symbol 'w' at column 5 of 'z + w'; allowed symbols: z, eps; functions: exp,"),
        ("\u0455in(z)", "unexpected character '\u0455' (only ASCII characters are allowed) at column 1"),
        ("z\x00", r"unexpected character '\x00'"),
        ("2z", "malformed number '2z' at column 1"),
        ("1j*z", "malformed number '1j' at column 1"),
        ("z**", "does not parse: expected a number, a name or '(' but found the end of the text"),
        ("(z", "does not parse: expected ')' but found the end of the text at column 3"),
        ("z)", "does not parse: unexpected ')' at column 2"),
        ("exp", "function 'exp' must be called"),
        ("z(1)", "'z' is not a function at column 2"),
        ("exp(z, 1)", "exp() takes 1 argument(s), got 2"),
        ("Min()", "Min() takes 1 or more argument(s), got 0"),
        ("z" + "+z" * 1000, f"expression is 2001 characters long; at most {MAX_EXPRESSION_LENGTH}"),
        ("+".join(["z"] * 400), f"expression has more than {MAX_EXPRESSION_TOKENS} tokens"),
        ("(" * 40 + "z" + ")" * 40, f"nested deeper than {MAX_NESTING_DEPTH} levels"),
        ("9**9**9", "number too large"),
        ("1e999*z", "number '1e999' is outside the range of double precision"),
        ("z" + "1" * 30, "latent index"),
    ],
)
def test_error_names_parameter_token_and_column(text: str, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        Problem.build(target=text)
    message = str(info.value)
    _one_line(message)
    assert needle in message
    assert message.startswith("target")


def test_error_echo_is_capped() -> None:
    text = "z" + "+z" * 200 + "+w"
    with pytest.raises(ValueError) as info:
        parse_expression(text, ["z"], parameter="target")
    message = str(info.value)
    assert "unknown symbol 'w' at column 403" in message
    assert "…" in message and text not in message and len(message) < 400


def test_each_cap_admits_its_limit_and_refuses_one_more() -> None:
    """Length, tokens and nesting: an expression exactly at a cap parses (to the expression it
    spells), one character, token or level more is refused with the cap named; a truncated
    series of 40 terms with six-digit coefficients (9 tokens a term) is within every cap."""
    z = sp.Symbol("z", real=True)

    def refused(text: str) -> str:
        with pytest.raises(ValueError) as info:
            parse_expression(text, ["z"], parameter="t")
        return str(info.value)

    long = "z" + " " * (MAX_EXPRESSION_LENGTH - 1)
    assert parse_expression(long, ["z"], parameter="t") == z
    assert f"at most {MAX_EXPRESSION_LENGTH} are allowed" in refused(long + " ")
    n = MAX_EXPRESSION_TOKENS // 2  # '-z+z+…+z' with n z's: 2n tokens
    many = "-" + "+".join(["z"] * n)
    assert parse_expression(many, ["z"], parameter="t") == (n - 2) * z
    assert f"more than {MAX_EXPRESSION_TOKENS} tokens" in refused(many + "+z")
    for depth in (MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1):
        text = "(" * depth + "z" + ")" * depth
        if depth == MAX_NESTING_DEPTH:
            assert parse_expression(text, ["z"], parameter="t") == z
        else:
            assert f"nested deeper than {MAX_NESTING_DEPTH} levels" in refused(text)
    series = " + ".join(f"{1 / i:.6f}*sin({i}*z)" for i in range(1, 41))
    assert len(parse_expression(series, ["z"], parameter="t").args) == 40


def test_compile_expression_refuses_text() -> None:
    with pytest.raises(TypeError, match="parse_expression"):
        compile_expression("z**2", [sp.Symbol("z", real=True)])  # type: ignore[arg-type]
    assert compile_expression(2, [sp.Symbol("z", real=True)])([1.0, 2.0]).tolist() == [2.0, 2.0]


# ----------------------------------------------------------------------------- valid input
Z, EPS, R, Y, F = (sp.Symbol(n, real=True) for n in ("z", "eps", "r", "y", "f"))
Z1, Z2 = sp.Symbol("z1", real=True), sp.Symbol("z2", real=True)
_TRUSTED = {"z": Z, "eps": EPS, "r": R, "y": Y, "f": F, "z1": Z1, "z2": Z2,
            "relu": lambda u: sp.Max(u, 0), "abs": sp.Abs, "max": sp.Max, "min": sp.Min}


@pytest.mark.parametrize(
    ("text", "variables"),
    [
        ("z**2", ["z", "eps"]),
        ("abs(z)", ["z", "eps"]),
        ("Min(z**2, 3)", ["z", "eps"]),
        ("z**2 + 0.5*eps", ["z", "eps"]),
        ("z**2 - 1", ["z", "eps"]),
        ("z**2 + z**3 - 3*z", ["z", "eps"]),
        ("1/2*z + z/3", ["z", "eps"]),
        ("1e-3*z + 2.5E+2 + .5 + 5.", ["z", "eps"]),
        ("-z**2", ["z", "eps"]),
        ("z**-2 + 2**3**2 - -z", ["z", "eps"]),
        ("sign(z1*z2)", ["z1", "z2", "eps"]),
        ("z1*z2 + 0.3*eps", ["z1", "z2", "eps"]),
        ("(z1 + z2) + (z1 - z2)**2", ["z1", "z2", "eps"]),
        ("relu(r)", ["r"]),
        ("r**3 - r", ["r"]),
        ("tanh(r) + erf(r/sqrt(2)) + erfc(r) + atan(r) + asinh(r)", ["r"]),
        ("exp(-r**2/2)*sin(r)*cos(r)*tan(r)*sinh(r)*cosh(r)", ["r"]),
        ("Heaviside(r) + Heaviside(r, 1) + Abs(r) + max(r, 0) + min(r, 1, 2)", ["r"]),
        ("Max(r, 0.1*r)", ["r"]),
        ("pi*r + E", ["r"]),
        ("log(1 + exp(-y*f))", ["y", "f"]),
        ("(y - f)**2/2", ["y", "f"]),
        ("  z  *\t2  ", ["z", "eps"]),
    ],
)
def test_valid_expressions_match_sympify(text: str, variables: list[str]) -> None:
    got = parse_expression(text, variables, parameter="x")
    expected = sp.sympify(text.strip(), locals=_TRUSTED)  # trusted literal: test only
    assert got == expected
    assert sp.srepr(got) == sp.srepr(expected)
    assert got.free_symbols <= {sp.Symbol(v, real=True) for v in variables}


def test_rationals_stay_exact() -> None:
    assert parse_expression("1/2", ["z"], parameter="t") == sp.Rational(1, 2)
    assert parse_expression("z**(1/3)", ["z"], parameter="t") == Z ** sp.Rational(1, 3)
    assert isinstance(parse_expression("0.5", ["z"], parameter="t"), sp.Float)


def test_named_and_indexed_problems_still_build() -> None:
    p = Problem.build(target="z1**2 + 0.3*z2 + 0.2*eps", activation="r**3 - r",
                      loss="log(1 + exp(-y*f))", m=2)
    assert p.k == 2 and p.target.noisy
    assert Problem.from_dict(p.to_dict()) == p
    assert Problem.build(activation="relu", loss="logistic").network.sympy_expr == sp.Max(R, 0)


# ----------------------------------------------------------------------------- property
_PIECES = [
    "z", "eps", "w", "2", "0.5", "1e3", "+", "-", "*", "/", "**", "(", ")", ",", " ",
    "exp", "Max", "relu", "pi", "E",
    "__import__", "os", "system", "'", '"', ".", "[", "]", "{", "}", ":", ";", "=", "lambda",
    "__class__", "__subclasses__", "@", "^", "\\", "\n", "\x00", "\u0455", "eval", "exec",
    "open", "getattr", "Symbol", "sympify", "I", "oo", "j", "x", "if", "else", "for", "in",
    "touch " + CANARY,
]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
@example(f"__import__('os').system('touch {CANARY}')")
@example("exp(z)**-(2)")
@example("Max(z, 1/0)")
@example("(((")
@example("z**2**2**2**2**2")
@example("")
def test_any_text_parses_safely_or_fails_in_one_line(canary: Path, text: str) -> None:
    try:
        expr = parse_expression(text, ["z", "eps"], parameter="target")
    except ValueError as exc:
        message = str(exc)
        _one_line(message)
        assert message.startswith("target")
    else:
        assert isinstance(expr, sp.Expr)
        assert expr.free_symbols <= {Z, EPS}
    assert not canary.exists()


@pytest.mark.parametrize(
    "data", [None, [("target", "z**2")], {"foo": 1}, {1: "z"}, {"target": "z**2", "eval": 1}]
)
def test_from_dict_rejects_unknown_keys_and_non_mappings(data: object) -> None:
    """A malformed dict is a ValueError naming the problem (one CLI line), not a TypeError."""
    with pytest.raises(ValueError, match="data "):
        Problem.from_dict(data)  # type: ignore[arg-type]
