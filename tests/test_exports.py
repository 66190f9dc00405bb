"""The public names re-exported lazily by the package and its sub-packages.

Every name in an ``__all__`` must resolve, and to the object its module defines, also after
every submodule has been imported: a submodule named like the function it exports (the
mistake ``thresholds/transition.py`` exporting ``transition`` would make) replaces the
function by the module in the package namespace once it is imported.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import dmftsolve

PACKAGES = ["dmftsolve", "dmftsolve.dynamics", "dmftsolve.hessian", "dmftsolve.thresholds",
            "dmftsolve.simulation"]


def _import_every_submodule() -> None:
    for info in pkgutil.walk_packages(dmftsolve.__path__, "dmftsolve."):
        if not info.name.startswith("dmftsolve.cli"):
            importlib.import_module(info.name)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves_to_a_non_module(package: str) -> None:
    _import_every_submodule()
    mod = importlib.import_module(package)
    assert mod.__all__, package
    for name in mod.__all__:
        obj = getattr(mod, name)
        assert not isinstance(obj, types.ModuleType), f"{package}.{name} is shadowed by a submodule"


def test_unknown_name_is_an_attribute_error() -> None:
    thresholds = importlib.import_module("dmftsolve.thresholds")
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        thresholds.nonexistent  # noqa: B018
