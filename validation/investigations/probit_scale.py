"""Is GD's success curve a probit in δ or in log δ?

Refits GD's stored success counts (``validation/results/gd_transition_counts.json``, every
(case, d) with at least three δ) by maximum likelihood with ``P = Φ((δ − δ_50)/w)`` and with
``P = Φ((log δ − log δ_50)/w)`` (two parameters each) and compares the log-likelihoods and
the two δ_50. Run ``python validation/investigations/probit_scale.py`` (seconds); writes
``results/probit_scale.md``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy.special import log_ndtr

from dmftsolve.thresholds.delta50 import _probit_mle, _probit_mle_many

HERE = Path(__file__).resolve().parent
COUNTS = HERE.parent / "results" / "gd_transition_counts.json"


def loglik(x: np.ndarray, k: np.ndarray, n: np.ndarray, mu: float, w: float) -> float:
    u = (x - mu) / w
    return float((k * log_ndtr(u) + (n - k) * log_ndtr(-u)).sum())


def fit(x: np.ndarray, k: np.ndarray, n: np.ndarray) -> tuple[float, float, float]:
    """``(δ_50, w, log L)`` of the maximum-likelihood probit in ``x``."""
    mu, w = _probit_mle(x, k, n)
    mu_, w_ = _probit_mle_many(x, k[None, :], n, (mu, w))
    return float(mu_[0]), float(w_[0]), loglik(x, k, n, float(mu_[0]), float(w_[0]))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default=str(COUNTS), help="GD counts JSON (gd_transition_counts.py)")
    ap.add_argument("--out", default=str(HERE / "results" / "probit_scale"), help="output stem (.md)")
    a = ap.parse_args(argv)
    try:
        summary = json.loads(Path(a.counts).read_text())["summary"]
        curves = {key: (np.array([p["delta"] for p in summ["rows"]], float),
                        np.array([p["successes"] for p in summ["rows"]], float),
                        np.array([p["trials"] for p in summ["rows"]], float))
                  for key, summ in summary.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        ap.error(f"--counts {a.counts!r}: not a GD counts JSON with a 'summary' of rows "
                 f"({type(exc).__name__}: {exc})")
    rows = []
    for key, (x, k, n) in curves.items():
        if x.size < 3 or np.all(k == 0) or np.all(k == n):
            continue
        mu, w, ll = fit(x, k, n)
        lmu, lw, lll = fit(np.log(x), k, n)
        rows.append({"curve": key, "points": int(x.size), "delta_50": mu, "w": w, "loglik": ll,
                     "delta_50_log": math.exp(lmu), "w_log": lw, "loglik_log": lll})
    total = sum(r["loglik_log"] - r["loglik"] for r in rows)
    lines = ["# A probit in δ or in log δ? (GD's stored curves)", "",
             "`python validation/investigations/probit_scale.py`: maximum likelihood on each stored "
             "GD curve (`validation/results/gd_transition_counts.json`, ≥ 3 δ), both with two "
             f"parameters. log L(log δ) − log L(δ), summed over the {len(rows)} curves: "
             f"{total:+.1f}.", "",
             "| case, d | points | δ_50 (δ) | w | δ_50 (log δ) | w (log δ) | Δ log L |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        name = r["curve"].replace("|", ", d = ")
        lines.append(f"| {name} | {r['points']} | {r['delta_50']:.2f} | {r['w']:.2f} | "
                     f"{r['delta_50_log']:.2f} | {r['w_log']:.3f} | {r['loglik_log'] - r['loglik']:+.2f} |")
    Path(a.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    return {"rows": rows, "total": total}


if __name__ == "__main__":
    main()
