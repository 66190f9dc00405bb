"""``dmftsolve alg-threshold``: the weak-recovery threshold δ_alg of a target."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from dmftsolve.cli._common import (
    add_output_arguments,
    add_progress_argument,
    add_seed_argument,
    command_parser,
    emit,
    format_pm,
    format_table,
    want_progress,
)
from dmftsolve.defaults import PROBLEM_DEFAULTS

_DESCRIPTION = """\
Compute delta_alg, the weak-recovery threshold of optimal first-order
(spectral/AMP) methods on the target y = h(z, eps): below delta = n/d =
delta_alg none of them correlates with the hidden directions, above it one
does. It is 0 when E[z|y] != 0 (a linear step learns a direction; for k >= 2
the staged threshold of the others is printed too) and inf for parity-like
targets.
"""

_EXAMPLES = """\
dmftsolve alg-threshold
dmftsolve alg-threshold --target 'z1*z2'
dmftsolve alg-threshold --target 'z**2 + 0.5*eps' --json
"""


def register(subparsers: Any) -> None:
    """Add the ``alg-threshold`` command to ``subparsers``."""
    p = command_parser(subparsers, "alg-threshold", "weak-recovery threshold δ_alg of a target",
                       _DESCRIPTION, _EXAMPLES)  # --json prints delta_alg = null when it is infinite
    p.add_argument("--target", default=PROBLEM_DEFAULTS["target"], metavar="EXPR",
                   help="label y = h(z, eps) (default: %(default)s)")
    p.add_argument("--k", type=int, default=None, metavar="N",
                   help="latent dimension k (default: from the target)")
    p.add_argument("--rtol", type=float, default=1e-8, metavar="X",
                   help="relative accuracy asked (default: %(default)s)")
    p.add_argument("--method", default="auto", metavar="NAME",
                   choices=("auto", "preimage", "fibred", "additive", "binned"),
                   help="auto, preimage, fibred, additive, binned (default: auto)")
    p.add_argument("--max-pieces", type=int, default=None, metavar="N",
                   help="most monotone pieces for exact methods (default: 20)")
    p.add_argument("--no-staged", dest="staged", action="store_false",
                   help="no staged threshold when delta_alg = 0")
    p.add_argument("--easy", default=None, metavar="NAMES",
                   help="staged: coordinates known, e.g. z1 (default: by E[z|y])")
    add_seed_argument(p, "seed of the binned method")
    add_progress_argument(p)
    add_output_arguments(p)
    p.set_defaults(func=run)


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf"
    return f"{x:.10g}"


def _fmt_pm(x: float, err: float) -> str:
    """``δ_alg ± error`` to the digits the error allows (at most 10 significant)."""
    if math.isinf(x) or not math.isfinite(err) or x == 0.0:
        return _fmt(x)
    return format_pm(x, max(err, 1e-10 * abs(x)))


def _easy_names(target: Any, easy: str | None, staged: bool) -> list[str] | None:
    """``--easy`` as a list of latent names, checked before any work: names of the target's
    latents (``z1 … zk``, k >= 2), at least one, not all of them, and not with ``--no-staged``."""
    if easy is None:
        return None
    if not staged:
        raise ValueError("--easy sets the known coordinates of the staged threshold, which "
                         "--no-staged turns off: give one of them")
    names = list(target.variable_names)
    if target.k < 2:
        raise ValueError(f"--easy needs a target with k >= 2 latents (z1, z2, …); "
                         f"{target.expr!r} has k = {target.k}")
    coords = [c.strip() for c in easy.split(",") if c.strip()]
    bad = [c for c in coords if c not in names]
    if bad or not coords:
        raise ValueError(f"--easy must be comma-separated latent names among {', '.join(names)}, "
                         f"got {easy!r}")
    if len(set(coords)) == len(names):
        raise ValueError(f"--easy={easy!r} names every latent: no hard coordinate is left")
    return coords


def _staged(target: Any, res: Any, easy: list[str] | None) -> dict[str, Any] | None:
    """The staged threshold of the hard coordinates given the easy ones, when ``δ_alg = 0``
    or ``--easy`` is given, with ``k >= 2`` (``None`` otherwise). Without ``--easy``, a target
    it does not apply to gives the reason; with it, that is an error."""
    if not ((res.trivial or easy is not None) and res.ok and target.k >= 2):
        return None
    from dmftsolve.thresholds.staged import staged_alg_threshold

    try:
        st = staged_alg_threshold(target, easy=easy, throw=False)
    except (ValueError, NotImplementedError) as exc:
        if easy is not None:  # asked for explicitly: the reason is the answer (exit 2)
            raise
        text = str(exc).replace("give easy= explicitly", "give --easy")
        return {"delta": None, "error": None, "easy": None, "hard": None, "status": None,
                "message": f"not computed: {text}"}
    names = target.variable_names
    return {"delta": st.delta, "error": st.error, "easy": [names[j] for j in st.easy],
            "hard": [names[j] for j in st.hard], "status": st.status, "message": st.message}


def _staged_text(staged: dict[str, Any]) -> str:
    if staged["delta"] is None:
        return "not computed (see below)"
    text = f"{_fmt_pm(staged['delta'], staged['error'])} ({', '.join(staged['hard'])} given " \
           f"{', '.join(staged['easy'])})"
    return text if staged["status"].ok else f"{text} [{staged['status'].value}]"


def run(args: argparse.Namespace) -> int:
    """Run the command; returns the exit code 0, or raises ``CommandError`` (exit 1, one line on
    stderr) when δ_alg did not reach its tolerance (the result is printed first)."""
    from dmftsolve.problem import Target
    from dmftsolve.thresholds.weak_recovery import alg_threshold

    target = Target(args.target, k=args.k)
    if want_progress(args):
        print(f"dmftsolve alg-threshold: δ_alg of y = {target.expr} (method {args.method})",
              file=sys.stderr, flush=True)
    from dmftsolve.thresholds.weak_recovery import MAX_PIECES

    max_pieces = MAX_PIECES if args.max_pieces is None else args.max_pieces
    if max_pieces < 1:
        raise ValueError(f"--max-pieces must be >= 1, got {max_pieces}")
    easy = _easy_names(target, args.easy, args.staged)
    try:
        res = alg_threshold(target, method=args.method, rtol=args.rtol, seed=args.seed, throw=False,
                            max_pieces=max_pieces)
    except ValueError as exc:  # name the options, not the Python keywords
        raise ValueError(str(exc).replace("use the binned method (Monte Carlo), or raise max_pieces",
                                          "use --method binned, or raise --max-pieces")) from None
    staged = _staged(target, res, easy) if args.staged else None
    payload = {
        "target": target.expr, "k": target.k, "delta_alg": res.delta_alg,
        "delta_alg_infinite": math.isinf(res.delta_alg), "error": res.error,
        "trivial": res.trivial, "method": res.method, "status": res.status,
        "message": res.message, "elapsed": res.elapsed,
        "spectral_radius": res.diagnostics.get("spectral_radius"),
        "staged": staged,
    }

    def table() -> str:
        rows = [["target", target.expr], ["k", target.k],
                ["delta_alg", _fmt_pm(res.delta_alg, res.error)],
                ["error", f"{res.error:.2g}" if math.isfinite(res.error) else _fmt(res.error)],
                ["trivial", res.trivial], ["method", res.method],
                ["status", res.status.value], ["elapsed [s]", f"{res.elapsed:.3g}"]]
        if staged is not None:
            rows.append(["staged delta", _staged_text(staged)])
        out = format_table(["quantity", "value"], rows)
        out += f"\n{res.message}" if res.message else ""
        if staged is not None and staged["message"]:
            out += f"\nstaged: {staged['message']}"
        return out

    emit(args, payload, table)
    if not res.ok:  # the result is printed (it may still be useful); the reason goes to stderr
        from dmftsolve.cli._common import CommandError

        if res.method == "binned":
            hint = ("; this command has no option for more Monte Carlo samples: call "
                    "dmftsolve.alg_threshold(..., n_samples=...) from Python")
        elif "did not reach rtol" in res.message:
            hint = "; loosen --rtol"
        else:
            hint = "; try --method binned"
        message = (res.message or "δ_alg did not converge").replace("; raise n_samples", "")
        raise CommandError(f"{res.status.value}: {message}{hint}")
    return 0
