"""The defaults of every problem, stated once: read by :meth:`dmftsolve.problem.Problem.build` and by
every command's options (``dmftsolve <command> --help`` shows them).

The kernel-path policy of the finite-d transition's draws is :data:`dmftsolve.finite_d.settings.
KERNEL_PATHS`; the solvers' own numerical settings are in their settings objects.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROBLEM_DEFAULTS", "ETA_BY_ACTIVATION", "DEFAULT_ETA", "DEFAULT_SEED", "default_eta"]


#: The problem defaults of every command, stated once (``dmftsolve <cmd> --help`` shows them).
#: ``eta`` is per activation, :data:`ETA_BY_ACTIVATION`; the seed is :data:`DEFAULT_SEED`.
#: 400 steps is the horizon of the success criterion ("cosine above 1/2 by step 400") of the
#: transition, the GD checks and the results table (docs/results.md).
PROBLEM_DEFAULTS: dict[str, Any] = {
    "target": "z**2 - 1", "activation": "gelu", "m": 1, "loss": "square", "lam": 0.0, "steps": 400,
    "q0": 1.0,
}

#: GD step size η by activation: 0.5, but 0.05 for the r² neuron (``quad``), whose GD needs the
#: smaller step; the values every result in docs/results.md and the README is computed with.
ETA_BY_ACTIVATION: dict[str, float] = {"quad": 0.05}
#: η for every activation not in :data:`ETA_BY_ACTIVATION`.
DEFAULT_ETA = 0.5

#: The root random seed of every command (the same seed gives the same numbers).
DEFAULT_SEED = 0


def default_eta(activation: str) -> float:
    """The default GD step size for ``activation`` (a name or an expression in ``r``).

    Parameters
    ----------
    activation : str
        As given to ``--activation``: a name of :data:`~dmftsolve.activations.NAMED_ACTIVATIONS`
        or a sympy expression in ``r`` (``"r**2"`` is ``quad``).

    Returns
    -------
    float
        :data:`ETA_BY_ACTIVATION` of the activation, else :data:`DEFAULT_ETA` (also for an
        activation that does not parse: building the problem reports that).

    Examples
    --------
    >>> default_eta("gelu"), default_eta("quad"), default_eta("r**2"), default_eta("1*r*r")
    (0.5, 0.05, 0.05, 0.05)
    """
    name = str(activation).strip()
    if name in ETA_BY_ACTIVATION:
        return ETA_BY_ACTIVATION[name]
    try:
        import sympy as sp

        from dmftsolve._symbolic import parse_expression
        from dmftsolve.activations import NAMED_ACTIVATIONS, R

        expr = NAMED_ACTIVATIONS.get(name)
        if expr is None:
            expr = parse_expression(name, ["r"], parameter="activation")
            expr = expr.subs({s: R for s in expr.free_symbols if s.name == "r"})
        for key, eta in ETA_BY_ACTIVATION.items():
            if sp.expand(expr - NAMED_ACTIVATIONS[key]) == 0:
                return eta
    except Exception:  # noqa: BLE001 - a bad activation is reported by Problem.build
        pass
    return DEFAULT_ETA
