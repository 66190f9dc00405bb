"""Options shared by every command: the problem description and output format,
and the shared checks that run before any work starts (output paths, sizes,
estimated memory and run time)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dmftsolve._files import FIGURE_FORMATS, FileWriteError, check_output_file, savefig
from dmftsolve.defaults import DEFAULT_ETA, DEFAULT_SEED, ETA_BY_ACTIVATION, PROBLEM_DEFAULTS, default_eta
from dmftsolve.problem import Problem
from dmftsolve.results import format_pm as format_pm  # the one rounding rule (reprs use it too)
from dmftsolve.results import jsonable

#: Longest user value quoted in an error message (longer ones are cut, with '…').
ECHO_LIMIT = 80

#: Largest latent dimension k the command line accepts (the solvers' per-sample
#: work and the target's symbol table grow with k; the paper's problems have k <= 3).
MAX_K = 64

#: Estimated run time (seconds) above which a command warns before starting.
WARN_SECONDS = 600.0

#: Estimated run time (seconds) above which a command refuses to start.
MAX_SECONDS = 24 * 3600.0


class CommandError(Exception):
    """A failure the command reports as one line: ``dmftsolve <cmd>: error: <message>``.

    ``code`` is the exit status: 1 for a solver failure (the default), 2 for bad input.
    """

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The ``--help`` layout of every command: one line per option.

    An option is shown as ``--name X`` (its metavar once, not after every alias) and an
    on/off pair as ``--[no-]name``; the description and the examples are printed as
    written. The text may use the terminal's width less one column (argparse keeps two).
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 27,
                 width: int | None = None) -> None:
        if width is None:
            import shutil

            width = shutil.get_terminal_size().columns - 1
        super().__init__(prog, indent_increment, max_help_position, width)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings:
            return super()._format_action_invocation(action)
        if isinstance(action, argparse.BooleanOptionalAction):
            return "--[no-]" + action.option_strings[0].removeprefix("--")
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return names
        metavar = self._format_args(action, self._get_default_metavar_for_optional(action))
        return f"{names} {metavar}"


def command_parser(subparsers: Any, name: str, summary: str, description: str,
                   examples: str, usage: str = "[options]") -> argparse.ArgumentParser:
    """The parser of ``dmftsolve <name>``: ``--help`` is the one-paragraph ``description``,
    the options (one line each, with the default) and ``examples`` (one command a line);
    ``summary`` is the command's line in ``dmftsolve --help``; the full reference is
    docs/cli.md."""
    return subparsers.add_parser(
        name, prog=f"dmftsolve {name}", help=summary, description=description.strip(),
        usage=f"%(prog)s {usage}", formatter_class=HelpFormatter,
        epilog="examples:\n" + "\n".join("  " + line.strip() for line in examples.strip().splitlines())
               + "\n\nreference: docs/cli.md; advice: docs/tips.md",
    )


class StoreGiven(argparse.Action):
    """Store the value, like ``store``, and remember that the option was given
    (:func:`given`): a command can then tell ``--steps 400`` from no ``--steps``."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.__dict__.setdefault("given_options", set()).add(self.dest)


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the option with ``dest`` was on the command line (it must use :class:`StoreGiven`)."""
    return dest in getattr(args, "given_options", set())


def clip(value: Any, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters with '…'."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def positive_int(name: str, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for an integer option that must be >= 1 (and <= ``maximum``)."""
    return int_at_least(name, 1, maximum)


def int_at_least(name: str, minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for an integer option that must be >= ``minimum`` (and <= ``maximum``)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {clip(text)}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {v}")
        if maximum is not None and v > maximum:
            raise argparse.ArgumentTypeError(f"{name} must be <= {maximum}, got {clip(v)}")
        return v
    parse.__name__ = "int"
    return parse


def finite_float(text: str) -> float:
    """An argparse ``type`` for a finite real number."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {clip(text)}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {clip(text)}")
    return v


def null_rtol(text: str) -> float:
    """An argparse ``type`` for ``--null-rtol``: a number in [0, 1)."""
    v = finite_float(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"--null-rtol must be in [0, 1), got {clip(v)}")
    return v


#: Help of ``--null-rtol`` of ``dmft``.
NULL_RTOL_HELP = "innovation variance cut-off (default: by --method)"


def _numbers(text: str, cast: type, kind: str) -> list:
    try:
        values = [cast(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated {kind}, got {clip(text)}") from None
    if cast is float and not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers, got {clip(text)}")
    if cast is float and not values:  # e.g. --delta= : no list of numbers is empty on purpose
        raise argparse.ArgumentTypeError(f"expected comma-separated {kind}, got an empty list")
    return values


def floats(text: str) -> list[float]:
    """argparse type: comma-separated finite numbers, e.g. ``"1,2.5"`` -> ``[1.0, 2.5]``."""
    return _numbers(text, float, "numbers")


def ints(text: str) -> list[int]:
    """argparse type: comma-separated integers, e.g. ``"0,3"`` -> ``[0, 3]``."""
    return _numbers(text, int, "integers")


def _matrix(text: str) -> list[list[float]]:
    """``"0.5,0;0,0.5"`` -> [[0.5, 0], [0, 0.5]] (rows separated by ';')."""
    return [floats(row) for row in text.split(";")]


#: Help of ``--eta``.
ETA_HELP = (f"step size (default: {DEFAULT_ETA:g}; "
            + ", ".join(f"{v:g} for --activation {k}" for k, v in ETA_BY_ACTIVATION.items()) + ")")




def add_problem_arguments(parser: argparse.ArgumentParser, *, hide: tuple[str, ...] = (),
                          steps_help: str | None = None, **defaults: Any) -> None:
    """Add the options that build a :class:`~dmftsolve.problem.Problem`.

    The defaults are :data:`PROBLEM_DEFAULTS`, with ``--eta`` by activation
    (:func:`default_eta`, resolved by :func:`problem_from_args`). ``defaults``
    overrides the default of any option (by its :meth:`Problem.build` keyword);
    an ``eta`` given here holds for every activation. ``hide`` lists the ``dest`` of
    options left out of ``--help`` (still parsed, for a command that refuses them);
    ``steps_help`` replaces the help of ``--steps``, which records whether it was
    given (:func:`given`).
    """
    d = {**PROBLEM_DEFAULTS, "eta": None, **defaults}
    g = parser.add_argument_group("problem (target, network, loss, training)")

    def add(*names: str, help: str, **kw: Any) -> None:  # noqa: A002 - argparse's keyword
        dest = kw.get("dest") or names[0].lstrip("-").replace("-", "_")
        g.add_argument(*names, help=argparse.SUPPRESS if dest in hide else help, **kw)

    add("--target", default=d["target"], metavar="EXPR",
        help="label y = h(z, eps) (default: %(default)s)")
    add("--k", type=positive_int("--k", MAX_K), default=None, metavar="N",
        help="latent dimension k (default: from the target)")
    add("--activation", default=d["activation"], metavar="EXPR",
        help="a name or an expression in r (default: %(default)s)")
    add("--m", type=positive_int("--m"), default=d["m"], metavar="N",
        help="hidden units, the width (default: %(default)s)")
    add("--a", type=floats, default=None, metavar="LIST",
        help="second-layer weights (default: all ones)")
    add("--loss", default=d["loss"], metavar="EXPR",
        help="square, logistic, or in y and f (default: %(default)s)")
    add("--eta", type=finite_float, default=d["eta"], metavar="X",
        help=ETA_HELP if d["eta"] is None else "step size (default: %(default)s)")
    add("--lam", type=finite_float, default=d["lam"], metavar="X",
        help="ridge penalty λ (default: %(default)s)")
    add("--steps", type=int, default=d["steps"], metavar="T", action=StoreGiven,
        help=steps_help or "GD steps T (default: %(default)s)")
    add("--q0", type=finite_float, default=d["q0"], metavar="X",
        help="start: W0 columns ~ N(0, q0/d I) (default: %(default)s)")
    add("--M0", type=_matrix, default=None, metavar="ROWS",
        help="warm start overlaps, rows split by ';' (default: none)")
    add("--Q0", type=_matrix, default=None, metavar="ROWS",
        help="warm start Gram off the target (default: q0·I)")
    add("--hold-zero", type=ints, default=[], metavar="LIST",
        help="0-based directions held at zero (default: none)")
    add("--bias", action="store_true", help="train a bias per unit (b0 = 0, no ridge on b)")


def add_seed_argument(group: Any, help_text: str = "random seed") -> None:
    """``--seed``, default :data:`DEFAULT_SEED` for every command."""
    group.add_argument("--seed", type=int_at_least("--seed", 0), default=DEFAULT_SEED, metavar="N",
                       help=f"{help_text} (default: %(default)s)")


def problem_from_args(args: argparse.Namespace) -> Problem:
    """The :class:`~dmftsolve.problem.Problem` described by the options of :func:`add_problem_arguments`.

    An ``--eta`` not given is set here (on ``args`` too) to :func:`default_eta` of ``--activation``.
    """
    if getattr(args, "eta", None) is None:
        args.eta = default_eta(args.activation)
    return Problem.build(
        target=args.target, activation=args.activation, m=args.m, a=args.a, loss=args.loss,
        eta=args.eta, lam=args.lam, steps=args.steps, q0=args.q0, M0=args.M0, Q0=args.Q0,
        hold_zero=args.hold_zero, k=args.k, bias=bool(getattr(args, "bias", False)),
    )


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="one JSON object on stdout instead of tables")


def emit(args: argparse.Namespace, payload: dict[str, Any], table: Callable[[], str]) -> None:
    """Print ``payload`` as JSON (``--json``) or the human-readable ``table()``."""
    if getattr(args, "json", False):
        json.dump(jsonable(payload), sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(table().rstrip() + "\n")


def format_table(headers: list[str], rows: list[list[Any]], floatfmt: str = ".4g") -> str:
    """A plain aligned text table.

    Not ``tabulate``: right-aligned columns under a dashed rule are all the commands need,
    and 15 lines are cheaper than a run-time dependency for every user.
    """
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return format(v, floatfmt)
        return "" if v is None else str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


# ---------------------------------------------------------------------- checks before work


def check_output_path(path: str | None, option: str = "--plot") -> str | None:
    """Refuse (``ValueError``, exit 2) a figure file that could only fail after the work.

    Checks that matplotlib is importable, that the extension (if any) is a format
    matplotlib writes, and the rules of :func:`dmftsolve._files.check_output_file`: a
    regular file (or none yet) in a directory that takes a new file, on a file system with
    room. Returns the path the figure is written to (:func:`write_figure`): without an
    extension it appends ``.png``.
    """
    if path is None:
        return None
    if not path or "\x00" in path:
        raise ValueError(f"{option}: not a valid file name: {clip(path)}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError(f"{option} needs matplotlib, which is not installed "
                         "(pip install matplotlib, or install dmftsolve with the [plot] extra)") from None
    p = Path(path).expanduser()
    if p.is_dir():
        raise ValueError(f"{option}: {clip(path)} is a directory, not a file")
    suffix = p.suffix.lower().lstrip(".")
    if suffix and suffix not in FIGURE_FORMATS:
        raise ValueError(f"{option}: unknown figure format {clip(suffix)} (use one of "
                         f"{', '.join(sorted(FIGURE_FORMATS))})")
    if not suffix:
        if p.exists() or p.is_symlink():  # e.g. /dev/null: refused as such, not as /dev/null.png
            check_output_file(p, option)
        p = p.with_name(p.name + ".png")
    check_output_file(p, option)
    return str(p)


def write_figure(fig: Any, path: str, option: str = "--plot", **kwargs: Any) -> None:
    """Save ``fig`` to ``path`` atomically (:func:`dmftsolve._files.savefig`) and close it.

    A failure (a full disk, a size limit) is a :class:`CommandError` naming the file (exit 1);
    the old file, if any, is left as it was.
    """
    import matplotlib.pyplot as plt

    try:
        savefig(fig, path, option, **kwargs)
    except FileWriteError as exc:
        raise CommandError(str(exc), code=1) from None
    finally:
        plt.close(fig)


def add_progress_argument(group: Any) -> None:
    """``--progress/--no-progress``; default: on when stderr is a terminal and not ``--json``."""
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress on stderr (default: on a terminal)")


def want_progress(args: argparse.Namespace) -> bool:
    """Whether to show progress: ``--progress`` as given, else only on a terminal; never with ``--json``."""
    if getattr(args, "json", False):
        return False
    p = getattr(args, "progress", None)
    if p is None:
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False
    return bool(p)


def warn(args: argparse.Namespace, text: str) -> None:
    """One warning line on stderr: ``dmftsolve <cmd>: warning: <text>``."""
    print(f"dmftsolve {getattr(args, 'command', '?')}: warning: {text}", file=sys.stderr, flush=True)


def available_memory() -> int:
    """Bytes of memory available to a new allocation (2⁴⁰ when the system does not say)."""
    from dmftsolve.dynamics.dmft import available_memory_bytes

    avail = available_memory_bytes()
    return 2**40 if avail is None else avail


def _gib(n: float) -> str:
    g = n / 2**30
    return f"{g:.3g} GiB" if g < 1000 else f"{g:,.0f} GiB"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.3g} days"


def check_cost(args: argparse.Namespace, what: str, memory: float, seconds: float,
               hint: str) -> None:
    """Refuse (exit 2) a job whose estimated memory exceeds what is available, or whose
    estimated run time exceeds :data:`MAX_SECONDS`; warn (one line on stderr) past
    :data:`WARN_SECONDS`. ``memory`` in bytes, ``seconds`` on this machine's scale."""
    avail = available_memory()
    if memory > avail:
        raise CommandError(f"{what} needs about {_gib(memory)} of memory, more than the "
                           f"{_gib(avail)} available; {hint}", code=2)
    if seconds > MAX_SECONDS:
        raise CommandError(f"{what} would take about {_duration(seconds)} (estimate; the limit "
                           f"is {_duration(MAX_SECONDS)}); {hint}", code=2)
    if seconds > WARN_SECONDS and not getattr(args, "json", False):
        warn(args, f"{what} will take about {_duration(seconds)} (rough estimate) and about "
                   f"{_gib(memory)} of memory")


def dmft_cost(problem: Problem, n_paths: int, *, steps: int | None = None, method: str = "stein",
              replicate: bool = True, n_batches: int = 20,
              keep_samples_at: tuple[int, ...] = ()) -> tuple[float, float]:
    """Estimated peak memory (bytes) and run time (seconds) of one ``solve_dmft``.

    Memory is :meth:`DMFTSettings.memory_bytes <dmftsolve.dynamics.dmft.DMFTSettings.memory_bytes>`
    of the same settings (``steps=None``: the problem's ``training.steps``). Time
    from the ``O(N T² m²)`` kernel term, calibrated on this machine (one core:
    200 steps, 10⁴ paths, m = 1 take about 1.2 s); replicate errors
    (``errors="replicate"``) double it.
    """
    from dmftsolve.dynamics.dmft import DMFTSettings

    cfg = DMFTSettings(n_paths=n_paths, steps=steps, method=method, n_batches=n_batches,
                       errors="replicate" if replicate else "batch", keep_samples_at=keep_samples_at)
    memory = float(cfg.memory_bytes(problem))
    steps = cfg.resolved_steps(problem)
    T1 = (steps + 1) * problem.m
    seconds = 3e-9 * n_paths * T1 * T1 + 1e-9 * T1**3 + 1e-4 * steps
    if method == "pathwise":
        seconds += 1e-9 * n_paths * T1**3
    if replicate:
        seconds *= 2
    return memory, seconds
