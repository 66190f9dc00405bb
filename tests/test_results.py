"""The Result base class of dmftsolve.results."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import dmftsolve
from dmftsolve.results import Result, SolverError, Status


@dataclasses.dataclass(frozen=True, kw_only=True, repr=False)
class _Demo(Result):
    values: np.ndarray


def _demo(status=Status.SUCCESS, **kw):
    return _Demo(status=status, settings={"a": 1}, diagnostics={}, elapsed=0.25,
                 values=np.array([1.0, np.inf]), **kw)


def test_fields_defaults_and_json():
    r = _demo(warnings=["w1", "w2"])
    assert r.ok and r.message == "" and r.version == dmftsolve.__version__
    assert r.warnings == ("w1", "w2")
    d = r.to_dict()
    assert d["values"] == [1.0, None] and d["status"] == "success" and d["warnings"] == ["w1", "w2"]
    json.dumps(d, allow_nan=False)
    assert repr(r) == "<_Demo status=success elapsed=0.25s warnings=2>"


def test_frozen_and_keyword_only():
    r = _demo()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.message = "x"  # type: ignore[misc]
    assert dataclasses.replace(r, message="x").message == "x"
    with pytest.raises(TypeError):
        Result(Status.SUCCESS, "", {}, {}, 0.0)  # type: ignore[misc]


def test_raise_for_status_and_bad_fields():
    r = _demo(Status.NONFINITE, message="blew up")
    assert not r.ok
    with pytest.raises(SolverError, match="_Demo nonfinite: blew up") as info:
        r.raise_for_status()
    assert info.value.result is r
    with pytest.raises(ValueError, match="status must be a Status"):
        _demo("success")
    with pytest.raises(ValueError, match="warnings must be a sequence of str"):
        _demo(warnings="oops")


def test_cpu_model_is_the_first_model_name_of_cpuinfo(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """Reference: a hand-written ``/proc/cpuinfo`` with two processors; without the file, or
    with no model name in it, the platform's processor string, else ``"unknown"``."""
    from dmftsolve import results

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Test CPU @ 2.0GHz\nflags\t: x\n\n"
                    "processor\t: 1\nmodel name\t: Other CPU\n")
    assert results.cpu_model(info) == "Test CPU @ 2.0GHz"
    monkeypatch.setattr(results.platform, "processor", lambda: "")
    assert results.cpu_model(tmp_path / "missing") == "unknown"
    (tmp_path / "bare").write_text("processor\t: 0\n")
    assert results.cpu_model(tmp_path / "bare") == "unknown"
    monkeypatch.setattr(results.platform, "processor", lambda: "x86_64")
    assert results.cpu_model(tmp_path / "missing") == "x86_64"
