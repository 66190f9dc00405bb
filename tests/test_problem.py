"""The problem object: validation, pickling, and derivatives against finite differences."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import sympy as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve import Init, Network, Problem, Target, check_delta
from dmftsolve.activations import NAMED_ACTIVATIONS

# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"m": 0}, "m must be >= 1, got 0"),
        ({"m": 1.5}, "m must be an integer"),
        ({"eta": 0.0}, "eta must be > 0, got 0.0"),
        ({"eta": -1}, "eta must be > 0, got -1"),
        ({"eta": math.inf}, "eta must be finite"),
        ({"lam": -0.1}, "lam must be >= 0"),
        ({"lam": math.nan}, "lam must be finite"),
        ({"steps": -1}, "steps must be >= 0"),
        ({"q0": -1.0}, "q0 must be >= 0"),
        ({"target": "z**2 + w"}, "unknown symbol 'w' at column 8"),
        ({"target": "z + z1"}, "mixes 'z' with indexed"),
        ({"target": "foo(z)"}, "unknown function 'foo' at column 1"),
        ({"target": "z**"}, "does not parse"),
        ({"target": ""}, "non-empty expression"),
        ({"activation": "r + q"}, "unknown symbol 'q' at column 5"),
        ({"activation": "swish"}, "unknown symbol 'swish' at column 1"),
        ({"loss": "y**2"}, "does not depend on the output f"),
        ({"m": 2, "a": [1.0]}, "a must have m=2 entries"),
        ({"a": [math.nan]}, "a[0] must be finite"),
        ({"hold_zero": [1]}, "names directions >= k=1"),
        ({"hold_zero": [0, 0]}, "repeated entries"),
        ({"M0": [[0.5, 0.1]]}, "M0 must have shape (k, m)=(1, 1)"),
        ({"M0": [[0.5]], "Q0": [[-1.0]]}, "Q0 must be positive semidefinite"),
        ({"Q0": [[2.0]]}, "Q0 is the Gram of a warm start and needs M0"),
        ({"target": "z1*z2", "k": 1}, "k=1 is smaller than the largest latent index used (2)"),
    ],
)
def test_bad_input_names_parameter_and_value(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        Problem.build(**kwargs)
    assert needle in str(info.value)


def test_replace_m0_none_returns_to_a_random_start() -> None:
    warm = Problem.build(target="z**2", m=2, M0=[[0.1, 0.0]], Q0=[[1.0, 0.0], [0.0, 0.5]])
    init = warm.replace(M0=None).training.init
    assert init.kind == "random" and init.Q0 is None


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "x"])
def test_check_delta_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="delta must"):
        check_delta(bad)


def test_k_inferred_from_indices() -> None:
    assert Target("z**2").k == 1
    assert Target("z1*z2").k == 2
    assert Target("z1 + z3**2").k == 3
    assert Target("z1**2", k=3).k == 3
    assert not Target("z**2").noisy and Target("z**2 + 0.5*eps").noisy


def test_labels_match_expression() -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal((7, 2))
    eps = rng.standard_normal(7)
    y = Target("z1*z2 + 0.5*eps")(z, eps)
    np.testing.assert_allclose(y, z[:, 0] * z[:, 1] + 0.5 * eps, rtol=1e-15)
    # constant targets still broadcast to the sample shape
    assert Target("0*z").__call__(z[:, :1]).shape == (7,)


def test_problem_is_frozen_hashable_and_picklable() -> None:
    p = Problem.build(target="z1 + z2**2", activation="tanh", m=2, a=[1.0, -0.5], eta=0.3)
    with pytest.raises(AttributeError):
        p.network = Network()  # type: ignore[misc]
    q = pickle.loads(pickle.dumps(p))
    assert q == p and hash(q) == hash(p)
    V = np.random.default_rng(1).standard_normal((4, 2))
    np.testing.assert_array_equal(q.grad(np.ones(4), V), p.grad(np.ones(4), V))
    assert Problem.from_dict(p.to_dict()) == p
    assert p.replace(steps=7).training.steps == 7


def test_warm_start_defaults() -> None:
    p = Problem.build(M0=[[0.5]], q0=0.75)
    assert p.training.init.kind == "warm"
    np.testing.assert_array_equal(p.training.init.gram(1), [[0.75]])
    np.testing.assert_array_equal(p.training.init.overlaps(1, 1), [[0.5]])
    assert Init.random(2.0).gram(3)[2, 2] == 2.0


# ----------------------------------------------------------------------------- derivatives

# Closed forms written out by hand (independent of sympy) for two activations.
_SIGMA = {
    "quad": (lambda r: r**2, lambda r: 2 * r, lambda r: 2 + 0 * r),
    "tanh": (np.tanh, lambda r: 1 - np.tanh(r) ** 2,
             lambda r: -2 * np.tanh(r) * (1 - np.tanh(r) ** 2)),
}


@pytest.mark.parametrize("name", sorted(_SIGMA))
def test_activation_derivatives_closed_form(name: str) -> None:
    net = Network(name)
    r = np.linspace(-3, 3, 13)
    for order, ref in enumerate(_SIGMA[name]):
        np.testing.assert_allclose(net.sigma(r, order), ref(r), rtol=1e-13, atol=1e-13)


def test_gelu_matches_scipy_closed_form() -> None:
    from scipy.stats import norm

    r = np.linspace(-4, 4, 17)
    net = Network("gelu")
    np.testing.assert_allclose(net.sigma(r), r * norm.cdf(r), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(net.sigma(r, 1), norm.cdf(r) + r * norm.pdf(r), rtol=1e-12)
    np.testing.assert_allclose(net.sigma(r, 2), (2 - r**2) * norm.pdf(r), rtol=1e-12, atol=1e-15)


def _central_jacobian(f, V: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """d f / d V by central differences; f maps (n, m) -> (n, ...), result (n, ..., m)."""
    m = V.shape[-1]
    cols = []
    for j in range(m):
        e = np.zeros(m)
        e[j] = h
        cols.append((f(V + e) - f(V - e)) / (2 * h))
    return np.stack(cols, axis=-1)


@settings(max_examples=25, deadline=None)
@given(
    activation=st.sampled_from(["gelu", "tanh", "erf", "quad", "r**3/3 - r", "sin(r) + r"]),
    loss=st.sampled_from(["square", "logistic", "(y - f)**4/4 + (y-f)**2"]),
    m=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
@example(activation="gelu", loss="square", m=1, seed=0)
@example(activation="quad", loss="square", m=2, seed=1)
def test_symbolic_derivatives_match_finite_differences(
    activation: str, loss: str, m: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.5, 1.5, size=m)
    p = Problem.build(activation=activation, loss=loss, m=m, a=a)
    V = rng.standard_normal((5, m))
    y = rng.choice([-1.0, 1.0], size=5) if loss == "logistic" else rng.standard_normal(5) * 2
    g = p.grad(y, V)
    D = p.hess(y, V)
    T3 = p.third(y, V)
    np.testing.assert_allclose(g, _central_jacobian(lambda U: p.loss_value(y, U), V),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(D, _central_jacobian(lambda U: p.grad(y, U), V),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(T3, _central_jacobian(lambda U: p.hess(y, U), V),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(D, np.swapaxes(D, -1, -2))
    c, w, u = p.hess_diag_and_rank1(y, V)
    np.testing.assert_allclose(D, np.einsum("ij,jk->ijk", c, np.eye(m))
                               + w[:, None, None] * u[:, :, None] * u[:, None, :], rtol=1e-12)


def test_relu_hessian_is_almost_everywhere() -> None:
    # σ = max(r, 0): D = 1{r>0} for square loss (σ'' dropped: a.e. derivative)
    p = Problem.build(activation="relu")
    V = np.array([[1.0], [-1.0], [2.5]])
    np.testing.assert_array_equal(p.hess(np.ones(3), V)[:, 0, 0], [1.0, 0.0, 1.0])


def test_all_named_activations_compile() -> None:
    r = np.linspace(-2, 2, 5)
    for name in NAMED_ACTIVATIONS:
        for order in range(4):
            assert np.all(np.isfinite(Network(name).sigma(r + 0.1, order)))


def test_V_shape_checked() -> None:
    p = Problem.build(m=2)
    with pytest.raises(ValueError, match="last axis of length m=2"):
        p.grad(np.ones(3), np.ones((3, 1)))


# ----------------------------------------------------------------------------- random valid inputs
_finite_pos = st.floats(1e-3, 10.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(1, 3),
    m=st.integers(1, 3),
    activation=st.sampled_from(sorted(NAMED_ACTIVATIONS) + ["r**3 - r", "sin(r)"]),
    loss=st.sampled_from(["square", "logistic", "abs(y - f)**3/3 + (y - f)**2"]),
    eta=_finite_pos,
    lam=st.floats(0.0, 5.0),
    steps=st.integers(0, 1000),
    q0=st.floats(0.0, 5.0),
    noise=st.floats(0.0, 2.0),
    data=st.data(),
)
@example(k=1, m=1, activation="gelu", loss="square", eta=0.1, lam=0.0, steps=100, q0=1.0, noise=0.0,
         data=None)
def test_random_valid_problems_build_and_round_trip(
    k: int, m: int, activation: str, loss: str, eta: float, lam: float, steps: int, q0: float,
    noise: float, data: st.DataObject | None,
) -> None:
    target = "z**2" if k == 1 else " + ".join(f"z{i}**{1 + i % 2}" for i in range(1, k + 1))
    if noise:
        target += f" + {noise}*eps"
    hold = [] if data is None else data.draw(st.lists(st.integers(0, k - 1), unique=True, max_size=k))
    a = None if data is None else data.draw(st.lists(st.floats(-3, 3), min_size=m, max_size=m))
    p = Problem.build(target=target, activation=activation, m=m, a=a, loss=loss, eta=eta, lam=lam,
                      steps=steps, q0=q0, hold_zero=hold)
    assert (p.k, p.m) == (k, m)
    assert Problem.from_dict(p.to_dict()) == p
    rng = np.random.default_rng(0)
    V = rng.standard_normal((4, m))
    y = p.labels(rng.standard_normal((4, k)), rng.standard_normal(4))
    assert p.grad(y, V).shape == (4, m) and p.hess(y, V).shape == (4, m, m)
    assert np.all(np.isfinite(p.hess(y, V)))


@pytest.mark.parametrize("act", ["gelu", "quad", "relu", "tanh", "r", "exp(r)", "erf(r)"])
@pytest.mark.parametrize("loss", ["square", "logistic", "(y - f)**4/4"])
def test_loss_and_grad_is_loss_value_and_grad(act: str, loss: str) -> None:
    """One evaluation (σ, σ' and ℓ, ℓ' each compiled together, sharing subexpressions) gives
    what loss_value and grad give apart, order by order (width 2)."""
    rng = np.random.default_rng(0)
    V = rng.standard_normal((50, 2))
    y = rng.choice([-1.0, 1.0], size=50) if loss == "logistic" else rng.standard_normal(50)
    p = Problem.build(target="z**2 - 1", activation=act, loss=loss, m=2)
    lv, g = p.loss_and_grad(y, V)
    np.testing.assert_allclose(lv, p.loss_value(y, V), rtol=1e-14, atol=0)
    np.testing.assert_allclose(g, p.grad(y, V), rtol=1e-14, atol=1e-300)
    assert lv.shape == (50,) and g.shape == (50, 2)
    s0, s1 = p.network.sigma_and_derivative(V)
    np.testing.assert_allclose(s0, p.network.sigma(V), rtol=1e-14, atol=0)
    np.testing.assert_allclose(s1, p.network.sigma(V, 1), rtol=1e-14, atol=0)
    # the same with the neurons on the first axis (the DMFT's layout), C-ordered
    lv_r, g_r = p.loss_and_grad_rows(y, np.ascontiguousarray(V.T))
    np.testing.assert_allclose(lv_r, lv, rtol=1e-14, atol=0)
    np.testing.assert_allclose(g_r, g.T, rtol=1e-14, atol=1e-300)
    assert g_r.shape == (2, 50) and g_r.flags["C_CONTIGUOUS"]


def test_loss_and_grad_rows_checks_the_shape() -> None:
    p = Problem.build(target="z**2 - 1", m=2)
    with pytest.raises(ValueError, match=r"V must have shape \(m=2, n\), got shape \(50, 2\)"):
        p.loss_and_grad_rows(np.zeros(50), np.zeros((50, 2)))


def test_joint_compilation_returns_fresh_arrays() -> None:
    """σ = r returns its argument and σ = exp(r) the same array twice; the caller must still
    get arrays of the broadcast shape it may write to without touching the input or each other."""
    from dmftsolve._symbolic import compile_expressions
    from dmftsolve.activations import R

    r = np.linspace(-1.0, 1.0, 7)
    for exprs in ([R, 1], [R**2, 2 * R], [np.e**R, np.e**R]):
        outs = compile_expressions(exprs, [R])(r)
        assert all(o.shape == r.shape and o.dtype == float for o in outs)
        assert not any(np.may_share_memory(o, r) for o in outs)
        assert not np.may_share_memory(outs[0], outs[1])
    with pytest.raises(ValueError, match="complex"):
        compile_expressions([R, sp.I * R], [R])(r)


def test_as_target_takes_targets_problems_and_text() -> None:
    from dmftsolve.problem import as_target

    t = Target("z1*z2")
    assert as_target(t) is t
    p = Problem.build(target="abs(z)")
    assert as_target(p) is p.target
    assert as_target("z**2 + eps") == Target("z**2 + eps")
    for bad in (3, None, b"z**2", ["z**2"]):
        with pytest.raises(ValueError, match="^target must be a Target, a Problem or an expression string"):
            as_target(bad, name="target")
    with pytest.raises(ValueError, match="is not real and finite"):
        as_target("sqrt(z)")
