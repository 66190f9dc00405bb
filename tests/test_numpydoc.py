"""Every top-level export has a numpydoc docstring with its parameters and a running example.

numpydoc's own validation (``numpydoc.validate``) checks, for each name in
``dmftsolve.__all__``: GL08 (no docstring), PR01 (a parameter not documented)
and EX01 (no Examples section). Each Examples section then runs as a doctest.
Skipped without the ``docs`` extra (``pip install ".[docs]"``).
"""

from __future__ import annotations

import doctest
import enum
import inspect
import time

import pytest

import dmftsolve

validate = pytest.importorskip("numpydoc.validate").validate

#: The checks (numpydoc error codes) every top-level export must pass.
CHECKS = ("GL08", "PR01", "EX01")

#: Known gaps, in files whose owners fill them in their own changes (issue 29): (name, code) ->
#: where. The test fails when a gap listed here is closed, so that the entry is removed.
PENDING: dict[tuple[str, str], str] = {}

#: Longest an example may take (seconds); they are meant to take well under one.
EXAMPLE_SECONDS = 10.0


def _qualified(obj: object) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"  # type: ignore[attr-defined]


def _targets() -> list[tuple[str, object]]:
    out = [(name, getattr(dmftsolve, name)) for name in dmftsolve.__all__ if name != "__version__"]
    return out + [("Problem.build", dmftsolve.Problem.build)]


def _codes(name: str, obj: object) -> set[str]:
    errors = {code for code, _ in validate(_qualified(obj))["errors"]}
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        errors.discard("PR01")  # an Enum's "parameters" are Enum's own constructor arguments
    return errors & set(CHECKS)


@pytest.mark.parametrize(("name", "obj"), _targets(), ids=[n for n, _ in _targets()])
def test_numpydoc_validation(name: str, obj: object) -> None:
    found = _codes(name, obj)
    pending = {code for (n, code) in PENDING if n == name}
    assert found - pending == set(), f"{name}: numpydoc {sorted(found - pending)}"
    closed = pending - found
    assert not closed, f"{name}: {sorted(closed)} fixed: remove it from PENDING"


@pytest.mark.parametrize(("name", "obj"), _targets(), ids=[n for n, _ in _targets()])
def test_examples_run(name: str, obj: object) -> None:
    if (name, "EX01") in PENDING:
        pytest.skip(f"no Examples yet ({PENDING[(name, 'EX01')]})")
    module = inspect.getmodule(obj)
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, name, module=module,
                                                                   globs=dict(vars(module)))
             if t.examples]
    assert tests, f"{name}: no doctest examples found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    start = time.perf_counter()
    for t in tests:
        runner.run(t)
    elapsed = time.perf_counter() - start
    assert runner.failures == 0, f"{name}: {runner.failures} failing example(s)"
    assert elapsed < EXAMPLE_SECONDS, f"{name}: examples took {elapsed:.1f} s"
