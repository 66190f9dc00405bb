"""Independent reference constructions shared by several test modules."""

from __future__ import annotations

import numpy as np


def build_hessian(X: np.ndarray, D: np.ndarray) -> np.ndarray:
    """Dense ``(1/n) Σ x_i x_iᵀ ⊗ D_i`` with index ``(a, c) → a m + c`` (test reference)."""
    n, d = X.shape
    m = D.shape[1]
    H = np.empty((d, m, d, m))
    for c in range(m):
        for e in range(m):
            H[:, c, :, e] = (X.T * D[:, c, e]) @ X / n
    return H.reshape(d * m, d * m)
