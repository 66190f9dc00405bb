"""Issue 30, inputs: no complex/infinite constants, no coerced booleans or strings, no overflow.

Every case here used to pass validation and run (a wrong answer with exit 0) or
end in an "internal error"/traceback; each must now be one ``ValueError`` (exit 2
in the CLI) naming the parameter.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from dmftsolve import Problem
from dmftsolve._symbolic import compile_expression, constant_problem, parse_expression
from dmftsolve.checks import check_delta, check_integer, check_real
from dmftsolve.cli import main
from dmftsolve.problem import Network, Target
from dmftsolve.simulation.sweeps import sweep


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``dmftsolve *argv`` in this process: (exit status, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- expressions
@pytest.mark.parametrize(("text", "words"), [
    ("z**2 + sqrt(-1)", "sqrt(…) is not a real number"),
    ("sqrt(-1)*z**2", "sqrt(…) is not a real number"),
    ("z + log(-1)", "log(…) is not a real number"),
    ("(-8)**(1/3)*z", "not a real number"),
    ("log(0)*z", "log(…) is infinite"),
    ("z + 1/0", "infinite"),
    ("z*(0/0 + 1)", "undefined (nan)"),
    ("asinh(sqrt(-4))*z", "not a real number"),
    ("1e300*1e300*z", "larger than the largest double"),
    ("exp(1000)*z", "larger than the largest double"),
    ("10**400*z", "larger than the largest double"),
    ("sqrt(-z**2 - 1)", "not real-valued"),
])
def test_parser_refuses_non_real_constants(text: str, words: str) -> None:
    with pytest.raises(ValueError, match="^target: ") as info:
        Target(text)
    assert words.split("(…)")[0] in str(info.value)
    assert "\n" not in str(info.value)


#: Gaussian latents at which kept labels are compared with their numpy spelling
Z = np.random.default_rng(0).standard_normal(1000)


@pytest.mark.parametrize(("text", "reference"), [
    ("z**2 + 1e300", lambda z: z**2 + 1e300),
    ("1e-300*z**2", lambda z: 1e-300 * z**2),
    ("(1/2)**3000*z**2", lambda z: np.ldexp(z**2, -3000)),  # below the smallest double: 0
    ("sqrt(2)*z", lambda z: np.sqrt(2) * z),
    ("exp(-700)*z", lambda z: np.exp(-700) * z),
    ("log(2)*z", lambda z: np.log(2) * z),
    ("abs(z)**0.5", lambda z: np.abs(z) ** 0.5),
    ("E**2*z - pi", lambda z: np.e**2 * z - np.pi),
])
def test_parser_keeps_real_constants(text: str, reference) -> None:  # noqa: ANN001
    """Real constants, however large or small, are kept as the numbers they spell (reference:
    the same expression in numpy)."""
    ref = reference(Z)  # a sum rounds relative to its largest term (E**2*z - pi near 0): atol
    np.testing.assert_allclose(Target(text)(Z[:, None]), ref, rtol=1e-13,
                               atol=8 * np.finfo(float).eps * np.abs(ref).max())


def test_constant_problem_reasons() -> None:
    assert constant_problem(sp.Integer(3)) is None
    assert constant_problem(sp.Symbol("z", real=True) + sp.I) is None  # not a constant: judged later
    assert "infinite" in constant_problem(sp.zoo)
    assert "undefined" in constant_problem(sp.nan)
    assert "not a real number" in constant_problem(sp.I * sp.pi)


def test_loss_and_activation_refuse_complex_constants() -> None:
    with pytest.raises(ValueError, match="^loss: sqrt"):
        Problem.build(loss="sqrt(-1)*(y-f)**2")
    with pytest.raises(ValueError, match="^activation: log"):
        Problem.build(activation="log(-1)*r")


def test_compiled_expression_never_casts_complex_to_real() -> None:
    z = sp.Symbol("z", real=True)
    f = compile_expression(sp.I * z, [z])
    with pytest.raises(ValueError, match="complex values"):
        f(np.array([1.0, 2.0]))


def test_cli_complex_target_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in (["alg-threshold", "--target", "z**2 + sqrt(-1)"],
                ["alg-threshold", "--target", "log(0)*z"],
                ["alg-threshold", "--target", "1/0"],
                ["alg-threshold", "--target", "(-8)**(1/3)*z"]):
        code, out, err = run_cli(capsys, *cmd)
        assert code == 2, (cmd, err)
        assert out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dmftsolve alg-threshold: error: target:"), lines
        assert "internal error" not in lines[0]


def test_parse_expression_direct() -> None:
    with pytest.raises(ValueError, match="^x: "):
        parse_expression("sqrt(-2)", ["z"], parameter="x")


# ----------------------------------------------------------------------------- API coercion
@pytest.mark.parametrize(("kwargs", "name"), [
    ({"eta": True}, "eta"),
    ({"eta": "0.1"}, "eta"),
    ({"lam": False}, "lam"),
    ({"q0": "1"}, "q0"),
    ({"eta": 10**400}, "eta"),
    ({"q0": 10**400}, "q0"),
    ({"a": "12", "m": 2}, "a"),
    ({"a": [True, 1.0], "m": 2}, "a[0]"),
    ({"m": True}, "m"),
    ({"steps": True}, "steps"),
    ({"steps": "10"}, "steps"),
    ({"hold_zero": "0"}, "hold_zero"),
    ({"k": True}, "k"),
    ({"M0": [["0.1"]]}, "M0"),
    ({"M0": [[True]]}, "M0"),
    ({"M0": [[0.1]], "Q0": [[10**400]]}, "Q0"),
    ({"eta": complex(0.1, 0)}, "eta"),
])
def test_build_refuses_coercions(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError) as info:
        Problem.build(**kwargs)
    assert str(info.value).startswith(name), str(info.value)


def test_build_still_takes_numpy_numbers_and_arrays() -> None:
    p = Problem.build(eta=np.float64(0.2), m=np.int64(2), a=np.array([1.0, -1.0]), steps=np.int32(3))
    assert p.training.eta == 0.2 and p.m == 2 and p.network.a == (1.0, -1.0) and p.training.steps == 3
    assert Network("gelu", 2, [1, 2]).a == (1.0, 2.0)


def test_checks_refuse_bool_and_text() -> None:
    for bad in (True, np.bool_(False), "1", b"1", None, [1.0], 1 + 0j, float("nan"), 10**400):
        with pytest.raises(ValueError, match="^delta "):
            check_delta(bad)
    with pytest.raises(ValueError, match="^n "):
        check_integer("n", True, 0)
    with pytest.raises(ValueError, match="^n "):
        check_integer("n", "3", 0)
    assert check_integer("n", 3.0, 0) == 3
    assert check_real("x", np.array(2.5)) == 2.5


def test_solve_dmft_refuses_boolean_delta() -> None:
    from dmftsolve.dynamics.dmft import solve_dmft

    p = Problem.build(target="z**2", activation="quad", eta=0.1, steps=2)
    with pytest.raises(ValueError, match="delta"):
        solve_dmft(p, True)
    with pytest.raises(ValueError, match="delta"):
        solve_dmft(p, 10**400)


def test_sweep_refuses_string_deltas() -> None:
    p = Problem.build(target="z**2", activation="quad", eta=0.05, steps=2)
    with pytest.raises(ValueError, match="^deltas must be a number or a sequence"):
        sweep(p, 20, "25", trials=1, progress=False)
    with pytest.raises(ValueError, match="^delta must be a real number"):
        sweep(p, 20, [2.0, True], trials=1, progress=False)
    with pytest.raises(ValueError, match="^success_threshold"):
        sweep(p, 20, [2.0], trials=1, progress=False, success_threshold=True)


# ----------------------------------------------------------------------------- finite variance
@pytest.mark.parametrize("text", ["1/z", "1/z**2", "z1/z2", "1/(z - 1)**2", "tan(z)", "1/sqrt(abs(z))",
                                  "abs(z1*z2)**(-0.5)", "z**2 + 1/(z + eps)", "3 - 2/z"])
def test_labels_without_finite_variance_are_refused(text: str) -> None:
    # ∫ φ(u) |u|^(-2p) du diverges for p >= 1/2: E[y²] = ∞
    with pytest.raises(ValueError, match="has no finite variance"):
        Target(text)


@pytest.mark.parametrize(("text", "reference", "bound"), [
    ("abs(z)**(-0.25)", lambda z: np.abs(z) ** -0.25, None),
    ("sin(1/z)", lambda z: np.sin(1 / z), 1.0),
    ("atan(1/z)", lambda z: np.arctan(1 / z), np.pi / 2),
    ("(z**2 - 1)/(z - 1)", lambda z: z + 1, None),  # the removable pole at z = 1 removed
    ("1/(z**2 + 1)", lambda z: 1 / (z**2 + 1), 1.0),
    ("z/(1 + abs(z))", lambda z: z / (1 + np.abs(z)), 1.0),
    ("1/(z**2 + 0.001)", lambda z: 1 / (z**2 + 0.001), None),
    ("exp(-1/z**2)", lambda z: np.exp(-1 / z**2), 1.0),
])
def test_labels_with_finite_variance_are_kept(text: str, reference, bound: float | None) -> None:  # noqa: ANN001
    """Labels with a pole or an essential singularity whose E[y²] is finite are kept, as the
    labels they spell (reference: the numpy spelling). E[y²] is finite because the label is
    bounded by ``bound``, or by scipy quad of the numpy spelling against φ, split at 0."""
    from scipy.integrate import quad
    from scipy.stats import norm

    y = Target(text)(Z[:, None])
    np.testing.assert_allclose(y, reference(Z), rtol=1e-12, atol=1e-300)
    if bound is not None:
        assert np.all(np.abs(y) <= bound)
    else:
        second = sum(quad(lambda z: reference(z) ** 2 * norm.pdf(z), a, b, limit=200)[0]
                     for a, b in ((-np.inf, 0.0), (0.0, np.inf)))
        assert np.isfinite(second) and second > 0


def test_single_latent_z_with_k_above_one_names_the_fix() -> None:
    with pytest.raises(ValueError, match=r"uses the single latent 'z' but k=8; .* z1 … z8"):
        Target("z**2", k=8)
    assert Target("z**2", k=1).k == 1


@pytest.mark.parametrize("text", ["sqrt(z)", "log(z)", "z**0.5", "z**(-1/3)", "log(sin(z))",
                                  "z1*sqrt(z2) + eps"])
def test_labels_undefined_on_the_gaussian_domain_are_refused(text: str) -> None:
    # NaN for z < 0: GD reported a "non-finite gradient" and suggested a smaller step size
    with pytest.raises(ValueError, match="is not real and finite for Gaussian latents"):
        Target(text)


def test_cli_undefined_label_names_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "dmft", "--delta", "2", "--steps", "4", "--target", "sqrt(z)")
    assert code == 2 and err.startswith("dmftsolve dmft: error: target='sqrt(z)' is not real and finite")
    assert "--eta" not in err


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"activation": "sqrt(r)"}, "activation='sqrt(r)' is not finite on the real line"),
    ({"activation": "log(r)"}, "activation='log(r)' is not finite"),
    ({"loss": "log(f)*(y - f)**2"}, "loss='log(f)*(y - f)**2' is not finite"),
])
def test_activation_and_loss_undefined_for_negative_arguments(kwargs: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        Problem.build(**kwargs)
    Problem.build(activation="r**3 - r", loss="log(1 + exp(-y*f))")  # finite everywhere: kept


@pytest.mark.parametrize("text", ["exp(z**2)", "exp(z**2/4)", "exp(z1*z2)", "sinh(z**2)", "exp(eps**2)",
                                  "sign(z)*exp(z**2/2)"])
def test_gaussian_growth_without_finite_variance_is_refused(text: str) -> None:
    # E[exp(2c z²)] = 1/sqrt(1 - 4c) for c < 1/4 and ∞ from c = 1/4 on
    with pytest.raises(ValueError, match="has no finite variance: along .* grows like exp"):
        Target(text)


def test_growth_check_keeps_finite_variance_and_refuses_overflow() -> None:
    for text in ("exp(z**2/5)", "exp(3*z)", "cosh(z)**2", "1e300*z**2", "exp(-z**2)"):
        Target(text)
    with pytest.raises(ValueError, match="overflows double precision"):
        Target("exp(80*z)")


def test_bounded_oscillating_label_is_not_taken_for_growth() -> None:
    # a sum of 59 sines is bounded: log|h| jumps near its zeros, which is no exp(c t²) growth
    Target("+".join(f"sin({i}*z)" for i in range(1, 60)) + " + eps")
    with pytest.raises(ValueError, match="no finite variance"):
        Target("1e-300*exp(z**2/4)")  # the scale does not hide the growth


def test_infinite_part_next_to_a_symbol_is_refused() -> None:
    # r*1/0 is r/0 = zoo*r: no constant sub-expression is infinite, the product is
    for text in ("r*1/0", "r/0", "log(0*r)"):
        with pytest.raises(ValueError, match="^activation: .* is infinite"):
            Problem.build(activation=text)


def test_huge_integers_are_refused_not_overflowed() -> None:
    with pytest.raises(ValueError, match="^steps must be <= "):
        Problem.build(steps=10**19)
    with pytest.raises(ValueError, match="^m must be <= "):
        Problem.build(m=10**19)  # OverflowError: cannot fit 'int' into an index-sized integer


def test_growth_checked_along_the_latents_used() -> None:
    with pytest.raises(ValueError, match="along z1000 it grows"):
        Target("exp(z1000**2)")  # not among the first 50 axes
    for text in ("1", "eps", "0*z", "z1000**2"):
        Target(text)  # constant or finite variance


@pytest.mark.parametrize("text", ["z**2 + 1e300", "z**2 + 1e17", "(1/2)**3000*z**2", "exp(-1000)*z",
                                  "log(1 + 1e-20*z**2)"])
def test_problem_refuses_labels_constant_in_double_precision(text: str) -> None:
    # GD sees y in doubles: these are constants there (simulate/dmft trained on y = const);
    # a bare Target keeps them, for alg_threshold, which removes the constant exactly
    with pytest.raises(ValueError, match="too flat for double precision"):
        Problem.build(target=text)
    if "log" not in text:
        Target(text)


@pytest.mark.parametrize("text", ["1e-300*z**2", "z**2 + 1e15", "1e300*z**2", "z1*z2 + eps", "sign(z)", "1"])
def test_problem_keeps_labels_doubles_resolve(text: str) -> None:
    """A label doubles can tell apart is kept: the problem's labels are its target's, and they
    take more than one value at Gaussian latents (``z**2 + 1e15``: steps of 1/8 in doubles);
    the exact constant ``1`` is kept as the constant it is."""
    p = Problem.build(target=text)
    rng = np.random.default_rng(1)
    latents, eps = rng.standard_normal((1000, p.target.k)), rng.standard_normal(1000)
    y = p.labels(latents, eps)
    np.testing.assert_array_equal(y, Target(text)(latents, eps))
    if text == "1":
        assert np.all(y == 1.0)
    else:
        assert np.unique(y).size > 1


def test_derivatives_that_swell_are_refused_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    # the third derivative of a product of 59 factors ended in RecursionError inside lambdify;
    # a 30-deep tanh took 8 s to compile
    deep = "tanh(" * 30 + "r" + ")" * 30
    with pytest.raises(ValueError, match="^activation: its derivative of order [23] has more than"):
        Problem.build(activation=deep)
    code, _, err = run_cli(capsys, "dmft", "--delta", "2", "--steps", "3", "--activation", deep)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    Problem.build(activation="tanh(" * 12 + "r" + ")" * 12)  # moderate nesting still compiles
