"""dmftsolve.admissibility: the public rules the data model calls, on their own.

The rules' verdicts on many expressions are tested through ``Target``/``Problem``
construction in ``tests/test_reliability_inputs.py``; here the functions are
called directly, including on stand-ins that bypass parsing.
"""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

from dmftsolve import Loss, Network, Problem, Target
from dmftsolve.admissibility import (
    activation_problem,
    label_resolution,
    loss_problem,
    resolution_problem,
    target_problem,
)


@pytest.mark.parametrize("text", ["z**2", "z1*z2 + eps", "abs(z)**(-0.25)", "exp(z**2/5)", "1"])
def test_admissible_targets_have_no_problem(text: str) -> None:
    assert target_problem(Target(text)) is None


def test_named_and_smooth_activations_and_losses_have_no_problem() -> None:
    assert activation_problem(Network("r**3 - r")) is None
    assert loss_problem(Loss("(y - f)**4/4")) is None


def test_activation_rule_on_a_stand_in_names_it_and_the_order() -> None:
    # σ = sqrt(r) is finite for r >= 0 only: NaN at the negative test points
    net = types.SimpleNamespace(activation="stand-in sqrt(r) 1",
                                sigma=lambda r, order=0: np.sqrt(r) if order == 0 else np.ones_like(r))
    with np.errstate(invalid="ignore"):
        reason = activation_problem(net)
    assert reason is not None and reason.startswith("activation='stand-in sqrt(r) 1' is not finite on the "
                                                    "real line: at r = -") and " it is nan " in reason
    # only σ'' fails: the message says which derivative
    net2 = types.SimpleNamespace(activation="stand-in 2",
                                 sigma=lambda r, order=0: np.full_like(r, np.inf if order == 2 else 1.0))
    assert "its second derivative is inf (256 of 256" in activation_problem(net2)


def test_loss_rule_on_a_stand_in() -> None:
    calls = []

    def evaluate(y: np.ndarray, f: np.ndarray, order: int = 0) -> np.ndarray:
        calls.append(order)
        return np.where(f > 0, 1.0, np.nan) if order == 1 else np.zeros_like(f)

    class Stand:
        name = "stand-in loss (f > 0 derivative)"

        def __call__(self, y: np.ndarray, f: np.ndarray, order: int = 0) -> np.ndarray:
            return evaluate(y, f, order)

    reason = loss_problem(Stand())
    assert reason is not None and "its derivative in f is nan" in reason
    assert calls == [0, 1]  # stops at the first order that fails
    assert loss_problem(Stand()) == reason and calls == [0, 1]  # remembered by the text: not re-evaluated


def test_label_resolution_sees_a_constant_that_hides_the_label() -> None:
    # in doubles 1e300 + z² rounds to the double nearest 1e300, so they miss all of z² (and the
    # rounding of 1e300 itself): miss/spread >= 1
    _, center, _, ratio = label_resolution(Target("z**2 + 1e300"))
    assert ratio >= 1.0 and center.startswith("1.0e+300")
    # z² alone: the doubles err by rounding only (relative 2**-53 of max z² over the spread)
    _, _, _, ratio = label_resolution(Target("z**2"))
    assert ratio < 1e-14
    assert label_resolution(Target("1")) is None  # constant: no verdict


def test_resolution_problem_threshold() -> None:
    # 1e17 is a double and its neighbours are 16 apart: z² is rounded to a multiple of 16, so
    # the doubles miss it by up to 8, about the spread of z² at 16 points (ratio of order 1)
    target = Target("z**2 + 1e17")
    assert resolution_problem(target).startswith("target='z**2 + 1e17' is too flat for double precision")
    assert 0.1 < label_resolution(target)[3] < 10
    assert resolution_problem(target, max_ratio=10) is None
    assert resolution_problem(Target("z**2 + 1e15")) is None


@pytest.mark.parametrize("activation, what", [("1/r", "it has a pole where 'r' = 0, of order 1"),
                                              ("1/(r - 1)", "it has a pole where 'r - 1' = 0"),
                                              ("sqrt(Abs(r))", "its derivative has a pole")])
def test_an_activation_with_a_pole_is_refused_as_a_target_is(activation: str, what: str) -> None:
    """The pole rule of targets, on the activation and its derivative: ``∫ |r|^(-2p) dr`` diverges at 0
    for ``p >= 1/2``, so ``E[σ(V)²]`` (or ``E[σ'(V)²]``) is infinite for Gaussian ``V``."""
    with pytest.raises(ValueError, match="no finite variance under Gaussian pre-activations"):
        Problem.build(activation=activation)
    with pytest.raises(ValueError, match=re.escape(what)):
        Problem.build(activation=activation)
    with pytest.raises(ValueError, match="has a pole where 'z' = 0, of order 1 >= 1/2"):
        Problem.build(target="1/z")
    for fine in ("r/(1 + r**2)", "gelu", "relu", "Abs(r)**0.6"):  # bounded, or a pole of order < 1/2
        Problem.build(activation=fine)


def test_a_loss_with_a_pole_is_refused() -> None:
    with pytest.raises(ValueError, match="loss='1/\\(y-f\\)\\*\\*2' has no finite mean square"):
        Problem.build(loss="1/(y-f)**2")
    Problem.build(loss="log(cosh(y - f))")
