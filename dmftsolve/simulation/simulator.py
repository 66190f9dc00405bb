"""Finite-d reference simulator: the exact full-batch GD of ``docs/theory.md`` §1.

Every theoretical quantity of the library (DMFT kernels, overlaps, losses,
Hessian outliers) is checked against this simulator run on the same
:class:`~dmftsolve.problem.Problem` (``docs/theory.md`` §6).

Set-up, for each trial:

* covariates ``X ∈ R^{n×d}`` with i.i.d. ``N(0, 1)`` entries, ``n = round(δ d)``;
* target subspace ``Θ* =`` the first ``k`` coordinate axes. This loses no
  generality: the law of ``x ~ N(0, I_d)`` is rotation invariant, so GD
  started from a rotation-invariant initialisation behaves identically (in
  law) for every orthonormal ``Θ*``. Then ``V* = X[:, :k]``, the overlaps
  ``M = Θ*ᵀW`` are the first ``k`` rows of ``W``, and projections on
  ``span(Θ*)`` are row selections;
* labels ``y_i = h(V*_i, ε_i)`` with ``ε_i ~ N(0, 1)``;
* GD ``W ← (1 − ηλ) W − (η/n) Xᵀ G`` with ``G_i = g(y_i, Wᵀx_i)``; rows of
  ``W`` listed in ``training.hold_zero`` are set to zero at initialisation
  and after every step (projected GD on the complement of those directions);
* with a trained bias (``Problem.build(..., bias=True)``) the pre-activations
  are ``V_i = Wᵀx_i + b`` everywhere (training loss, gradient, Hessian, test
  loss), ``b⁰ = 0`` and ``b ← b − (η/n) Σ_i G_i`` (no ridge, not affected by
  ``hold_zero``).

The GD step is one blocked pass over ``X``
(:mod:`dmftsolve.simulation.kernels`); the random layout of a trial (which
stream draws what) is :mod:`dmftsolve.simulation.trials`.
:func:`simulate_shared` runs trials that share one data set (sweeps over
the initialisation's seed, ``η`` or ``q0``) as one batch: one matrix-matrix
product per block of ``X`` and step for all trials.

Examples
--------
>>> from dmftsolve import Problem
>>> from dmftsolve.simulation.simulator import simulate
>>> p = Problem.build(target="z**2", activation="quad", eta=0.05, steps=20)
>>> run = simulate(p, d=50, delta=4.0, seed=0, trials=2)
>>> run.cosine.shape
(2, 21)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.linalg
import scipy.sparse.linalg as spla

from dmftsolve.checks import check_delta, check_integer
from dmftsolve.problem import Problem
from dmftsolve.results import Result, SolverError, Status
from dmftsolve.seeds import SeedLike, as_seed_sequence, seed_record
from dmftsolve.simulation.kernels import (
    BLOCK_BYTES,
    DENSE_HESSIAN_LIMIT,
    blas_threads,
    blocked_pass,
    default_block_rows,
    dense_hessian_matrix,
    gd_step,
    gd_step_batch,
    hessian_operator,
    make_grad_rows,
)
from dmftsolve.simulation.trials import (
    TestDraws,
    initial_weights,
    sample_data,
    sample_test,
    trial_generators,
    trial_seed,
)
from dmftsolve.success import direction_projections, success_directions

__all__ = [
    "SimulationResult",
    "SimulateOptions",
    "simulate",
    "simulate_shared",
    "prepare_simulation",
    "run_trial",
    "assemble_trials",
    "FULL_GRAM_LIMIT",
    # re-exported from dmftsolve.simulation.kernels
    "BLOCK_BYTES",
    "DENSE_HESSIAN_LIMIT",
    "blas_threads",
    "blocked_pass",
    "default_block_rows",
    "dense_hessian_matrix",
    "gd_step",
    "hessian_operator",
    "make_grad_rows",
]

#: Largest memory (bytes) for the stored iterates behind ``gram="full"``.
FULL_GRAM_LIMIT = 2 * 2**30


# --------------------------------------------------------------------------- result
@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class SimulationResult(Result):
    """Trajectories of finite-d GD, one row per trial.

    Arrays have leading axes ``(trials, recorded steps)``; ``R`` below is the
    number of recorded steps (:attr:`steps`).

    Attributes
    ----------
    status, message, settings, diagnostics, elapsed, version, warnings
        See :class:`~dmftsolve.results.Result`. ``settings`` holds ``d``,
        ``n``, ``delta``, ``trials``, the per-trial seeds (entropy and spawn
        key of each ``SeedSequence``), ``dtype``, ``block_rows`` and the problem.
    steps : ndarray, shape (R,)
        The recorded GD steps ``t`` (``0``, every ``record_every``-th, and ``T``).
    overlaps : ndarray, shape (trials, R, k, m)
        ``M_t = Θ*ᵀW_t``.
    gram : ndarray, shape (trials, R, m, m) or (trials, R, R, m, m)
        ``W_tᵀW_t``; with ``gram="full"`` the two-time Gram ``W_tᵀW_s``
        (axes ``t, s, :, :``).
    train_loss : ndarray, shape (trials, R)
        ``(1/n) Σ_i ℓ(y_i, W_tᵀx_i + b_t)`` (no ridge term).
    test_loss, test_loss_stderr : ndarray, shape (trials, R)
        Mean of ``ℓ`` on ``n_test`` fresh samples and its standard error.
    grad_norm : ndarray, shape (trials, R)
        ``‖∇_W L(W_t, b_t)‖_F`` (bias gradient not included; ridge included; ``hold_zero`` rows excluded, i.e.
        the norm of the step direction actually taken).
    cosine : ndarray, shape (trials, R)
        Largest principal cosine between ``span(W_t)`` and ``span(Θ*)``.
    cosine_per_direction : ndarray, shape (trials, R, k)
        ``‖P_{span W_t} θ*_i‖`` for each target direction ``i``.
    bias : ndarray, shape (trials, R, m)
        The trained bias ``b_t`` (all zeros, always present, when the problem
        has ``bias=False``).
    hessian : dict
        Empty unless ``hessian_at`` was given. Eigenpairs of ``∇²_W L`` at
        ``(W_t, b_t)``: the bias block of the Hessian is not included. Keys: ``steps`` (H,),
        ``method`` ("lanczos" or "dense"), ``hard`` (the hard rows),
        ``low``/``high`` (trials, H, n_eigs): smallest/largest eigenvalues,
        each ascending; ``low_overlap_hard``/``high_overlap_hard``: squared
        overlap of each eigenvector with the hard subspace;
        ``low_overlap_target``/``high_overlap_target``: with ``span(Θ*)``;
        ``spectrum`` (trials, H, d·m) when ``full_spectrum=True``.
    """

    steps: np.ndarray
    overlaps: np.ndarray
    gram: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    test_loss_stderr: np.ndarray
    grad_norm: np.ndarray
    cosine: np.ndarray
    cosine_per_direction: np.ndarray
    bias: np.ndarray
    hessian: dict[str, Any] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        return int(self.cosine.shape[0])

    def _array(self, name: str) -> np.ndarray:
        if name in self.hessian and isinstance(self.hessian[name], np.ndarray):
            return self.hessian[name]
        names = {f.name for f in dataclasses.fields(self)}
        value = getattr(self, name, None) if name in names else None
        if not isinstance(value, np.ndarray) or value.ndim == 0 or name == "steps":
            raise ValueError(f"name must be a per-trial array of the result, got {name!r}")
        return value

    def mean(self, name: str) -> np.ndarray:
        """Mean over trials of the array ``name`` (e.g. ``"cosine"``, ``"low"``)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(self._array(name), axis=0)

    def stderr(self, name: str) -> np.ndarray:
        """Standard error over trials of the mean of ``name`` (NaN for one trial)."""
        a = self._array(name)
        count = np.sum(np.isfinite(a), axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sd = np.nanstd(a, axis=0, ddof=1)
            return np.where(count > 1, sd / np.sqrt(np.maximum(count, 1)), np.nan)

    def final(self, name: str) -> np.ndarray:
        """Per-trial value of ``name`` at the last recorded step."""
        return self._array(name)[:, -1]

    def success_directions(self) -> tuple[int, ...]:
        """The directions a trial must learn (:func:`dmftsolve.success.success_directions`)."""
        d = self.settings.get("success_directions")
        if d is None:  # results built before the setting existed
            from dmftsolve.problem import Problem
            from dmftsolve.success import success_directions

            d = success_directions(Problem.build(**self.settings["problem"]))
        return tuple(int(j) for j in d)

    def success_statistic(self) -> np.ndarray:
        """Per trial and recorded step: the smallest projection of a success direction onto
        ``span(W_t)`` (:mod:`dmftsolve.success`), shape ``(trials, R)``; for ``k = 1`` the cosine."""
        return self.cosine_per_direction[:, :, list(self.success_directions())].min(axis=2)

    def success(self, threshold: float = 0.5, *, first_passage: bool = False) -> np.ndarray:
        """Per trial: every success direction's projection onto ``span(W_T)`` above
        ``threshold`` (:mod:`dmftsolve.success`; for ``k = 1`` the final cosine); with
        ``first_passage``, at some recorded step (the criterion of the finite-d theory). A
        trial that blew up is a failure."""
        threshold = float(threshold)
        c = self.success_statistic()
        with np.errstate(invalid="ignore"):
            above = np.isfinite(c) & (c > threshold)
        return above.any(axis=1) if first_passage else above[:, -1]

    def success_rate(self, threshold: float = 0.5, *, first_passage: bool = False) -> tuple[float, float]:
        """Fraction of successful trials (:meth:`success`) and its binomial standard error."""
        s = self.success(threshold, first_passage=first_passage)
        p = float(np.mean(s))
        return p, math.sqrt(p * (1.0 - p) / s.size)


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class SimulateOptions:
    """Validated per-trial settings of :func:`simulate` (picklable, sent to executor workers).

    Built by :func:`prepare_simulation`; the fields are the keywords of
    :func:`simulate` of the same names (``dtype`` as its name).
    """

    gram: str
    record_every: int
    n_test: int
    hessian_at: tuple[int, ...]
    n_eigs: int
    dense_hessian: bool
    full_spectrum: bool
    hard: tuple[int, ...]
    dtype: str
    block_rows: int | None
    blas_threads: int | None = 1
    stop_cosine: float | None = None

    @property
    def hessian_method(self) -> str:
        return "dense" if (self.dense_hessian or self.full_spectrum) else "lanczos"


def _dtype(value: Any) -> np.dtype:
    try:
        dt = np.dtype(value)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64, got {value!r}") from None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {value!r}")
    return dt


def _recorded_steps(T: int, every: int) -> np.ndarray:
    s = list(range(0, T + 1, every))
    if s[-1] != T:
        s.append(T)
    return np.asarray(s, dtype=int)


# --------------------------------------------------------------------------- one trial
def _cosines(M: np.ndarray, G: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest principal cosine and per-direction ``‖P_W θ_i‖`` from ``M = Θᵀ W`` and ``G = WᵀW``.

    With ``P_W = W G⁺ Wᵀ``: ``Θᵀ P_W Θ = M G⁺ Mᵀ``; its diagonal gives the
    squared per-direction projections and its largest eigenvalue the squared
    largest principal cosine.
    """
    C = M @ np.linalg.pinv(G, rcond=1e-12, hermitian=True) @ M.T
    per = direction_projections(M, G)
    top = float(np.sqrt(np.clip(np.linalg.eigvalsh(0.5 * (C + C.T))[-1], 0.0, 1.0)))
    return top, per


def _psd_factor(Q: np.ndarray) -> np.ndarray:
    """``L`` with ``L Lᵀ = Q`` for a positive semidefinite ``Q`` (clipping round-off)."""
    w, U = np.linalg.eigh(0.5 * (Q + Q.T))
    return U * np.sqrt(np.clip(w, 0.0, None))


_RECORDED = ("overlaps", "gram", "train_loss", "test_loss", "test_loss_stderr", "grad_norm",
             "cosine", "cosine_per_direction", "bias")
_HESSIAN_KEYS = ("low", "high", "low_overlap_hard", "high_overlap_hard",
                 "low_overlap_target", "high_overlap_target")


class _Recorder:
    """The recorded arrays of one trial, filled step by step."""

    def __init__(self, problem: Problem, d: int, y: np.ndarray, test: TestDraws,
                 opts: SimulateOptions, n_recorded: int) -> None:
        k, m = problem.k, problem.m
        self.problem, self.y, self.test, self.opts = problem, y, test, opts
        shapes = {"overlaps": (k, m), "gram": (m, m), "cosine_per_direction": (k,), "bias": (m,)}
        self.out: dict[str, Any] = {name: np.full((n_recorded, *shapes.get(name, ())), np.nan)
                                    for name in _RECORDED}
        self.history = np.full((n_recorded, d, m), np.nan) if opts.gram == "full" else None
        H = len(opts.hessian_at)
        self.hess: dict[str, Any] = {}
        if H:
            for key in _HESSIAN_KEYS:
                self.hess[key] = np.full((H, opts.n_eigs), np.nan)
            if opts.full_spectrum:
                self.hess["spectrum"] = np.full((H, d * m), np.nan)
            self.hess["converged"] = np.zeros(H, dtype=bool)
        self.status, self.message, self.done = Status.SUCCESS, "", False
        self.stopped: int | None = None  # the step at which the success statistic passed stop_cosine
        self.success_rows = list(success_directions(problem)) if opts.stop_cosine is not None else []

    def record(self, i: int, t: int, W: np.ndarray, V: np.ndarray, grad: np.ndarray,
               b: np.ndarray | None) -> None:
        """Record step ``t`` at row ``i``; a non-finite value ends the trial."""
        problem, out, test, k = self.problem, self.out, self.test, self.problem.k
        with np.errstate(over="ignore", invalid="ignore"):
            M = W[:k].copy()
            G = W.T @ W
            out["overlaps"][i] = M
            out["gram"][i] = G
            lt_train = problem.loss_value(self.y, np.asarray(V, np.float64))
            out["train_loss"][i] = float(np.mean(lt_train))
            spread_train = float(np.std(lt_train))
            out["bias"][i] = 0.0 if b is None else b
            if np.all(np.isfinite(W)):
                Vt = test.z @ M + test.xi @ _psd_factor(W[k:].T @ W[k:]).T
            else:
                Vt = np.full((test.z.shape[0], problem.m), np.nan)
            if b is not None:
                Vt = Vt + b
            lt = problem.loss_value(test.y, Vt)
            out["test_loss"][i] = float(np.mean(lt))
            out["test_loss_stderr"][i] = float(np.std(lt, ddof=1) / math.sqrt(lt.size))
            out["grad_norm"][i] = float(np.linalg.norm(grad))
            if np.all(np.isfinite(G)) and np.all(np.isfinite(M)):
                out["cosine"][i], out["cosine_per_direction"][i] = _cosines(M, G)
        if self.history is not None:
            self.history[i] = W
        finite = all(np.all(np.isfinite(out[key][i])) for key in
                     ("overlaps", "gram", "train_loss", "grad_norm", "cosine", "bias"))
        if not finite:
            self.status, self.message, self.done = Status.NONFINITE, f"non-finite values at step {t}", True
        elif not (math.isfinite(spread_train) and math.isfinite(out["test_loss_stderr"][i])):
            # the losses are finite but their spread overflows: no error bar can be given for
            # them, and GD at this scale has left double precision's range (a divergence)
            self.status, self.done = Status.NONFINITE, True
            self.message = (f"non-finite values at step {t}: the losses' spread overflows double "
                            f"precision (train loss {out['train_loss'][i]:.3g})")
        elif self.success_rows and \
                out["cosine_per_direction"][i][self.success_rows].min() > self.opts.stop_cosine:
            self.stopped, self.done = t, True  # first passage: the rows after i stay NaN

    def finish(self, steps: np.ndarray, elapsed: float) -> dict[str, Any]:
        """The per-trial output dict (arrays, ``hessian``, ``status``, ``message``, ...)."""
        if self.hess and not np.all(self.hess["converged"]) and self.status.ok:
            self.status = Status.NOT_CONVERGED
            self.message = "Lanczos (eigsh) did not converge at some Hessian steps"
        out = self.out
        if self.history is not None:
            out["gram"] = np.einsum("tdi,sdj->tsij", self.history, self.history)
        out.update(hessian=self.hess, status=self.status, message=self.message,
                   elapsed=elapsed, steps=steps, stopped=self.stopped)
        return out


def _hessian_eigs(
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    opts: SimulateOptions,
    rng: np.random.Generator,
    b: np.ndarray | None = None,
) -> dict[str, Any]:
    d, m, k = X.shape[1], problem.m, problem.k
    ne = opts.n_eigs
    info: dict[str, Any] = {}
    if opts.dense_hessian or opts.full_spectrum:
        H = dense_hessian_matrix(problem, X, y, W, b=b, block_rows=opts.block_rows)
        w, U = scipy.linalg.eigh(H)
        low_w, low_v = w[:ne], U[:, :ne]
        high_w, high_v = w[-ne:], U[:, -ne:]
        if opts.full_spectrum:
            info["spectrum"] = w
        info["converged"] = True
    else:
        op = hessian_operator(problem, X, y, W, b=b, block_rows=opts.block_rows)
        v0 = rng.standard_normal(d * m)
        converged = True
        out = []
        for which in ("SA", "LA"):
            try:
                vals, vecs = spla.eigsh(op, k=ne, which=which, v0=v0, tol=1e-10,
                                        maxiter=max(2000, 10 * d * m))
            except spla.ArpackNoConvergence as exc:
                converged = False
                vals = np.full(ne, np.nan)
                vecs = np.full((d * m, ne), np.nan)
                nconv = len(exc.eigenvalues)
                vals[:nconv] = exc.eigenvalues
                vecs[:, :nconv] = exc.eigenvectors
            order = np.argsort(vals)
            out.append((vals[order], vecs[:, order]))
        (low_w, low_v), (high_w, high_v) = out
        info["converged"] = converged
    for name, vecs in (("low", low_v), ("high", high_v)):
        sq = vecs.reshape(d, m, -1) ** 2
        info[f"{name}_overlap_hard"] = sq[list(opts.hard)].sum(axis=(0, 1))
        info[f"{name}_overlap_target"] = sq[:k].sum(axis=(0, 1))
    info["low"], info["high"] = low_w, high_w
    return info


def _gd_loop(
    problem: Problem,
    X: np.ndarray,
    y: np.ndarray,
    W0: Sequence[np.ndarray],
    etas: np.ndarray,
    tests: Sequence[TestDraws],
    opts: SimulateOptions,
    hess_rngs: Sequence[np.random.Generator],
    progress: Any = None,
) -> list[dict[str, Any]]:
    """GD of ``B = len(W0)`` trials sharing ``(X, y)``, stepped together by :func:`gd_step_batch`.

    Trial ``r`` starts at ``W0[r]`` with learning rate ``etas[r]``, is
    evaluated on ``tests[r]`` and draws Lanczos start vectors from
    ``hess_rngs[r]``; a trial that turns non-finite stops being recorded.
    Returns one output dict per trial (:meth:`_Recorder.finish`).
    """
    t0 = time.perf_counter()
    n, d = X.shape
    m, T, B = problem.m, problem.training.steps, len(W0)
    steps = _recorded_steps(T, opts.record_every)
    rec_index = {int(s): i for i, s in enumerate(steps)}
    hess_index = {s: i for i, s in enumerate(opts.hessian_at)}
    recs = [_Recorder(problem, d, y, tests[r], opts, len(steps)) for r in range(B)]
    W = np.concatenate([np.asarray(w, dtype=np.float64) for w in W0], axis=1)
    b = np.zeros(B * m) if problem.bias else None
    rows = make_grad_rows(problem, y, trials=B)
    V = np.empty((n, B * m), dtype=X.dtype)
    with blas_threads(opts.blas_threads):
        for t in range(T + 1):
            step = gd_step_batch(problem, X, y, W, eta=etas, b=b, block_rows=opts.block_rows,
                                 rows=rows, V_out=V)
            i, j = rec_index.get(t), hess_index.get(t)
            for r, rec in enumerate(recs):
                cols = slice(r * m, (r + 1) * m)
                Wr, br = np.ascontiguousarray(W[:, cols]), None if b is None else b[cols]
                if i is not None and not rec.done:
                    rec.record(i, t, Wr, V[:, cols], step.grad[:, cols], br)
                if j is not None and not rec.done:
                    with np.errstate(over="ignore", invalid="ignore"):
                        info = _hessian_eigs(problem, X, y, Wr, opts, hess_rngs[r], br)
                    for key, val in info.items():
                        rec.hess[key][j] = val
            if all(rec.done for rec in recs):
                break
            W, b = step.W, step.b
            if progress is not None:
                progress.update(B)
    elapsed = (time.perf_counter() - t0) / B
    return [rec.finish(steps, elapsed) for rec in recs]


def run_trial(
    problem: Problem,
    d: int,
    n: int,
    ss: np.random.SeedSequence,
    opts: SimulateOptions,
    progress: Any = None,
) -> dict[str, Any]:
    """Run the trial seeded by ``ss`` (:mod:`~dmftsolve.simulation.trials` layout).

    Returns a dict of its recorded arrays (leading axis: recorded steps),
    ``hessian``, ``status``, ``message``, ``elapsed`` and ``steps``, which
    :func:`assemble_trials` stacks into a :class:`SimulationResult`.
    """
    t0 = time.perf_counter()
    gens = trial_generators(ss)
    X, y = sample_data(problem, d, n, gens.data, dtype=opts.dtype)
    W0 = initial_weights(problem, d, gens.init)
    test = sample_test(problem, opts.n_test, gens.test)
    (out,) = _gd_loop(problem, X, y, [W0], np.array([problem.training.eta]), [test], opts,
                      [gens.hessian], progress)
    out["elapsed"] = time.perf_counter() - t0
    return out


def assemble_trials(
    trials: list[dict[str, Any]],
    problem: Problem,
    d: int,
    n: int,
    delta: float,
    seeds: Sequence[np.random.SeedSequence],
    opts: SimulateOptions,
    elapsed: float,
    *,
    root: np.random.SeedSequence | None = None,
    extra_settings: dict[str, Any] | None = None,
) -> SimulationResult:
    """Stack the outputs of :func:`run_trial` into a :class:`SimulationResult`.

    ``seeds`` are the trials' seeds and ``root`` the root they were spawned
    from (both recorded in ``settings``); ``extra_settings`` are added to it.
    """
    arrays = {name: np.stack([t[name] for t in trials]) for name in _RECORDED}
    hessian: dict[str, Any] = {}
    if trials[0]["hessian"]:
        hessian = {"steps": np.asarray(opts.hessian_at, dtype=int), "method": opts.hessian_method,
                   "hard": list(opts.hard)}
        for key in trials[0]["hessian"]:
            hessian[key] = np.stack([t["hessian"][key] for t in trials])
    bad = [(i, t) for i, t in enumerate(trials) if not t["status"].ok]
    status, message = Status.SUCCESS, ""
    if bad:
        statuses = {t["status"] for _, t in bad}
        status = Status.NONFINITE if Status.NONFINITE in statuses else bad[0][1]["status"]
        message = "; ".join(f"trial {i}: {t['message']}" for i, t in bad)
    settings = {
        "d": d, "n": n, "delta": delta, "trials": len(seeds),
        "seeds": [seed_record(s) for s in seeds],
        "dtype": opts.dtype,
        "block_rows": opts.block_rows if opts.block_rows is not None
        else default_block_rows(d, np.dtype(opts.dtype).itemsize),
        "record_every": opts.record_every, "n_test": opts.n_test, "gram": opts.gram,
        "hessian_at": list(opts.hessian_at), "n_eigs": opts.n_eigs,
        "hessian_method": opts.hessian_method, "hard": list(opts.hard),
        "success_directions": list(success_directions(problem)),
        "blas_threads": opts.blas_threads,
        **({} if opts.stop_cosine is None else {"stop_cosine": opts.stop_cosine}),
        "theta_star": "first k coordinate axes",
        "problem": problem.to_dict(),
        **({} if root is None else {"root_seed": seed_record(root)}),
        **(extra_settings or {}),
    }
    diagnostics = {
        "trial_elapsed": [t["elapsed"] for t in trials],
        "trial_status": [t["status"].value for t in trials],
    }
    if opts.stop_cosine is not None:
        diagnostics["trial_stopped"] = [t.get("stopped") for t in trials]
    return SimulationResult(
        status=status, message=message, settings=settings, diagnostics=diagnostics,
        elapsed=elapsed, steps=trials[0]["steps"], hessian=hessian, **arrays,
    )


def prepare_simulation(
    problem: Problem,
    d: Any,
    delta: Any,
    *,
    trials: Any = 1,
    gram: str = "diag",
    record_every: Any = 1,
    n_test: Any = None,
    hessian_at: Iterable[int] = (),
    n_eigs: Any = 4,
    dense_hessian: bool = False,
    full_spectrum: bool = False,
    hard: Sequence[int] | None = None,
    dtype: Any = np.float64,
    block_rows: Any = None,
    blas_threads: Any = 1,
    stop_cosine: Any = None,
) -> tuple[int, int, float, int, SimulateOptions]:
    """Validate the arguments of :func:`simulate`; return ``(d, n, delta, trials, options)``.

    The keywords and their defaults are those of :func:`simulate`.

    Raises
    ------
    ValueError
        For an invalid argument, naming it.
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    k, m = problem.k, problem.m
    d = check_integer("d", d, 1)
    if d < k + m:
        raise ValueError(f"d must be >= k + m = {k + m}, got {d}")
    delta = check_delta(delta)
    n = int(round(delta * d))
    if n < 2:
        raise ValueError(f"delta={delta} with d={d} gives n={n} samples; need n >= 2")
    trials = check_integer("trials", trials, 1)
    if gram not in ("diag", "full"):
        raise ValueError(f"gram must be 'diag' or 'full', got {gram!r}")
    record_every = check_integer("record_every", record_every, 1)
    n_test = n if n_test is None else check_integer("n_test", n_test, 2)
    T = problem.training.steps
    if isinstance(hessian_at, (int, np.integer)):
        hessian_at = (hessian_at,)
    hess_steps = sorted({check_integer("hessian_at entry", s, 0) for s in hessian_at})
    if hess_steps and hess_steps[-1] > T:
        raise ValueError(f"hessian_at entries must be <= steps={T}, got {hess_steps[-1]}")
    n_eigs = check_integer("n_eigs", n_eigs, 1)
    if hess_steps and n_eigs >= d * m - 1:
        raise ValueError(f"n_eigs must be < d*m - 1 = {d * m - 1}, got {n_eigs}")
    if hess_steps and (dense_hessian or full_spectrum) and d * m > DENSE_HESSIAN_LIMIT:
        raise ValueError(
            f"dense_hessian/full_spectrum need d*m <= {DENSE_HESSIAN_LIMIT}, got d*m={d * m}"
        )
    if hard is None:
        hard_t = tuple(problem.training.hold_zero) or tuple(range(k))
    else:
        hard_t = tuple(sorted({check_integer("hard entry", i, 0) for i in hard}))
        if not hard_t or hard_t[-1] >= k:
            raise ValueError(f"hard must name target directions in 0..{k - 1}, got {hard!r}")
    dt = _dtype(dtype)
    if block_rows is not None:
        block_rows = check_integer("block_rows", block_rows, 1)
    if blas_threads is not None:
        blas_threads = check_integer("blas_threads", blas_threads, 1)
    if stop_cosine is not None:
        if isinstance(stop_cosine, (bool, np.bool_)) or not isinstance(
                stop_cosine, (int, float, np.integer, np.floating)) or not 0 < stop_cosine < 1:
            raise ValueError(f"stop_cosine must be a number in (0, 1) or None, got {stop_cosine!r}")
        if hess_steps or gram == "full":
            raise ValueError("stop_cosine cannot be combined with hessian_at or gram='full' "
                             "(a stopped trial has no later steps to give them)")
        stop_cosine = float(stop_cosine)
    init = problem.training.init
    hz = list(problem.training.hold_zero)
    if init.kind == "warm" and hz and np.any(init.overlaps(k, m)[hz] != 0):
        raise ValueError(
            f"warm start M0={init.M0!r} has non-zero rows for hold_zero={tuple(hz)!r}"
        )
    Rn = len(_recorded_steps(T, record_every))
    if gram == "full" and Rn * d * m * 8 > FULL_GRAM_LIMIT:
        raise ValueError(
            f"gram='full' would store {Rn} iterates of size {d}x{m} "
            f"({Rn * d * m * 8 / 2**30:.1f} GiB); raise record_every"
        )
    opts = SimulateOptions(gram=gram, record_every=record_every, n_test=n_test,
                          hessian_at=tuple(hess_steps), n_eigs=n_eigs,
                          dense_hessian=bool(dense_hessian), full_spectrum=bool(full_spectrum),
                          hard=hard_t, dtype=dt.name, block_rows=block_rows,
                          blas_threads=blas_threads, stop_cosine=stop_cosine)
    return d, n, delta, trials, opts


# --------------------------------------------------------------------------- public entry
def simulate(
    problem: Problem,
    d: int,
    delta: float,
    *,
    seed: SeedLike = None,
    trials: int = 1,
    gram: Literal["diag", "full"] = "diag",
    record_every: int = 1,
    n_test: int | None = None,
    hessian_at: Iterable[int] = (),
    n_eigs: int = 4,
    dense_hessian: bool = False,
    full_spectrum: bool = False,
    hard: Sequence[int] | None = None,
    dtype: Any = np.float64,
    block_rows: int | None = None,
    blas_threads: int | None = 1,
    stop_cosine: float | None = None,
    progress: bool = False,
    throw: bool = True,
) -> SimulationResult:
    """Run full-batch GD at finite ``d`` on ``problem`` (``docs/theory.md`` §1).

    ``Θ*`` is taken to be the first ``k`` coordinate axes, which is no loss
    of generality because ``x ~ N(0, I_d)`` is isotropic and the random
    initialisation rotation invariant: ``V* = X[:, :k]`` and the overlaps are
    the first ``k`` rows of ``W``.

    Parameters
    ----------
    problem : Problem
        Target, network, loss and GD schedule (``η``, ``λ``, ``T``, init,
        ``hold_zero``); with ``problem.bias`` the bias ``b`` (``b⁰ = 0``) is
        trained too and recorded in ``SimulationResult.bias``.
    d : int
        Input dimension, ``d >= k + m``.
    delta : float
        Sample ratio; ``n = round(δ d)``.
    seed : int, SeedSequence, Generator or None
        Root of all randomness. Trial ``j`` uses the ``j``-th child of the
        root ``SeedSequence`` (as ``SeedSequence.spawn`` makes it; the root
        is not mutated), so trial ``j`` does not depend on ``trials``.
    trials : int
        Independent repetitions (fresh data, labels, init, test set).
    gram : {"diag", "full"}
        ``"diag"``: equal-time Gram ``W_tᵀW_t``; ``"full"``: the two-time
        Gram ``W_tᵀW_s`` over recorded steps (stores the recorded iterates).
    record_every : int
        Record every this many steps (and always step 0 and ``T``).
    n_test : int, optional
        Fresh samples for the test loss (default ``n``). They are drawn from
        the exact joint law of ``(Θ*ᵀx, W_tᵀx)`` for ``x ~ N(0, I_d)``
        independent of ``W_t`` (Gaussian with covariance built from ``M_t``
        and ``W_tᵀW_t``), so no ``n_test × d`` matrix is formed; the same
        standard-normal draws are reused at every step.
    hessian_at : iterable of int
        Steps ``t`` at which to compute extreme eigenpairs of ``∇²L(W_t)``
        (with a bias: ``∇²_W L`` at ``(W_t, b_t)``, the bias block excluded).
    n_eigs : int
        Number of smallest and of largest eigenpairs.
    dense_hessian : bool
        Build the dense ``dm × dm`` Hessian and use ``eigh`` (``dm <=``
        :data:`DENSE_HESSIAN_LIMIT`) instead of Lanczos (``eigsh``).
    full_spectrum : bool
        Also return all eigenvalues (implies the dense path).
    hard : sequence of int, optional
        Target directions forming the hard subspace for eigenvector
        overlaps; default ``training.hold_zero`` if non-empty, else all ``k``.
    dtype : float64 or float32
        Storage of ``X`` and precision of the matrix products; the weights,
        gradients' block sums, losses and Hessian weights are float64.
    block_rows : int, optional
        Rows of ``X`` per block of the single-pass GD step (default: about
        :data:`BLOCK_BYTES` bytes per block).
    blas_threads : int or None
        BLAS threads during the run (see :func:`blas_threads`); None leaves
        BLAS alone. The default, one thread, is the robust choice: the
        blocked pass makes many mid-sized BLAS calls, and with several
        threads each call waits for the slowest one, which on a shared or
        oversubscribed machine is much slower than one thread
        (``benchmarks/bench_simulator.py``). Run trials in parallel with
        :func:`dmftsolve.simulation.sweeps.sweep` instead.
    stop_cosine : float, optional
        Stop a trial at the first recorded step at which every success
        direction's projection onto ``span(W_t)`` (:mod:`dmftsolve.success`)
        exceeds this: the first-passage criterion of the finite-d theory
        (``success(stop_cosine, first_passage=True)``), which is then the same
        as without stopping, at the cost of the steps up to the passage only.
        The later rows of a stopped trial are NaN, so the final-step criterion
        no longer applies; ``diagnostics["trial_stopped"]`` gives each
        trial's stopping step (None: ran to ``T``). Not with ``hessian_at``
        or ``gram="full"``.
    progress : bool
        Show a tqdm bar on stderr.
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` if the run ends with a
        non-success status (non-finite values, Lanczos not converged).

    Returns
    -------
    SimulationResult

    Raises
    ------
    ValueError
        For invalid arguments (naming the parameter).
    SolverError
        If ``throw`` and a trial produced non-finite values or Lanczos failed.

    Examples
    --------
    Two GD runs of a GeLU neuron on ``y = z² − 1`` far above the transition (d = 200, δ = 20):
    both learn the hidden direction, by the criterion of :mod:`dmftsolve.success`.

    >>> from dmftsolve import Problem
    >>> p = Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=60)
    >>> run = simulate(p, 200, 20.0, seed=0, trials=2, record_every=10)
    >>> run.cosine.shape, run.success().tolist()
    ((2, 7), [True, True])
    """
    d, n, delta, trials, opts = prepare_simulation(
        problem, d, delta, trials=trials, gram=gram, record_every=record_every, n_test=n_test,
        hessian_at=hessian_at, n_eigs=n_eigs, dense_hessian=dense_hessian,
        full_spectrum=full_spectrum, hard=hard, dtype=dtype, block_rows=block_rows,
        blas_threads=blas_threads, stop_cosine=stop_cosine,
    )
    root = as_seed_sequence(seed)
    seeds = [trial_seed(root, j) for j in range(trials)]
    t0 = time.perf_counter()
    with _progress_bar(progress, trials * (problem.training.steps + 1),
                       f"simulate d={d} δ={delta:g}") as bar:
        outs = [run_trial(problem, d, n, s, opts, bar) for s in seeds]
    result = assemble_trials(outs, problem, d, n, delta, seeds, opts, time.perf_counter() - t0, root=root)
    return _finish(result, "simulate", throw)


@contextlib.contextmanager
def _progress_bar(show: bool, total: int, desc: str) -> Iterator[Any]:
    """A tqdm bar on stderr (None when ``show`` is false), closed on exit."""
    if not show:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, file=sys.stderr, desc=desc, unit="step")
    try:
        yield bar
    finally:
        bar.close()


def _finish(result: SimulationResult, name: str, throw: bool) -> SimulationResult:
    if throw and not result.ok:
        raise SolverError(f"{name} {result.status.value}: {result.message}", result)
    return result


def _per_trial(name: str, value: Any, trials: int) -> np.ndarray | None:
    """``value`` (None, a number or ``trials`` numbers, each finite and > 0) as an array."""
    if value is None:
        return None
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number or {trials} of them, got {value!r}") from None
    if a.ndim > 1 or (a.ndim == 1 and a.size != trials) or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{name} must be a positive number or {trials} of them, got {value!r}")
    return np.broadcast_to(a, (trials,)).copy()


def simulate_shared(
    problem: Problem,
    d: int,
    delta: float,
    *,
    seed: SeedLike = None,
    trials: int = 1,
    eta: float | Sequence[float] | None = None,
    q0: float | Sequence[float] | None = None,
    batch: bool = True,
    progress: bool = False,
    throw: bool = True,
    **options: Any,
) -> SimulationResult:
    """GD of ``trials`` runs on one shared data set, differing in initialisation, ``η`` or ``q0``.

    For sweeps over the seed of the initialisation, the learning rate or the
    initial scale on fixed data. The trials share ``X``, ``y`` and the test
    draws of trial 0 of ``simulate(problem, d, delta, seed=seed)``; trial
    ``j`` starts from the initialisation of that run's trial ``j`` (drawn
    with ``q0[j]``) and steps with ``η[j]``. So trial 0 (with the problem's
    ``η`` and ``q0``) is trial 0 of :func:`simulate` with the same seed.

    With ``batch=True`` the trials are stepped together: their weights sit
    side by side in one ``(d, trials·m)`` matrix and each block of ``X`` is
    multiplied once by all of them (a matrix-matrix product instead of one
    matrix-vector product per trial; ``benchmarks/bench_simulator.py``
    measures the speed-up). ``batch=False`` runs the same trials one
    after the other (the same numbers up to floating-point round-off).

    Parameters
    ----------
    problem, d, delta
        As for :func:`simulate`.
    seed : int, SeedSequence, Generator or None
        Root seed (as for :func:`simulate`).
    trials : int
        Number of runs on the shared data.
    eta : float or sequence of float, optional
        Learning rate of each trial (one number for all, or ``trials`` of
        them); default ``problem.training.eta``.
    q0 : float or sequence of float, optional
        Initial scale ``E‖w‖² ≈ q0`` of each trial (random start only);
        default the problem's.
    batch : bool
        Step all trials together (one GEMM per block of ``X``).
    progress : bool
        Show a tqdm bar on stderr.
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` on a non-success status.
    **options
        The other keywords of :func:`simulate` (``gram``, ``record_every``,
        ``n_test``, ``hessian_at``, ``n_eigs``, ``dense_hessian``,
        ``full_spectrum``, ``hard``, ``dtype``, ``block_rows``,
        ``blas_threads``).

    Returns
    -------
    SimulationResult
        Trials stacked as in :func:`simulate`; ``settings`` also holds
        ``shared_data`` (True), ``batch`` and the per-trial ``eta`` and ``q0``.

    Raises
    ------
    ValueError
        For invalid arguments (naming the parameter), ``q0`` with a warm start.
    SolverError
        If ``throw`` and a trial produced non-finite values or Lanczos failed.
    """
    d, n, delta, trials, opts = prepare_simulation(problem, d, delta, trials=trials, **options)
    etas = _per_trial("eta", eta, trials)
    etas = np.full(trials, problem.training.eta) if etas is None else etas
    q0s = _per_trial("q0", q0, trials)
    if q0s is not None and problem.training.init.kind != "random":
        raise ValueError(f"q0 applies to a random start only; this problem has a warm start, got q0={q0!r}")
    root = as_seed_sequence(seed)
    seeds = [trial_seed(root, j) for j in range(trials)]
    t0 = time.perf_counter()
    gens = [trial_generators(s) for s in seeds]
    X, y = sample_data(problem, d, n, gens[0].data, dtype=opts.dtype)
    test = sample_test(problem, opts.n_test, gens[0].test)
    W0 = [initial_weights(problem, d, g.init, q0=None if q0s is None else q0s[j])
          for j, g in enumerate(gens)]
    hess_rngs = [g.hessian for g in gens]
    with _progress_bar(progress, trials * (problem.training.steps + 1),
                       f"simulate_shared d={d} δ={delta:g}") as bar:
        if batch:
            outs = _gd_loop(problem, X, y, W0, etas, [test] * trials, opts, hess_rngs, bar)
        else:
            outs = [_gd_loop(problem, X, y, [W0[j]], etas[j:j + 1], [test], opts, [hess_rngs[j]], bar)[0]
                    for j in range(trials)]
    extra = {"shared_data": True, "batch": bool(batch), "eta": etas.tolist(),
             "q0": None if q0s is None else q0s.tolist()}
    result = assemble_trials(outs, problem, d, n, delta, seeds, opts, time.perf_counter() - t0,
                             root=root, extra_settings=extra)
    return _finish(result, "simulate_shared", throw)
