"""The library version (kept apart so that ``results`` can read it without importing the package)."""

__version__ = "0.1.0"
