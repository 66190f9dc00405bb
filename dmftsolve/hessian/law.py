"""The law of the training fields at one time, as weighted atoms.

A :class:`Law` holds ``N`` atoms of the joint law of the fields that enter
the Hessian at one GD step (docs/theory.md §3–§4): the weight matrix
``D = ∇²_V ℓ(y, V)`` (``N×m×m``), the target coordinates ``V* = Θ*ᵀx``
(``N×k``), and optionally the pre-activations ``V`` (``N×m``) and the label
``y`` (``N``), with probabilities ``weights`` (``None``: equal weights, as
for Monte Carlo paths).

Two kinds:

``"monte_carlo"``
    The DMFT paths at step ``t`` (:meth:`Law.from_samples` on
    ``DMFTResult.samples(t)``). Its error is Monte Carlo error, estimated by
    replicate seeds (not by splitting one run's paths: the halves share the
    estimated kernels, see ``docs/theory.md``).
``"quadrature"``
    A deterministic product rule for a law known in closed form. At ``t = 0``
    (:meth:`Law.initial`) the pre-activations ``V = M0ᵀV* + Ξ``,
    ``Ξ ~ N(0, Q0)`` (``M0 = 0, Q0 = q0·I`` for a random start) are
    independent of ``V* ~ N(0, I_k)`` and of the noise ``ε ~ N(0, 1)``, and
    ``y = h(V*, ε)``. Each Gaussian coordinate gets a one-dimensional rule:
    Gauss–Hermite where the integrand is smooth in it, and, where the label
    (or the activation) has kinks along it, a composite Gauss–Legendre rule
    with the Gaussian weight, split at the kinks and truncated at
    ``|x| ≤ L`` (the Gaussian mass beyond ``L`` is below ``1e-18``). Kinks are
    read off the sympy expression: zeros of the arguments of ``Abs``,
    ``sign``, ``Heaviside``, of ``a − b`` for ``Min(a, b)``/``Max(a, b)`` and of
    the sides of ``Piecewise`` conditions, solved with sympy in each
    variable that appears alone in the equation. A kink along a direction
    that is not a coordinate axis (``Abs(z1 + z2)``) is not resolved; it is
    listed in ``diagnostics["unresolved_kinks"]`` and only slows convergence.

The error of a quadrature law is estimated by comparing two orders (the
node counts ``nodes`` and ``≈ 2/3·nodes`` per dimension): ``Law.initial``
reports it for ``E[D]`` and ``E[D²]`` in ``diagnostics``, and the
``spectrum`` command does the same for the edges and outliers it prints.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import sympy as sp
from numpy.typing import ArrayLike
from scipy.special import ndtr, roots_hermitenorm, roots_legendre

from dmftsolve.problem import Problem

__all__ = ["Law", "find_kinks", "gaussian_rule_1d"]

Kind = Literal["monte_carlo", "quadrature"]

#: Half-width of the truncated range of a composite rule: P(|N(0,1)| > 9) ≈ 2e-19.
TRUNCATION = 9.0
#: Fewest nodes on one piece of a composite rule.
_MIN_PIECE_NODES = 10


# --------------------------------------------------------------------------- the Law
@dataclass(frozen=True)
class Law:
    """The law of ``(D, V*, V, y)`` at one time, as weighted atoms.

    Parameters
    ----------
    D : array_like, shape (N, m, m) or (N,)
        Symmetric weight matrices ``∇²_V ℓ`` (``(N,)`` means ``m = 1``).
    Vstar : array_like, shape (N, k) or (N,)
        Target coordinates ``Θ*ᵀx``.
    V : array_like, shape (N, m), optional
        Pre-activations at the same atoms (DMFT: memory term and bias included).
    y : array_like, shape (N,), optional
        Labels.
    weights : array_like, shape (N,), optional
        Probabilities: finite, ``>= 0``, summing to 1 (to ``1e-9``; then
        renormalised exactly). ``None``: equal weights ``1/N``.
    kind : {"monte_carlo", "quadrature"}
    n_paths : int, optional
        Monte Carlo paths behind the law (default ``N`` for ``"monte_carlo"``,
        ``None`` for quadrature).
    t : int, optional
        The GD step this law belongs to.
    diagnostics : dict
        How the law was made (nodes, kinks, error estimates).

    Raises
    ------
    ValueError
        On inconsistent shapes, non-finite entries, an asymmetric ``D`` or
        invalid weights.

    Examples
    --------
    >>> import numpy as np
    >>> from dmftsolve import Law
    >>> law = Law(D=np.array([1.0, 1.0, 3.0]), Vstar=np.array([-1.0, 0.0, 1.0]))
    >>> law.n, law.m, law.k, law.kind
    (3, 1, 1, 'monte_carlo')
    """

    D: np.ndarray
    Vstar: np.ndarray
    V: np.ndarray | None = None
    y: np.ndarray | None = None
    weights: np.ndarray | None = None
    kind: Kind = "monte_carlo"
    n_paths: int | None = None
    t: int | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        D = _finite_array("D", self.D)
        if D.ndim == 1:
            D = D[:, None, None]
        if D.ndim != 3 or D.shape[1] != D.shape[2] or D.shape[0] == 0 or D.shape[1] == 0:
            raise ValueError("D must have shape (N,) or (N, m, m) with N, m >= 1, "
                             f"got shape {np.shape(self.D)}")
        size = float(np.max(np.abs(D)))
        asym = float(np.max(np.abs(D - np.swapaxes(D, 1, 2))))
        if asym > 1e-10 * max(size, 1.0):
            raise ValueError(f"D must be symmetric, got max |D - D^T| = {asym:.3g}")
        N, m = D.shape[0], D.shape[1]
        Vs = _finite_array("Vstar", self.Vstar)
        if Vs.ndim == 1:
            Vs = Vs[:, None]
        if Vs.ndim != 2 or Vs.shape[0] != N or Vs.shape[1] == 0:
            raise ValueError(f"Vstar must have shape (N,) or (N, k) with N={N}, "
                             f"got shape {np.shape(self.Vstar)}")
        V = None
        if self.V is not None:
            V = _finite_array("V", self.V)
            if V.ndim == 1 and m == 1:
                V = V[:, None]
            if V.shape != (N, m):
                raise ValueError(f"V must have shape (N, m)=({N}, {m}), got shape {np.shape(self.V)}")
        y = None
        if self.y is not None:
            y = _finite_array("y", self.y)
            if y.shape != (N,):
                raise ValueError(f"y must have shape (N,)=({N},), got shape {np.shape(self.y)}")
        w = None
        if self.weights is not None:
            w = _finite_array("weights", self.weights)
            if w.shape != (N,):
                raise ValueError(f"weights must have shape (N,)=({N},), got shape {np.shape(self.weights)}")
            if np.any(w < 0):
                raise ValueError(f"weights must be >= 0, got min {float(w.min())!r}")
            total = float(w.sum())
            if not abs(total - 1.0) <= 1e-9:
                raise ValueError(f"weights must sum to 1, got sum {total!r}")
            w = w / total
        if self.kind not in ("monte_carlo", "quadrature"):
            raise ValueError(f"kind must be 'monte_carlo' or 'quadrature', got {self.kind!r}")
        n_paths = self.n_paths
        if n_paths is None and self.kind == "monte_carlo":
            n_paths = N
        if n_paths is not None:
            if isinstance(n_paths, bool) or not isinstance(n_paths, (int, np.integer)) or n_paths < 1:
                raise ValueError(f"n_paths must be an integer >= 1, got {self.n_paths!r}")
            n_paths = int(n_paths)
        t = self.t
        if t is not None:
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
                raise ValueError(f"t must be an integer >= 0, got {self.t!r}")
            t = int(t)
        if not isinstance(self.diagnostics, Mapping):
            raise ValueError(f"diagnostics must be a dict, got {type(self.diagnostics).__name__}")
        for name, arr in (("D", 0.5 * (D + np.swapaxes(D, 1, 2))), ("Vstar", Vs), ("V", V), ("y", y),
                          ("weights", w)):
            if arr is not None:
                arr = np.array(arr, dtype=float)  # own copy, read-only
                arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "n_paths", n_paths)
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "diagnostics", dict(self.diagnostics))

    # ------------------------------------------------------------------ sizes and weights
    @property
    def n(self) -> int:
        """Number of atoms ``N``."""
        return int(self.D.shape[0])

    @property
    def m(self) -> int:
        """Width ``m`` (size of each ``D``)."""
        return int(self.D.shape[1])

    @property
    def k(self) -> int:
        """Number of target coordinates."""
        return int(self.Vstar.shape[1])

    @property
    def probabilities(self) -> np.ndarray:
        """The atoms' probabilities (``1/N`` each when ``weights`` is ``None``)."""
        return np.full(self.n, 1.0 / self.n) if self.weights is None else self.weights

    def expect(self, values: ArrayLike) -> np.ndarray:
        """``E[·]`` of per-atom values of shape ``(N, ...)``."""
        v = np.asarray(values, dtype=float)
        if v.ndim == 0 or v.shape[0] != self.n:
            raise ValueError(f"values must have leading axis N={self.n}, got shape {v.shape}")
        return np.einsum("i,i...->...", self.probabilities, v)

    def with_D(self, D: ArrayLike) -> Law:
        """The same atoms with another ``D`` (e.g. ``−D``)."""
        return dataclasses.replace(self, D=D)

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (no arrays)."""
        return {"kind": self.kind, "atoms": self.n, "n_paths": self.n_paths, "t": self.t, "m": self.m,
                "k": self.k} | {key: v for key, v in self.diagnostics.items() if key != "rules"}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_samples(cls, samples: Mapping[str, Any], *, t: int | None = None,
                     n_paths: int | None = None) -> Law:
        """The Monte Carlo law of ``DMFTResult.samples(t)`` (keys ``D``, ``Vstar``, ``V``, ``y``).

        Parameters
        ----------
        samples : mapping
            Must hold ``D`` and ``Vstar``; ``V`` and ``y`` are taken when present,
            and ``weights`` too.
        t : int, optional
            The step the samples belong to.
        n_paths : int, optional
            Paths behind the samples (default: their number).
        """
        if not isinstance(samples, Mapping):
            raise ValueError(f"samples must be a dict with keys D, Vstar (V, y optional), got "
                             f"{type(samples).__name__}")
        missing = [key for key in ("D", "Vstar") if key not in samples]
        if missing:
            raise ValueError(f"samples lacks key(s) {missing}; got keys {sorted(samples)}")
        return cls(D=samples["D"], Vstar=samples["Vstar"], V=samples.get("V"), y=samples.get("y"),
                   weights=samples.get("weights"), kind="monte_carlo", n_paths=n_paths, t=t)

    @classmethod
    def initial(cls, problem: Problem, *, nodes: int | None = None, max_atoms: int = 40_000,
                error: bool = True) -> Law:
        """The exact law at ``t = 0`` by deterministic quadrature.

        ``V* ~ N(0, I_k)``, ``ε ~ N(0, 1)`` (only if the label is noisy) and
        ``Ξ ~ N(0, Q0)`` are independent; ``V = M0ᵀV* + Ξ`` (``M0`` with the
        rows of ``hold_zero`` directions set to zero, as in the DMFT; zero for a
        random start, where ``Q0 = q0·I``); ``y = h(V*, ε)``;
        ``D = ∇²_V ℓ(y, V)``. The bias is zero at ``t = 0``.

        Parameters
        ----------
        problem : Problem
        nodes : int, optional
            Nodes per integrated coordinate (latent coordinates the label
            does not use get 3 Gauss–Hermite nodes: the outlier equation only
            needs their second moments). Default: the largest count with at
            most ``max_atoms`` atoms, capped at 400.
        max_atoms : int
            Bound on the number of atoms when ``nodes`` is not given.
        error : bool
            Also build the rule at ``≈ 2/3·nodes`` and put ``|E[D] − E'[D]|``
            and ``|E[D²] − E'[D²]|`` (max entry) in ``diagnostics["error"]``.

        Returns
        -------
        Law
            ``kind="quadrature"``, ``t=0``; ``diagnostics`` lists the
            coordinates, their kinks and rules.
        """
        if not isinstance(problem, Problem):
            raise ValueError(f"problem must be a Problem, got {type(problem).__name__}")
        if isinstance(max_atoms, bool) or not isinstance(max_atoms, (int, np.integer)) or max_atoms < 8:
            raise ValueError(f"max_atoms must be an integer >= 8, got {max_atoms!r}")
        plan = _initial_plan(problem)
        n_full = sum(1 for c in plan["coords"] if c["full"])
        if nodes is None:
            nodes = max(4, int(min(400, math.floor(max_atoms ** (1.0 / max(n_full, 1)) * (1 + 1e-12)))))
            while nodes > 4 and _plan_size(plan, nodes) > max_atoms:
                nodes -= 1
        elif isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 4:
            raise ValueError(f"nodes must be an integer >= 4, got {nodes!r}")
        size = _plan_size(plan, int(nodes))
        if size > 2**26:
            if len(plan["coords"]) > 32 or _plan_size(plan, 4) > 2**26:
                # even the coarsest rule is too large: the product rule cannot cover this width
                raise ValueError(
                    f"the t = 0 quadrature law of m={problem.m} hidden unit(s) is a product rule in "
                    f"{len(plan['coords'])} Gaussian coordinates: even 4 nodes each give "
                    f"{_plan_size(plan, 4):.3g} atoms, more than 2**26; the largest width it covers "
                    "is about 12 units (use fewer --m, or t > 0, whose law is sampled)")
            raise ValueError(f"nodes={nodes} gives {size} atoms in {n_full} "
                             "dimension(s), more than 2**26; lower nodes")
        from dmftsolve.dynamics.dmft import available_memory_bytes

        # peak of _initial_law and the expectations over it: the grids, D (m×m per atom) and
        # products such as D @ D, about four arrays of each
        need = 8 * 4 * size * (len(plan["coords"]) + 3 * problem.m ** 2 + 2 * problem.m + problem.k + 4)
        avail = available_memory_bytes()
        if avail is not None and need > avail:
            raise ValueError(f"the t = 0 quadrature law of m={problem.m} hidden unit(s) has {size} atoms "
                             f"({nodes} nodes in each of {n_full} coordinates) and needs about "
                             f"{need / 2**30:.3g} GiB, more than the {avail / 2**30:.3g} GiB available; "
                             "lower nodes or use fewer --m")
        law = _initial_law(problem, plan, int(nodes))
        law.diagnostics.update(_probe_bounds(problem, plan))
        if error:
            coarse = _initial_law(problem, plan, max(4, (2 * int(nodes)) // 3))
            errs = {}
            for name, f in (("E[D]", lambda L: L.expect(L.D)),
                            ("E[D^2]", lambda L: L.expect(L.D @ L.D))):
                errs[name] = float(np.max(np.abs(f(law) - f(coarse))))
            law.diagnostics["error"] = errs
            n_lo = max(4, (2 * int(nodes)) // 3)
            law.diagnostics["error_method"] = f"difference to the rule with {n_lo} nodes per coordinate"
        return law


def _finite_array(name: str, value: Any) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array, got {type(value).__name__}") from None
    if arr.size and not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must be finite, got {bad} non-finite entr{'y' if bad == 1 else 'ies'}")
    return arr


# --------------------------------------------------------------------------- kinks
def _kink_equations(expr: sp.Expr) -> list[sp.Expr]:
    """Expressions whose zeros are kinks (or jumps) of ``expr``."""
    eqs: list[sp.Expr] = []
    for node in sp.preorder_traversal(expr):
        if isinstance(node, (sp.Abs, sp.sign, sp.Heaviside)):
            eqs.append(node.args[0])
        elif isinstance(node, (sp.Min, sp.Max)):
            args = list(node.args)
            eqs.extend(a - b for i, a in enumerate(args) for b in args[i + 1:])
        elif isinstance(node, sp.Piecewise):
            for _, cond in node.args:
                for rel in sp.preorder_traversal(cond):
                    if isinstance(rel, sp.core.relational.Relational):
                        eqs.append(rel.lhs - rel.rhs)
    return eqs


def find_kinks(
    expr: sp.Expr, symbols: tuple[sp.Symbol, ...]
) -> tuple[dict[sp.Symbol, list[float]], list[str]]:
    """Real kink locations of ``expr`` along each symbol.

    Parameters
    ----------
    expr : sympy.Expr
    symbols : tuple of sympy.Symbol
        The coordinates.

    Returns
    -------
    kinks : dict
        ``symbol -> sorted list of real kink locations`` (for equations
        involving that symbol alone).
    unresolved : list of str
        Kink equations that involve several symbols (not axis-aligned) or that
        sympy cannot solve.
    """
    out: dict[sp.Symbol, set[float]] = {s: set() for s in symbols}
    unresolved: list[str] = []
    for eq in _kink_equations(expr):
        free = [s for s in symbols if s in eq.free_symbols]
        if not free:
            continue
        if len(free) > 1:
            unresolved.append(f"{eq} = 0")
            continue
        s = free[0]
        try:
            sol = sp.solveset(sp.Eq(eq, 0), s, domain=sp.S.Reals)
        except Exception:  # noqa: BLE001 - sympy raises many types on equations it cannot handle
            unresolved.append(f"{eq} = 0")
            continue
        if isinstance(sol, sp.FiniteSet):
            for v in sol:
                val = complex(sp.N(v))
                if abs(val.imag) < 1e-12 and math.isfinite(val.real):
                    out[s].add(float(val.real))
        elif sol is sp.S.EmptySet:
            continue
        else:
            unresolved.append(f"{eq} = 0")
    return {s: sorted(v) for s, v in out.items()}, unresolved


# --------------------------------------------------------------------------- 1-d rules
def gaussian_rule_1d(n: int, kinks: list[float] | tuple[float, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """A rule for ``E[f(g)]``, ``g ~ N(0, 1)``: ``n`` nodes, positive weights summing to 1.

    Without kinks: Gauss–Hermite (probabilists'). With kinks: composite
    Gauss–Legendre on ``[−L, L]`` (``L = max(9, max|kink| + 1)``) split at the kinks,
    each node weighted by the normal density, the nodes shared out over the
    pieces in proportion to ``P(N(0, 2) ∈ piece)`` (at least 10 per piece), and
    the weights renormalised (the truncated mass is ``< 1e-18``).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    ks = sorted({float(k) for k in kinks if math.isfinite(float(k))})
    L = max(TRUNCATION, max((abs(k) for k in ks), default=0.0) + 1.0)
    ks = [k for k in ks if -L < k < L]
    if not ks:
        x, w = roots_hermitenorm(int(n))
        return x, w / w.sum()
    cuts = np.array([-L, *ks, L])
    mass = ndtr(cuts[1:] / math.sqrt(2.0)) - ndtr(cuts[:-1] / math.sqrt(2.0))
    counts = np.maximum(_MIN_PIECE_NODES, np.round(n * mass / mass.sum()).astype(int))
    xs, ws = [], []
    for a, b, c in zip(cuts[:-1], cuts[1:], counts, strict=True):
        u, wu = roots_legendre(int(c))
        x = 0.5 * (b - a) * u + 0.5 * (a + b)
        xs.append(x)
        ws.append(0.5 * (b - a) * wu * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))
    x, w = np.concatenate(xs), np.concatenate(ws)
    return x, w / w.sum()


# --------------------------------------------------------------------------- t = 0
def _initial_plan(problem: Problem) -> dict[str, Any]:
    """Coordinates of the t = 0 integral, their kinks, and the map to ``(V*, V, ε)``."""
    k, m = problem.k, problem.m
    tr = problem.training
    target = problem.target
    zsyms, eps = target.symbols[:-1], target.symbols[-1]
    expr = target.sympy_expr
    kinks, unresolved = find_kinks(expr, target.symbols)
    M0 = np.array(tr.init.overlaps(k, m), dtype=float)
    M0[list(tr.hold_zero), :] = 0.0
    Q0 = np.array(tr.init.gram(m), dtype=float)
    lam, U = np.linalg.eigh(0.5 * (Q0 + Q0.T))
    keep = lam > 1e-12 * max(float(lam.max(initial=0.0)), 1e-300)
    factor = U[:, keep] * np.sqrt(lam[keep])  # (m, r): Ξ = factor @ g
    # activation kinks map to the Gaussian coordinate only when V_j = s_j g_j
    r = sp.Symbol("r", real=True)
    act = problem.network.sympy_expr
    act_sym = next(iter(act.free_symbols), r)
    act_kinks, act_unres = find_kinks(act, (act_sym,))
    axis_aligned = (np.allclose(M0, 0.0) and factor.shape[1] == m
                    and np.allclose(Q0, np.diag(np.diag(Q0))))
    coords: list[dict[str, Any]] = []
    used = expr.free_symbols
    for j, s in enumerate(zsyms):
        in_V = bool(np.any(M0[j] != 0.0))
        full = s in used or in_V
        coords.append({"name": str(s), "role": "Vstar", "index": j, "full": full,
                       "kinks": kinks[s] if s in used else []})
    for j in range(factor.shape[1]):
        ks: list[float] = []
        if axis_aligned and act_kinks[act_sym]:
            scale = math.sqrt(Q0[j, j])
            ks = [v / scale for v in act_kinks[act_sym]]
        coords.append({"name": f"xi{j + 1}", "role": "xi", "index": j, "full": True, "kinks": ks})
    if eps in used:
        coords.append({"name": "eps", "role": "eps", "index": 0, "full": True, "kinks": kinks[eps]})
    notes = list(unresolved)
    if act_kinks[act_sym] and not axis_aligned:
        notes.append(f"activation kinks at r = {act_kinks[act_sym]} (V not axis-aligned)")
    notes += [f"activation: {e}" for e in act_unres]
    return {"coords": coords, "M0": M0, "factor": factor, "unresolved": notes}


def _rule_size(n: int, kinks: list[float]) -> int:
    ks = [v for v in kinks if abs(v) < max(TRUNCATION, max((abs(u) for u in kinks), default=0.0) + 1.0)]
    if not ks:
        return n
    return gaussian_rule_1d(n, ks)[0].size


def _plan_size(plan: dict[str, Any], nodes: int) -> int:
    """Atoms of the product rule (a Python integer: ``np.prod`` wraps around past 2**63)."""
    return math.prod(_rule_size(nodes if c["full"] else 3, c["kinks"]) for c in plan["coords"])


def _initial_law(problem: Problem, plan: dict[str, Any], nodes: int) -> Law:
    rules = []
    for c in plan["coords"]:
        n = nodes if c["full"] else 3
        rules.append(gaussian_rule_1d(n, c["kinks"]))
    sizes = [x.size for x, _ in rules]
    grids = np.meshgrid(*[x for x, _ in rules], indexing="ij") if rules else []
    pts = np.stack([g.ravel() for g in grids], axis=-1)
    w = np.ones(1)
    for _, wj in rules:
        w = np.multiply.outer(w, wj).ravel()
    Vstar, V, D, y = _map_to_D(problem, plan, pts)
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(D))):
        raise ValueError("the label or D = ∇²ℓ is not finite at some quadrature node at t = 0 "
                         f"(target={problem.target.expr!r}, activation={problem.network.activation!r})")
    # tiny products of tail weights carry no mass and only cost time
    keep = w > 1e-300
    w = w[keep] / w[keep].sum()
    diag = {
        "method": "product rule: Gauss-Hermite, or Gauss-Legendre with the normal weight split at kinks",
        "nodes": nodes,
        "coordinates": [{"name": c["name"], "nodes": int(s), "kinks": c["kinks"]}
                        for c, s in zip(plan["coords"], sizes, strict=True)],
        "unresolved_kinks": plan["unresolved"],
    }
    return Law(D=D[keep], Vstar=Vstar[keep], V=V[keep], y=y[keep], weights=w, kind="quadrature", t=0,
               diagnostics=diag)


#: Probe radii for deciding whether ``D`` is bounded (see :func:`_probe_bounds`).
_PROBE_RADII = (9.0, 30.0)


def _probe_bounds(problem: Problem, plan: dict[str, Any]) -> dict[str, Any]:
    """Whether the law of ``D`` is unbounded below / above, from ``D`` on growing boxes.

    A quadrature rule cannot show a tail (its atoms stop near ``|x| ≈ 9``), and a
    tail-index estimate on its weights means nothing. ``D`` is a function of the
    Gaussian coordinates; its extreme eigenvalues on the grids ``[−9, 9]^dim`` and
    ``[−30, 30]^dim`` (a grid through 0 and the kinks) are compared: a side is
    declared unbounded when the extreme grows by more than ``5 %`` of
    ``1 + (range of the spectrum of D on the small box)``, or is not finite. Exact for polynomials and
    for functions that saturate by ``|x| = 9``; a logarithmic growth is
    caught, a growth slower than that may not be.
    """
    full = [c for c in plan["coords"] if c["full"]]
    per_dim = max(5, int((2e5) ** (1.0 / max(len(full), 1))))
    ext = []
    for radius in _PROBE_RADII:
        axes = []
        for c in plan["coords"]:
            if not c["full"]:
                axes.append(np.zeros(1))
                continue
            pts = np.linspace(-radius, radius, per_dim | 1)
            axes.append(np.unique(np.concatenate([pts, np.asarray(c["kinks"], dtype=float)])))
        grids = np.meshgrid(*axes, indexing="ij")
        pts = np.stack([g.ravel() for g in grids], axis=-1)
        D = _map_to_D(problem, plan, pts)[2]
        if not np.all(np.isfinite(D)):
            ext.append((-math.inf, math.inf))
            continue
        ev = D[:, 0, 0] if D.shape[1] == 1 else np.linalg.eigvalsh(D).reshape(D.shape[0], -1)
        ext.append((float(np.min(ev)), float(np.max(ev))))
    (lo1, hi1), (lo2, hi2) = ext
    if not (math.isfinite(lo1) and math.isfinite(hi1)):
        return {"unbounded_below": True, "unbounded_above": True,
                "bounds_probe": "D not finite on the box |x| <= 9"}
    tol = 0.05 * (1.0 + hi1 - lo1)
    return {"unbounded_below": bool(lo2 < lo1 - tol), "unbounded_above": bool(hi2 > hi1 + tol),
            "bounds_probe": {f"|x|<={r:g}": [a, b] for r, (a, b) in zip(_PROBE_RADII, ext, strict=True)}}


def _map_to_D(problem: Problem, plan: dict[str, Any], pts: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(Vstar, V, D, y)`` at points of the Gaussian coordinates of ``plan``."""
    N = pts.shape[0]
    Vstar = np.zeros((N, problem.k))
    g = np.zeros((N, plan["factor"].shape[1]))
    eps = np.zeros(N)
    for col, c in enumerate(plan["coords"]):
        if c["role"] == "Vstar":
            Vstar[:, c["index"]] = pts[:, col]
        elif c["role"] == "xi":
            g[:, c["index"]] = pts[:, col]
        else:
            eps = pts[:, col]
    V = Vstar @ plan["M0"] + g @ plan["factor"].T
    with np.errstate(all="ignore"):
        y = problem.labels(Vstar, eps)
        D = problem.hess(y, V)
    return Vstar, V, D, y
