"""Run every bad input of the table in docs/bad_inputs.md and write the table (issue 8 §2).

Each case is a command line of ``dmftsolve`` (run in-process through
``dmftsolve.cli.main``, in a forked child with a per-case timeout) or a call of the
Python API. Each is classified in advance — ``input`` (bad input: exit 2 /
``ValueError``), ``solver`` (the computation fails: exit 1 / ``SolverError`` or a
result whose status is not success) or ``ok`` — and the observed exit status and the
first line of stderr (or of the exception) are recorded.

A case is a *problem* when it shows a traceback or an exception other than
``ValueError``/``TypeError``/``SolverError`` (API), exits 0 where it should fail,
prints NaN with exit 0, prints more or less than one line on stderr when it fails,
prints an error line not of the form ``dmftsolve <cmd>: error: ...`` or longer than
400 characters, runs a hostile payload (a canary file appears), or times out. The
target is zero problems; ``mismatch`` counts cases whose observed class differs from
the expected one (they are listed for review, not counted as problems).

Usage::

    OPENBLAS_NUM_THREADS=1 python3 validation/bad_inputs.py [--timeout 120] [--out docs/bad_inputs.md]
    python3 validation/bad_inputs.py --fast   # only the cases that fail before any solver work

``tests/test_cli_errors.py`` runs the ``fast`` cases in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
CANARY = Path(tempfile.gettempdir()) / "dmftsolve_bad_inputs_canary"


@dataclass(frozen=True)
class Case:
    """One bad (or good) input.

    ``argv`` for a command line, ``call`` for the Python API; ``kind`` is the row class
    (wrong type, negative, zero, nan/inf, huge, diverging, hostile, missing, ok, …);
    ``fast`` marks cases that fail before any solver work (run by the test suite).
    """

    group: str
    kind: str
    label: str
    expect: str
    argv: tuple[str, ...] | None = None
    call: Callable[[], Any] | None = field(default=None, compare=False)
    fast: bool = False
    #: for an ``ok`` command line: stdout -> None if the answer is right, else why it is wrong
    check: Callable[[str], str | None] | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return f"{self.group}: {self.label}"


@dataclass
class Row:
    case: Case
    observed: str
    code: int | None
    first_line: str
    problem: str
    seconds: float


# ----------------------------------------------------------------------------- cases

TINY = {
    "simulate": ("--d", "20", "--delta", "2", "--trials", "1", "--steps", "10", "--workers", "1"),
    "dmft": ("--delta", "2", "--steps", "4", "--paths", "400", "--batches", "2"),
    "spectrum": ("--delta", "3", "--paths", "2000"),
    "transition": ("--d", "100", "--delta", "5,6", "--draws", "2", "--steps", "20"),
    "threshold": (
        "--target",
        "Min(z**2, 3)",
        "--activation",
        "quad",
        "--eta",
        "0.05",
        "--t",
        "0",
        "--paths",
        "2000",
        "--grid",
        "2",
        "--replicates",
        "1",
        "--bracket",
        "1,3",
        "--xtol",
        "0.5",
    ),
    "alg-threshold": (),
}

HOSTILE = [
    ("import payload", f"__import__('os').system('touch {CANARY}')"),
    ("payload hidden in a sum", f"z**2 + 0*__import__('os').system('touch {CANARY}')"),
    ("subclass walk", "().__class__.__bases__[0].__subclasses__()"),
    ("eval", "eval('1+1')"),
    ("exec", "exec('import os')"),
    ("lambda", "lambda: 0"),
    ("open a file", f"open('{CANARY}', 'w')"),
    ("attribute access", "z.__class__"),
    ("getattr", "getattr(z, 'real')"),
    ("comprehension", "[z for z in (1, 2)]"),
    ("conditional expression", "z if z else 1"),
    ("globals", "globals()"),
    ("sympy constructor", "Symbol('x')"),
    ("statement separator", "z; import os"),
    ("newline then payload", "z\n__import__('os')"),
    ("shell substitution", f"$(touch {CANARY})"),
    ("backticks", f"`touch {CANARY}`"),
    ("f-string", "f'{z}'"),
    ("string literal", "'abc'"),
    ("sum of 5000 terms", "z" + "+z" * 5000),
    ("5000 nested parentheses", "(" * 5000 + "z" + ")" * 5000),
    ("20000 characters", "z" * 20000),
    ("NUL byte", "z\x00**2"),
    ("full-width letters", "ｚ**2"),
    ("comment", "z**2 # comment"),
    ("huge exponent tower", "9**9**9**9"),
    ("huge power of z", "z**99999999"),
    ("empty", ""),
    ("spaces only", "   "),
    ("syntax error", "z**"),
]


def _value_kind(v: str, extra: Callable[[str], str | None]) -> str:
    """Classify a bad option value: zero, negative, nan/inf, the caller's own classes, else wrong type."""
    if v == "0":
        return "zero"
    if v.startswith("-"):
        return "negative"
    if v == "nan":
        return "nan/inf"
    return extra(v) or "wrong type"


def _cli(
    group: str, kind: str, label: str, expect: str, *argv: str, tiny: bool = True, fast: bool = True
) -> Case:
    command = group if group != "global" else None
    base = ((command,) if command else ()) + (TINY.get(group, ()) if tiny else ())
    return Case(group=group, kind=kind, label=label, expect=expect, argv=base + argv, fast=fast)


def _api(kind: str, label: str, expect: str, call: Callable[[], Any], fast: bool = True) -> Case:
    return Case(group="api", kind=kind, label=label, expect=expect, call=call, fast=fast)


def _cases() -> list[Case]:
    c: list[Case] = []
    # --- the problem options, shared by simulate, dmft, spectrum and threshold (checked on dmft)
    num = [
        ("negative", "-1"),
        ("nan/inf", "nan"),
        ("nan/inf", "inf"),
        ("nan/inf", "-inf"),
        ("nan/inf", "1e400"),
        ("wrong type", "abc"),
        ("wrong type", ""),
    ]
    for opt in ("--eta", "--lam", "--q0"):
        for kind, v in num:
            c.append(_cli("dmft", kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    c.append(_cli("dmft", "zero", "--eta 0", "input", "--eta=0"))
    for opt in ("--steps", "--m", "--k"):
        for kind, v in [("negative", "-1"), ("zero", "0"), ("wrong type", "1.5"), ("wrong type", "abc")]:
            if opt == "--steps" and v == "0":
                continue
            c.append(_cli("dmft", kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    c.append(_cli("dmft", "huge", "--steps 10**9", "input", "--steps", str(10**9)))
    c.append(
        _cli(
            "dmft",
            "huge",
            "--steps 100000 --paths 40 (74 GiB)",
            "input",
            "--steps",
            "100000",
            "--paths",
            "40",
        )
    )
    c.append(_cli("dmft", "huge", "--m 100000", "input", "--m", "100000"))
    c.append(_cli("dmft", "huge", "--k 1000000", "input", "--k", "1000000"))
    c.append(
        _cli("dmft", "wrong shape", "--k 1 with target z1*z2", "input", "--k", "1", "--target", "z1*z2")
    )
    for kind, v in [("wrong shape", "1,2"), ("nan/inf", "nan"), ("wrong type", "abc"), ("nan/inf", "inf")]:
        c.append(_cli("dmft", kind, f"--a {v!r}", "input", f"--a={v}"))
    for kind, v in [("wrong type", "abc"), ("nan/inf", "nan"), ("wrong shape", "1,2;3")]:
        c.append(_cli("dmft", kind, f"--M0 {v!r}", "input", f"--M0={v}"))
    for kind, v in [("negative", "-1"), ("nan/inf", "nan"), ("wrong shape", "1,2;3,4")]:
        c.append(_cli("dmft", kind, f"--M0 0.5 --Q0 {v!r}", "input", "--M0=0.5", f"--Q0={v}"))
    c.append(_cli("dmft", "missing", "--Q0 without --M0", "input", "--Q0", "1"))
    for kind, v in [("out of range", "5"), ("negative", "-1"), ("repeated", "0,0"), ("wrong type", "abc")]:
        c.append(_cli("dmft", kind, f"--hold-zero {v!r}", "input", f"--hold-zero={v}"))
    for kind, v in [
        ("unknown name", "foo"),
        ("no output f", "y**2"),
        ("hostile", "__import__('os')"),
        ("hostile", "f.__class__"),
        ("syntax error", "(y-f"),
    ]:
        c.append(_cli("dmft", kind, f"--loss {v!r}", "input", "--loss", v))
    for kind, v in [
        ("unknown name", "foo"),
        ("unknown symbol", "x**2"),
        ("hostile", "r.__class__"),
        ("hostile", "__import__('os')"),
        ("syntax error", "r**"),
    ]:
        c.append(_cli("dmft", kind, f"--activation {v!r}", "input", "--activation", v))
    # --- hostile strings: every one as a target (alg-threshold), a few as activation/loss and via the API
    for label, s in HOSTILE:
        c.append(_cli("alg-threshold", "hostile", f"--target {label}", "input", "--target", s))
    for label, s in HOSTILE[:6] + HOSTILE[19:22]:
        c.append(
            _cli(
                "simulate", "hostile", f"--activation {label}", "input", "--activation", s.replace("z", "r")
            )
        )
    for label, s in HOSTILE[:3]:
        c.append(_cli("threshold", "hostile", f"--target {label}", "input", "--target", s))
        c.append(_cli("spectrum", "hostile", f"--loss {label}", "input", "--loss", s))
    # --- simulate
    g = "simulate"
    for opt, vals in {
        "--d": ["0", "-1", "1.5", "abc"],
        "--trials": ["0", "-3", "abc"],
        "--workers": ["0", "-1", "abc"],
        "--record-every": ["0"],
        "--n-test": ["0", "-5"],
        "--n-eigs": ["0"],
        "--hessian-at": ["999", "abc"],
        "--success-threshold": ["nan", "abc"],
        "--seed": ["abc"],
    }.items():
        for v in vals:
            kind = _value_kind(v, lambda v: "out of range" if v == "999" else None)
            c.append(_cli(g, kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    for kind, v in [
        ("negative", "-1"),
        ("zero", "0"),
        ("nan/inf", "nan"),
        ("nan/inf", "inf"),
        ("wrong type", "abc"),
        ("wrong type", ""),
        ("wrong type", "1,,x"),
    ]:
        c.append(_cli(g, kind, f"--delta {v!r}", "input", f"--delta={v}"))
    c.append(_cli(g, "wrong type", "--dtype float16", "input", "--dtype", "float16"))
    c.append(_cli(g, "unknown option", "--frobnicate", "input", "--frobnicate"))
    c.append(
        _cli(g, "huge", "--steps 10000000 (defaults otherwise)", "input", "--steps", "10000000", tiny=False)
    )
    c.append(
        _cli(
            g,
            "huge",
            "--d 10000000",
            "input",
            "--d",
            "10000000",
            "--delta",
            "2",
            "--trials",
            "1",
            tiny=False,
        )
    )
    c.append(_cli(g, "huge", "--trials 1000000", "input", "--trials", "1000000", tiny=False))
    c.append(_cli(g, "huge", "--delta 1e9", "input", "--delta", "1e9", "--trials", "1", tiny=False))
    c.append(
        _cli(g, "bad path", "--plot /nonexistent/dir/f.png", "input", "--plot", "/nonexistent/dir/f.png")
    )
    c.append(_cli(g, "bad path", "--plot <a directory>", "input", "--plot", tempfile.gettempdir()))
    c.append(_cli(g, "bad path", "--plot f.xyz (unknown format)", "input", "--plot", "f.xyz"))
    c.append(_cli(g, "bad path", "--plot /proc/version (not writable)", "input", "--plot", "/proc/version"))
    for label, extra in [
        ("--activation quad --eta 100", ("--activation", "quad", "--eta", "100")),
        ("--activation exp(r) --eta 1", ("--activation", "exp(r)", "--eta", "1")),
        ("--dtype float32 --eta 1e30", ("--dtype", "float32", "--eta", "1e30")),
        ("--eta 1e308", ("--eta", "1e308")),
        ("--activation quad --eta 100 --json", ("--activation", "quad", "--eta", "100", "--json")),
    ]:
        c.append(_cli(g, "diverging", label, "solver", *extra, fast=False))
    c.append(
        _cli(
            g,
            "diverging (finite)",
            "--activation relu --eta 1e6 (finite blow-up: a warning)",
            "ok",
            "--activation",
            "relu",
            "--eta",
            "1e6",
            fast=False,
        )
    )
    c.append(_cli(g, "ok", "tiny run", "ok", "--activation", "quad", "--eta", "0.05", fast=False))
    c.append(_cli(g, "ok", "tiny run --json", "ok", "--json", fast=False))
    c.append(
        _cli(
            g,
            "ok",
            "tiny run with --hessian-at 0,10",
            "ok",
            "--hessian-at",
            "0,10",
            "--n-eigs",
            "2",
            fast=False,
        )
    )
    # --- dmft
    g = "dmft"
    for kind, v in [
        ("negative", "-1"),
        ("zero", "0"),
        ("nan/inf", "nan"),
        ("nan/inf", "inf"),
        ("wrong type", "abc"),
    ]:
        c.append(_cli(g, kind, f"--delta {v!r}", "input", f"--delta={v}"))
    c.append(_cli(g, "missing", "no --delta", "input", tiny=False))
    for opt, vals in {
        "--paths": ["0", "-1", "3", "abc"],
        "--batches": ["0", "1", "abc"],
        "--rows": ["0"],
        "--seed": ["abc", "-1"],
        "--method": ["foo"],
        "--errors": ["foo"],
    }.items():
        for v in vals:
            kind = _value_kind(v, lambda v: "too small" if v in ("1", "3") else None)
            c.append(_cli(g, kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    c.append(_cli(g, "huge", "--paths 10**12", "input", "--paths", str(10**12)))
    c.append(
        _cli(
            g,
            "huge",
            "--method pathwise --steps 3000 --paths 100000",
            "input",
            "--delta",
            "2",
            "--method",
            "pathwise",
            "--steps",
            "3000",
            "--paths",
            "100000",
            tiny=False,
        )
    )
    for label, extra in [
        ("--activation quad --eta 100", ("--activation", "quad", "--eta", "100")),
        ("--activation exp(r) --eta 5", ("--activation", "exp(r)", "--eta", "5")),
        ("--eta 1e308", ("--eta", "1e308")),
        ("--eta 1e300 --lam 1e300", ("--eta", "1e300", "--lam", "1e300")),
    ]:
        c.append(_cli(g, "diverging", label, "solver", *extra, fast=False))
    c.append(_cli(g, "ok", "tiny run", "ok", fast=False))
    c.append(
        _cli(
            g, "ok", "tiny run --json --method pathwise", "ok", "--json", "--method", "pathwise", fast=False
        )
    )
    # --- spectrum (helper B's command)
    g = "spectrum"
    for kind, v in [("negative", "-1"), ("zero", "0"), ("nan/inf", "nan"), ("wrong type", "abc")]:
        c.append(_cli(g, kind, f"--delta {v!r}", "input", f"--delta={v}"))
    for opt, vals in {"--t": ["-1", "abc"], "--paths": ["0", "abc"], "--points": ["0", "-1"]}.items():
        for v in vals:
            kind = "zero" if v == "0" else "negative" if v.startswith("-") else "wrong type"
            c.append(_cli(g, kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    c.append(_cli(g, "huge", "--t 100000", "input", "--t=100000"))
    c.append(
        _cli(g, "bad path", "--plot /nonexistent/dir/f.png", "input", "--plot", "/nonexistent/dir/f.png")
    )
    c.append(
        _cli(
            g,
            "diverging",
            "--activation exp(r) --eta 0.5 --t 10",
            "solver",
            "--activation",
            "exp(r)",
            "--eta",
            "0.5",
            "--t=10",
            fast=False,
        )
    )
    c.append(
        _cli(
            g,
            "diverging",
            "--activation quad --eta 50 --t 3 --target Min(z**2,3)",
            "solver",
            "--activation",
            "quad",
            "--eta",
            "50",
            "--t=3",
            "--target",
            "Min(z**2, 3)",
            fast=False,
        )
    )
    c.append(
        _cli(
            g,
            "ok",
            "t = 0 (quadrature)",
            "ok",
            "--target",
            "Min(z**2, 3)",
            "--activation",
            "quad",
            fast=False,
        )
    )
    # --- threshold
    g = "threshold"
    for opt, vals in {
        "--t": ["-1", "soon", "1000000000"],
        "--long-time": ["0", "1", "10000000"],
        "--grid": ["0", "1", "1.5"],
        "--xtol": ["0", "-1", "nan"],
        "--paths": ["0", "10", "abc"],
        "--replicates": ["0", "-1"],
        "--criterion": ["any"],
        "--tails": ["none"],
        "--seed": ["-1", "abc"],
    }.items():
        for v in vals:
            kind = _value_kind(
                v, lambda v: "huge" if len(v) > 6 else "too small" if v in ("1", "10") else None
            )
            c.append(_cli(g, kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    for kind, v in [
        ("reversed", "5,1"),
        ("nan/inf", "nan,3"),
        ("zero", "0,3"),
        ("negative", "-1,3"),
        ("wrong type", "abc"),
        ("wrong shape", "1"),
        ("wrong shape", "1,2,3"),
        ("nan/inf", "1,inf"),
    ]:
        c.append(_cli(g, kind, f"--bracket {v!r}", "input", f"--bracket={v}"))
    c.append(_cli(g, "huge", "--long-time 20000 (memory)", "input", "--long-time", "20000", tiny=False))
    c.append(
        _cli(
            g,
            "no hard direction",
            "--target 'z + 0.3*z**2'",
            "input",
            "--target",
            "z + 0.3*z**2",
            "--t",
            "0",
            tiny=False,
        )
    )
    c.append(
        _cli(
            g, "no root", "--bracket 1,1.2 (threshold above it)", "solver", "--bracket", "1,1.2", fast=False
        )
    )
    c.append(_cli(g, "ok", "tiny search at t = 0", "ok", fast=False))
    c.append(_cli(g, "ok", "tiny search --json --verbose", "ok", "--json", "--verbose", fast=False))
    # --- alg-threshold
    g = "alg-threshold"
    for opt, vals in {
        "--k": ["0", "-1", "1000000", "abc"],
        "--rtol": ["0", "-1", "nan", "2", "abc"],
        "--method": ["foo"],
        "--seed": ["abc"],
    }.items():
        for v in vals:
            kind = _value_kind(
                v, lambda v: "huge" if len(v) > 3 and v.isdigit() else "out of range" if v == "2" else None
            )
            c.append(_cli(g, kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    c.append(_cli(g, "wrong shape", "--k 1 with z1*z2", "input", "--k", "1", "--target", "z1*z2"))
    c.append(_cli(g, "unknown symbol", "--target w**2", "input", "--target", "w**2"))
    for label, t in [
        ("z**2", "z**2"),
        ("abs(z)", "Abs(z)"),
        ("sign(z1*z2*z3) (infinite)", "sign(z1*z2*z3)"),
    ]:
        c.append(_cli(g, "ok", label, "ok", "--target", t, fast=False))
    # --- transition (helper D's command)
    g = "transition"
    for opt, vals in {"--d": ["0", "-1", "abc"], "--draws": ["0", "abc"], "--seed": ["abc"],
                      "--delta": ["-1", "0", "nan", "abc", ""]}.items():
        for v in vals:
            kind = ("zero" if v == "0" else "negative" if v.startswith("-") else "nan/inf" if v == "nan"
                    else "wrong type")
            c.append(_cli(g, kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    c.append(_cli(g, "huge", "--d 100000000", "input", "--d", "100000000"))
    c.append(_cli(g, "huge", "--steps 100000 (834 GiB)", "input", "--steps", "100000"))
    # the width / search options and the problems the finite-d construction cannot take
    for opt, vals in {"--tol": ["0", "-1", "nan", "abc"], "--start": ["0", "1000", "nan"],
                      "--max-draws": ["0", "abc"], "--m": ["0", "abc"]}.items():
        for v in vals:
            kind = ("zero" if v == "0" else "negative" if v.startswith("-") else "nan/inf" if v == "nan"
                    else "huge" if v == "1000" else "wrong type")
            c.append(_cli(g, kind, f"{opt} {v!r}", "input", f"{opt}={v}"))
    c.append(_cli(g, "too few", "--draws 1", "input", "--draws", "1"))
    c.append(_cli(g, "clamped", "--paths-per-sample 1e-9 (0 paths)", "input", "--paths-per-sample", "1e-9"))
    c.append(_cli(g, "too few", "--delta 1e-9,2e-9 (0 samples)", "input", "--delta", "1e-9,2e-9"))
    c.append(_cli(g, "huge", "--draws 100000 on ten δ with --paths 400000 (weeks)", "input", "--draws",
                  "100000", "--delta", "3,4,5,6,7,8,9,10,11,12", "--paths", "400000"))
    for label, tgt in [("not sign-symmetric (z**3 + z**2)", "z**3 + z**2"),
                       ("no hard direction (z1 + z2**3)", "z1 + z2**3"),
                       ("hard direction not a coordinate (z1 + z2)", "z1 + z2")]:
        c.append(_cli(g, "unsupported target", label, "input", "--target", tgt))
    c.append(_cli(g, "unsupported", "--bias", "input", "--bias"))
    c.append(_cli(g, "unsupported", "--lam 0.1", "input", "--lam", "0.1"))
    c.append(_cli(g, "bad path", "--plot /nonexistent/dir/f.png", "input", "--plot",
                  "/nonexistent/dir/f.png"))
    c.append(_cli(g, "bad path", "--plot /proc/version (not writable)", "input", "--plot", "/proc/version"))
    c.append(_cli(g, "bad path", "--sim /nonexistent.json", "input", "--sim", "/nonexistent.json"))
    c.append(_cli(g, "wrong type", "--sim <not JSON>", "input", "--sim", "/etc/hostname"))
    for label, s in HOSTILE[:3]:
        c.append(_cli(g, "hostile", f"--target {label}", "input", "--target", s))
    c.append(_cli(g, "diverging", "--activation quad --eta 100", "solver", "--activation", "quad", "--eta",
                  "100", fast=False))
    c.append(_cli(g, "extrapolation", "tiny curve whose grid does not bracket delta_50", "solver",
                  fast=False))
    c.append(_cli(g, "ok", "tiny curve", "ok", "--delta", "1,30", "--steps", "60", "--paths", "2000",
                  fast=False))
    # --- global
    c.append(_cli("global", "missing", "no command", "input"))
    c.append(_cli("global", "unknown command", "frobnicate", "input", "frobnicate"))
    c.append(_cli("global", "ok", "--version", "ok", "--version"))
    c.append(_cli("global", "ok", "--help", "ok", "--help"))
    c += _issue30_cases()
    c += _api_cases()
    c += _issue30_api_cases()
    c += _issue30_sweep()
    return c


#: Labels whose δ_alg has a closed form: strictly monotone functions of z² (the σ-algebra of z²:
#: δ_alg = 1/2) and of z (E[z|y] = z ≠ 0: δ_alg = 0).
_EVEN_LABELS = ("z**2", "atan(z**2)", "log(1 + z**2)", "sqrt(z**2 + 1)", "1/(z**2 + 1)", "-z**2",
                "3*z**2 - 7", "z**4", "z**6 + z**2", "asinh(z**2)", "abs(z)", "abs(z)**3", "cosh(z)",
                "exp(z**2/8)", "z**2*(z**2 + 2)")
_ODD_LABELS = ("z", "z**3", "tanh(z)", "atan(z)", "erf(z)", "sinh(z)", "asinh(z)", "z + z**3",
               "sign(z)", "relu(z)", "exp(z)", "Heaviside(z)")
#: Affine maps of the label, which leave δ_alg unchanged.
_AFFINE = ("1e-200*({})", "1e200*({})", "({}) + 1e250", "-1e-100*({}) + 7", "(1/2)**1000*({}) - 2**900")
#: Values that are not a plain real number, for every numeric keyword of Problem.build.
_NOT_NUMBERS = (("bool", True), ("bool", False), ("wrong type", "1"), ("wrong type", b"1"),
                ("wrong type", 1 + 0j), ("huge", 10**400), ("wrong type", [1]), ("wrong type", None))
#: Constants that are not finite real numbers, and where they hide.
_NON_REAL = ("sqrt(-2)", "log(-3)", "log(0)", "1/0", "0/0", "(-2)**(1/2)", "(-27)**(1/3)",
             "asinh(sqrt(-4))", "exp(800)", "2**1100", "atan(1/0)", "Max(sqrt(-1), 1)")


def _issue30_sweep() -> list[Case]:
    """Issue 30, the sweep written after the fixes: closed-form δ_alg under label scale and
    offset, every numeric keyword of ``Problem.build`` with non-numbers, and non-real
    constants in every expression option."""
    import dmftsolve as ds

    c: list[Case] = []
    g = "alg-threshold"
    for labels, ref in ((_EVEN_LABELS, 0.5), (_ODD_LABELS, 0.0)):
        for base in labels:
            for fmt in _AFFINE:
                text = fmt.format(base)
                c.append(Case(group=g, kind="label scale", label=f"--target {text!r} (δ_alg = {ref:g})",
                              expect="ok", argv=(g, "--target", text, "--json"),
                              check=_delta_alg_is(ref, 1e-6)))
    for key in ("eta", "lam", "q0", "steps", "m", "k"):
        for kind, value in _NOT_NUMBERS:
            if key == "k" and value is None:
                continue  # k=None is the default (the largest index used)
            c.append(_api(kind, f"Problem.build({key}={value!r:.20})", "input",
                          lambda key=key, value=value: ds.Problem.build(**{key: value})))
    for const in _NON_REAL:
        for grp, opt, template in (("alg-threshold", "--target", "z**2 + {}"),
                                   ("dmft", "--activation", "r*{}"), ("simulate", "--loss", "{}*(y - f)**2")):
            text = template.format(const)
            c.append(_cli(grp, "complex/infinite constant", f"{opt} {text!r}", "input", opt, text))
    return c


def _delta_alg_is(ref: float, tol: float = 1e-7) -> Callable[[str], str | None]:
    """A ``check`` of ``alg-threshold --json`` output: δ_alg equals ``ref`` (a closed form)."""
    import json

    def check(out: str) -> str | None:
        try:
            value = json.loads(out.strip().splitlines()[0])["delta_alg"]
        except (ValueError, IndexError, KeyError, TypeError):
            return f"no JSON with delta_alg on stdout: {out[:80]!r}"
        if value is None or abs(value - ref) > tol:
            return f"delta_alg = {value}, the closed form is {ref}"
        return None

    return check


def _issue30_cases() -> list[Case]:
    """Issue 30: inputs that printed a wrong answer with exit 0, or failed unclearly."""
    c: list[Case] = []
    # complex, infinite or undefined constants: one line naming the option (exit 2)
    for g, opt, text in [
        ("alg-threshold", "--target", "z**2 + sqrt(-1)"),
        ("alg-threshold", "--target", "log(0)*z"),
        ("alg-threshold", "--target", "1/0"),
        ("alg-threshold", "--target", "z + log(-1)"),
        ("alg-threshold", "--target", "(-8)**(1/3)*z"),
        ("alg-threshold", "--target", "z*(0/0 + 1)"),
        ("alg-threshold", "--target", "exp(1000)*z"),
        ("alg-threshold", "--target", "sqrt(-z**2 - 1)"),
        ("simulate", "--target", "sqrt(-1)*z**2"),
        ("dmft", "--target", "sqrt(-1)*z**2"),
        ("simulate", "--loss", "sqrt(-1)*(y-f)**2"),
        ("dmft", "--activation", "log(-1)*r"),
    ]:
        c.append(_cli(g, "complex/infinite constant", f"{opt} {text!r}", "input", opt, text))
    # labels without a finite variance
    for g, text in [("dmft", "1/z"), ("simulate", "z1/z2"), ("alg-threshold", "tan(z)"),
                    ("dmft", "1/sqrt(abs(z))")]:
        c.append(_cli(g, "infinite variance", f"--target {text!r}", "input", "--target", text))
    # δ_alg invariant under the label's scale and offset; unused latents: the closed form 1/2
    g = "alg-threshold"
    for text in ["1e-15*z**2", "1e-300*z**2", "(1/2)**3000*z**2", "z**2 + 1e300", "1e300*z**2 - 1e-300",
                 "z**2 + 1e8", "z2**2"]:
        c.append(Case(group=g, kind="label scale", label=f"--target {text!r} (δ_alg = 1/2)", expect="ok",
                      argv=(g, "--target", text, "--json"), check=_delta_alg_is(0.5)))
    c.append(Case(group=g, kind="label scale", label="--target 'z1**2' --k 2 (δ_alg = 1/2)", expect="ok",
                  argv=(g, "--target", "z1**2", "--k", "2", "--json"), check=_delta_alg_is(0.5)))
    c.append(_cli(g, "label too flat", "--target 'log(1 + 1e-20*z**2)'", "input", "--target",
                  "log(1 + 1e-20*z**2)"))
    c.append(_cli(g, "wrong method", "--target 'z2**2' --method fibred", "input", "--target", "z2**2",
                  "--method", "fibred"))
    c.append(_cli(g, "huge", "--target 'sin(1000*z)' --method preimage", "input", "--target",
                  "sin(1000*z)", "--method", "preimage"))
    c.append(_cli(g, "unresolved", "--target 'sin(1000*z)' (bound, not ∞)", "solver", "--target",
                  "sin(1000*z)", fast=False))
    c.append(_cli(g, "huge", "--target 'z1*z2*z3' --k 200 --method binned", "input", "--target",
                  "z1*z2*z3", "--k", "200", "--method", "binned"))
    c.append(_cli(g, "zero", "--max-pieces 0", "input", "--max-pieces", "0"))
    for label, easy in [("unknown latent", "z9"), ("hostile", "__import__('os')"), ("empty", ",,"),
                        ("every latent", "z1,z2")]:
        c.append(_cli(g, label, f"--target 'z1 + z2**2 - 1' --easy {easy!r}", "input", "--target",
                      "z1 + z2**2 - 1", "--easy", easy))
    c.append(_cli(g, "k = 1", "--target 'z**2' --easy z1", "input", "--target", "z**2", "--easy", "z1"))
    # labels undefined or unbounded on the Gaussian domain; activations and losses likewise
    for grp, opt, text in [("dmft", "--target", "sqrt(z)"), ("simulate", "--target", "log(z)"),
                           ("dmft", "--target", "exp(z**2)"), ("dmft", "--target", "exp(z1*z2)"),
                           ("simulate", "--target", "exp(80*z)"), ("dmft", "--activation", "sqrt(r)"),
                           ("simulate", "--loss", "log(f)*(y-f)**2")]:
        c.append(_cli(grp, "undefined or unbounded", f"{opt} {text!r}", "input", opt, text))
    # labels constant in double precision: GD would train on a constant
    for grp, text in (("simulate", "z**2 + 1e300"), ("dmft", "(1/2)**3000*z**2"), ("dmft", "exp(-1000)*z")):
        c.append(_cli(grp, "label too flat", f"--target {text!r}", "input", "--target", text))
    # answers with a closed form: relu(z)² has E[z|y=0] ≠ 0 (δ_alg = 0); monotone functions of |z|
    # and z² with tiny noise have the 1/2 of z² (to the binned method's accuracy)
    c.append(Case(group=g, kind="closed form", label="--target 'relu(z)**2' (δ_alg = 0)", expect="ok",
                  argv=(g, "--target", "relu(z)**2", "--json"), check=_delta_alg_is(0.0)))
    for text in ("abs(z)**0.5", "log(abs(z))", "z**2 + 1e-3*eps", "z**2 + 1e-300*eps"):
        c.append(Case(group=g, kind="closed form", label=f"--target {text!r} (δ_alg ≈ 1/2)", expect="ok",
                      argv=(g, "--target", text, "--json"), check=_delta_alg_is(0.5, 0.01)))
    c.append(_cli(g, "wrong method", "--target 'z**2 + 1e-3*eps' --method additive", "input", "--target",
                  "z**2 + 1e-3*eps", "--method", "additive"))
    c.append(_cli(g, "not supported", "--target 'z1**2+z2**2+z3**2+0.5*eps' --method additive", "input",
                  "--target", "z1**2+z2**2+z3**2+0.5*eps", "--method", "additive"))
    # more workers than CPUs: capped with a warning, the run succeeds
    c.append(_cli("simulate", "huge", "--workers 1000 (capped to the CPUs)", "ok", "--delta", "2,3",
                  "--workers", "1000", fast=False))
    return c


def _issue30_api_cases() -> list[Case]:
    """Issue 30, the Python API: no coercion of booleans and strings, no OverflowError."""
    import dmftsolve as ds
    from dmftsolve.cli._sim_file import load_success_counts
    from dmftsolve.simulation.sweeps import sweep

    P = ds.Problem.build
    c: list[Case] = []
    for kw, kind in [
        ({"eta": True}, "bool"),
        ({"lam": False}, "bool"),
        ({"steps": True}, "bool"),
        ({"m": True}, "bool"),
        ({"eta": "0.1"}, "wrong type"),
        ({"a": "12", "m": 2}, "wrong type"),
        ({"hold_zero": "0"}, "wrong type"),
        ({"M0": [[True]]}, "bool"),
        ({"M0": [["0.1"]]}, "wrong type"),
        ({"eta": 10**400}, "huge"),
        ({"q0": 10**400}, "huge"),
        ({"target": "1/z"}, "infinite variance"),
        ({"target": "z**2 + sqrt(-1)"}, "complex/infinite constant"),
    ]:
        c.append(_api(kind, f"Problem.build({', '.join(f'{k}={v!r}'[:40] for k, v in kw.items())})",
                      "input", lambda kw=kw: P(**kw)))
    p = P(target="z**2", activation="quad", eta=0.05, steps=2)
    c.append(_api("bool", "solve_dmft(p, True)", "input", lambda: ds.solve_dmft(p, True)))
    c.append(_api("huge", "solve_dmft(p, 10**400)", "input", lambda: ds.solve_dmft(p, 10**400)))
    c.append(_api("wrong type", "sweep(p, 20, '25')", "input",
                  lambda: sweep(p, 20, "25", trials=1, progress=False)))
    c.append(_api("bool", "sweep(p, 20, [2.0], success_threshold=True)", "input",
                  lambda: sweep(p, 20, [2.0], trials=1, progress=False, success_threshold=True)))
    c.append(_api("wrong method", "alg_threshold('z2**2', method='fibred')", "input",
                  lambda: ds.alg_threshold("z2**2", method="fibred")))
    c.append(_api("bool", "alg_threshold('z**2', max_pieces=True)", "input",
                  lambda: ds.alg_threshold("z**2", max_pieces=True)))
    if os.path.exists("/dev/zero"):
        c.append(_api("bad path", "load_success_counts('/dev/zero') (--sim)", "input",
                      lambda: load_success_counts("/dev/zero")))

    def scaled(text: str) -> float:
        value = ds.alg_threshold(text).delta_alg
        if abs(value - 0.5) > 1e-7:
            raise AssertionError(f"wrong answer: delta_alg({text}) = {value}, the closed form is 0.5")
        return value

    for text in ("1e-300*z**2", "1e300*(z**2 - 1)", "z**2 + 1e300"):
        c.append(_api("label scale", f"alg_threshold({text!r}) == 1/2", "ok", lambda t=text: scaled(t),
                      fast=False))
    return c


def _api_cases() -> list[Case]:
    import numpy as np

    import dmftsolve as ds
    from dmftsolve.thresholds.hessian_threshold import ThresholdSettings

    P = ds.Problem.build
    c: list[Case] = []
    for kw, kind in [
        ({"eta": -1}, "negative"),
        ({"eta": float("nan")}, "nan/inf"),
        ({"eta": "abc"}, "wrong type"),
        ({"eta": None}, "wrong type"),
        ({"m": 0}, "zero"),
        ({"m": 1.5}, "wrong type"),
        ({"m": "2"}, "wrong type"),
        ({"steps": -1}, "negative"),
        ({"steps": 2.5}, "wrong type"),
        ({"q0": -1}, "negative"),
        ({"lam": -1}, "negative"),
        ({"lam": float("inf")}, "nan/inf"),
        ({"a": [1, 2]}, "wrong shape"),
        ({"target": 5}, "wrong type"),
        ({"target": None}, "wrong type"),
        ({"target": "w**2"}, "unknown symbol"),
        ({"activation": 3}, "wrong type"),
        ({"loss": "foo"}, "unknown name"),
        ({"k": 0}, "zero"),
        ({"k": 10**6}, "huge"),
        ({"hold_zero": [5]}, "out of range"),
        ({"M0": [[float("nan")]], "Q0": [[1.0]]}, "nan/inf"),
        ({"M0": [[0.5]], "Q0": [[-1.0]]}, "negative"),
        ({"Q0": [[1.0]]}, "missing"),
        ({"bias": "yes"}, "wrong type"),
    ]:
        c.append(
            _api(
                kind,
                f"Problem.build({', '.join(f'{k}={v!r}' for k, v in kw.items())})",
                "input",
                lambda kw=kw: P(**kw),
            )
        )
    for label, s in HOSTILE[:4] + HOSTILE[19:21]:
        c.append(_api("hostile", f"Problem.build(target={label})", "input", lambda s=s: P(target=s)))
        c.append(
            _api(
                "hostile",
                f"Problem.from_dict target {label}",
                "input",
                lambda s=s: ds.Problem.from_dict({**P().to_dict(), "target": {"expr": s, "k": 1}}),
            )
        )
    c.append(_api("wrong type", "Problem.from_dict(None)", "input", lambda: ds.Problem.from_dict(None)))
    c.append(_api("wrong type", "Problem.from_dict('abc')", "input", lambda: ds.Problem.from_dict("abc")))
    c.append(_api("negative", "Target('z**2', k=-1)", "input", lambda: ds.Target("z**2", k=-1)))
    p = P(target="z**2", activation="quad", eta=0.05, steps=3)
    bad = P(target="z**2", activation="quad", eta=100.0, steps=6)
    for kw, kind in [
        ({"n_paths": 0}, "zero"),
        ({"n_paths": 1.5}, "wrong type"),
        ({"steps": -1}, "negative"),
        ({"method": "foo"}, "unknown name"),
        ({"n_batches": 1}, "too small"),
        ({"errors": "x"}, "unknown name"),
        ({"keep_samples_at": [100]}, "out of range"),
    ]:
        c.append(
            _api(
                kind,
                f"solve_dmft(p, 2, {', '.join(f'{k}={v!r}' for k, v in kw.items())})",
                "input",
                lambda kw=kw: ds.solve_dmft(p, 2.0, **kw),
            )
        )
    for d, kind in [(-1.0, "negative"), (float("nan"), "nan/inf"), ("abc", "wrong type")]:
        c.append(
            _api(kind, f"solve_dmft(p, delta={d!r})", "input", lambda d=d: ds.solve_dmft(p, d, n_paths=400))
        )
    c.append(
        _api(
            "diverging",
            "solve_dmft(quad, eta=100)",
            "solver",
            lambda: ds.solve_dmft(bad, 2.0, n_paths=400, n_batches=2),
            fast=False,
        )
    )
    c.append(
        _api(
            "diverging",
            "solve_dmft(quad, eta=100, throw=False)",
            "solver",
            lambda: ds.solve_dmft(bad, 2.0, n_paths=400, n_batches=2, throw=False),
            fast=False,
        )
    )
    for kw, kind in [
        ({"d": 0}, "zero"),
        ({"delta": -1.0}, "negative"),
        ({"trials": 0}, "zero"),
        ({"dtype": "int8"}, "wrong type"),
        ({"d": 2.5}, "wrong type"),
    ]:
        args = {"d": 10, "delta": 2.0, "trials": 1} | kw
        c.append(
            _api(
                kind,
                f"simulate(p, {', '.join(f'{k}={v!r}' for k, v in kw.items())})",
                "input",
                lambda args=args: ds.simulate(p, args.pop("d"), args.pop("delta"), **args),
            )
        )
    c.append(
        _api(
            "diverging", "simulate(quad, eta=100)", "solver", lambda: ds.simulate(bad, 10, 2.0), fast=False
        )
    )
    c.append(
        _api(
            "diverging",
            "sweep(quad, eta=100)",
            "solver",
            lambda: ds.sweep(bad, 10, [2.0], trials=1, progress=False, throw=False),
            fast=False,
        )
    )
    for kw, kind in [
        ({"rtol": 0}, "zero"),
        ({"rtol": float("nan")}, "nan/inf"),
        ({"method": "x"}, "unknown name"),
    ]:
        c.append(
            _api(
                kind,
                f"alg_threshold('z**2', {', '.join(f'{k}={v!r}' for k, v in kw.items())})",
                "input",
                lambda kw=kw: ds.alg_threshold(ds.Target("z**2"), **kw),
            )
        )
    c.append(
        _api("hostile", "alg_threshold(<payload string>)", "input", lambda: ds.alg_threshold(HOSTILE[0][1]))
    )
    for t, kind in [(-1, "negative"), ("soon", "wrong type"), (1.5, "wrong type")]:
        c.append(_api(kind, f"delta_nn(p, t={t!r})", "input", lambda t=t: ds.delta_nn(p, t)))
    for kw, kind in [
        ({"grid": 2.5}, "wrong type"),
        ({"grid": 1}, "too small"),
        ({"xtol": float("nan")}, "nan/inf"),
        ({"n_paths": 1e4}, "wrong type"),
        ({"bracket": (3, 1)}, "reversed"),
        ({"bracket": (1,)}, "wrong shape"),
        ({"replicates": 0}, "zero"),
        ({"seed": -1}, "negative"),
        ({"long_time": 1}, "too small"),
        ({"criterion": "any"}, "unknown name"),
    ]:
        c.append(
            _api(
                kind,
                f"ThresholdSettings({', '.join(f'{k}={v!r}' for k, v in kw.items())})",
                "input",
                lambda kw=kw: ThresholdSettings(**kw),
            )
        )
    D = np.ones((100, 1, 1))
    c.append(
        _api(
            "nan/inf",
            "bulk_spectrum(D with NaN)",
            "input",
            lambda: ds.bulk_spectrum(np.full((100, 1, 1), np.nan), 2.0),
        )
    )
    c.append(_api("negative", "bulk_spectrum(D, delta=-1)", "input", lambda: ds.bulk_spectrum(D, -1.0)))
    c.append(
        _api(
            "wrong shape",
            "outliers(D, z of the wrong length)",
            "input",
            lambda: ds.outliers(D, np.ones((50, 1)), 2.0),
        )
    )
    c.append(_api("negative", "check_delta(-1)", "input", lambda: ds.check_delta(-1)))
    c.append(_api("wrong type", "check_delta('abc')", "input", lambda: ds.check_delta("abc")))
    c.append(
        _api(
            "ok",
            "Problem.build() and to_dict/from_dict round trip",
            "ok",
            lambda: ds.Problem.from_dict(P().to_dict()),
        )
    )
    c.append(
        _api(
            "ok",
            "solve_dmft(p, 2) tiny",
            "ok",
            lambda: ds.solve_dmft(p, 2.0, n_paths=400, n_batches=2),
            fast=False,
        )
    )
    return c


# ----------------------------------------------------------------------------- running


def _execute(case: Case) -> tuple[str, int | None, str, str, str]:
    """Run ``case`` here; returns (observed, code, first line, stdout, full stderr/exception text)."""
    import numpy as np

    from dmftsolve.cli import main
    from dmftsolve.results import SolverError

    out, err = io.StringIO(), io.StringIO()
    if case.argv is not None:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), np.errstate(all="ignore"):
            try:
                code = main(list(case.argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0
            except BaseException:  # noqa: BLE001 - a traceback is what the table looks for
                traceback.print_exc()
                code = None
        text = err.getvalue()
        observed = {0: "ok", 1: "solver", 2: "input", 130: "interrupt"}.get(code, "traceback")
        if "Traceback" in text:
            observed = "traceback"
        first = text.strip().splitlines()[0] if text.strip() else ""
        return observed, code, first, out.getvalue(), text
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), np.errstate(all="ignore"):
            res = case.call()  # type: ignore[misc]
    except SolverError as exc:
        return "solver", None, f"SolverError: {exc}", "", str(exc)
    except (ValueError, TypeError) as exc:
        return "input", None, f"{type(exc).__name__}: {exc}", "", str(exc)
    except BaseException as exc:  # noqa: BLE001
        return "traceback", None, f"{type(exc).__name__}: {exc}", "", traceback.format_exc()
    ok = getattr(res, "ok", True)
    if not ok:
        status = getattr(getattr(res, "status", None), "value", "failed")
        return "solver", None, f"status {status}: {getattr(res, 'message', '')}", "", ""
    return "ok", None, "", "", ""


def _judge(case: Case, observed: str, code: int | None, first: str, out: str, text: str) -> str:
    problems = []
    if CANARY.exists():
        problems.append("PAYLOAD RAN (canary written)")
        CANARY.unlink()
    if observed == "traceback":
        problems.append("traceback / unexpected exception")
    if observed == "timeout":
        problems.append("timeout")
    if case.argv is not None and observed in ("input", "solver", "interrupt"):
        lines = text.strip().splitlines()
        cmd = case.argv[0] if case.group != "global" else None
        prefix = f"dmftsolve {cmd}: error: " if cmd else "dmftsolve: error: "
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr")
        elif not lines[0].startswith(prefix):
            problems.append("error line not 'dmftsolve <cmd>: error:'")
        elif len(lines[0]) > 400:
            problems.append("error line longer than 400 characters")
    if case.call is not None and len(first) > 2000:
        problems.append(f"exception message of {len(first)} characters")
    if observed == "ok" and case.expect != "ok":
        problems.append("exit 0 for a failure")
    if observed == "ok" and case.check is not None:
        wrong = case.check(out)
        if wrong:
            problems.append(f"wrong answer with exit 0: {wrong}")
    if (
        observed == "ok"
        and case.argv is not None
        and "--help" not in case.argv
        and any(tok.lower() in ("nan", "-nan") for tok in out.replace("±", " ").split())
    ):
        problems.append("NaN printed with exit 0")
    return "; ".join(problems)


def _child(case: Case, conn: Any) -> None:
    try:
        conn.send(_execute(case))
    finally:
        conn.close()


def run_case(case: Case, timeout: float | None = 120.0) -> Row:
    """Run one case (in a forked child when ``timeout`` is given) and judge it."""
    start = time.perf_counter()
    if CANARY.exists():
        CANARY.unlink()
    if timeout is None:
        observed, code, first, out, text = _execute(case)
    else:
        ctx = mp.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(case, send))
        proc.start()
        send.close()
        if recv.poll(timeout):
            try:
                observed, code, first, out, text = recv.recv()
            except EOFError:
                observed, code, first, out, text = "traceback", None, "child died", "", ""
        else:
            observed, code, first, out, text = "timeout", None, f"no answer in {timeout:g} s", "", ""
        proc.kill() if proc.is_alive() else None
        proc.join()
    problem = _judge(case, observed, code, first, out, text)
    return Row(case, observed, code, first, problem, time.perf_counter() - start)


CASES: list[Case] = _cases()


# ----------------------------------------------------------------------------- table


def _cell(text: str, limit: int = 150) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _command_line(case: Case) -> str:
    if case.argv is None:
        return ""
    args = []
    for a in case.argv:
        a = a if len(a) <= 40 else a[:39] + "…"
        args.append(a if a and all(ch.isalnum() or ch in "-_.,=/:" for ch in a) else repr(a))
    return "dmftsolve " + " ".join(args)


def write_table(rows: list[Row], path: Path, elapsed: float) -> str:
    totals = Counter(r.observed for r in rows)
    n_problems = sum(bool(r.problem) for r in rows)
    mismatches = [
        r for r in rows if r.observed != r.case.expect and r.observed in ("ok", "input", "solver")
    ]
    groups = Counter(r.case.group for r in rows)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True, cwd=ROOT).stdout.strip()
    if dirty:
        commit += " (plus uncommitted changes in the working tree)"
    lines = [
        "# Bad inputs: every case run, its class and what it printed",
        "",
        "Generated by `validation/bad_inputs.py` (do not edit by hand; re-run it). Each row was run",
        "in-process (`dmftsolve.cli.main`, or the Python API) in a forked child with a per-case",
        "timeout, at tiny sizes. *Expected* is the class decided in advance: **input** (bad input:",
        "exit 2 / `ValueError` or `TypeError`), **solver** (the computation fails: exit 1 /",
        "`SolverError` or a result whose status is not success), **ok** (exit 0). *Observed* is",
        "what happened; *first line* is the first line of stderr (command line) or of the",
        "exception / failed status (API). A *problem* is a traceback, an exit 0 for a failure,",
        "NaN printed with exit 0, not exactly one `dmftsolve <cmd>: error: ...` line on stderr",
        "(or one longer than 400 characters), a hostile payload that ran, or a timeout.",
        "",
        f"Commit {commit}; {len(rows)} cases ({', '.join(f'{g} {n}' for g, n in sorted(groups.items()))}); "
        f"run in {elapsed:.0f} s.",
        "",
        "| observed | cases |",
        "|---|---|",
        *(
            f"| {k} | {totals.get(k, 0)} |"
            for k in ("input", "solver", "ok", "traceback", "timeout", "interrupt")
        ),
        f"| **problems** | **{n_problems}** |",
        f"| tracebacks | {totals.get('traceback', 0)} |",
        f"| exit 0 for a failure | {sum('exit 0 for a failure' in r.problem for r in rows)} |",
        f"| class differs from expected (reviewed below) | {len(mismatches)} |",
        "",
    ]
    if mismatches:
        lines += ["Cases whose observed class differs from the expected one:", ""]
        lines += [
            f"* {_cell(r.case.name, 100)}: expected {r.case.expect}, observed {r.observed} "
            f"(`{_cell(r.first_line, 160)}`)"
            for r in mismatches
        ]
        lines.append("")
    if n_problems:
        lines += ["Problems:", ""]
        lines += [
            f"* {_cell(r.case.name, 100)}: **{r.problem}** (`{_cell(r.first_line, 160)}`)"
            for r in rows
            if r.problem
        ]
        lines.append("")
    lines += [
        "| # | group | class | input | expected | observed | exit "
        "| first line of stderr / exception | problem |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        inp = _command_line(r.case) or r.case.label
        lines.append(
            f"| {i} | {r.case.group} | {r.case.kind} | `{_cell(inp, 110)}` | {r.case.expect} | "
            f"{r.observed} | {'' if r.code is None else r.code} | {_cell(r.first_line)} | "
            f"{_cell(r.problem) or ''} |"
        )
    path.write_text("\n".join(lines) + "\n")
    return (
        f"{len(rows)} cases: "
        + ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
        + f"; problems {n_problems}; mismatches {len(mismatches)}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bad_inputs.md")
    ap.add_argument("--fast", action="store_true", help="only the cases that fail before any solver work")
    ap.add_argument("--match", default="", help="only cases whose name contains this")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if (c.fast or not args.fast) and args.match in c.name]
    start = time.perf_counter()
    rows = []
    for i, case in enumerate(cases, 1):
        row = run_case(case, timeout=args.timeout)
        rows.append(row)
        flag = f"  <-- {row.problem}" if row.problem else ""
        print(
            f"[{i}/{len(cases)}] {row.seconds:6.1f}s {row.observed:9s} {_cell(case.name, 70)}: "
            f"{_cell(row.first_line, 90)}{flag}",
            file=sys.stderr,
            flush=True,
        )
    summary = write_table(rows, args.out, time.perf_counter() - start)
    print(summary)
    return 0 if not any(r.problem for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
