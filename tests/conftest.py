"""Test configuration: deterministic hypothesis runs in CI, random exploration locally."""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from types import ModuleType

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def load_validation() -> Callable[[str], ModuleType]:
    """Import a validation script by name: ``validation.<name>`` (the checks against GD), else
    ``validation.figures.<name>`` (the figure scripts). The repository root is on the path
    (``pythonpath`` in ``setup.cfg``), so this is a plain package import."""

    def load(name: str) -> ModuleType:
        for package in ("validation", "validation.figures"):
            if importlib.util.find_spec(f"{package}.{name}") is not None:
                return importlib.import_module(f"{package}.{name}")
        raise ModuleNotFoundError(f"no validation script {name!r} in validation/ or validation/figures/ "
                                  "(the archived investigations are indexed in docs/investigations.md)")

    return load
