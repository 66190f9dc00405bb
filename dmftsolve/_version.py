"""The library version: the single source (``pyproject.toml`` reads it, and so does ``results``).

Kept apart so that :mod:`dmftsolve.results` can read it without importing the
package. It is bumped once per release (not per commit), and ``CHANGELOG.md`` says
what the release changed.
"""

__version__ = "0.14.0"
