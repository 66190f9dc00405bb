"""Which change of the Stein estimator moves GeLU ``z²``'s late curvature at 2·10⁴ paths?

With 2·10⁴ kernel paths the restricted curvature along θ*, ``E[z² D^t]``, ends above GD's at
t = 400 and falls with more paths (``late_kernels.py``, case ``gelu_z2``), and the search's
δ_50 on ``z²`` falls with it (``z2_path_count.py``). The usual suspect is the noise of the
Stein responses (findings §9.5). This compares, on the same seeds, the draws' estimator
(responses by regression on the innovations, antithetic pairs) with changes that raise or
lower that noise, or the regression's own bias, at a fixed number of paths:

* **noise** — one restricted run (GeLU, ``z²``, δ = 11, 2·10⁴ paths, the draws' settings:
  float32 compact history, responses by regression): at t = 100, 200 and 400 the distinct
  columns' ``g``, the stored innovations and the labels are kept, and the summed variance of
  the innovations' least-squares coefficients (``σ̂² tr (XᵀX)⁻¹`` on their block) is computed
  for the regression on the innovations alone and with the label controls ``f_k(y) ζ``
  (``DMFTSettings.stein_controls``);
* **kernels** — ``Q(t,t)`` and ``E[z² D^t]`` at the same t over ``--seeds`` seeds (default
  30) for: the regression (2·10⁴ paths, the draws' default), the plain Stein mean, no
  antithetic pairs, the label controls, the cross-fitted regression
  (``DMFTSettings.stein_crossfit``), the regression with more and fewer zero-variance
  innovations dropped (``null_rtol`` 1e-3 and 3e-5; the default is 1e-4), the regression with
  stratified labels (the label noise of the paths' ``V*`` sample removed), the regression with
  orthogonalised innovations (the sample noise of the fields' covariance removed), and the
  regression with 4·10⁴ and 8·10⁴ paths, against
  GD's (40 trials of projected GD at d = 1000, stored by ``late_kernels.py``).

Run ``python validation/investigations/stein_estimators.py [--seeds 30]`` (about 7
CPU-minutes); ``--tiny`` runs a small configuration (the test). Output:
``validation/investigations/results/stein_estimators.{md,json}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import ndtri
from threadpoolctl import threadpool_limits

from dmftsolve import Problem, __version__
from dmftsolve.dynamics import dmft as dmft_module
from dmftsolve.dynamics.dmft import solve_dmft
from dmftsolve.dynamics.stein import label_controls
from dmftsolve.results import cpu_model, git_commit, jsonable

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
LATE_KERNELS = OUT / "late_kernels.json"

FULL = {"delta": 11.0, "times": (100, 200, 400), "n_paths": 20_000, "seeds": 30}
TINY = {"delta": 6.0, "times": (4, 8), "n_paths": 800, "seeds": 2}

#: the variants of the kernels part: (label, paths as a multiple of ``n_paths``, solver options
#: changed from the draws' defaults)
VARIANTS: tuple[tuple[str, int, dict[str, Any]], ...] = (
    ("regression (the draws' default)", 1, {}),
    ("plain Stein mean", 1, {"stein_regression": False}),
    ("regression, no antithetic pairs", 1, {"antithetic": False}),
    ("regression with label controls", 1, {"stein_controls": True}),
    ("regression, cross-fitted", 1, {"stein_crossfit": True}),
    ("regression, null_rtol 1e-3 (more innovations dropped)", 1, {"null_rtol": 1e-3}),
    ("regression, null_rtol 3e-5 (fewer dropped)", 1, {"null_rtol": 3e-5}),
    ("regression, stratified labels (one V* in each of n equal-probability strata)", 1,
     {"labels": "stratified"}),
    ("regression, orthogonalised innovations (each new one orthogonal to the stored ones and the "
     "memory term, unit mean square)", 1, {"innovations": "orthogonal"}),
    ("regression, 2× paths", 2, {}),
    ("regression, 4× paths", 4, {}),
)


def problem(steps: int) -> Problem:
    return Problem.build(target="z**2", activation="gelu", eta=0.5, steps=steps).replace(hold_zero=[0])


def _stratified_labels(self: Any, rows: int, flip: tuple[int, ...] = (), quenched: bool = False) -> Any:
    """``_Run._draw_shared`` for the labels' ``V*`` (its first call): stratified sampling of
    N(0, 1). The plain draw's normals are drawn and ranked, and each batch's distinct column of
    rank ``r`` becomes ``Φ⁻¹((r + U)/n)`` with ``U`` uniform from a side stream
    (:func:`_strata_stream`). Every moment stays unbiased, and the paths' label sample has no
    stratum over- or under-filled; the run's own generator draws nothing more than in the plain
    run, so the innovations that follow are the plain run's."""
    if getattr(self, "_labels_drawn", False) or quenched:
        return _DRAW_SHARED(self, rows, flip, quenched)
    self._labels_drawn = True
    h = self.rng.standard_normal((rows, self.B, self.n_base))
    ranks = np.argsort(np.argsort(h, axis=2), axis=2)
    h = ndtri((ranks + _strata_stream(self.rng).random(h.shape)) / self.n_base)
    return self._shared_copies(h, flip)


def _orthogonal_innovations(self: Any, rows: int) -> np.ndarray:
    """``_Run._draw`` with the sample noise of the innovations' covariance removed: the plain
    draw's normals (the same generator calls), made orthogonal over the distinct columns to the
    stored innovations and to the current memory term (its part odd in the innovations, as the
    paths see it: ``_Run._contract``), then to each other, and scaled to mean square 1. The
    fields' realised covariance is then the kernel ``Q`` the recursion uses, and no new
    innovation correlates with the past in the sample. (A QR of the past each step: slow, but
    this is an investigation.)"""
    z = _DRAW(self, rows)
    past = [self.Z[: self.n_z].astype(float)]
    if self.compact:
        past.append(self._contract(np.asarray(self.mem, dtype=float)))
    A = np.vstack(past)
    A = A[np.linalg.norm(A, axis=1) > 0]
    if A.shape[0]:
        basis = np.linalg.qr(A.T)[0]
        z = z - (z @ basis) @ basis.T
    for i in range(rows):
        for j in range(i):
            z[i] -= (z[i] @ z[j]) / (z[j] @ z[j]) * z[j]
    return z * np.sqrt(z.shape[1] / np.sum(z * z, axis=1))[:, None]


def _strata_stream(rng: np.random.Generator) -> np.random.Generator:
    """A generator of its own for the positions inside the strata: a child of ``rng``'s seed
    sequence (key 2²¹, unused by the solver), so ``rng``'s stream is not advanced."""
    ss = rng.bit_generator.seed_seq
    return np.random.default_rng(np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, 2**21)))


_DRAW_SHARED = dmft_module._Run._draw_shared
_DRAW = dmft_module._Run._draw


@contextlib.contextmanager
def _patched(attr: str, replacement: Any) -> Iterator[None]:
    """``_Run.<attr>`` replaced by ``replacement`` inside the block, restored after."""
    original = getattr(dmft_module._Run, attr)
    setattr(dmft_module._Run, attr, replacement)
    try:
        yield
    finally:
        setattr(dmft_module._Run, attr, original)


def _solve(cfg: dict[str, Any], n_paths: int, seed: int, keep: tuple[int, ...], **options: Any) -> Any:
    """The restricted DMFT with the draws' settings (``TransitionSettings`` defaults), changed by
    ``options`` (``labels="stratified"``: :func:`_stratified_labels`; ``innovations="orthogonal"``:
    :func:`_orthogonal_innovations`)."""
    patches = {"innovations": ("orthogonal", "_draw", _orthogonal_innovations),
               "labels": ("stratified", "_draw_shared", _stratified_labels)}
    for option, (value, attr, replacement) in patches.items():
        if options.pop(option, None) == value:
            with _patched(attr, replacement):
                return _solve(cfg, n_paths, seed, keep, **options)
    kw: dict[str, Any] = {"stein_regression": True, "antithetic": True} | options
    return solve_dmft(problem(max(cfg["times"])), cfg["delta"], n_paths=n_paths, reflect=(0,),
                      keep_samples_at=keep, errors="none", test_loss="none", seed=seed, throw=False,
                      path_dtype="float32", history="compact", **kw)


def coefficient_noise(G: np.ndarray, Z: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Summed variance of the innovations' coefficients in the least squares of ``G`` (the
    distinct columns' ``g``, shape ``(n,)``) on the innovations ``Z`` (``(p, n)``), alone and
    with ``f_k(y) ζ`` (``label_controls``): ``σ̂² tr[(XᵀX)⁻¹]`` over the innovations' block."""
    W = np.vstack([np.ones(y.size), label_controls(y)])
    out = {}
    for name, X in (("var_innovations", Z.T), ("var_controls", np.hstack([w[:, None] * Z.T for w in W]))):
        XtX = X.T @ X
        beta = np.linalg.solve(XtX, X.T @ G)
        r = G - X @ beta
        s2 = float(r @ r) / (G.size - X.shape[1])
        out[name] = s2 * float(np.trace(np.linalg.inv(XtX)[: Z.shape[0], : Z.shape[0]]))
    return out


def noise_part(cfg: dict[str, Any], seed: int = 3) -> list[dict[str, Any]]:
    """:func:`coefficient_noise` at each of ``cfg["times"]`` in one run without the controls."""
    kept: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    original = dmft_module._Run._moments

    def keep(self: Any, t: int, z: Any, g: Any, null: Any, D: Any) -> Any:  # noqa: N803
        if t in cfg["times"]:
            G = self._contract(g)[0].astype(float)
            y = self.y.reshape(self.B, self.rep_sign.size, self.n_base)[:, 0, :].reshape(-1)
            kept[t] = (G, self.Z[: self.n_z].astype(float), y.copy())
        return original(self, t, z, g, null, D)

    dmft_module._Run._moments = keep  # type: ignore[method-assign]
    try:
        r = _solve(cfg, cfg["n_paths"], seed, ())
    finally:
        dmft_module._Run._moments = original  # type: ignore[method-assign]
    if not r.ok:
        raise RuntimeError(f"the restricted run failed: {r.message}")
    rows = []
    for t in cfg["times"]:
        G, Z, y = kept[t]
        v = coefficient_noise(G, Z, y)
        rows.append({"t": t, "innovations": Z.shape[0], "columns": G.size, **v,
                     "ratio": v["var_controls"] / v["var_innovations"]})
    return rows


def kernels_part(cfg: dict[str, Any]) -> dict[str, Any]:
    """``Q(t,t)`` and ``E[z² D^t]`` over the seeds for each of :data:`VARIANTS`."""
    times = tuple(cfg["times"])
    out: dict[str, Any] = {}
    for label, times_paths, options in VARIANTS:
        n_paths = times_paths * cfg["n_paths"]
        rows, seeds, failed, t0 = [], [], [], time.perf_counter()
        for seed in range(3, 3 + cfg["seeds"]):
            r = _solve(cfg, n_paths, seed, times, **options)
            if not r.ok:
                failed.append({"seed": seed, "message": r.message})
                continue
            seeds.append(seed)
            rows.append([(float(r.q_diag[t, 0, 0]),
                          float(np.mean(r.law(t).Vstar[:, 0] ** 2 * r.law(t).D.reshape(-1))))
                         for t in times])
        a = np.array(rows)  # (seeds, times, 2)
        n = a.shape[0]
        out[label] = {"n_paths": n_paths, "options": options, "runs": n, "failed": failed,
                      "seeds": seeds, "RQ_last": a[:, -1, 1],
                      "seconds": time.perf_counter() - t0,
                      "Q": a[:, :, 0].mean(axis=0), "Q_se": a[:, :, 0].std(axis=0, ddof=1) / math.sqrt(n),
                      "RQ": a[:, :, 1].mean(axis=0), "RQ_se": a[:, :, 1].std(axis=0, ddof=1) / math.sqrt(n)}
    return out


def gd_reference(times: tuple[int, ...]) -> dict[str, Any] | None:
    """GD's ``Q(t,t)`` and ``E[z² D^t]`` at ``times`` from ``late_kernels.json`` (case ``gelu_z2``)."""
    if not LATE_KERNELS.exists():
        return None
    e = json.loads(LATE_KERNELS.read_text()).get("gelu_z2")
    if not e or not set(times) <= set(e["times"]):
        return None
    idx = [list(e["times"]).index(t) for t in times]
    g = e["gd"]
    return {"trials": g["trials"], **{k: [g[k][i] for i in idx] for k in ("Q", "Q_se", "RQ", "RQ_se")}}


def paired_difference(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float, int]:
    """``(mean, standard error, n)`` of ``b − a`` in the last time's curvature over the seeds
    both variants ran."""
    va = dict(zip(a["seeds"], a["RQ_last"], strict=True))
    d = np.array([x - va[s] for s, x in zip(b["seeds"], b["RQ_last"], strict=True) if s in va])
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)), int(d.size)


def report(res: dict[str, Any]) -> str:
    cfg = res["config"]
    times = cfg["times"]
    lines = ["# Which change of the Stein estimator moves GeLU `z²`'s late curvature?", "",
             f"Generated by `python validation/investigations/stein_estimators.py` (dmftsolve "
             f"{res['version']}, {res.get('cpu', 'CPU not recorded')}, {res['seconds']:.0f} s; float32 "
             "rounding differs between CPUs, so a seed's kernels do too). Restricted DMFT (hard "
             "overlap held at 0), "
             f"GeLU, `y = z²`, η = 0.5, δ = {cfg['delta']:g}, the draws' settings (float32 compact "
             "history, responses by regression, antithetic pairs), changed as each row says; "
             "controls: `DMFTSettings.stein_controls`, cross-fitted: `DMFTSettings.stein_crossfit`.", "",
             f"## The noise of the innovations' coefficients (one run, N = {cfg['n_paths']} paths, "
             "seed 3)", "",
             "| t | innovations | distinct columns | summed variance, innovations alone | with the controls "
             "| ratio |", "|---|---|---|---|---|---|"]
    for r in res["noise"]:
        lines.append(f"| {r['t']} | {r['innovations']} | {r['columns']} | {r['var_innovations']:.3g} | "
                     f"{r['var_controls']:.3g} | {r['ratio']:.2f} |")
    head = " / ".join(f"t = {t}" for t in times)
    lines += ["", f"## The restricted kernels over seeds 3–{2 + cfg['seeds']}", "",
              "Mean ± standard error over the seeds; GD: 40 trials of projected GD at d = 1000 "
              "(`late_kernels.py`).", "",
              f"| run | paths | runs | E[z² D^t]: {head} | Q(t,t): {head} |", "|---|---|---|---|---|"]

    def cells(v: dict[str, Any], key: str) -> str:
        return " / ".join(f"{m:.4f} ± {s:.4f}" if key == "RQ" else f"{m:.3f} ± {s:.3f}"
                          for m, s in zip(v[key], v[key + "_se"], strict=True))

    for label, v in res["kernels"].items():
        fail = f" ({len(v['failed'])} failed)" if v["failed"] else ""
        lines.append(f"| {label} | {v['n_paths']} | {v['runs']}{fail} | {cells(v, 'RQ')} | "
                     f"{cells(v, 'Q')} |")
    if res.get("gd"):
        lines.append(f"| GD (d = 1000) | — | {res['gd']['trials']} trials | {cells(res['gd'], 'RQ')} | "
                     f"{cells(res['gd'], 'Q')} |")
    base_label, base = next(iter(res["kernels"].items()))
    lines += ["", f"Paired differences of `E[z² D^{times[-1]}]` from the first row over the seeds both "
              "ran (mean ± standard error of the per-seed differences):", "",
              "| run | seeds | difference |", "|---|---|---|"]
    for label, v in list(res["kernels"].items())[1:]:
        d = paired_difference(base, v)
        lines.append(f"| {label} − {base_label} | {d[2]} | {d[0]:+.4f} ± {d[1]:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=None, help="seeds per variant (default 30)")
    ap.add_argument("--tiny", action="store_true", help="a small configuration, not stored (the test)")
    a = ap.parse_args(argv)
    cfg = dict(TINY if a.tiny else FULL)
    if a.seeds is not None:
        if a.seeds < 2:
            ap.error(f"--seeds must be at least 2, got {a.seeds}")
        cfg["seeds"] = a.seeds
    t0 = time.perf_counter()
    with threadpool_limits(1):
        noise = noise_part(cfg)
        kernels = kernels_part(cfg)
    res = {"version": __version__, "commit": git_commit(), "cpu": cpu_model(), "config": cfg, "noise": noise,
           "kernels": kernels, "gd": None if a.tiny else gd_reference(tuple(cfg["times"])),
           "seconds": time.perf_counter() - t0}
    res = jsonable(res)
    if not a.tiny:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "stein_estimators.json").write_text(json.dumps(res, indent=1))
        (OUT / "stein_estimators.md").write_text(report(res))
    return res


if __name__ == "__main__":
    main()
