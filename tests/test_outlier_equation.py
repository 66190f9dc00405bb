"""Outliers along hard directions (``dmftsolve.hessian.outlier_equation``): reference numbers,
the overlap formula, random matrices."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import build_hessian
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.polynomial.hermite_e import hermegauss

from dmftsolve.hessian import outlier_equation as oe
from dmftsolve.hessian._resolvent import prepare_law
from dmftsolve.hessian.outlier_equation import outlier_matrix, outliers, spike_coordinates, training_outliers
from dmftsolve.hessian.spectrum import edges, stieltjes_trace
from dmftsolve.results import SolverError, Status


def gauss_hermite(n: int) -> tuple[np.ndarray, np.ndarray]:
    z, w = hermegauss(n)
    return z, w / w.sum()


def tanh_law(n: int = 160) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """D = tanh(1 − z²) with z ~ N(0, 1) on Gauss–Hermite nodes (paper-reconstruction §5.3)."""
    z, w = gauss_hermite(n)
    return np.tanh(1 - z**2), z, w


def rotating_law(z: np.ndarray) -> np.ndarray:
    """m = 2, non-commuting: D(y) = Q(y/3) diag(tanh(1 − y), 1/2) Q(y/3)ᵀ with y = z²."""
    y = z**2
    c, s = np.cos(y / 3), np.sin(y / 3)
    Q = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)
    eig = np.stack([np.tanh(1 - y), np.full_like(y, 0.5)], -1)
    return np.einsum("iab,ib,icb->iac", Q, eig, Q)


# ----------------------------------------------------------------------------- reference numbers
@pytest.mark.parametrize(
    ("delta", "location"),
    # paper-reconstruction.md §5.3 table ("theory outlier"; δ = 0.5: none)
    [(0.5, None), (1.0, -1.709), (2.0, -1.093), (4.0, -0.809)],
)
def test_tanh_law_outliers(delta: float, location: float | None) -> None:
    D, z, w = tanh_law()
    res = outliers(D, z, delta, weights=w)
    assert res.ok
    if location is None:
        assert res.outliers == [] and res.message == ""
        assert res.diagnostics["left_min_eig_M_at_scan_end"] > 0
        return
    (o,) = res.outliers
    assert o.location == pytest.approx(location, abs=1e-3)
    assert o.bracket[0] <= o.location <= o.bracket[1]
    assert o.residual < 1e-10
    assert 0 < o.overlap2 < 1
    assert o.location < res.left_edge
    # the scalar secular equation of docs/theory.md §4.2: 1/s + E[(z² − 1) D/(1 + sD/δ)] = 0
    s = stieltjes_trace(D, delta, o.location, weights=w).real
    assert 1 / s + w @ ((z**2 - 1) * D / (1 + s * D / delta)) == pytest.approx(0.0, abs=1e-8)
    json.dumps(res.to_dict())


def test_two_latent_directions_reference() -> None:
    """literature.md §2.2: W = tanh(z1² + 0.8 z1 z2 − 1) + 0.3 tanh(3 z2), k = 2, δ = 3.

    Reference: edges [−1.2710, 0.8029], right outlier 0.9629 with ‖Uᵀv‖² = 0.538 and
    direction (−0.942, −0.336) in span(U); no left outlier.
    """
    g, gw = gauss_hermite(80)
    z = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    w = np.outer(gw, gw).reshape(-1)
    W = np.tanh(z[:, 0] ** 2 + 0.8 * z[:, 0] * z[:, 1] - 1) + 0.3 * np.tanh(3 * z[:, 1])
    res = outliers(W, z, 3.0, weights=w, side="both", unbounded_below=False, unbounded_above=False)
    assert res.left_edge == pytest.approx(-1.2710, abs=2e-4)
    assert res.right_edge == pytest.approx(0.8029, abs=2e-4)
    (o,) = res.outliers
    assert o.side == "right"
    assert o.location == pytest.approx(0.9629, abs=2e-4)
    assert o.overlap2 == pytest.approx(0.538, abs=1e-3)
    a = o.direction.reshape(-1) * np.sign(-o.direction[0, 0])
    np.testing.assert_allclose(a, [-0.942, -0.336], atol=2e-3)


def test_right_outliers_mirror_left_outliers() -> None:
    D, z, w = tanh_law(100)
    left = outliers(D, z, 2.0, weights=w)
    right = outliers(-D, z, 2.0, lam=-0.3, weights=w, side="right")
    (a,), (b,) = left.outliers, right.outliers
    assert b.location == pytest.approx(-a.location - 0.3, abs=1e-10)
    assert b.overlap2 == pytest.approx(a.overlap2, abs=1e-10)
    assert right.right_edge == pytest.approx(-left.left_edge - 0.3, abs=1e-10)


# ----------------------------------------------------------------------------- the overlap formula
@pytest.mark.parametrize(("x", "kind"), [(-1.2, "m1"), (1.6, "m1"), (-0.9, "m2"), (1.9, "m2")])
def test_derivative_of_outlier_matrix(x: float, kind: str) -> None:
    """M'(x) = −I + E[zzᵀ ⊗ A'] with A' = δ B R' Bᵀ, R' = −(I − K)^{-1} I, vs central differences."""
    z, w = gauss_hermite(60)
    if kind == "m1":
        D, zz = np.tanh(1 - z**2), z
    else:  # m = 2 with k = 2 hard coordinates (z, z² − 1)
        D, zz = rotating_law(z), np.stack([z, (z**2 - 1) / math.sqrt(2)], 1)
    delta, h = 2.0, 1e-5
    M, dM = outlier_matrix(D, zz, delta, x, weights=w, derivative=True)
    fd = (outlier_matrix(D, zz, delta, x + h, weights=w) - outlier_matrix(D, zz, delta, x - h, weights=w)) / (
        2 * h
    )
    np.testing.assert_allclose(M, M.T, atol=1e-12)
    np.testing.assert_allclose(dM, fd, rtol=1e-6, atol=1e-7)


def test_overlap_matches_literature_formula() -> None:
    """m = k = 1: overlap² = 1/(1 + Σ'(x)), Σ(x) = E[D² (s/δ) z²/(1 + D s/δ)] (literature.md §2.2)."""
    D, z, w = tanh_law(100)
    delta = 2.0
    (o,) = outliers(D, z, delta, weights=w).outliers

    def sigma(x: float) -> float:
        s = stieltjes_trace(D, delta, x, weights=w).real
        return float(w @ (D**2 * (s / delta) * z**2 / (1 + D * s / delta)))

    h = 1e-6
    expected = 1 / (1 + (sigma(o.location + h) - sigma(o.location - h)) / (2 * h))
    assert o.overlap2 == pytest.approx(expected, abs=1e-7)


# ----------------------------------------------------------------------------- random matrices
def _tanh(z: np.ndarray) -> np.ndarray:
    """The one-neuron law D = tanh(1 − z²) of the random-matrix tests."""
    return np.tanh(1 - z**2)


def _sampled_hessian(d: int, delta: float, seed: int, law):
    """Gaussian data X (n = δd rows), D = law(x_0) per sample, and the eigenpairs of the
    Hessian ``build_hessian(X, D)`` (D given a trailing m × m block when it is one-neuron)."""
    X = np.random.default_rng(seed).standard_normal((int(delta * d), d))
    D = law(X[:, 0])
    ev, V = np.linalg.eigh(build_hessian(X, D[:, None, None] if D.ndim == 1 else D))
    return X, D, ev, V


def test_random_matrix_outlier_m1() -> None:
    """D_i = tanh(1 − z_i²), z_i = x_i[0], δ = 4, d = 400.

    Population theory (GH quadrature): −0.809, overlap² 0.692 (paper-reconstruction §5.3 has
    −0.809 vs −0.798 at d = 1500). The plug-in law (the realised (D_i, z_i)) removes most of the
    sample-to-sample fluctuation of the tail of D; with seeds 0–2 at d = 500 the plug-in was
    within 0.007 of λ_min and the overlap within 0.01.
    """
    d, delta = 400, 4.0
    X, D, ev, V = _sampled_hessian(d, delta, 0, _tanh)
    Dq, zq, wq = tanh_law()
    (pop,) = outliers(Dq, zq, delta, weights=wq).outliers
    (plug,) = outliers(D, X[:, 0], delta).outliers
    assert ev[0] == pytest.approx(pop.location, abs=2 / math.sqrt(d))
    assert ev[0] == pytest.approx(plug.location, abs=0.5 / math.sqrt(d))
    assert V[0, 0] ** 2 == pytest.approx(pop.overlap2, abs=1 / math.sqrt(d))
    assert V[0, 0] ** 2 == pytest.approx(plug.overlap2, abs=0.5 / math.sqrt(d))


def test_random_matrix_outlier_m2() -> None:
    """Non-commuting m = 2 law (rotating_law), δ = 4, d = 250: λ_min, overlap² and direction.

    Population theory: −0.5589, overlap² 0.552, direction ±(−0.508, −0.861); seeds 0–1 at
    d = 300 gave λ_min −0.600 / −0.506 with overlaps 0.593 / 0.559 (plug-in −0.603 / −0.519).
    """
    d, delta = 250, 4.0
    X, D, ev, V = _sampled_hessian(d, delta, 1, rotating_law)
    hard = V.reshape(d, 2, -1)[0, :, 0]  # component of the bottom eigenvector on e_0 ⊗ R²
    zq, wq = gauss_hermite(160)
    (pop,) = outliers(rotating_law(zq), zq, delta, weights=wq).outliers
    (plug,) = outliers(D, X[:, 0], delta).outliers
    assert pop.location == pytest.approx(-0.5589, abs=1e-3)
    assert ev[0] == pytest.approx(pop.location, abs=2 / math.sqrt(d))
    assert ev[0] == pytest.approx(plug.location, abs=0.5 / math.sqrt(d))
    assert hard @ hard == pytest.approx(plug.overlap2, abs=1 / math.sqrt(d))
    cos = abs(hard @ plug.direction.reshape(-1)) / np.linalg.norm(hard)
    assert cos > 0.98


def test_random_matrix_without_outlier() -> None:
    """δ = 0.5: no outlier in theory; the bottom eigenvector is delocalised from e_0."""
    d, delta = 400, 0.5
    X, D, ev, V = _sampled_hessian(d, delta, 2, _tanh)
    Dq, zq, wq = tanh_law()
    res = outliers(Dq, zq, delta, weights=wq)
    assert res.outliers == []
    assert ev[0] == pytest.approx(res.left_edge, abs=2 / math.sqrt(d))
    assert V[0, 0] ** 2 < 0.1


# ----------------------------------------------------------------------------- failure modes
def test_unbounded_law_is_ill_posed() -> None:
    rng = np.random.default_rng(3)
    z = rng.standard_normal(20_000)
    D = 1 - z**2  # unbounded below
    with pytest.raises(SolverError, match="unbounded below"):
        outliers(D, z, 2.0)
    res = outliers(D, z, 2.0, throw=False, side="both")
    assert res.status is Status.FAILED and res.left_edge is None
    assert res.right_edge is not None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"z": np.ones(5)}, "z must have shape (N,) or (N, k) with N=4"),
        ({"z": np.array([0.0, 1.0, math.nan, 2.0])}, "z must be finite"),
        ({"side": "up"}, "side must be 'left', 'right' or 'both', got 'up'"),
        ({"npoints": 3}, "npoints must be an integer >= 16, got 3"),
        ({"edge_gap": -1.0}, "edge_gap must be > 0"),
        ({"delta": -2.0}, "delta must be > 0, got -2.0"),
    ],
)
def test_bad_input_names_parameter(kwargs: dict, needle: str) -> None:
    args = {"D": np.array([1.0, -1.0, 0.5, 0.2]), "z": np.array([0.1, 1.0, -1.0, 2.0]), "delta": 2.0}
    args |= kwargs
    with pytest.raises(ValueError) as info:
        outliers(args.pop("D"), args.pop("z"), args.pop("delta"), **args)
    assert needle in str(info.value)


def test_outlier_matrix_rejects_points_inside_the_bulk() -> None:
    D, z, w = tanh_law(60)
    with pytest.raises(ValueError, match="x must lie outside the bulk"):
        outlier_matrix(D, z, 2.0, 0.0, weights=w)


# ----------------------------------------------------------------------------- learned directions
def _learned_law(q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tensor Gauss–Hermite law of (z, V = √q u): D = 4 tanh(V²/4) − 0.9 min(z², 3)."""
    x, w = gauss_hermite(90)
    z, u = (a.ravel() for a in np.meshgrid(x, x, indexing="ij"))
    ww = np.outer(w, w).ravel()
    V = math.sqrt(q) * u
    return 4 * np.tanh(V**2 / 4) - 0.9 * np.minimum(z**2, 3), z, V, ww


def test_training_outliers_match_a_fixed_spike_random_matrix() -> None:
    """A W independent of X (t = 0): the spiked-model equation over span(θ*, w) is exact.

    Reference: dense eigenpairs of (1/n) Σ D_i x_i x_iᵀ at d = 1200, δ = 4, three seeds; D
    depends on x_i through z_i = x_i[0] (hard) and V_i = √q ŵᵀx_i (a random unit ŵ). The
    lowest eigenpair lies along the hard direction, the highest along ŵ. Tolerance: three
    standard errors of the three-seed mean (spread per seed ≈ 0.07 at d = 800–1500) plus 1/√d.
    """
    q, delta, d = 2.0, 4.0, 1200
    D, z, V, w = _learned_law(q)
    res = training_outliers(D, z, V, np.zeros((1, 1)), [[q]], delta, hard=(0,), weights=w,
                            unbounded_below=False, unbounded_above=False)
    assert [o.side for o in res.outliers] == ["left", "right"]
    low, high = res.outliers
    assert low.parts["hard"] == pytest.approx(low.overlap2, abs=1e-6)
    assert high.parts["learned"] == pytest.approx(high.overlap2, abs=1e-6)
    for o in res.outliers:
        assert sum(o.parts.values()) == pytest.approx(o.overlap2, rel=1e-9)
    n = int(delta * d)
    lows, highs = [], []
    for seed in range(3):
        g = np.random.default_rng(500 + seed)
        X = g.standard_normal((n, d))
        wdir = g.standard_normal(d)
        wdir /= np.linalg.norm(wdir)
        Di = 4 * np.tanh(q * (X @ wdir) ** 2 / 4) - 0.9 * np.minimum(X[:, 0] ** 2, 3)
        ev, U = np.linalg.eigh((X.T * Di) @ X / n)
        lows.append((ev[0], U[0, 0] ** 2))
        highs.append((ev[-1], float(U[:, -1] @ wdir) ** 2))
    tol = 3 * 0.07 / math.sqrt(3) + 1 / math.sqrt(d)
    assert np.mean([a for a, _ in lows]) == pytest.approx(low.location, abs=tol)
    assert np.mean([a for a, _ in highs]) == pytest.approx(high.location, abs=tol)
    assert np.mean([b for _, b in lows]) == pytest.approx(low.overlap2, abs=0.08)
    assert np.mean([b for _, b in highs]) == pytest.approx(high.overlap2, abs=0.08)


def _m2_law(V: np.ndarray, z: np.ndarray) -> np.ndarray:
    """m = 2, D depends on both learned coordinates and (smoothly, for quadrature) on the hard one."""
    D = np.zeros((V.shape[0], 2, 2))
    D[:, 0, 0] = 4 * np.tanh(V[:, 0] ** 2 / 4) - 1.8 * np.tanh(z**2 / 3)
    D[:, 1, 1] = 1.0 - 1.8 * np.tanh(z**2 / 3) + 0.5 * np.tanh(V[:, 1])
    D[:, 0, 1] = D[:, 1, 0] = 0.3 * np.tanh(V[:, 0] * V[:, 1])
    return D


def _check_m2_fixed_spikes(nodes: int, d: int, n_seeds: int, quad_err: tuple[float, float]) -> None:
    """m = 2, W = two fixed directions (Gram Q): the lowest eigenpair is hard, the highest learned.

    Theory: a ``nodes``³ tensor Gauss–Hermite law of (z, u1, u2), V = L u, within ``quad_err``
    (location, overlap²) of the 26³-node values. Reference: dense eigenpairs of the (2d × 2d)
    Hessian at δ = 4 over ``n_seeds`` seeds. Tolerances scale like C/√d: the seed-to-seed spread
    of the locations is about 0.07 at d = 700 (so 0.07·√(700/d)); the location tolerance is three
    standard errors of the seed mean plus 1/√d, the overlap² tolerance 1.96/√d (0.08 at d = 600);
    both plus the quadrature error.
    """
    delta = 4.0
    Q = np.array([[1.5, 0.4], [0.4, 1.0]])
    L = np.linalg.cholesky(Q)
    x, w = gauss_hermite(nodes)
    z, u1, u2 = (a.ravel() for a in np.meshgrid(x, x, x, indexing="ij"))
    ww = np.einsum("i,j,k->ijk", w, w, w).ravel()
    V = np.column_stack([u1, u2]) @ L.T
    res = training_outliers(_m2_law(V, z), z, V, np.zeros((1, 2)), Q, delta, hard=(0,), weights=ww,
                            unbounded_below=False, unbounded_above=False)
    low, high = res.outliers
    assert low.parts["hard"] > 0.99 * low.overlap2 and high.parts["learned"] > 0.99 * high.overlap2
    n = int(delta * d)
    got = []
    for seed in range(n_seeds):
        g = np.random.default_rng(40 + seed)
        X = g.standard_normal((n, d))
        B = np.linalg.qr(g.standard_normal((d, 2)))[0]
        B[0] = 0.0
        B = np.linalg.qr(B)[0]  # orthonormal, orthogonal to the hard axis
        W = B @ L.T  # WᵀW = Q
        ev, U = np.linalg.eigh(build_hessian(X, _m2_law(X @ W, X[:, 0])))
        Uv = U.reshape(d, 2, -1)
        got.append((ev[0], (Uv[0, :, 0] ** 2).sum(), ev[-1],
                    (np.einsum("dk,dm->km", B, Uv[:, :, -1]) ** 2).sum()))
    lo, lo_ov, hi, hi_ov = np.mean(got, axis=0)
    tol = 3 * 0.07 * math.sqrt(700 / d) / math.sqrt(n_seeds) + 1 / math.sqrt(d) + quad_err[0]
    tol_ov = 1.96 / math.sqrt(d) + quad_err[1]
    assert lo == pytest.approx(low.location, abs=tol) and hi == pytest.approx(high.location, abs=tol)
    assert lo_ov == pytest.approx(low.overlap2, abs=tol_ov)
    assert hi_ov == pytest.approx(high.overlap2, abs=tol_ov)


@pytest.mark.slow
def test_training_outliers_m2_fixed_spikes_random_matrix() -> None:
    """20³ nodes (locations within 1e-3 of 26³), d = 600, three seeds (about 20 s: the quadrature)."""
    _check_m2_fixed_spikes(20, 600, 3, (1e-3, 1e-3))


def test_training_outliers_m2_fixed_spikes_random_matrix_small() -> None:
    """Fast twin: 12³ nodes, d = 300, six seeds.

    The 12³-node outliers differ from the 20³-node ones by 0.007 (location) and 0.019
    (overlap²), measured; quad_err covers that plus the 20³ error.
    """
    _check_m2_fixed_spikes(12, 300, 6, (0.01, 0.025))


def test_training_outliers_hard_part_equals_hard_only_outliers() -> None:
    """Sign symmetry (y even in z, V independent of z): adding span(w) leaves the hard outlier."""
    D, z, V, w = _learned_law(1.0)
    both = training_outliers(D, z, V, np.zeros((1, 1)), [[1.0]], 4.0, hard=(0,), weights=w,
                             unbounded_below=False, unbounded_above=False)
    hard = outliers(D, z, 4.0, weights=w, unbounded_below=False)
    assert both.outliers[0].location == pytest.approx(hard.outliers[0].location, rel=1e-8)
    assert both.outliers[0].overlap2 == pytest.approx(hard.outliers[0].overlap2, rel=1e-6)


def test_spike_coordinates_whiten_the_learned_part() -> None:
    """With M ≠ 0 the learned columns are the unit-variance part of V orthogonal to V*."""
    g = np.random.default_rng(3)
    N, k, m = 200_000, 2, 2
    Vs = g.standard_normal((N, k))
    M = np.array([[0.7, -0.2], [0.0, 0.4]])
    Q = np.array([[1.5, 0.3], [0.3, 0.5]])
    V = Vs @ M + g.standard_normal((N, m)) @ np.linalg.cholesky(Q).T
    z = spike_coordinates(Vs, V, M, Q)
    assert z.shape == (N, k + m)
    np.testing.assert_array_equal(z[:, :k], Vs)
    C = z.T @ z / N
    np.testing.assert_allclose(C, np.eye(k + m), atol=5 * 3 / math.sqrt(N))
    # rank-deficient Q: one learned column
    assert spike_coordinates(Vs, np.column_stack([V[:, 0], V[:, 0]]), np.zeros((k, m)),
                             np.ones((2, 2))).shape == (N, k + 1)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"M": np.zeros((2, 1))}, "M must have shape"),
    ({"Q": np.ones((2, 2))}, "Q must be a finite"),
    ({"hard": (3,)}, "hard must hold indices"),
])
def test_training_outliers_bad_input(kwargs: dict, needle: str) -> None:
    D, z, V, _ = _learned_law(1.0)
    args = {"M": np.zeros((1, 1)), "Q": [[1.0]], "hard": (0,)} | kwargs
    with pytest.raises(ValueError, match=needle):
        training_outliers(D, z, V, args["M"], args["Q"], 4.0, hard=args["hard"])


@settings(max_examples=8, deadline=None)
@example(c=(0.5, 2.0, -0.9), q=1.0, delta=4.0)
@example(c=(0.0, 1.0, 0.5), q=2.0, delta=4.0)  # scan grid with two points an ulp apart (fixed 2026-12-02)
@given(c=st.tuples(st.floats(-1.0, 1.0), st.floats(0.3, 3.0) | st.floats(-3.0, -0.3),
                   st.floats(0.3, 2.0) | st.floats(-2.0, -0.3)),
       q=st.floats(0.2, 3.0), delta=st.floats(1.5, 8.0))
def test_training_outlier_parts_are_a_partition(c: tuple[float, float, float], q: float,
                                                delta: float) -> None:
    """Invariants on smooth laws D = c0 + c1 tanh(V²) + c2 tanh(z²): every outlier has
    0 < overlap² ≤ 1, parts ≥ 0 summing to overlap²; by the sign symmetry z → −z (V
    independent of z) the hard and learned parts never mix. (|c1|, |c2| ≥ 0.3 keeps the law
    away from a subnormal constant, D ≡ 3e-307, where the right-edge march loses the real
    branch; D ≡ 0, 1e-12 and 0.5 give the Marchenko–Pastur edges and no outlier.)"""
    x, w = gauss_hermite(30)
    z, u = (a.ravel() for a in np.meshgrid(x, x, indexing="ij"))
    ww = np.outer(w, w).ravel()
    V = math.sqrt(q) * u
    D = c[0] + c[1] * np.tanh(V**2) + c[2] * np.tanh(z**2)
    res = training_outliers(D, z, V, np.zeros((1, 1)), [[q]], delta, hard=(0,), weights=ww,
                            unbounded_below=False, unbounded_above=False)
    for o in res.outliers:
        assert 0 < o.overlap2 <= 1 + 1e-9
        assert min(o.parts.values()) >= -1e-12
        assert sum(o.parts.values()) == pytest.approx(o.overlap2, rel=1e-9, abs=1e-12)
        assert min(o.parts["hard"], o.parts["learned"]) <= 1e-6 * o.overlap2


# ----------------------------------------------------------------------------- islands left of the bulk
def island_law(n_island: int, d_island: float, big: float, n: int = 10_000) -> np.ndarray:
    """``n`` samples of D: ``n_island`` at ``d_island`` (an island left of the bulk), one at
    ``big`` (it sets the top of the support and so the edge march's first step cap), the rest at 1."""
    return np.concatenate([np.full(n - n_island - 1, 1.0), np.full(n_island, d_island), [big]])


ISLANDS = [(10, -3.0, 500.0), (5, -3.0, 2000.0), (20, -2.0, 1000.0)]


@pytest.mark.parametrize(("n_island", "d_island", "big"), ISLANDS)
def test_march_edge_finds_the_island(n_island: int, d_island: float, big: float) -> None:
    """Reference: the Silverstein–Choi edge (m = 1: Brent on ψ', an independent method).
    Before the march's refining passes it stopped at 0.034 (stepped over the island) or at the
    big sample's fold (1302 and 651: stepped over the whole bulk)."""
    D = island_law(n_island, d_island, big)
    lo_sc, _ = edges(D, 1.5, method="sc")
    lo_march, _ = edges(D, 1.5, method="march")
    scale = prepare_law(D, 1.5, 0.0, None).scale
    assert lo_sc < -0.5  # the island is left of the bulk, which starts near 0.03
    assert lo_march == pytest.approx(lo_sc, abs=1e-9 * scale)
    # and in m = 2, D = diag(island law, 1): H splits into two m = 1 blocks sharing x_i, so its
    # left edge is the smaller of the two Silverstein–Choi edges (2000 samples: m = 2 is slower)
    d = island_law(max(n_island // 5, 1), d_island, big, n=2000)
    D2 = np.zeros((d.size, 2, 2))
    D2[:, 0, 0], D2[:, 1, 1] = d, 1.0
    lo2, _ = edges(D2, 1.5)
    ref2 = min(edges(d, 1.5, method="sc")[0], edges(np.ones(d.size), 1.5, method="sc")[0])
    assert ref2 < -0.5
    assert lo2 == pytest.approx(ref2, abs=1e-9 * prepare_law(D2, 1.5, 0.0, None).scale)


@pytest.mark.parametrize("wrong", ["bulk_fold", "far_right"])
def test_outlier_scan_corrects_an_edge_that_stepped_over_an_island(
    monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    """The scan re-checks the edge on its own grid. Fed the edge a march that stepped over the
    island would give (the bulk's fold near 0.034, or a point far right inside the bulk), it must
    move the edge to the island's fold: the Silverstein–Choi edge."""
    D = island_law(*ISLANDS[0])
    lo_sc, _ = edges(D, 1.5, method="sc")
    bad = 0.0337 if wrong == "bulk_fold" else 300.0
    monkeypatch.setattr(oe, "left_edge", lambda law, method, **kw: (bad, {"edge_method": "test"}))
    res = outliers(D, np.ones(D.size), 1.5, side="left")
    scale = prepare_law(D, 1.5, 0.0, None).scale
    assert res.ok, res.message
    assert res.left_edge == pytest.approx(lo_sc, abs=1e-9 * scale)
    moves = res.diagnostics["left_edge_corrections"]
    assert moves[0]["march_edge"] == bad and moves[-1]["fold"] == res.left_edge
    assert all(mv["rho"] > oe.FOLD_RHO for mv in moves)
