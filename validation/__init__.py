"""The checks of the theory against finite-d GD, each a script run from the repository root as
``python -m validation.NAME`` (``validation/README.md`` lists them, their outputs in
``validation/results/`` and their tests); the figure scripts are in :mod:`validation.figures`.
Not part of the installed package."""

from __future__ import annotations

import argparse
from importlib.machinery import ModuleSpec
from typing import Any


def script_parser(spec: ModuleSpec | None, description: str | None,
                  **kwargs: Any) -> argparse.ArgumentParser:
    """The argument parser of a script: its usage line names the command that runs it,
    ``python -m validation.NAME`` (the module's ``__spec__``), and ``description`` (the
    docstring) is printed as written."""
    prog = f"python -m {spec.name}" if spec is not None else None
    kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    return argparse.ArgumentParser(prog=prog, description=description, **kwargs)
