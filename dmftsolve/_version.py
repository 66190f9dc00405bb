"""The library version: the single source (``pyproject.toml`` reads it, and so does ``results``).

Kept apart so that :mod:`dmftsolve.results` can read it without importing the
package. Bump it whenever a default or a result changes, and say so in
``CHANGELOG.md``.
"""

__version__ = "0.10.0"
