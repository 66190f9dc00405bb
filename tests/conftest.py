"""Test configuration: deterministic hypothesis runs in CI, random exploration locally."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def load_validation() -> Callable[[str], ModuleType]:
    """Import a validation script as a module: ``validation/<name>.py`` (the checks against GD),
    else ``validation/investigations/<name>.py`` (one-off investigations), else
    ``validation/figures/<name>.py``. The scripts are not a package; they import each other from
    their own directory and from ``validation/``, which are put on ``sys.path``."""
    root = Path(__file__).resolve().parents[1] / "validation"
    folders = (root, root / "investigations", root / "figures")

    def load(name: str) -> ModuleType:
        path = next((f / f"{name}.py" for f in folders if (f / f"{name}.py").exists()), None)
        if path is None:
            raise FileNotFoundError(f"no validation script {name}.py in {', '.join(map(str, folders))}")
        for folder in (root, path.parent):
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
