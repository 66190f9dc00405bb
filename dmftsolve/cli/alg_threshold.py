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
    emit,
    format_pm,
    format_table,
    want_progress,
)

_DESCRIPTION = (
    "Compute δ_alg, the weak-recovery threshold of optimal first-order (spectral/AMP) methods: "
    "with n = δ·d samples, no polynomial-time first-order method correlates with the hidden "
    "directions when δ < δ_alg, and one does when δ > δ_alg. δ_alg = 0 when E[z|y] ≠ 0 "
    "(a linear step already learns a 'trivial' direction) and ∞ when E[zzᵀ − I | y] ≡ 0 "
    "(parity-like targets). k = 1: δ_alg = 1/E_y[(E[z²|y] − 1)²]; k > 1: 1/ρ(F) with "
    "F(M) = E_y[G(y) M G(y)], G(y) = E[zzᵀ − I | y]."
)


def register(subparsers: Any) -> None:
    """Add the ``alg-threshold`` command to ``subparsers``."""
    p = subparsers.add_parser(  # --json prints delta_alg = null when it is infinite
        "alg-threshold", help="weak-recovery threshold δ_alg of a target",
        description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--target", default="z**2",
                   help="link y = h(z, eps) as a sympy expression in z (k=1) or z1..zk, with eps "
                        "standard Gaussian noise, e.g. 'z**2', 'abs(z)', 'sign(z1*z2)', "
                        "'z**2 + 0.5*eps' (default: %(default)s)")
    p.add_argument("--k", type=int, default=None,
                   help="latent dimension if larger than the largest index the target uses")
    p.add_argument("--rtol", type=float, default=1e-8,
                   help="relative accuracy asked of the quadrature methods; the Monte Carlo "
                        "('binned') method is accepted up to max(rtol, 1e-2) (default: %(default)s)")
    p.add_argument("--method", default="auto",
                   choices=("auto", "preimage", "fibred", "additive", "binned"),
                   help="auto (default): 'preimage' (exact, noiseless k=1), 'fibred' (exact, "
                        "noiseless k=2 monotone along z1 or z2 on every line, e.g. z1*z2), "
                        "'additive' (exact, y = h0(z) + c*eps), otherwise 'binned' (quasi-Monte Carlo)")
    p.add_argument("--max-pieces", type=int, default=None, metavar="N",
                   help="most monotone pieces of the target the exact methods take on (default "
                        "20: their time grows like the square of the count, about 0.06 s × N²); "
                        "past it 'auto' uses 'binned' and 'preimage'/'fibred' are refused at once")
    add_seed_argument(p, "random seed of the 'binned' method")
    add_progress_argument(p, "; one line before the work starts")
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
    try:
        res = alg_threshold(target, method=args.method, rtol=args.rtol, seed=args.seed, throw=False,
                            max_pieces=max_pieces)
    except ValueError as exc:  # name the options, not the Python keywords
        raise ValueError(str(exc).replace("use the binned method (Monte Carlo), or raise max_pieces",
                                          "use --method binned, or raise --max-pieces")) from None
    payload = {
        "target": target.expr, "k": target.k, "delta_alg": res.delta_alg,
        "delta_alg_infinite": math.isinf(res.delta_alg), "error": res.error,
        "trivial": res.trivial, "method": res.method, "status": res.status,
        "message": res.message, "elapsed": res.elapsed,
        "spectral_radius": res.diagnostics.get("spectral_radius"),
    }

    def table() -> str:
        rows = [["target", target.expr], ["k", target.k],
                ["delta_alg", _fmt_pm(res.delta_alg, res.error)],
                ["error", f"{res.error:.2g}" if math.isfinite(res.error) else _fmt(res.error)],
                ["trivial", res.trivial], ["method", res.method],
                ["status", res.status.value], ["elapsed [s]", f"{res.elapsed:.3g}"]]
        out = format_table(["quantity", "value"], rows)
        return out + (f"\n{res.message}" if res.message else "")

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
