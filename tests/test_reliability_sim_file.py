"""Issue 30: the ``--sim`` file of ``transition`` is validated before any work (``load_success_counts``)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from dmftsolve.cli._sim_file import MAX_SIM_BYTES, load_success_counts

GOOD = {"deltas": [2, 3.5], "successes": [1, 4], "trials": [5, 5.0]}


def _write(tmp_path: Path, payload: object, raw: str | None = None) -> Path:
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(payload) if raw is None else raw)
    return path


def test_good_file(tmp_path: Path) -> None:
    out = load_success_counts(_write(tmp_path, {**GOOD, "note": "extra keys are ignored"}))
    assert out == {"deltas": [2.0, 3.5], "successes": [1, 4], "trials": [5, 5]}
    assert all(isinstance(v, int) for v in out["trials"] + out["successes"])


@pytest.mark.parametrize(("payload", "words"), [
    ({**GOOD, "trials": [0, 5]}, "trials[0] must be >= 1"),
    ({**GOOD, "deltas": "23"}, "deltas must be a JSON array"),
    ({**GOOD, "deltas": {"a": 2, "b": 3}}, "deltas must be a JSON array"),
    ({**GOOD, "successes": [1.5, 4]}, "successes[0] must be a whole number"),
    ({**GOOD, "successes": [True, 4]}, "successes[0] must be a whole number"),
    ({**GOOD, "trials": [5, False]}, "trials[1] must be a whole number"),
    ({**GOOD, "deltas": [True, 3]}, "deltas[0] must be a number"),
    ({**GOOD, "deltas": ["2", 3]}, "deltas[0] must be a number"),
    ({**GOOD, "deltas": [[2], 3]}, "deltas[0] must be a number"),
    ({**GOOD, "deltas": [-2, 3]}, "deltas[0] must be finite and > 0"),
    ({**GOOD, "deltas": [10**400, 3]}, "deltas[0] must be finite and > 0"),
    ({**GOOD, "successes": [6, 4]}, "successes[0] = 6 exceeds trials[0] = 5"),
    ({**GOOD, "successes": [-1, 4]}, "successes[0] must be >= 0"),
    ({**GOOD, "trials": [5]}, "differ in length"),
    ({"deltas": [2], "successes": [1], "trials": [2]}, "at least 2 points"),
    ({"deltas": [2, 3], "trials": [2, 2]}, "missing key(s) successes"),
    ([1, 2, 3], "expected a JSON object"),
    ("text", "expected a JSON object"),
])
def test_bad_contents(tmp_path: Path, payload: object, words: str) -> None:
    with pytest.raises(ValueError) as info:
        load_success_counts(_write(tmp_path, payload))
    msg = str(info.value)
    assert msg.startswith("--sim '") and words in msg, msg
    assert "\n" not in msg


@pytest.mark.parametrize(("raw", "words"), [
    ('{"deltas": [NaN, 3], "successes": [1, 1], "trials": [2, 2]}', "NaN is not allowed"),
    ('{"deltas": [Infinity, 3], "successes": [1, 1], "trials": [2, 2]}', "Infinity is not allowed"),
    ('{"deltas": [2, 3], ', "not valid JSON"),
    ("", "not valid JSON"),
    ("[" * 100_000, "nested too deeply"),
])
def test_bad_json(tmp_path: Path, raw: str, words: str) -> None:
    with pytest.raises(ValueError, match="^--sim ") as info:
        load_success_counts(_write(tmp_path, None, raw))
    assert words in str(info.value)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "sim.json"
    path.write_bytes(b'{"deltas": "\xff"}')
    with pytest.raises(ValueError, match="not UTF-8"):
        load_success_counts(path)


def test_special_files_are_refused_without_reading(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        load_success_counts(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="is a directory"):
        load_success_counts(tmp_path)
    if os.path.exists("/dev/zero"):  # used to be read until memory ran out
        with pytest.raises(ValueError, match="is a device"):
            load_success_counts("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result: list[BaseException | None] = []

    def read() -> None:
        try:
            load_success_counts(fifo)
            result.append(None)
        except BaseException as exc:  # noqa: BLE001
            result.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(timeout=5)  # a FIFO with no writer used to block forever
    assert not thread.is_alive(), "blocked on the FIFO"
    assert isinstance(result[0], ValueError) and "is a FIFO" in str(result[0])


def test_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(" " * (MAX_SIM_BYTES + 1) + json.dumps(GOOD))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=f"at most {MAX_SIM_BYTES} are read"):
        load_success_counts(path)
    assert time.perf_counter() - t0 < 5


def test_path_type() -> None:
    with pytest.raises(ValueError, match="expected a file path"):
        load_success_counts(3)  # type: ignore[arg-type]
