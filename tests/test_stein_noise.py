"""``validation/investigations/stein_noise.py``: its noise estimator against closed forms, and the
1/N law of the noise it measures on a tiny run.

References: for ``Ŝ_u = mean_j Y_j Z_uj`` over ``N_d`` i.i.d. columns, ``Σ_u Var(Ŝ_u) =
Σ_u E[(Y Z_u)²]/N_d − Σ_u (E[Y Z_u])²/N_d``, in closed form for Gaussian ``Y`` and ``Z``; the
Stein noise of a mean over ``N_d = N/4`` columns falls like ``1/N``."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest


@pytest.mark.parametrize("signal", [False, True])
def test_noise_of_mean_against_closed_form(load_validation: Callable[[str], ModuleType],
                                           signal: bool) -> None:
    mod = load_validation("stein_noise")
    rng = np.random.default_rng(7)
    n_z, Nd = 20, 4000
    Z = rng.standard_normal((n_z, Nd))
    e = rng.standard_normal(Nd)
    # Y = Z_0 + e: E[Y Z_0] = 1, Var(Y Z_0) = E[Z_0⁴] + E[e²Z_0²] − 1 = 3; Var(Y Z_u) = E[Y²] = 2, u > 0
    Y = Z[0] + e if signal else e
    truth = (3 + 2 * (n_z - 1)) / Nd if signal else n_z / Nd
    S = Z @ Y / Nd
    est = mod.noise_of_mean(Y, Z, S)
    # the estimate's relative standard deviation is about sqrt(2 n_z² + 6 n_z)/(n_z √N_d) ≈ 0.024
    # without signal (E[Y⁴] = 3); 0.1 is about four of them
    assert est == pytest.approx(truth, rel=0.1)
    # the naive mean square of Ŝ is off by the signal (1 with signal), the estimate is not
    if signal:
        assert float(S @ S) > 50 * truth


def test_noise_of_regression_against_closed_form(load_validation: Callable[[str], ModuleType]) -> None:
    """OLS of ``Y = Z_0 + e`` on 20 standard normal rows: ``Σ_u Var(β̂_u) ≈ n_z σ²/(N_d − n_z)``
    with ``σ² = 1`` (the residual), against ``(3 + 2·19)/N_d`` for the plain mean."""
    mod = load_validation("stein_noise")
    rng = np.random.default_rng(8)
    n_z, Nd = 20, 4000
    Z = rng.standard_normal((n_z, Nd))
    Y = Z[0] + rng.standard_normal(Nd)
    assert mod.noise_of_regression(Y, Z) == pytest.approx(n_z / (Nd - n_z), rel=0.1)


def test_tiny_run_noise_falls_like_one_over_n(load_validation: Callable[[str], ModuleType]) -> None:
    res = load_validation("stein_noise").main(["--tiny"])
    runs = {(r["n_paths"], r["mode"]): r for r in res["runs"]}
    assert all(runs[(n, mode)]["status"] == "success"
               for n in (2000, 8000) for mode in ("plain", "regression"))
    ratio = runs[(2000, "plain")]["noise_cum"][-1] / runs[(8000, "plain")]["noise_cum"][-1]
    # 4 in expectation; the number of non-null innovations differs between the two runs
    assert 2.5 < ratio < 6.0
    # the regression removes the part of g linear in the innovations from the noise (measured:
    # about half of it on this run, 0.52 and 0.38 of the plain noise at N = 2000 and 8000)
    for n in (2000, 8000):
        assert runs[(n, "regression")]["noise_cum"][-1] < 0.75 * runs[(n, "plain")]["noise_cum"][-1]
