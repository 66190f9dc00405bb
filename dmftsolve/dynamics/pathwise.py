"""Pathwise (forward-differentiation) estimator of the DMFT response ``Γ``.

Every path carries its Jacobian ``J(t,s) = ∂V^t/∂Ξ^s``: ``J(s,s) = I``,
``J(t,s) = −(η/δ) Σ_{u=s}^{t−1} R(t,u+1) D^u J(u,s)``, and
``Γ(t,s) = E[D^t J(t,s)]``. It is the reference for the kernels themselves
(``O(N T³ m³)`` time, ``O(N T² m²)`` memory); at long times its per-path
products are heavy-tailed (module docstring of :mod:`dmftsolve.dynamics.dmft`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dmftsolve.dynamics.response import StepMoments

__all__ = ["Pathwise", "PathwiseResponse", "PATHWISE_MAX_BYTES"]

#: Memory (bytes) above which the pathwise response store is refused.
PATHWISE_MAX_BYTES = 6 * 2**30


@dataclass(frozen=True)
class Pathwise:
    """The pathwise estimator of ``Γ`` (``DMFTSettings.method``; ``docs/theory.md`` §2.5): the
    reference for the kernels themselves.

    Examples
    --------
    >>> Pathwise().to_dict()
    {'method': 'pathwise', 'stein_regression': False}
    """

    name = "pathwise"
    #: the default ``null_rtol``: the pathwise method does not divide by the innovations
    default_null_rtol = 1e-10
    needs_D = True

    def build(self, *, n_batches: int, batch_size: int, steps: int, m: int,
              antithetic: bool) -> PathwiseResponse:
        """The estimator of one solve."""
        return PathwiseResponse(n_batches=n_batches, batch_size=batch_size, steps=steps, m=m)

    def memory_bytes(self, *, n_paths: int, n_batches: int, steps: int, m: int) -> int:
        """Bytes of the per-path store of ``D^u J(u, s)``."""
        return PathwiseResponse.memory_bytes(n_paths=n_paths, steps=steps, m=m)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.name, "stein_regression": False}


class PathwiseResponse:
    """Row ``t`` of ``Γ`` as the path average of ``D^t J(t, s)`` (module docstring).

    Parameters
    ----------
    n_batches, batch_size : int
        ``B`` batches of ``nb`` paths.
    steps, m : int
        ``T`` and the width (sizes the store of ``D^u J(u, s)``).

    Raises
    ------
    ValueError
        If the store would exceed :data:`PATHWISE_MAX_BYTES`.
    """

    needs_D = True
    zero_at_null = False

    def __init__(self, *, n_batches: int, batch_size: int, steps: int, m: int) -> None:
        N = n_batches * batch_size
        need = self.memory_bytes(n_paths=N, steps=steps, m=m)
        if need > PATHWISE_MAX_BYTES:
            raise ValueError(
                f"method='pathwise' would store {need / 2**30:.1f} GiB of path derivatives "
                f"(N T² m²) for n_paths={N}, steps={steps}; use method='stein' or fewer paths/steps"
            )
        self.B, self.nb, self.N = n_batches, batch_size, N
        size = (steps + 1) * m
        self.K = np.zeros((size, size * N))  # rows (t, a), columns (s, c, path): D^t J(t, s)

    @staticmethod
    def memory_bytes(*, n_paths: int, steps: int, m: int) -> int:
        """Bytes of the store of ``D^u J(u, s)`` for every path."""
        return 8 * ((steps + 1) * m) ** 2 * n_paths

    def row(self, step: StepMoments) -> tuple[np.ndarray, np.ndarray]:
        if step.D is None:
            raise ValueError("PathwiseResponse needs D at every step (needs_D)")
        t, m, N = step.t, step.m, self.N
        tm, t1m = t * m, (t + 1) * m
        K, D = self.K, step.D
        if t > 0:
            J = (-step.eta_over_delta) * (step.R_row @ K[:tm, : tm * N])  # (m, tm*N) = (a, (s, c, n))
            J = J.reshape(m, t, m, N)
            Kt = np.einsum("nab,bscn->ascn", D, J, optimize=True)
            K[tm:t1m, : tm * N] = Kt.reshape(m, tm * N)
        K[tm:t1m, tm * N: t1m * N] = D.transpose(1, 2, 0).reshape(m, m * N)
        gam_b = K[tm:t1m, : t1m * N].reshape(m, t1m, self.B, self.nb).mean(axis=-1).transpose(2, 0, 1)
        return gam_b.mean(axis=0), gam_b

    def diagnostics(self) -> dict[str, np.ndarray]:
        return {}
