"""Discrete-time DMFT of full-batch gradient descent (``THEORY.md`` §2).

The limit ``n, d → ∞``, ``n/d = δ`` of GD on a two-layer network with ``m``
hidden units and a ``k``-index target is described by

* a **parameter process** ``ω^t ∈ R^m`` (a row of ``√d W^t_⊥``), linear and
  Gaussian::

      ω^{t+1} = (1 − ηλ) ω^t − η [ ν^t + Σ_{s≤t} Γ(t,s) ω^s ],
      Cov(ν^t, ν^s) = Cν(t,s) = (1/δ) E[g^t g^{sᵀ}];

* a **sample process** (one training sample), non-linear with memory::

      V^t = M_tᵀ V* + U^t + b_t,   U^t = Ξ^t − (η/δ) Σ_{s<t} R(t,s+1) g^s,
      g^t = g(y, V^t),   (Ξ^t) ~ N(0, Q),   Q(t,s) = E[ω^t ω^{sᵀ}];

* kernels ``Γ(t,s) = E[∂g^t/∂Ξ^s]`` (response of the sample side),
  ``R`` (response of the parameter side, ``R(s,s) = I``,
  ``R(t+1,s) = (1−ηλ)R(t,s) − η Σ_{u=s}^{t} Γ(t,u) R(u,s)``) and overlaps
  ``M_{t+1} = (1 − ηλ) M_t − η E[V* g^{tᵀ}]``.

* with a trained bias (``problem.bias``), a deterministic ``b_t ∈ R^m``,
  ``b_0 = 0``, ``b_{t+1} = b_t − η E[g^t]`` (no ridge); otherwise ``b_t = 0``.
  The kernel recursions keep their form: ``b`` enters only through ``g`` and
  ``D`` evaluated at the shifted ``V^t``.

The scheme is causal and solved in one forward pass (:func:`solve_dmft`).

Parameter side (deterministic linear algebra, not sampled)
    With ``φ^t = λω^t + ν^t + Σ_s Γ(t,s) ω^s`` the (√d-scaled) orthogonal
    part of the gradient, ``ω^{t+1} = ω^t − η φ^t`` and, since
    ``E[ν^t ω^{uᵀ}] = −η Σ_{b<u} Cν(t,b) R(u,b+1)ᵀ =: N(u)``::

        E[φ^t ω^{sᵀ}] = N(s) + Σ_u Γ̃(t,u) Q(u,s)          (Γ̃ = Γ + λ I δ_{u,t})
        E[φ^t φ^{tᵀ}] = Cν(t,t) + N Γ̃ᵀ + Γ̃ Nᵀ + Γ̃ Q Γ̃ᵀ
        Q(t+1,s)      = Q(t,s) − η E[φ^t ω^{sᵀ}]                    (s ≤ t)
        Q(t+1,t+1)    = Q(t,t) − η (E[φ^t ω^{tᵀ}] + ᵀ) + η² E[φ^t φ^{tᵀ}]

    which is equivalent to ``Q(t,s) = R(t,0)Q0R(s,0)ᵀ + η² Σ R(t,a+1) Cν(a,b)
    R(s,b+1)ᵀ`` (checked in the tests) and costs ``O(T² m³)`` per step.

Sample side (Monte Carlo over ``N`` paths)
    ``Ξ^t = Σ_{u≤t} L(t,u) ζ^u`` with standard normal innovations ``ζ^u`` and
    ``L`` the block-lower-triangular Cholesky factor of ``Q``, extended by one
    block row per step. Diagonal blocks are factored by a semidefinite
    Cholesky: a pivot below ``null_rtol · Q(t,t)_jj`` is a *zero-variance
    innovation*; its column of ``L`` and its ``ζ`` component are set to zero
    (so ``Q0 = 0`` or a rank-deficient warm start are handled).

Responses ``Γ`` two ways
    ``method="pathwise"``: ``J(t,s) = ∂V^t/∂Ξ^s`` by forward differentiation,
    ``J(s,s) = I``, ``J(t,s) = −(η/δ) Σ_{u=s}^{t−1} R(t,u+1) D^u J(u,s)``,
    ``Γ(t,s) = E[D^t J(t,s)]``: ``O(N T³ m³)`` time and ``O(N T² m²)`` memory.

    ``method="stein"`` (default): Gaussian integration by parts on the
    innovations, ``E[g^t ζ^{uᵀ}] = Σ_{s≥u} Γ(t,s) L(s,u)``, solved for row
    ``t`` of ``Γ`` by one block triangular solve: ``O(N T² m²)`` time and
    ``O(N T m)`` memory, and no second derivatives. Responses to zero-variance
    innovations are set to zero: Stein's lemma cannot see them. This is exact
    when the only degenerate directions are at ``t = 0`` (``Γ(t,0)`` then acts
    only on ``ω^0``, which has no variance there); a degeneracy at a later time
    (e.g. two units with identical weights forever) makes ``Γ`` differ from the
    pathwise one in directions the process never visits — use ``"pathwise"``
    to get those. Variance reduction: antithetic pairs ``ζ → −ζ`` (same
    ``V*``, ``ε``), which cancel the part of ``g`` even in ``ζ`` (e.g. the
    label), and centring ``g`` by its batch mean.

    **Caveat (measured).** GD trajectories are smooth in ``t``, so the
    innovation variances of ``Ξ`` collapse within a few steps (``~1e-5·Q(t,t)``
    at t = 5 for GeLU, η = 0.5, δ = 4). Stein identifies ``Γ`` only through
    ``E[g^t Ξ^{sᵀ}] = Σ_u Γ(t,u) Q(u,s)``, so in those directions it is pure
    noise (or zero once the innovation is dropped by ``null_rtol``). The
    observables (``Q``, ``M``, losses, cosine) are insensitive to that freedom
    and agree with the simulator (and with the pathwise method wherever its
    noise allows, see below), but the *individual*
    entries of ``Gamma`` and ``R`` from ``"stein"`` are not the physical
    response kernels beyond the first few steps. Use ``method="pathwise"``
    when the kernels themselves are wanted.

    Why the observables are unaffected (gauge argument, exact when ``Q`` is
    exactly singular, approximate with the cutoff): Stein returns some
    ``Γ̃ = Γ + Δ`` with ``Δ Q = 0``. If ``v`` spans the null space of ``Q``
    then ``Σ_s v_s ω^s = 0`` a.s., so ``Γ̃`` and ``Γ`` act identically on the
    parameter process; ``ν`` (and each path's series ``g^·``) lies in the range
    of ``Cν``, and responses to inputs in that range stay inside the range of
    ``Q``, so ``R̃ h = R h`` for every ``h`` the recursion applies ``R`` to
    (``E[ν ωᵀ]`` and the memory term ``Σ_s R(t,s+1) g^s``). Invariant
    combinations such as ``E[g^t Ξ^{sᵀ}] = Σ_u Γ(t,u) Q(u,s)`` and
    ``Σ_a R(t,a+1) Cg(a,s)`` agree between the two methods (tested); with the
    cutoff the invariance holds up to the dropped variance (``Q(100,100)``
    moved by < 1 % for ``null_rtol`` from 1e-6 to 1e-3).

    **Long times (measured, ``validation/dmft_long_time.py``; GeLU, y = z²,
    hard direction held, δ = 4, η = 0.5).** Stein with 1e5 paths matches GD at
    d = 4000 to ≈ 1 % up to t = 400 (‖w‖² 6.16 ± 0.02 vs 6.14 ± 0.12). The
    Stein ``Q`` carries a finite-``N`` bias of order ``1/N`` (upwards; for
    t ≥ 200 ≈ +8 % at 2e4 paths and ≈ +1.5 % at 1e5 relative to the ``N → ∞``
    fit, which agrees with GD extrapolated to ``d → ∞`` within ~1 %) and a
    seed-to-seed spread far above the
    ``errors="batch"`` error bars (≈ 0.2 at 2e4 paths vs 0.02 reported): use
    ≥ 1e5 paths and ``errors="replicate"`` (or several seeds) for long runs.
    ``"pathwise"`` is *worse* at long times: the per-path ``D^t J(t,s)`` is
    heavy-tailed (kurtosis ~1e4 at t = 60; the largest values come from paths
    where the per-sample loss is concave, ``D < 0``, ~16 % of paths), and its
    ``Q(t,t)`` at t = 50–100 scattered by ±0.5 between seeds at 1e4–7e4 paths
    (4.2–5.8), ~7 % below GD on average at t = 100 with 4e4 paths.

Monte Carlo errors
    ``errors="replicate"`` (default): spread of ``n_batches`` independent
    solves with ``n_paths/n_batches`` paths each, divided by
    ``√n_batches`` — includes the propagation of kernel noise.
    ``errors="batch"``: batch means over the main paths, conditional on
    the kernels of earlier steps (see ``diagnostics["error_model"]``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.linalg as sla

from dmftsolve._blas import blas_threads as blas_threads_limit
from dmftsolve.problem import Problem, check_delta
from dmftsolve.results import ResultBase, SolverError, Status

__all__ = ["DMFTResult", "solve_dmft", "largest_cosine"]

Method = Literal["stein", "pathwise"]

#: Memory (bytes) above which the pathwise response store is refused.
PATHWISE_MAX_BYTES = 6 * 2**30


# --------------------------------------------------------------------------- result
@dataclass(repr=False)
class DMFTResult(ResultBase):
    """Output of :func:`solve_dmft`.

    Kernels are indexed by times ``0…T`` and hold ``m×m`` blocks:
    ``Q[t, s] = E[ω^t ω^{sᵀ}]`` (Gram of the part of ``W`` orthogonal to ``Θ*``;
    ``W_tᵀW_s → M_tᵀM_s + Q[t, s]``), ``Gamma[t, s] = E[∂g^t/∂Ξ^s]`` (0 for
    ``s > t``), ``R[t, s]`` (0 for ``s > t``, ``R[s, s] = I``),
    ``Cg[t, s] = E[g^t g^{sᵀ}]``. ``M[t]`` is ``M_t = Θ*ᵀW^t`` (``k×m``).

    Per step (length ``T + 1``): ``train_loss`` ``E[ℓ(y, V^t)]`` (data term,
    no ridge penalty), ``test_loss`` (population loss at ``(M_t, Q(t,t))``),
    ``grad_norm`` ``‖∇L(W^t)‖_F²`` (unprojected gradient of the empirical
    risk including the ridge term), ``cosine`` (largest principal cosine
    between ``span(W^t)`` and ``span(Θ*)``), each with ``*_err`` (batch-means
    standard error, conditional on the earlier kernels).

    ``b`` (shape ``(T+1, m)``) is the trained bias ``b_t`` (exactly zero when
    the problem has ``bias=False``) and ``b_err`` its error; ``grad_norm``
    does not include the bias gradient.
    """

    status: Status
    message: str
    settings: dict[str, Any]
    diagnostics: dict[str, Any]
    elapsed: float
    Q: np.ndarray
    Gamma: np.ndarray
    R: np.ndarray
    Cg: np.ndarray
    M: np.ndarray
    train_loss: np.ndarray
    train_loss_err: np.ndarray
    test_loss: np.ndarray
    test_loss_err: np.ndarray
    grad_norm: np.ndarray
    grad_norm_err: np.ndarray
    cosine: np.ndarray
    cosine_err: np.ndarray
    Gamma_err: np.ndarray
    M_err: np.ndarray
    Q_err: np.ndarray
    b: np.ndarray
    b_err: np.ndarray
    _samples: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        """Number of GD steps ``T``."""
        return self.M.shape[0] - 1

    @property
    def times(self) -> np.ndarray:
        return np.arange(self.steps + 1)

    @property
    def gram(self) -> np.ndarray:
        """``W_tᵀW_t = M_tᵀM_t + Q(t,t)``, shape ``(T+1, m, m)``."""
        Qd = np.einsum("ttab->tab", self.Q)
        return np.einsum("tka,tkb->tab", self.M, self.M) + Qd

    @property
    def q_diag(self) -> np.ndarray:
        """``Q(t,t)``, shape ``(T+1, m, m)``."""
        return np.einsum("ttab->tab", self.Q).copy()

    def samples(self, t: int) -> dict[str, np.ndarray]:
        """Sample-process arrays kept at step ``t`` (see ``keep_samples_at``).

        Returns a dict with ``V`` (N, m) the training pre-activations ``V^t``
        (memory term and bias included), ``Vstar`` (N, k), ``y`` (N,), ``D`` (N, m, m)
        ``= ∇²_V ℓ(y, V^t)``.
        """
        if t not in self._samples:
            kept = sorted(self._samples)
            raise KeyError(f"samples at t={t} were not kept; kept: {kept} (use keep_samples_at)")
        return self._samples[t]

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.pop("_samples", None)
        return d


# --------------------------------------------------------------------------- helpers
def largest_cosine(M: np.ndarray, Q: np.ndarray) -> float:
    """Largest principal cosine between ``span(W)`` and ``span(Θ*)``.

    ``M = Θ*ᵀW`` (``k×m``), ``Q`` the Gram of the orthogonal part (``m×m``).
    With ``G = WᵀW = MᵀM + Q``, an orthonormal basis of ``span(W)`` is
    ``W G^{-1/2}``, so the cosines are the singular values of ``M G^{-1/2}``
    (pseudo-inverse on the null space; 0 when ``W = 0``). For ``m = k = 1``
    this is ``|M|/√(M² + Q)``.
    """
    M = np.atleast_2d(M)
    G = M.T @ M + Q
    G = (G + G.T) / 2
    w, U = np.linalg.eigh(G)
    scale = max(float(w.max(initial=0.0)), 1e-300)
    keep = w > 1e-12 * scale
    if not keep.any():
        return 0.0
    Gih = (U[:, keep] / np.sqrt(w[keep])) @ U[:, keep].T
    s = np.linalg.svd(M @ Gih, compute_uv=False)
    return float(min(1.0, s.max(initial=0.0)))


def _psd_cholesky(S: np.ndarray, ref: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower factor ``L`` with ``L Lᵀ = S`` for PSD ``S``; columns whose pivot is
    ``<= rtol * ref_jj`` are zero. Returns ``(L, null)`` with ``null`` a bool mask."""
    m = S.shape[0]
    L = np.zeros_like(S)
    null = np.zeros(m, dtype=bool)
    for j in range(m):
        piv = S[j, j] - L[j, :j] @ L[j, :j]
        if piv <= rtol * max(ref[j, j], 0.0) or piv <= 0.0:
            null[j] = True
            continue
        L[j, j] = math.sqrt(piv)
        L[j + 1:, j] = (S[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return L, null


def _extend_gram_cholesky(Cz: np.ndarray, ok: np.ndarray, Szz: np.ndarray, t: int, m: int,
                          null: np.ndarray, tm: int, t1m: int, n_eff: np.ndarray,
                          p_ratio: float) -> None:
    """Extend, for each estimate ``i`` still regressing, the Cholesky factor of the
    sample Gram of the innovations ``ζ^{≤t}`` by block row ``t`` (``Szz[i]``).
    Zero-variance components get a unit diagonal. Regression stops (``ok[i] = False``)
    once the regressors exceed ``p_ratio`` of the independent paths, or if the Gram
    is numerically singular."""
    for i in range(Cz.shape[0]):
        if not ok[i]:
            continue
        if t1m > p_ratio * n_eff[i]:
            ok[i] = False
            continue
        row = Szz[i]
        if t > 0:
            Crow = sla.solve_triangular(Cz[i, :tm, :tm], row[:, :tm].T, lower=True,
                                        check_finite=False).T
        else:
            Crow = np.zeros((m, 0))
        Stt = row[:, tm:t1m] - Crow @ Crow.T
        Stt = (Stt + Stt.T) / 2
        Stt[null, null] = 1.0
        try:
            Ctt = np.linalg.cholesky(Stt)
        except np.linalg.LinAlgError:
            ok[i] = False
            continue
        Cz[i, tm:t1m, :tm] = Crow
        Cz[i, tm:t1m, tm:t1m] = Ctt


def _sym_sqrt(S: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh((S + S.T) / 2)
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


def _batch_se(values: np.ndarray) -> np.ndarray:
    """Standard error of the mean from per-batch values (batch axis first)."""
    B = values.shape[0]
    if B < 2:
        return np.full(values.shape[1:], np.nan)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging replicate gives inf/nan
        return values.std(axis=0, ddof=1) / math.sqrt(B)


def _test_sample(problem: Problem, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Fresh test points: ``V*`` (k, n), ``y`` (n,), ``zeta`` (m, n) standard normals."""
    Vs = rng.standard_normal((problem.k, n))
    eps = rng.standard_normal(n) if problem.target.noisy else np.zeros(n)
    y = np.broadcast_to(np.asarray(problem.labels(Vs.T, eps), dtype=float), (n,)).copy()
    return {"Vstar": Vs, "y": y, "zeta": rng.standard_normal((problem.m, n))}


def _population_loss_mc(problem: Problem, M: np.ndarray, Q: np.ndarray,
                        sample: dict[str, np.ndarray],
                        b: np.ndarray | None = None) -> tuple[float, float]:
    """Monte Carlo population loss ``E ℓ(y, M_tᵀV* + Ξ + b)``, ``Ξ ~ N(0, Q)``, with its SE."""
    V = M.T @ sample["Vstar"] + _sym_sqrt(Q) @ sample["zeta"]
    if b is not None:
        V = V + np.asarray(b, dtype=float)[:, None]
    lv = problem.loss_value(sample["y"], V.T)
    return float(lv.mean()), float(lv.std(ddof=1) / math.sqrt(lv.size))


def _population_loss(problem: Problem, M: np.ndarray, Q: np.ndarray,
                     b: np.ndarray | None = None) -> tuple[float, float]:
    """Test loss from :func:`dmftsolve.population.population_loss` (bias ``b`` if given)."""
    from dmftsolve.population import population_loss

    e = population_loss(problem, M, (Q + Q.T) / 2, b)
    return float(e.value), float(e.error)


# --------------------------------------------------------------------------- solver
_ERR_FIELDS = (("train_loss", "train_loss_err"), ("test_loss", "test_loss_err"),
               ("grad_norm", "grad_norm_err"), ("cosine", "cosine_err"),
               ("Gamma", "Gamma_err"), ("M", "M_err"), ("b", "b_err"))


def _replicate_errors(res: DMFTResult, problem: Problem, delta: float, *, N: int, B: int,
                      seed: int, T: int, test: dict[str, np.ndarray], method: str,
                      antithetic: bool, null_rtol: float, test_loss: str,
                      stein_regression: bool, reflect: tuple[int, ...] = ()) -> None:
    """Replace the ``*_err`` arrays of ``res`` by replicate standard errors (in place).

    Replicates evaluate the test loss on the same test sample (``test``)."""
    children = np.random.SeedSequence(seed).spawn(B)
    reps = []
    for child in children:
        r = solve_dmft(problem, delta, n_paths=max(N // B, 8), seed=int(child.generate_state(1)[0]),
                       steps=T, method=method, antithetic=antithetic, reflect=reflect, n_batches=2,
                       throw=False,
                       null_rtol=null_rtol, test_loss="mc",
                       stein_regression=stein_regression, errors="batch", _test=test)
        if r.ok:
            reps.append(r)
    res.diagnostics["conditional_err"] = {
        err: getattr(res, err) for _, err in _ERR_FIELDS} | {"Q_err": res.Q_err}
    res.diagnostics["replicates"] = len(reps)
    if len(reps) < 2:
        res.diagnostics["error_model"] += " (too few successful replicates: errors are NaN)"
        for _, err in _ERR_FIELDS:
            setattr(res, err, np.full_like(getattr(res, err), np.nan))
        res.Q_err = np.full_like(res.Q_err, np.nan)
        return
    n = len(reps)
    for val, err in _ERR_FIELDS:
        stack = np.stack([getattr(r, val) for r in reps])
        setattr(res, err, stack.std(axis=0, ddof=1) / math.sqrt(n))
    res.Q_err = np.stack([r.q_diag for r in reps]).std(axis=0, ddof=1) / math.sqrt(n)
    # the replicates share one test sample (common random numbers): their spread is the
    # propagated kernel error only; add the main solve's own test-sample error
    res.test_loss_err = np.hypot(res.test_loss_err, res.diagnostics["conditional_err"]["test_loss_err"])


def _solve_dmft(
    problem: Problem,
    delta: float,
    *,
    n_paths: int = 100_000,
    seed: int | None = None,
    steps: int | None = None,
    method: Method = "stein",
    antithetic: bool = True,
    reflect: tuple[int, ...] | list[int] = (),
    n_batches: int = 20,
    keep_samples_at: tuple[int, ...] | list[int] = (),
    throw: bool = True,
    progress: bool = False,
    null_rtol: float | None = None,
    test_loss: Literal["mc", "population"] = "mc",
    stein_regression: bool = False,
    errors: Literal["replicate", "batch"] = "replicate",
    _test: dict[str, np.ndarray] | None = None,
) -> DMFTResult:
    """Solve the discrete-time DMFT of GD for ``problem`` at sample ratio ``delta``.

    Parameters
    ----------
    problem : Problem
        Target, network, loss, ``η``, ``λ``, initialisation and ``hold_zero``
        (rows of ``M_t`` zeroed at every step, mirroring projected GD). With
        ``problem.bias`` the deterministic bias ``b_t`` is evolved too
        (``DMFTResult.b``).
    delta : float
        ``δ = n/d``.
    n_paths : int
        Monte Carlo paths ``N`` of the sample process (rounded up to a multiple
        of ``n_batches`` — of ``2·n_batches`` with antithetic pairs).
    seed : int, optional
        Seed of the path generator; drawn and recorded in ``settings`` if None.
    steps : int, optional
        Number of GD steps ``T`` (default ``problem.training.steps``).
    method : {"stein", "pathwise"}
        How ``Γ`` is estimated (module docstring). ``"stein"`` is
        ``O(N T² m²)``; ``"pathwise"`` is ``O(N T³ m³)`` with ``O(N T² m²)``
        memory and is the reference.
    antithetic : bool
        Pair every path with its mirror ``ζ → −ζ``.
    reflect : sequence of int
        Target directions ``j`` (columns of ``V*``) to pair by reflection:
        every path is repeated with ``V*_j → −V*_j`` (same innovations and
        noise). Unbiased for any target (``V*`` is symmetric); for a target
        even in ``z_j`` it makes ``E[V*_j g]`` vanish exactly while
        ``M_j = 0``, so a small warm-start overlap ``M0`` along ``j`` (the
        ``1/√d`` overlap of a finite-d random start) is not swamped by the
        ``N^{-1/2}`` Monte Carlo noise that otherwise seeds that direction.
    n_batches : int
        Batches for the batch-means standard errors (``>= 2``).
    keep_samples_at : sequence of int
        Steps at which :meth:`DMFTResult.samples` arrays are kept.
    throw : bool
        Raise :class:`SolverError` on failure (non-finite values); otherwise
        return a result with a failure status and NaN after the failing step.
    progress : bool
        Show a tqdm progress bar.
    null_rtol : float, optional
        Relative pivot (innovation variance / ``Q(t,t)_jj``) below which an
        innovation counts as zero-variance. Default ``1e-4`` for ``"stein"``
        and ``1e-10`` for ``"pathwise"``. GD trajectories are smooth in ``t``,
        so the innovations of ``Ξ`` decay fast (``~1e-5`` of ``Q(t,t)`` after 5
        steps of the GeLU example); Stein divides by them, and with
        ``null_rtol = 1e-10`` its ``Γ``/``R`` noise grew without bound
        (overflow at step 167 of a 200-step run). Dropping them changes
        ``Q`` by a relative ``≤ null_rtol``.
    errors : {"replicate", "batch"}
        How the ``*_err`` arrays are estimated. ``"replicate"`` (default): the
        standard deviation over ``n_batches`` independent solves with
        ``n_paths / n_batches`` paths each (own kernels), divided by
        ``√n_batches`` — an honest error of the full solve including the
        propagation of kernel noise through the recursion; it doubles the cost.
        ``"batch"``: batch means over the main solve's paths, conditional on
        the kernels of earlier steps (cheap; underestimates the error of
        long-time quantities, by ~3× for ``Q(20,20)`` in the GeLU example).
    stein_regression : bool
        With ``method="stein"``: replace ``E[g ζᵀ]`` by the least-squares
        coefficients of ``g`` on the innovations (sample Gram instead of ``I``),
        a control variate for the part of ``g`` linear in ``ζ``. Off by
        default: it reduced the spread of ``Γ`` only marginally in the tests.
    test_loss : {"mc", "population"}
        ``"mc"`` (default, ~5 ms a step): Monte Carlo over the paths' ``V*``,
        ``ε`` and fresh Gaussian fields ``Ξ ~ N(0, Q(t,t))``;
        ``"population"``: :func:`dmftsolve.population.population_loss`
        (quadrature/QMC, ~40 ms a step; replicates for the errors still use
        Monte Carlo, so its error bar is conservative).
    """
    t_start = time.perf_counter()
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    delta = check_delta(delta)
    if errors not in ("replicate", "batch"):
        raise ValueError(f"errors must be 'replicate' or 'batch', got {errors!r}")
    if method not in ("stein", "pathwise"):
        raise ValueError(f"method must be 'stein' or 'pathwise', got {method!r}")
    if test_loss not in ("mc", "population"):
        raise ValueError(f"test_loss must be 'mc' or 'population', got {test_loss!r}")
    T = problem.training.steps if steps is None else int(steps)
    if T < 0:
        raise ValueError(f"steps must be >= 0, got {steps!r}")
    B = int(n_batches)
    if B < 2:
        raise ValueError(f"n_batches must be >= 2, got {n_batches!r}")
    if int(n_paths) < 2 * B:
        raise ValueError(f"n_paths must be at least 2*n_batches={2 * B}, got {n_paths!r}")
    reflect = tuple(sorted({int(j) for j in reflect}))
    if any(j < 0 or j >= problem.k for j in reflect):
        raise ValueError(f"reflect must hold target directions in [0, {problem.k}), got {reflect!r}")
    unit = B * (2 if antithetic else 1) * (2 if reflect else 1)
    N = int(math.ceil(int(n_paths) / unit) * unit)
    nb = N // B
    keep = sorted({int(t) for t in keep_samples_at})
    if any(t < 0 or t > T for t in keep):
        raise ValueError(f"keep_samples_at must lie in 0..{T}, got {list(keep_samples_at)!r}")
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
    if null_rtol is None:
        null_rtol = 1e-4 if method == "stein" else 1e-10
    rng = np.random.default_rng(seed)

    k, m = problem.k, problem.m
    tr = problem.training
    eta, lam = tr.eta, tr.lam
    held = list(tr.hold_zero)
    if method == "pathwise":
        need = 8 * ((T + 1) * m) ** 2 * N
        if need > PATHWISE_MAX_BYTES:
            raise ValueError(
                f"method='pathwise' would store {need / 2**30:.1f} GiB of path derivatives "
                f"(N T² m²); use method='stein' or fewer paths/steps"
            )

    settings = {
        "problem": problem.to_dict(), "delta": delta, "n_paths": N, "n_paths_requested": int(n_paths),
        "seed": seed, "steps": T, "method": method, "antithetic": bool(antithetic),
        "reflect": list(reflect),
        "n_batches": B, "keep_samples_at": keep, "null_rtol": null_rtol, "test_loss": test_loss,
        "stein_regression": bool(stein_regression), "errors": errors,
    }

    # ---------------------------------------------------------------- random inputs
    n_base = nb // ((2 if antithetic else 1) * (2 if reflect else 1))

    def draw(rows: int) -> np.ndarray:
        """Standard normals (rows, N): antithetic pairs inside each batch, and
        the whole batch repeated for the reflected copies."""
        h = rng.standard_normal((rows, B, n_base))
        if antithetic:
            h = np.concatenate([h, -h], axis=2)
        if reflect:
            h = np.concatenate([h, h], axis=2)
        return h.reshape(rows, N)

    def draw_shared(rows: int, flip: tuple[int, ...] = ()) -> np.ndarray:
        """Normals shared by the two members of an antithetic pair (V*, ε); rows
        ``flip`` change sign in the reflected copies."""
        h = rng.standard_normal((rows, B, n_base))
        if antithetic:
            h = np.concatenate([h, h], axis=2)
        if reflect:
            sign = np.ones((rows, 1, 1))
            sign[list(flip)] = -1.0
            h = np.concatenate([h, sign * h], axis=2)
        return h.reshape(rows, N)

    Vstar = draw_shared(k, reflect)  # (k, N)
    eps = draw_shared(1)[0] if problem.target.noisy else np.zeros(N)
    y = np.broadcast_to(np.asarray(problem.labels(Vstar.T, eps), dtype=float), (N,)).copy()
    if _test is None:
        _test = _test_sample(problem, N, np.random.default_rng([seed, 1]))
    Vstar_b = Vstar.reshape(k, B, nb).transpose(1, 0, 2)  # (B, k, nb)

    # ---------------------------------------------------------------- storage
    Tm1 = (T + 1) * m
    Tm2 = (T + 2) * m
    # X: time-major rows [ζ^t (m rows), g^t (m rows)] for t = 0..T
    X = np.zeros((2 * Tm1, N))
    Qb = np.zeros((Tm2, Tm2))
    Rb = np.zeros((Tm2, Tm2))
    Gb = np.zeros((Tm1, Tm1))
    Gb_err = np.zeros((Tm1, Tm1))
    Cb = np.zeros((Tm1, Tm1))
    Lb = np.zeros((Tm1, Tm1))  # L̃: L with 1 on the diagonal at null pivots
    null_mask = np.zeros(Tm1, dtype=bool)
    M = np.zeros((T + 2, k, m))
    M_err = np.zeros((T + 2, k, m))
    bvec = np.zeros((T + 2, m))  # the bias b_t (stays exactly 0 without a bias)
    b_err = np.zeros((T + 2, m))
    has_bias = problem.bias
    Q_err = np.zeros((T + 2, m, m))
    out = {name: np.full(T + 1, np.nan) for name in (
        "train_loss", "train_loss_err", "test_loss", "test_loss_err", "grad_norm",
        "grad_norm_err", "cosine", "cosine_err")}
    samples: dict[int, dict[str, np.ndarray]] = {}
    min_pivot = np.full(T + 1, np.nan)
    n_null = np.zeros(T + 1, dtype=int)
    Kp = np.zeros((Tm1, Tm1 * N)) if method == "pathwise" else None
    regression = method == "stein" and stein_regression
    zmean = np.zeros((B, Tm1))
    Cz = np.zeros((B + 1, Tm1, Tm1)) if regression else None
    reg_ok = np.ones(B + 1, dtype=bool)
    n_eff = np.array([N] + [nb] * B, dtype=float) / (2 if antithetic else 1)
    p_ratio = 0.05
    n_regressed = np.zeros(T + 1, dtype=int)
    eye = np.eye(m)

    M0 = np.array(tr.init.overlaps(k, m), dtype=float)
    M0[held, :] = 0.0
    M[0] = M0
    Q0 = np.array(tr.init.gram(m), dtype=float)
    Qb[:m, :m] = (Q0 + Q0.T) / 2
    Rb[:m, :m] = eye

    status, message = Status.SUCCESS, ""
    last = T
    iterator = range(T + 1)
    if progress:
        from tqdm import tqdm
        iterator = tqdm(iterator, desc=f"DMFT ({method})", unit="step")

    def blk(t: int) -> slice:
        return slice(t * m, (t + 1) * m)

    for t in iterator:
        tm, t1m = t * m, (t + 1) * m
        Qtt = Qb[blk(t), blk(t)]
        # ------------------------------------------------ Cholesky row t
        if t > 0:
            Lrow = sla.solve_triangular(Lb[:tm, :tm], Qb[blk(t), :tm].T, lower=True,
                                        check_finite=False).T
            Lrow[:, null_mask[:tm]] = 0.0
            Lb[blk(t), :tm] = Lrow
            S = Qtt - Lrow @ Lrow.T
        else:
            S = Qtt.copy()
        Ltt, null = _psd_cholesky((S + S.T) / 2, Qtt, null_rtol)
        diag = np.diag(Ltt).copy()
        min_pivot[t] = float(diag[~null].min()) ** 2 if (~null).any() else 0.0
        n_null[t] = int(null.sum())
        Ltt[null, null] = 1.0
        Lb[blk(t), blk(t)] = Ltt
        null_mask[blk(t)] = null
        # ------------------------------------------------ innovations and fields
        z = draw(m)
        z[null] = 0.0
        X[2 * tm: 2 * tm + m] = z
        coef = np.zeros((m, 2 * t1m))
        cz = coef.reshape(m, t + 1, 2, m)
        # L row t, with the null columns (L̃ holds 1 on their diagonal) set to zero
        cz[:, :, 0, :] = np.where(null_mask[:t1m], 0.0, Lb[blk(t), :t1m]).reshape(m, t + 1, m)
        if t > 0:
            # −(η/δ) R(t, u+1) for u < t
            cz[:, :t, 1, :] = (-(eta / delta) * Rb[blk(t), m:t1m]).reshape(m, t, m)
        U = coef @ X[: 2 * t1m]
        V = M[t].T @ Vstar + U  # (m, N)
        if has_bias:
            V += bvec[t][:, None]
        g = np.asarray(problem.grad(y, V.T), dtype=float).T  # (m, N)
        if not np.all(np.isfinite(g)):
            status, message, last = Status.NONFINITE, f"non-finite gradient g at step {t}", t - 1
            break
        X[2 * tm + m: 2 * t1m] = g
        lv = problem.loss_value(y, V.T)
        per_loss = lv.reshape(B, nb).mean(axis=1)
        out["train_loss"][t] = per_loss.mean()
        out["train_loss_err"][t] = _batch_se(per_loss[:, None])[0]
        want_D = method == "pathwise" or t in keep
        D = np.asarray(problem.hess(y, V.T), dtype=float) if want_D else None  # (N, m, m)
        if t in keep:
            samples[t] = {"V": V.T.copy(), "Vstar": Vstar.T.copy(), "y": y.copy(), "D": D.copy()}
        # ------------------------------------------------ per-batch moments
        gz_b = np.concatenate([g, z], axis=0).reshape(2 * m, B, nb).transpose(1, 0, 2)
        Xb = X[: 2 * t1m].reshape(2 * t1m, B, nb).transpose(1, 2, 0)  # (B, nb, rows)
        mom = ((gz_b @ Xb) / nb).reshape(B, 2 * m, t + 1, 2, m)
        g_b = gz_b[:, :m]  # (B, m, nb)
        Ez_b = mom[:, :m, :, 0, :].reshape(B, m, t1m)  # E_b[g^t ζ^{uᵀ}]
        Eg_b = mom[:, :m, :, 1, :].reshape(B, m, t1m)  # E_b[g^t g^{uᵀ}]
        Zrow_b = mom[:, m:, :, 0, :].reshape(B, m, t1m)  # E_b[ζ^t ζ^{uᵀ}]
        zmean[:, blk(t)] = z.reshape(m, B, nb).mean(axis=-1).T
        Cn_b = Eg_b / delta
        EVg_b = (Vstar_b @ g_b.transpose(0, 2, 1)) / nb  # (B, k, m)
        # ------------------------------------------------ responses Γ(t, ≤t)
        if method == "stein":
            # stacked: index 0 = all paths, 1..B = batches
            Sgz = np.concatenate([Ez_b.mean(axis=0)[None], Ez_b])
            Szz = np.concatenate([Zrow_b.mean(axis=0)[None], Zrow_b])
            if not antithetic:  # centre (regression with intercept)
                gm = g_b.mean(axis=2)
                gm = np.concatenate([gm.mean(axis=0)[None], gm])  # (B+1, m)
                zm = np.concatenate([zmean.mean(axis=0)[None], zmean])[:, :t1m]  # (B+1, t1m)
                Sgz = Sgz - gm[:, :, None] * zm[:, None, :]
                Szz = Szz - zm[:, tm:t1m, None] * zm[:, None, :]
            Sgz[:, :, null_mask[:t1m]] = 0.0
            Szz[:, :, null_mask[:t1m]] = 0.0
            Szz[:, null, :] = 0.0
            if regression:
                _extend_gram_cholesky(Cz, reg_ok, Szz, t, m, null, tm, t1m, n_eff, p_ratio)
                for i in range(B + 1):
                    if reg_ok[i]:  # c = Sgz Gz^{-1}: OLS coefficients of g on ζ^{≤t}
                        w = sla.solve_triangular(Cz[i, :t1m, :t1m], Sgz[i].T, lower=True,
                                                 check_finite=False)
                        Sgz[i] = sla.solve_triangular(Cz[i, :t1m, :t1m], w, lower=True,
                                                      trans="T", check_finite=False).T
                n_regressed[t] = int(reg_ok[0])
            Sgz[:, :, null_mask[:t1m]] = 0.0
            rhs = Sgz.reshape((B + 1) * m, t1m)
            Gam_all = sla.solve_triangular(Lb[:t1m, :t1m], rhs.T, lower=True, trans="T",
                                           check_finite=False).T.reshape(B + 1, m, t1m)
            Gam_all[:, :, null_mask[:t1m]] = 0.0
            Gam_pooled, Gam_b = Gam_all[0], Gam_all[1:]
        else:
            assert Kp is not None and D is not None
            if t > 0:
                Rs = Rb[blk(t), m:t1m]  # (m, tm): blocks R(t, u+1), u < t
                J = (-(eta / delta)) * (Rs @ Kp[:tm, : tm * N])  # (m, tm*N) = (a, (s, c, n))
                J = J.reshape(m, t, m, N)
                Kt = np.einsum("nab,bscn->ascn", D, J, optimize=True)
                Kp[blk(t), : tm * N] = Kt.reshape(m, tm * N)
            Kp[blk(t), tm * N: t1m * N] = D.transpose(1, 2, 0).reshape(m, m * N)
            Gam_b = Kp[blk(t), : t1m * N].reshape(m, t1m, B, nb).mean(axis=-1).transpose(2, 0, 1)
            Gam_pooled = Gam_b.mean(axis=0)
        Gam = Gam_pooled
        Cn = Cn_b.mean(axis=0)
        EVg = EVg_b.mean(axis=0)
        Gb[blk(t), :t1m] = Gam
        Gb_err[blk(t), :t1m] = _batch_se(Gam_b)
        Cb[blk(t), :t1m] = Cn * delta
        Cb[:t1m, blk(t)] = (Cn * delta).T
        # ------------------------------------------------ advance the parameter side
        # stack the overall estimate (index 0) with the per-batch ones
        Gt = np.concatenate([Gam[None], Gam_b])  # (B+1, m, t1m)
        Gt[:, :, tm:t1m] += lam * eye
        Cs = np.concatenate([Cn[None], Cn_b])
        Qtt_ = Qb[:t1m, :t1m]
        Rsh = Rb[:t1m, m:t1m]  # ((t+1)m, tm): blocks R(u, b+1)
        Nrow = -eta * (Cs[:, :, :tm] @ Rsh.T)  # (B+1, m, t1m)
        F = Nrow + Gt @ Qtt_  # E[φ ω^{≤tᵀ}]
        GtT = Gt.transpose(0, 2, 1)
        Ephi = (Cs[:, :, tm:t1m] + Nrow @ GtT + (Nrow @ GtT).transpose(0, 2, 1)
                + Gt @ Qtt_ @ GtT)
        Ft = F[:, :, tm:t1m]
        Qnext = Qtt[None] - eta * (Ft + Ft.transpose(0, 2, 1)) + eta**2 * Ephi
        Qnext = (Qnext + Qnext.transpose(0, 2, 1)) / 2
        Qrow = Qb[blk(t), :t1m][None] - eta * F  # Q(t+1, ≤t)
        Mnext = (1 - eta * lam) * M[t][None] - eta * EVg_b
        Mnext_all = (1 - eta * lam) * M[t] - eta * EVg
        Mnext[:, held, :] = 0.0
        Mnext_all[held, :] = 0.0
        # ‖∇L‖_F: parallel part (held rows excluded, as in projected GD) + orthogonal part
        par_b = EVg_b + lam * M[t][None]
        par_b[:, held, :] = 0.0
        par = EVg + lam * M[t]
        par[held, :] = 0.0
        gn_b = np.sqrt(np.clip((par_b**2).sum(axis=(1, 2)) + np.trace(Ephi[1:], axis1=1, axis2=2),
                               0.0, None))
        gn = math.sqrt(max(float((par**2).sum() + np.trace(Ephi[0])), 0.0))
        out["grad_norm"][t] = gn
        out["grad_norm_err"][t] = _batch_se(gn_b[:, None])[0]
        t2 = t + 1
        Qb[blk(t2), :t1m] = Qrow[0]
        Qb[:t1m, blk(t2)] = Qrow[0].T
        Qb[blk(t2), blk(t2)] = Qnext[0]
        Rb[blk(t2), :t1m] = Rb[blk(t), :t1m] - eta * (Gt[0] @ Rb[:t1m, :t1m])
        Rb[blk(t2), blk(t2)] = eye
        M[t2] = Mnext_all
        M_err[t2] = _batch_se(Mnext)
        if has_bias:  # b_{t+1} = b_t − η E[g^t]
            Eg_batches = g_b.mean(axis=2)  # (B, m)
            bvec[t2] = bvec[t] - eta * Eg_batches.mean(axis=0)
            b_err[t2] = _batch_se(bvec[t][None] - eta * Eg_batches)
        Q_err[t2] = _batch_se(Qnext[1:])
        cos_b = np.array([largest_cosine(Mnext[b], Qnext[1 + b]) for b in range(B)])
        if t2 <= T:
            out["cosine_err"][t2] = _batch_se(cos_b[:, None])[0]
        # ------------------------------------------------ test loss at t
        Mt, Qt_ = M[t], Qb[blk(t), blk(t)]
        bt = bvec[t] if has_bias else None
        if test_loss == "population":
            tl, tle = _population_loss(problem, Mt, Qt_, bt)
        else:
            tl, tle = _population_loss_mc(problem, Mt, Qt_, _test, bt)
        out["test_loss"][t], out["test_loss_err"][t] = tl, tle
        out["cosine"][t] = largest_cosine(Mt, Qt_)
        finite = all(np.all(np.isfinite(a)) for a in (Gam, Cn, Qnext[0], Qrow[0], Mnext_all,
                                                         Rb[blk(t2), :t1m], bvec[t2]))
        if not finite:
            status, message, last = Status.NONFINITE, f"non-finite kernels at step {t}", t
            break
    out["cosine_err"][0] = 0.0

    # ---------------------------------------------------------------- assemble
    def blocks(A: np.ndarray, n: int) -> np.ndarray:
        return A[: n * m, : n * m].reshape(n, m, n, m).transpose(0, 2, 1, 3).copy()

    n1 = T + 1
    Qk, Rk, Gk, Ck, Gek = (blocks(A, n1) for A in (Qb, Rb, Gb, Cb, Gb_err))
    Mk = M[:n1].copy()
    bk = bvec[:n1].copy()
    if status is not Status.SUCCESS:
        bad = max(last + 1, 0)
        for A in (Gk, Ck, Gek):
            A[bad:, :] = np.nan
            A[:, bad:] = np.nan
        for A in (Qk, Rk):
            A[bad + 1:, :] = np.nan
            A[:, bad + 1:] = np.nan
        Mk[bad + 1:] = np.nan
        bk[bad + 1:] = np.nan
        for arr in out.values():
            arr[bad:] = np.nan
    diagnostics = {
        "n_paths": N,
        "innovation_min_pivot": min_pivot,
        "zero_variance_innovations": n_null,
        "stein_regressed": n_regressed.astype(bool),
        "error_model": "batch means over n_batches, conditional on earlier kernels "
                       "(propagated kernel error not included)" if errors == "batch" else
                       "replicates: std over n_batches independent solves of n_paths/n_batches "
                       "paths, divided by sqrt(n_batches)",
        "test_loss_source": test_loss,
        "Q_next": Qb[blk(T + 1), blk(T + 1)].copy() if status is Status.SUCCESS else None,
    }
    res = DMFTResult(
        status=status, message=message, settings=settings, diagnostics=diagnostics,
        elapsed=time.perf_counter() - t_start,
        Q=Qk, Gamma=Gk, R=Rk, Cg=Ck, M=Mk, Gamma_err=Gek, M_err=M_err[:n1].copy(),
        Q_err=Q_err[:n1].copy(), b=bk, b_err=b_err[:n1].copy(), _samples=samples, **out,
    )
    if errors == "replicate" and res.ok:
        n_test = min(N, 2**14)
        _replicate_errors(res, problem, delta, N=N, B=B, seed=seed, T=T, method=method,
                          test={key: v[..., :n_test] for key, v in _test.items()},
                          antithetic=antithetic, null_rtol=null_rtol, test_loss=test_loss,
                          stein_regression=stein_regression, reflect=reflect)
        res.elapsed = time.perf_counter() - t_start
    if throw and not res.ok:
        raise SolverError(f"DMFTResult {status.value}: {message}", res)
    return res


def solve_dmft(problem: Problem, delta: float, *, blas_threads: int | None = 1,
               **kwargs: Any) -> DMFTResult:
    with blas_threads_limit(blas_threads):
        return _solve_dmft(problem, delta, **kwargs)


solve_dmft.__doc__ = (_solve_dmft.__doc__ or "") + """
    blas_threads : int or None
        BLAS threads during the solve (default 1; None leaves the setting alone).
        The per-step linear algebra is small, and multi-threaded OpenBLAS on
        small matrices on a loaded machine was 20× slower (31 s vs 1.5 s for
        200 steps with 5000 paths).

    Keyword arguments are those of the solver above: ``n_paths``, ``seed``,
    ``steps``, ``method``, ``antithetic``, ``reflect``, ``n_batches``, ``keep_samples_at``,
    ``throw``, ``progress``, ``null_rtol``, ``test_loss``, ``stein_regression``,
    ``errors``.
"""


