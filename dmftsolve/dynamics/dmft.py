"""Discrete-time DMFT of full-batch gradient descent (``docs/theory.md`` §2).

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
  ``R`` (response of the parameter side) and overlaps
  ``M_{t+1} = (1 − ηλ) M_t − η E[V* g^{tᵀ}]``; with a trained bias
  (``problem.bias``) a deterministic ``b_{t+1} = b_t − η E[g^t]``, ``b_0 = 0``.

The scheme is causal and solved in one forward pass (:func:`solve_dmft`, options in
:class:`DMFTSettings`). The pass is composed of parts, each in its own module:

* the paths of the sample process, their labels and innovations (:mod:`~dmftsolve.dynamics.paths`),
  with the innovations' Cholesky factor of ``Q`` (:mod:`~dmftsolve.dynamics.innovations`);
* what each path keeps of its past (``history``: :mod:`~dmftsolve.dynamics.history`);
* the estimator of the responses ``Γ`` (``method``: :mod:`~dmftsolve.dynamics.stein`,
  :mod:`~dmftsolve.dynamics.pathwise`, interface :mod:`~dmftsolve.dynamics.response`);
* the parameter side, deterministic linear algebra on the kernels
  (:mod:`~dmftsolve.dynamics.parameter_side`);
* optionally an extra force on the overlaps (``force``: :mod:`~dmftsolve.dynamics.forcing`) and a
  rule that ends the solve early (``stop``: :mod:`~dmftsolve.dynamics.stopping`), which the finite-d
  transition supplies (:mod:`dmftsolve.finite_d`).

The Stein estimator identifies ``Γ`` only up to a gauge once the innovation variances collapse
(GD trajectories are smooth in ``t``): its individual ``Gamma`` and ``R`` entries are not the
physical response kernels beyond the first few steps, while the observables (``Q``, ``M``, losses,
cosines) and the gauge-invariant combinations are; its ``Q`` carries a finite-``N`` bias of order
``1/N`` at long times. Use ``method="pathwise"`` when the kernels themselves are wanted
(``docs/theory.md`` §2.5, ``docs/accuracy.md``).

Monte Carlo errors (``errors``, ``docs/theory.md`` §2.7): ``"replicate"`` (default) is the spread of
``n_batches`` independent solves with ``n_paths/n_batches`` paths each, divided by ``√n_batches``,
which includes the propagation of kernel noise; ``"batch"`` is batch means over the main paths,
conditional on the kernels of earlier steps; ``"none"`` estimates none (NaN) and skips the
per-batch estimates.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dmftsolve._blas import blas_threads as blas_threads_limit
from dmftsolve.checks import check_delta
from dmftsolve.dynamics.forcing import ForceTerm, OverlapForce
from dmftsolve.dynamics.history import CompactHistory, FullHistory, PathHistory, check_history
from dmftsolve.dynamics.innovations import InnovationBasis
from dmftsolve.dynamics.parameter_side import (
    gradient_norm,
    kernel_step,
    memory_row,
    next_R_row,
    overlap_step,
    psd_violation,
)
from dmftsolve.dynamics.paths import PathSet
from dmftsolve.dynamics.pathwise import PATHWISE_MAX_BYTES, Pathwise
from dmftsolve.dynamics.response import ResponseMethod, StepMoments
from dmftsolve.dynamics.stein import Stein
from dmftsolve.dynamics.stopping import StopCheck, StopRule
from dmftsolve.hessian.law import Law
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status
from dmftsolve.seeds import SeedLike, as_generator, as_seed_sequence, child, seed_record
from dmftsolve.success import (
    direction_projections,
    largest_cosines,
    projections_and_largest_cosine,
)

__all__ = ["DMFTSettings", "DMFTResult", "solve_dmft", "available_memory_bytes", "PATHWISE_MAX_BYTES",
           "METHODS"]

#: ``DMFTSettings.method`` by name
METHODS: dict[str, ResponseMethod] = {"stein": Stein(), "pathwise": Pathwise()}


# --------------------------------------------------------------------------- settings
def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_ints(name: str, values: Any) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of integers, got {values!r}")
    values = list(values)
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must hold integers >= 0, got {values!r}")
    return tuple(sorted({int(v) for v in values}))


def check_null_rtol(value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is None or a real number in ``[0, 1)``
    (``null_rtol`` of :class:`DMFTSettings`, also taken by the threshold search's settings)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not 0 <= value < 1:
        raise ValueError(f"null_rtol must be a number in [0, 1) or None, got {value!r:.80}")


def _as_method(value: Any) -> ResponseMethod:
    if isinstance(value, str) and value in METHODS:
        return METHODS[value]
    if isinstance(value, (Stein, Pathwise)) or (
            not isinstance(value, str) and all(hasattr(value, a) for a in ("build", "name", "needs_D"))):
        return value
    raise ValueError(f"method must be 'stein' or 'pathwise' (or a response method such as "
                     f"Stein(regression=True)), got {value!r}")


@dataclass(frozen=True, kw_only=True)
class DMFTSettings:
    """Options of :func:`solve_dmft`, validated on construction.

    Parameters
    ----------
    n_paths : int
        Monte Carlo paths ``N`` of the sample process (rounded up to a multiple
        of ``n_batches`` — of ``2·n_batches`` with antithetic pairs, doubled
        again with ``reflect``; see :meth:`total_paths`).
    seed : int, SeedSequence, Generator or None
        Seed of the paths (:mod:`dmftsolve.seeds`); fresh entropy if None,
        recorded in the result's ``settings``. The paths use the stream of
        ``as_generator(seed)``; the Monte Carlo test sample child 0, the
        replicate solves children ``1 … n_batches`` and a ``force`` its own child.
    steps : int, optional
        Number of GD steps ``T`` (default ``problem.training.steps``).
    method : {"stein", "pathwise"} or a response method
        How ``Γ`` is estimated: ``"stein"`` (:class:`~dmftsolve.dynamics.stein.Stein`, Gaussian
        integration by parts, ``O(N T² m²)``), ``Stein(regression=True)`` (the responses by
        regression on the innovations), or ``"pathwise"``
        (:class:`~dmftsolve.dynamics.pathwise.Pathwise`, ``O(N T³ m³)`` with ``O(N T² m²)``
        memory: the reference for the kernels themselves).
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
        Batches for the batch-means standard errors (``>= 2``), and the
        number of replicate solves of ``errors="replicate"``.
    keep_samples_at : sequence of int
        Steps at which the paths are kept (:meth:`DMFTResult.law`,
        :meth:`DMFTResult.samples`).
    errors : {"replicate", "batch", "none"}
        How the ``*_err`` arrays are estimated (module docstring). ``"replicate"``
        doubles the cost; ``"batch"`` underestimates the error of long-time quantities;
        ``"none"`` leaves them NaN, for callers that only need the kernels or the paths.
    null_rtol : float, optional
        Relative pivot (innovation variance / ``Q(t,t)_jj``) below which an
        innovation counts as zero-variance (``docs/theory.md`` §2.4). Default: the method's
        (``1e-4`` for Stein, which divides by the innovations, ``1e-10`` for pathwise).
        Dropping an innovation changes ``Q`` by a relative ``≤ null_rtol``. A Stein run
        that loses positive semidefiniteness ("the DMFT diverged") over a long horizon at
        width ≥ 2 wants a larger value, e.g. ``1e-3`` (``docs/findings.md`` §4.9).
    test_loss : {"mc", "population", "none"}
        ``"mc"`` (default): Monte Carlo over the paths' ``V*``, ``ε`` and fresh Gaussian fields
        ``Ξ ~ N(0, Q(t,t))``; ``"population"``: :func:`dmftsolve.population.population_loss`
        (quadrature or QMC, slower; replicates for the errors still use Monte Carlo); ``"none"``:
        not computed (NaN).
    history : {"full", "compact"}
        What each path keeps of its past (:mod:`dmftsolve.dynamics.history`): ``"full"``, the
        gradients of every step; ``"compact"`` (Stein only, ``errors="none"``), the memory terms
        at the non-null innovations, which is cheaper and gives the same overlaps, cosines,
        ``Q(t, t)``, ``R`` and ``Γ`` up to round-off, but leaves ``Cg`` outside its diagonal
        blocks and some entries of ``Q`` NaN.
    path_dtype : {"float64", "float32"}
        Storage of the path history (innovations and gradients or memory terms, read every step:
        the solve's main cost). The kernels, overlaps and each step's fields stay in float64.
        ``"float32"`` halves the memory and the time of those reads; its rounding flips some of
        the Stein solve's zero-variance decisions, so over hundreds of steps a single solve's
        kernels move as another seed moves them (``docs/findings.md`` §7).
    force : OverlapForce, optional
        An extra term in the overlap update (:mod:`dmftsolve.dynamics.forcing`), e.g. GD's
        finite-``n`` gradient (:class:`dmftsolve.finite_d.force.BootstrapForce`).
    stop : StopRule, optional
        A rule that ends the solve early (:mod:`dmftsolve.dynamics.stopping`), e.g. at the first
        passage of the success criterion (:class:`dmftsolve.finite_d.stopping.FirstPassage`).
    progress : bool
        Show a tqdm progress bar.
    blas_threads : int or None
        BLAS threads during the solve (default 1; None leaves the setting alone).
        The per-step linear algebra is small, and multi-threaded BLAS on small
        matrices on a loaded machine can be many times slower.
    throw : bool
        Raise :class:`SolverError` on failure (non-finite values); otherwise
        return a result with a failure status and NaN after the failing step.

    Examples
    --------
    >>> DMFTSettings(n_paths=1000, seed=0).total_paths()
    1000
    >>> DMFTSettings(method=Stein(regression=True)).method
    Stein(regression=True)
    >>> DMFTSettings(n_batches=1)
    Traceback (most recent call last):
    ...
    ValueError: n_batches must be an integer >= 2, got 1
    """

    n_paths: int = 100_000
    seed: SeedLike = None
    steps: int | None = None
    method: Any = "stein"
    antithetic: bool = True
    reflect: tuple[int, ...] = ()
    n_batches: int = 20
    keep_samples_at: tuple[int, ...] = ()
    errors: Literal["replicate", "batch", "none"] = "replicate"
    null_rtol: float | None = None
    test_loss: Literal["mc", "population", "none"] = "mc"
    history: Literal["full", "compact"] = "full"
    path_dtype: Literal["float64", "float32"] = "float64"
    force: OverlapForce | None = None
    stop: StopRule | None = None
    progress: bool = False
    blas_threads: int | None = 1
    throw: bool = True

    def __post_init__(self) -> None:
        B = _check_int("n_batches", self.n_batches, 2)
        n = _check_int("n_paths", self.n_paths, 1)
        if n < 2 * B:
            raise ValueError(f"n_paths must be at least 2*n_batches={2 * B}, got {self.n_paths!r}")
        if self.steps is not None:
            object.__setattr__(self, "steps", _check_int("steps", self.steps, 0))
        object.__setattr__(self, "method", _as_method(self.method))
        if self.errors not in ("replicate", "batch", "none"):
            raise ValueError(f"errors must be 'replicate', 'batch' or 'none', got {self.errors!r}")
        if self.test_loss not in ("mc", "population", "none"):
            raise ValueError(f"test_loss must be 'mc', 'population' or 'none', got {self.test_loss!r}")
        check_null_rtol(self.null_rtol)
        if self.blas_threads is not None:
            _check_int("blas_threads", self.blas_threads, 1)
        if self.path_dtype not in ("float64", "float32"):
            raise ValueError(f"path_dtype must be 'float64' or 'float32', got {self.path_dtype!r}")
        check_history(self.history, self.method.name, self.errors)
        for name in ("antithetic", "progress", "throw"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not (self.seed is None or isinstance(self.seed, (np.random.SeedSequence, np.random.Generator))):
            as_seed_sequence(self.seed)  # raises ValueError naming the seed
        object.__setattr__(self, "n_paths", n)
        object.__setattr__(self, "n_batches", B)
        object.__setattr__(self, "reflect", _check_ints("reflect", self.reflect))
        object.__setattr__(self, "keep_samples_at", _check_ints("keep_samples_at", self.keep_samples_at))
        for name, proto in (("force", "build"), ("stop", "build")):
            value = getattr(self, name)
            if value is not None and not hasattr(value, proto):
                raise ValueError(f"{name} must be None or an object with a build() method, got {value!r}")
        if self.force is not None:
            self.force.check(reflect=self.reflect, n_paths=self.total_paths())

    # ------------------------------------------------------------------ derived
    @property
    def rtol(self) -> float:
        """``null_rtol`` with its method default filled in."""
        if self.null_rtol is not None:
            return float(self.null_rtol)
        return float(self.method.default_null_rtol)

    def total_paths(self) -> int:
        """``n_paths`` rounded up to whole batches of antithetic (and reflected) pairs."""
        unit = self.n_batches * (2 if self.antithetic else 1) * (2 if self.reflect else 1)
        return int(math.ceil(self.n_paths / unit) * unit)

    def resolved_steps(self, problem: Problem) -> int:
        """``steps``, or the problem's ``training.steps`` when None."""
        return problem.training.steps if self.steps is None else self.steps

    def check(self, problem: Problem) -> None:
        """The checks that need the problem (``reflect`` within ``k``, kept steps within ``T``, the
        stopping rule's directions)."""
        T = self.resolved_steps(problem)
        if any(j >= problem.k for j in self.reflect):
            raise ValueError(f"reflect must hold target directions in [0, {problem.k}), got "
                             f"{list(self.reflect)!r}")
        if any(t > T for t in self.keep_samples_at):
            raise ValueError(f"keep_samples_at must lie in 0..{T}, got {list(self.keep_samples_at)!r}")
        if self.stop is not None:
            self.stop.check(problem.k)

    def memory_bytes(self, problem: Problem) -> int:
        """Estimated peak memory of :func:`solve_dmft` with these settings, in bytes.

        Counts the arrays whose size grows with ``N``, ``T`` and ``m``: the path history
        (``(T+1) m × N`` gradients or memory terms and ``(T+1) m × N/c`` distinct innovations,
        ``c`` the antithetic and reflected copies), one history-sized temporary, the
        ``((T+2) m)²`` kernel stores, the estimator's store, the kept paths, and with
        ``errors="replicate"`` the main result held while the replicates run.
        """
        T, m, k = self.resolved_steps(problem), problem.m, problem.k
        N, B = self.total_paths(), self.n_batches
        Tm1, Tm2 = (T + 1) * m, (T + 2) * m
        unit = (2 if self.antithetic else 1) * (2 if self.reflect else 1)
        size = np.dtype(self.path_dtype).itemsize / 8
        n = 2 * size * Tm1 * N * (1 + 1 / unit)
        n += 2 * Tm2 * Tm2 + 4 * Tm1 * Tm1 + 5 * Tm1 * Tm1  # Q, R; Γ, Γ_err, Cg, L; assembled blocks
        n += len(self.keep_samples_at) * N * (2 * m + k + 1 + m * m)
        n += N * (8 * m + 2 * k + 2 * m * m + 8)  # per-step path arrays
        n += self.method.memory_bytes(n_paths=N, n_batches=1 if self.errors == "none" else B,
                                      steps=T, m=m) // 8
        if self.errors == "replicate":  # the main result, and each replicate's Γ kept for the spread
            n += (5 + B) * Tm1 * Tm1
        return 8 * int(n)

    def to_dict(self, problem: Problem | None = None) -> dict[str, Any]:
        """JSON-ready record (the seed as given; ``n_paths`` both requested and total)."""
        seed = self.seed
        if isinstance(seed, np.random.SeedSequence):
            seed = seed_record(seed)
        elif isinstance(seed, np.random.Generator):
            seed = "Generator"
        out = {"n_paths": self.total_paths(), "n_paths_requested": self.n_paths, "seed": seed,
               "steps": self.steps if problem is None else self.resolved_steps(problem),
               **self.method.to_dict(), "antithetic": self.antithetic, "reflect": list(self.reflect),
               "n_batches": self.n_batches, "keep_samples_at": list(self.keep_samples_at),
               "null_rtol": self.rtol, "test_loss": self.test_loss, "errors": self.errors,
               "history": self.history, "path_dtype": self.path_dtype,
               "force": None if self.force is None else self.force.to_dict(),
               "stop": None if self.stop is None else self.stop.to_dict()}
        return out


def available_memory_bytes() -> int | None:
    """Memory available to a new allocation (``MemAvailable`` of ``/proc/meminfo``), or None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None



# --------------------------------------------------------------------------- result
@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class DMFTResult(Result):
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
    between ``span(W^t)`` and ``span(Θ*)``), each with ``*_err`` (standard
    error as chosen by ``errors``; ``diagnostics["error_model"]``).
    ``cosine_per_direction`` (``(T+1, k)``) is each target direction's projection
    ``‖P_W θ*_j‖`` onto ``span(W^t)`` (:mod:`dmftsolve.success`).

    ``b`` (shape ``(T+1, m)``) is the trained bias ``b_t`` (exactly zero when
    the problem has ``bias=False``) and ``b_err`` its error; ``grad_norm``
    does not include the bias gradient. The paths kept at the steps
    ``keep_samples_at`` are returned by :meth:`law` (and :meth:`samples`).
    """

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
    cosine_per_direction: np.ndarray | None = None
    kept: dict[int, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)

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
        ``= ∇²_V ℓ(y, V^t)``. :meth:`law` returns the same as a typed
        :class:`~dmftsolve.hessian.law.Law`.
        """
        if t not in self.kept:
            raise KeyError(f"samples at t={t} were not kept; kept: {sorted(self.kept)} "
                           "(use keep_samples_at)")
        return self.kept[t]

    def law(self, t: int) -> Law:
        """The Monte Carlo law of the training fields ``(D, V*, V, y)`` at step ``t``.

        Raises
        ------
        KeyError
            If the paths at ``t`` were not kept (``keep_samples_at``).
        """
        s = self.samples(t)
        return Law(D=s["D"], Vstar=s["Vstar"], V=s["V"], y=s["y"], kind="monte_carlo",
                   n_paths=int(s["D"].shape[0]), t=int(t),
                   diagnostics={"source": "dmft", "delta": self.settings.get("delta"),
                                "seed": self.settings.get("seed")})

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.pop("kept", None)
        return d


#: Relative tolerance of the check that ``Q(t, t)`` stays positive semidefinite
#: (:meth:`_Run._lost_psd`): Monte Carlo noise in the recursion leaves a singular direction
#: at most this far below zero; a diverged run goes far beyond it.
PSD_RTOL = 1e-6


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


def _test_loss(problem: Problem, source: str, M: np.ndarray, Q: np.ndarray, b: np.ndarray | None,
               sample: dict[str, np.ndarray] | None) -> tuple[float, float]:
    """Test loss at ``(M_t, Q(t,t), b_t)`` with its error, from ``source`` (``test_loss`` setting)."""
    if source == "none":
        return math.nan, math.nan
    if source == "population":
        from dmftsolve.population import population_loss

        e = population_loss(problem, M, (Q + Q.T) / 2, b)
        return float(e.value), float(e.error)
    assert sample is not None
    V = M.T @ sample["Vstar"] + _sym_sqrt(Q) @ sample["zeta"]
    if b is not None:
        V = V + np.asarray(b, dtype=float)[:, None]
    lv = problem.loss_value(sample["y"], V.T)
    return float(lv.mean()), float(lv.std(ddof=1) / math.sqrt(lv.size))


# --------------------------------------------------------------------------- driver
_OBSERVABLES = ("train_loss", "train_loss_err", "test_loss", "test_loss_err", "grad_norm",
                "grad_norm_err", "cosine", "cosine_err")


class _Run:
    """One forward pass of the DMFT: the state of the driver loop (:func:`solve_dmft`), composed of
    the paths, the innovation basis, the path history, the response estimator, the parameter-side
    kernel stores and, if given, a force on the overlaps and a stopping rule."""

    def __init__(self, problem: Problem, delta: float, cfg: DMFTSettings, root: np.random.SeedSequence,
                 test: dict[str, np.ndarray] | None) -> None:
        self.problem, self.delta, self.cfg = problem, delta, cfg
        k, m = problem.k, problem.m
        T = self.T = cfg.resolved_steps(problem)
        B = self.B = cfg.n_batches
        N = self.N = cfg.total_paths()
        self.nb = N // B
        self.k, self.m = k, m
        tr = problem.training
        self.eta, self.lam = tr.eta, tr.lam
        self.held = list(tr.hold_zero)
        self.keep = set(cfg.keep_samples_at)
        self.pooled = cfg.errors == "none"  # one pooled estimate, no per-batch ones
        pooled_stein = self.pooled and cfg.method.name == "stein"
        self.estimator = cfg.method.build(n_batches=1 if pooled_stein else B,
                                          batch_size=N if pooled_stein else self.nb, steps=T, m=m,
                                          antithetic=cfg.antithetic)
        # the parameter side reads the kernels where Γ can be non-zero (the non-null innovations)
        self.read_support = bool(getattr(self.estimator, "zero_at_null", False))
        self.paths = PathSet(problem, n_paths=N, n_batches=B, antithetic=cfg.antithetic,
                             reflect=cfg.reflect, steps=T, dtype=cfg.path_dtype, rng=as_generator(root))
        if test is None and cfg.test_loss == "mc":
            test = _test_sample(problem, N, as_generator(child(root, 0)))
        self.test = test
        self.force: ForceTerm | None = None if cfg.force is None else cfg.force.build(self.paths, root)
        self.stop: StopCheck | None = None if cfg.stop is None else cfg.stop.build(T, k)
        Tm1, Tm2 = (T + 1) * m, (T + 2) * m
        self.basis = InnovationBasis(T, m, cfg.rtol)
        self.Qb, self.Rb = np.zeros((Tm2, Tm2)), np.zeros((Tm2, Tm2))
        self.Gb, self.Gb_err = np.zeros((Tm1, Tm1)), np.zeros((Tm1, Tm1))
        self.Cb = np.zeros((Tm1, Tm1))
        self.history: PathHistory
        if cfg.history == "compact":
            self.history = CompactHistory(self.paths, self.basis, steps=T, eta=self.eta, lam=self.lam,
                                          delta=delta, dtype=cfg.path_dtype)
        else:
            self.history = FullHistory(self.paths, self.Rb, steps=T, eta=self.eta, delta=delta,
                                       pooled=self.pooled, dtype=cfg.path_dtype)
        self.loss_paths = np.zeros(N)  # ℓ(y, V^t) of each path at the current step
        self.M, self.M_err = np.zeros((T + 2, k, m)), np.zeros((T + 2, k, m))
        self.bvec, self.b_err = np.zeros((T + 2, m)), np.zeros((T + 2, m))  # b_t: 0 without a bias
        self.Q_err = np.zeros((T + 2, m, m))
        if self.pooled:  # not estimated (NaN after the start)
            self.M_err[1:] = np.nan
            self.Q_err[1:] = np.nan
        self.out = {name: np.full(T + 1, np.nan) for name in _OBSERVABLES}
        self.cos_dir = np.full((T + 1, k), np.nan)
        self.kept: dict[int, dict[str, np.ndarray]] = {}
        self.eye = np.eye(m)
        M0 = np.array(tr.init.overlaps(k, m), dtype=float)
        M0[self.held, :] = 0.0
        self.M[0] = M0
        Q0 = np.array(tr.init.gram(m), dtype=float)
        self.Qb[:m, :m] = (Q0 + Q0.T) / 2
        self.Rb[:m, :m] = self.eye

    def _blk(self, t: int) -> slice:
        return slice(t * self.m, (t + 1) * self.m)

    # ------------------------------------------------------------------ one step
    def _fields(self, t: int, null: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Innovations ``ζ^t`` (distinct columns), fields ``V^t = M_tᵀV* + Ξ^t + μ^t + b_t`` and
        gradients ``g^t`` (each (m, N))."""
        z, n0, n1 = self.paths.draw(t, null, self.basis)
        V = self.M[t].T @ self.paths.Vstar + self.paths.gaussian_part(t, self.basis)  # (m, N)
        mem = self.history.memory(t)
        self.history.stored(t, n0, n1, np.flatnonzero(~null))
        if mem is not None:
            V += mem
        if self.problem.bias:
            V += self.bvec[t][:, None]
        lv, g = self.problem.loss_and_grad_rows(self.paths.y, V)  # (N,), (m, N) C-ordered
        self.loss_paths = np.asarray(lv, dtype=float)
        return z, V, g

    def _train_observables(self, t: int, V: np.ndarray) -> np.ndarray | None:
        """Training loss at ``t``; ``D^t`` when the estimator or ``keep_samples_at`` needs it."""
        per_loss = self.loss_paths.reshape(self.B, self.nb).mean(axis=1)
        self.out["train_loss"][t] = per_loss.mean()
        self.out["train_loss_err"][t] = _batch_se(per_loss[:, None])[0]
        if not (self.estimator.needs_D or t in self.keep):
            return None
        y = self.paths.y
        D = np.asarray(self.problem.hess(y, V.T), dtype=float)  # (N, m, m)
        if t in self.keep:
            self.kept[t] = {"V": V.T.copy(), "Vstar": self.paths.Vstar.T.copy(), "y": y.copy(), "D": D.copy()}
        return D

    def _moments(self, t: int, z: np.ndarray, g: np.ndarray, null: np.ndarray,
                 D: np.ndarray | None) -> tuple[StepMoments, np.ndarray | None, np.ndarray]:
        """The estimator's input, the per-batch ``Cν`` row if the history forms it, ``E[V* gᵀ]``."""
        m, t1m = self.m, (t + 1) * self.m
        Cnu = self.history.record(t, g)
        mom, zmean = self.paths.innovation_moments(t, z, g, self.basis, self.pooled)
        step = StepMoments(
            t=t, m=m, gmean=self.paths.gradient_means(g, self.pooled), gz=mom[:, :m], zz=mom[:, m:],
            zmean=zmean, null=null, null_mask=self.basis.null_mask[:t1m].copy(),
            L=self.basis.L[:t1m, :t1m], D=D, R_row=self.Rb[self._blk(t), m:t1m],
            eta_over_delta=self.eta / self.delta, L_nonnull=self.basis.Lc[:self.basis.n, :self.basis.n])
        EVg_b = self.paths.target_moments(g)  # (B, k, m)
        if self.force is not None:  # the same in every batch
            EVg_b = EVg_b + self.force(g)[None]
        return step, Cnu, EVg_b

    def _advance(self, t: int, Gam: np.ndarray, Gam_b: np.ndarray, Cnu_b: np.ndarray,
                 N_row: np.ndarray | None, EVg_b: np.ndarray, g: np.ndarray, R_row: np.ndarray,
                 support: np.ndarray | None = None) -> bool:
        """Store row ``t`` of ``Γ, Cg`` and advance ``Q, R, M, b`` to ``t+1``; False if non-finite.

        The per-batch arrays (``Gam_b, Cnu_b, EVg_b``) are advanced beside the pooled ones for the
        batch errors; with ``errors="none"`` only the pooled ones are. ``support``: the columns
        outside which every ``Γ`` row is zero (:func:`kernel_step`), or None."""
        m, eta, lam, held = self.m, self.eta, self.lam, self.held
        blk, blk2 = self._blk(t), self._blk(t + 1)
        tm, t1m = t * m, (t + 1) * m
        pooled = self.pooled
        EVg = EVg_b.mean(axis=0)  # (the batches' E[V* gᵀ] are formed even when pooled)
        if pooled:
            Cn = Cnu_b[0]
            Gam_b, Cnu_b, EVg_b = Gam_b[:0], Cnu_b[:0], EVg_b[:0]
            self.Gb_err[blk, :t1m] = np.nan
        else:
            Cn = Cnu_b.mean(axis=0)
            self.Gb_err[blk, :t1m] = _batch_se(Gam_b)
        self.Gb[blk, :t1m] = Gam
        self.Cb[blk, :t1m] = Cn * self.delta
        self.Cb[:t1m, blk] = (Cn * self.delta).T
        Gt = np.concatenate([Gam[None], Gam_b])  # index 0 all paths, then the batches
        Cs = np.concatenate([Cn[None], Cnu_b])
        if N_row is None:
            N_row = memory_row(Cs, self.Rb, t, m, eta)
        ks = kernel_step(self.Qb, Gt, Cs[:, :, tm:t1m], N_row, t, m, eta, lam, support)
        Qnext = ks.Q_next
        Mt = self.M[t]
        Mnext = overlap_step(Mt[None], EVg_b, eta, lam, held)
        Mnext_all = overlap_step(Mt, EVg, eta, lam, held)
        self.out["grad_norm"][t] = float(gradient_norm(EVg, Mt, ks.E_phiphi[0], lam, held))
        if not pooled:
            gn_b = gradient_norm(EVg_b, Mt[None], ks.E_phiphi[1:], lam, held)
            self.out["grad_norm_err"][t] = _batch_se(gn_b[:, None])[0]
        self.Qb[blk2, :t1m] = ks.Q_row
        self.Qb[:t1m, blk2] = ks.Q_row.T
        self.Qb[blk2, blk2] = Qnext[0]
        self.Rb[blk2, :t1m] = R_row
        self.Rb[blk2, blk2] = self.eye
        self.M[t + 1] = Mnext_all
        if not pooled:
            self.M_err[t + 1] = _batch_se(Mnext)
        if self.problem.bias:  # b_{t+1} = b_t − η E[g^t]
            Eg_batches = self.paths.batches(g).mean(axis=2)  # (B, m)
            self.bvec[t + 1] = self.bvec[t] - eta * Eg_batches.mean(axis=0)
            self.b_err[t + 1] = _batch_se(self.bvec[t][None] - eta * Eg_batches)
        if pooled:
            self.out["cosine"][t] = self.cos_now  # of M_t and Q(t, t), formed at the step's start
        else:  # cosine at t (all paths) and the batch spread of the cosine at t+1, in one call
            self.Q_err[t + 1] = _batch_se(Qnext[1:])
            cos = largest_cosines(np.concatenate([Mt[None], Mnext]),
                                  np.concatenate([self.Qb[blk, blk][None], Qnext[1:]]))
            self.out["cosine"][t] = cos[0]
            if t + 1 <= self.T:
                self.out["cosine_err"][t + 1] = _batch_se(cos[1:, None])[0]
        new = (Gam, Cn[:, tm:t1m], N_row, Qnext[0], ks.Q_row, Mnext_all, self.Rb[blk2, :t1m],
               self.bvec[t + 1])
        # one sum first (an overflowing sum of finite values is checked entry by entry)
        with np.errstate(over="ignore", invalid="ignore"):
            total = sum(float(np.sum(a)) for a in new)
        return math.isfinite(total) or all(np.all(np.isfinite(a)) for a in new)

    def _lost_psd(self, t: int) -> str:
        """A message if ``Q(t, t)`` (from the kernel recursion, not a sample moment) has an
        eigenvalue below ``−PSD_RTOL`` times its largest diagonal entry, else ``""``: the recursion
        has diverged. With the Stein responses this is Monte Carlo noise amplified by the solve,
        which divides by innovations just above ``null_rtol`` (``docs/findings.md`` §4.9)."""
        bad = psd_violation(self.Qb[self._blk(t), self._blk(t)], PSD_RTOL)
        if bad is None:
            return ""
        lo, scale = bad
        hint = ""
        if self.cfg.method.name == "stein":
            hint = (f"; Stein divides by innovations just above null_rtol={self.cfg.rtol:g}, "
                    f"so try a larger null_rtol (e.g. 1e-3) or more paths")
        return (f"the DMFT diverged at step {t}: Q(t,t) is not positive semidefinite (smallest "
                f"eigenvalue {lo:.3g}, largest diagonal entry {scale:.3g}){hint}")

    # ------------------------------------------------------------------ the loop
    def run(self, settings: dict[str, Any], t_start: float) -> DMFTResult:
        status, message, last = Status.SUCCESS, "", self.T
        steps = range(self.T + 1)
        if self.cfg.progress:
            from tqdm import tqdm

            steps = tqdm(steps, desc=f"DMFT ({self.cfg.method.name})", unit="step")
        passed = gave_up = None
        for t in steps:
            blk = self._blk(t)
            Mt, Qtt = self.M[t], self.Qb[blk, blk]
            if self.m == 1:
                self.cos_dir[t] = direction_projections(Mt, Mt.T @ Mt + Qtt)
                self.cos_now = float(largest_cosines(Mt[None], Qtt[None])[0])
            else:  # both from one eigendecomposition of the Gram
                self.cos_dir[t], self.cos_now = projections_and_largest_cosine(Mt, Qtt)
            if self.stop is not None:
                verdict = self.stop(t, self.cos_dir)
                if verdict is not None:
                    passed, gave_up = (t, None) if verdict == "passed" else (None, t)
                    self.out["cosine"][t] = self.cos_now
                    break
            null = self.basis.extend(self.Qb, t)
            z, V, g = self._fields(t, null)
            # one sum, not a mask of N·m entries; an overflowing sum of finite values is checked again
            if not math.isfinite(float(g.sum())) and not np.all(np.isfinite(g)):
                status, message, last = Status.NONFINITE, f"non-finite gradient g at step {t}", t - 1
                break
            D = self._train_observables(t, V)
            step, Cnu_b, EVg_b = self._moments(t, z, g, null, D)
            Gam, Gam_b = self.estimator.row(step)
            support = self.basis.nonnull if self.read_support else None
            R_row = next_R_row(self.Rb, Gam, t, self.m, self.eta, self.lam, support)  # R(t+1, ≤t)
            Cnu_b, N_row = self.history.advance(t, g, Gam, R_row, Cnu_b)
            finite = self._advance(t, Gam, Gam_b, Cnu_b, N_row, EVg_b, g, R_row, support)
            self.out["test_loss"][t], self.out["test_loss_err"][t] = _test_loss(
                self.problem, self.cfg.test_loss, self.M[t], self.Qb[blk, blk],
                self.bvec[t] if self.problem.bias else None, self.test)
            if not finite:
                status, message, last = Status.NONFINITE, f"non-finite kernels at step {t}", t
                break
            lost = self._lost_psd(t + 1)
            if lost:
                status, message, last = Status.FAILED, lost, t - 1
                break
        self.out["cosine_err"][0] = 0.0
        return self._assemble(status, message, last, settings, t_start, passed, gave_up)

    def _assemble(self, status: Status, message: str, last: int, settings: dict[str, Any],
                  t_start: float, passed: int | None = None, gave_up: int | None = None
                  ) -> DMFTResult:
        m, n1 = self.m, self.T + 1

        def blocks(A: np.ndarray) -> np.ndarray:  # a view: the solve is over, its stores are the result's
            return A[: n1 * m, : n1 * m].reshape(n1, m, n1, m).transpose(0, 2, 1, 3)

        T1 = self._blk(self.T + 1)
        Q_next = self.Qb[T1, T1].copy()
        if self.cfg.history == "compact":  # Q(s, u) with u null and s ≥ u + 2 was not computed
            step = np.arange(self.Qb.shape[0]) // m
            nm = np.zeros(step.size, dtype=bool)
            nm[: self.basis.null_mask.size] = self.basis.null_mask
            lost = nm[None, :] & (step[:, None] >= step[None, :] + 2)
            self.Qb[lost] = np.nan
            self.Qb[lost.T] = np.nan
        Qk, Rk, Gk, Ck, Gek = (blocks(A) for A in (self.Qb, self.Rb, self.Gb, self.Cb, self.Gb_err))
        Mk, bk = self.M[:n1].copy(), self.bvec[:n1].copy()
        out = self.out
        cos_dir = self.cos_dir.copy()

        def blank_from(step: int) -> None:  # nothing from ``step`` on was computed (or it failed)
            for A in (Gk, Ck, Gek):
                A[step:, :] = np.nan
                A[:, step:] = np.nan
            for A in (Qk, Rk):
                A[step + 1:, :] = np.nan
                A[:, step + 1:] = np.nan
            Mk[step + 1:] = np.nan
            bk[step + 1:] = np.nan
            for arr in out.values():
                arr[step:] = np.nan

        end = passed if passed is not None else gave_up
        if end is not None:  # the first passage, or given up: the cosine at that step is kept
            cos_t = out["cosine"][end]
            blank_from(end)
            out["cosine"][end] = cos_t
        if status is not Status.SUCCESS:
            bad = max(last + 1, 0)
            cos_dir[bad:] = np.nan
            blank_from(bad)
        diagnostics = {
            "n_paths": self.N,
            "innovation_min_pivot": self.basis.min_pivot,
            "zero_variance_innovations": self.basis.n_null,
            "stein_regressed": np.zeros(n1, dtype=bool),
            "error_model": "none (errors='none')" if self.pooled else
                           "batch means over n_batches, conditional on earlier kernels "
                           "(propagated kernel error not included)",
            "test_loss_source": self.cfg.test_loss,
            "Q_next": Q_next if status is Status.SUCCESS and end is None else None,
        } | self.estimator.diagnostics()
        if self.stop is not None:
            diagnostics |= self.stop.diagnostics(passed, gave_up)
        return DMFTResult(
            status=status, message=message, settings=settings, diagnostics=diagnostics,
            elapsed=time.perf_counter() - t_start,
            Q=Qk, Gamma=Gk, R=Rk, Cg=Ck, M=Mk, Gamma_err=Gek, M_err=self.M_err[:n1].copy(),
            Q_err=self.Q_err[:n1].copy(), b=bk, b_err=self.b_err[:n1].copy(), kept=self.kept,
            cosine_per_direction=cos_dir, **out,
        )


# --------------------------------------------------------------------------- solver
_ERR_FIELDS = (("train_loss", "train_loss_err"), ("test_loss", "test_loss_err"),
               ("grad_norm", "grad_norm_err"), ("cosine", "cosine_err"),
               ("Gamma", "Gamma_err"), ("M", "M_err"), ("b", "b_err"))

_REPLICATE_MODEL = ("replicates: std over n_batches independent solves of n_paths/n_batches "
                    "paths, divided by sqrt(n_batches)")


def _solve_once(problem: Problem, delta: float, cfg: DMFTSettings, root: np.random.SeedSequence,
                test: dict[str, np.ndarray] | None) -> DMFTResult:
    """One forward pass with batch-means errors (``test``: the test sample, drawn if None)."""
    t_start = time.perf_counter()
    settings = {"problem": problem.to_dict(), "delta": delta} | cfg.to_dict(problem)
    if cfg.seed is None:
        settings["seed"] = seed_record(root)
    return _Run(problem, delta, cfg, root, test).run(settings, t_start)


def _replicate_errors(res: DMFTResult, problem: Problem, delta: float, cfg: DMFTSettings,
                      root: np.random.SeedSequence, test: dict[str, np.ndarray] | None) -> DMFTResult:
    """``res`` with its ``*_err`` arrays replaced by the spread of ``n_batches`` replicate solves.

    Replicate ``j`` has ``n_paths/n_batches`` paths and seed ``child(root, 1 + j)``; all of
    them evaluate the test loss on the same test sample (common random numbers), so their
    spread is the propagated kernel error only, and the main solve's own test-sample error
    is added to it.
    """
    B, N = cfg.n_batches, res.diagnostics["n_paths"]
    n_test = min(N, 2**14)
    shared = None if test is None else {key: v[..., :n_test] for key, v in test.items()}
    rep_cfg = dataclasses.replace(
        cfg, n_paths=max(N // B, 8), n_batches=2, errors="batch", keep_samples_at=(), progress=False,
        throw=False, null_rtol=cfg.rtol, test_loss="none" if cfg.test_loss == "none" else "mc")
    reps = []  # only what the spread needs (a replicate's full result holds five (T+1)² kernels)
    for j in range(B):
        r = _solve_once(problem, delta, rep_cfg, child(root, 1 + j), shared)
        if r.ok:
            reps.append({val: getattr(r, val) for val, _ in _ERR_FIELDS} | {"q_diag": r.q_diag})
    conditional = {err: getattr(res, err) for _, err in _ERR_FIELDS} | {"Q_err": res.Q_err}
    diagnostics = res.diagnostics | {"conditional_err": conditional, "replicates": len(reps),
                                     "error_model": _REPLICATE_MODEL}
    warnings = list(res.warnings)
    if len(reps) < 2:
        warnings.append(f"only {len(reps)} of {B} replicate solves succeeded: the errors are NaN")
        errs = {err: np.full_like(getattr(res, err), np.nan) for _, err in _ERR_FIELDS}
        errs["Q_err"] = np.full_like(res.Q_err, np.nan)
    else:
        n = len(reps)
        with np.errstate(over="ignore", invalid="ignore"):
            errs = {err: np.stack([r[val] for r in reps]).std(axis=0, ddof=1) / math.sqrt(n)
                    for val, err in _ERR_FIELDS}
            errs["Q_err"] = np.stack([r["q_diag"] for r in reps]).std(axis=0, ddof=1) / math.sqrt(n)
        errs["test_loss_err"] = np.hypot(errs["test_loss_err"], res.test_loss_err)
    return dataclasses.replace(res, diagnostics=diagnostics, warnings=warnings, **errs)


#: option names :class:`DMFTSettings` does not take, and the component that does their job
_REPLACED = {
    "stein_regression": "pass method=Stein(regression=True) (dmftsolve.dynamics.stein.Stein)",
    "force_samples": "pass force=BootstrapForce(samples=n) (dmftsolve.finite_d.force)",
    "force_weights": "pass force=BootstrapForce(samples=n, weights=...) (dmftsolve.finite_d.force)",
    "stop_cosine": "pass stop=FirstPassage(level) (dmftsolve.finite_d.stopping)",
    "stop_directions": "pass stop=FirstPassage(level, directions) (dmftsolve.finite_d.stopping)",
    "give_up_factor": "pass stop=FirstPassage(level, give_up_factor=F) (dmftsolve.finite_d.stopping)",
}


def solve_dmft(problem: Problem, delta: float, settings: DMFTSettings | None = None,
               **overrides: Any) -> DMFTResult:
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
    settings : DMFTSettings, optional
        The solver's options (defaults: ``DMFTSettings()``).
    **overrides
        Fields of :class:`DMFTSettings` given as keywords (``n_paths``, ``seed``,
        ``steps``, ``method``, ``antithetic``, ``reflect``, ``n_batches``,
        ``keep_samples_at``, ``errors``, ``null_rtol``, ``test_loss``,
        ``stein_regression``, ``progress``, ``blas_threads``, ``throw``); they
        replace the corresponding fields of ``settings``.

    Returns
    -------
    DMFTResult

    Raises
    ------
    ValueError
        On invalid options, or if the estimated memory
        (:meth:`DMFTSettings.memory_bytes`) exceeds the memory available.
    SolverError
        If ``settings.throw`` and the solve produced non-finite values.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> p = Problem.build(target="z**2", activation="gelu", eta=0.5, steps=5)
    >>> r = solve_dmft(p, 4.0, n_paths=2000, seed=0, errors="batch", keep_samples_at=(5,))
    >>> r.ok, r.Q.shape, r.law(5).n
    (True, (6, 6, 1, 1), 2000)
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    delta = check_delta(delta)
    if settings is not None and not isinstance(settings, DMFTSettings):
        raise ValueError(f"settings must be a DMFTSettings or None, got {settings!r}")
    names = {f.name for f in dataclasses.fields(DMFTSettings)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        hints = "".join(f"; {k}: {_REPLACED[k]}" for k in unknown if k in _REPLACED)
        raise TypeError(f"solve_dmft got unexpected keyword(s) {unknown}; the options are the fields of "
                        f"DMFTSettings: {sorted(names)}{hints}")
    cfg = settings or DMFTSettings()
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    cfg.check(problem)
    need, avail = cfg.memory_bytes(problem), available_memory_bytes()
    if avail is not None and need > avail:
        raise ValueError(
            f"solve_dmft would need about {need / 2**30:.1f} GiB (n_paths={cfg.total_paths()}, "
            f"steps={cfg.resolved_steps(problem)}, m={problem.m}, method={cfg.method!r}, "
            f"errors={cfg.errors!r}) but {avail / 2**30:.1f} GiB are available; use fewer paths or steps"
        )
    t_start = time.perf_counter()
    root = as_seed_sequence(cfg.seed)
    # overflow in a diverging run is reported by the status (NONFINITE), not by numpy warnings
    with blas_threads_limit(cfg.blas_threads), np.errstate(over="ignore", invalid="ignore"):
        test = _test_sample(problem, cfg.total_paths(), as_generator(child(root, 0))) \
            if cfg.test_loss == "mc" else None
        res = _solve_once(problem, delta, cfg, root, test)
        if cfg.errors == "replicate" and res.ok:
            res = _replicate_errors(res, problem, delta, cfg, root, test)
    res = dataclasses.replace(res, elapsed=time.perf_counter() - t_start)
    if cfg.throw and not res.ok:
        raise SolverError(f"DMFTResult {res.status.value}: {res.message}", res)
    return res
