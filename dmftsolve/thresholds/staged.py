"""The staged weak-recovery threshold: ``δ_alg`` of the hard directions once the easy ones are learned.

When ``E[z | y] ≠ 0``, :func:`~dmftsolve.thresholds.weak_recovery.alg_threshold`
returns ``δ_alg = 0``: a linear step learns the *easy* directions at any
``δ > 0``. This module computes the threshold of the remaining (*hard*)
directions once the easy ones are known, for coordinate-aligned easy
coordinates ``U`` and hard coordinates ``V``.

Once ``z_U`` is known exactly, the remaining problem is a model in ``z_V``
with the observation ``Y = (y, z_U)``; since ``z_U ~ N(0, I)`` is independent
of ``z_V``, ``G(Y) = E[z_V z_Vᵀ − I | y, z_U = u]`` is the ``G`` of the target
``h_u(z_V) = h(z_U = u, z_V)`` and

    ``F_staged = E_{u ~ N(0, I_|U|)}[F(h_u)]``,  ``δ_staged = 1/ρ(F_staged)``.

For one hard coordinate (``|V| = 1``, after dropping the hard coordinates the
label does not use) ``F(h_u)`` is the number ``ρ(h_u) = 1/δ_alg(h_u)``, so
``δ_staged = 1/E_u[1/δ_alg(h_u)]``. The expectation over ``u`` uses the
tensor Gauss–Hermite rule of :func:`dmftsolve.gaussian.gauss_hermite_rule`
(``numpy.polynomial.hermite_e.hermegauss``, weights normalised to sum 1) with
``n`` and ``2n`` nodes per easy coordinate, doubling ``n`` until the two agree
to ``rtol`` or ``max_nodes`` is reached; each ``δ_alg(h_u)`` is one call of
:func:`~dmftsolve.thresholds.weak_recovery.alg_threshold` on ``h_u``, built by
substituting the node into the parsed sympy expression (nothing is parsed or
evaluated from text). The reported error is the difference of the two rules
plus the weighted sum of the per-node errors of ``ρ(h_u)``, mapped to ``δ``.

If ``h_u`` has ``E[z_V | y] ≠ 0`` (``alg_threshold`` finds a trivial part) at
nodes of both the ``n`` and the ``2n`` rule, a hard direction becomes easy
once ``z_U`` is known (``z1 + z1*z2`` with ``U = {z1}``: ``h_u = u + u z2`` is
linear in ``z2``), so its staged threshold is 0. Nodes where ``h_u`` does not
depend on ``z_V`` (``u = 0`` there) contribute ``ρ = 0``.

Not implemented: several hard coordinates used by the label (``|V| ≥ 2`` needs
the full ``F`` operators of the ``h_u``, which ``alg_threshold`` does not
return), easy or hard subspaces that are not coordinate-aligned, and a
further staircase (directions that become easy only after a second stage are
treated as hard here unless they already show at the first).

Examples
--------
>>> from dmftsolve.thresholds.staged import staged_alg_threshold
>>> r = staged_alg_threshold("z1 + z2**2 - 1")
>>> round(r.delta, 8), r.easy, r.hard
(0.5, (0,), (1,))
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from dmftsolve.gaussian import gauss_hermite_rule
from dmftsolve.problem import Target, as_target
from dmftsolve.results import Result, SolverError, Status
from dmftsolve.thresholds.directions import axis_indices, direction_moments, label_features, snap_to_axes
from dmftsolve.thresholds.weak_recovery import alg_threshold
from dmftsolve.thresholds.weak_recovery.standardize import strip_constants

__all__ = ["StagedThreshold", "staged_alg_threshold"]

#: Most latent dimensions (plus one for noise) of the first-stage quadrature test.
_MAX_TEST_DIM = 5
#: Most Gauss–Hermite nodes in all (``nodes**|U|``) of one rule.
_MAX_TOTAL_NODES = 4096


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class StagedThreshold(Result):
    """Result of :func:`staged_alg_threshold`.

    Attributes
    ----------
    delta : float
        ``δ_staged = 1/ρ(E_u[F(h_u)])``: the weak-recovery threshold of the hard
        coordinates once the easy ones are known; ``0`` if a hard coordinate
        becomes linearly learnable given the easy ones, ``inf`` if the label
        carries no second-order information on them.
    error : float
        Error estimate of ``delta``: the difference of the ``n`` and ``2n``
        Gauss–Hermite rules plus the weighted per-node errors, mapped to ``δ``.
    easy : tuple of int
        The easy coordinates ``U`` (0-based: ``0`` is ``z1``) that are conditioned on.
    hard : tuple of int
        The remaining coordinates ``V``.
    trivial : bool
        Whether ``E[z_V | y, z_U] ≠ 0``: a hard coordinate is learned by a
        linear step once the easy ones are known (then ``delta = 0``).
    status, message, settings, diagnostics, elapsed
        See :class:`~dmftsolve.results.Result`. ``diagnostics`` holds the rules
        tried (``rules``: nodes per easy coordinate, ``E_u[ρ(h_u)]`` and its
        node error), the finest rule's ``nodes``, ``weights``,
        ``node_delta_alg``, ``node_rho``, ``node_rho_error``, ``node_method``,
        ``node_trivial``, the quadrature difference ``quadrature_error`` and the
        summed node error ``node_error`` (both on ``E_u[ρ(h_u)]``), and the
        first-stage test's ``linear_singular_values``.
    """

    _headline = ("delta", "error")  # shown by the repr (Result.__repr__)

    delta: float
    error: float
    easy: tuple[int, ...]
    hard: tuple[int, ...]
    trivial: bool
    status: Status = Status.SUCCESS
    settings: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0


# --------------------------------------------------------------------------- inputs
def _linear_easy(target: Target, tol: float = 1e-7) -> tuple[tuple[int, ...] | None, np.ndarray]:
    """Coordinates with ``E[z_j | y] ≠ 0`` (the first stage of :func:`split_directions`).

    The test of :func:`~dmftsolve.thresholds.directions.split_directions` at its
    stage 0 (moments ``E[z φ(y)]`` over its test family, on two Gauss–Hermite
    rules); ``split_directions`` itself goes on through the staircase and merges
    the stages into one basis, so stage 0 is recomputed here. Returns the
    indices (``None`` if the easy subspace is not coordinate-aligned) and the
    singular values.
    """
    k = int(target.k)  # type: ignore[arg-type]
    dim = k + (1 if target.noisy else 0)
    if dim > _MAX_TEST_DIM:
        raise ValueError(f"easy=None: k={k} (plus noise) is too large for the quadrature test of "
                         f"E[z | y] ≠ 0 (at most {_MAX_TEST_DIM} dimensions); give the easy "
                         "coordinates explicitly")
    nodes = int(min(80, np.floor(300_000 ** (1.0 / dim))))
    moments = []
    for n in (nodes, max(4, int(round(0.7 * nodes)))):
        x, w = gauss_hermite_rule(dim, n)
        z = x[:, :k]
        y = target(z, x[:, k] if target.noisy else 0.0)
        psi = label_features(y, w)
        if psi.shape[1] == 0:  # a constant label: nothing is easy
            return (), np.zeros(0)
        moments.append(direction_moments(z, w, psi, np.zeros((k, 0)), np.eye(k)))
    B, Bc = moments
    U, s, _ = np.linalg.svd(B, full_matrices=False)
    err = float(np.linalg.norm(B - Bc, 2))
    easy = U[:, s > tol + 2 * err]
    if easy.shape[1] == 0:
        return (), s
    return axis_indices(snap_to_axes(easy), atol=1e-6), s


def _coordinate(j: Any, names: tuple[str, ...]) -> int:
    """A coordinate given as a 0-based index or a latent name (``"z2"``) -> its index."""
    if isinstance(j, str) and j in names:
        return names.index(j)
    if not isinstance(j, bool) and isinstance(j, (int, np.integer)) and 0 <= int(j) < len(names):
        return int(j)
    raise ValueError(f"easy: {j!r} is not a latent coordinate; give 0-based indices "
                     f"0 … {len(names) - 1} or names among {', '.join(names)}")


def _check_inputs(nodes: Any, max_nodes: Any, rtol: Any) -> None:
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 2:
        raise ValueError(f"nodes must be an integer >= 2, got {nodes!r}")
    if (isinstance(max_nodes, bool) or not isinstance(max_nodes, (int, np.integer))
            or max_nodes < 2 * nodes):
        raise ValueError(f"max_nodes must be an integer >= 2*nodes = {2 * nodes}, got {max_nodes!r}")
    if (isinstance(rtol, bool) or not isinstance(rtol, (int, float, np.floating))
            or not (math.isfinite(rtol) and 0 < rtol < 1)):
        raise ValueError(f"rtol must be a number in (0, 1), got {rtol!r}")


# --------------------------------------------------------------------------- per node
def _node_value(base: sp.Expr, easy_syms: list[sp.Symbol], zsym: sp.Symbol, u: np.ndarray,
                node_rtol: float, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``ρ(h_u) = 1/δ_alg(h_u)`` and its error at one node ``u``.

    ``δ_alg`` is invariant under ``y ↦ a·y + b``, so nodes whose ``h_u`` differ
    only by a constant offset or factor (``u + z**2``, or ``±u`` in
    ``u**2 + z**2``) share one computation, keyed by the label without them.
    """
    # xreplace rebuilds the tree, so the numbers are combined (Heaviside(-2.0) -> 0) as with
    # subs, at a hundredth of its cost
    expr = base.xreplace({s: sp.Float(float(v)) for s, v in zip(easy_syms, u, strict=True)})
    if zsym not in expr.free_symbols:  # h_u does not see z_V: G ≡ 0
        return {"delta_alg": math.inf, "rho": 0.0, "rho_error": 0.0, "trivial": False,
                "method": "constant", "status": Status.SUCCESS, "message": ""}
    key = sp.srepr(strip_constants(expr, [zsym, sp.Symbol("eps", real=True)]))
    if key in cache:
        return cache[key]
    res = alg_threshold(Target._from_sympy(expr, 1), rtol=node_rtol, throw=False)
    if res.trivial:
        rho, rho_err = math.inf, 0.0
    elif math.isinf(res.delta_alg):
        rho, rho_err = 0.0, float(res.diagnostics.get("spectral_radius_error", 0.0))
    else:
        rho = 1.0 / res.delta_alg
        rho_err = res.error / res.delta_alg**2
    cache[key] = {"delta_alg": res.delta_alg, "rho": rho, "rho_error": rho_err, "trivial": res.trivial,
                  "method": res.method, "status": res.status, "message": res.message}
    return cache[key]


def _rule(base: sp.Expr, easy_syms: list[sp.Symbol], zsym: sp.Symbol, n: int,
          node_rtol: float, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """All nodes of the ``n``-point (per coordinate) Gauss–Hermite rule and ``E_u[ρ(h_u)]``."""
    if easy_syms:
        x, w = gauss_hermite_rule(len(easy_syms), n)
    else:  # the label does not use the easy coordinates: h_u = h
        x, w = np.zeros((1, 0)), np.ones(1)
    vals = [_node_value(base, easy_syms, zsym, u, node_rtol, cache) for u in x]
    rho = np.array([v["rho"] for v in vals])
    rho_err = np.array([v["rho_error"] for v in vals])
    trivial = np.array([v["trivial"] for v in vals], dtype=bool)
    finite = ~trivial
    return {
        "n": n, "nodes": x[:, 0] if x.shape[1] == 1 else x, "weights": w,
        "rho": rho, "rho_error": rho_err, "trivial": trivial,
        "delta_alg": np.array([v["delta_alg"] for v in vals]),
        "method": [v["method"] for v in vals],
        "failed": [(x[i].tolist(), v["status"].value, v["message"]) for i, v in enumerate(vals)
                   if not v["status"].ok],
        "mean": float(w[finite] @ rho[finite]), "node_error": float(w[finite] @ rho_err[finite]),
    }


# --------------------------------------------------------------------------- steps
def _easy_coordinates(target: Target, easy: Any, warnings: list[str]) -> tuple[tuple[int, ...], np.ndarray]:
    """The easy coordinates ``U`` (given, or found by the first-stage test) and the test's singular values.

    Given coordinates the first-stage test does not find easy are kept, with a warning.
    """
    names = target.variable_names
    k = int(target.k)  # type: ignore[arg-type]
    if easy is None or k + int(target.noisy) <= _MAX_TEST_DIM:
        linear, svals = _linear_easy(target)
    else:  # explicit easy coordinates and too many dimensions for the check
        linear, svals = None, np.zeros(0)
    if easy is None:
        if linear is None:
            raise NotImplementedError(
                f"target={target.expr!r}: the directions with E[z|y] ≠ 0 are not coordinate-aligned "
                "(e.g. z1 + z2 learns (z1 + z2)/√2 and leaves z1 − z2 hard); only coordinate-aligned "
                "easy and hard directions are implemented: give easy= explicitly to condition on "
                "whole coordinates")
        if not linear:
            raise ValueError(f"target={target.expr!r} has no easy direction (E[z|y] = 0, nothing is "
                             "learned by a linear step): the plain alg_threshold applies")
        return tuple(sorted(linear)), svals
    if isinstance(easy, (str, int, np.integer)):
        easy = (easy,)
    try:
        U = tuple(sorted({_coordinate(j, names) for j in easy}))
    except TypeError:
        raise ValueError(f"easy must be a sequence of coordinates (indices or names), "
                         f"got {easy!r}") from None
    if not U:
        raise ValueError(f"easy={easy!r} names no coordinate: the plain alg_threshold applies")
    if linear is not None:
        odd = [names[j] for j in U if j not in linear]
        if odd:
            warnings.append(f"easy: {', '.join(odd)} has E[z_j | y] = 0 by the first-stage test "
                            "(conditioned on all the same)")
    return U, svals


def _check_computable(target: Target, V_used: list[int], U_used: list[int], nodes: int) -> None:
    """Refuse several hard coordinates used by the label, and tensor rules beyond the node budget."""
    names = target.variable_names
    if len(V_used) > 1:
        raise NotImplementedError(
            f"target={target.expr!r}: the label uses {len(V_used)} hard coordinates "
            f"({', '.join(names[j] for j in V_used)}); the staged threshold is implemented for one "
            "(it needs the F operators of alg_threshold for several)")
    if nodes ** len(U_used) > _MAX_TOTAL_NODES or (2 * nodes) ** len(U_used) > _MAX_TOTAL_NODES:
        raise NotImplementedError(
            f"{len(U_used)} easy coordinates with nodes={nodes}: the tensor Gauss–Hermite rules of "
            f"{nodes}**{len(U_used)} and {2 * nodes}**{len(U_used)} points exceed {_MAX_TOTAL_NODES}; "
            "lower nodes")


def _refine_rules(target: Target, U_used: list[int], hard: int, nodes: int, max_nodes: int, rtol: float,
                  diagnostics: dict[str, Any]) -> list[dict[str, Any]]:
    """The Gauss–Hermite rules of ``n, 2n, 4n …`` nodes per easy coordinate, doubled until two
    successive ones agree to ``rtol``, a trivial node shows, or ``max_nodes`` is reached; the
    finest rule's nodes are recorded in ``diagnostics``."""
    zs = target.symbols[:-1]
    zsym = sp.Symbol("z", real=True)
    base = target.sympy_expr.xreplace({zs[hard]: zsym})
    easy_syms = [zs[j] for j in U_used]
    node_rtol = min(1e-8, rtol / 10)
    dim = len(U_used)
    cache: dict[str, dict[str, Any]] = {}
    coarse = _rule(base, easy_syms, zsym, nodes, node_rtol, cache)
    rules = [coarse]
    n = nodes
    while dim:
        fine = _rule(base, easy_syms, zsym, 2 * n, node_rtol, cache)
        rules.append(fine)
        if coarse["trivial"].any() or fine["trivial"].any():
            break
        diff = abs(fine["mean"] - coarse["mean"])
        if diff <= rtol * abs(fine["mean"]) or 4 * n > max_nodes \
                or (4 * n) ** dim > _MAX_TOTAL_NODES:
            break
        coarse, n = fine, 2 * n
    fine = rules[-1]
    diagnostics["alg_threshold_calls"] = len(cache)
    diagnostics["rules"] = [{"nodes": r["n"], "mean_rho": r["mean"], "node_error": r["node_error"],
                             "trivial_nodes": int(r["trivial"].sum())} for r in rules]
    diagnostics.update({
        "nodes": fine["nodes"], "weights": fine["weights"], "node_delta_alg": fine["delta_alg"],
        "node_rho": fine["rho"], "node_rho_error": fine["rho_error"], "node_method": fine["method"],
        "node_trivial": fine["trivial"],
    })
    return rules


def _conclude(rules: list[dict[str, Any]], names: tuple[str, ...], U: tuple[int, ...], hard_name: str,
              rtol: float, max_nodes: int,
              diagnostics: dict[str, Any]) -> tuple[float, float, bool, Status, list[str]]:
    """``(δ_staged, error, trivial, status, notes)`` from the last two rules (one rule without easy
    coordinates used by the label)."""
    fine = rules[-1]
    coarse = rules[-2] if len(rules) > 1 else fine
    notes: list[str] = []
    status = Status.SUCCESS
    if coarse["trivial"].any() and fine["trivial"].any():
        at = fine["nodes"][fine["trivial"]]
        diagnostics["trivial_nodes"] = at
        return 0.0, 0.0, True, status, [
            f"E[{hard_name} | y, {', '.join(names[j] for j in U)}] ≠ 0: given the easy coordinates "
            f"the label is linearly informative on {hard_name} (at {len(at)} of {fine['weights'].size} "
            f"nodes), so it is learned by a linear step at any δ > 0: δ_staged = 0"]
    if coarse["trivial"].any() or fine["trivial"].any():
        one = coarse if coarse["trivial"].any() else fine
        return 0.0, math.inf, True, Status.NOT_CONVERGED, [
            f"E[{hard_name} | y, easy] ≠ 0 at the nodes {one['nodes'][one['trivial']].tolist()} of the "
            f"{one['n']}-point rule only: cannot tell a set of measure zero from a positive one"]
    failed = coarse["failed"] + (fine["failed"] if fine is not coarse else [])
    if failed:
        status = Status.NOT_CONVERGED
        u, st, msg = failed[0]
        notes.append(f"δ_alg(h_u) {st} at {len(failed)} node(s), e.g. u = {u}: {msg}")
    mean = fine["mean"]
    quad_err = abs(fine["mean"] - coarse["mean"]) if fine is not coarse else 0.0
    node_err = fine["node_error"]
    diagnostics.update({"mean_rho": mean, "quadrature_error": quad_err, "node_error": node_err})
    if quad_err > rtol * abs(mean):  # (0 with a single rule: no easy coordinate used)
        status = Status.NOT_CONVERGED
        notes.append(f"the Gauss–Hermite rules of {coarse['n']} and {fine['n']} nodes differ by "
                     f"{quad_err:.3g} on E_u[ρ(h_u)] = {mean:.6g}, above rtol={rtol:g} (max_nodes="
                     f"{max_nodes})")
    if mean <= max(1e-12, 10 * node_err):
        notes.insert(0, f"E_u[ρ(h_u)] = {mean:.3g} ± {node_err + quad_err:.2g}: G ≡ 0 for the hard "
                        f"coordinate {hard_name} given the easy ones, δ_staged = ∞")
        return math.inf, math.inf, False, status, notes
    total = quad_err + node_err
    return 1.0 / mean, total / mean**2, False, status, notes


# --------------------------------------------------------------------------- driver
def staged_alg_threshold(
    target_or_problem: Any,
    *,
    easy: Any = None,
    nodes: int = 16,
    max_nodes: int = 128,
    rtol: float = 1e-6,
    throw: bool = True,
) -> StagedThreshold:
    """Weak-recovery threshold of the hard coordinates once the easy ones are learned.

    ``δ_staged = 1/E_u[ρ(h_u)]`` with ``h_u(z_V) = h(z_U = u, z_V)``,
    ``u ~ N(0, I_|U|)`` and ``ρ(h_u) = 1/δ_alg(h_u)`` (see the module
    docstring); implemented for one hard coordinate used by the label.

    Parameters
    ----------
    target_or_problem : Target, Problem or str
        The link ``y = h(z, ε)`` with ``k >= 2`` latents ``z1 … zk`` (a
        :class:`~dmftsolve.problem.Problem` contributes its target; a string is
        parsed as :class:`~dmftsolve.problem.Target`).
    easy : sequence of int or str, optional
        The coordinates ``U`` taken as known, as 0-based indices (``0`` is
        ``z1``) or names (``"z1"``). Default: those with ``E[z_j | y] ≠ 0``,
        found by the first-stage test of
        :func:`~dmftsolve.thresholds.directions.split_directions`.
    nodes : int
        Gauss–Hermite nodes per easy coordinate of the first rule (compared
        with ``2*nodes``); default 16.
    max_nodes : int
        Most nodes per easy coordinate: the rule is doubled until two
        successive rules agree to ``rtol`` or this is reached (default 128).
    rtol : float
        Relative accuracy asked of ``E_u[ρ(h_u)]`` (default ``1e-6``); each
        ``δ_alg(h_u)`` is asked ``min(1e-8, rtol/10)``.
    throw : bool
        Raise :class:`~dmftsolve.results.SolverError` unless the status is
        ``SUCCESS`` (default).

    Returns
    -------
    StagedThreshold
        ``delta`` ± ``error``, the coordinates ``easy`` and ``hard``, and the
        per-node values in ``diagnostics``.

    Raises
    ------
    ValueError
        Bad inputs; a target without an easy coordinate (then the plain
        :func:`~dmftsolve.thresholds.weak_recovery.alg_threshold` applies), or
        without a hard one left.
    NotImplementedError
        Several hard coordinates used by the label, an easy subspace that is
        not coordinate-aligned, or too many easy coordinates for the tensor rule.
    SolverError
        If ``throw`` and the result did not reach its tolerance.

    Examples
    --------
    ``y = z1 + z2² − 1``: once ``z1 = u`` is known, ``h_u = u + z2² − 1`` is a
    shift of ``z2²``, whose ``δ_alg = 1/Var(z²) = 1/2`` for every ``u``:

    >>> from dmftsolve import staged_alg_threshold
    >>> r = staged_alg_threshold("z1 + z2**2 - 1")
    >>> abs(r.delta - 0.5) <= r.error + 1e-12, r.error < 1e-6, r.easy, r.hard
    (True, True, (0,), (1,))
    """
    start = time.perf_counter()
    target = as_target(target_or_problem)
    _check_inputs(nodes, max_nodes, rtol)
    names = target.variable_names
    k = int(target.k)  # type: ignore[arg-type]
    warnings: list[str] = []
    U, svals = _easy_coordinates(target, easy, warnings)
    diagnostics: dict[str, Any] = {"linear_singular_values": svals}
    V = tuple(j for j in range(k) if j not in U)
    if not V:
        raise ValueError(f"target={target.expr!r}: every coordinate is easy "
                         f"({', '.join(names)}), no hard direction is left; alg_threshold's δ_alg = 0 "
                         "applies to all of them")
    settings = {"target": target.expr, "k": k, "easy": U, "nodes": int(nodes),
                "max_nodes": int(max_nodes), "rtol": float(rtol)}
    free, zs = target.sympy_expr.free_symbols, target.symbols[:-1]
    V_used = [j for j in V if zs[j] in free]
    U_used = [j for j in U if zs[j] in free]
    diagnostics.update({"hard_used": V_used, "easy_used": U_used})
    if not V_used:
        delta, error, trivial, status = math.inf, 0.0, False, Status.SUCCESS
        notes = [f"the label does not depend on the hard coordinates "
                 f"{', '.join(names[j] for j in V)}: G ≡ 0, δ_staged = ∞"]
    else:
        _check_computable(target, V_used, U_used, nodes)
        rules = _refine_rules(target, U_used, V_used[0], nodes, max_nodes, rtol, diagnostics)
        delta, error, trivial, status, notes = _conclude(rules, names, U, names[V_used[0]], rtol, max_nodes,
                                                         diagnostics)
    res = StagedThreshold(delta=delta, error=error, easy=U, hard=V, trivial=trivial, status=status,
                          message="; ".join(notes), settings=settings, diagnostics=diagnostics,
                          warnings=warnings, elapsed=time.perf_counter() - start)
    if throw and not res.ok:
        raise SolverError(f"staged_alg_threshold {status.value}: {res.message}", res)
    return res
