"""An extra force on the overlaps (``DMFTSettings.force``).

The DMFT's overlap update is ``M_{t+1} = (1 − ηλ) M_t − η E[V* g^{tᵀ}]``, the mean over the paths. A
:class:`OverlapForce` adds a term ``F(g^t)`` (shape ``(k, m)``) to that mean, the same in every batch.
The finite-d transition uses one to give the overlaps GD's finite-``n`` gradient
(:class:`dmftsolve.finite_d.force.BootstrapForce`); the DMFT itself needs none.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from dmftsolve.dynamics.paths import PathSet

__all__ = ["OverlapForce", "ForceTerm"]


class ForceTerm(Protocol):
    """The force of one solve: ``F(g^t)`` from the gradients ``g^t`` (``(m, N)``) → ``(k, m)``."""

    def __call__(self, g: np.ndarray) -> np.ndarray:
        ...


class OverlapForce(Protocol):
    """Options of a force on the overlaps, frozen and checked on construction."""

    def check(self, *, reflect: tuple[int, ...], n_paths: int) -> None:
        """Raise ``ValueError`` if the force cannot act on paths laid out with these settings."""
        ...

    def build(self, paths: PathSet, root: np.random.SeedSequence) -> ForceTerm:
        """The force of one solve on ``paths`` (its randomness from ``root``'s children)."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        ...
