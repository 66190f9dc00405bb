"""``validation/investigations/stein_estimators.py``: its noise measure against a closed form, and
its tiny configuration end to end."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType

import numpy as np


def test_coefficient_noise_matches_the_closed_form(load_validation: Callable[[str], ModuleType]) -> None:
    """``G = (1 + y) Σ_u c_u ζ_u + 0.1 e`` with ``y = x²`` independent of the ``p = 3``
    innovations: regressed on the innovations alone the residual is ``(y − ȳ) Σ c_u ζ_u + 0.1 e``,
    of variance ``2 Σ c² + 0.01``, and ``tr (XᵀX)⁻¹ ≈ p/n``; with the controls the label part
    leaves and the residual variance is 0.01. Reference: those closed forms (to 10 %, the
    sampling error of a variance from 8000 samples is about 3 %)."""
    mod = load_validation("stein_estimators")
    rng = np.random.default_rng(0)
    n, c = 8000, np.array([1.0, 0.5, -0.3])
    Z = rng.standard_normal((3, n))
    y = rng.standard_normal(n) ** 2
    G = (1.0 + y) * (c @ Z) + 0.1 * rng.standard_normal(n)
    v = mod.coefficient_noise(G, Z, y)
    plain = (2 * float(c @ c) + 0.01) * 3 / n
    assert math.isclose(v["var_innovations"], plain, rel_tol=0.1)
    assert math.isclose(v["var_controls"], 0.01 * 3 / n, rel_tol=0.1)


def test_tiny_run_reports_every_variant(load_validation: Callable[[str], ModuleType]) -> None:
    mod = load_validation("stein_estimators")
    res = mod.main(["--tiny"])
    assert [r["t"] for r in res["noise"]] == list(mod.TINY["times"])
    assert all(0 < r["ratio"] < 1 for r in res["noise"])
    assert list(res["kernels"]) == [label for label, _, _ in mod.VARIANTS]
    for v in res["kernels"].values():
        assert v["runs"] == mod.TINY["seeds"] and not v["failed"]
        assert np.all(np.isfinite(v["RQ"])) and np.all(np.asarray(v["Q"]) > 0)
    assert [v["n_paths"] for v in res["kernels"].values()][-2:] == [1600, 3200]
    assert "| regression with label controls | 800 | 2 |" in mod.report(res)


def test_paired_difference_matches_by_seed(load_validation: Callable[[str], ModuleType]) -> None:
    """Seeds 3, 4, 5 in one run and 4, 5, 6 in the other: the differences over seeds 4 and 5
    are 0.1 and 0.3 (mean 0.2, standard error 0.1); the unmatched seeds are left out."""
    mod = load_validation("stein_estimators")
    a = {"seeds": [3, 4, 5], "RQ_last": [0.5, 0.5, 0.6]}
    b = {"seeds": [4, 5, 6], "RQ_last": [0.6, 0.9, 7.0]}
    mean, se, n = mod.paired_difference(a, b)
    assert n == 2 and math.isclose(mean, 0.2) and math.isclose(se, 0.1)


def test_stratified_labels_put_one_label_per_stratum(load_validation: Callable[[str], ModuleType]) -> None:
    """The stratified variant's ``V*``: each batch's distinct columns fall one in each of the
    ``n`` equal-probability strata of N(0, 1) (reference: ``Φ`` of the sorted values lies in
    ``[j/n, (j+1)/n)``), in the rank order of the plain run's ``V*`` (the same normals are
    drawn), the copies repeat them (antithetic pairs equal, reflected copies negated), the plain
    draw is restored afterwards, and the side stream of the strata leaves the run's generator
    where it was (so the innovations are the plain run's)."""
    from scipy.special import ndtr

    from dmftsolve.dynamics import dmft as dmft_module

    mod = load_validation("stein_estimators")
    cfg = dict(mod.TINY)
    keep = (cfg["times"][0],)
    plain = mod._solve(cfg, 800, 3, keep)
    strat = mod._solve(cfg, 800, 3, keep, labels="stratified")
    assert dmft_module._Run._draw_shared is mod._DRAW_SHARED
    v, w = strat.law(keep[0]).Vstar[:, 0], plain.law(keep[0]).Vstar[:, 0]
    n = v.size // (4 * strat.settings["n_batches"])  # a batch: n distinct, antithetic, reflected
    for b in range(2):
        base = v[4 * n * b: 4 * n * b + n]
        np.testing.assert_array_equal(np.floor(ndtr(np.sort(base)) * n), np.arange(n))
        np.testing.assert_array_equal(np.argsort(base), np.argsort(w[4 * n * b: 4 * n * b + n]))
        np.testing.assert_array_equal(v[4 * n * b + n: 4 * n * b + 2 * n], base)
        np.testing.assert_array_equal(v[4 * n * b + 2 * n: 4 * n * b + 3 * n], -base)
    rng = np.random.default_rng(7)
    before = rng.bit_generator.state
    a, b2 = mod._strata_stream(rng).random(3), mod._strata_stream(rng).random(3)
    assert rng.bit_generator.state == before and np.array_equal(a, b2)


def test_orthogonal_innovations_are_orthonormal_to_the_past(
        load_validation: Callable[[str], ModuleType]) -> None:
    """The orthogonalised variant's new innovations: orthogonal over the distinct columns to the
    stored innovations and to the memory term as the paths see it (its contraction), to each
    other, with mean square 1 (reference: those defining properties, to float64 round-off); the
    generator is advanced exactly as the plain draw advances it; and a tiny run restores the
    plain draw afterwards."""
    from types import SimpleNamespace

    from dmftsolve.dynamics import dmft as dmft_module

    mod = load_validation("stein_estimators")
    rng = np.random.default_rng(5)
    cols = 400
    mem = rng.standard_normal((2, 2 * cols))
    run = SimpleNamespace(rng=np.random.default_rng(1), B=1, n_base=cols, compact=True, n_z=3,
                          Z=rng.standard_normal((6, cols)).astype(np.float32), mem=mem,
                          _contract=lambda g: g[:, :cols] - g[:, cols:])
    z = mod._orthogonal_innovations(run, 2)
    past = np.vstack([run.Z[:3].astype(float), mem[:, :cols] - mem[:, cols:]])
    np.testing.assert_allclose(z @ past.T / cols, 0.0, atol=1e-12)
    np.testing.assert_allclose(z @ z.T / cols, np.eye(2), atol=1e-12)
    plain = np.random.default_rng(1)
    plain.standard_normal((2, cols))
    assert run.rng.bit_generator.state == plain.bit_generator.state
    r = mod._solve(dict(mod.TINY), 800, 3, (), innovations="orthogonal")
    assert r.ok and dmft_module._Run._draw is mod._DRAW
