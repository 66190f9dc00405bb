"""Lazy re-exports for package ``__init__`` modules, so that importing a package stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """Return a module-level ``__getattr__`` that imports ``exports[name]`` on first use.

    Parameters
    ----------
    package : str
        The package's ``__name__``, for the error message.
    exports : mapping of str to str
        Public name -> the module that defines it.
    """

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
