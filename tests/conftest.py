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
    """Import ``validation/<name>.py`` as a module (the scripts are not a package; they import
    each other from their own directory, which is put on ``sys.path``)."""
    root = Path(__file__).resolve().parents[1] / "validation"

    def load(name: str) -> ModuleType:
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        spec = importlib.util.spec_from_file_location(name, root / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
