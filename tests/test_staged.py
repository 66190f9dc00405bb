"""Tests of dmftsolve.thresholds.staged (the hard directions' δ_alg once the easy ones are known).

Reference values, with their origin:

* ``z1 + z2**2 - 1`` → 1/2: ``h_u = u + z2² − 1`` is a shift of ``z2²`` and
  ``δ_alg(z²) = 1/Var(z²) = 1/2`` for every ``u`` (closed form, as in test_weak_recovery).
* ``z1 + (1 + z1**2)*(z2**2 - 1)`` → 1/2: ``h_u = u + c(u) He2(z2)`` with ``c(u) > 0``;
  ``δ_alg`` is invariant under ``y ↦ a y + b`` (an invariance test of the same closed form).
* ``z1 + Heaviside(z2**2 - 1 - z1**2)``: given ``z1 = u`` the label is the binary
  ``1{|z2| > t}`` with ``t = √(1 + u²)``. With ``p = P(|z| > t) = erfc(t/√2)`` and
  ``E[(z²−1) 1{|z|>t}] = 2tφ(t)``, ``G(1) = 2tφ/p``, ``G(0) = −2tφ/(1−p)``, so
  ``ρ(h_u) = (2tφ(t))² / (p(1−p))`` (closed form) and ``δ_staged = 1/E_u[ρ]``, the
  ``u``-integral done independently with mpmath (adaptive tanh-sinh, 30 digits).
* ``z1 + z2 + Heaviside(z3**2 - 1 - z1**2 - z2**2)`` with ``U = {z1, z2}``: the same
  ``ρ`` with ``t² = 1 + s``, ``s = u1² + u2² ~ χ²₂`` (density ``e^{−s/2}/2``): a
  one-dimensional mpmath integral against a two-dimensional tensor Gauss–Hermite rule.
* ``z1 + z1*z2`` with ``U = {z1}``: ``h_u = u + u z2`` is linear in ``z2``, so
  ``E[z2 | y, z1] ≠ 0`` and the staged threshold is 0.
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest

from dmftsolve import Problem
from dmftsolve.results import SolverError, Status
from dmftsolve.thresholds.staged import StagedThreshold, staged_alg_threshold


def _rho_binary(t2: mp.mpf) -> mp.mpf:
    """ρ of the label 1{z² > t²}: (2tφ(t))² / (p(1 − p)), p = erfc(t/√2) (closed form above)."""
    t = mp.sqrt(t2)
    p = mp.erfc(t / mp.sqrt(2))
    return (2 * t * mp.npdf(t)) ** 2 / (p * (1 - p))


def _ref_heaviside_1d() -> float:
    with mp.workdps(30):
        mean = mp.quad(lambda u: _rho_binary(1 + u**2) * mp.npdf(u), [-mp.inf, 0, mp.inf])
        return float(1 / mean)


def _ref_heaviside_2d() -> float:
    with mp.workdps(30):
        mean = mp.quad(lambda s: _rho_binary(1 + s) * mp.exp(-s / 2) / 2, [0, mp.inf])
        return float(1 / mean)


def test_shifted_square_is_one_half() -> None:
    r = staged_alg_threshold("z1 + z2**2 - 1")
    assert isinstance(r, StagedThreshold) and r.status is Status.SUCCESS
    assert r.easy == (0,) and r.hard == (1,) and not r.trivial
    assert abs(r.delta - 0.5) <= r.error + 1e-12 and r.error < 1e-8
    # per-node values: every h_u has δ_alg = 1/2 (closed form)
    d = r.diagnostics
    assert d["nodes"].shape == d["weights"].shape == d["node_delta_alg"].shape == (32,)
    assert np.allclose(d["node_delta_alg"], 0.5, rtol=1e-10)
    assert math.isclose(d["weights"].sum(), 1.0, rel_tol=1e-14)
    assert "delta=0.5" in repr(r)
    json.dumps(r.to_dict())


def test_scale_invariance_given_u() -> None:
    # h_u = u + (1 + u²) He2(z2): an affine image of z2², δ_alg = 1/2 for every u
    r = staged_alg_threshold("z1 + (1 + z1**2)*(z2**2 - 1)")
    assert abs(r.delta - 0.5) <= r.error + 1e-12 and r.error < 1e-8


def test_problem_and_names_accepted() -> None:
    prob = Problem.build(target="z1 + z2**2 - 1")
    r = staged_alg_threshold(prob, easy=["z1"])
    assert r.easy == (0,) and abs(r.delta - 0.5) < 1e-8


def test_u_dependent_threshold_against_closed_form() -> None:
    r = staged_alg_threshold("z1 + Heaviside(z2**2 - 1 - z1**2)")
    ref = _ref_heaviside_1d()  # 0.8648069093789560
    assert r.ok and r.error < 5e-6
    assert abs(r.delta - ref) <= r.error, (r.delta, ref, r.error)
    # each node against ρ(h_u) in closed form: the per-node values, not only their mean (far
    # nodes have ρ below alg_threshold's floor of 1e-12 and read 0, i.e. δ_alg = ∞)
    d = r.diagnostics
    closed = np.array([float(_rho_binary(1 + mp.mpf(float(u)) ** 2)) for u in d["nodes"]])
    assert np.allclose(d["node_rho"], closed, rtol=1e-9, atol=1e-11)
    assert np.all(closed[d["node_rho"] == 0] < 1e-11)
    assert len(d["rules"]) >= 2 and d["quadrature_error"] > 0


def test_two_easy_coordinates_against_closed_form() -> None:
    r = staged_alg_threshold("z1 + z2 + Heaviside(z3**2 - 1 - z1**2 - z2**2)",
                             easy=["z1", "z2"], nodes=8, rtol=1e-4)
    ref = _ref_heaviside_2d()  # 0.8953989150316989
    assert r.ok and r.easy == (0, 1) and r.hard == (2,)
    assert abs(r.delta - ref) <= r.error < 1e-4, (r.delta, ref, r.error)


def test_hard_direction_becomes_easy_given_the_easy_one() -> None:
    # h_u = u + u z2 is linear in z2: E[z2 | y, z1] ≠ 0, staged threshold 0
    r = staged_alg_threshold("z1 + z1*z2", easy=["z1"])
    assert r.ok and r.trivial and r.delta == 0.0
    assert "δ_staged = 0" in r.message and "E[z2 | y, z1] ≠ 0" in r.message


def test_z1_plus_z1z2_default_has_no_hard_coordinate() -> None:
    # by default both coordinates are easy already at the first stage: E[z2 y²] = 2 ≠ 0
    with pytest.raises(ValueError, match="no hard direction"):
        staged_alg_threshold("z1 + z1*z2")


def test_not_converged_is_reported() -> None:
    # the n = 16 and 32 rules differ by ~5e-5 here (see the u-dependent test): rtol 1e-9 fails
    with pytest.raises(SolverError, match="Gauss–Hermite rules of 16 and 32 nodes"):
        staged_alg_threshold("z1 + Heaviside(z2**2 - 1 - z1**2)", max_nodes=32, rtol=1e-9)
    r = staged_alg_threshold("z1 + Heaviside(z2**2 - 1 - z1**2)", max_nodes=32, rtol=1e-9,
                             throw=False)
    assert r.status is Status.NOT_CONVERGED and abs(r.delta - _ref_heaviside_1d()) <= r.error


def test_unused_hard_coordinate_gives_infinity() -> None:
    from dmftsolve import Target

    r = staged_alg_threshold(Target("z1**3", k=2))
    assert r.delta == math.inf and "does not depend on the hard coordinates" in r.message


@pytest.mark.parametrize(("target", "kwargs", "exc", "match"), [
    ("z**2", {}, ValueError, "no easy direction.*plain alg_threshold"),
    ("z1**2 + z2**2", {}, ValueError, "no easy direction"),
    ("z1 + sign(z2)", {}, ValueError, "no hard direction"),
    ("z1 + z2**2", {"easy": [0, 1]}, ValueError, "no hard direction"),
    # z1 + z2 learns (z1 + z2)/√2 and leaves z1 − z2 hard: not coordinate-aligned
    ("z1 + z2", {}, NotImplementedError, "not coordinate-aligned"),
    ("z1*z2 + z3 + z1**2", {"easy": [2]}, NotImplementedError, "2 hard coordinates"),
    ("z1 + z2**2", {"easy": ["z7"]}, ValueError, "easy: 'z7'"),
    ("z1 + z2**2", {"easy": []}, ValueError, "easy=\\[\\] names no coordinate"),
    ("z1 + z2**2", {"nodes": 1}, ValueError, "nodes must be an integer >= 2, got 1"),
    ("z1 + z2**2", {"max_nodes": 20}, ValueError, "max_nodes must be"),
    ("z1 + z2**2", {"rtol": 0.0}, ValueError, "rtol must be a number in \\(0, 1\\), got 0.0"),
])
def test_bad_inputs(target: str, kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        staged_alg_threshold(target, **kwargs)


def test_cli_prints_the_staged_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    from dmftsolve.cli import main

    argv = ["alg-threshold", "--target", "z1 + z2**2 - 1", "--no-progress"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["delta_alg"] == 0.0 and out["trivial"] is True
    staged = out["staged"]
    assert staged["delta"] == pytest.approx(0.5, abs=1e-8)  # closed form, as above
    assert staged["easy"] == ["z1"] and staged["hard"] == ["z2"] and staged["status"] == "success"
    assert main(argv) == 0
    assert "staged delta" in capsys.readouterr().out
    assert main([*argv, "--json", "--no-staged"]) == 0
    assert json.loads(capsys.readouterr().out)["staged"] is None
    # a hard coordinate that becomes easy given z1, named with --easy
    assert main(["alg-threshold", "--target", "z1 + z1*z2", "--easy", "z1", "--json",
                 "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["staged"]["delta"] == 0.0


@pytest.mark.parametrize(("argv", "words"), [
    (["--target", "z1 + z2**2 - 1", "--easy", "z9"], "latent names among z1, z2"),
    (["--target", "z1 + z2**2 - 1", "--easy", ",,"], "latent names among z1, z2"),
    (["--target", "z**2", "--easy", "z1"], "k >= 2"),
    (["--target", "z1 + z2**2 - 1", "--easy", "z1,z2"], "no hard coordinate"),
    (["--target", "z1 + z2**2 - 1", "--easy", "z1", "--no-staged"], "--no-staged"),
])
def test_cli_refuses_a_bad_easy(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    """An explicit --easy that cannot be used is an input error (exit 2, one line), not a
    'not computed' row with exit 0."""
    from dmftsolve.cli import main

    assert main(["alg-threshold", *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err
