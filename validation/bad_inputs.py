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

    OPENBLAS_NUM_THREADS=1 python -m validation.bad_inputs [--timeout 120] [--out docs/bad_inputs.md]
    python -m validation.bad_inputs --fast   # only the cases that fail before any solver work

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
    c.append(_cli(g, "out of range", "--lam 2 (η λ = 1: every step shrinks W to 0)", "input", "--lam", "2"))
    c.append(_cli(g, "negative", "--lam -0.1", "input", "--lam", "-0.1"))
    c.append(_cli(g, "unsupported", "--init spectral --m 2", "input", "--init", "spectral", "--m", "2"))
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
    c += _issue50_cases()
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
            if key in ("k", "eta") and value is None:
                continue  # None is the default (k: the largest index used; eta: by activation)
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
    from dmftsolve.thresholds.settings import ThresholdSettings

    P = ds.Problem.build
    c: list[Case] = []
    for kw, kind in [
        ({"eta": -1}, "negative"),
        ({"eta": float("nan")}, "nan/inf"),
        ({"eta": "abc"}, "wrong type"),
        ({"eta": [0.5]}, "wrong type"),
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


# ----------------------------------------------------------------------------- issue 50

#: Files and folders the issue 50 cases point at, made once per run in a private directory.
_FIXTURES: dict[str, str] = {}


def _fixtures() -> dict[str, str]:
    """A FIFO, a directory, links to devices and an endless file, --sim files of every class."""
    import atexit
    import json
    import shutil

    if _FIXTURES:
        return _FIXTURES
    root = Path(tempfile.mkdtemp(prefix="dmftsolve_bad_inputs_"))
    atexit.register(shutil.rmtree, root, True)
    f = _FIXTURES
    f["root"] = str(root)
    os.mkfifo(root / "fifo.png")
    os.mkfifo(root / "fifo.json")
    os.mkfifo(root / "fifo")
    (root / "dir.png").mkdir()
    (root / "dir.json").mkdir()
    os.symlink("/dev/null", root / "null.png")
    os.symlink("/dev/zero", root / "zero.json")
    os.symlink("/dev/zero", root / "zero.png")
    os.symlink(root / "loop_b.png", root / "loop_a.png")
    os.symlink(root / "loop_a.png", root / "loop_b.png")
    os.symlink(root / "missing" / "x.png", root / "dangling.png")
    (root / "plain").write_text("")  # a file where a directory is expected
    sims = {
        "duplicate deltas": '{"deltas": [4, 5, 6], "successes": [0, 4, 8], "trials": [8, 8, 8], '
                            '"deltas": [1, 2, 3]}',
        "duplicate successes": '{"deltas": [4, 5, 6], "successes": [0, 4, 8], "successes": [8, 8, 8], '
                               '"trials": [8, 8, 8]}',
        "duplicate trials": '{"deltas": [4, 5, 6], "successes": [0, 4, 8], "trials": [8, 8, 8], '
                            '"trials": [9, 9, 9]}',
        "duplicate extra key": '{"deltas": [4, 5, 6], "successes": [0, 4, 8], "trials": [8, 8, 8], '
                               '"note": 1, "note": 2}',
        "two contradictory points at one delta": {"deltas": [5, 5], "successes": [0, 10], "trials": [10, 10]},
        "three points at one delta": {"deltas": [5, 5, 5], "successes": [0, 5, 10], "trials": [10] * 3},
        "huge counts, delta_50 extrapolated below zero": {"deltas": [1, 2], "successes": [999999, 1000000],
                                                         "trials": [1000000, 1000000]},
        "extrapolated above the points": {"deltas": [4, 5, 6], "successes": [0, 1, 2], "trials": [40] * 3},
        "extrapolated below the points": {"deltas": [4, 5, 6], "successes": [38, 39, 40], "trials": [40] * 3},
        "all zero": {"deltas": [4, 5, 6], "successes": [0, 0, 0], "trials": [8, 8, 8]},
        "all successes": {"deltas": [4, 5, 6], "successes": [8, 8, 8], "trials": [8, 8, 8]},
        "falling with delta": {"deltas": [4, 5, 6], "successes": [8, 4, 0], "trials": [8, 8, 8]},
        "flat": {"deltas": [4, 5, 6], "successes": [4, 4, 4], "trials": [8, 8, 8]},
        "trials above 1e9": {"deltas": [4, 5], "successes": [0, 10], "trials": [10**12, 10**12]},
        "trials 1e300": {"deltas": [4, 5], "successes": [0, 1], "trials": [1e300, 1e300]},
        "successes 1e300": {"deltas": [4, 5], "successes": [0, 1e300], "trials": [1e300, 1e300]},
        "a million times 0 then all": {"deltas": [4, 5], "successes": [0, 10**6], "trials": [10**6] * 2},
        "delta 1e-300": {"deltas": [1e-300, 5], "successes": [0, 8], "trials": [8, 8]},
        "one point pooled from equal deltas given as 5 and 5.0": {"deltas": [5, 5.0], "successes": [1, 7],
                                                                  "trials": [8, 8]},
    }
    for i, (label, content) in enumerate(sims.items()):
        p = root / f"sim{i}.json"
        p.write_text(content if isinstance(content, str) else json.dumps(content))
        f[f"sim:{label}"] = str(p)
    good = root / "sim_good.json"
    good.write_text(json.dumps({"deltas": [4, 5, 6, 7], "successes": [1, 4, 9, 15], "trials": [16] * 4}))
    f["sim_good"] = str(good)
    return f


def _terminal_sigint() -> None:
    """In the child before it starts: Ctrl-C as at a terminal. A script run in the background
    (``&``) passes SIGINT on ignored, and the command rightly keeps an inherited ignore."""
    import signal as _signal

    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)


def _in_subprocess(argv: list[str], *, env: dict[str, str] | None = None, signum: int | None = None,
                   after: float = 0.0, expect_code: int | None = None, encoding: str | None = None,
                   timeout: float = 60.0) -> str:
    """Run ``dmftsolve argv`` in a fresh interpreter (optionally sending ``signum`` after ``after``
    seconds); raise AssertionError unless it exits ``expect_code`` with one error line (or, for
    ``expect_code = 0``, no error line) and an output that decodes in ``encoding``."""
    import signal as _signal

    code = "import sys; from dmftsolve.cli import main; sys.exit(main())"
    full_env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                **(env or {})}
    proc = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=full_env, cwd=_fixtures()["root"],
                            preexec_fn=_terminal_sigint)
    if signum is not None:
        deadline = time.monotonic() + after
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"no answer in {timeout:g} s") from None
    lines = err.decode(encoding or "utf-8", "replace").strip().splitlines()
    if any("Traceback" in ln for ln in lines):
        raise AssertionError(f"traceback on stderr: {lines[-1][:120] if lines else ''}")
    if signum is not None and proc.returncode != 128 + signum:
        if proc.returncode == 0 and not lines:  # finished before the signal came
            return "finished"
        raise AssertionError(f"exit {proc.returncode} after {_signal.Signals(signum).name}, expected "
                             f"{128 + signum}; stderr {lines[-1:]}")
    if expect_code is not None and proc.returncode != expect_code:
        raise AssertionError(f"exit {proc.returncode}, expected {expect_code}; stderr {lines[-1:]}")
    errors = [ln for ln in lines if ": error: " in ln]
    if proc.returncode != 0 and (len(errors) != 1 or len(lines) != 1):
        raise AssertionError(f"{len(lines)} lines on stderr, expected one error line: {lines[:3]}")
    if encoding is not None:
        try:
            out.decode(encoding)
            err.decode(encoding)
        except UnicodeDecodeError as exc:
            raise AssertionError(f"output not in {encoding}: {exc}") from None
        if proc.returncode == 0 and not out.strip():
            raise AssertionError("no output")
    return f"exit {proc.returncode}"


def _cache_case(kind: str) -> Callable[[], Any]:
    """A PointCache entry made untrustworthy in one way: ``get`` must miss (with a warning) and
    ``put`` must not raise, and nothing may hang or run out of memory."""
    def run() -> str:
        import json
        import shutil
        import warnings

        from validation.figures import common as mod
        root = Path(tempfile.mkdtemp(prefix="dmftsolve_cache_case_"))
        try:
            cache = mod.PointCache(root, "fig")
            a, b = {"d": 100, "delta": 2.5}, {"d": 100, "delta": 3.5}
            cache.put(a, {"v": 1})
            cache.put(b, {"v": 2})
            pa, pb = cache.path(a), cache.path(b)
            if kind == "FIFO entry":
                pa.unlink()
                os.mkfifo(pa)
            elif kind == "directory entry":
                pa.unlink()
                pa.mkdir()
            elif kind == "entry linked to /dev/zero (endless)":
                pa.unlink()
                os.symlink("/dev/zero", pa)
            elif kind == "entry linked to /dev/null":
                pa.unlink()
                os.symlink("/dev/null", pa)
            elif kind == "entry copied over another key's":
                shutil.copyfile(pb, pa)
            elif kind == "entry with its key edited":
                rec = json.loads(pa.read_text())
                rec["key"] = "0" * 20
                pa.write_text(json.dumps(rec))
            elif kind == "entry with its value edited (byte count)":
                rec = json.loads(pa.read_text())
                rec["value"] = {"v": 12345}
                pa.write_text(json.dumps(rec))
            elif kind == "entry truncated":
                pa.write_bytes(pa.read_bytes()[:20])
            elif kind == "entry of 0 bytes":
                pa.write_bytes(b"")
            elif kind == "entry not UTF-8":
                pa.write_bytes(b"\xff\xfe" * 10)
            elif kind == "entry larger than the limit":
                with pa.open("wb") as fh:
                    fh.truncate(mod.MAX_ENTRY_BYTES + 1)
            elif kind == "entry nested 100000 deep":
                pa.write_text("[" * 100000 + "]" * 100000)
            elif kind == "entry a JSON list":
                pa.write_text("[1, 2]")
            elif kind == "entry without settings":
                pa.write_text(json.dumps({"value": {"v": 1}}))
            elif kind == "cache folder is a file":
                shutil.rmtree(root / "cache")
                (root / "cache").write_text("")
            elif kind == "entry dangling link":
                pa.unlink()
                os.symlink(root / "nowhere", pa)
            else:
                raise AssertionError(f"unknown kind {kind}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = cache.get(a)
                if got is not None:
                    raise AssertionError(f"untrusted entry returned: {got!r}")
                cache.put(a, {"v": 1})  # must not raise (a warning at most)
            return "miss"
        finally:
            shutil.rmtree(root, ignore_errors=True)

    return run


def _atomic_case(kind: str) -> Callable[[], Any]:
    """``dmftsolve._files.atomic_write`` in one failure mode: a FileWriteError naming the file,
    the old content intact, no temporary file left (or, for ``ok`` kinds, the new content)."""
    def run() -> str:
        import errno

        from dmftsolve._files import FileWriteError, atomic_write

        root = Path(tempfile.mkdtemp(prefix="dmftsolve_atomic_case_"))
        target = root / "out.png"
        target.write_bytes(b"old")

        def fail(code: int) -> Callable[[Any], None]:
            def write(fh: Any) -> None:
                fh.write(b"partial")
                raise OSError(code, os.strerror(code))
            return write

        try:
            if kind.startswith("writer fails"):
                code = {"ENOSPC": errno.ENOSPC, "EFBIG": errno.EFBIG, "EIO": errno.EIO,
                        "EDQUOT": errno.EDQUOT}[kind.split()[-1]]
                try:
                    atomic_write(target, fail(code))
                except FileWriteError as exc:
                    if str(target) not in str(exc):
                        raise AssertionError(f"message does not name the file: {exc}") from None
                else:
                    raise AssertionError("no error")
                if target.read_bytes() != b"old":
                    raise AssertionError("the old file was changed")
            elif kind == "interrupted while writing":
                def interrupted(fh: Any) -> None:
                    fh.write(b"partial")
                    raise KeyboardInterrupt
                try:
                    atomic_write(target, interrupted)
                except KeyboardInterrupt:
                    pass
                if target.read_bytes() != b"old":
                    raise AssertionError("the old file was changed")
            elif kind in ("FIFO target", "directory target", "/dev/null target"):
                dest = {"FIFO target": root / "fifo", "directory target": root / "dir",
                        "/dev/null target": Path("/dev/null")}[kind]
                if kind == "FIFO target":
                    os.mkfifo(dest)
                elif kind == "directory target":
                    dest.mkdir()
                try:
                    atomic_write(dest, lambda fh: fh.write(b"new"))
                except FileWriteError:
                    pass
                else:
                    raise AssertionError(f"wrote to {kind}")
            elif kind == "missing directory":
                try:
                    atomic_write(root / "no" / "such" / "f.png", lambda fh: fh.write(b"new"))
                except FileWriteError as exc:
                    if "f.png" not in str(exc):
                        raise AssertionError(f"message does not name the file: {exc}") from None
                else:
                    raise AssertionError("no error")
            elif kind == "link to a regular file (ok)":
                real = root / "real.png"
                real.write_bytes(b"old")
                os.symlink(real, root / "link.png")
                atomic_write(root / "link.png", lambda fh: fh.write(b"new"))
                if real.read_bytes() != b"new" or not (root / "link.png").is_symlink():
                    raise AssertionError("the link was replaced instead of the file it names")
            elif kind == "replace keeps the mode (ok)":
                os.chmod(target, 0o640)
                atomic_write(target, lambda fh: fh.write(b"new"))
                if (target.stat().st_mode & 0o777) != 0o640 or target.read_bytes() != b"new":
                    raise AssertionError("mode or content wrong")
            else:
                raise AssertionError(f"unknown kind {kind}")
            left = [p.name for p in root.iterdir() if p.name.endswith(".tmp")]
            if left:
                raise AssertionError(f"temporary files left: {left}")
            return "ok"
        finally:
            import shutil

            shutil.rmtree(root, ignore_errors=True)

    return run


def _issue50_cases() -> list[Case]:
    """Issue 50: wrong answers with exit 0, tracebacks, hangs, data loss and unclear failures in
    classes no earlier list had — every output path of every command, the --sim counts and their
    fit, the figure cache, atomic writes, signals at start-up and mid-run, output encodings,
    Monte Carlo sizes a heavy label cannot be sampled with, quadratures whose terms cancel,
    widths the t = 0 law cannot cover, and targets without information about their latent."""
    import signal as _signal

    import numpy as np

    f = _fixtures()
    root = f["root"]
    c: list[Case] = []
    # --- every output path of every command: refused before the work (exit 2), never a hang
    bad_paths = [
        ("FIFO", f"{root}/fifo.png"), ("FIFO, no extension", f"{root}/fifo"),
        ("directory with a figure suffix", f"{root}/dir.png"), ("/dev/null", "/dev/null"),
        ("/dev/full", "/dev/full"), ("link to /dev/null", f"{root}/null.png"),
        ("link to /dev/zero", f"{root}/zero.png"), ("symlink loop", f"{root}/loop_a.png"),
        ("dangling link into a missing directory", f"{root}/dangling.png"),
        ("a file where a directory should be", f"{root}/plain/f.png"),
        ("missing directory", f"{root}/missing/f.png"), ("NUL byte", "f\x00.png"),
        ("empty", ""), ("unknown format", f"{root}/f.docx"), ("/proc file", "/proc/self/status"),
    ]
    for g in ("simulate", "spectrum", "transition"):
        for label, path in bad_paths:
            c.append(_cli(g, "output path", f"--plot {label}", "input", "--plot", path))
    # --- the --sim counts of transition: read and fitted before the work
    for key, path in f.items():
        if key.startswith("sim:"):
            c.append(_cli("transition", "sim counts", f"--sim {key[4:]}", "input", "--sim", path))
    for label, path in [("FIFO", f"{root}/fifo.json"), ("directory", f"{root}/dir.json"),
                        ("link to /dev/zero", f"{root}/zero.json"), ("/dev/null", "/dev/null"),
                        ("symlink loop", f"{root}/loop_a.png")]:
        c.append(_cli("transition", "sim file kind", f"--sim {label}", "input", "--sim", path))
    # --- fits of user counts (the API): refused where they cannot be fitted
    from dmftsolve.thresholds.delta50 import fit_counts

    fits = [
        ("one delta", [5, 5], [0, 10], [10, 10]),
        ("one delta, three points", [5, 5, 5], [0, 5, 10], [10] * 3),
        ("all zero", [4, 5, 6], [0, 0, 0], [8] * 3), ("all successes", [4, 5, 6], [8] * 3, [8] * 3),
        ("falling", [4, 5, 6], [8, 4, 0], [8] * 3), ("flat", [4, 5, 6], [4, 4, 4], [8] * 3),
        ("extrapolated below zero", [1, 2], [999999, 1000000], [1000000] * 2),
        ("extrapolated above", [4, 5, 6], [0, 1, 2], [40] * 3),
        ("extrapolated below", [4, 5, 6], [38, 39, 40], [40] * 3),
        ("negative delta", [-1, 5], [0, 8], [8, 8]), ("NaN delta", [np.nan, 5], [0, 8], [8, 8]),
        ("successes above trials", [4, 5], [0, 9], [8, 8]), ("zero trials", [4, 5], [0, 0], [0, 8]),
        ("negative successes", [4, 5], [-1, 8], [8, 8]), ("no points", [], [], []),
    ]
    for label, x, k, n in fits:
        c.append(_api("fit counts", f"fit_counts: {label}", "input",
                      lambda x=x, k=k, n=n: fit_counts(x, k, n)))

    def fit_ok(x: list[float], k: list[int], n: list[int]) -> float:
        mu, se, _ = fit_counts(x, k, n)
        if not (min(x) <= mu <= max(x) and se > 0):
            raise AssertionError(f"wrong answer: delta_50 = {mu} ± {se}")
        return mu

    for label, x, k, n in [("search-like", [4, 5, 6, 7], [1, 4, 9, 15], [16] * 4),
                           ("separated (a step)", [4, 5], [0, 8], [8, 8]),
                           ("pooled equal deltas", [4, 5, 5, 6], [0, 1, 7, 8], [8] * 4),
                           ("huge counts", [4, 5, 6], [10**5, 5 * 10**8, 10**9 - 10**5], [10**9] * 3)]:
        c.append(_api("fit counts", f"fit_counts: {label} (δ_50 inside, error > 0)", "ok",
                      lambda x=x, k=k, n=n: fit_ok(x, k, n)))
    # --- the figure cache: entries that must not be trusted, hang or exhaust memory
    for kind in ("FIFO entry", "directory entry", "entry linked to /dev/zero (endless)",
                 "entry linked to /dev/null", "entry copied over another key's", "entry with its key edited",
                 "entry with its value edited (byte count)", "entry truncated", "entry of 0 bytes",
                 "entry not UTF-8", "entry larger than the limit", "entry nested 100000 deep",
                 "entry a JSON list", "entry without settings", "cache folder is a file",
                 "entry dangling link"):
        c.append(_api("cache", f"PointCache: {kind}", "ok", _cache_case(kind)))
    # --- atomic writes: a failure names the file and loses nothing
    for kind in ("writer fails ENOSPC", "writer fails EFBIG", "writer fails EIO", "writer fails EDQUOT",
                 "interrupted while writing", "FIFO target", "directory target", "/dev/null target",
                 "missing directory", "link to a regular file (ok)", "replace keeps the mode (ok)"):
        c.append(_api("atomic write", f"atomic_write: {kind}", "ok", _atomic_case(kind)))
    # --- labels whose moments a Monte Carlo of the given size cannot resolve: refused up front
    for power in (8, 10, 12, 16, 20, 24, 30, 40):
        t = f"z**{power}"
        c.append(_cli("dmft", "heavy moments", f"--target {t} --paths 400", "input", "--target", t))
        c.append(_cli("simulate", "heavy moments", f"--target {t} (n = 40)", "input", "--target", t))
        c.append(_cli("threshold", "heavy moments", f"--target {t} --paths 2000", "input", "--target", t))
    for t in ("exp(2*z)", "exp(3*z)", "cosh(3*z)", "z1**10*z2**2", "exp(z1 + z2)*z1**4", "sinh(2*z)",
              "z**6 + z**30", "(z**2 - 1)**8"):
        c.append(_cli("dmft", "heavy moments", f"--target {t!r} --paths 400", "input", "--target", t))
    c.append(_cli("dmft", "heavy moments", "--target z**40 (default 20000 paths)", "input", "--target",
                  "z**40", "--delta", "2", tiny=False))

    def population_ok(t: str) -> float:  # the quadrature itself is right for heavy labels
        import math

        import dmftsolve as ds
        from dmftsolve.population import population_loss

        p = int(t.split("**")[1])
        value = population_loss(ds.Problem.build(target=t, activation="quad"), [[0.0]], [[0.0]]).value
        exact = math.prod(range(2 * p - 1, 0, -2)) / 2  # E[z^(2p)]/2
        if abs(value / exact - 1) > 1e-9:
            raise AssertionError(f"wrong answer: {value} vs {exact}")
        return value

    for t in ("z**10", "z**20", "z**40"):
        c.append(_api("heavy moments", f"population_loss({t}) at W = 0 is E[z^2p]/2", "ok",
                      lambda t=t: population_ok(t)))
    # --- quadratures whose terms cancel below double precision: not a success
    from dmftsolve.gaussian import expect

    for scale in (1e12, 1e16, 1e20, 1e30, 1e100):
        c.append(_api("precision exhausted", f"expect(z²·{scale:g} − {scale:g}) (terms cancel)", "solver",
                      lambda s=scale: expect(lambda x: s * x[:, 0] ** 2 - s, [0.0], [[1.0]], throw=False)))
    for scale in (1e10, 1e30):
        c.append(_api("precision exhausted", f"expect(z·{scale:g}) (mean 0 from cancelling terms)", "solver",
                      lambda s=scale: expect(lambda x: s * x[:, 0] ** 3, [0.0], [[1.0]], throw=False)))
    # --- widths the t = 0 quadrature law cannot cover: one line, no internal error or OOM kill
    for m in (10, 13, 16, 20, 32, 33, 50, 64, 100):
        c.append(_cli("spectrum", "width", f"--m {m} at t = 0", "input", "--m", str(m)))
    # --- targets that carry no information about their latent
    for g in ("threshold", "spectrum"):
        for t, extra in (("eps", ()), ("0*z + eps", ()), ("eps**2 - 1", ()), ("abs(eps)", ()),
                         ("eps*z2**0", ("--k", "2"))):
            c.append(_cli(g, "no information", f"--target {t!r} {' '.join(extra)}".strip(), "input",
                          "--target", t, *extra))
    # --- a diverging simulate whose losses' spread overflows: exit 1, never a rate with NaN errors
    for eta in ("1e10", "1e30", "1e60", "1e100"):
        c.append(_cli("simulate", "diverging (spread overflows)", f"--activation relu --eta {eta}", "solver",
                      "--activation", "relu", "--eta", eta, fast=False))
    # --- signals: one line and 128 + signum, at start-up (in main) and mid-run
    work = ["dmft", "--delta", "2", "--steps", "300", "--paths", "20000"]
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU"):
        signum = getattr(_signal, name)
        for when, after in (("during start-up", 0.6), ("mid-run", 2.5)):
            c.append(_api("signal", f"{name} {when}", "ok",
                          lambda s=signum, a=after: _in_subprocess(work, signum=s, after=a), fast=False))
    # --- output encodings: the result survives, in the locale's own encoding
    runs = {"alg-threshold": ["alg-threshold", "--target", "Min(z**2, 1e-3)"],
            "dmft": ["dmft", *TINY["dmft"]], "simulate": ["simulate", *TINY["simulate"]],
            "spectrum": ["spectrum", "--delta", "3", "--target", "Min(z**2, 3)", "--activation", "quad"],
            "error line": ["dmft", "--delta", "-1"], "--help": ["transition", "--help"]}
    for enc in ("ascii", "latin-1", "cp1252", "iso8859-7"):
        for label, argv in runs.items():
            code = 2 if label == "error line" else 0
            c.append(_api("encoding", f"PYTHONIOENCODING={enc}: {label}", "ok",
                          lambda argv=argv, enc=enc, code=code: _in_subprocess(
                              argv, env={"PYTHONIOENCODING": enc}, expect_code=code, encoding=enc),
                          fast=False))
    # --- the figure scripts' outputs (validation/figures/common.write_outputs): one FileWriteError
    def outputs_case(kind: str) -> Callable[[], Any]:
        def run() -> str:
            import shutil

            from dmftsolve._files import FileWriteError
            from validation.figures import common as mod
            out = Path(tempfile.mkdtemp(prefix="dmftsolve_outputs_case_"))
            try:
                if kind == "JSON path is a FIFO":
                    os.mkfifo(out / "fig.json")
                elif kind == "JSON path is a directory":
                    (out / "fig.json").mkdir()
                elif kind == "JSON path links to /dev/null":
                    os.symlink("/dev/null", out / "fig.json")
                elif kind == "JSON path links to /dev/full":
                    os.symlink("/dev/full", out / "fig.json")
                elif kind == "an old JSON stays when the new one fails":
                    (out / "fig.json").write_text("old")
                    os.chmod(out, 0o500)
                try:
                    mod.write_outputs(out, "fig", {"a": 1}, None, "")
                except FileWriteError as exc:
                    if "fig.json" not in str(exc):
                        raise AssertionError(f"message does not name the file: {exc}") from None
                    if kind.startswith("an old") and (out / "fig.json").read_text() != "old":
                        raise AssertionError("the old file was lost") from None
                    return "refused"
                if os.geteuid() == 0 and kind.startswith("an old"):
                    return "root writes anyway"
                raise AssertionError("no error")
            finally:
                os.chmod(out, 0o700)
                shutil.rmtree(out, ignore_errors=True)
        return run

    for kind in ("JSON path is a FIFO", "JSON path is a directory", "JSON path links to /dev/null",
                 "JSON path links to /dev/full", "an old JSON stays when the new one fails"):
        c.append(_api("figure outputs", f"write_outputs: {kind}", "ok", outputs_case(kind)))
    # --- the kurtosis rule against its closed form: y = z^p, centred, E[z^2j] = (2j - 1)!!
    import math

    from dmftsolve.population import check_sampling

    def dfact(j: int) -> int:
        return math.prod(range(2 * j - 1, 0, -2))

    for p in range(3, 41):
        if p > 24 and p % 4:
            continue
        mu = dfact(p // 2) if p % 2 == 0 else 0  # E[z^p]
        m2 = dfact(p) - mu**2
        m4 = (dfact(2 * p) - 4 * mu * (dfact(3 * p // 2) if p % 2 == 0 else 0) + 6 * mu**2 * dfact(p)
              - 3 * mu**4)
        kappa = m4 / m2**2
        for n in (100, 10**4, 10**6):
            expect_class = "input" if n < kappa - 1 else "ok"
            c.append(_api("heavy moments", f"check_sampling(z**{p}, n={n}) (κ = {kappa:.3g})", expect_class,
                          lambda p=p, n=n: check_sampling(__import__("dmftsolve").Problem.build(
                              target=f"z**{p}"), n, "n")))
    # --- more signals: the two profiling timers, a second Ctrl-C while ending, an inherited ignore
    for name in ("SIGVTALRM", "SIGPROF"):
        signum = getattr(_signal, name)
        c.append(_api("signal", f"{name} mid-run", "ok",
                      lambda s=signum: _in_subprocess(work, signum=s, after=2.5), fast=False))

    def twice() -> str:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; from dmftsolve.cli import main; "
                                 "sys.exit(main())", *work], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(ROOT)},
                                preexec_fn=_terminal_sigint)
        time.sleep(2.5)
        proc.send_signal(_signal.SIGINT)
        time.sleep(0.005)
        proc.send_signal(_signal.SIGINT)
        proc.send_signal(_signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        lines = err.decode().strip().splitlines()
        if proc.returncode != 130 or len(lines) != 1:
            raise AssertionError(f"exit {proc.returncode}, stderr {lines[:3]}")
        return "one line"

    c.append(_api("signal", "SIGINT, SIGINT and SIGTERM in 5 ms", "ok", twice, fast=False))

    def ignored() -> str:
        short = ["dmft", *TINY["dmft"]]
        proc = subprocess.Popen(["nohup", sys.executable, "-c", "import sys; from dmftsolve.cli import main; "
                                 "sys.exit(main())", *short], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=root)
        time.sleep(0.8)
        proc.send_signal(_signal.SIGHUP)
        out, _ = proc.communicate(timeout=60)
        if proc.returncode != 0:
            raise AssertionError(f"SIGHUP under nohup ended the run (exit {proc.returncode})")
        return "finished"

    if subprocess.run(["which", "nohup"], capture_output=True).returncode == 0:
        c.append(_api("signal", "SIGHUP under nohup stays ignored", "ok", ignored, fast=False))
    # --- more encodings, and an error line echoing text the encoding lacks
    for enc in ("cp437", "koi8-r", "mac-roman"):
        for label in ("dmft", "alg-threshold", "error line", "--help"):
            argv = runs[label]
            code = 2 if label == "error line" else 0
            c.append(_api("encoding", f"PYTHONIOENCODING={enc}: {label}", "ok",
                          lambda argv=argv, enc=enc, code=code: _in_subprocess(
                              argv, env={"PYTHONIOENCODING": enc}, expect_code=code, encoding=enc),
                          fast=False))
    for enc in ("ascii", "latin-1", "cp1252", "utf-8"):
        c.append(_api("encoding", f"PYTHONIOENCODING={enc}: error echoing 'δ∞→σ' in a target", "ok",
                      lambda enc=enc: _in_subprocess(["alg-threshold", "--target", "δ∞→σ"],
                                                     env={"PYTHONIOENCODING": enc}, expect_code=2,
                                                     encoding=enc), fast=False))
    c.append(_api("encoding", "LC_ALL=C without locale coercion: dmft", "ok",
                  lambda: _in_subprocess(["dmft", *TINY["dmft"]], env={"LC_ALL": "C", "LANG": "C",
                                                                       "PYTHONCOERCECLOCALE": "0",
                                                                       "PYTHONUTF8": "0"},
                                         expect_code=0, encoding="ascii"), fast=False))
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
        "Generated by `python -m validation.bad_inputs` (do not edit by hand; re-run it). Each row was run",
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
