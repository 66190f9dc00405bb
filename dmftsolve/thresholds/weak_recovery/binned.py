"""The ``"binned"`` method of ``δ_alg``: any label, Monte Carlo.

``y`` is replaced by a discretisation ``Y_n`` of itself: its atoms (values taken
repeatedly by the sample) are kept exactly and the continuous part is cut into
``n`` equiprobable bins. Then ``G_n(Y_n) = E[zzᵀ−I | Y_n]`` and
``F_n = Σ_b P_b G_b ⊗ G_b`` are estimated from scrambled-Sobol samples of
``(z, ε)``, each point used with its ``2^k`` sign flips of ``z`` (the law of ``z``
is invariant; this makes the estimates respect the symmetries of ``h`` exactly)
and moment-matched within each scrambling. Conditioning on the coarser ``Y_n``
can only shrink ``F`` (Jensen), so ``ρ(F_n) ≤ ρ(F)`` and it increases with ``n``
for nested bins; the bias is ``O(1/n)`` for a smooth ``G``, removed by
first-order Richardson steps on ``n = 128, 256, 512``. The Monte Carlo error and
the ``O(1/N)`` ratio bias are handled by a jackknife over the independent
scramblings. Reported error = the difference of the two Richardson values + 3
jackknife standard errors. For a purely discrete ``y`` (e.g. ``sign(z1*z2)``)
there is no binning error at all. ``E[z|y] = 0`` is decided exactly when ``h`` is
invariant under ``z → −z`` (checked numerically on random points), else by the
jackknife (``> 5`` standard errors).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import ndtri
from scipy.stats import qmc

from dmftsolve.problem import Target
from dmftsolve.thresholds.weak_recovery.common import Estimate, MethodOptions, gram_top, spectral

__all__ = ["MAX_BINNED_K", "binned_statistics", "estimate"]

#: Largest latent dimension the binned Monte Carlo method takes (it averages over 2^k sign flips).
MAX_BINNED_K = 10


def _flip_symmetric(target: Target, rng: np.random.Generator) -> tuple[bool, list[bool]]:
    """Numerical identity test of ``h(−z, ±ε) = h(z, ε)`` and of each ``z_i → −z_i``."""
    k = target.k
    z = rng.standard_normal((512, k)) * 1.5
    e = rng.standard_normal(512)
    y = target(z, e)

    def same(y2):
        return bool(np.all(np.abs(y2 - y) <= 1e-12 * (1 + np.abs(y))))

    glob = same(target(-z, e)) or same(target(-z, -e))
    coords = []
    for i in range(k):
        zf = z.copy()
        zf[:, i] *= -1
        coords.append(same(target(zf, e)) or same(target(zf, -e)))
    return glob, coords


def binned_statistics(target: Target, n_samples: int, n_scrambles: int, rng: np.random.Generator,
            levels: tuple[int, ...] = (128, 256, 512), moment_match: bool = True,
            reflect: bool = True) -> dict[str, Any]:
    """``ρ(F_n)`` extrapolated in the bin count, and the trivial statistic, from scrambled Sobol points.

    Parameters
    ----------
    target : Target
        The label (noisy or not, ``k <= MAX_BINNED_K``).
    n_samples : int
        Sobol points in all (split over the scramblings and the ``2^k`` sign flips).
    n_scrambles : int
        Independent scramblings (the jackknife's groups).
    rng : numpy.random.Generator
        Randomness of the scramblings.
    levels : tuple of int, optional
        Bin counts of the continuous part, nested (default 128, 256, 512).
    moment_match : bool, optional
        Exact zero mean and identity covariance within each scrambling (default True).
    reflect : bool, optional
        Use each point with its ``2^k`` sign flips of ``z`` (default True).

    Returns
    -------
    dict
        ``lam`` (``ρ(F)``), ``lam_err``, ``lam_se``, ``triv``, ``triv_se`` and ``diagnostics``.
    """
    k = target.k
    noisy = target.noisy
    dim = k + int(noisy)
    R = n_scrambles
    copies = 2**k if reflect else 1
    mexp = max(int(math.ceil(math.log2(max(n_samples // (R * copies), 2)))), 4)
    per = 2**mexp
    Zs, Ys = [], []
    for _ in range(R):
        u = np.clip(qmc.Sobol(d=dim, scramble=True, rng=rng).random_base2(mexp), 1e-16, 1 - 1e-16)
        g = ndtri(u)
        if moment_match:  # exact zero mean and identity covariance within each scramble
            g = g - g.mean(axis=0)
            g = g @ np.linalg.inv(np.linalg.cholesky(g.T @ g / len(g))).T
        if reflect:  # average over the 2^k sign flips of z (the law of z is invariant)
            flips = np.array(np.meshgrid(*([[1.0, -1.0]] * k), indexing="ij")).reshape(k, -1).T
            zf = (g[None, :, :k] * flips[:, None, :]).reshape(-1, k)
            ef = np.tile(g[:, k], len(flips)) if noisy else 0.0
            Zs.append(zf)
            Ys.append(target(zf, ef))
        else:
            Zs.append(g[:, :k])
            Ys.append(target(g[:, :k], g[:, k] if noisy else 0.0))
    Z = np.concatenate(Zs)
    Y = np.concatenate(Ys)
    if not np.all(np.isfinite(Y)):
        raise ValueError(f"target={target.expr!r} gives non-finite labels")
    rep = np.repeat(np.arange(R), len(Y) // R)
    # atoms: values repeated among the unreflected points (reflections duplicate values)
    base = Y.reshape(R, copies, per)[:, 0, :].ravel()
    vals, counts = np.unique(base, return_counts=True)
    atom_vals = vals[counts >= 3]
    n_atoms = len(atom_vals)
    pos = np.searchsorted(atom_vals, Y)
    hit = (pos < n_atoms) & (atom_vals[np.minimum(pos, max(n_atoms - 1, 0))] == Y) if n_atoms \
        else np.zeros(len(Y), dtype=bool)
    cont = ~hit
    cont_fraction = float(cont.mean())
    finest = levels[-1] if cont.any() else 1
    # continuous part: equiprobable bins between pooled quantiles, nested across levels;
    # bins are intervals of y, so equal values always share a bin
    labels = np.empty(len(Y), dtype=int)
    labels[hit] = pos[hit]
    if cont.any():
        yc = np.sort(Y[cont])
        edges = yc[(np.arange(1, finest) * len(yc)) // finest]
        labels[cont] = n_atoms + np.searchsorted(edges, Y[cont], side="right")
    nb = n_atoms + finest
    ZZ = (Z[:, :, None] * Z[:, None, :] - np.eye(k)).reshape(len(Y), k * k)
    # per-scramble sums per finest bin: counts, Σz, Σ(zzᵀ−I)
    idx = rep * nb + labels
    cnt = np.bincount(idx, minlength=R * nb).reshape(R, nb).astype(float)
    sz = np.stack([np.bincount(idx, weights=Z[:, j], minlength=R * nb) for j in range(k)], -1)
    sg = np.stack([np.bincount(idx, weights=ZZ[:, j], minlength=R * nb) for j in range(k * k)], -1)
    sz = sz.reshape(R, nb, k)
    sg = sg.reshape(R, nb, k * k)

    def merge(arr: np.ndarray, n: int) -> np.ndarray:
        """Coarsen the continuous bins of ``arr`` (axis 1) from ``finest`` to ``n``."""
        if not cont.any():
            return arr
        head, tail = arr[:, :n_atoms], arr[:, n_atoms:]
        tail = tail.reshape(arr.shape[0], n, finest // n, *arr.shape[2:]).sum(axis=2)
        return np.concatenate([head, tail], axis=1)

    def stats(c, a, g) -> tuple[float, float]:
        """(ρ(F), trivial statistic) from pooled sums (c: (nb,), a: (nb,k), g: (nb,k*k))."""
        N = c.sum()
        P = c / N
        good = P > 0
        A = a[good] / N
        Gm = g[good].reshape(-1, k, k) / N
        Gm = (Gm + np.swapaxes(Gm, 1, 2)) / 2
        Pg = P[good]
        T4 = np.einsum("bjk,bli->jkli", Gm, Gm / Pg[:, None, None])
        Tm = np.einsum("bj,bk->jk", A, A / Pg[:, None])
        return spectral(T4)[0], gram_top(Tm)

    def jackknife(n: int) -> tuple[float, float, float, float]:
        c, a, g = merge(cnt, n), merge(sz, n), merge(sg, n)
        full = stats(c.sum(0), a.sum(0), g.sum(0))
        loo = np.array([stats(c.sum(0) - c[r], a.sum(0) - a[r], g.sum(0) - g[r]) for r in range(R)])
        est = R * np.array(full) - (R - 1) * loo.mean(0)
        se = np.sqrt((R - 1) / R * ((loo - loo.mean(0)) ** 2).sum(0))
        return float(est[0]), float(se[0]), float(est[1]), float(se[1])

    use_levels = levels if cont.any() else (1,)
    results = {n: jackknife(n) for n in use_levels}
    lam_f, se_f, triv_f, triv_se = results[use_levels[-1]]
    if len(use_levels) >= 3:
        # first-order Richardson in the bin count on the two finest pairs; their difference
        # estimates what the extrapolation leaves
        lam_1 = 2 * results[use_levels[-2]][0] - results[use_levels[-3]][0]
        lam = 2 * lam_f - results[use_levels[-2]][0]
        lam_err = abs(lam - lam_1) + 3 * se_f
    else:
        lam, lam_err = lam_f, 3 * se_f
    return {
        "lam": lam, "lam_err": lam_err, "lam_se": se_f,
        "triv": triv_f, "triv_se": triv_se,
        "diagnostics": {
            "n_points": int(len(Y)), "n_scrambles": R, "reflected": reflect,
            "atoms": [float(v) for v in atom_vals],
            "continuous_fraction": cont_fraction,
            "levels": {str(n): {"spectral_radius": r[0], "standard_error": r[1]}
                       for n, r in results.items()},
        },
    }



def estimate(target: Target, options: MethodOptions) -> Estimate:
    """``ρ(F)`` and the trivial test by Monte Carlo (uses ``n_samples``, ``n_scrambles``, ``rng``, ``rtol``).

    ``E[z|y] = 0`` is taken as exact when ``h`` is invariant under ``z → −z`` or
    under every ``z_i → −z_i``; otherwise it is detected above 5 jackknife
    standard errors. ``δ_alg`` is accepted if its relative error is below
    ``max(rtol, 1e-2)``.
    """
    out = binned_statistics(target, int(options.n_samples), int(options.n_scrambles), options.rng)
    lam, lam_err = out["lam"], out["lam_err"]
    glob, coords = _flip_symmetric(target, options.rng)
    notes: tuple[str, ...] = ()
    if glob or all(coords):
        triv, trivial = 0.0, False
        notes = ("E[z|y] = 0 by the sign symmetry of h",)
    else:
        triv = out["triv"]
        trivial = triv > 5 * out["triv_se"] and triv > 1e-6
    diagnostics = dict(out["diagnostics"])
    diagnostics.update({"trivial_statistic": triv, "trivial_error": out["triv_se"],
                        "sign_symmetric": glob, "coordinate_sign_symmetric": coords,
                        "spectral_radius_standard_error": out["lam_se"]})
    return Estimate(spectral_radius=lam, spectral_radius_error=lam_err, trivial_statistic=triv,
                    trivial=bool(trivial), zero_tol=3 * out["lam_se"], accept=max(options.rtol, 1e-2),
                    converged=True, notes=notes, diagnostics=diagnostics)
