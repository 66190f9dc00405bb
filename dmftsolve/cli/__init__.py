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
* 130 — interrupted (Ctrl-C);
* 143 — terminated (SIGTERM), handled like Ctrl-C: one line on stderr and the
  worker processes ended.

``--workers`` larger than the CPUs available (``os.sched_getaffinity``) is
lowered to that number, with a warning. A closed standard output
(``dmftsolve dmft … >&-``) is refused before any work (exit 2).

Warnings raised while a command runs are printed once each, one line per
warning, after a successful run; on failure only the error line is printed.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

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


#: Help of ``--debug`` (every command takes it).
_DEBUG_HELP = "on an error, the full traceback, not one line"


def build_parser() -> argparse.ArgumentParser:
    from dmftsolve.cli._common import HelpFormatter

    parser = _Parser(
        prog="dmftsolve",
        usage="%(prog)s [--version] [--debug] COMMAND [options]",
        description=(
            "Sample-size thresholds at which full-batch gradient descent on a two-layer\n"
            "network learns a hidden direction: the discrete-time DMFT of GD, Hessian\n"
            "spectra, the thresholds delta_NN and delta_alg, a finite-d GD simulator, and\n"
            "GD's finite-d success curve. Every command prints tables, or one JSON object\n"
            "with --json; 'dmftsolve COMMAND --help' lists its options."
        ),
        epilog=(
            "exit status: 0 success, 1 the computation failed, 2 bad input, 130 Ctrl-C,\n"
            "143 SIGTERM; every failure is one line on stderr (--debug: the traceback).\n\n"
            "examples:\n"
            "  dmftsolve alg-threshold --target 'z1*z2'\n"
            "  dmftsolve simulate --d 300 --delta 4,8 --trials 4\n"
            "  dmftsolve transition --d 1000\n\n"
            "reference: docs/cli.md; advice: docs/tips.md"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dmftsolve {__version__}",
                        help="print the version and exit")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
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
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    return parser


def _text(exc: BaseException, limit: int = 240) -> str:
    """``str(exc)`` on one line, cut to ``limit`` characters (so a hint after it survives)."""
    return one_line(str(exc), limit)


def _options(parser: argparse.ArgumentParser | None) -> frozenset[str]:
    """The option strings (``--eta``, …) ``parser`` takes; empty for None."""
    if parser is None:
        return frozenset()
    return frozenset(o for action in parser._actions for o in action.option_strings)


def _classify(exc: BaseException, options: frozenset[str] | None = None) -> tuple[int, str]:
    """Exit status and message (without the ``dmftsolve <cmd>: error:`` prefix) for ``exc``.

    ``options`` are the options of the command that ran: a hint names an option only
    if the command has it (``alg-threshold`` has no ``--eta``).
    """
    options = frozenset() if options is None else options
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
        hint = ("; try a smaller step size --eta" if "--eta" in options
                else "; the numbers involved are too large or too small for double precision")
        return 1, f"numerical failure ({type(exc).__name__}): {_text(exc)}{hint}"
    try:
        from numpy.linalg import LinAlgError
    except ImportError:  # pragma: no cover
        LinAlgError = ()  # type: ignore[assignment,misc]  # noqa: N806
    if isinstance(exc, LinAlgError):
        return 1, f"linear algebra failure: {_text(exc)}"
    if isinstance(exc, NotImplementedError):  # a case the chosen method does not cover: input
        return 2, f"not supported: {_text(exc)}"
    if isinstance(exc, ValueError):  # bad input, checked by the library
        return 2, str(exc)
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, BrokenProcessPool):
        hint = "; out of memory? try --workers 1" if "--workers" in options else "; out of memory?"
        return 1, f"a worker process died ({_text(exc)}){hint}"
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


class Signalled(BaseException):
    """Raised in the main process by the signal handlers :func:`main` installs.

    ``signum`` is the signal; the command exits with ``128 + signum`` after one line on
    stderr (:data:`SIGNAL_TEXT`).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: SIGTERM's exception (kept as a name: the signal most supervisors send).
Terminated = Signalled

#: The signals :func:`main` turns into one error line and exit status ``128 + signum``, with
#: what the line says. A signal the parent set to be ignored (``nohup`` ignores SIGHUP, a
#: shell's background job SIGINT) stays ignored.
SIGNAL_TEXT: dict[str, str] = {
    "SIGINT": "interrupted", "SIGTERM": "terminated (SIGTERM)",
    "SIGHUP": "hangup (SIGHUP: the terminal or session closed)", "SIGQUIT": "quit (SIGQUIT)",
    "SIGUSR1": "stopped by signal SIGUSR1", "SIGUSR2": "stopped by signal SIGUSR2",
    "SIGALRM": "stopped by signal SIGALRM (a time limit?)",
    "SIGXCPU": "stopped by signal SIGXCPU (CPU time limit reached)",
    "SIGVTALRM": "stopped by signal SIGVTALRM", "SIGPROF": "stopped by signal SIGPROF",
}


def _signals() -> list[int]:
    return [getattr(signal, name) for name in SIGNAL_TEXT if hasattr(signal, name)]


def _signal_message(signum: int) -> str:
    try:
        name = signal.Signals(signum).name
    except ValueError:  # pragma: no cover
        return f"stopped by signal {signum}"
    return SIGNAL_TEXT.get(name, f"stopped by signal {name}")


def _end_children() -> None:
    """Kill the worker processes this process started (process pools), and reap them.

    On SIGTERM or Ctrl-C the pool workers must not outlive the command: a worker
    busy in a long task would keep running, reparented, after the command exits.
    ``multiprocessing.active_children`` lists exactly the processes this process
    started through :mod:`multiprocessing` (which process pools use); they get
    SIGKILL (a worker may have inherited a SIGTERM handler) and are waited for.
    """
    if "multiprocessing" not in sys.modules:
        return
    import multiprocessing
    from concurrent.futures import InvalidStateError

    previous_hook = threading.excepthook

    def quiet(args: threading.ExceptHookArgs) -> None:
        # A process pool's management thread sees its workers die and sets an exception on
        # futures the ending command has already cancelled (CPython 3.11,
        # ``terminate_broken``): not an error of the command, and its traceback would break
        # the one-line contract on stderr.
        if not issubclass(args.exc_type, InvalidStateError):
            previous_hook(args)

    threading.excepthook = quiet
    try:
        children = multiprocessing.active_children()
    except Exception:  # noqa: BLE001 - best effort while the command is ending
        return
    for child in children:
        try:
            child.kill()
        except Exception:  # noqa: BLE001, S110
            pass
    for child in children:
        try:
            child.join(timeout=5)
        except Exception:  # noqa: BLE001, S110
            pass


def _quiet_signals() -> None:
    """Ignore every handled signal from now on: the command is already ending, and a second
    Ctrl-C (or a SIGTERM after it) must not break the one error line with a traceback."""
    for sig in _signals():
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def _signals_as_exceptions() -> Iterator[None]:
    """While inside, each signal of :data:`SIGNAL_TEXT` in this (main) process raises
    :class:`Signalled` (once: further signals are ignored while the command ends).

    Forked workers inherit the handlers; in them a handler restores the default action and
    re-sends the signal, so a worker told to stop stops.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def handler(signum: int, frame: object) -> None:
        # a signal that comes while the first is being handled (nested, at any bytecode of this
        # function) is dropped: the command is already ending with the first one's status
        if received:
            return
        received.append(signum)
        if os.getpid() != owner:  # a forked worker: die as the signal would make it
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        _quiet_signals()
        # end the workers now: a process pool's shutdown would otherwise wait for their tasks
        _end_children()
        raise Signalled(signum)

    previous: dict[int, Any] = {}
    received: list[int] = []
    for sig in _signals():
        try:
            current = signal.getsignal(sig)
            if current is signal.SIG_IGN:  # ignored by the parent (nohup, a background job)
                continue
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # pragma: no cover - not settable here
            continue
    try:
        yield
    finally:
        # after a signal the command is ending: the handlers stay ignoring, since a second
        # signal still pending (it came while the first was handled) would otherwise reach the
        # restored default handler after the error line and end the process with a traceback
        for sig, old in ({} if received else previous).items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, old if old is not None else signal.SIG_DFL)


def _available_cpus() -> int:
    """CPUs this process may run on (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _cap_workers(args: argparse.Namespace) -> None:
    """Lower ``args.workers`` to the CPUs available, with a warning.

    More worker processes than CPUs only add memory and start-up time; results do not
    depend on the count.
    """
    requested = getattr(args, "workers", None)
    if not isinstance(requested, int) or isinstance(requested, bool):
        return
    cpus = _available_cpus()
    if requested > cpus:
        args.workers = cpus
        warnings.warn(f"--workers {requested} is more than the {cpus} CPU(s) available to this "
                      f"process; using --workers {cpus}", UserWarning, stacklevel=2)


#: ASCII spellings of the characters the commands print, for a terminal or file whose encoding
#: lacks them (an ASCII or Latin-1 locale): the fallback :func:`_encoding_fallback` installs.
ASCII_SPELLING: dict[str, str] = {
    "±": "+/-", "δ": "delta", "Δ": "Delta", "σ": "sigma", "η": "eta", "λ": "lambda", "θ": "theta",
    "Θ": "Theta", "μ": "mu", "ε": "eps", "ρ": "rho", "τ": "tau", "χ": "chi", "ξ": "xi", "Ξ": "Xi",
    "ψ": "psi", "φ": "phi", "α": "alpha", "β": "beta", "γ": "gamma", "π": "pi", "…": "...",
    "–": "-", "—": "--", "−": "-", "×": "x", "·": "*", "≈": "~", "≤": "<=", "≥": ">=", "≠": "!=",
    "→": "->", "←": "<-", "∞": "inf", "√": "sqrt", "²": "^2", "³": "^3", "⁴": "^4", "¹": "^1",
    "⁻": "^-", "ᵀ": "^T", "⊥": "_perp", "∈": " in ", "∑": "sum", "Σ": "Sum", "‖": "||", "’": "'",
    "‘": "'", "“": '"', "”": '"', "°": " deg", "½": "1/2", "µ": "u", "\u00a0": " ",
}

#: Characters whose encoding decides, before any work, whether the fallback is needed.
_PROBE = "±δσηλ…−×≈≤≥→²ᵀ"


def _transliterate(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler ``dmftsolve-ascii``: :data:`ASCII_SPELLING`, else the ASCII letters of
    the character's decomposition, else a ``\\uXXXX`` escape (never an exception)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    import unicodedata

    out = []
    for ch in exc.object[exc.start:exc.end]:
        if ch in ASCII_SPELLING:
            out.append(ASCII_SPELLING[ch])
            continue
        plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
        out.append(plain if plain else (f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}"))
    return "".join(out), exc.end


codecs.register_error("dmftsolve-ascii", _transliterate)


@contextlib.contextmanager
def _encoding_fallback() -> Iterator[None]:
    """While inside, stdout and stderr survive any encoding.

    Decided before the work starts: a stream whose encoding cannot write the characters the
    commands print (``±``, ``δ``, …; an ASCII or Latin-1 locale, ``PYTHONIOENCODING=ascii``)
    writes them in ASCII (:data:`ASCII_SPELLING`); one that can, but would raise on a
    character it lacks (``errors='strict'``, e.g. a file name with undecodable bytes echoed
    back), falls back the same way for that character only. Restored on the way out.
    """
    restore = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        reconfigure = getattr(stream, "reconfigure", None)
        encoding = getattr(stream, "encoding", None)
        errors = getattr(stream, "errors", None)
        if reconfigure is None or not isinstance(encoding, str):
            continue
        try:
            _PROBE.encode(encoding)
            lacks = False
        except (UnicodeError, LookupError):
            lacks = True
        if not lacks and errors not in ("strict", None):
            continue
        try:
            reconfigure(errors="dmftsolve-ascii")
        except (ValueError, OSError, TypeError):  # closed, or not reconfigurable
            continue
        restore.append((stream, errors))
    try:
        yield
    finally:
        for stream, errors in restore:
            with contextlib.suppress(ValueError, OSError, TypeError):
                stream.reconfigure(errors=errors)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dmftsolve`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status.

    Before any work: every signal of :data:`SIGNAL_TEXT` (Ctrl-C, SIGTERM, SIGHUP, …) is set
    to end the command with one line on stderr, the worker processes ended, and exit status
    ``128 + signum`` (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP); and the output
    encoding's fallback is decided (:func:`_encoding_fallback`).
    """
    with _signals_as_exceptions(), _encoding_fallback():
        return _main(list(sys.argv[1:] if argv is None else argv))


def _main(argv: list[str]) -> int:
    debug = "--debug" in argv
    command = "?"
    options: frozenset[str] = frozenset()
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
        options = _options(getattr(parser, "command_parsers", {}).get(command))
        if sys.stdout is None or _closed(sys.stdout):
            print(f"dmftsolve {command}: error: standard output is closed, so the results "
                  "could not be printed; redirect it to a file (> results.txt)", file=sys.stderr)
            return 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _cap_workers(args)
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
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:  # pragma: no cover
            pass
        return 141
    except BaseException as exc:  # noqa: BLE001 - the one place every failure is reported
        if isinstance(exc, (KeyboardInterrupt, Signalled)):
            _quiet_signals()  # a second signal while ending must not print a traceback
            _end_children()
        if debug:
            raise
        if isinstance(exc, Signalled):
            code, message = 128 + exc.signum, _signal_message(exc.signum)
        else:
            code, message = _classify(exc, options)
        try:
            sys.stdout.flush()
        except (OSError, ValueError, AttributeError):
            pass
        try:
            print(one_line(f"dmftsolve {command}: error: {message}"), file=sys.stderr)
        except (OSError, ValueError, AttributeError):  # stderr closed too: the status must do
            pass
        return code


def _closed(stream: object) -> bool:
    """Whether ``stream`` cannot be written: closed, or its file descriptor is not open."""
    if getattr(stream, "closed", False):
        return True
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # pytest's capture, StringIO: writable
        return False
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
