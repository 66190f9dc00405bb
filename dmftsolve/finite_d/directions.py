"""Which target directions decide the success of a draw, and whether the transition applies.

The finite-d transition follows the *hard* directions of the target (those not learned in ``O(1)``
steps from a zero overlap, :func:`~dmftsolve.thresholds.directions.split_directions`): a run
succeeds when every one of them has a projection onto ``span(W)`` above the success cosine
(:mod:`dmftsolve.success`). The draws pair their paths by the joint reflection of the hard
directions, which needs a label invariant under it.
"""

from __future__ import annotations

import numpy as np

from dmftsolve.problem import Problem

__all__ = ["transition_directions"]


def transition_directions(problem: Problem) -> tuple[int, ...]:
    """The hard target directions whose learning decides success, after checking the problem.

    Raises ``ValueError`` unless: its ridge is below ``1/η`` (else GD's step shrinks ``W`` to zero
    or flips it); its hard subspace
    (:func:`~dmftsolve.thresholds.directions.split_directions`) is non-empty and spanned by
    coordinate directions; and the label is invariant under the joint reflection of those
    coordinates (so the random start's reflection pairing, and GD's force as a Rademacher sum,
    hold). Returns the hard directions' indices.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> transition_directions(Problem.build(target="z1 + z2**2 - 1", activation="gelu"))
    (1,)
    """
    from dmftsolve.thresholds.directions import split_directions

    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a Problem, got {problem!r}")
    eta, lam = problem.training.eta, problem.training.lam
    if not eta * lam < 1.0:
        raise ValueError(f"lam must be below 1/eta = {1 / eta:g}: with eta*lam = {eta * lam:g} each GD "
                         f"step multiplies W by 1 - eta*lam <= 0 (lam={lam:g}, eta={eta:g})")
    split = split_directions(problem)
    hard = split.hard_indices
    if hard is None:
        raise ValueError(f"the hard directions of target {problem.target.expr!r} are not coordinate "
                         "directions; write the target in coordinates where they are")
    if not hard:
        raise ValueError(f"target {problem.target.expr!r} has no hard direction (every direction is "
                         "learned in O(1) steps): there is no transition to predict")
    rng = np.random.default_rng(0)
    z = rng.standard_normal((512, problem.k)) * 1.5
    eps = rng.standard_normal(512) if problem.target.noisy else 0.0
    zr = z.copy()
    zr[:, list(hard)] *= -1.0
    y, yr = (np.asarray(problem.labels(a, eps), dtype=float) for a in (z, zr))
    if not np.allclose(y, yr, rtol=1e-10, atol=1e-10 * max(1.0, float(np.abs(y).max()))):
        names = ", ".join(f"z{j + 1}" if problem.k > 1 else "z" for j in hard)
        raise ValueError(f"the label must be invariant under reflecting its hard direction(s) ({names}) "
                         f"jointly, got target {problem.target.expr!r}: the draws pair each path with its "
                         "reflection and take GD's finite-n force on a hard direction at zero overlap to "
                         "be a sum of independent signs, which holds only for such a label; without the "
                         "symmetry the force has a mean the draws do not model")
    return tuple(int(j) for j in hard)
