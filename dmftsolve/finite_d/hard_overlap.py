"""Finite-d law of the hard overlap around the restricted trajectory (issue 9).

At finite ``d`` the overlap ``M_t = θ*ᵀw_t`` of a hard direction is not zero: a random
start gives ``m_0 = √d M_0 ~ N(0, q0)``, and the finite-``n`` gradient along ``θ*`` at the
restricted trajectory (hard overlap held at 0) does not vanish. Linearised in
``m_t = √d M_t`` around the restricted trajectory (single neuron, one hard direction
``z``, label even in ``z``)::

    m_{t+1} = m_t − η Σ_{s≤t} Γ*(t,s) m_s − η ν*_t,        m_0 ~ N(0, q0),
    Γ*(t,s) = E[z² D^t J(t,s)],        E[ν*_t ν*_s] = (1/δ) E[z² g^t g^s],

with ``J(t,s) = ∂V^t/∂Ξ^s`` the path response of ``docs/theory.md`` §2.5 and the expectations
over the restricted DMFT's sample process.

Derivation (sketch). ``M_{t+1} = M_t − (η/n) Σ_i z_i g_i^t``. (i) A perturbation ``dM``
moves every training field by ``z_i dM``, and through each sample's memory term
``dV^t = Σ_s J(t,s) z dM_s``; so ``−η E[z D^t dV^t]`` gives ``Γ*``. (ii) The restricted
trajectory is invariant under ``z_i → −z_i`` for every sample separately (the label is even
and ``w`` has no ``θ*`` component), so ``(1/n) Σ_i z_i g_i^t`` is, given everything else, a
Rademacher sum with conditional covariance ``(1/n²) Σ_i z_i² g_i^t g_i^s → (1/n) E[z² g^t g^s]``:
times ``√d`` this is ``ν*``, a quenched (time-correlated) Gaussian force independent of
``m_0``. Neither is in the ``d → ∞`` DMFT (``ν`` there acts on the orthogonal coordinates).

So ``m_t = A(t) m_0 − η Σ_s B(t,s) ν*_s`` is Gaussian with
``Var m_t = q0 A(t)² + η² (B C* Bᵀ)(t,t)``.

Estimators
    ``"pathwise"``: ``Γ*`` from the forward recursion of ``J`` on every path
    (``O(N T³)``, ``O(N T)`` memory). The per-path ``D J`` is heavy-tailed (paths with
    ``D < 0`` amplify their own response, growth ``≈ (1 + η|D|/δ)`` a step), so ``Γ*`` and
    ``A(t)`` become seed-dependent beyond ``t ≈ 30–60``. Measured (GeLU, ``y = z² − 1``,
    η = 0.5, δ = 6): ``Var m_20`` = 60 ± 13 from 4 × 10⁴ paths and 96 ± 5 from 4 × 2·10⁴, against
    GD's 62–65 at d = 500–1000: the mean is carried by a tail that ``n = δd`` samples do not
    reach, so beyond ``t ≈ 10`` the pathwise law is not GD's finite-d law.

    ``"finite_d"`` (stable): the frozen-kernel propagation of
    :func:`propagate_hard_overlap` at the physical amplitude ``m/√d``, with the ``±z``
    reflection pairing for the drift and quenched Rademacher signs for the force. Each
    path's field then responds non-linearly, which cuts the heavy tail exactly where a
    finite-``d`` sample saturates (``|J z m| ~ √d``). It is ``d``-dependent by construction;
    as ``d → ∞`` it tends to the pathwise law wherever the latter is finite.

Monte Carlo errors are the spread over ``replicates`` independent restricted DMFT solves
(own kernels and paths), divided by ``√replicates``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dmftsolve.checks import check_delta, check_integer
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status

__all__ = ["check_hard_overlap_problem", "HardOverlapSettings", "HardOverlapLaw", "RestrictedPaths",
           "restricted_paths",
           "gamma_star", "noise_covariance", "linear_response", "propagate_hard_overlap",
           "hard_overlap_law"]

Estimator = Literal["pathwise", "finite_d"]


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class HardOverlapSettings:
    """Settings of :func:`hard_overlap_law`.

    Attributes
    ----------
    steps : int
        Horizon ``T`` (the law is given at ``t = 0 … T``).
    n_paths : int
        Paths of each restricted DMFT solve.
    replicates : int
        Independent solves (seeds ``seed, seed + 1, …``); errors are their spread / √replicates.
    seed : int
        Root seed.
    estimator : {"pathwise", "finite_d"}
        See the module docstring. ``"finite_d"`` needs ``d``.
    draws : int
        Rademacher/initial-condition draws per replicate for ``"finite_d"``.
    """

    steps: int = 20
    n_paths: int = 10_000
    replicates: int = 4
    seed: int = 0
    estimator: Estimator = "pathwise"
    draws: int = 256

    def __post_init__(self) -> None:
        check_integer("steps", self.steps, 1)
        check_integer("n_paths", self.n_paths, 40)
        check_integer("replicates", self.replicates, 2)
        check_integer("seed", self.seed, 0)
        check_integer("draws", self.draws, 4)
        if self.estimator not in ("pathwise", "finite_d"):
            raise ValueError(f"estimator must be 'pathwise' or 'finite_d', got {self.estimator!r}")


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class HardOverlapLaw(Result):
    """Gaussian law of ``m_t = √d M_t`` (linearised around the restricted trajectory).

    Arrays have length ``T + 1`` (times ``0…T``) and carry ``*_err`` standard errors over
    replicates. ``A`` is ``∂m_t/∂m_0``; ``var`` is ``Var m_t``; ``var_noise`` its part
    driven by ``ν*`` (``var − q0 A²``); ``gamma_star`` and ``noise_cov`` are the replicate
    means of ``Γ*(t,s)`` and ``(1/δ) E[z² g^t g^s]`` (``(T+1, T+1)``; ``Γ*`` is lower
    triangular, the last row unused). With ``estimator="finite_d"`` ``A`` is not computed
    (NaN) and ``gamma_star`` is that of the pathwise recursion on the same paths.
    """

    times: np.ndarray
    A: np.ndarray
    A_err: np.ndarray
    var: np.ndarray
    var_err: np.ndarray
    var_noise: np.ndarray
    var_noise_err: np.ndarray
    gamma_star: np.ndarray
    noise_cov: np.ndarray


# --------------------------------------------------------------------------- paths
@dataclass(frozen=True)
class RestrictedPaths:
    """Sample-process paths of the restricted DMFT (hard overlap held at 0), ``m = k = 1``.

    ``z``, ``y`` have shape ``(N,)``; ``V``, ``g``, ``D`` shape ``(T+1, N)``; ``R`` is the
    ``(T+1, T+1)`` response kernel and ``Q`` the diagonal ``Q(t,t)``.
    """

    z: np.ndarray
    y: np.ndarray
    V: np.ndarray
    g: np.ndarray
    D: np.ndarray
    R: np.ndarray
    Q: np.ndarray
    eta: float
    delta: float
    problem: Problem

    @property
    def steps(self) -> int:
        return self.V.shape[0] - 1


def check_hard_overlap_problem(problem: Problem) -> None:
    """Raise ``ValueError`` unless ``problem`` is one neuron on one even (sign-symmetric) hard direction."""
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    if problem.m != 1 or problem.k != 1:
        raise ValueError(f"the hard-overlap law is implemented for m = k = 1, got m={problem.m}, "
                         f"k={problem.k}")
    if problem.bias or problem.training.lam != 0.0:
        raise ValueError("the hard-overlap law is implemented without bias and ridge "
                         f"(bias={problem.bias}, lam={problem.training.lam})")
    z = np.linspace(0.05, 4.0, 41)[:, None]
    if not np.allclose(problem.labels(z, 0.0), problem.labels(-z, 0.0), rtol=1e-12, atol=1e-12):
        raise ValueError(f"the label must be even in z (a sign-symmetric hard direction), got "
                         f"target {problem.target.expr!r}")


def restricted_paths(problem: Problem, delta: float, *, steps: int, n_paths: int,
                     seed: int) -> RestrictedPaths:
    """Run the restricted DMFT (hard overlap held at 0) and keep every path at every step.

    Parameters
    ----------
    problem : Problem
        Single neuron, ``k = 1``, label even in ``z``; its init must be the random start
        (``q0``); ``hold_zero`` is set to ``(0,)`` here.
    delta : float
        Sample ratio.
    steps, n_paths, seed : int
        Horizon, number of paths, seed of the DMFT solve.
    """
    from dmftsolve.dynamics.dmft import solve_dmft

    check_hard_overlap_problem(problem)
    delta = check_delta(delta)
    T = check_integer("steps", steps, 1)
    p = problem.replace(hold_zero=[0], steps=T, M0=None, Q0=None)
    r = solve_dmft(p, delta, n_paths=check_integer("n_paths", n_paths, 40), seed=int(seed),
                   steps=T, keep_samples_at=tuple(range(T + 1)), errors="batch")
    s0 = r.samples(0)
    z = s0["Vstar"][:, 0].copy()
    y = s0["y"].copy()
    V = np.stack([r.samples(t)["V"][:, 0] for t in range(T + 1)])
    D = np.stack([r.samples(t)["D"][:, 0, 0] for t in range(T + 1)])
    g = np.asarray(p.grad(y[None, :], V[:, :, None]), dtype=float)[..., 0]
    return RestrictedPaths(z=z, y=y, V=V, g=g, D=D, R=r.R[:, :, 0, 0].copy(),
                           Q=r.Q[np.arange(T + 1), np.arange(T + 1), 0, 0].copy(),
                           eta=float(problem.training.eta), delta=delta, problem=problem)


# --------------------------------------------------------------------------- kernels
def gamma_star(paths: RestrictedPaths, *, weights: np.ndarray | None = None) -> np.ndarray:
    """``Γ*(t,s) = E[w z² D^t J(t,s)]`` by the pathwise recursion (``(T+1, T+1)``, lower triangular).

    ``J(s,s) = 1``, ``J(t,s) = −(η/δ) Σ_{u=s}^{t−1} R(t,u+1) D^u J(u,s)``. ``weights`` (``(N,)``,
    default 1/N) gives a weighted mean (e.g. a batch indicator). Cost ``O(N T³)``.
    """
    T = paths.steps
    N = paths.z.size
    w = np.full(N, 1.0 / N) if weights is None else np.asarray(weights, float)
    wz2 = w * paths.z**2
    c = -paths.eta / paths.delta
    G = np.zeros((T + 1, T + 1))
    K = np.empty((T + 1, N))  # K[u] = D^u J(u, s) for the current source s
    for s in range(T + 1):
        K[s] = paths.D[s]
        G[s, s] = wz2 @ K[s]
        for t in range(s + 1, T + 1):
            J = c * (paths.R[t, s + 1:t + 1] @ K[s:t])
            K[t] = paths.D[t] * J
            G[t, s] = wz2 @ K[t]
    return G


def noise_covariance(paths: RestrictedPaths, *, weights: np.ndarray | None = None) -> np.ndarray:
    """``C*(t,s) = (1/δ) E[w z² g^t g^s]``, ``(T+1, T+1)``, positive semidefinite."""
    N = paths.z.size
    w = np.full(N, 1.0 / N) if weights is None else np.asarray(weights, float)
    gz = paths.g * (np.sqrt(w) * np.abs(paths.z))[None, :]
    return (gz @ gz.T) / paths.delta


def linear_response(G: np.ndarray, eta: float) -> np.ndarray:
    """The matrix ``H`` with ``m_t = H[t, 0] m_0 + Σ_s H[t, 1 + s] ν*_s``.

    From ``m_{t+1} = m_t − η Σ_{s≤t} G(t,s) m_s − η ν*_t``; ``H`` has shape ``(T+1, T+1)``
    (sources ``m_0, ν*_0 … ν*_{T−1}``) and is causal: ``H[t, 1 + s] = 0`` for ``s ≥ t``.
    """
    T = G.shape[0] - 1
    H = np.zeros((T + 1, T + 1))
    H[0, 0] = 1.0
    for t in range(T):
        H[t + 1] = H[t] - eta * (G[t, : t + 1] @ H[: t + 1])
        H[t + 1, 1 + t] -= eta
    return H


def _gaussian_law(G: np.ndarray, C: np.ndarray, eta: float, q0: float) -> tuple[np.ndarray, ...]:
    H = linear_response(G, eta)
    A = H[:, 0]
    Hn = H[:, 1:]
    var_noise = np.einsum("ts,su,tu->t", Hn, C[:-1, :-1], Hn)
    return A, q0 * A**2 + var_noise, var_noise


# --------------------------------------------------------------------------- finite-d propagation
def propagate_hard_overlap(paths: RestrictedPaths, *, d: int, m0: np.ndarray,
                           signs: np.ndarray | None, n_samples: float | None = None,
                           steps: int | None = None, stop_cosine: float | None = None,
                           dtype: Any = np.float32) -> dict[str, np.ndarray]:
    """Propagate ``K`` finite-d draws of the hard overlap with the restricted kernels frozen.

    Per path ``p`` and reflection ``± z_p`` (same ``Ξ``, ``y``)::

        V±^t = V^t ± z M_t − (η/δ) Σ_{s<t} R(t,s+1) (g(y, V±^s) − g^s),
        M_{t+1} = M_t − η [ (1/N) Σ_p z_p (g+^t − g−^t)/2
                            + (1/√(nN)) Σ_p ε_p z_p (g+^t + g−^t)/2 ],

    the exact split of ``(1/n) Σ_i z_i g_i`` into the mean over the sign of ``z_i`` and a
    Rademacher sum with ``n = δd`` samples. Linear in ``M`` this is the law of the module
    docstring; beyond it each path responds non-linearly, but ``Q`` and ``R`` stay those of the
    restricted trajectory (their change is ``O(M²)``).

    Parameters
    ----------
    paths : RestrictedPaths
        Restricted DMFT paths and kernels.
    d : int
        Input dimension (the amplitude is ``M_0 = m0/√d``).
    m0 : ndarray, shape (K,)
        Initial ``√d M_0`` of each draw.
    signs : ndarray, shape (N, K) or None
        Rademacher signs ``ε`` of each draw; None switches the force off.
    n_samples : float, optional
        ``n`` of the force (default ``δ d``).
    steps : int, optional
        Horizon (default all of ``paths``).
    stop_cosine : float, optional
        Stop a draw once its cosine ``|M|/√(M² + Q)`` exceeds this (its ``M`` is then held).

    Returns
    -------
    dict
        ``m`` (``(T+1, K)``, ``√d M_t``), ``cosine`` (``(T+1, K)``), ``first_passage``
        (``(K,)``, first step with cosine above ``stop_cosine``, or −1).
    """
    d = check_integer("d", d, 2)
    m0 = np.atleast_1d(np.asarray(m0, float))
    K = m0.size
    N = paths.z.size
    T = paths.steps if steps is None else min(check_integer("steps", steps, 1), paths.steps)
    n = paths.delta * d if n_samples is None else float(n_samples)
    if signs is not None:
        signs = np.asarray(signs)
        if signs.shape != (N, K):
            raise ValueError(f"signs must have shape (N, K) = {(N, K)}, got {signs.shape}")
    dt = np.dtype(dtype)
    eta, c = paths.eta, paths.eta / paths.delta
    z = paths.z.astype(dt)
    zr = np.concatenate([z, -z])[:, None]  # (2N, 1): the ± copies
    y = np.concatenate([paths.y, paths.y])[:, None]
    force_w = None if signs is None else (signs * paths.z[:, None]).astype(dt) / math.sqrt(n * N)
    grad = _grad_function_1d(paths)
    hist = np.zeros((T + 1, 2 * N, K), dtype=dt)  # g(V±^s) − g^s
    M = np.zeros((T + 1, K))
    M[0] = m0 / math.sqrt(d)
    cos = np.zeros((T + 1, K))
    passage = np.full(K, -1)
    active = np.ones(K, dtype=bool)
    R = paths.R.astype(dt)
    for t in range(T + 1):
        Qt = paths.Q[t]
        cos[t] = np.abs(M[t]) / np.sqrt(M[t] ** 2 + Qt)
        if stop_cosine is not None:
            newly = active & (cos[t] > stop_cosine)
            passage[newly] = t
            active &= ~newly
        if t == T:
            break
        base = np.concatenate([paths.V[t], paths.V[t]]).astype(dt)[:, None]
        Vt = base + zr * M[t].astype(dt)[None, :]
        if t > 0:
            Vt -= c * np.tensordot(R[t, 1:t + 1], hist[:t], axes=(0, 0))
        gt = grad(y, Vt)
        g0 = np.concatenate([paths.g[t], paths.g[t]]).astype(dt)[:, None]
        hist[t] = gt - g0
        gp, gm = gt[:N], gt[N:]
        drift = (z @ ((gp - gm) * 0.5)) / N
        step = drift.astype(float)
        if force_w is not None:
            step += np.einsum("pk,pk->k", force_w, (gp + gm) * 0.5, dtype=float)
        M[t + 1] = np.where(active, M[t] - eta * step, M[t])
    return {"m": M * math.sqrt(d), "cosine": cos, "first_passage": passage}


def _grad_function_1d(paths: RestrictedPaths) -> Any:
    """``g(y, V)`` for ``m = 1`` with ``σ`` and ``σ'`` read from tables (``np.interp``).

    The compiled sympy activations cost ~0.15 s per 10⁶ GeLU evaluations, the bulk of a
    propagation; a table of 40001 nodes on ``[−L, L]`` (``L`` = 2 max|V| + 10 over the paths)
    has a relative interpolation error below 1e-6 for the smooth activations here.
    Arguments outside the table are evaluated exactly.
    """
    prob = paths.problem
    L = 2.0 * float(np.max(np.abs(paths.V))) + 10.0
    grid = np.linspace(-L, L, 40_001)
    a = float(prob.network.a_array[0])
    s0 = np.asarray(prob.network.sigma(grid[:, None], 0), float)[:, 0]
    s1 = np.asarray(prob.network.sigma(grid[:, None], 1), float)[:, 0]

    def grad(y: np.ndarray, V: np.ndarray) -> np.ndarray:
        sig = np.interp(V, grid, s0)
        dsig = np.interp(V, grid, s1)
        out_ = np.abs(V) > L
        if out_.any():
            Vo = np.asarray(V[out_], float)[:, None]
            sig[out_] = np.asarray(prob.network.sigma(Vo, 0), float)[:, 0]
            dsig[out_] = np.asarray(prob.network.sigma(Vo, 1), float)[:, 0]
        lf = np.asarray(prob.loss(np.broadcast_to(y, V.shape), a * sig, 1), float)
        return (lf * a * dsig).astype(V.dtype, copy=False)

    return grad


# --------------------------------------------------------------------------- the law
def hard_overlap_law(problem: Problem, delta: float, *, d: int | None = None,
                     settings: HardOverlapSettings | None = None,
                     throw: bool = True) -> HardOverlapLaw:
    """The Gaussian law of ``m_t = √d M_t`` around the restricted trajectory, with MC errors.

    Parameters
    ----------
    problem : Problem
        Single neuron (``m = k = 1``), label even in ``z``, random start (``q0``), no bias
        or ridge.
    delta : float
        Sample ratio ``δ = n/d``.
    d : int, optional
        Input dimension; needed by ``estimator="finite_d"`` (the pathwise law is that of
        ``d → ∞`` in units of ``√d``).
    settings : HardOverlapSettings, optional
        Horizon, paths, replicates, seed, estimator.
    throw : bool
        Raise :class:`SolverError` on failure (non-finite moments); otherwise return the
        result with a failure status.

    Returns
    -------
    HardOverlapLaw
    """
    t0 = time.perf_counter()
    check_hard_overlap_problem(problem)
    delta = check_delta(delta)
    s = HardOverlapSettings() if settings is None else settings
    if not isinstance(s, HardOverlapSettings):
        raise ValueError(f"settings must be a HardOverlapSettings, got {settings!r}")
    if s.estimator == "finite_d":
        if d is None:
            raise ValueError("estimator='finite_d' needs the input dimension d, got d=None")
        d = check_integer("d", d, 2)
    eta = float(problem.training.eta)
    q0 = float(problem.training.init.q0)
    T = s.steps
    per: dict[str, list[np.ndarray]] = {k: [] for k in ("A", "var", "var_noise", "G", "C")}
    for r in range(s.replicates):
        paths = restricted_paths(problem, delta, steps=T, n_paths=s.n_paths, seed=s.seed + r)
        G = gamma_star(paths)
        C = noise_covariance(paths)
        per["G"].append(G)
        per["C"].append(C)
        if s.estimator == "pathwise":
            A, var, vn = _gaussian_law(G, C, eta, q0)
        else:
            rng = np.random.default_rng([s.seed, r, 99])
            K = s.draws
            # stratified m0 (quantiles of N(0, q0)) and independent signs
            u = (np.arange(K) + rng.random(K)) / K
            from scipy.special import ndtri
            m0 = math.sqrt(q0) * ndtri(u)
            signs = rng.choice(np.array([-1.0, 1.0]), size=(paths.z.size, K))
            m_both = propagate_hard_overlap(paths, d=d, m0=m0, signs=signs)["m"]
            m_noise = propagate_hard_overlap(paths, d=d, m0=np.zeros(K), signs=signs)["m"]
            A = np.full(T + 1, np.nan)
            var, vn = np.mean(m_both**2, axis=1), np.mean(m_noise**2, axis=1)
        per["A"].append(A)
        per["var"].append(var)
        per["var_noise"].append(vn)
    arr = {k: np.array(v) for k, v in per.items()}
    R = s.replicates

    def mean_se(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return a.mean(axis=0), a.std(axis=0, ddof=1) / math.sqrt(R)

    A, A_err = mean_se(arr["A"])
    var, var_err = mean_se(arr["var"])
    vn, vn_err = mean_se(arr["var_noise"])
    finite = all(np.all(np.isfinite(x)) for x in (var, vn, arr["G"], arr["C"]))
    status = Status.SUCCESS if finite else Status.NONFINITE
    message = "" if finite else "non-finite moments (a response kernel overflowed)"
    res = HardOverlapLaw(
        status=status, message=message,
        settings={**dataclasses.asdict(s), "problem": problem.to_dict(), "delta": delta, "d": d},
        diagnostics={"per_replicate_var": arr["var"], "per_replicate_var_noise": arr["var_noise"],
                     "error_model": f"std over {R} independent restricted DMFT solves / sqrt({R})"},
        elapsed=time.perf_counter() - t0,
        times=np.arange(T + 1), A=A, A_err=A_err, var=var, var_err=var_err, var_noise=vn,
        var_noise_err=vn_err, gamma_star=arr["G"].mean(axis=0), noise_cov=arr["C"].mean(axis=0),
    )
    if throw and not res.ok:
        raise SolverError(f"HardOverlapLaw {status.value}: {message}", res)
    return res
