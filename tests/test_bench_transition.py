"""``benchmarks/bench_transition.py``: the machine it names beside its ratios."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():  # noqa: ANN202
    path = ROOT / "benchmarks" / "bench_transition.py"
    spec = importlib.util.spec_from_file_location("bench_transition", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cpu_model_is_the_first_model_name_of_cpuinfo(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """Reference: a hand-written ``/proc/cpuinfo`` with two processors; without the file, the
    platform's processor string, else ``"unknown"``."""
    mod = _load()
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Test CPU @ 2.0GHz\nflags\t: x\n\n"
                    "processor\t: 1\nmodel name\t: Other CPU\n")
    real = Path

    def fake(p: str) -> Path:
        return info if p == "/proc/cpuinfo" else real(p)

    monkeypatch.setattr(mod, "Path", fake)
    assert mod.cpu_model() == "Test CPU @ 2.0GHz"
    monkeypatch.setattr(mod, "Path", lambda p: tmp_path / "missing")
    monkeypatch.setattr(mod.platform, "processor", lambda: "")
    assert mod.cpu_model() == "unknown"
    monkeypatch.setattr(mod.platform, "processor", lambda: "x86_64")
    assert mod.cpu_model() == "x86_64"
