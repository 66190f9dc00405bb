"""The Stein regression with label control variates (``DMFTSettings.stein_controls``) and
cross-fitted (``DMFTSettings.stein_crossfit``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve import Problem
from dmftsolve.dynamics.dmft import DMFTSettings, solve_dmft
from dmftsolve.dynamics.response import StepMoments
from dmftsolve.dynamics.stein import SteinResponse, control_pairs, label_controls


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=3, max_size=60))
@example([0.0, 1.0, 4.0, 9.0])
@example([2.0, 2.0, 2.0])
@example([0.0, 0.0, 1.0])
def test_label_controls_are_centred_and_orthonormal(y: list[float]) -> None:
    """Each function has mean 0 and mean square 1 over the labels, and the two are orthogonal;
    a constant label gives none (three distinct values or more give two, two give one)."""
    F = label_controls(np.array(y))
    n = len(y)
    assert F.shape[1] == n
    if F.shape[0]:
        np.testing.assert_allclose(F.mean(axis=1), 0.0, atol=1e-9)
        np.testing.assert_allclose(F @ F.T / n, np.eye(F.shape[0]), atol=1e-7)
    if np.ptp(y) == 0:
        assert F.shape[0] == 0


def test_control_pairs_cover_every_product_once() -> None:
    assert control_pairs(0) == [(0, 0)]
    assert control_pairs(2) == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]


def _step(t: int, zeta: np.ndarray, g: np.ndarray, null_mask: np.ndarray, W: np.ndarray) -> StepMoments:
    """The moments a driver would pass at step ``t`` (width 1, ``L`` the identity)."""
    n = g.size
    nn = np.flatnonzero(~null_mask[: t + 1])
    gz = (g @ zeta[: t + 1].T / n)[None, None]
    zz = (zeta[t] @ zeta[: t + 1].T / n)[None, None]
    controls = None
    if W.shape[0] > 1:
        gw = np.stack([(zeta[nn] @ (g * f)) / n for f in W[1:]])[:, None, :]  # (K, m, k)
        znew = zeta[[t]] if not null_mask[t] else np.zeros((0, n))
        pairs = [W[a] * W[b] for a, b in control_pairs(W.shape[0] - 1)]
        controls = (gw, np.stack([(znew * w) @ zeta[nn].T / n for w in pairs]))  # zw: (P, nk, k)
    return StepMoments(t=t, m=1, gmean=np.zeros((1, 1)), gz=gz, zz=zz, zmean=np.zeros((1, t + 1)),
                       null=np.array([bool(null_mask[t])]), null_mask=null_mask[: t + 1].copy(),
                       L=np.eye(t + 1), D=None, R_row=np.zeros((1, t)), eta_over_delta=0.1,
                       L_nonnull=np.eye(nn.size), controls=controls)


def test_controlled_coefficients_are_the_joint_least_squares() -> None:
    """With controls the incremental Cholesky holds the Gram of every ``w_a ζ^u`` (``w_0 = 1``,
    ``w_k`` the label functions), and the estimate is the ``ζ`` block of the joint least
    squares: against ``numpy.linalg.lstsq`` on the whole design at every step, null steps
    included (they are left out of the design)."""
    rng = np.random.default_rng(1)
    T, n = 10, 3000
    null_steps = {2, 5, 6}
    zeta = rng.standard_normal((T + 1, n))
    zeta[sorted(null_steps)] = 0.0
    y = rng.standard_normal(n) ** 2
    F = label_controls(y)
    W = np.vstack([np.ones(n), F])
    est = SteinResponse(n_batches=1, batch_size=n, steps=T, m=1, antithetic=True, regression=True,
                        p_ratio=1.0, n_controls=F.shape[0])
    null_mask = np.zeros(T + 1, dtype=bool)
    for t in range(T + 1):
        null_mask[t] = t in null_steps
        s = zeta[: t + 1].sum(axis=0)
        g = np.tanh(s) * (1 + 0.5 * y) + 0.1 * rng.standard_normal(n)
        gam, _ = est.row(_step(t, zeta, g, null_mask, W))
        nn = np.flatnonzero(~null_mask[: t + 1])
        X = np.stack([w * zeta[u] for u in nn for w in W], axis=1)  # columns ordered (u, a)
        coef = np.linalg.lstsq(X, g, rcond=None)[0].reshape(nn.size, W.shape[0])[:, 0]
        np.testing.assert_allclose(gam[0, nn], coef, rtol=1e-8, atol=1e-11)
        assert np.all(gam[0, null_mask[: t + 1]] == 0.0)
    assert est.regressed.all()


def test_controls_lower_the_noise_and_keep_the_mean() -> None:
    """On samples whose slope in ``ζ`` grows with the label (``g = (1 + y) ζ + 0.2 e``,
    ``y = x²`` independent of ``ζ``), both estimators target the slope of the sample,
    ``1 + ȳ`` (the label functions are centred on the sample, as every path average of the
    DMFT is). Over 200 replicates both errors have mean zero (within 4 standard errors), and
    with the controls the error's spread is at least five times smaller: the label part of
    the slope leaves the residual, whose variance falls from about ``Var(y) = 2`` to 0.04.
    Reference: the closed form ``1 + ȳ`` of each replicate."""
    rng = np.random.default_rng(2)
    n, reps = 2000, 200
    plain, ctl = [], []
    for _ in range(reps):
        zeta = rng.standard_normal((1, n))
        y = rng.standard_normal(n) ** 2
        g = (1.0 + y) * zeta[0] + 0.2 * rng.standard_normal(n)
        W = np.vstack([np.ones(n), label_controls(y)])
        for out, k in ((plain, 0), (ctl, 2)):
            est = SteinResponse(n_batches=1, batch_size=n, steps=0, m=1, antithetic=True,
                                regression=True, p_ratio=1.0, n_controls=k)
            gam, _ = est.row(_step(0, zeta, g, np.zeros(1, dtype=bool), W[: k + 1]))
            out.append(gam[0, 0] - (1.0 + y.mean()))
    plain, ctl = np.array(plain), np.array(ctl)
    for err in (plain, ctl):
        assert abs(err.mean()) < 4 * err.std(ddof=1) / np.sqrt(reps)
    assert ctl.std(ddof=1) < 0.2 * plain.std(ddof=1)


def test_stein_controls_need_the_regression_and_pooled_paths() -> None:
    with pytest.raises(ValueError, match="stein_controls=True needs method='stein', stein_regression=True"):
        DMFTSettings(stein_controls=True)
    with pytest.raises(ValueError, match="errors='batch'"):
        DMFTSettings(stein_controls=True, stein_regression=True, errors="batch")
    DMFTSettings(stein_controls=True, stein_regression=True, errors="none")


def test_stein_controls_refuse_a_label_that_differs_between_copies() -> None:
    """Reflected copies of ``V* → −V*`` carry the same label only if the label is even in the
    reflected direction; ``z + z²`` is not."""
    p = Problem.build(target="z + z**2", activation="gelu", eta=0.5, steps=4)
    with pytest.raises(ValueError, match="same label on every copy"):
        solve_dmft(p, 4.0, n_paths=400, reflect=(0,), errors="none", test_loss="none", seed=0,
                   stein_regression=True, stein_controls=True)


def test_a_run_with_controls_follows_the_run_without() -> None:
    """Restricted float64 runs of GeLU on ``z²`` (δ = 8, 8000 paths, 40 steps) with and without
    the controls on the same eight seeds: two estimators of the same ``E[g ζᵀ]``, so
    ``Q(40, 40)`` has the same mean. The paired differences average within three of their
    standard errors of zero (the seeds' own spread of ``Q(40, 40)`` is about 4 %, and the
    pairs' standard error under 1 % of ``Q``), and the regression is active throughout."""
    p = Problem.build(target="z**2", activation="gelu", eta=0.5, steps=40).replace(hold_zero=[0])
    kw = dict(n_paths=8000, reflect=(0,), errors="none", test_loss="none", stein_regression=True)
    diffs, q = [], []
    for seed in range(8):
        a = solve_dmft(p, 8.0, seed=seed, **kw)
        b = solve_dmft(p, 8.0, seed=seed, stein_controls=True, **kw)
        assert a.ok and b.ok
        assert np.asarray(b.diagnostics["stein_regressed"]).all()
        diffs.append(b.q_diag[-1, 0, 0] - a.q_diag[-1, 0, 0])
        q.append(a.q_diag[-1, 0, 0])
    se = np.std(diffs, ddof=1) / np.sqrt(len(diffs))
    assert se < 0.01 * np.mean(q)
    assert abs(np.mean(diffs)) < 3 * se
    assert np.mean(q) - 1.0 > 0.5  # the kernels moved from Q(0, 0) = 1
    assert b.settings["stein_controls"] is True


def test_crossfit_is_the_closed_form_of_the_two_halves() -> None:
    """``½ Σ_h [S_h − β_{h'} (G_h − I)]`` with ``β_{h'} = S_{h'} G_{h'}⁻¹``, against the same
    formula in numpy on the two halves of synthetic columns, at every step (null steps
    included); the pooled plain mean is the mean of the halves' moments."""
    rng = np.random.default_rng(3)
    T, n = 8, 4000
    null_steps = {3, 4}
    zeta = rng.standard_normal((T + 1, n))
    zeta[sorted(null_steps)] = 0.0
    est = SteinResponse(n_batches=1, batch_size=n, steps=T, m=1, antithetic=True, regression=True,
                        p_ratio=1.0, crossfit=True)
    null_mask = np.zeros(T + 1, dtype=bool)
    h = n // 2
    for t in range(T + 1):
        null_mask[t] = t in null_steps
        g = np.tanh(zeta[: t + 1].sum(axis=0)) * (1 + 0.3 * zeta[0] ** 2) + 0.1 * rng.standard_normal(n)
        nn = np.flatnonzero(~null_mask[: t + 1])
        halves = []
        for cols in (slice(0, h), slice(h, n)):
            gz = zeta[nn][:, cols] @ g[cols] / h
            zz = np.zeros(nn.size) if null_mask[t] else zeta[nn][:, cols] @ zeta[t, cols] / h
            halves.append(np.stack([gz, zz]))
        step = _step(t, zeta, g, null_mask, np.ones((1, n)))
        step = dataclasses.replace(step, halves=tuple(halves))
        gam, _ = est.row(step)
        S = [zeta[nn][:, c] @ g[c] / h for c in (slice(0, h), slice(h, n))]
        G = [zeta[nn][:, c] @ zeta[nn][:, c].T / h for c in (slice(0, h), slice(h, n))]
        beta = [np.linalg.solve(G[i], S[i]) for i in range(2)]
        ref = sum(S[i] - (G[i] - np.eye(nn.size)) @ beta[1 - i] for i in range(2)) / 2
        np.testing.assert_allclose(gam[0, nn], ref, rtol=1e-8, atol=1e-11)
    assert est.regressed.all()


def test_stein_crossfit_needs_the_regression_and_not_the_controls() -> None:
    with pytest.raises(ValueError, match="stein_crossfit=True needs method='stein', stein_regression=True"):
        DMFTSettings(stein_crossfit=True, errors="none")
    with pytest.raises(ValueError, match="stein_controls=True"):
        DMFTSettings(stein_crossfit=True, stein_controls=True, stein_regression=True, errors="none")
    cfg = DMFTSettings(stein_crossfit=True, stein_regression=True, errors="none")
    assert cfg.to_dict()["stein_crossfit"] is True


def test_stein_controls_refuse_a_label_with_too_few_values() -> None:
    """``z² > 1`` as 0/1 has two values: one label function, where the estimator holds two."""
    p = Problem.build(target="Heaviside(z**2 - 1)", activation="gelu", eta=0.5, steps=4)
    with pytest.raises(ValueError, match="three values or more"):
        solve_dmft(p, 4.0, n_paths=400, reflect=(0,), errors="none", test_loss="none", seed=0,
                   stein_regression=True, stein_controls=True)


def test_stein_crossfit_memory_counts_both_halves() -> None:
    """Two Cholesky factors and two Grams: four times the one estimate's store."""
    kw = dict(n_paths=1000, n_batches=1, steps=9, m=1, regression=True)
    assert SteinResponse.memory_bytes(**kw, crossfit=True) == 4 * SteinResponse.memory_bytes(**kw)
