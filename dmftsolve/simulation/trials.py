"""The random layout of a simulator trial, public so that a trial can be replayed exactly.

Trial ``i`` of ``simulate(problem, d, delta, seed=seed)`` draws everything
from ``trial_seed(seed, i)``, the ``i``-th child of the root
``SeedSequence`` (:mod:`dmftsolve.seeds`); its own children ``0 … 3`` seed
four independent streams (:func:`trial_generators`):

``data``
    ``X`` (``n × d`` standard normal, row-major, in that order), then the
    label noise ``ε`` (``n``); :func:`sample_data`.
``init``
    The initial weights; :func:`initial_weights`.
``test``
    The test-set draws; :func:`sample_test`.
``hessian``
    Lanczos start vectors of the Hessian eigensolver.

:func:`replay_trial` returns ``(X, y, W⁰)`` of any trial without running it.

Examples
--------
>>> import numpy as np
>>> from dmftsolve import Problem
>>> from dmftsolve.simulation.trials import replay_trial
>>> p = Problem.build(target="z**2", activation="quad", eta=0.05, steps=0)
>>> X, y, W0, _ = replay_trial(p, d=20, delta=2.0, seed=1, i=3)
>>> X.shape, y.shape, W0.shape
((40, 20), (40,), (20, 1))
>>> bool(np.allclose(y, X[:, 0] ** 2))
True
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from dmftsolve.checks import check_delta, check_integer
from dmftsolve.problem import Problem
from dmftsolve.seeds import SeedLike, child
from dmftsolve.simulation.kernels import default_block_rows

__all__ = [
    "TrialGenerators",
    "TestDraws",
    "Trial",
    "trial_seed",
    "trial_generators",
    "sample_data",
    "initial_weights",
    "sample_test",
    "replay_trial",
]

class TrialGenerators(NamedTuple):
    """The four independent random streams of one trial."""

    data: np.random.Generator
    init: np.random.Generator
    test: np.random.Generator
    hessian: np.random.Generator


class TestDraws(NamedTuple):
    """Draws for the test loss: the exact law of ``(Θ*ᵀx, Wᵀx)`` for fresh ``x`` given ``W``.

    ``z`` (n_test, k) are the latent coordinates, ``xi`` (n_test, m) the
    standard normals of the part of ``Wᵀx`` orthogonal to ``Θ*``, ``y`` the
    labels of ``z`` (with fresh noise). The same draws are used at every step
    (common random numbers).
    """

    __test__ = False  # not a pytest class

    z: np.ndarray
    xi: np.ndarray
    y: np.ndarray


class Trial(NamedTuple):
    """Data and initial weights of one trial (:func:`replay_trial`)."""

    X: np.ndarray
    y: np.ndarray
    W0: np.ndarray
    seed: np.random.SeedSequence


def trial_seed(seed: SeedLike, i: int) -> np.random.SeedSequence:
    """The ``SeedSequence`` of trial ``i`` of a run with root seed ``seed``.

    ``seed`` must identify the run: an integer or a ``SeedSequence`` (the
    ``settings["root_seed"]`` record of a result rebuilds it with
    :func:`dmftsolve.seeds.from_record`). ``None`` and a ``Generator`` give a
    different root at every call, so they are refused.
    """
    if seed is None or isinstance(seed, np.random.Generator):
        raise ValueError(
            f"seed must be an integer >= 0 or a SeedSequence to identify a trial, got {seed!r}"
        )
    return child(seed, check_integer("i", i, 0))


def trial_generators(ss: np.random.SeedSequence) -> TrialGenerators:
    """The ``data``, ``init``, ``test`` and ``hessian`` generators of the trial seeded by ``ss``."""
    return TrialGenerators(*(np.random.default_rng(child(ss, j)) for j in range(4)))


def sample_data(
    problem: Problem, d: int, n: int, rng: np.random.Generator, *, dtype: Any = np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """Covariates ``X`` (n, d) and labels ``y = h(X[:, :k], ε)`` from the ``data`` stream.

    ``X`` is drawn in place (float64), or for float32 as the float64 stream
    rounded block by block, so both precisions hold the same data up to
    rounding. ``Θ*`` is the first ``k`` coordinate axes: ``V* = X[:, :k]``.
    """
    dtype = np.dtype(dtype)
    X = np.empty((n, d), dtype=dtype)
    if dtype == np.float64:
        rng.standard_normal(out=X)
    else:
        b = default_block_rows(d, 8)
        for start in range(0, n, b):
            X[start:start + b] = rng.standard_normal((min(b, n - start), d))
    eps = rng.standard_normal(n)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.asarray(problem.labels(np.asarray(X[:, :problem.k], dtype=np.float64), eps), dtype=float)
    return X, y


def _psd_sqrt(Q: np.ndarray) -> np.ndarray:
    w, U = np.linalg.eigh(0.5 * (Q + Q.T))
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


def initial_weights(
    problem: Problem, d: int, rng: np.random.Generator, *, q0: float | None = None
) -> np.ndarray:
    """Initial weights ``W⁰`` (d, m) from the ``init`` stream.

    Random start: i.i.d. ``N(0, q0/d)`` entries (``q0`` defaults to the
    problem's). Warm start: the first ``k`` rows are ``M0`` and the rest a
    random orthonormal frame times ``Q0^{1/2}``. Rows in ``hold_zero`` are zero.
    """
    k, m = problem.k, problem.m
    init = problem.training.init
    if init.kind == "random":
        scale = init.q0 if q0 is None else float(q0)
        W = rng.standard_normal((d, m)) * math.sqrt(scale / d)
    else:
        if q0 is not None:
            raise ValueError(f"q0 applies to a random start only (this problem has a warm start), got {q0!r}")
        W = np.zeros((d, m))
        W[:k] = init.overlaps(k, m)
        Qb, _ = np.linalg.qr(rng.standard_normal((d - k, m)))
        W[k:] = Qb @ _psd_sqrt(init.gram(m))
    W[list(problem.training.hold_zero)] = 0.0
    return W


def sample_test(problem: Problem, n_test: int, rng: np.random.Generator) -> TestDraws:
    """The test-set draws (see :class:`TestDraws`) from the ``test`` stream."""
    z = rng.standard_normal((n_test, problem.k))
    xi = rng.standard_normal((n_test, problem.m))
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.asarray(problem.labels(z, rng.standard_normal(n_test)), dtype=float)
    return TestDraws(z, xi, y)


def replay_trial(
    problem: Problem, d: int, delta: float, seed: SeedLike, i: int, *, dtype: Any = np.float64
) -> Trial:
    """Data and initial weights of trial ``i`` of ``simulate(problem, d, delta, seed=seed)``.

    Parameters
    ----------
    problem : Problem
        The problem simulated.
    d : int
        Input dimension.
    delta : float
        Sample ratio; ``n = round(δ d)``.
    seed : int or SeedSequence
        The root seed given to ``simulate`` (see :func:`trial_seed`).
    i : int
        Trial index.
    dtype : float64 or float32
        Storage of ``X`` (as ``simulate(..., dtype=...)``).

    Returns
    -------
    Trial
        ``(X, y, W0, seed)``: running ``gd_step`` from ``W0`` on ``(X, y)``
        reproduces the trial's GD iterates.
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    d = check_integer("d", d, 1)
    n = int(round(check_delta(delta) * d))
    ss = trial_seed(seed, i)
    gens = trial_generators(ss)
    X, y = sample_data(problem, d, n, gens.data, dtype=dtype)
    return Trial(X, y, initial_weights(problem, d, gens.init), ss)
