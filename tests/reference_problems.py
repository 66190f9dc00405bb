"""Named reference problems that the tests build again and again.

Each entry fixes what defines the learning problem (label, activation and,
where it matters, the width); schedules (``eta``, ``steps``, ``q0``, ...)
are passed per test::

    from reference_problems import reference_problem
    p = reference_problem("quad_phase", eta=0.05, steps=10)

equals ``Problem.build(target="z**2", activation="quad", eta=0.05, steps=10)``.
"""

from __future__ import annotations

from typing import Any

from dmftsolve import Problem

#: name -> the keywords of :meth:`Problem.build` that define it.
REFERENCE: dict[str, dict[str, Any]] = {
    # y = z², σ = r²: phase retrieval with a quadratic neuron; closed-form population loss
    # and Gaussian overlaps (tests/test_simulator.py, tests/test_population.py).
    "quad_phase": {"target": "z**2", "activation": "quad"},
    # y = z², σ = GeLU: the generic single-index, even-label problem (no closed forms).
    "gelu_phase": {"target": "z**2", "activation": "gelu"},
    # y = min(z², 3), σ = r²: a bounded label with the quadratic neuron.
    "clipped_quad": {"target": "Min(z**2, 3)", "activation": "quad"},
    # y = z1² + z2, σ = GeLU: k = 2 with one easy (z2, linear part) and one hard (z1) direction.
    "easy_hard": {"target": "z1**2 + z2", "activation": "gelu"},
    # y = z1 z2, σ = tanh, m = 2: the two-neuron product (no linear or even easy direction).
    "tanh_product": {"target": "z1*z2", "activation": "tanh", "m": 2},
}


def reference_problem(name: str, **changes: Any) -> Problem:
    """The reference problem ``name`` with the keywords of :meth:`Problem.build` in ``changes``."""
    if name not in REFERENCE:
        raise ValueError(f"name must be one of {sorted(REFERENCE)}, got {name!r}")
    return Problem.build(**{**REFERENCE[name], **changes})
