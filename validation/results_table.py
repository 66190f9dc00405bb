"""The results table ``docs/results.md``: δ_alg, δ_NN(t) at early and long times, and δ_50 at d = 1000.

Catalogue: targets ``z**2``, ``z**2 - 1``, ``abs(z)``, ``z**2 + 0.5*eps``, ``z1*z2``,
``z1 + z1*z2``; activations GeLU, r² (``quad``), ReLU, tanh; widths m = 1 and 2 (second-layer
weights all ones, no bias, square loss ``(y − f)²/2``, random start ``q0 = 1``). Step sizes:
η = 0.5 (GeLU, ReLU, tanh) and 0.05 (r², as in the threshold runs of ``docs/findings.md``
§4.3: with η = 0.1 the r² DMFT diverges at δ = 1.5, the low end of the bracket — non-finite
kernels by step 7 — and the search fails).

Columns, each with the command that reproduces it (listed under the table) and its error:

* **δ_alg** — :func:`dmftsolve.alg_threshold` (weak recovery; depends on the target only),
  ± its quadrature / Monte Carlo error. 0 when a direction is learned at any δ (a trivial
  part, ``E[z|y] ≠ 0``).
* **δ_NN(t·η = 1)** — :func:`dmftsolve.delta_nn` at ``t = round(1/η)``: the early-time
  threshold, the one near GD's finite-d transition (findings §4.3); mean ± standard error over
  3 DMFT seeds (10⁴ paths each, bracket 1–40, ``xtol`` 1).
* **δ_NN long** — the long-time rule (``T = 200`` and ``T/2``), same settings; at width 2 the
  DMFT drops innovations below ``LONG_NULL_RTOL_M2 = 1e-3`` of the variance instead of 1e-4
  (with 1e-4 the Stein recursion diverged on three GeLU rows, findings §4.9). For unbounded
  labels this finite-t threshold grows with the number of paths (findings §5.1–5.3): read it
  as the value at 10⁴ paths.
* **δ_50 (d = 1000)** — :func:`dmftsolve.finite_d.transition` exactly as ``dmftsolve transition``
  runs it: the self-bracketing search (no grid) with every :class:`TransitionSettings` default
  (``tol`` 0.15, at most 600 draws in batches of 8, kernel paths by width and label, responses by
  regression, compact history, giving up), seed :data:`D50_SEED`, the row's T, ``start`` the
  row's GD δ_50 rounded to 0.1 where there are GD counts for the row (:func:`gd_sources`), else
  :data:`D50_START`; ± the posterior error. Computed for every row: a label without a hard
  direction is refused by the library ("undefined", with its message), a search that stops
  early shows its status and reason. A row whose search ``validation/width_transition.py`` ran
  with exactly these settings (:func:`width_theory`) takes that search. GD's δ_50 is shown beside
  the theory's where known: a self-bracketing search of ``validation/width_transition.py``, the
  counts of ``validation/gd_transition_counts.py`` or a spot check (below), the one with the most
  trials among those counting a first passage, as the theory does.

Below the table, "δ_50 against GD" gives theory − GD per row and whether it is within
max(0.3, 5 %) of GD; "GD spot checks" lists the ``dmftsolve simulate --json`` outputs saved as
``validation/results/gd_check_*.json`` (:func:`gd_checks`; each row prints the command that
reproduces its file).

A row whose quantity fails says why (the status message: e.g. no hard direction, so δ_NN
is undefined; a bracket without a sign change; a solver failure).

Each (row, quantity) is cached under the hash of its full settings in
``<out>/cache/results_table/`` (default ``validation/results/figures/``, beside the
figures), so re-running only computes what is missing and ``--replot`` rebuilds the page
from the cache. The (row, quantity) jobs go through the executor (``--workers``, ``--dask``).

Run
---
Full size (the δ_NN cells take hours; the δ_50 column alone: ``--quantities d50``)::

    python -m validation.results_table --workers 2

Cost on one core (each cell's own time is in ``results_table.json`` and under Commands on the
page): δ_alg 0.1–8 s per target; δ_NN(t·η = 1), 3 seeds, 8 s per GeLU m = 1 row and 4–9 min
per GeLU m = 2 row; the long-time rule (T = 200) about 50 s per m = 1 row and 1.5–8 min per
m = 2 row; δ_50 one search per row, 10 s to 20 min. So the 24 m = 1 rows take about 30 min and
the 24 m = 2 rows about 2 CPU-hours.
``--quantities`` computes a subset
(e.g. ``alg,nn_early``); ``--only``, ``--widths``, ``--activations`` select rows.
``--quick`` (the test): three rows with tiny settings, written to ``--out``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shlex
import sys
import time
from concurrent.futures import Future, as_completed
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from dmftsolve import Problem, __version__
from dmftsolve.finite_d import TransitionSettings, resolve_settings
from dmftsolve.results import Status, git_commit, jsonable
from validation import script_parser
from validation.figures.common import DEFAULT_OUT, PointCache, command_line, make_executor

ROOT = Path(__file__).resolve().parents[1]
NAME = "results_table"
TARGETS = ["z**2", "z**2 - 1", "abs(z)", "z**2 + 0.5*eps", "z1*z2", "z1 + z1*z2"]
ACTIVATIONS = {"gelu": 0.5, "quad": 0.05, "relu": 0.5, "tanh": 0.5}
WIDTHS = [1, 2]
#: lower end of the δ_NN search per activation: r² GD (and its DMFT) diverges at δ = 1 with
#: η = 0.1 (non-finite gradient), which fails the whole search; findings §4.3 used 1.5
LOW_BRACKET = {"quad": 1.5}
KINDS = ("alg", "nn_early", "nn_long", "d50")
#: Root seed of every δ_50 search (the README's and width_transition's command lines use seed 1)
D50_SEED = 1
#: First δ of a δ_50 search on a row without GD counts (``TransitionSettings.start``'s default)
D50_START = 6.0
#: Entries of the δ_NN cells' cache keys that set nothing any more (the δ_50 column's former
#: fixed grid and its draws per δ): kept so the stored δ_NN cells are found under their keys.
NN_KEY_FIELDS = ("n_paths", "replicates", "bracket", "grid", "xtol", "long_time", "d", "transition_steps")
NN_KEY_LEGACY = {"draws": 8, "transition_grid": (2.0, 3.5, 5.0, 6.5, 8.0, 10.0, 13.0)}
#: ``null_rtol`` of the DMFT in the width-2 long-time cells (the only cells where the default
#: 1e-4 let the Stein recursion diverge: GeLU on ``z²``, ``z² − 1``, ``z² + 0.5 ε``, docs/findings.md
#: §4.9). Added to those cells' cache keys only, so the other keys are unchanged.
LONG_NULL_RTOL_M2 = 1e-3
#: The cut-off of the δ_50 searches stored before ``TransitionSettings`` had ``null_rtol``: their
#: draws used the Stein default, this value. A search with this cut-off is also looked up under
#: its key without the field, so those cells are found.
D50_LEGACY_NULL_RTOL = 1e-4
#: ``transition``: the δ_50 searches' TransitionSettings besides steps, seed and start (empty:
#: the library's defaults; the quick configuration makes them small)
FULL: dict[str, Any] = {"n_paths": 10_000, "replicates": 3, "bracket": (1.0, 40.0), "grid": 6, "xtol": 1.0,
                        "long_time": 200, "d": 1000, "transition_steps": 400, "transition": {}}
QUICK: dict[str, Any] = {
    "n_paths": 1000, "replicates": 1, "bracket": (1.0, 20.0), "grid": 3, "xtol": 4.0, "long_time": 10,
    "d": 40, "transition_steps": 10,
    "transition": {"n_paths": 400, "draws": 4, "max_draws": 24, "tol": 2.0},
    "rows": [("z**2 - 1", "gelu", 1), ("z1 + z1*z2", "gelu", 1), ("abs(z)", "quad", 2)]}
#: ``dmftsolve transition`` options of the TransitionSettings fields a configuration may set
TRANSITION_FLAGS = {"n_paths": "--paths", "draws": "--draws", "max_draws": "--max-draws", "tol": "--tol"}


def _q(s: str) -> str:
    return shlex.quote(s)


def row_problem(target: str, act: str, m: int, steps: int) -> Problem:
    return Problem.build(target=target, activation=act, m=m, eta=ACTIVATIONS[act], steps=steps)


def bracket(act: str, cfg: dict[str, Any]) -> tuple[float, float]:
    lo, hi = cfg["bracket"]
    return (max(lo, LOW_BRACKET.get(act, lo)), hi)


def commands(target: str, act: str, m: int, cfg: dict[str, Any]) -> dict[str, str]:
    eta = ACTIVATIONS[act]
    t_early = max(1, int(round(1.0 / eta)))
    lo, hi = bracket(act, cfg)
    common = (f"--target {_q(target)} --activation {act} --m {m} --eta {eta:g} "
              f"--bracket {lo:g},{hi:g} --grid {cfg['grid']} "
              f"--xtol {cfg['xtol']:g} --paths {cfg['n_paths']} --replicates {cfg['replicates']}")
    return {
        "alg": f"dmftsolve alg-threshold --target {_q(target)}",
        "nn_early": f"dmftsolve threshold {common} --t {t_early}",
        "nn_long": f"dmftsolve threshold {common} --t long --long-time {cfg['long_time']}"
                   + (f" --null-rtol {r:g}" if (r := long_null_rtol("nn_long", m)) is not None else ""),
    }


def transition_settings(cfg: dict[str, Any], start: float) -> TransitionSettings:
    """The δ_50 search of a row: the library's defaults with the configuration's ``transition``
    fields (none at full size), the row's T, seed :data:`D50_SEED` and ``start``."""
    return TransitionSettings(steps=cfg["transition_steps"], seed=D50_SEED, start=float(start),
                              **cfg["transition"])


def transition_command(target: str, act: str, m: int, cfg: dict[str, Any], start: float) -> str:
    """The ``dmftsolve transition`` command line of a row's δ_50 search (:func:`transition_settings`)."""
    extra = "".join(f" {TRANSITION_FLAGS[k]} {v:g}" for k, v in cfg["transition"].items())
    return (f"dmftsolve transition --target {_q(target)} --activation {act} --m {m} "
            f"--eta {ACTIVATIONS[act]:g} --steps {cfg['transition_steps']} --d {cfg['d']} "
            f"--seed {D50_SEED} --start {start:g}{extra}")


def d50_key(target: str, act: str, m: int, cfg: dict[str, Any], start: float) -> dict[str, Any]:
    """The cache key of a row's δ_50: the problem, d and every field of the search's settings
    with the kernel paths resolved (so a change of the library's defaults is a new key)."""
    p = row_problem(target, act, m, cfg["transition_steps"])
    s = resolve_settings(transition_settings(cfg, start), p)
    return {"kind": "d50", "target": target, "activation": act, "m": m, "eta": ACTIVATIONS[act],
            "d": cfg["d"], "transition": dataclasses.asdict(s)}


# --------------------------------------------------------------------------- quantities
def compute(kind: str, target: str, act: str, m: int, cfg: dict[str, Any],
            start: float = D50_START) -> dict[str, Any]:
    """One quantity of one row; never raises (a failure is returned with its reason). ``start``:
    the first δ of the δ_50 search (:func:`transition_settings`)."""
    t0 = time.perf_counter()
    try:
        if kind == "alg":
            from dmftsolve import alg_threshold

            r = alg_threshold(target, throw=False)
            return {"value": r.delta_alg if r.ok else None, "error": r.error if r.ok else None,
                    "status": r.status.value, "why": "" if r.ok else r.message[:200],
                    "trivial": bool(r.trivial), "elapsed": time.perf_counter() - t0}
        if kind in ("nn_early", "nn_long"):
            from dmftsolve import ThresholdSettings, delta_nn

            eta = ACTIVATIONS[act]
            t = max(1, int(round(1.0 / eta))) if kind == "nn_early" else None
            s = ThresholdSettings(bracket=bracket(act, cfg), grid=cfg["grid"], xtol=cfg["xtol"],
                                  n_paths=cfg["n_paths"], replicates=cfg["replicates"],
                                  long_time=cfg["long_time"], workers=1,
                                  null_rtol=long_null_rtol(kind, m))
            r = delta_nn(row_problem(target, act, m, t or cfg["long_time"]), t, settings=s, throw=False)
            ok = r.ok and r.delta_nn is not None
            return {"value": r.delta_nn if ok else None, "error": r.stderr if ok else None,
                    "bracket": r.bracket, "status": r.status.value,
                    "why": "" if ok else (r.message or "no threshold")[:600], "hard": list(r.hard),
                    "warnings": [w[:160] for w in r.warnings][:3], "elapsed": time.perf_counter() - t0}
        if kind == "d50":
            return transition_cell(target, act, m, cfg, start)
    except Exception as exc:  # noqa: BLE001 - the row says why
        return {"value": None, "status": "error", "why": f"{type(exc).__name__}: {str(exc)[:200]}",
                "elapsed": time.perf_counter() - t0}
    raise ValueError(f"unknown quantity {kind!r}")


def transition_cell(target: str, act: str, m: int, cfg: dict[str, Any], start: float) -> dict[str, Any]:
    """A row's δ_50 search (:func:`transition_settings`): its δ_50 ± error and status, the
    library's message when it refuses the problem or the search stops early, the counts, and
    the wall and CPU time (this process, one BLAS thread)."""
    from dmftsolve.finite_d import transition, transition_directions

    t0, c0 = time.perf_counter(), time.process_time()
    p = row_problem(target, act, m, cfg["transition_steps"])
    stamp = {"version": __version__, "commit": git_commit()}
    try:
        transition_directions(p)
    except ValueError as exc:  # refused: e.g. no hard direction, so no transition to predict
        return {"value": None, "error": None, "status": "refused", "why": str(exc)[:600], **stamp}
    with threadpool_limits(1):
        c = transition(p, cfg["d"], None, settings=transition_settings(cfg, start), throw=False)
    ok = c.status in (Status.SUCCESS, Status.NOT_CONVERGED) and math.isfinite(c.delta_50)
    return {"value": c.delta_50 if ok else None, "error": c.delta_50_err if ok else None,
            "status": c.status.value, "why": c.message[:600], "width": c.width if ok else None,
            "deltas": c.deltas.tolist(), "successes": c.successes.tolist(), "draws": c.draws.tolist(),
            "total_draws": c.diagnostics["total_draws"], "given_up_draws": c.diagnostics["given_up_draws"],
            "warnings": [w[:300] for w in c.warnings], "elapsed": time.perf_counter() - t0,
            "cpu": time.process_time() - c0, **stamp}


def long_null_rtol(kind: str, m: int) -> float | None:
    """``null_rtol`` of a cell's DMFT runs: :data:`LONG_NULL_RTOL_M2` for the width-2 long-time
    cells, else None (the DMFT's default)."""
    return LONG_NULL_RTOL_M2 if kind == "nn_long" and m > 1 else None


# --------------------------------------------------------------------------- page
FIGURES = {
    "success_curves": "GD success probability and final cosine vs δ, GeLU and r² on z² and z² − 1 "
                      "(paper Figs 1, 4, 5), with the finite-d transition and δ_NN(t·η = 1)",
    "spectral_init": "optimal spectral start (Luo–Alghamdi–Lu T*) beside the random one; closed-form "
                     "overlap ρ(δ) and a warm-start DMFT",
    "grokking": "Fig. 2: losses and cosine vs steps at d = 5000, δ = 17.5 (centred label, trained "
                "bias); DMFT first phase and predicted escape",
    "hessian_spectra": "Hessian spectra along restricted GD: histogram, DMFT bulk density, outliers",
}


def command_md(cmd: str) -> str:
    """``cmd`` as Markdown code, with the ``--replot`` note of :func:`common.command_line` outside
    the backticks (the note is not part of the command)."""
    note = "(redrawn from the cache with --replot)"
    base, sep, _ = cmd.partition(note)
    base = base.strip()
    return f"`{base}`" + (" (redrawn from the cache with `--replot`)" if sep else "")


def figure_status(name: str) -> str:
    """What the figure's JSON in the default output directory says was run (or 'not run')."""
    path = DEFAULT_OUT / f"{name}.json"
    if not path.exists():
        return "not generated yet (no PNG or JSON in `validation/results/figures/`)"
    try:
        data = json.loads(path.read_text())
        st = data["settings"]
    except (OSError, ValueError, KeyError):
        return "unreadable JSON"
    if st.get("quick"):
        return "only --quick"
    keys = ("cases", "ds", "d", "delta", "trials", "deltas", "convention")
    desc = "; ".join(f"{k} = {', '.join(map(str, v)) if isinstance(v, list) else v}"
                     for k in keys if (v := st.get(k)) is not None)
    return f"{command_md(data.get('command', ''))}; ran {desc}".replace("|", "/")


# --------------------------------------------------------------------------- number display
#: δ_alg in closed form, for the catalogue targets that have one: for k = 1 noiseless labels
#: δ_alg = 1/E_y[(E[z²|y] − 1)²] (weak_recovery module docstring), and z², z² − 1 and |z| all
#: determine z², so E[z²|y] = z² and δ_alg = 1/E[(z² − 1)²] = 1/2; z1*z2: the Bessel-K form
#: 1/(1 + E[(a − 1)²]) of tests/test_weak_recovery.py (REF_PRODUCT, mpmath at 30 digits).
EXACT_ALG = {"z**2": (0.5, "0.5"), "z**2 - 1": (0.5, "0.5"), "abs(z)": (0.5, "0.5"),
             "z1*z2": (0.59375109822225719955, "0.59375")}
#: δ_alg is computed by deterministic quadrature asked for this relative accuracy
#: (``alg_threshold(rtol=1e-8)``); its self-reported error can be far smaller than its actual one
ALG_RTOL = 1e-8


def _sci(x: float) -> str:
    """``x`` to one significant digit in e-notation without padding zeros (``2e-9``)."""
    mant, _, exp = f"{x:.0e}".partition("e")
    return f"{mant}e{int(exp)}"


def round_pm(value: float, err: float) -> str:
    """``value ± err`` by the project's one rounding rule (:func:`dmftsolve.cli._common.format_pm`:
    the error to 1–2 significant digits, the value to the same decimal place)."""
    from dmftsolve.cli._common import format_pm

    return format_pm(value, err)


def short_reason(why: str) -> str:
    """A failed quantity's status message cut to its first complete clause (never mid-word)."""
    why = re.sub(r"^[A-Za-z]+Error: ", "", why.strip())
    why = re.sub(r"^target='[^']*':? ", "", why)
    first = re.split(r"; |\. ", why, maxsplit=1)[0].rstrip(".")
    if len(first) > 110:
        cut = first[:110].rsplit(" ", 1)[0].rstrip(",:;")
        first = f"{cut} … (full message in results_table.json)"
    return first


def not_converged(why: str, long_time: int = FULL["long_time"]) -> str | None:
    """The cell of a long-time δ_NN whose rule was not met: the value at T with its error, and at
    T/2 where the (untruncated) message has it; ``None`` if the message has no value.
    ``long_time`` is the T the rule ran at, shown when the message is cut before it names T."""
    full = re.search(r"δ_NN = ([0-9.]+) ± ([0-9.eE+-]+) \(mean", why)
    if not full:
        return None
    at_t = round_pm(float(full.group(1)), float(full.group(2)))
    half = re.search(r"δ_NN\(T/2=(\d+)\) = ([0-9.]+) ± ([0-9.eE+-]+) vs δ_NN\(T=(\d+)\)", why)
    if half:
        return (f"{at_t} at T = {half.group(4)}, {round_pm(float(half.group(2)), float(half.group(3)))} "
                f"at T = {half.group(1)}: not converged in T")
    return (f"{at_t} at T = {long_time}, not converged in T (δ_NN(T/2) differs by more than the "
            "tolerance)")


def no_hard_direction(rows: list[dict[str, Any]], target: str) -> bool:
    """Whether any cached δ_NN of ``target`` failed because it has no hard direction."""
    return any("has no hard direction" in ((r.get(k) or {}).get("why") or "")
               for r in rows if r["target"] == target for k in ("nn_early", "nn_long"))


def fmt_alg(q: dict[str, Any] | None, target: str, easy: bool) -> str:
    """The δ_alg cell: a deterministic quadrature is shown to the digits it is good for."""
    if q is None:
        return "not run yet"
    v, err = q.get("value"), q.get("error")
    if v is None:
        return f"— ({short_reason(q.get('why', ''))})".replace("|", "/")
    if math.isinf(v):
        return "∞ (G(y) ≡ 0: no first-order method learns the hard directions)"
    if v == 0.0 and q.get("trivial"):
        return ("0: no hard direction, every direction is easy" if easy
                else "0 for the directions with E[z|y] ≠ 0 (the rest not computed)")
    exact = EXACT_ALG.get(target)
    if exact is not None and abs(v - exact[0]) <= 10 * ALG_RTOL * exact[0]:
        return f"{exact[1]} (closed form)"
    if err is not None and math.isfinite(err) and err > ALG_RTOL * abs(v):
        return round_pm(v, err)  # a Monte Carlo ("binned") value: its error matters
    return f"{v:.4f}"


def fmt(q: dict[str, Any] | None, long_time: int = FULL["long_time"]) -> str:
    """A δ_NN cell: ``value ± error`` rounded by :func:`round_pm`, or why there is none
    (``long_time``: the T of the long-time rule, for a 'not converged' cell)."""
    if q is None:
        return "not run yet"
    v = q.get("value")
    if v is None:
        why = q.get("why", "")
        above = re.search(r"no hard outlier up to δ=([0-9.]+)", why)
        if q.get("status") == "no_root" and above:
            return f"> {float(above.group(1)):g} (no negative hard outlier in the bracket)"
        if "has no hard direction" in why:
            return "undefined: no hard direction (every direction is learned in O(1) steps)"
        if q.get("status") == "not_converged":
            cell = not_converged(why, long_time)
            if cell:
                return cell
        return f"— ({q.get('status')}: {short_reason(why)})".replace("|", "/")
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    err = q.get("error")
    if err is not None and math.isfinite(err) and err > 0:
        return round_pm(v, err)
    if q.get("bracket"):
        return f"{v:.2f} [{q['bracket'][0]:.2f}, {q['bracket'][1]:.2f}]"
    return f"{v:.2f}"


def alg_notes(rows: list[dict[str, Any]]) -> str:
    """How far the computed δ_alg are from the closed forms, against their self-reported errors."""
    devs, errs = [], []
    for r in rows:
        q, exact = r.get("alg") or {}, EXACT_ALG.get(r["target"])
        if q.get("value") is None or exact is None or q.get("trivial"):
            continue
        devs.append(abs(q["value"] - exact[0]))
        if q.get("error") is not None:
            errs.append(q["error"])
    if not devs:
        return ""
    text = f"the computed values differ from them by at most {_sci(max(devs))}"
    if errs and max(devs) > max(errs):
        text += (f", more than the quadrature's self-reported errors ({_sci(min(errs))} to "
                 f"{_sci(max(errs))}), so those are not printed: the requested relative accuracy "
                 f"{_sci(ALG_RTOL)} is the honest bound")
    return text


GD_CHECK_GLOB = "gd_check_*.json"  # `dmftsolve simulate --json` outputs in validation/results/


def simulate_command(st: dict[str, Any]) -> str:
    """The ``dmftsolve simulate`` command line that reproduces a ``--json`` output's settings."""
    pr, sim = st["problem"], st["simulate"]
    width = ["--m", str(pr["m"])] if pr.get("m", 1) != 1 else []  # the CLI default is m = 1
    parts = ["dmftsolve simulate", "--target", shlex.quote(pr["target"]), "--activation",
             pr["activation"], *width, "--eta", f"{pr['eta']:g}", "--steps", str(pr["steps"]), "--d",
             str(st["d"]), "--delta", ",".join(f"{x:g}" for x in st["deltas"]), "--trials",
             str(st["trials"]), "--dtype", sim["dtype"], "--success-threshold",
             f"{st['success_threshold']:g}", "--seed", str(st["root_seed"]["entropy"]), "--json"]
    return " ".join(parts)


def load_gd_checks(rows: list[dict[str, Any]], cfg: dict[str, Any],
                   results: Path = ROOT / "validation" / "results") -> list[dict[str, Any]]:
    """The GD spot checks: one ``dmftsolve simulate --json`` output per file ``GD_CHECK_GLOB``,
    with GD's δ_50 (the probit fit of :func:`dmftsolve.finite_d.probit_fit`
    to its counts), the row it checks (``row``: 1-based, or None) and whether it ran at that
    row's set-up (``same``: the table's d and step budget, the row's η)."""
    import numpy as np

    from dmftsolve.finite_d import probit_fit

    out = []
    for f in sorted(results.glob(GD_CHECK_GLOB)):
        summary = json.loads(f.read_text())["summary"]
        st, pr = summary["settings"], summary["settings"]["problem"]
        trials = np.full(len(st["deltas"]), st["trials"])
        wins = np.rint(np.asarray(summary["success_rate"]) * trials).astype(int)
        d50, err, _ = probit_fit(np.asarray(st["deltas"], float), wins, trials)
        match = [i for i, r in enumerate(rows, 1) if r["target"] == pr["target"]
                 and r["activation"] == pr["activation"] and r["m"] == pr["m"]]
        row = match[0] if match else None
        same = (row is not None and st["d"] == cfg["d"] and pr["steps"] == cfg["transition_steps"]
                and math.isclose(pr["eta"], rows[row - 1]["eta"]))
        out.append({"file": f.name, "settings": st, "problem": pr, "row": row, "same": same,
                    "d50": float(d50), "error": float(err),
                    "counts": [(int(k), int(n), float(x)) for k, n, x in zip(wins, trials, st["deltas"],
                                                                              strict=True)]})
    return out


def gd_checks(rows: list[dict[str, Any]], cfg: dict[str, Any],
              results: Path = ROOT / "validation" / "results") -> list[str]:
    """The section listing GD's spot checks (:func:`load_gd_checks`) with theory − GD for those
    run at their row's d, η and step budget."""
    checks = load_gd_checks(rows, cfg, results)
    if not checks:
        return []
    out = ["", "## GD spot checks", "",
           "GD from a random start with the simulator (float32; success = final cosine above the "
           "threshold after the step budget, where the theory counts a first passage above 1/2 by "
           "then). GD's δ_50 is a probit fit to its counts ± bootstrap error; theory − GD is against "
           "the row's δ_50 cell. For m = 2 the cosine is that between span(W) and span(Θ*) (the "
           "simulator's).", "",
           "| row | GD: successes at δ | GD δ_50 | theory − GD | command |",
           "|---|---|---|---|---|"]
    for c in checks:
        st, pr, row = c["settings"], c["problem"], c["row"]
        tv = ((rows[row - 1].get("d50") or {}).get("value")) if row else None
        diff = f"{tv - c['d50']:+.2f}" if c["same"] and tv is not None and math.isfinite(c["d50"]) \
            and not _no_gd_point(c) else "—"
        counts = ", ".join(f"{k}/{n} at {x:g}" for k, n, x in c["counts"])
        label = (f"{row} (`{pr['target']}`, {pr['activation']}, m = {pr['m']})" if row
                 else f"`{pr['target']}`, {pr['activation']}, m = {pr['m']}")
        if not c["same"]:
            label += f" (d = {st['d']}, η = {pr['eta']:g}, {pr['steps']} steps: not the row's set-up)"
        out.append(f"| {label} | {counts} | {gd_d50_text(c)} | {diff} | "
                   f"`{simulate_command(st)} > validation/results/{c['file']}` |")
    return out


def _no_gd_point(check: dict[str, Any]) -> bool:
    """Whether a spot check's trials all failed or all succeeded (no 50 % point to fit)."""
    return all(k == 0 for k, _, _ in check["counts"]) or all(k == n for k, n, _ in check["counts"])


def gd_d50_text(check: dict[str, Any]) -> str:
    """GD's δ_50 ± error, or a bound when every trial failed (or succeeded) on the grid, where
    the probit fit has no 50 % point."""
    wins = [k for k, _, _ in check["counts"]]
    if all(k == 0 for k in wins):
        return f"> {check['counts'][-1][2]:g} (no GD trial succeeded at any δ of the grid)"
    if all(k == n for k, n, _ in check["counts"]):
        return f"< {check['counts'][0][2]:g} (every GD trial succeeded at every δ of the grid)"
    return round_pm(check["d50"], check["error"])


def _width_data() -> tuple[Any, dict[str, Any]] | None:
    """``(the width_transition module, its stored searches)``, or None without the JSON."""
    path = ROOT / "validation" / "results" / "width_transition.json"
    if not path.exists():
        return None
    from validation import width_transition as wt

    return wt, json.loads(path.read_text())


def _row_setup(c: dict[str, Any], cfg: dict[str, Any]) -> tuple[str, str, int, float] | None:
    """The row key ``(target, σ, m, η)`` of a ``width_transition`` case run at a table row's
    set-up (the row's η, the table's T, unit output weights, no ridge, no bias), else None."""
    if (c["steps"] != cfg["transition_steps"] or ACTIVATIONS.get(c["activation"]) != c["eta"]
            or any(a != 1.0 for a in c.get("a") or [1.0]) or c.get("lam", 0.0) or c.get("bias")):
        return None
    return (c["target"], c["activation"], c["m"], float(c["eta"]))


def width_theory(cfg: dict[str, Any]) -> dict[tuple[str, str, int, float], dict[str, Any]]:
    """The theory searches of ``validation/width_transition.py`` run exactly as a row's δ_50
    (:func:`transition_settings` at d ``cfg["d"]``): a case at the row's set-up whose stored
    settings are the library's current defaults (responses by regression, the kernel paths and
    cut-off of :func:`~dmftsolve.finite_d.resolve_settings` for the width and label, ``tol``,
    ``max_draws``, ``draws``, compact history, float32 paths) and seed :data:`D50_SEED`, as a
    δ_50 cell refitted with the search's error model (``wt._refit``), ``{row key: cell}``."""
    loaded = _width_data()
    if loaded is None or cfg["transition"]:
        return {}
    wt, data = loaded
    base = TransitionSettings()
    out: dict[tuple[str, str, int, float], dict[str, Any]] = {}
    for case, c in wt.CASES.items():
        row = _row_setup(c, cfg)
        theory = data.get(f"{case}|{cfg['d']}|theory")
        if row is None or theory is None or not c.get("defaults"):
            continue
        # a search stored before the settings had a cut-off ran with the Stein default
        st = {"null_rtol": D50_LEGACY_NULL_RTOL, **theory.get("settings", {})}
        prob = Problem.build(target=c["target"], activation=c["activation"], m=c["m"])
        res = resolve_settings(base, prob)  # the kernel-path policy and cut-off of the width
        want = {"stein_regression": True, "n_paths": res.n_paths, "paths_per_sample": res.paths_per_sample,
                "null_rtol": res.null_rtol, "tol": base.tol, "max_draws": base.max_draws,
                "draws": base.draws, "seed": D50_SEED, "history": base.history,
                "path_dtype": base.path_dtype, "construction": base.construction}
        if any(st.get(k) != v for k, v in want.items()):
            continue
        t = wt._refit(theory)
        ok = t["status"] in ("success", "not_converged") and math.isfinite(t["delta_50"])
        out[row] = {"value": t["delta_50"] if ok else None, "error": t["err"] if ok else None,
                    "status": t["status"], "why": t.get("message", ""), "deltas": list(t["deltas"]),
                    "successes": list(t["successes"]), "draws": list(t["trials"]),
                    "total_draws": int(sum(t["trials"])), "elapsed": t.get("seconds"),
                    "version": st.get("version"), "commit": st.get("commit"), "case": case,
                    "start": float(c["start"])}
    return out


def _gd_counts_data(results: Path) -> tuple[Any, dict[str, Any]] | None:
    """``(the gd_transition_counts module, its stored summary)``, or None without the JSON."""
    path = results / "gd_transition_counts.json"
    if not path.exists():
        return None
    from validation import gd_transition_counts as gc

    return gc, json.loads(path.read_text())["summary"]


def gd_sources(rows: list[dict[str, Any]], cfg: dict[str, Any],
               results: Path = ROOT / "validation" / "results") -> dict[int, list[dict[str, Any]]]:
    """GD's δ_50 at each row's set-up (the table's d and T, the row's η), ``{row (1-based): [...]}``:
    the self-bracketing searches of ``validation/width_transition.py`` (``"search"``, refitted),
    the counts of ``validation/gd_transition_counts.py`` (``"counts"``) — both count a first
    passage above 1/2 by step T, as the theory does — and the spot checks (``"spot check"``,
    :func:`load_gd_checks`: the final cosine). Each: ``value`` (None where no trial or every
    trial succeeded), ``error``, ``trials``, ``first_passage``, ``text`` and ``what``."""
    index = {(r["target"], r["activation"], r["m"], float(r["eta"])): i for i, r in enumerate(rows, 1)}
    out: dict[int, list[dict[str, Any]]] = {}
    loaded = _width_data()
    if loaded is not None:
        wt, data = loaded
        for case, c in wt.CASES.items():
            row = _row_setup(c, cfg)
            gd = data.get(f"{case}|{cfg['d']}|gd")
            if row not in index or gd is None or c.get("gd_of"):
                continue
            g = wt._refit(gd)
            out.setdefault(index[row], []).append({
                "source": "search", "value": g["delta_50"], "error": g["err"],
                "trials": int(sum(g["trials"])), "first_passage": True,
                "text": round_pm(g["delta_50"], g["err"]),
                "what": f"`python -m validation.width_transition --side gd --only {case}`"})
    counts = _gd_counts_data(results)
    if counts is not None:
        gc, summary = counts
        for key, v in summary.items():
            case, d = key.split("|")
            c = gc.CASES.get(case)
            row = (c["target"], c["activation"], 1, float(c["eta"])) if c else None
            if row not in index or int(d) != cfg["d"] or c["T"] != cfg["transition_steps"]:
                continue
            out.setdefault(index[row], []).append({
                "source": "counts", "value": v["delta_50"], "error": v["delta_50_err"],
                "trials": int(sum(p["trials"] for p in v["rows"])), "first_passage": True,
                "text": round_pm(v["delta_50"], v["delta_50_err"]),
                "what": "`python -m validation.gd_transition_counts --cases "
                        + ",".join(str(n) for n, run in gc.RUNS.items()
                                   if run["case"] == case and run["d"] == int(d)) + "`"})
    for c in load_gd_checks(rows, cfg, results):
        if not c["same"]:
            continue
        none = _no_gd_point(c)
        out.setdefault(c["row"], []).append({
            "source": "spot check", "value": None if none else c["d50"],
            "error": None if none else c["error"],
            "trials": sum(n for _, n, _ in c["counts"]), "first_passage": False, "text": gd_d50_text(c),
            "what": f"`validation/results/{c['file']}`"})
    return out


def best_gd(sources: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The GD source a row shows: first passages before final cosines, then the most trials."""
    if not sources:
        return None
    return max(sources, key=lambda g: (g["first_passage"], g["trials"]))


def d50_start(gd: dict[str, Any] | None) -> float:
    """The first δ of a row's search: GD's δ_50 rounded to 0.1 where GD has one, else
    :data:`D50_START`."""
    if gd is None or gd["value"] is None or not math.isfinite(gd["value"]):
        return D50_START
    from dmftsolve.thresholds.delta50 import DELTA_RANGE

    return float(min(max(round(gd["value"], 1), DELTA_RANGE[0]), DELTA_RANGE[1]))


def fmt_d50(q: dict[str, Any] | None) -> str:
    """The theory's part of a δ_50 cell: ``δ_50 ± error``, with the status and reason when the
    search stopped before its error reached ``tol``; why there is none otherwise."""
    if q is None:
        return "not run yet"
    status, why = q.get("status"), q.get("why") or ""
    if status == "refused":
        if "has no hard direction" in why:
            return "undefined: no hard direction (refused: there is no transition to predict)"
        return f"refused: {short_reason(why)}".replace("|", "/")
    v, err = q.get("value"), q.get("error")
    if v is not None:
        cell = round_pm(v, err) if err is not None and math.isfinite(err) and err > 0 else f"{v:.2f}"
        return cell + (f" ({status}: {short_reason(why)})".replace("|", "/") if status != "success" else "")
    edge = re.search(r"no success by step T up to delta = ([0-9.]+)", why)
    if status == "no_root" and edge:
        return f"> {edge.group(1)} (no_root: no draw passed by step T at any δ up to {edge.group(1)})"
    return f"— ({status}: {short_reason(why)})".replace("|", "/")


def d50_cell(q: dict[str, Any] | None, gd: dict[str, Any] | None) -> str:
    """The δ_50 cell: the theory's (:func:`fmt_d50`) and, where known, GD's (:func:`best_gd`)."""
    return fmt_d50(q) + (f" (GD: {gd['text']}, {gd['source']})" if gd is not None else "")


def within_bar(theory: float, gd: float) -> bool:
    """Whether the theory's δ_50 is within max(0.3, 5 %) of GD's (the project's bar)."""
    return abs(theory - gd) <= max(0.3, 0.05 * gd)


def agreement(rows: list[dict[str, Any]], gds: dict[int, dict[str, Any]]) -> list[str]:
    """The section "δ_50 against GD": theory − GD (in combined standard errors) per row where
    both have a δ_50, whether it is within max(0.3, 5 %) of GD, and the count."""
    lines, hits, both = [], 0, 0
    for i, r in enumerate(rows, 1):
        q, g = r.get("d50") or {}, gds.get(i)
        if g is None:
            continue
        tv, gv = q.get("value"), g["value"]
        if tv is None or gv is None:
            lines.append(f"| {i} | — | — | {g['source']}: {g['what']} |")
            continue
        both += 1
        ok = within_bar(tv, gv)
        hits += ok
        se = math.hypot(q.get("error") or 0.0, g.get("error") or 0.0)
        z = f" ({abs(tv - gv) / se:.1f} s.e.)" if se > 0 else ""
        lines.append(f"| {i} | {tv - gv:+.2f}{z} | {'yes' if ok else 'no'} | {g['source']}: {g['what']} |")
    if not lines:
        return []
    return ["", "## δ_50 against GD", "",
            f"Rows whose δ_50 cell has GD beside it: theory − GD (and in combined standard errors), and "
            f"whether it is within max(0.3, 5 %) of GD. **{hits} of {both}** rows where both have a "
            "δ_50 are within. GD's source: 'search' (self-bracketing, first passage), 'counts' "
            "(fixed grid, first passage), 'spot check' (fixed grid, final cosine; section below).", "",
            "| row | theory − GD | within max(0.3, 5 %)? | GD |", "|---|---|---|---|", *lines]


def same_cells(rows: list[dict[str, Any]]) -> str:
    """`` (rows i and j: …)`` for the first two δ_NN cells of different rows whose value and error
    are identical, or ``""`` if there are none."""
    seen: dict[tuple[float, float], int] = {}
    for i, r in enumerate(rows, 1):
        for k in ("nn_early", "nn_long"):
            q = r.get(k) or {}
            if q.get("value") is None or q.get("error") is None:
                continue
            key = (q["value"], q["error"])
            if key in seen and seen[key] != i:
                return f" (here rows {seen[key]} and {i}: {round_pm(*key)})"
            seen.setdefault(key, i)
    return ""


def render(rows: list[dict[str, Any]], cfg: dict[str, Any], cmd: str, quick: bool) -> str:
    seeds = f"{cfg['replicates']} DMFT seed{'s' if cfg['replicates'] != 1 else ''}"
    easy_targets = sorted({r["target"] for r in rows if no_hard_direction(rows, r["target"])})
    exact_note = alg_notes(rows)
    lines = [
        "# Results table: δ_alg, δ_NN(t) and the finite-d δ_50",
        "",
        f"Generated by {command_md(cmd)}; do not edit by hand."
        + (" **Quick configuration (tiny settings): not results.**" if quick else ""),
        "",
        "Set-up: single hidden layer of m units with second-layer weights 1, no bias, square loss "
        "(y − f)²/2, random start q0 = 1; η = 0.5 (GeLU, ReLU, tanh), 0.05 (r²). δ_alg: weak "
        "recovery (target only). δ_NN(t·η = 1): early-time Hessian threshold; δ_NN long: the "
        f"long-time rule at T = {cfg['long_time']} (and T/2; at m = 2 with the DMFT's "
        f"null_rtol = {LONG_NULL_RTOL_M2:g}, findings §4.9); both mean ± standard error over "
        f"{seeds} of {cfg['n_paths']} paths, bracket "
        f"{cfg['bracket'][0]:g}–{cfg['bracket'][1]:g} (from 1.5 for r²), xtol {cfg['xtol']:g} "
        "(a bracket is shown "
        "when there is one seed). δ_50: 50 % point of GD's predicted success curve at "
        f"d = {cfg['d']} with horizon T = {cfg['transition_steps']} steps, "
        "`dmftsolve transition` with its defaults"
        + (f" except {', '.join(f'{k} = {v:g}' for k, v in cfg['transition'].items())}"
           if cfg["transition"] else "")
        + f" (the self-bracketing search; seed {D50_SEED}), ± posterior error; GD's δ_50 beside it "
        "where it was run at the row's set-up.",
        "",
        "Reading the numbers:",
        "",
        "* **Errors** are rounded to one significant digit (two when they start with 10–35) and the "
        f"value to the same decimal place: a standard error over {seeds} is itself uncertain by "
        "tens of per cent, so further digits carry no information. A δ_NN is the mean of its "
        f"seeds' bracket midpoints, and with xtol = {cfg['xtol']:g} those brackets come from one "
        "fixed grid of the search: two rows can then show the same value and error exactly"
        + same_cells(rows) + ", which means their thresholds fall in the same brackets, not that "
        "they are equal.",
        "* **δ_alg** is a deterministic quadrature (`alg_threshold`, relative accuracy "
        f"{_sci(ALG_RTOL)}), shown to 4 decimals, all of which hold. '(closed form)' marks the targets "
        "whose δ_alg is known exactly — 1/2 for `z**2`, `z**2 - 1` and `abs(z)` (each label fixes "
        "z², so E[z²|y] = z² and δ_alg = 1/E[(z² − 1)²]), 0.59375110 for `z1*z2` (the Bessel-K "
        "form checked in `tests/test_weak_recovery.py`)"
        + (f"; {exact_note}." if exact_note else "."),
    ]
    if easy_targets:
        lines.append(
            "* **No hard direction** (" + ", ".join(f"`{t}`" for t in easy_targets) + "): "
            "`alg_threshold` returns δ_alg = 0 because E[z|y] ≠ 0, so the directions in its range "
            "are learned by one linear step at any δ > 0; it does not compute a threshold for the "
            "remaining directions. `dmftsolve.thresholds.directions.split_directions` finds them "
            "easy as well, at the next stage of its staircase"
            + (" (for `z1 + z1*z2`, once z₁ is known the label fixes z₂ = y/z₁ − 1)"
               if "z1 + z1*z2" in easy_targets else "")
            + ". So every direction is easy: δ_alg = 0 and δ_NN is undefined (there is no hard "
            "direction whose Hessian outlier could define it).")
    lines += [
        "* **δ_NN**: for unbounded labels the finite-t δ_NN grows with the number of paths "
        "(docs/findings.md §5): read those values as 'at this many paths'. ReLU: σ'' = 0 away from "
        "the kink, so D = σ'² ≥ 0 and the Hessian has no negative outlier at any δ (criterion "
        "'negative'): its δ_NN is above every bracket. That does not mean GD fails: the empirical "
        "Hessian sees σ'' = 0 at every sample, but any move of w larger than about 1/n carries "
        "some samples across the kink, and their average brings back the kink's curvature "
        "E[(f − y) δ(u) z²], which GD's steps and the δ_50 column (the dynamics, not the "
        "Hessian) feel. Where checked, GD learns at that column's δ_50 (GD spot checks below). "
        "'not converged in T': the long-time rule "
        "was not met (δ_NN at T and at T/2 differ by more than the tolerance), so the value at "
        f"T = {cfg['long_time']} is shown as a finite-time threshold, not a long-time one; for "
        "these unbounded "
        "labels the law of D has no finite left edge (docs/findings.md §5.3).",
        "* **δ_50**: every row's cell is one run of the command given under Commands: the "
        "search starts at GD's δ_50 rounded to 0.1 where GD has one for the row, else at "
        f"{D50_START:g}, and stops once the error is at most the tolerance (or with its status and "
        "reason: 'not_converged', the draws spent first; 'no_root', no draw passed by step T up "
        "to the largest δ it tries). A row with no hard direction is refused by the command "
        "('undefined'). Where `validation/width_transition.py` ran the same search (the same "
        "settings and seed; its case named under Commands), the row shows that search. "
        "'GD: …, source': GD's own δ_50 at the row's d, η and T, from a self-bracketing search "
        "('search', `validation/width_transition.py`), fixed-grid counts ('counts', "
        "`validation/gd_transition_counts.py`), both by first passage as the theory counts, or "
        "a spot check (final cosine, section 'GD spot checks'); with several, the first passage "
        "with the most trials. Section 'δ_50 against GD' gives their differences.",
        "* '—': the quantity failed; the cell gives the reason (the full message is in "
        "`results_table.json`). 'not run yet': not computed so far (subsets are computed with "
        "--quantities, --widths, --activations; the whole table is "
        "`python -m validation.results_table --workers 2`, hours: see the script's docstring).",
        "",
        "| # | target | σ | m | η | δ_alg | δ_NN(t·η = 1) | δ_NN long | δ_50 (d = "
        f"{cfg['d']}) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    gds = {i: r["gd"] for i, r in enumerate(rows, 1) if r.get("gd") is not None}
    for i, r in enumerate(rows, 1):
        alg = fmt_alg(r["alg"], r["target"], r["target"] in easy_targets)
        lines.append(f"| {i} | `{r['target']}` | {r['activation']} | {r['m']} | {r['eta']:g} | "
                     f"{alg} | {fmt(r['nn_early'])} | {fmt(r['nn_long'], cfg['long_time'])} | "
                     f"{d50_cell(r['d50'], r.get('gd'))} |")
    lines += agreement(rows, gds)
    if not quick:
        lines += gd_checks(rows, cfg)
    lines += ["", "## Figures", "",
              "[docs/figures.md](figures.md) shows each figure beside the paper's caption, with the "
              "command that regenerates it and, where the two differ, the evidence for why.", "",
              "Each script in `validation/figures/` regenerates one PNG and JSON in "
              "`validation/results/figures/` (point cache beside them; `--replot` redraws without "
              "computing; `--quick` is the tiny configuration of `tests/test_figures.py`). Full-size "
              "commands and measured costs are in each script's docstring.", "",
              "| script | shows | what has been run |", "|---|---|---|"]
    for name, shows in FIGURES.items():
        lines.append(f"| `validation/figures/{name}.py` | {shows} | {figure_status(name)} |")
    lines += ["", "## Commands", "",
              "Each row's numbers come from these commands (the same settings as the table).", ""]
    for i, r in enumerate(rows, 1):
        c = r["commands"]
        lines.append(f"{i}. `{r['target']}`, {r['activation']}, m = {r['m']}:")
        for k, label in (("alg", "δ_alg"), ("nn_early", "δ_NN(t·η = 1)"), ("nn_long", "δ_NN long"),
                         ("d50", "δ_50")):
            q = r.get(k) or {}
            el, cpu = q.get("elapsed"), q.get("cpu")
            note = ""
            if k == "d50" and q.get("case"):
                note = (f" (this search: `python -m validation.width_transition --side theory --only "
                        f"{q['case']}`, dmftsolve {q.get('version')}"
                        + (f", {el:.0f} s" if el is not None else "") + ")")
            elif k == "d50" and q.get("status") == "refused":
                note = " (refused)"
            elif cpu is not None:
                note = f" ({cpu:.0f} CPU-s here)"
            elif el is not None:
                note = f" ({el:.0f} s here)"
            lines.append(f"   * {label}: `{c[k]}`{note}")
    return "\n".join(lines) + "\n"


def width_section() -> str:
    """The section "Threshold against width": GD's δ_50 and the theory's at m = 1–4 and on the
    easy-plus-hard and two-direction targets, from ``validation/results/width_transition.json``
    (``validation/width_transition.py``; its table, and the figure of
    ``validation/figures/width.py``). Empty if that file is missing."""
    loaded = _width_data()
    if loaded is None:
        return ""
    wt, data = loaded
    table = wt.report(data)
    body = table.split("\n", 2)[2]  # drop the report's own title
    return ("## Threshold against width, and targets with easy and hard directions\n\n"
            "![GD's δ_50 and the theory's against the width m, GeLU and r² on z² − 1 at d = 1000]"
            "(../validation/results/figures/width.png)\n\n"
            "Figure: `python -m validation.figures.width` (the theory at m = 2 and 3: the `_defaults` "
            "searches). Table: `python -m validation.width_transition "
            "--report` (the searches: `--side theory` and `--side gd`, `--ds 1000` or `2000`, "
            "`--only NAME`). Findings: `docs/findings.md` §10.\n" + body)


def _progress(row: dict[str, Any], kind: str) -> None:
    """One line on stderr for a computed cell."""
    q = row[kind]
    text = fmt_d50(q) if kind == "d50" else fmt(q)
    cpu = f" ({q['cpu']:.0f} CPU-s)" if isinstance(q, dict) and q.get("cpu") is not None else ""
    print(f"[{row['target']}, {row['activation']}, m={row['m']}] {kind}: {text}{cpu}", file=sys.stderr,
          flush=True)


def main(argv: list[str] | None = None) -> int:
    p = script_parser(__spec__, __doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="three rows with tiny settings (the test)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--dask", default=None, metavar="ADDRESS")
    p.add_argument("--out", type=Path, default=None,
                   help="directory for results.md, results_table.json and the cache "
                        f"(default: docs/results.md and {DEFAULT_OUT})")
    p.add_argument("--replot", action="store_true",
                   help="rebuild from the cache only (missing quantities shown as 'not run yet')")
    p.add_argument("--only", default=None,
                   help="compute only rows whose target contains this text (the page still shows "
                        "every row, the others from the cache)")
    p.add_argument("--widths", default=None,
                   help="compute only rows of these widths, e.g. '1' (the others from the cache, or "
                        "'not run yet'); the page always lists the whole catalogue")
    p.add_argument("--activations", default=None,
                   help="compute only rows of these activations, e.g. 'gelu' (as --widths)")
    p.add_argument("--quantities", default=",".join(KINDS),
                   help=f"comma-separated subset of {','.join(KINDS)} to compute (the others are "
                        "taken from the cache if there, else shown as 'not run')")
    args = p.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    if args.workers < 1:
        p.error(f"--workers must be >= 1, got {args.workers}")
    try:
        widths = None if args.widths is None else {int(w) for w in args.widths.split(",") if w.strip()}
    except ValueError:
        p.error(f"--widths must be comma-separated integers, got {args.widths!r}")
    acts = None if args.activations is None else {a.strip() for a in args.activations.split(",")}
    if acts is not None and acts - set(ACTIVATIONS):
        p.error(f"--activations must name some of {list(ACTIVATIONS)}, got {args.activations!r}")
    wanted = [k.strip() for k in args.quantities.split(",") if k.strip()]
    if not wanted or set(wanted) - set(KINDS):
        p.error(f"--quantities must name some of {list(KINDS)}, got {args.quantities!r}")
    rows_spec = cfg.get("rows") or [(t, a, m) for t in TARGETS for a in ACTIVATIONS for m in WIDTHS]
    if args.only and not any(args.only in r[0] for r in rows_spec):
        targets = sorted({r[0] for r in rows_spec})
        p.error(f"--only matches no target: got {args.only!r}, targets are {targets}")
    out_md = (args.out / "results.md") if args.out else ROOT / "docs" / "results.md"
    out_dir = args.out or DEFAULT_OUT
    cache = PointCache(out_dir, NAME, replot=args.replot)
    settings = {k: v for k, v in cfg.items() if k != "rows"}
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = [{"target": t, "activation": a, "m": m, "eta": ACTIVATIONS[a]}
                                  for t, a, m in rows_spec]
    # GD's δ_50 per row (its search starts there) and the width searches run as a row's δ_50
    gds = {} if args.quick else gd_sources(rows, cfg)
    searches = width_theory(cfg)
    jobs: dict[Future, tuple[int, str, dict[str, Any]]] = {}
    missing = 0
    with make_executor(args.workers, args.dask) as ex:
        for i, row in enumerate(rows):
            target, act, m = row["target"], row["activation"], row["m"]
            row["gd"] = best_gd(gds.get(i + 1))
            found = searches.get((target, act, m, float(row["eta"])))
            start = found["start"] if found is not None else d50_start(row["gd"])
            row["commands"] = commands(target, act, m, cfg) | {
                "d50": transition_command(target, act, m, cfg, start)}
            selected = (widths is None or m in widths) and (acts is None or act in acts) \
                and (not args.only or args.only in target)
            for kind in KINDS:
                if kind == "d50" and found is not None:  # the same search, stored by width_transition
                    row[kind] = found
                    continue
                if kind == "alg":
                    key = {"kind": kind, "target": target}
                elif kind == "d50":
                    key = d50_key(target, act, m, cfg, start)
                else:
                    key = {"kind": kind, "target": target, "activation": act, "m": m,
                           "eta": ACTIVATIONS[act], **{k: cfg[k] for k in NN_KEY_FIELDS}, **NN_KEY_LEGACY}
                    if long_null_rtol(kind, m) is not None:  # width-2 long cells: a new cut-off
                        key["null_rtol"] = long_null_rtol(kind, m)
                hit = cache.get(key)
                tr = key.get("transition", {})
                if hit is None and kind == "d50" and tr.get("null_rtol") == D50_LEGACY_NULL_RTOL:
                    hit = cache.get({**key, "transition": {f: v for f, v in tr.items() if f != "null_rtol"}})
                if hit is not None:
                    row[kind] = hit
                    cache.hits += 1
                elif args.replot or kind not in wanted or not selected:
                    row[kind] = None  # not asked for, or --replot (which never computes): 'not run yet'
                    missing += 1
                elif ex is None:
                    row[kind] = cache.put(key, compute(kind, target, act, m, cfg, start))
                    cache.computed += 1
                    _progress(row, kind)
                else:
                    jobs[ex.submit(compute, kind, target, act, m, cfg, start)] = (i, kind, key)
        for fut in as_completed(jobs):  # each cell is cached as soon as it is done
            i, kind, key = jobs[fut]
            rows[i][kind] = cache.put(key, fut.result())
            cache.computed += 1
            _progress(rows[i], kind)
    cmd = command_line(argv and [sys.argv[0], *argv])
    md = render(rows, cfg, cmd, args.quick)
    if not args.quick:
        md = md.rstrip("\n") + "\n\n" + width_section()
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(md)
    jpath = out_dir / f"{NAME}.json"
    jpath.parent.mkdir(parents=True, exist_ok=True)
    payload = {"settings": {**settings, "quick": bool(args.quick), "targets": TARGETS,
                            "activations": ACTIVATIONS, "widths": WIDTHS},
               "command": cmd, "diagnostics": {"elapsed": time.perf_counter() - t0, "cache_hits": cache.hits,
                                               "computed": cache.computed, "not_run": missing},
               "rows": rows}
    with jpath.open("w") as fh:
        json.dump(jsonable(payload), fh, indent=1)
    print(f"wrote {out_md} and {jpath} ({len(rows)} rows, {cache.computed} computed, {cache.hits} cached, "
          f"{missing} not run)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
