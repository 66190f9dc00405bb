"""The house rules of the source layout (issue 48), checked on every module of ``dmftsolve/``.

* No function or method spans more than :data:`MAX_LINES` lines (``end_lineno - lineno + 1``
  of its ``ast`` node, decorators excluded): a longer one is broken into named steps.
* No module imports a private name (one leading underscore, not a dunder) from another
  ``dmftsolve`` module (``from dmftsolve.x import _y``): what modules share gets a public name
  where it belongs. Private *modules* (``dmftsolve._blas``, ``dmftsolve.cli._common``) are fine.

The checkers are run on synthetic sources first, so that a checker that finds nothing is caught.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dmftsolve"
#: Longest function or method, in lines.
MAX_LINES = 150


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def long_functions(source: str, filename: str, limit: int = MAX_LINES) -> list[str]:
    """One message per function or method of ``source`` longer than ``limit`` lines."""
    out: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    length = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                    if length > limit:
                        out.append(f"{filename}:{child.lineno}: {name} spans {length} lines "
                                   f"(at most {limit}); break it into named steps")
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename=filename), "")
    return out


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_imports(source: str, filename: str, module: str) -> list[str]:
    """One message per private name ``source`` (the module ``module``) imports from another
    ``dmftsolve`` module; relative imports are resolved against ``module``."""
    out: list[str] = []
    package = module if filename.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source_module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source_module = node.module or ""
        if source_module != "dmftsolve" and not source_module.startswith("dmftsolve."):
            continue
        for alias in node.names:
            name = alias.name
            private = name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
            if private and not _is_module(f"{source_module}.{name}"):
                out.append(f"{filename}:{node.lineno}: {module} imports the private name {name} "
                           f"from {source_module}; give it a public name where it belongs")
    return out


# ----------------------------------------------------------------------------- the checkers can fail
BAD_SOURCE = '''
import math
from dmftsolve.thresholds.directions import _snap, split_directions
from dmftsolve._blas import blas_threads
from dmftsolve.cli import _common
from dmftsolve.seeds import as_generator as _as_generator
from .common import _helper
from math import _private_but_not_ours


class Holder:
    def method(self):
''' + "        x = 1\n" * 151 + '''

def short():
    return math.pi


def long():
''' + "    y = 2\n" * 150


def test_checkers_find_synthetic_violations() -> None:
    long = long_functions(BAD_SOURCE, "bad.py")
    assert len(long) == 2, long
    assert long[0] == ("bad.py:12: Holder.method spans 152 lines (at most 150); break it into named "
                       "steps")
    assert long[1].startswith("bad.py:170: long spans 151 lines")
    private = private_imports(BAD_SOURCE, "dmftsolve/thresholds/weak_recovery/x.py",
                              "dmftsolve.thresholds.weak_recovery.x")
    # _snap (a function) and the relative _helper are private names; dmftsolve._blas and
    # dmftsolve.cli._common are private modules, _as_generator is only an alias, math is not ours
    assert [m.split(": ", 1)[1].split(" from ")[0] for m in private] == [
        "dmftsolve.thresholds.weak_recovery.x imports the private name _snap",
        "dmftsolve.thresholds.weak_recovery.x imports the private name _helper",
    ]
    assert "from dmftsolve.thresholds.weak_recovery.common;" in private[1]
    assert long_functions("def f():\n" + "    pass\n" * 149, "ok.py") == []  # 150 lines: allowed


# ----------------------------------------------------------------------------- the package
@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_longer_than_the_limit(path: Path) -> None:
    found = long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_imported_from_another_module(path: Path) -> None:
    found = private_imports(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)),
                            _module_name(path))
    assert not found, "\n".join(found)
