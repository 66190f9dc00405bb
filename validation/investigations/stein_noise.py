"""How much of the restricted ``Q`` excess at 2·10⁴ paths is the Stein estimate's own noise?

Each step the parameter side adds ``η² Γ̂ Q Γ̂ᵀ`` to ``Q(t+1, t+1)`` (``dmftsolve.dynamics.dmft``,
"Parameter side"). Stein's row is ``Γ̂ = Ŝ L⁻¹`` with ``Ŝ_u = E_N[g^t ζ^u]``, a mean over the
``N_d`` i.i.d. distinct path columns (``N_d = N/4`` with antithetic and reflected copies), so
``Γ̂ Q Γ̂ᵀ = Ŝ Ŝᵀ`` and

    E[Ŝ Ŝᵀ] = S Sᵀ + Σ_u Var(Y ζ_u) / N_d

(``Y`` a column's ``g`` summed over its copies with their signs, over the number of copies): the
noise adds a positive term per step that grows with the number ``n_z`` of non-null innovations
and falls like ``1/N``. Its unbiased estimate is
``(Σ_j Y_j² ‖ζ_j‖² − N_d ‖Ŝ‖²) / (N_d (N_d − 1))`` (width 1; ``‖ζ_j‖²`` over the stored
innovations). This script, on the restricted DMFT of ``late_kernels.py`` (GeLU, ``z² − 1``,
δ = 6.5, η = 0.5, hard direction held, reflection pairs, ``errors="none"``, float32 paths),
records per run:

* ``Q(t,t)`` at t = 25, 50, 100, 200, 400 and the cumulative noise term ``η² Σ_{s<t} noise_s``
  (``plain``);
* the same run with the noise term subtracted from ``Q(t+1,t+1)`` each step (``subtract``):
  does it remove the excess?
* the same run with each ``Ŝ_u`` shrunk by its own noise, ``Ŝ_u (1 − v_u/Ŝ_u²)₊``
  (``shrink``): does a less noisy ``Γ̂`` remove it?
* the same run with the library's ``stein_regression=True`` (``regression``): ``Ŝ`` becomes
  the least-squares coefficients of ``g`` on the innovations (in their coordinates
  ``Γ̂ Q Γ̂ᵀ = β̂ β̂ᵀ``), whose noise ``σ̂² tr((Z Zᵀ)⁻¹)`` counts only the residual of ``g`` after
  its part linear in the innovations.

Both corrections are applied from outside the library (wrapping ``_Run`` methods); the library
itself is unchanged. GD's ``Q(400,400)`` for this case (d = 1000, 40 projected trials) and the
DMFT at 1.6·10⁵ paths are read from ``results/late_kernels.json``.

Run ``python validation/investigations/stein_noise.py`` (about 1 CPU-min) →
``results/stein_noise.{md,json}``; ``--report`` rewrites the markdown from the JSON; ``--tiny``
(seconds, nothing written) is the test's configuration.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dmftsolve import Problem
from dmftsolve.dynamics import dmft as dmft_module
from dmftsolve.dynamics.dmft import solve_dmft

OUT = Path(__file__).resolve().parent / "results"
TIMES = (25, 50, 100, 200, 400)
FULL = {"delta": 6.5, "times": TIMES,
        "runs": [(20_000, s) for s in (3, 4, 5, 6)] + [(80_000, 3), (80_000, 4)]}
TINY = {"delta": 4.0, "times": (5, 10, 20), "runs": [(2_000, 3), (8_000, 3)]}


def noise_of_regression(Y: np.ndarray, Z: np.ndarray) -> float:
    """Estimate of ``Σ_u Var(β̂_u)`` for the least-squares coefficients ``β̂`` of ``Y`` on the rows
    of ``Z`` (n_z, N_d): ``σ̂² tr((Z Zᵀ)⁻¹)`` with ``σ̂²`` the residual variance."""
    Nd, p = Y.size, Z.shape[0]
    beta, *_ = np.linalg.lstsq(Z.T, Y, rcond=None)
    r = Y - Z.T @ beta
    s2 = float(r @ r) / (Nd - p)
    return s2 * float(np.trace(np.linalg.inv(Z @ Z.T)))


def noise_of_mean(Y: np.ndarray, Z: np.ndarray, S: np.ndarray) -> float:
    """Unbiased estimate of ``Σ_u Var(Ŝ_u)`` for ``Ŝ_u = mean_j Y_j Z_uj``.

    ``Y`` (N_d,), ``Z`` (n_z, N_d), ``S = Z @ Y / N_d`` (n_z,)."""
    Nd = Y.size
    second = float((Y**2) @ (Z**2).sum(axis=0)) / Nd  # mean over j of Y_j² ‖ζ_j‖²
    return (second - float(S @ S)) / (Nd - 1)


class _Probe:
    """Wraps ``_Run._moments`` (records or shrinks ``Ŝ``) and ``_Run._advance`` (subtracts)."""

    def __init__(self, mode: str, eta: float) -> None:
        self.mode, self.eta = mode, eta
        self.noise: list[float] = []

    @contextmanager
    def installed(self) -> Iterator[None]:
        run = dmft_module._Run
        moments, advance = run._moments, run._advance
        probe = self

        def _moments(self: Any, t: int, z: np.ndarray, g: np.ndarray, null: np.ndarray,
                     D: np.ndarray | None) -> Any:
            out = moments(self, t, z, g, null, D)
            step = out[0]
            cop = self.nb // self.n_base
            Y = (self._contract(g) / cop)[0]  # width 1
            Z = self.Z[: self.n_z].astype(float)
            rows = self.z_rows[: self.n_z]
            S = step.gz[0, 0, rows]
            probe.noise.append(noise_of_regression(Y, Z) if probe.mode == "regression"
                               else noise_of_mean(Y, Z, S))
            if probe.mode == "shrink":
                Nd = Y.size
                v = ((Y**2) @ (Z**2).T / Nd - S**2) / (Nd - 1)
                with np.errstate(divide="ignore", invalid="ignore"):
                    f = np.clip(1.0 - v / S**2, 0.0, 1.0)
                step.gz[0, 0, rows] = S * np.where(np.isfinite(f), f, 0.0)
            return out

        def _advance(self: Any, t: int, Gam: np.ndarray, Gam_b: np.ndarray, Cn_b: np.ndarray,
                     EVg_b: np.ndarray, g_b: np.ndarray, R_row: np.ndarray, *rest: Any) -> bool:
            if probe.mode == "subtract":  # Cν(t,t) enters E[φφ] once: subtract the noise there
                Cn_b = Cn_b.copy()  # (the full history: this probe does not run on the compact one)
                Cn_b[:, :, t * self.m:(t + 1) * self.m] -= probe.noise[-1]
            return advance(self, t, Gam, Gam_b, Cn_b, EVg_b, g_b, R_row, *rest)

        run._moments, run._advance = _moments, _advance
        try:
            yield
        finally:
            run._moments, run._advance = moments, advance


def one_run(delta: float, times: tuple[int, ...], n_paths: int, seed: int, mode: str,
            problem: Problem | None = None) -> dict[str, Any]:
    """One restricted solve (GeLU on ``z² − 1`` unless ``problem``) with ``mode``'s probe."""
    p = (Problem.build(target="z**2 - 1", activation="gelu", eta=0.5, steps=max(times)) if problem is None
         else problem.replace(steps=max(times))).replace(hold_zero=[0])
    probe = _Probe(mode, p.training.eta)
    t0 = time.perf_counter()
    with probe.installed(), threadpool_limits(1):
        r = solve_dmft(p, delta, n_paths=n_paths, reflect=(0,), errors="none", test_loss="none",
                       seed=seed, throw=False, path_dtype="float32",
                       stein_regression=mode == "regression")
    cum = np.concatenate([[0.0], np.cumsum(probe.eta**2 * np.array(probe.noise))])
    ok_until = r.diagnostics.get("last_step", None)
    Q = [float(r.q_diag[t, 0, 0]) if r.ok and math.isfinite(r.q_diag[t, 0, 0]) else None for t in times]
    return {"n_paths": n_paths, "seed": seed, "mode": mode, "status": r.status.value,
            "message": r.message, "Q": Q,
            "noise_cum": [float(cum[min(t, len(cum) - 1)]) for t in times],
            "steps_run": len(probe.noise), "last_step": ok_until,
            "seconds": time.perf_counter() - t0}


def report(res: dict[str, Any]) -> str:
    times = res["times"]
    ref = res.get("reference", {})
    lines = ["# The Stein estimate's own noise in the restricted `Q`", "",
             f"`{res['command']}`: restricted DMFT, GeLU, `z² − 1`, δ = {res['delta']:g}, η = 0.5, "
             "hard direction held, reflection pairs, float32 paths, `errors=\"none\"`. "
             "'noise' is the cumulative `η² Σ_s Σ_u Var(Ŝ_u)` the Stein noise adds to `Q(t,t)` "
             "through `η² Γ̂ Q Γ̂ᵀ` (before the dynamics acts on it); 'subtract' removes it from "
             "`Q(t+1,t+1)` each step, 'shrink' shrinks each `Ŝ_u` by its noise, 'regression' is "
             "`stein_regression=True` (its noise: that of the least-squares coefficients; module "
             "docstring).", ""]
    if ref:
        lines += [f"Reference `Q({times[-1]},{times[-1]})`: GD (d = 1000, projected, 40 trials) "
                  f"{ref['gd']:.3f} ± {ref['gd_se']:.3f}; DMFT with 1.6·10⁵ paths (seed 3) "
                  f"{ref['dmft_160k']:.3f} (`results/late_kernels.json`).", ""]
    head = " | ".join(f"Q({t},{t})" for t in times)
    lines += [f"| N | mode | seeds | status | {head} | noise at t = {times[-1]} |",
              "|---|---|---|---|" + "---|" * len(times) + "---|"]
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in res["runs"]:
        groups.setdefault((r["n_paths"], r["mode"]), []).append(r)
    for (n, mode), rs in groups.items():
        ok = [r for r in rs if r["status"] == "success"]
        status = f"{len(ok)} of {len(rs)} succeeded"
        if len(ok) < len(rs):
            bad = next(r for r in rs if r["status"] != "success")
            status += f" (seed {bad['seed']}: {bad['message'].split(':')[0]})"
        cells = []
        for i in range(len(times)):
            v = np.array([r["Q"][i] for r in ok], float)
            cells.append("—" if v.size == 0 else (f"{v.mean():.3f} ± {v.std(ddof=1) / math.sqrt(v.size):.3f}"
                                                  if v.size > 1 else f"{v[0]:.3f}"))
        nz = np.array([r["noise_cum"][-1] for r in ok], float)
        noise = f"{nz.mean():.3f}" if nz.size else "—"
        lines.append(f"| {n} | {mode} | {', '.join(str(r['seed']) for r in rs)} | {status} | "
                     + " | ".join(cells) + f" | {noise} |")
    lines += ["", "Mean ± standard error over the seeds that succeeded."]
    q = res.get("quad_z2")
    if q:
        qt = q["times"]
        gd = ", ".join(f"Q({t},{t}) = {v:.3f} ± {e:.3f}"
                       for t, v, e in zip(qt, q["gd"]["Q"], q["gd"]["Q_se"], strict=True))
        lines += ["", f"## r² on `z²` (δ = {q['delta']:g}, `late_kernels.py`'s case): plain, regression",
                  "", f"GD (d = {q['gd']['d']}, projected, {q['gd']['trials']} trials): {gd} "
                  "(`results/late_kernels.json`).", "",
                  "| N | mode | seeds | " + " | ".join(f"Q({t},{t})" for t in qt) + " |",
                  "|---|---|---|" + "---|" * len(qt)]
        for mode in ("plain", "regression"):
            rs = [r for r in q["runs"] if r["mode"] == mode and r["status"] == "success"]
            cells = []
            for i in range(len(qt)):
                v = np.array([r["Q"][i] for r in rs], float)
                cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) / math.sqrt(v.size):.3f}")
            lines.append(f"| {rs[0]['n_paths']} | {mode} | {', '.join(str(r['seed']) for r in rs)} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="a small configuration, nothing written (the test)")
    ap.add_argument("--report", action="store_true", help="only rewrite the markdown from the JSON")
    a = ap.parse_args(argv)
    if a.report:
        res = json.loads((OUT / "stein_noise.json").read_text())
        (OUT / "stein_noise.md").write_text(report(res))
        return res
    cfg = TINY if a.tiny else FULL
    res: dict[str, Any] = {"delta": cfg["delta"], "times": list(cfg["times"]), "runs": [],
                           "command": "python validation/investigations/stein_noise.py"
                                      + (" --tiny" if a.tiny else "")}
    for n_paths, seed in cfg["runs"]:
        for mode in ("plain", "subtract", "shrink", "regression"):
            r = one_run(cfg["delta"], tuple(cfg["times"]), n_paths, seed, mode)
            res["runs"].append(r)
            print(json.dumps({k: r[k] for k in ("n_paths", "seed", "mode", "status", "Q", "noise_cum")}),
                  flush=True)
    if not a.tiny:
        import late_kernels  # the r² case and its GD run

        stored = json.loads((OUT / "late_kernels.json").read_text())
        qk, qtimes = stored["quad_z2"], (100, 200, 400, 600)
        idx = [qk["times"].index(t) for t in qtimes]
        res["quad_z2"] = {"delta": qk["delta"], "times": list(qtimes), "runs": [],
                          "gd": {"d": qk["d"], "trials": 40, "Q": [qk["gd"]["Q"][i] for i in idx],
                                 "Q_se": [qk["gd"]["Q_se"][i] for i in idx]}}
        for seed in (3, 4, 5):
            for mode in ("plain", "regression"):
                r = one_run(qk["delta"], qtimes, 20_000, seed, mode, late_kernels.problem_of("quad_z2", 600))
                res["quad_z2"]["runs"].append(r)
                print(json.dumps({k: r[k] for k in ("n_paths", "seed", "mode", "status", "Q")}), flush=True)
        lk = stored["gelu_z2m1"]
        res["reference"] = {"gd": lk["gd"]["Q"][-1], "gd_se": lk["gd"]["Q_se"][-1],
                            "dmft_160k": lk["dmft"]["160000|3"]["Q"][-1]}
        (OUT / "stein_noise.json").write_text(json.dumps(res, indent=1) + "\n")
        (OUT / "stein_noise.md").write_text(report(res))
    return res


if __name__ == "__main__":
    main()
