"""Command-line interface: ``dmftsolve <command> [options]``.

Each command lives in its own module of this package and exposes
``register(subparsers)``; add new commands to :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from dmftsolve import __version__

#: Modules (in this package) that define commands, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = ("alg_threshold", "simulate", "dmft", "spectrum", "threshold")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dmftsolve",
        description=(
            "Feature-learning thresholds for gradient descent on two-layer networks: "
            "the discrete-time DMFT, the weak-recovery threshold δ_alg, and a finite-d "
            "GD simulator that every theoretical number is checked against."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dmftsolve {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"dmftsolve.cli.{name}")
        except ModuleNotFoundError as exc:  # a command not yet written
            if exc.name != f"dmftsolve.cli.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:
        print(f"dmftsolve {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
