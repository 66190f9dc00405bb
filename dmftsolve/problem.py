"""The problem object: target, network, loss and training schedule.

One frozen, validated :class:`Problem` feeds every part of the library: the
DMFT solver, the Hessian spectrum, the thresholds and the finite-d simulator.
Conventions are those of ``docs/theory.md`` §1:

* ``x ~ N(0, I_d)``, latent ``V* = Θ*ᵀx ∈ R^k``, noise ``ε ~ N(0, 1)``,
  label ``y = h(V*, ε)``;
* pre-activations ``V = Wᵀx + b ∈ R^m`` (trained bias ``b``, only with
  ``bias=True``; otherwise ``b = 0``), output ``f = Σ_j a_j σ(V_j)``;
* per-sample loss ``ℓ(y, V) = loss(y, f)`` (default ``(y − f)²/2``),
  gradient ``g = ∇_V ℓ`` and Hessian ``D = ∇²_V ℓ``, all from sympy;
* GD ``W ← (1 − ηλ) W − (η/n) Xᵀ G`` for ``steps`` steps and, with a bias,
  ``b ← b − (η/n) Σ_i G_i`` (no ridge on ``b``, ``b⁰ = 0``).

Construction checks every input: the values with :mod:`dmftsolve.checks`, and
whether the target, activation and loss are fit to train on with the rules of
:mod:`dmftsolve.admissibility`.

Examples
--------
>>> from dmftsolve import Problem
>>> p = Problem.build(target="z**2", activation="gelu", eta=0.2, steps=100)
>>> p.k, p.m
(1, 1)
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
import sympy as sp

from dmftsolve._symbolic import (
    compile_expression,
    compile_expressions,
    derivatives,
    expression_names,
    parse_expression,
)
from dmftsolve.activations import NAMED_ACTIVATIONS, R
from dmftsolve.admissibility import activation_problem, loss_problem, resolution_problem, target_problem
from dmftsolve.checks import check_integer, check_matrix, check_real, check_sequence, short_repr
from dmftsolve.defaults import PROBLEM_DEFAULTS, default_eta
from dmftsolve.losses import NAMED_LOSSES, F, Y

__all__ = ["Target", "Network", "Loss", "Init", "Training", "Problem", "as_target"]


class _Frozen:
    """Mixin: pickle only the dataclass fields (compiled functions are rebuilt lazily)."""

    def __getstate__(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


# --------------------------------------------------------------------------- target
#: Largest network width ``m`` and number of GD steps a problem takes (beyond them the
#: arrays cannot be allocated: ``m = 10**19`` ended in an OverflowError, ``steps = 10**19``
#: was accepted).
MAX_M = 1_000_000
MAX_STEPS = 10**9
_Z_INDEXED = re.compile(r"^z([1-9][0-9]*)$")
#: Largest latent dimension ``k`` (explicit, or implied by the highest index ``zk`` used).
MAX_K = 1000


@dataclass(frozen=True)
class Target(_Frozen):
    """The link ``y = h(V*, ε)``.

    Parameters
    ----------
    expr : str
        A sympy expression in ``z`` (single index, ``k = 1``) or ``z1 … zk``
        (multi-index), and optionally ``eps`` for standard Gaussian noise.
        Examples: ``"z**2"``, ``"abs(z)"``, ``"z1*z2"``, ``"z**2 + 0.5*eps"``.
    k : int, optional
        Latent dimension. By default the largest index used (``z3`` gives 3);
        give it to declare latent directions the target does not use.

    Examples
    --------
    >>> import numpy as np
    >>> from dmftsolve import Target
    >>> t = Target("z1*z2")
    >>> t.k, t.variable_names
    (2, ('z1', 'z2'))
    >>> t(np.array([[1.0, 2.0], [3.0, -1.0]]))  # labels for two latent vectors
    array([ 2., -3.])
    >>> Target("z**2 + 0.5*eps").noisy
    True
    """

    expr: str = "z**2"
    k: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.expr, str):
            raise ValueError(f"target must be an expression string, got {short_repr(self.expr)}")
        # type and length only: names are checked by the parser below
        names = expression_names(self.expr, parameter="target")
        indexed = sorted(n for n in names if _Z_INDEXED.match(n))
        # compare lengths before int(): a 2000-digit index needs no conversion to be refused
        oversize = [n for n in indexed if len(n) - 1 > len(str(MAX_K)) or int(n[1:]) > MAX_K]
        if oversize:
            raise ValueError(
                f"target: latent index {short_repr(oversize[0], 24)} exceeds the largest allowed "
                f"latent dimension {MAX_K}"
            )
        indices = [int(n[1:]) for n in indexed]
        if "z" in names and indices:
            raise ValueError(
                f"target={short_repr(self.expr)} mixes 'z' with indexed 'z1…zk'; use one or the other"
            )
        used_k = max(indices) if indices else 1
        k = used_k if self.k is None else check_integer("k", self.k, minimum=1)
        if k > MAX_K:
            raise ValueError(f"k must be <= {MAX_K}, got {k}")
        if k < used_k:
            raise ValueError(f"k={k} is smaller than the largest latent index used ({used_k})")
        if "z" in names and k > 1:
            raise ValueError(f"target={short_repr(self.expr)} uses the single latent 'z' but k={k}; with "
                             f"k > 1 name the latents z1 … z{k} (e.g. 'z1**2')")
        object.__setattr__(self, "k", k)
        # validate now, so that errors surface at construction
        _ = self.sympy_expr
        reason = target_problem(self)
        if reason is not None:
            raise ValueError(reason)

    @classmethod
    def _from_sympy(cls, expr: sp.Expr, k: int) -> Target:
        """A target whose link is the sympy ``expr``, taken as it is (internal).

        ``expr`` must be built from the symbols of a target with ``k`` latents
        (``z`` when ``k = 1``, else ``z1 … zk``, and ``eps``); nothing is parsed.
        Used by :func:`dmftsolve.thresholds.weak_recovery.alg_threshold` for an
        equivalent, standardised link. ``expr`` (the text) is ``str(expr)``.
        """
        obj = object.__new__(cls)
        object.__setattr__(obj, "expr", str(expr))
        object.__setattr__(obj, "k", int(k))
        obj.__dict__["sympy_expr"] = expr
        return obj

    @property
    def variable_names(self) -> tuple[str, ...]:
        """Latent variable names, in order."""
        if self.k == 1 and not re.search(r"\bz1\b", self.expr):
            return ("z",)
        return tuple(f"z{i}" for i in range(1, self.k + 1))

    @cached_property
    def sympy_expr(self) -> sp.Expr:
        """The link as a sympy expression."""
        return parse_expression(self.expr, [*self.variable_names, "eps"], parameter="target")

    @cached_property
    def symbols(self) -> tuple[sp.Symbol, ...]:
        """``(z…, eps)`` as sympy symbols, matching :attr:`sympy_expr`."""
        return tuple(sp.Symbol(n, real=True) for n in (*self.variable_names, "eps"))

    @property
    def noisy(self) -> bool:
        """Whether the label depends on the noise ``eps``."""
        return self.symbols[-1] in self.sympy_expr.free_symbols

    @cached_property
    def _compiled(self):
        return compile_expression(self.sympy_expr, self.symbols)

    def __call__(self, z: np.ndarray, eps: np.ndarray | float = 0.0) -> np.ndarray:
        """Labels ``y = h(z, ε)`` for latents ``z`` of shape ``(..., k)``."""
        z = np.asarray(z, dtype=float)
        if z.shape[-1] != self.k:
            raise ValueError(f"z must have last axis of length k={self.k}, got shape {z.shape}")
        return self._compiled(*np.moveaxis(z, -1, 0), eps)


# --------------------------------------------------------------------------- network
@dataclass(frozen=True)
class Network(_Frozen):
    """Two-layer network ``f(x) = Σ_j a_j σ(w_jᵀ x + b_j)`` with a trained first layer.

    Parameters
    ----------
    activation : str
        One of ``gelu``, ``quad`` (``r²``), ``relu``, ``tanh``, ``erf``,
        ``linear``, or a sympy expression in ``r``.
    m : int
        Number of hidden units, ``m >= 1``.
    a : sequence of float, optional
        Fixed second-layer weights; default all ones (the single neuron is
        ``m = 1, a = (1,)``).
    bias : bool, optional
        Whether the first layer has a trained per-unit bias ``b ∈ R^m``
        (started at ``b⁰ = 0``, updated by GD without ridge). Default False:
        ``f(x) = Σ_j a_j σ(w_jᵀ x)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dmftsolve import Network
    >>> Network("gelu", m=2)
    Network(activation='gelu', m=2, a=(1.0, 1.0), bias=False)
    >>> net = Network("relu", m=3, a=[1, -1, 0.5])
    >>> net.a
    (1.0, -1.0, 0.5)
    >>> net.sigma(np.array([-1.0, 2.0]))
    array([0., 2.])
    >>> Network("r**3 - r").sigma(np.array([2.0]), 1)  # σ'(r) = 3r² - 1 at r = 2
    array([11.])
    """

    activation: str = "gelu"
    m: int = 1
    a: tuple[float, ...] | None = None
    bias: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.bias, (bool, np.bool_)):
            raise ValueError(f"bias must be a bool (True or False), got {self.bias!r}")
        object.__setattr__(self, "bias", bool(self.bias))
        m = check_integer("m", self.m, minimum=1, maximum=MAX_M)
        object.__setattr__(self, "m", m)
        a = (1.0,) * m if self.a is None else self.a
        if isinstance(a, (str, bytes, Mapping)) or (not isinstance(a, (Sequence, np.ndarray))
                                                    and not isinstance(a, numbers.Real)):
            raise ValueError(f"a must be a sequence of m={m} real numbers, got {short_repr(a)}")
        a = tuple(check_real(f"a[{j}]", v) for j, v in enumerate(
            [a] if isinstance(a, numbers.Real) else np.asarray(a, dtype=object).ravel()))
        if len(a) != m:
            raise ValueError(f"a must have m={m} entries, got {len(a)}")
        object.__setattr__(self, "a", a)
        _ = self.sympy_expr
        if self.activation not in NAMED_ACTIVATIONS:
            reason = activation_problem(self)
            if reason is not None:
                raise ValueError(reason)

    @cached_property
    def sympy_expr(self) -> sp.Expr:
        """The activation σ(r) as a sympy expression."""
        if not isinstance(self.activation, str):
            raise ValueError(
                f"activation must be a name or an expression string, got {short_repr(self.activation)}"
            )
        if self.activation in NAMED_ACTIVATIONS:
            return NAMED_ACTIVATIONS[self.activation]
        return parse_expression(self.activation, ["r"], parameter="activation")

    @cached_property
    def _sigma(self):
        return [compile_expression(e, [R])
                for e in derivatives(self.sympy_expr, R, 3, parameter="activation")]

    def sigma(self, r: np.ndarray, order: int = 0) -> np.ndarray:
        """``σ^{(order)}(r)`` elementwise, ``order`` in 0…3."""
        return self._sigma[order](r)

    @cached_property
    def _sigma_pair(self):
        exprs = derivatives(self.sympy_expr, R, 1, parameter="activation")[:2]
        return compile_expressions(exprs, [R])

    def sigma_and_derivative(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(σ(r), σ'(r))`` elementwise from one evaluation of their common subexpressions
        (the same values as :meth:`sigma` of orders 0 and 1)."""
        return self._sigma_pair(r)

    @property
    def a_array(self) -> np.ndarray:
        return np.asarray(self.a, dtype=float)


# --------------------------------------------------------------------------- loss
@dataclass(frozen=True)
class Loss(_Frozen):
    """Per-sample loss ``loss(y, f)``.

    Parameters
    ----------
    name : str
        ``square`` (``(y − f)²/2``, the default), ``logistic``, or a sympy
        expression in ``y`` and ``f``.

    Examples
    --------
    >>> from dmftsolve import Loss
    >>> loss = Loss()  # square loss (y - f)**2/2
    >>> float(loss(1.0, 0.5)), float(loss(1.0, 0.5, 1)), float(loss(1.0, 0.5, 2))
    (0.125, -0.5, 1.0)
    >>> Loss("logistic").sympy_expr
    log(1 + exp(-f*y))
    """

    name: str = "square"

    def __post_init__(self) -> None:
        _ = self.sympy_expr
        if self.name not in NAMED_LOSSES:
            reason = loss_problem(self)
            if reason is not None:
                raise ValueError(reason)

    @cached_property
    def sympy_expr(self) -> sp.Expr:
        if not isinstance(self.name, str):
            raise ValueError(f"loss must be a name or an expression string, got {short_repr(self.name)}")
        if self.name in NAMED_LOSSES:
            return NAMED_LOSSES[self.name]
        expr = parse_expression(self.name, ["y", "f"], parameter="loss")
        if F not in expr.free_symbols:
            raise ValueError(f"loss={short_repr(self.name)} does not depend on the output f")
        return expr

    @cached_property
    def _derivs(self):
        return [compile_expression(e, [Y, F]) for e in derivatives(self.sympy_expr, F, 3, parameter="loss")]

    def __call__(self, y: np.ndarray, f: np.ndarray, order: int = 0) -> np.ndarray:
        """``∂^order loss / ∂f^order`` at ``(y, f)``, ``order`` in 0…3."""
        return self._derivs[order](y, f)

    @cached_property
    def _value_pair(self):
        exprs = derivatives(self.sympy_expr, F, 1, parameter="loss")[:2]
        return compile_expressions(exprs, [Y, F])

    def value_and_derivative(self, y: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(loss, ∂loss/∂f)`` at ``(y, f)`` from one evaluation (the same values as orders 0
        and 1 of the call)."""
        return self._value_pair(y, f)


# --------------------------------------------------------------------------- training
@dataclass(frozen=True)
class Init(_Frozen):
    """Initialisation of the first layer.

    ``Init.random(q0)``: columns of ``W⁰`` i.i.d. ``N(0, (q0/d) I_d)``, so
    ``W⁰ᵀW⁰ → q0 I_m`` and zero overlap with the target.
    ``Init.warm(M0, Q0)``: overlaps ``Θ*ᵀW⁰ = M0`` (``k×m``) and Gram
    ``Q0`` (``m×m``, positive semidefinite) of the part orthogonal to ``Θ*``.

    Parameters
    ----------
    kind : {"random", "warm"}, optional
        ``"random"`` (the default) for a random start of variance ``q0/d``,
        ``"warm"`` for a start with given overlaps ``M0`` and Gram ``Q0``.
    q0 : float, optional
        Squared norm of each column of ``W⁰`` (random start), a finite real
        number ``>= 0``; default 1.0. Not used (and not checked) by a warm start.
    M0 : matrix of float, optional
        Warm start only (required there): overlaps ``Θ*ᵀW⁰``, ``k×m``, finite.
        Stored as a tuple of row tuples. Its shape is checked against the
        target and network by :class:`Problem`.
    Q0 : matrix of float, optional
        Warm start only (required there): Gram ``m×m`` of the part of ``W⁰``
        orthogonal to ``Θ*``; finite, symmetric and positive semidefinite.
        Stored as a tuple of row tuples.

    Examples
    --------
    >>> from dmftsolve import Init
    >>> Init.random(0.5)
    Init(kind='random', q0=0.5, M0=None, Q0=None)
    >>> warm = Init.warm(M0=[[0.3, 0.0]], Q0=[[1.0, 0.0], [0.0, 1.0]])
    >>> warm.M0
    ((0.3, 0.0),)
    >>> warm.overlaps(k=1, m=2)
    array([[0.3, 0. ]])
    >>> Init.warm(M0=[[0.3]], Q0=[[-1.0]])
    Traceback (most recent call last):
        ...
    ValueError: Q0 must be positive semidefinite, got [[-1.0]]
    """

    kind: Literal["random", "warm"] = "random"
    q0: float = 1.0
    M0: tuple[tuple[float, ...], ...] | None = None
    Q0: tuple[tuple[float, ...], ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("random", "warm"):
            raise ValueError(f"init kind must be 'random' or 'warm', got {self.kind!r}")
        if self.kind == "random":
            object.__setattr__(self, "q0", check_real("q0", self.q0, nonnegative=True))
            return
        if self.M0 is None or self.Q0 is None:
            raise ValueError("a warm start needs both M0 (k×m) and Q0 (m×m)")
        M0 = check_matrix("M0", self.M0)
        Q0 = check_matrix("Q0", self.Q0)
        if not np.all(np.isfinite(M0)):
            raise ValueError(f"M0 must be finite, got {self.M0!r}")
        if not np.all(np.isfinite(Q0)):
            raise ValueError(f"Q0 must be finite, got {self.Q0!r}")
        if Q0.shape[0] != Q0.shape[1] or not np.allclose(Q0, Q0.T):
            raise ValueError(f"Q0 must be a symmetric square matrix, got {self.Q0!r}")
        if np.linalg.eigvalsh(Q0).min() < -1e-12 * max(1.0, np.abs(Q0).max()):
            raise ValueError(f"Q0 must be positive semidefinite, got {self.Q0!r}")
        object.__setattr__(self, "M0", tuple(map(tuple, M0.tolist())))
        object.__setattr__(self, "Q0", tuple(map(tuple, Q0.tolist())))

    @classmethod
    def random(cls, q0: float = 1.0) -> Init:
        return cls(kind="random", q0=q0)

    @classmethod
    def warm(cls, M0: Any, Q0: Any) -> Init:
        return cls(kind="warm", M0=M0, Q0=Q0)

    def overlaps(self, k: int, m: int) -> np.ndarray:
        """``M0`` as a ``k×m`` array (zeros for a random start)."""
        return np.zeros((k, m)) if self.kind == "random" else np.asarray(self.M0, dtype=float)

    def gram(self, m: int) -> np.ndarray:
        """``Q(0,0)``: the Gram of the part orthogonal to ``Θ*`` (``m×m``)."""
        return self.q0 * np.eye(m) if self.kind == "random" else np.asarray(self.Q0, dtype=float)


@dataclass(frozen=True)
class Training(_Frozen):
    """Full-batch gradient descent schedule.

    Parameters
    ----------
    eta : float
        Step size ``η > 0``.
    lam : float
        Ridge ``λ >= 0``.
    steps : int
        Number of GD steps ``T >= 0``.
    init : Init
        Initialisation; default ``Init.random(1.0)``.
    hold_zero : tuple of int
        Indices (0-based) of target directions whose overlap is held at zero
        (the "hard" subspace restricted dynamics used for theory checks).

    Examples
    --------
    >>> from dmftsolve import Training
    >>> Training(eta=0.05, steps=200)
    Training(eta=0.05, lam=0.0, steps=200, init=Init(kind='random', q0=1.0, M0=None, Q0=None), hold_zero=())
    >>> Training(hold_zero=[1, 0]).hold_zero  # sorted
    (0, 1)
    >>> Training(eta=0)
    Traceback (most recent call last):
        ...
    ValueError: eta must be > 0, got 0
    """

    eta: float = 0.1
    lam: float = 0.0
    steps: int = 100
    init: Init = field(default_factory=Init)
    hold_zero: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "eta", check_real("eta", self.eta, positive=True))
        object.__setattr__(self, "lam", check_real("lam", self.lam, nonnegative=True))
        object.__setattr__(self, "steps", check_integer("steps", self.steps, minimum=0, maximum=MAX_STEPS))
        if not isinstance(self.init, Init):
            raise ValueError(f"init must be an Init, got {self.init!r}")
        hz = tuple(check_integer("hold_zero entry", i, minimum=0) for i in self.hold_zero)
        if len(set(hz)) != len(hz):
            raise ValueError(f"hold_zero has repeated entries: {self.hold_zero!r}")
        object.__setattr__(self, "hold_zero", tuple(sorted(hz)))


# --------------------------------------------------------------------------- problem
@dataclass(frozen=True)
class Problem(_Frozen):
    """Target, network, loss and training schedule: one learning problem.

    Build with :meth:`Problem.build` for keyword convenience, or from the
    component objects. The methods below evaluate the per-sample loss and its
    derivatives in the pre-activations, vectorised over leading axes.

    Parameters
    ----------
    target : Target, optional
        The link ``y = h(V*, ε)``; default ``Target()`` (``z**2``). It fixes
        the latent dimension ``k``.
    network : Network, optional
        Activation, width ``m``, second-layer weights and bias; default
        ``Network()`` (one GeLU unit).
    loss : Loss, optional
        Per-sample loss; default ``Loss()`` (square loss).
    training : Training, optional
        GD schedule and initialisation; default ``Training()``
        (``eta=0.1, lam=0, steps=100``, random start with ``q0=1``).
        Its ``hold_zero`` indices must be ``< k``, and a warm start's ``M0``
        and ``Q0`` must have shapes ``(k, m)`` and ``(m, m)``.

    Raises
    ------
    ValueError
        If a component has the wrong type, the shapes above do not match, or
        the labels are too flat to be resolved in double precision.

    Examples
    --------
    >>> from dmftsolve import Loss, Network, Problem, Target, Training
    >>> p = Problem(Target("z**2"), Network("quad"), Loss(), Training(steps=10))
    >>> p.describe()
    'y=z**2, σ=quad, m=1, loss=square, η=0.1, λ=0, T=10, q0=1'
    >>> p.k, p.m
    (1, 1)
    >>> float(p.loss_value(y=1.0, V=[2.0]))  # (1 - 2**2)**2 / 2
    4.5
    """

    target: Target = field(default_factory=Target)
    network: Network = field(default_factory=Network)
    loss: Loss = field(default_factory=Loss)
    training: Training = field(default_factory=Training)

    def __post_init__(self) -> None:
        for name, cls in (("target", Target), ("network", Network), ("loss", Loss),
                          ("training", Training)):
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name} must be a {cls.__name__}, got {getattr(self, name)!r}")
        k, m = self.k, self.m
        # GD sees the labels in double precision: a label they do not resolve is a constant
        reason = resolution_problem(self.target)
        if reason is not None:
            raise ValueError(reason)
        bad = [i for i in self.training.hold_zero if i >= k]
        if bad:
            raise ValueError(f"hold_zero={self.training.hold_zero!r} names directions >= k={k}")
        init = self.training.init
        if init.kind == "warm":
            if np.asarray(init.M0).shape != (k, m):
                raise ValueError(f"M0 must have shape (k, m)=({k}, {m}), got {np.asarray(init.M0).shape}")
            if np.asarray(init.Q0).shape != (m, m):
                raise ValueError(f"Q0 must have shape (m, m)=({m}, {m}), got {np.asarray(init.Q0).shape}")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def build(
        cls,
        target: str = PROBLEM_DEFAULTS["target"],
        activation: str = PROBLEM_DEFAULTS["activation"],
        m: int = PROBLEM_DEFAULTS["m"],
        a: Sequence[float] | None = None,
        loss: str = PROBLEM_DEFAULTS["loss"],
        eta: float | None = None,
        lam: float = PROBLEM_DEFAULTS["lam"],
        steps: int = PROBLEM_DEFAULTS["steps"],
        q0: float = PROBLEM_DEFAULTS["q0"],
        M0: Any = None,
        Q0: Any = None,
        hold_zero: Sequence[int] = (),
        k: int | None = None,
        bias: bool = False,
    ) -> Problem:
        """Build a problem from flat keywords (the CLI uses this).

        A warm start is chosen when ``M0`` is given; ``Q0`` then defaults to
        ``q0 I_m``. ``bias=True`` adds a trained per-unit bias to the first
        layer (:class:`Network`).

        Parameters
        ----------
        target : str, optional
            The link, a sympy expression in ``z`` (or ``z1 … zk``) and
            optionally ``eps``; default ``"z**2 - 1"``. See :class:`Target`.
        activation : str, optional
            ``gelu`` (default), ``quad``, ``relu``, ``tanh``, ``erf``,
            ``linear``, or a sympy expression in ``r``. See :class:`Network`.
        m : int, optional
            Number of hidden units, ``1 <= m <= 1000000``; default 1.
        a : sequence of float, optional
            The ``m`` fixed second-layer weights; default all ones.
        loss : str, optional
            ``square`` (default), ``logistic``, or a sympy expression in ``y``
            and ``f``. See :class:`Loss`.
        eta : float, optional
            GD step size ``η > 0``; default by activation
            (:func:`dmftsolve.defaults.default_eta`: 0.5, or 0.05 for ``quad``).
        lam : float, optional
            Ridge ``λ >= 0``; default 0.0.
        steps : int, optional
            Number of GD steps, ``0 <= steps <= 10**9``; default 400.
        q0 : float, optional
            Random start: squared norm of each column of ``W⁰`` (``>= 0``,
            default 1.0). With ``M0`` and no ``Q0``, the warm start's Gram is
            ``q0 I_m``.
        M0 : matrix of float, optional
            Initial overlaps ``Θ*ᵀW⁰`` (``k×m``). Given, it selects a warm
            start (:meth:`Init.warm`); default None, a random start.
        Q0 : matrix of float, optional
            Warm start: Gram (``m×m``, symmetric positive semidefinite) of the
            part of ``W⁰`` orthogonal to ``Θ*``; default ``q0 I_m``. Needs
            ``M0`` (a ``ValueError`` otherwise: a random start has no ``Q0``).
        hold_zero : sequence of int, optional
            Indices (0-based, ``< k``, no repeats) of target directions whose
            overlap is held at zero; default none. See :class:`Training`.
        k : int, optional
            Latent dimension; default the largest index the target uses.
        bias : bool, optional
            Whether the first layer has a trained per-unit bias; default False.

        Returns
        -------
        Problem
            The validated problem.

        Raises
        ------
        ValueError
            One line naming the first keyword that is unfit.

        Examples
        --------
        >>> from dmftsolve import Problem
        >>> p = Problem.build(target="z**2 - 1", activation="gelu", m=2)
        >>> p.network
        Network(activation='gelu', m=2, a=(1.0, 1.0), bias=False)
        >>> p.describe()
        'y=z**2 - 1, σ=gelu, m=2, loss=square, η=0.5, λ=0, T=400, q0=1'
        >>> Problem.build(target="z**2 - 1", m=2, M0=[[0.5, 0.0]]).training.init
        Init(kind='warm', q0=1.0, M0=((0.5, 0.0),), Q0=((1.0, 0.0), (0.0, 1.0)))
        >>> Problem.build(m=0)
        Traceback (most recent call last):
            ...
        ValueError: m must be >= 1, got 0
        """
        m = check_integer("m", m, minimum=1, maximum=MAX_M)
        a = None if a is None else check_sequence("a", a)
        hold_zero = check_sequence("hold_zero", hold_zero)
        if M0 is None and Q0 is not None:
            raise ValueError(f"Q0 is the Gram of a warm start and needs M0 (the initial overlaps); got "
                             f"Q0={Q0!r} without M0")
        if M0 is not None:
            init = Init.warm(M0, Q0 if Q0 is not None else check_real("q0", q0, nonnegative=True) * np.eye(m))
        else:
            init = Init.random(q0)
        return cls(
            target=Target(target, k=k),
            network=Network(activation, m, a, bias=bias),
            loss=Loss(loss),
            training=Training(eta=default_eta(activation) if eta is None else eta, lam=lam, steps=steps,
                              init=init, hold_zero=hold_zero),
        )

    def replace(self, **changes: Any) -> Problem:
        """A copy with flat keywords of :meth:`build` changed (e.g. ``steps=500``).

        ``M0=None`` alone turns a warm start into a random one (its ``Q0`` is dropped).
        """
        if "M0" in changes and changes["M0"] is None and "Q0" not in changes:
            changes = {**changes, "Q0": None}
        return Problem.build(**{**self.flat(), **changes})

    def flat(self) -> dict[str, Any]:
        """The flat keywords of :meth:`build` that rebuild this problem.

        ``bias`` is listed only when True, so that problems without a bias
        keep the keys (and JSON) they had before the option existed.
        """
        init = self.training.init
        flat = {
            "target": self.target.expr,
            "activation": self.network.activation,
            "m": self.m,
            "a": list(self.network.a),
            "loss": self.loss.name,
            "eta": self.training.eta,
            "lam": self.training.lam,
            "steps": self.training.steps,
            "q0": init.q0,
            "M0": None if init.M0 is None else [list(r) for r in init.M0],
            "Q0": None if init.Q0 is None else [list(r) for r in init.Q0],
            "hold_zero": list(self.training.hold_zero),
            "k": self.k,
        }
        if self.network.bias:
            flat["bias"] = True
        return flat

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (same keys as :meth:`build`)."""
        return self.flat()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Problem:
        """Rebuild a problem from :meth:`to_dict` output (the keywords of :meth:`build`).

        Raises
        ------
        ValueError
            If ``data`` is not a mapping with string keys, or names a key
            :meth:`build` does not take.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"data must be a mapping of build() keywords, got {type(data).__name__}")
        allowed = set(inspect.signature(cls.build).parameters)
        unknown = sorted(repr(k)[:40] for k in data if not isinstance(k, str) or k not in allowed)
        if unknown:
            raise ValueError(f"data has unknown key(s) {', '.join(unknown[:5])}; allowed: {sorted(allowed)}")
        return cls.build(**dict(data))

    # ------------------------------------------------------------------ sizes
    @property
    def k(self) -> int:
        """Latent dimension."""
        return int(self.target.k)  # type: ignore[arg-type]

    @property
    def m(self) -> int:
        """Network width."""
        return self.network.m

    # ------------------------------------------------------------------ evaluation
    def labels(self, z: np.ndarray, eps: np.ndarray | float = 0.0) -> np.ndarray:
        """``y = h(z, ε)`` for ``z`` of shape ``(..., k)``."""
        return self.target(z, eps)

    def output(self, V: np.ndarray) -> np.ndarray:
        """Network output ``f = Σ_j a_j σ(V_j)`` for ``V`` of shape ``(..., m)``."""
        V = self._check_V(V)
        return self.network.sigma(V) @ self.network.a_array

    def loss_value(self, y: np.ndarray, V: np.ndarray) -> np.ndarray:
        """Per-sample loss ``ℓ(y, V)``, shape ``(...)``."""
        return self.loss(y, self.output(V))

    def grad(self, y: np.ndarray, V: np.ndarray) -> np.ndarray:
        """``g = ∇_V ℓ(y, V)``, shape ``(..., m)``."""
        V = self._check_V(V)
        a = self.network.a_array
        lf = self.loss(y, self.network.sigma(V) @ a, 1)
        return lf[..., None] * a * self.network.sigma(V, 1)

    def loss_and_grad(self, y: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ℓ(y, V), ∇_V ℓ(y, V))`` from one evaluation of the network output (what
        :meth:`loss_value` and :meth:`grad` give apart), shapes ``(...)`` and ``(..., m)``."""
        V = self._check_V(V)
        a = self.network.a_array
        s0, s1 = self.network.sigma_and_derivative(V)
        value, lf = self.loss.value_and_derivative(y, s0 @ a)
        return value, lf[..., None] * a * s1

    def loss_and_grad_rows(self, y: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`loss_and_grad` with the neurons on the first axis: ``V`` of shape ``(m, n)``
        gives ``(ℓ, g)`` of shapes ``(n,)`` and ``(m, n)`` (the same values as
        ``loss_and_grad(y, V.T)`` with ``g`` transposed). The DMFT stores its paths this way;
        with C-ordered rows every elementwise step runs on contiguous memory, which made
        the GeLU gradient of 8·10⁴ paths at width 2 about 1.2× faster than through the
        transposed view, and ``g`` comes out C-ordered.

        Parameters
        ----------
        y : numpy.ndarray
            Labels, shape ``(n,)``.
        V : numpy.ndarray
            Pre-activations, shape ``(m, n)``.

        Returns
        -------
        value, g : numpy.ndarray
            ``ℓ(y, V)`` of shape ``(n,)`` and ``∇_V ℓ`` of shape ``(m, n)``.
        """
        V = np.asarray(V, dtype=float)
        if V.ndim != 2 or V.shape[0] != self.m:
            raise ValueError(f"V must have shape (m={self.m}, n), got shape {V.shape}")
        a = self.network.a_array
        s0, s1 = self.network.sigma_and_derivative(V)
        value, lf = self.loss.value_and_derivative(y, a @ s0)
        return value, lf * a[:, None] * s1

    def hess(self, y: np.ndarray, V: np.ndarray) -> np.ndarray:
        """``D = ∇²_V ℓ(y, V)``, shape ``(..., m, m)``, symmetric."""
        V = self._check_V(V)
        a, net = self.network.a_array, self.network
        f = net.sigma(V) @ a
        u = a * net.sigma(V, 1)
        D = self.loss(y, f, 2)[..., None, None] * u[..., :, None] * u[..., None, :]
        diag = self.loss(y, f, 1)[..., None] * a * net.sigma(V, 2)
        idx = np.arange(self.m)
        D[..., idx, idx] += diag
        return D

    def hess_diag_and_rank1(self, y: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``D = diag(c) + w u uᵀ`` as ``(c, w, u)``: cheap matrix-vector products with ``D``."""
        V = self._check_V(V)
        a, net = self.network.a_array, self.network
        f = net.sigma(V) @ a
        return self.loss(y, f, 1)[..., None] * a * net.sigma(V, 2), self.loss(y, f, 2), a * net.sigma(V, 1)

    def third(self, y: np.ndarray, V: np.ndarray) -> np.ndarray:
        """``∂³ℓ/∂V_j∂V_k∂V_l``, shape ``(..., m, m, m)``, symmetric."""
        V = self._check_V(V)
        a, net = self.network.a_array, self.network
        f = net.sigma(V) @ a
        l1, l2, l3 = (self.loss(y, f, o)[..., None] for o in (1, 2, 3))
        u = a * net.sigma(V, 1)
        u2 = a * net.sigma(V, 2)
        u3 = a * net.sigma(V, 3)
        m = self.m
        eye = np.eye(m)
        out = (l3[..., None, None] * u[..., :, None, None] * u[..., None, :, None] * u[..., None, None, :])
        # l2 * (δ_jk u2_j u_l + δ_jl u2_j u_k + δ_kl u2_k u_j)
        t = (l2 * u2)[..., :, None] * eye  # (..., m, m): δ_jk u2_j
        out += t[..., :, :, None] * u[..., None, None, :]
        out += t[..., :, None, :] * u[..., None, :, None]
        out += t[..., None, :, :] * u[..., :, None, None]
        idx = np.arange(m)
        out[..., idx, idx, idx] += (l1 * u3)
        return out

    def _check_V(self, V: np.ndarray) -> np.ndarray:
        V = np.asarray(V, dtype=float)
        if V.ndim == 0 or V.shape[-1] != self.m:
            raise ValueError(f"V must have last axis of length m={self.m}, got shape {V.shape}")
        return V

    def describe(self) -> str:
        """One line for tables and progress bars."""
        t = self.training
        init = f"q0={t.init.q0:g}" if t.init.kind == "random" else "warm"
        hz = f", hold_zero={list(t.hold_zero)}" if t.hold_zero else ""
        bias = ", bias" if self.network.bias else ""
        return (
            f"y={self.target.expr}, σ={self.network.activation}, m={self.m}, loss={self.loss.name}, "
            f"η={t.eta:g}, λ={t.lam:g}, T={t.steps}, {init}{hz}{bias}"
        )

    @property
    def bias(self) -> bool:
        """Whether the first layer has a trained bias (``network.bias``)."""
        return self.network.bias


def as_target(value: Target | Problem | str, name: str = "target_or_problem") -> Target:
    """The :class:`Target` that ``value`` describes: itself, a problem's target, or a parsed string.

    Parameters
    ----------
    value : Target, Problem or str
        A target, a problem (which contributes its target) or an expression
        string (parsed as ``Target(value)``).
    name : str, optional
        The parameter's name in the error message; default ``"target_or_problem"``.

    Returns
    -------
    Target

    Raises
    ------
    ValueError
        If ``value`` is none of these, or the string is not an admissible target.

    Examples
    --------
    >>> from dmftsolve import Problem
    >>> from dmftsolve.problem import as_target
    >>> as_target("z1*z2").k
    2
    >>> as_target(Problem.build(target="abs(z)")).expr
    'abs(z)'
    >>> as_target(3)
    Traceback (most recent call last):
        ...
    ValueError: target_or_problem must be a Target, a Problem or an expression string, got 3
    """
    if isinstance(value, Problem):
        return value.target
    if isinstance(value, Target):
        return value
    if isinstance(value, str):
        return Target(value)
    raise ValueError(f"{name} must be a Target, a Problem or an expression string, got {value!r}")
