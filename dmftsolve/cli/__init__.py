"""Command-line interface: ``dmftsolve <command> [options]``.

Each command lives in its own module of this package and exposes
``register(subparsers)``; add new commands to :data:`COMMANDS`. Command modules
import the solvers inside their ``run()``, so ``dmftsolve --help`` costs little
more than ``import dmftsolve``.

Exit status and errors
----------------------
Every failure prints exactly one line on stderr,
``dmftsolve <command>: error: <message>``, and no traceback:

* 0 — success;
* 1 — the computation failed (a solver status other than success, a
  :class:`~dmftsolve.results.SolverError`, non-finite numbers, overflow, out of
  memory, or an unexpected internal error — the last with a hint to re-run with
  ``--debug``, which shows the traceback);
* 2 — bad input (an unknown option, a value out of range, a target that does
  not parse, a job too large for this machine, an unwritable output path);
* 130 — interrupted (Ctrl-C).

Warnings raised while a command runs are printed once each, one line per
warning, after a successful run; on failure only the error line is printed.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

from dmftsolve import __version__

#: Modules (in this package) that define commands, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("alg_threshold", "simulate", "dmft", "spectrum", "threshold",
                             "transition")

#: Longest error line printed (the rest is cut, with '…').
LINE_LIMIT = 400

#: Longest quoted value kept inside an error line.
QUOTE_LIMIT = 80

_QUOTED = re.compile("('[^'\n]{" + str(QUOTE_LIMIT) + ",}'|\"[^\"\n]{" + str(QUOTE_LIMIT) + ",}\")")


def one_line(message: str, limit: int = LINE_LIMIT) -> str:
    """``message`` on one line: whitespace runs collapsed, long quoted values and the
    whole line cut to their limits with '…'."""
    text = " ".join(str(message).split())
    text = _QUOTED.sub(lambda mt: mt.group(0)[: QUOTE_LIMIT - 1] + "…" + mt.group(0)[0], text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line: ``<prog>: error: <message>``."""

    def error(self, message: str) -> NoReturn:
        print(one_line(f"{self.prog}: error: {message} (see '{self.prog} --help')"),
              file=sys.stderr)
        self.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dmftsolve",
        description=(
            "Feature-learning thresholds for gradient descent on two-layer networks: "
            "the discrete-time DMFT, the weak-recovery threshold δ_alg, and a finite-d "
            "GD simulator that every theoretical number is checked against."
        ),
        epilog="Exit status: 0 success, 1 the computation failed, 2 bad input, 130 interrupted; "
               "every failure prints one line on stderr (--debug: the full traceback).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dmftsolve {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, show the full traceback instead of one line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"dmftsolve.cli.{name}")
        except ModuleNotFoundError as exc:  # a command not yet written
            if exc.name != f"dmftsolve.cli.{name}":
                raise
            continue
        module.register(sub)
    parser.commands = list(sub.choices)  # type: ignore[attr-defined]
    parser.command_parsers = dict(sub.choices)  # type: ignore[attr-defined]
    for p in sub.choices.values():
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="on an error, show the full traceback instead of one line")
    return parser


def _text(exc: BaseException, limit: int = 240) -> str:
    """``str(exc)`` on one line, cut to ``limit`` characters (so a hint after it survives)."""
    return one_line(str(exc), limit)


def _classify(exc: BaseException) -> tuple[int, str]:
    """Exit status and message (without the ``dmftsolve <cmd>: error:`` prefix) for ``exc``."""
    from dmftsolve.cli._common import CommandError
    from dmftsolve.results import SolverError

    if isinstance(exc, CommandError):
        return exc.code, str(exc)
    if isinstance(exc, SolverError):
        status = getattr(getattr(exc.result, "status", None), "value", None)
        msg = str(exc)
        return 1, msg if status is None or msg.startswith(status) or f" {status}:" in msg \
            else f"{status}: {msg}"
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted"
    if isinstance(exc, MemoryError):
        return 1, f"out of memory: {_text(exc) or 'allocation failed'}; use fewer paths, steps or samples"
    if isinstance(exc, RecursionError):
        return 2, ("input too deeply nested (recursion limit reached); "
                   "simplify the expression")
    if isinstance(exc, (OverflowError, FloatingPointError, ZeroDivisionError)):
        return 1, f"numerical failure ({type(exc).__name__}): {_text(exc)}; try a smaller step size --eta"
    try:
        from numpy.linalg import LinAlgError
    except ImportError:  # pragma: no cover
        LinAlgError = ()  # type: ignore[assignment,misc]  # noqa: N806
    if isinstance(exc, LinAlgError):
        return 1, f"linear algebra failure: {_text(exc)}"
    if isinstance(exc, ValueError):  # bad input, checked by the library
        return 2, str(exc)
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, BrokenProcessPool):
        return 1, f"a worker process died ({_text(exc)}); out of memory? try --workers 1"
    if isinstance(exc, OSError):
        return 1, f"{type(exc).__name__}: {_text(exc)}"
    return 1, (f"internal error ({type(exc).__name__}: {_text(exc)}); "
               "re-run with --debug for the traceback and report it")


def _flush_warnings(command: str, caught: list[warnings.WarningMessage]) -> None:
    seen: set[str] = set()
    for w in caught:
        text = one_line(f"dmftsolve {command}: warning: {w.message}")
        if text not in seen:
            seen.add(text)
            print(text, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dmftsolve`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    command = "?"
    try:
        parser = build_parser()
        args, extras = parser.parse_known_args(argv)
        if extras:  # reported by the command's own parser, so the line names the command
            getattr(parser, "command_parsers", {}).get(args.command, parser).error(
                f"unrecognized arguments: {' '.join(extras)}")
        debug = bool(getattr(args, "debug", False))
        if args.command is None:
            names = ", ".join(parser.commands)  # type: ignore[attr-defined]
            print(f"dmftsolve: error: no command given; choose one of {names} "
                  "(see 'dmftsolve --help')", file=sys.stderr)
            return 2
        command = args.command
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = int(args.func(args) or 0)
        if code == 0:
            _flush_warnings(command, caught)
        return code
    except SystemExit as exc:  # argparse: a usage error (2, already printed), or --help/--version
        if exc.code in (0, None):
            raise  # --help/--version leave through SystemExit(0), as argparse does
        return exc.code if isinstance(exc.code, int) else 2
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): not an error
        try:
            sys.stdout = open(__import__("os").devnull, "w")  # noqa: SIM115
        except OSError:  # pragma: no cover
            pass
        return 141
    except BaseException as exc:  # noqa: BLE001 - the one place every failure is reported
        if debug:
            raise
        code, message = _classify(exc)
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print(one_line(f"dmftsolve {command}: error: {message}"), file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
