"""Convention hunt: which set-up changes move the finite-d GD transition towards the paper's δ*?

Purpose
-------
With the library's conventions (``docs/theory.md`` §1: x ~ N(0, I_d), y = z², single neuron
f = σ(wᵀx), a = 1 fixed, no bias, loss (y − f)²/2, full-batch GD from w0 ~ N(0, I/d)),
the simulator's 50 % success point of a GeLU neuron is δ_50 ≈ 9–12 (d = 250–1000) and of
σ(u) = u² ("quad") ≈ 5, while Montanari & Wang (arXiv:2602.01434) report sharp transitions
at δ* ≈ 6.0 (GeLU) and ≈ 3.6 (quad). This script runs the same GD under changed
conventions and reports which ones move δ_50.

Variants (GeLU, η = 0.5, 1000 steps unless said; success = final |cos(w, θ*)| > 1/2)
-------------------------------------------------------------------------------------
* V0  baseline;
* V1  loss (y − f)² (= V0 with η doubled);
* V2  η = 1 (same trajectory as V1) and η = 2;
* V3  longer training: the V0 runs continued to 2000 and 4000 steps (V0 is their prefix);
* V4  centred target y = z² − 1;
* V5  trained neuron bias f = σ(wᵀx + b), b0 = 0, with y = z² (V5a) and y = z² − 1 (V5b);
* V6  trained second-layer scalar f = a·σ(wᵀx + [b]), a0 = 1: a only, y = z² (V6a);
      a and b, y = z² (V6b); a and b, y = z² − 1 (V6c);
* V7  small initialisation q0 = 0.1 (an extra convention change);
* quad (η = 0.1, 2000 steps): Q0 baseline, Q1 loss (y − f)², Q3 longer training (the Q0 runs
  continued to 4000 and 6000 steps), and the quad analogue of every GeLU variant among
  V4–V7 whose d = 500 δ_50 is at least 1 below V0's (at most three, best first).

V0–V4, V7 and the quad variants without trained a/b use the library simulator
(``dmftsolve.simulation.simulator.simulate``, float32 data, one BLAS thread). V5/V6 need parameters the
library cannot express; they use :func:`custom_trial`, a vectorised full-batch GD built on the
library's one-pass kernel ``blocked_pass``, drawing data, initialisation and test set from the
same seed streams as the library. It is first checked against the library on the baseline
(trained a and b switched off, same seeds): the report shows both means with standard errors.

Seeds: at input dimension d the root is ``SeedSequence(7000 + d)``; sample ratio δ uses its
child with spawn key ``round(1000·δ)`` and trial j that child's j-th child (as ``simulate``
spawns them). Every variant therefore sees the same data and initialisations at a given
(d, δ, trial): the comparisons between variants are paired.

Stages: (1) custom-GD check; (2) screen at d = 500, 8 trials, δ ∈ {4, 5, 6, 8, 10, 13} (GeLU)
and {3, 3.6, 4.2, 5, 6, 8} (quad); (3) refine at d = 1000, 8 trials, on a 5-point grid around
each d = 500 δ_50, for V0, the two GeLU variants with the lowest d = 500 δ_50 (not counting
V3), Q0 and the best other quad variant; (4) the paper's Figure 2 set-up (GeLU, δ = 17.5,
d = 5000 if the time budget allows, else d = 2000, one run, 1500 steps) for V0 and for the
GeLU variant whose δ_50 at the largest refined d is closest to 6.0; (5) with ``--extend``, run
afterwards on the saved JSON: d = 2000, 6 trials, on a 4-point grid around the d = 1000 δ_50,
for the GeLU and the quad variant with the lowest d = 1000 δ_50, then V0 and Q0. A wall-time
budget (``--budget`` minutes, default 68) skips jobs that would not fit; skipped jobs are listed.

Run
---
``python validation/investigations/convention_hunt.py [--quick] [--budget MINUTES]``;
``python validation/investigations/convention_hunt.py --extend --budget 22`` adds stage 5 to the saved JSON;
``python validation/investigations/convention_hunt.py --fig2 V5b --budget 8`` adds the Figure 2 set-up for the
listed GeLU variants (used for V5b, whose aligned optimum 0.597 is the paper's plateau);
``python validation/investigations/convention_hunt.py --report`` only rebuilds the report from the JSON.

On one core the full run took 24 minutes, ``--extend`` about 14 and ``--fig2 V5b`` about 5;
each writes ``validation/investigations/results/convention_hunt.{md,json,png}``.
``--quick`` (under a minute) runs a few variants at d = 100 with short training and prints
the report to stdout without writing any file.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import ndtr
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.results import jsonable
from dmftsolve.simulation.simulator import blocked_pass, default_block_rows, simulate

OUT = Path(__file__).resolve().parent / "results"
PAPER = {"gelu": 6.0, "quad": 3.6}
SUCCESS = 0.5
RECORD_EVERY = 10
TRAJ_EVERY = 50  # stride of the cosine trajectories stored in the JSON
RATE0 = 4.6e-10  # initial guess: seconds per (sample × coordinate × step) of one GD step, one core

Array = np.ndarray
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# --------------------------------------------------------------------------- variants
@dataclass(frozen=True)
class Variant:
    """One set of conventions. ``loss_scale`` c gives the loss c·(y − f)²."""

    key: str
    label: str
    activation: str = "gelu"
    target: str = "z**2"
    loss_scale: float = 0.5
    eta: float = 0.5
    steps: int = 1000
    q0: float = 1.0
    bias: bool = False
    train_a: bool = False
    checkpoints: tuple[int, ...] = ()  # extra steps at which success is also evaluated

    @property
    def custom(self) -> bool:
        """Whether the library cannot express this variant (trained b or a)."""
        return self.bias or self.train_a

    @property
    def loss_expr(self) -> str:
        if self.loss_scale == 0.5:
            return "square"
        if self.loss_scale == 1.0:
            return "(y - f)**2"
        return f"{self.loss_scale!r}*(y - f)**2"

    def problem(self) -> Problem:
        return Problem.build(target=self.target, activation=self.activation, loss=self.loss_expr,
                             eta=self.eta, steps=self.steps, q0=self.q0)

    def describe(self) -> str:
        loss = {0.5: "(y−f)²/2", 1.0: "(y−f)²"}.get(self.loss_scale, f"{self.loss_scale:g}(y−f)²")
        parts = [f"σ={self.activation}", f"y={self.target.replace('**', '^')}", f"loss={loss}",
                 f"η={self.eta:g}", f"T={self.steps}", f"q0={self.q0:g}"]
        if self.bias:
            parts.append("trained b")
        if self.train_a:
            parts.append("trained a")
        return ", ".join(parts)


def gelu_variants(quick: bool) -> list[Variant]:
    long = (1000, 2000, 4000)
    base = Variant("V0", "baseline", steps=long[-1], checkpoints=long)
    vs = [
        base,
        Variant("V1", "loss (y−f)²", loss_scale=1.0),
        Variant("V2a", "η = 1", eta=1.0),
        Variant("V2b", "η = 2", eta=2.0),
        Variant("V4", "y = z² − 1", target="z**2 - 1"),
        Variant("V5a", "trained bias, y = z²", bias=True),
        Variant("V5b", "trained bias, y = z² − 1", target="z**2 - 1", bias=True),
        Variant("V6a", "trained a, y = z²", train_a=True),
        Variant("V6b", "trained a + bias, y = z²", train_a=True, bias=True),
        Variant("V6c", "trained a + bias, y = z² − 1", target="z**2 - 1", train_a=True, bias=True),
        Variant("V7", "q0 = 0.1", q0=0.1),
    ]
    if quick:
        vs = [replace(base, steps=400, checkpoints=(200, 400))] + [
            replace(v, steps=200) for v in vs if v.key in ("V1", "V4", "V5b", "V6c")]
    return vs


def quad_base(quick: bool) -> list[Variant]:
    long = (200, 400) if quick else (2000, 4000, 6000)
    steps = 200 if quick else 2000
    return [Variant("Q0", "baseline", activation="quad", eta=0.1, steps=long[-1], checkpoints=long),
            Variant("Q1", "loss (y−f)²", activation="quad", eta=0.1, steps=steps, loss_scale=1.0)]


def quad_analogue(v: Variant, steps: int) -> Variant:
    return replace(v, key="Q" + v.key[1:], activation="quad", eta=0.1, steps=steps, checkpoints=())


def row_key(v: Variant, at: int) -> str:
    """Name of the table row of variant ``v`` evaluated at step ``at``."""
    if not v.checkpoints or at == min(v.checkpoints):
        return v.key
    if v.key in ("V0", "Q0"):
        return f"{v.key[0]}3 (T={at})"
    return f"{v.key} (T={at})"


def row_label(v: Variant, at: int) -> str:
    if v.key in ("V0", "Q0") and v.checkpoints and at != min(v.checkpoints):
        return f"longer training, {at} steps"
    return v.label


def seed_for(d: int, delta: float) -> np.random.SeedSequence:
    return np.random.SeedSequence(7000 + d, spawn_key=(int(round(1000 * delta)),))


def child(ss: np.random.SeedSequence, i: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, i), pool_size=ss.pool_size)


# --------------------------------------------------------------------------- custom GD
def _gelu(u: Array) -> Array:
    return u * ndtr(u)


def _dgelu(u: Array) -> Array:
    return ndtr(u) + u * INV_SQRT_2PI * np.exp(-0.5 * u * u)


def _quad(u: Array) -> Array:
    return u * u


def _dquad(u: Array) -> Array:
    return 2.0 * u


ACT: dict[str, tuple[Callable[[Array], Array], Callable[[Array], Array]]] = {
    "gelu": (_gelu, _dgelu), "quad": (_quad, _dquad)}


def recorded_steps(T: int, every: int) -> Array:
    s = list(range(0, T + 1, every))
    if s[-1] != T:
        s.append(T)
    return np.asarray(s, dtype=int)


def custom_trial(v: Variant, d: int, n: int, ss: np.random.SeedSequence,
                 record_every: int = RECORD_EVERY) -> dict[str, Any]:
    """Full-batch GD on (w, [b], [a]) for f = a·σ(wᵀx + b), loss c·(y − f)², θ* = e_1.

    Data, initialisation and test set come from the same streams as the library's
    ``simulate`` trial with seed ``ss`` (children 0, 1, 2); with b and a frozen at 0 and 1 this
    is the library's GD up to float round-off. Each step is one ``blocked_pass`` over the
    float32 ``X``; the sums giving ∂L/∂b and ∂L/∂a are accumulated block by block in the same
    pass. The test loss uses the exact law of (z, wᵀx) for fresh x: (z, w_1 z + ‖w_⊥‖ ξ).
    """
    t0 = time.perf_counter()
    prob = v.problem()
    sig, dsig = ACT[v.activation]
    rng_data, rng_init, rng_test = (np.random.default_rng(child(ss, i)) for i in range(3))
    X = np.empty((n, d), dtype=np.float32)
    rb = default_block_rows(d, 8)
    for start in range(0, n, rb):
        X[start:start + rb] = rng_data.standard_normal((min(rb, n - start), d))
    eps = rng_data.standard_normal(n)
    y = np.asarray(prob.labels(np.asarray(X[:, :1], dtype=np.float64), eps), dtype=np.float64)
    w = rng_init.standard_normal((d, 1)) * math.sqrt(v.q0 / d)
    zt = rng_test.standard_normal(n)
    xit = rng_test.standard_normal(n)
    yt = np.asarray(prob.labels(zt[:, None], rng_test.standard_normal(n)), dtype=np.float64)
    c, eta, T = v.loss_scale, v.eta, v.steps
    state = {"a": 1.0, "b": 0.0}
    acc = np.zeros(2)

    def rows(start: int, stop: int, Vb: Array) -> Array:
        u = Vb[:, 0].astype(np.float64) + state["b"]
        s = sig(u)
        r = 2.0 * c * (state["a"] * s - y[start:stop])  # ∂ℓ/∂f
        g = r * state["a"] * dsig(u)  # ∂ℓ/∂(wᵀx + b)
        acc[0] += g.sum()
        acc[1] += (r * s).sum()
        return g[:, None]

    steps = recorded_steps(T, record_every)
    R = len(steps)
    rec = {int(s): i for i, s in enumerate(steps)}
    out = {name: np.full(R, np.nan) for name in ("cosine", "train_loss", "test_loss", "a", "b")}
    V = np.empty((n, 1), dtype=np.float32)
    status = "success"
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(T + 1):
            acc[:] = 0.0
            gw = blocked_pass(X, w, rows, V_out=V) / n
            gb, ga = acc / n
            i = rec.get(t)
            if i is not None:
                a, b = state["a"], state["b"]
                f = a * sig(V[:, 0].astype(np.float64) + b)
                w1, wp = float(w[0, 0]), float(np.linalg.norm(w[1:]))
                ft = a * sig(zt * w1 + xit * wp + b)
                out["train_loss"][i] = c * float(np.mean((y - f) ** 2))
                out["test_loss"][i] = c * float(np.mean((yt - ft) ** 2))
                out["cosine"][i] = abs(w1) / math.hypot(w1, wp) if math.hypot(w1, wp) > 0 else 0.0
                out["a"][i], out["b"][i] = a, b
                vals = [out[k][i] for k in out]
                if not all(math.isfinite(x) for x in vals) or not np.all(np.isfinite(gw)):
                    out["cosine"][i] = np.nan
                    status = "nonfinite"
                    break
            w = w - eta * gw
            if v.bias:
                state["b"] -= eta * float(gb)
            if v.train_a:
                state["a"] -= eta * float(ga)
    out["steps"] = steps
    out["status"] = status
    out["elapsed"] = time.perf_counter() - t0
    return out


def library_trials(v: Variant, d: int, delta: float, trials: int,
                   record_every: int = RECORD_EVERY) -> list[dict[str, Any]]:
    """``simulate`` on the variant's problem; one dict per trial like :func:`custom_trial`."""
    run = simulate(v.problem(), d, delta, seed=seed_for(d, delta), trials=trials,
                   record_every=record_every, dtype=np.float32, throw=False, blas_threads=1)
    out = []
    for j in range(trials):
        out.append({"steps": run.steps, "cosine": run.cosine[j], "train_loss": run.train_loss[j],
                    "test_loss": run.test_loss[j], "a": None, "b": None,
                    "status": run.diagnostics["trial_status"][j],
                    "elapsed": run.diagnostics["trial_elapsed"][j]})
    return out


def run_trials(v: Variant, d: int, delta: float, trials: int, force_custom: bool = False,
               record_every: int = RECORD_EVERY) -> list[dict[str, Any]]:
    if v.custom or force_custom:
        n = int(round(delta * d))
        root = seed_for(d, delta)
        return [custom_trial(v, d, n, child(root, j), record_every) for j in range(trials)]
    return library_trials(v, d, delta, trials, record_every)


# --------------------------------------------------------------------------- statistics
def _at(tr: dict[str, Any], name: str, step: int) -> float:
    idx = np.flatnonzero(np.asarray(tr["steps"]) == step)
    x = tr[name]
    return math.nan if x is None or not idx.size else float(x[idx[0]])


def _mean_se(x: list[float]) -> tuple[float | None, float | None]:
    a = np.asarray([v for v in x if math.isfinite(v)], dtype=float)
    if not a.size:
        return None, None
    return float(a.mean()), (float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else None)


def escape_step(tr: dict[str, Any], upto: int) -> float:
    """First recorded step ≤ ``upto`` with cosine > 1/2 (NaN if none)."""
    s, c = np.asarray(tr["steps"]), np.asarray(tr["cosine"])
    idx = np.flatnonzero((s <= upto) & np.isfinite(c) & (c > SUCCESS))
    return float(s[idx[0]]) if idx.size else math.nan


def summarise(trials: list[dict[str, Any]], at: int) -> dict[str, Any]:
    """Success count, binomial s.e., escape steps and losses of successful runs at step ``at``."""
    cos = [_at(t, "cosine", at) for t in trials]
    ok = [math.isfinite(c) and c > SUCCESS for c in cos]
    k, m = int(sum(ok)), len(trials)
    p = k / m
    esc = [escape_step(t, at) for t in trials]
    fin = [e for e in esc if math.isfinite(e)]
    tr_ok = [_at(t, "train_loss", at) for t, o in zip(trials, ok, strict=True) if o]
    te_ok = [_at(t, "test_loss", at) for t, o in zip(trials, ok, strict=True) if o]
    trm, trs = _mean_se(tr_ok)
    tem, tes = _mean_se(te_ok)
    return {"successes": k, "trials": m, "rate": p, "stderr": math.sqrt(p * (1 - p) / m),
            "final_cosine": cos, "escape_steps": esc,
            "median_escape": float(np.median(fin)) if fin else None,
            "train_loss_success": trm, "train_loss_success_se": trs,
            "test_loss_success": tem, "test_loss_success_se": tes,
            "nonfinite": sum(t["status"] != "success" for t in trials)}


def delta_50(deltas: list[float], rates: list[float]) -> tuple[float | None, str]:
    """δ where the success rate first reaches 1/2 (linear interpolation) and a display string."""
    for i, r in enumerate(rates):
        if r >= 0.5:
            if i == 0:
                return float(deltas[0]), f"≤{deltas[0]:g}"
            x0, x1, r0, r1 = deltas[i - 1], deltas[i], rates[i - 1], rates[i]
            v = float(x0 + (0.5 - r0) * (x1 - x0) / (r1 - r0))
            return v, f"{v:.2f}"
    return None, f">{deltas[-1]:g}"


def trial_record(tr: dict[str, Any]) -> dict[str, Any]:
    """What the JSON keeps of one trial: finals, escape step and a strided cosine trajectory."""
    s = np.asarray(tr["steps"])
    keep = (s % TRAJ_EVERY == 0) | (s == s[-1])
    rec = {"status": tr["status"], "elapsed": tr["elapsed"], "traj_steps": s[keep].tolist(),
           "cosine": np.round(np.asarray(tr["cosine"])[keep], 4).tolist()}
    for name in ("train_loss", "test_loss", "a", "b"):
        if tr[name] is not None:
            x = np.asarray(tr[name])
            last = np.flatnonzero(np.isfinite(x))
            rec[f"final_{name}"] = float(x[last[-1]]) if last.size else None
    return rec


# --------------------------------------------------------------------------- aligned optimum
def aligned_optimum(v: Variant) -> dict[str, float]:
    """min over (r, [b], [a]) of c·E[(h(z) − a σ(r z + b))²], z ~ N(0, 1) (Gauss–Hermite, 160 nodes)."""
    z, wq = np.polynomial.hermite_e.hermegauss(160)
    wq = wq / wq.sum()
    h = np.asarray(v.problem().labels(z[:, None]), dtype=float)
    sig = ACT[v.activation][0]

    def risk(p: Array) -> float:
        r = p[0]
        b = p[1] if v.bias else 0.0
        a = p[2] if v.train_a else 1.0
        return v.loss_scale * float(wq @ (h - a * sig(r * z + b)) ** 2)

    best = None
    for r0 in (0.5, 1.0, 1.5, 2.5):
        for b0 in ((-1.0, 0.0, 1.0) if v.bias else (0.0,)):
            res = minimize(risk, np.array([r0, b0, 1.0]), method="Nelder-Mead",
                           options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
            if best is None or res.fun < best.fun:
                best = res
    assert best is not None
    p = best.x
    return {"loss": float(best.fun), "r": float(abs(p[0])), "b": float(p[1]) if v.bias else 0.0,
            "a": float(p[2]) if v.train_a else 1.0}


# --------------------------------------------------------------------------- driver
class Budget:
    """Wall-clock budget with a cost model ``seconds ≈ rate · n · d · steps · trials``."""

    def __init__(self, minutes: float) -> None:
        self.t0 = time.perf_counter()
        self.limit = 60.0 * minutes
        self.rate = RATE0
        self.skipped: list[str] = []

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def estimate(self, work: float) -> float:
        return self.rate * work

    def fits(self, work: float, reserve: float = 0.0) -> bool:
        return self.elapsed() + self.estimate(work) + reserve <= self.limit

    def update(self, work: float, seconds: float) -> None:
        if work > 0 and seconds > 0:
            self.rate = 0.5 * self.rate + 0.5 * seconds / work


class Hunt:
    def __init__(self, quick: bool, budget_min: float) -> None:
        self.quick = quick
        self.budget = Budget(budget_min)
        self.d_screen = 100 if quick else 500
        self.d_refine = 200 if quick else 1000
        self.trials = 3 if quick else 8
        self.grid = {"gelu": [4.0, 8.0, 13.0] if quick else [4.0, 5.0, 6.0, 8.0, 10.0, 13.0],
                     "quad": [3.0, 5.0, 8.0] if quick else [3.0, 3.6, 4.2, 5.0, 6.0, 8.0]}
        self.fig2_reserve = 0.0 if quick else 660.0
        self.res: dict[str, Any] = {
            "settings": {"quick": quick, "budget_minutes": budget_min, "success": "final cosine > 0.5",
                         "record_every": RECORD_EVERY, "trajectory_stride_in_json": TRAJ_EVERY,
                         "dtype": "float32", "blas_threads": 1, "paper": PAPER,
                         "seeds": "root SeedSequence(7000 + d); δ child spawn_key round(1000·δ); "
                                  "trial j its j-th child; data/init/test children 0/1/2",
                         "d_screen": self.d_screen, "d_refine": self.d_refine, "trials": self.trials,
                         "grids_screen": self.grid},
            "variants": {}, "sweeps": {}, "check": None, "fig2": {}, "aligned_optimum": {},
            "skipped": self.budget.skipped, "log": []}
        self.prev_elapsed = 0.0
        self.d_extend = 300 if quick else 2000
        self.trials_extend = 3 if quick else 6

    # ------------------------------------------------------------------ helpers
    def log(self, msg: str) -> None:
        line = f"[{self.budget.elapsed():6.0f}s] {msg}"
        self.res["log"].append(line)
        print(line, flush=True)

    def save(self) -> None:
        self.res["elapsed"] = self.prev_elapsed + self.budget.elapsed()
        if not self.quick:
            OUT.mkdir(exist_ok=True)
            (OUT / "convention_hunt.json").write_text(json.dumps(jsonable(self.res), indent=1))

    def sweep(self, v: Variant, d: int, deltas: list[float], stage: str) -> dict[str, Any] | None:
        """Run ``trials`` runs of ``v`` at each δ; store per-row summaries under ``sweeps``."""
        trials = self.trials
        work = sum(round(x * d) * d for x in deltas) * v.steps * trials * (1.15 if v.custom else 1.0)
        reserve = self.fig2_reserve if stage != "fig2" else 0.0
        name = f"{v.key} d={d}"
        old = self.res["sweeps"].get(f"{v.key}|{d}")
        if (old and list(old["deltas"]) == list(deltas) and old["trials"] == trials
                and old["steps"] == v.steps):
            self.log(f"reuse {name} from the saved JSON")
            return old
        if not self.budget.fits(work, reserve):
            self.budget.skipped.append(f"{stage}: {name} (estimated {self.budget.estimate(work):.0f}s)")
            self.log(f"skip {name}: estimated {self.budget.estimate(work):.0f}s does not fit")
            return None
        self.res["variants"][f"{v.key}|{d}"] = {**asdict(v), "description": v.describe(),
                                                "engine": "custom" if v.custom else "library simulate"}
        t0 = time.perf_counter()
        per_delta = []
        for x in deltas:
            trs = run_trials(v, d, x, trials)
            per_delta.append(trs)
        wall = time.perf_counter() - t0
        self.budget.update(work, wall)
        ats = sorted(set(v.checkpoints) | {v.steps})
        entry = {"variant": v.key, "d": d, "stage": stage, "deltas": deltas, "trials": trials,
                 "steps": v.steps, "wall": wall, "rows": {},
                 "seeds": {f"{x:g}": {"entropy": 7000 + d, "spawn_key": [int(round(1000 * x))]}
                           for x in deltas},
                 "runs": {f"{x:g}": [trial_record(t) for t in trs]
                          for x, trs in zip(deltas, per_delta, strict=True)}}
        for at in ats:
            rows = [summarise(trs, at) for trs in per_delta]
            d50, d50s = delta_50(deltas, [r["rate"] for r in rows])
            entry["rows"][row_key(v, at)] = {"label": row_label(v, at), "at_step": at, "per_delta": rows,
                                             "delta_50": d50, "delta_50_str": d50s, "deltas": deltas,
                                             "description": replace(v, steps=at).describe()}
        self.res["sweeps"][f"{v.key}|{d}"] = entry
        self.budget.skipped[:] = [x for x in self.budget.skipped if not x.startswith(f"{stage}: {name} ")]
        summary = "; ".join(f"{k}: δ50 {r['delta_50_str']} "
                            f"{[p['successes'] for p in r['per_delta']]}" for k, r in entry["rows"].items())
        self.log(f"{name} ({wall:.0f}s): {summary}")
        self.save()
        return entry

    def d50(self, key: str, d: int) -> float | None:
        for e in self.res["sweeps"].values():
            if e["d"] == d and key in e["rows"]:
                return e["rows"][key]["delta_50"]
        return None

    # ------------------------------------------------------------------ stages
    def check(self) -> None:
        """Custom GD (a, b frozen) against the library on the GeLU baseline, same seeds."""
        d = self.d_screen
        deltas = [6.0, 10.0] if self.quick else [6.0, 10.0, 13.0]
        trials = 3 if self.quick else 5
        v = Variant("V0", "baseline", steps=200 if self.quick else 1000)
        rows = []
        t0 = time.perf_counter()
        for x in deltas:
            lib = library_trials(v, d, x, trials)
            cus = run_trials(v, d, x, trials, force_custom=True)
            row: dict[str, Any] = {"delta": x, "trials": trials}
            for name in ("cosine", "train_loss", "test_loss"):
                for tag, trs in (("library", lib), ("custom", cus)):
                    m, s = _mean_se([float(t[name][-1]) for t in trs])
                    row[f"{tag}_{name}"], row[f"{tag}_{name}_se"] = m, s
            row["max_abs_diff_cosine_trajectory"] = float(max(
                np.nanmax(np.abs(np.asarray(a["cosine"]) - np.asarray(b["cosine"])))
                for a, b in zip(lib, cus, strict=True)))
            row["max_abs_diff_final_train_loss"] = float(max(
                abs(float(a["train_loss"][-1]) - float(b["train_loss"][-1]))
                for a, b in zip(lib, cus, strict=True)))
            row["successes_library"] = sum(float(t["cosine"][-1]) > SUCCESS for t in lib)
            row["successes_custom"] = sum(float(t["cosine"][-1]) > SUCCESS for t in cus)
            rows.append(row)
        self.res["check"] = {"d": d, "steps": v.steps, "eta": v.eta, "rows": rows,
                             "wall": time.perf_counter() - t0}
        self.log(f"custom-vs-library check done ({time.perf_counter() - t0:.0f}s)")
        self.save()

    def screen(self) -> None:
        d = self.d_screen
        gel = gelu_variants(self.quick)
        for v in gel:
            self.sweep(v, d, self.grid["gelu"], "screen")
        qsteps = 200 if self.quick else 2000
        quads = quad_base(self.quick)
        base = self.d50("V0", d)
        moved = []
        for v in gel:
            if v.key in ("V0", "V1", "V2a", "V2b"):
                continue
            x = self.d50(v.key, d)
            if x is not None and (base is None or x <= base - 1.0):
                moved.append((x, v))
        moved.sort(key=lambda p: p[0])
        self.res["settings"]["quad_analogues_of"] = [v.key for _, v in moved[:3]]
        quads += [quad_analogue(v, qsteps) for _, v in moved[:3]]
        for v in quads:
            self.sweep(v, d, self.grid["quad"], "screen")

    def refine(self) -> None:
        d0, d = self.d_screen, self.d_refine
        steps = 200 if self.quick else 1000
        qsteps = 200 if self.quick else 2000

        def ranked(prefix: str, exclude: tuple[str, ...]) -> list[str]:
            cands = [(e["rows"][k]["delta_50"], k) for e in self.res["sweeps"].values() if e["d"] == d0
                     for k in e["rows"] if k.startswith(prefix) and k not in exclude and "T=" not in k
                     and e["rows"][k]["delta_50"] is not None]
            return [k for _, k in sorted(cands)]

        gel = {v.key: v for v in gelu_variants(self.quick)}
        gel["V0"] = replace(gel["V0"], steps=steps, checkpoints=())
        quads = {v.key: v for v in quad_base(self.quick)}
        quads["Q0"] = replace(quads["Q0"], steps=qsteps, checkpoints=())
        for key in self.res["settings"].get("quad_analogues_of", []):
            q = quad_analogue(gel[key], qsteps)
            quads[q.key] = q
        picks = ["V0"] + ranked("V", ("V0",))[:2] + ["Q0"] + ranked("Q", ("Q0",))[:1]
        self.res["settings"]["refined"] = picks
        for key in picks:
            v = gel.get(key) or quads.get(key)
            x50 = self.d50(key, d0)
            if v is None or x50 is None:
                continue
            grid = sorted({max(1.0, round(2 * x50 * f) / 2) for f in (0.75, 0.9, 1.05, 1.25, 1.5)})
            self.sweep(v, d, grid, "refine")

    def fig2(self, extra: list[str] | None = None) -> None:
        """The paper's Figure 2 set-up: GeLU, δ = 17.5, one run, 1500 steps.

        Without ``extra``: V0 and the variant chosen by the rule below; with ``extra``: those keys.
        """
        delta = 17.5
        steps = 100 if self.quick else 1500
        dims = [200] if self.quick else [5000, 2000]
        # the variant most like the paper: δ_50 at the largest refined d closest to 6.0
        best = None
        for d in (self.d_refine, self.d_screen):
            cands = [(abs(e["rows"][k]["delta_50"] - PAPER["gelu"]), k) for e in self.res["sweeps"].values()
                     if e["d"] == d for k in e["rows"] if k.startswith("V") and "T=" not in k
                     and k not in ("V0", "V2a") and e["rows"][k]["delta_50"] is not None]
            if cands:
                best = min(cands)[1]
                break
        gel = {v.key: v for v in gelu_variants(self.quick)}
        keys = (["V0"] + ([best] if best else [])) if extra is None else list(extra)
        self.res["settings"]["fig2_variants"] = [*self.res["settings"].get("fig2_variants", []), *keys]
        for i, key in enumerate(keys):
            v = replace(gel[key], steps=steps, checkpoints=())
            left = len(keys) - i
            for d in dims:
                n = int(round(delta * d))
                work = n * d * steps * (1.15 if v.custom else 1.0)
                share = (self.budget.limit - self.budget.elapsed()) / left
                if self.budget.estimate(work) + 30 <= share or d == dims[-1]:
                    break
            if not self.budget.fits(work):
                self.budget.skipped.append(f"fig2: {key} d={d} ")
                self.log(f"skip fig2 {key} d={d}")
                continue
            t0 = time.perf_counter()
            tr = run_trials(v, d, delta, 1)[0]
            wall = time.perf_counter() - t0
            self.budget.update(work, wall)
            self.res["fig2"][key] = self.fig2_summary(v, d, delta, tr, wall)
            self.log(f"fig2 {key} d={d} ({wall:.0f}s): final cos {self.res['fig2'][key]['final_cosine']}")
            self.save()

    @staticmethod
    def fig2_summary(v: Variant, d: int, delta: float, tr: dict[str, Any], wall: float) -> dict[str, Any]:
        s = np.asarray(tr["steps"])
        c = np.asarray(tr["cosine"])
        trl, tel = np.asarray(tr["train_loss"]), np.asarray(tr["test_loss"])
        esc = escape_step(tr, int(s[-1]))
        # plateau: mean over the last 20 % of recorded steps
        tail = s >= 0.8 * s[-1]
        fin = np.flatnonzero(np.isfinite(c))
        before = (s < esc) if math.isfinite(esc) and esc > 0 else np.ones(s.shape, dtype=bool)
        return {"variant": v.key, "description": v.describe(), "d": d, "delta": delta,
                "n": int(round(delta * d)),
                "seed": {"entropy": 7000 + d, "spawn_key": [int(round(1000 * delta)), 0]},
                "wall": wall, "status": tr["status"], "steps": s.tolist(),
                "cosine": np.round(c, 5).tolist(), "train_loss": np.round(trl, 5).tolist(),
                "test_loss": np.round(tel, 5).tolist(),
                "a": None if tr["a"] is None else np.round(np.asarray(tr["a"]), 5).tolist(),
                "b": None if tr["b"] is None else np.round(np.asarray(tr["b"]), 5).tolist(),
                "initial_train_loss": float(trl[0]), "initial_test_loss": float(tel[0]),
                "escape_step": None if math.isnan(esc) else esc,
                "final_cosine": float(c[fin[-1]]) if fin.size else None,
                "plateau_train_loss": float(np.nanmean(trl[tail])),
                "plateau_test_loss": float(np.nanmean(tel[tail])),
                "min_train_loss_before_escape": float(np.nanmin(trl[before])),
                "max_test_loss_before_escape": float(np.nanmax(tel[before]))}

    def optima(self) -> None:
        seen: dict[str, Variant] = {v.key: v for v in gelu_variants(self.quick) + quad_base(self.quick)}
        for key in self.res["settings"].get("quad_analogues_of", []):
            q = quad_analogue(seen[key], 2000)
            seen[q.key] = q
        for key, v in seen.items():
            self.res["aligned_optimum"][key] = aligned_optimum(v)

    def extend(self) -> None:
        """Stage 5: d = 2000, 6 trials, on a 4-point grid around the d = 1000 δ_50 of the GeLU and quad
        variants with the lowest d = 1000 δ_50, then of V0 and Q0 (as the budget allows)."""
        d0, d = self.d_refine, self.d_extend
        gel = {v.key: v for v in gelu_variants(self.quick)}
        gel["V0"] = replace(gel["V0"], steps=200 if self.quick else 1000, checkpoints=())
        quads = {v.key: v for v in quad_base(self.quick)}
        quads["Q0"] = replace(quads["Q0"], steps=200 if self.quick else 2000, checkpoints=())
        for key in self.res["settings"].get("quad_analogues_of", []):
            q = quad_analogue(gel[key], 200 if self.quick else 2000)
            quads[q.key] = q
        picks = []
        for prefix in ("V", "Q"):
            cands = sorted((e["rows"][k]["delta_50"], k) for e in self.res["sweeps"].values() if e["d"] == d0
                           for k in e["rows"] if k.startswith(prefix) and k != f"{prefix}0"
                           and e["rows"][k]["delta_50"] is not None)
            if cands:
                picks.append(cands[0][1])
        picks += ["V0", "Q0"]
        self.res["settings"]["extended"] = {"d": d, "trials": self.trials_extend, "variants": picks}
        self.trials = self.trials_extend
        for key in picks:
            v = gel.get(key) or quads.get(key)
            x50 = self.d50(key, d0)
            if v is None or x50 is None:
                continue
            grid = sorted({max(1.0, round(2 * x50 * f) / 2) for f in (0.75, 0.9, 1.05, 1.25)})
            self.sweep(v, d, grid, "extend")

    def run_extend(self) -> None:
        """Load the JSON of a full run, add stage 5, rewrite JSON, report and plot."""
        self.res = json.loads((OUT / "convention_hunt.json").read_text())
        self.prev_elapsed = float(self.res.get("elapsed", 0.0))
        self.budget.skipped = self.res["skipped"]
        self.fig2_reserve = 0.0
        self.log(f"extend, budget {self.budget.limit / 60:.0f} min")
        self.extend()
        self.save()
        if self.quick:
            print(markdown(self.res))
        else:
            (OUT / "convention_hunt.md").write_text(markdown(self.res))
            plot(self.res)
        self.log("done")

    def run_fig2(self, keys: list[str]) -> None:
        """Load the JSON of a full run, add the Figure 2 set-up for ``keys``, rewrite the outputs."""
        self.res = json.loads((OUT / "convention_hunt.json").read_text())
        self.prev_elapsed = float(self.res.get("elapsed", 0.0))
        self.budget.skipped = self.res["skipped"]
        self.res["settings"]["fig2_extra"] = [*self.res["settings"].get("fig2_extra", []), *keys]
        self.log(f"fig2 for {keys}, budget {self.budget.limit / 60:.0f} min")
        self.fig2(keys)
        self.save()
        (OUT / "convention_hunt.md").write_text(markdown(self.res))
        plot(self.res)
        self.log("done")

    def run(self) -> None:
        self.log(f"start ({'quick' if self.quick else 'full'}), budget {self.budget.limit / 60:.0f} min")
        self.check()
        self.screen()
        self.refine()
        self.fig2()
        self.optima()
        self.res["rate_s_per_element_step"] = self.budget.rate
        self.save()
        md = markdown(self.res)
        if self.quick:
            print(md)
        else:
            (OUT / "convention_hunt.md").write_text(md)
            plot(self.res)
        self.log("done")


# --------------------------------------------------------------------------- report
def _f(x: float | None, fmt: str = ".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def _pm(m: float | None, s: float | None, fmt: str = ".3f") -> str:
    if m is None:
        return "—"
    return f"{m:{fmt}} ± {s:{fmt}}" if s is not None else f"{m:{fmt}}"


def markdown(res: dict[str, Any]) -> str:
    st = res["settings"]
    cmds = [f"`python validation/investigations/convention_hunt.py{' --quick' if st['quick'] else ''}`"]
    if "extended" in st:
        cmds.append("`python validation/investigations/convention_hunt.py --extend`")
    if st.get("fig2_extra"):
        extra = " ".join(st["fig2_extra"])
        cmds.append(f"`python validation/investigations/convention_hunt.py --fig2 {extra}`")
    L = ["# Convention hunt: moving the finite-d GD transition towards the paper's δ*", "",
         f"Generated by {', then '.join(cmds)}: {res['elapsed'] / 60:.1f} min of runs in all "
         "(one process at a time, one BLAS thread; the JSON's `log` lists every job). Success = final cosine "
         f"|⟨w, θ*⟩|/‖w‖ > 1/2; {st['trials']} trials per δ; float32 data; metrics recorded every "
         f"{st['record_every']} steps. Paper: δ* ≈ {PAPER['gelu']} (GeLU), ≈ {PAPER['quad']} (quad). "
         "Seeds are keyed by (d, δ, trial), so all variants see the same data and initialisations "
         "(paired comparison). Losses are in each variant's own convention.", ""]
    ck = res.get("check")
    if ck:
        L += [f"## Check: custom GD (a, b frozen) vs library simulator, GeLU baseline, d = {ck['d']}, "
              f"{ck['steps']} steps, η = {ck['eta']}, same seeds", "",
              "| δ | trials | successes lib / custom | final cosine lib | final cosine custom | "
              "train loss lib | train loss custom | test loss lib | test loss custom | "
              "max per-trial abs. Δcosine along trajectory |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in ck["rows"]:
            cells = [_pm(r[f"{t}_{n}"], r[f"{t}_{n}_se"]) for n in ("cosine", "train_loss", "test_loss")
                     for t in ("library", "custom")]
            L.append(f"| {r['delta']:g} | {r['trials']} | "
                     f"{r['successes_library']} / {r['successes_custom']} | " + " | ".join(cells)
                     + f" | {r['max_abs_diff_cosine_trajectory']:.1e} |")
        L.append("")
    # δ_50 summary
    L += ["## δ_50 per variant and d", "",
          "δ_50: linear interpolation of the first crossing of a success rate of 1/2 on the grid "
          "(≤x: already ≥ 1/2 at the smallest δ; >x: never reached). Aligned optimum: minimum over the "
          "trained scalars (norm r, and b, a where trained) of the population loss of a perfectly "
          "aligned neuron (Gauss–Hermite quadrature).", "",
          "| row | variant | conventions | aligned optimum loss | " + " | ".join(
              f"δ_50 d={d}" for d in sorted({e['d'] for e in res['sweeps'].values()})) + " |",
          "|---|---|---|---|" + "---|" * len({e['d'] for e in res['sweeps'].values()})]
    dims = sorted({e["d"] for e in res["sweeps"].values()})
    rows: dict[str, dict[str, Any]] = {}
    for e in res["sweeps"].values():
        for k, r in e["rows"].items():
            rows.setdefault(k, {"label": r["label"], "variant": e["variant"], "d": {}})
            rows[k]["d"][e["d"]] = r
    degenerate = False
    for k, info in rows.items():
        ao = res["aligned_optimum"].get(info["variant"], {})
        opt = ao.get("loss")
        opt_cell = _f(opt)
        if ao and max(abs(ao["r"]), abs(ao["b"])) > 100:  # minimiser ran off to infinity
            opt_cell += " (†)"
            degenerate = True
        d_first, r_first = next(iter(info["d"].items()))
        spec = dict(res["variants"][f"{info['variant']}|{d_first}"])
        spec = {f: spec[f] for f in Variant.__dataclass_fields__}
        desc = replace(Variant(**spec), steps=r_first["at_step"], checkpoints=()).describe()
        L.append(f"| {k} | {info['label']} | {desc} | {opt_cell} | "
                 + " | ".join(info["d"][d]["delta_50_str"] if d in info["d"] else "" for d in dims) + " |")
    if degenerate:
        L += ["", "(†) the minimiser ran off to very large |r|, |b| (a → 0): the value is the loss where "
              "Nelder–Mead stopped, not a converged optimum."]
    L.append("")
    # per-δ detail
    L += ["## Success counts per δ", "",
          "Cells: successes/trials (rate ± binomial s.e.). Escape: median first recorded step with "
          "cosine > 1/2 among runs that crossed it by that step (a run may cross and fall back). "
          "Losses: mean ± s.e. over the successful runs at the row's final step. 'nf': runs that "
          "diverged (counted as failures).", ""]
    for e in res["sweeps"].values():
        for k, r in e["rows"].items():
            L += [f"### {k} — {r['label']} — d = {e['d']} (T = {r['at_step']}, δ_50 = {r['delta_50_str']}, "
                  f"run wall {e['wall']:.0f} s)", "",
                  "| δ | successes | rate | median escape | train loss (succ.) | test loss (succ.) | nf |",
                  "|---|---|---|---|---|---|---|"]
            for x, p in zip(e["deltas"], r["per_delta"], strict=True):
                L.append(f"| {x:g} | {p['successes']}/{p['trials']} | {p['rate']:.2f} ± {p['stderr']:.2f} | "
                         f"{_f(p['median_escape'], '.0f')} | "
                         f"{_pm(p['train_loss_success'], p['train_loss_success_se'])} | "
                         f"{_pm(p['test_loss_success'], p['test_loss_success_se'])} | {p['nonfinite']} |")
            L.append("")
    if res["fig2"]:
        L += ["## Figure 2 set-up (GeLU, δ = 17.5, one run)", "",
              "Plateau: mean over the last 20 % of the recorded steps. 'Before escape': recorded "
              "steps before the first cosine > 1/2.", "",
              "| variant | d | n | steps | initial train / test loss | min train loss before escape | "
              "max test loss before escape | escape step | final cosine | plateau train / test loss | "
              "final a, b | wall |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key, f2 in res["fig2"].items():
            ab = "—" if f2["a"] is None else f"{f2['a'][-1]:.3f}, {f2['b'][-1]:.3f}"
            L.append(f"| {key} ({f2['description']}) | {f2['d']} | {f2['n']} | {f2['steps'][-1]} | "
                     f"{f2['initial_train_loss']:.3f} / {f2['initial_test_loss']:.3f} | "
                     f"{f2['min_train_loss_before_escape']:.3f} | {f2['max_test_loss_before_escape']:.3f} | "
                     f"{_f(f2['escape_step'], '.0f')} | {_f(f2['final_cosine'])} | "
                     f"{f2['plateau_train_loss']:.3f} / {f2['plateau_test_loss']:.3f} | {ab} | "
                     f"{f2['wall']:.0f} s |")
        L.append("")
        for key, f2 in res["fig2"].items():
            s = np.asarray(f2["steps"])
            pick = [i for i, x in enumerate(s) if x in (0, 10, 20, 30, 50, 100, 200, 300, 500, 750, 1000,
                                                        1250, 1500) or x == s[-1]]
            L += [f"Trajectory {key} (d = {f2['d']}):", "", "| step | cosine | train loss | test loss |",
                  "|---|---|---|---|"]
            for i in pick:
                L.append(f"| {s[i]} | {_f(f2['cosine'][i])} | {_f(f2['train_loss'][i])} | "
                         f"{_f(f2['test_loss'][i])} |")
            L.append("")
    if res["skipped"]:
        L += ["## Skipped for the time budget", ""] + [f"* {s}" for s in res["skipped"]] + [""]
    L += ["## What this shows", "",
          "(Generated from the numbers above; statements about these runs only.)", ""]
    L += findings(res)
    return "\n".join(L) + "\n"


def findings(res: dict[str, Any]) -> list[str]:
    """Factual bullet points computed from the results."""
    out: list[str] = []
    ck = res.get("check")
    if ck:
        dmax = max(r["max_abs_diff_cosine_trajectory"] for r in ck["rows"])
        same = all(r["successes_library"] == r["successes_custom"] for r in ck["rows"])
        out.append(f"* Custom GD vs library (same seeds, a and b frozen, d = {ck['d']}): largest per-trial "
                   f"difference of the cosine along the trajectories {dmax:.1e}; success counts "
                   f"{'identical' if same else 'different'} at every δ checked.")
    st = res["settings"]
    for prefix, act in (("V", "gelu"), ("Q", "quad")):
        d0 = st["d_screen"]
        rows0 = {k: r for e in res["sweeps"].values() if e["d"] == d0 and e["variant"].startswith(prefix)
                 for k, r in e["rows"].items()}
        base0 = rows0.get(f"{prefix}0", {}).get("delta_50")
        if base0 is not None:
            down = [k for k, r in rows0.items() if r["delta_50"] is not None and r["delta_50"] <= base0 - 1]
            same = [k for k, r in rows0.items() if k != f"{prefix}0" and r["delta_50"] is not None
                    and abs(r["delta_50"] - base0) < 1]
            up = [k for k, r in rows0.items() if r["delta_50"] is None or r["delta_50"] >= base0 + 1]
            out.append(f"* Summary, {act} at d = {d0} (δ_50 of {prefix}0 = {base0:.2f}): lowered by ≥ 1: "
                       f"{', '.join(down) or 'none'}; within ±1: {', '.join(same) or 'none'}; "
                       f"raised by ≥ 1 or never reaching 1/2 on the grid: {', '.join(up) or 'none'}.")
    for prefix, act in (("V", "gelu"), ("Q", "quad")):
        for d in sorted({e["d"] for e in res["sweeps"].values()}):
            rows = {k: r for e in res["sweeps"].values() if e["d"] == d and e["variant"].startswith(prefix)
                    for k, r in e["rows"].items()}
            if not rows:
                continue
            base = rows.get(f"{prefix}0")
            b50 = base["delta_50"] if base else None
            ranked = sorted(rows.items(), key=lambda kv: math.inf if kv[1]["delta_50"] is None
                            else kv[1]["delta_50"])
            txt = ", ".join(f"{k} {r['delta_50_str']}" for k, r in ranked)
            out.append(f"* {act}, d = {d}: δ_50 by variant (lowest first): {txt}.")
            fin = [(abs(r["delta_50"] - PAPER[act]), k, r) for k, r in rows.items()
                   if r["delta_50"] is not None]
            if fin:
                _, k, r = min(fin)
                shift = ("" if b50 is None or k == f"{prefix}0" else
                         f", a shift of {r['delta_50'] - b50:+.2f} from {prefix}0 ({base['delta_50_str']})")
                out.append(f"  Closest to the paper's {PAPER[act]}: {k} ({r['label']}) with δ_50 = "
                           f"{r['delta_50_str']}{shift}.")
            if base:
                paired = []
                for k, r in rows.items():
                    if k == f"{prefix}0" or r["deltas"] != base["deltas"]:
                        continue
                    diff = sum(p["successes"] - q["successes"]
                               for p, q in zip(r["per_delta"], base["per_delta"], strict=True))
                    paired.append(f"{k} {diff:+d}")
                if paired:
                    out.append(f"  Successes summed over the grid minus {prefix}0's "
                               "(same data and initialisations): "
                               + ", ".join(paired) + ".")
            nf = [(k, sum(p["nonfinite"] for p in r["per_delta"])) for k, r in rows.items()]
            nf = [(k, x) for k, x in nf if x]
            if nf:
                out.append("  Diverged runs: " + ", ".join(f"{k}: {x}" for k, x in nf) + ".")
    for key in ("V0", "Q0"):
        e = res["sweeps"].get(f"{key}|{st['d_screen']}")
        if not e or len(e["rows"]) < 2:
            continue
        ats = sorted(r["at_step"] for r in e["rows"].values())
        late = 0
        for x in e["deltas"]:
            for tr_ in e["runs"][f"{x:g}"]:
                c = np.asarray(tr_["cosine"], dtype=float)
                s_ = np.asarray(tr_["traj_steps"])
                ok_first = np.isfinite(c[s_ == ats[0]]).all() and c[s_ == ats[0]][0] > SUCCESS
                ok_last = np.isfinite(c[-1]) and c[-1] > SUCCESS
                late += int(ok_last and not ok_first)
        out.append(f"* Longer training ({key}, d = {st['d_screen']}): δ_50 "
                   + ", ".join(f"{r['delta_50_str']} at T = {r['at_step']}" for r in
                               sorted(e["rows"].values(), key=lambda r: r["at_step"]))
                   + f"; {late} run(s) failed at T = {ats[0]} but succeeded at T = {ats[-1]}.")
    ab_lines = []
    for e in res["sweeps"].values():
        if e["d"] != st["d_screen"]:
            continue
        recs = [t for x in e["deltas"] for t in e["runs"][f"{x:g}"] if t.get("final_b") is not None]
        if not recs:
            continue
        parts = []
        for tag, sel in (("successful", True), ("failed", False)):
            grp = [t for t in recs if (t["cosine"][-1] is not None and t["cosine"][-1] > SUCCESS) == sel]
            if grp:
                spec = res["variants"][f"{e['variant']}|{e['d']}"]
                txt = [f"{tag} runs ({len(grp)})"]
                if spec["bias"]:
                    bq = np.percentile([t["final_b"] for t in grp], [10, 50, 90])
                    txt.append(f"b 10/50/90 % = {bq[0]:.2f}/{bq[1]:.2f}/{bq[2]:.2f}")
                if spec["train_a"]:
                    txt.append(f"median a = {np.median([t['final_a'] for t in grp]):.2f}")
                parts.append(", ".join(txt))
        ab_lines.append(f"  {e['variant']}: " + "; ".join(parts) + ".")
    if ab_lines:
        out.append(f"* Final trained scalars at d = {st['d_screen']} (all δ pooled):")
        out += ab_lines
    for key, f2 in res["fig2"].items():
        out.append(f"* Figure 2 set-up, {key} (d = {f2['d']}, δ = {f2['delta']}): test loss "
                   f"{f2['initial_test_loss']:.3f} at step 0, at most "
                   f"{f2['max_test_loss_before_escape']:.3f} before the escape while the train loss fell to "
                   f"{f2['min_train_loss_before_escape']:.3f}; "
                   f"escape (cosine > 1/2) at step {_f(f2['escape_step'], '.0f')}; final cosine "
                   f"{_f(f2['final_cosine'])}; plateau train / test loss {f2['plateau_train_loss']:.3f} / "
                   f"{f2['plateau_test_loss']:.3f} (paper: ≈ 0.6).")
    return out


def _arr(x: list[float | None]) -> Array:
    return np.asarray([math.nan if v is None else v for v in x], dtype=float)


def plot(res: dict[str, Any]) -> None:
    """Success rate vs δ (one colour per variant, line style per d, legends under the panels) and
    the Figure 2 trajectories."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(19, 7.4))
    fig.subplots_adjust(bottom=0.36, top=0.88, wspace=0.25, left=0.05, right=0.99)
    dims = sorted({e["d"] for e in res["sweeps"].values()})
    styles = dict(zip(dims, ["-", "--", ":", "-."], strict=False))
    palette = [*plt.get_cmap("tab10").colors, "black", "gold", "navy"]
    colour: dict[str, Any] = {}
    words = {v["key"]: v["label"] for v in res.get("variants", {}).values()}
    for prefix in ("V", "Q"):
        keys = sorted({e["variant"] for e in res["sweeps"].values() if e["variant"].startswith(prefix)})
        colour.update({k: palette[i % len(palette)] for i, k in enumerate(keys)})
    neuron = {"gelu": "GeLU neuron, η = 0.5, 1000 steps", "quad": "r² neuron, η = 0.1, 2000 steps"}
    for ax, prefix, act in ((axes[0], "V", "gelu"), (axes[1], "Q", "quad")):
        for e in sorted(res["sweeps"].values(), key=lambda e: (e["variant"], e["d"])):
            if not e["variant"].startswith(prefix) or e["variant"] == "V2a":  # V2a ≡ V1
                continue
            r = e["rows"][e["variant"]]  # the row at the variant's own T (not the V3/Q3 continuations)
            rate = np.array([p["rate"] for p in r["per_delta"]], float)
            err = np.array([p["stderr"] for p in r["per_delta"]], float)
            ax.errorbar(e["deltas"], rate, yerr=np.vstack([np.minimum(err, rate), np.minimum(err, 1 - rate)]),
                        ls=styles[e["d"]], marker="o", ms=3, capsize=2, color=colour[e["variant"]],
                        label=f"{words.get(e['variant'], e['variant'])}, d = {e['d']}")
        ax.axvline(PAPER[act], color="k", lw=2, alpha=0.4, label=f"paper's threshold ≈ {PAPER[act]}")
        ax.set_xlabel("δ = n/d")
        ax.set_ylabel("GD success rate (final cosine > 1/2)")
        ax.set_title(f"{neuron[act]}, y = z² unless said\nline style: "
                     + ", ".join(f"{styles[d]} d = {d}" for d in dims), fontsize=10)
        ax.set_ylim(-0.03, 1.03)
        ax.legend(fontsize=6.5, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    ax = axes[2]
    for key, f2 in res["fig2"].items():
        s = np.asarray(f2["steps"], dtype=float)
        name = words.get(key, key)
        line, = ax.plot(s, _arr(f2["train_loss"]), label=f"{name}: train loss (d = {f2['d']})")
        ax.plot(s, _arr(f2["test_loss"]), ls="--", color=line.get_color(), label=f"{name}: test loss")
        ax.plot(s, _arr(f2["cosine"]), ls=":", color=line.get_color(), label=f"{name}: cosine with θ*")
    ax.axhline(0.6, color="k", lw=0.8, alpha=0.5, label="paper's plateau ≈ 0.6")
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(0, max([f2["steps"][-1] for f2 in res["fig2"].values()], default=1))
    ax.set_xlabel("GD step (symlog)")
    ax.set_ylabel("loss (y − f)²/2, or cosine")
    ax.set_title("The paper's Figure 2 set-up: GeLU, d = 5000, δ = 17.5, one run each", fontsize=10)
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    fig.suptitle("Which set-up change moves GD's transition towards the paper's? (8 trials per δ)")
    fig.savefig(OUT / "convention_hunt.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="tiny run (< 1 min), prints the report, writes nothing")
    ap.add_argument("--budget", type=float, default=68.0, help="wall-time budget in minutes")
    ap.add_argument("--report", action="store_true",
                    help="only rebuild the .md and .png from an existing convention_hunt.json")
    ap.add_argument("--extend", action="store_true",
                    help="add stage 5 (d = 2000) to an existing convention_hunt.json")
    ap.add_argument("--fig2", nargs="+", metavar="KEY",
                    help="add the Figure 2 set-up for these GeLU variant keys to an existing JSON")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    if (args.extend or args.fig2) and args.quick:
        ap.error("--extend/--fig2 work on the JSON of a full run; they cannot be combined with --quick")
    if args.report:
        res = json.loads((OUT / "convention_hunt.json").read_text())
        (OUT / "convention_hunt.md").write_text(markdown(res))
        plot(res)
        return
    with threadpool_limits(limits=1):
        hunt = Hunt(args.quick, 1.0 if args.quick else args.budget)
        if args.fig2:
            hunt.run_fig2(args.fig2)
        elif args.extend:
            hunt.run_extend()
        else:
            hunt.run()


if __name__ == "__main__":
    main(sys.argv[1:])
