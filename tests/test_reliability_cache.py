"""Issue 30, the figure point cache: atomic writes under concurrency and ``kill -9``, self-healing reads."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from validation.figures.common import PointCache

ROOT = Path(__file__).resolve().parents[1]

SETTINGS = {"figure": "test", "d": 100, "delta": 2.5}

#: A writer process: puts ``rounds`` records (each a list of about ``size`` numbers tagged with
#: the writer id and round) under SETTINGS; ``rounds = 0`` writes forever, retrying after an
#: error (as a resilient caller would; the old shared '<key>.tmp' raised FileNotFoundError).
WRITER = """
import sys, itertools
from validation.figures.common import PointCache
cache = PointCache({root!r}, "fig")
wid, rounds, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for r in (range(rounds) if rounds else itertools.count()):
    n = size + (wid * 997 + r * 131) % 1000  # records of different lengths
    try:
        cache.put({settings!r}, {{"writer": wid, "round": r, "data": [wid + r / 7.0] * n}})
    except OSError:
        if rounds:  # a counted run must not fail; the endless writers (killed) keep going
            raise
"""


def _writer(root: Path, wid: int, rounds: int, size: int) -> subprocess.Popen:
    code = WRITER.format(root=str(root), settings=SETTINGS)
    return subprocess.Popen([sys.executable, "-c", code, str(wid), str(rounds), str(size)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _check_record(value: dict, size: int) -> None:
    assert set(value) == {"writer", "round", "data"}
    assert len(value["data"]) == size + (value["writer"] * 997 + value["round"] * 131) % 1000
    assert value["data"][0] == pytest.approx(value["writer"] + value["round"] / 7.0)


def test_concurrent_writers_and_reader_on_one_key(tmp_path: Path) -> None:
    size = 2000
    procs = [_writer(tmp_path, w, 150, size) for w in range(4)]
    cache = PointCache(tmp_path, "fig")
    seen = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a corrupt entry would warn: fail instead
        while any(p.poll() is None for p in procs):
            value = cache.get(SETTINGS)
            if value is not None:
                _check_record(value, size)
                seen += 1
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0, err  # the shared '<key>.tmp' raised FileNotFoundError here
    final = cache.get(SETTINGS)
    _check_record(final, size)
    assert final["round"] == 149
    assert seen > 0
    assert not list(cache.dir.glob("*.tmp")), "temporary files left behind"


def test_kill_9_mid_write_never_publishes_a_corrupt_entry(tmp_path: Path) -> None:
    size = 3000  # small records: many puts, and a kill lands mid-write often
    cache = PointCache(tmp_path, "fig")
    for rnd in range(6):
        cache.path(SETTINGS).unlink(missing_ok=True)  # so that the wait below sees this round's writes
        procs = [_writer(tmp_path, w, 0, size) for w in range(3)]
        start = time.monotonic()
        while not cache.path(SETTINGS).exists() and time.monotonic() < start + 20:
            time.sleep(0.005)  # the writers are importing numpy: wait for the first write
        end = time.monotonic() + 0.1 + 0.05 * (rnd % 4)
        while time.monotonic() < end:  # readers meanwhile see whole records only
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                value = cache.get(SETTINGS)
            if value is not None:
                _check_record(value, size)
        for p in procs:  # one at a time: the survivors keep writing (and renaming) meanwhile
            p.send_signal(signal.SIGKILL)
            time.sleep(0.003 * (1 + rnd % 5))
        for p in procs:
            p.communicate()
        path = cache.path(SETTINGS)
        if path.exists():
            with path.open() as fh:
                rec = json.load(fh)  # a truncated entry raises here
            _check_record(rec["value"], size)


def test_corrupt_entry_is_discarded_and_recomputed(tmp_path: Path) -> None:
    cache = PointCache(tmp_path, "fig")
    cache.put(SETTINGS, {"x": 1.0})
    path = cache.path(SETTINGS)
    path.write_text(path.read_text()[:10])  # truncated
    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"x": 2.0}

    with pytest.warns(RuntimeWarning, match="corrupt"):
        assert cache.get_or_compute(SETTINGS, compute) == {"x": 2.0}
    assert calls == [1]
    assert cache.get(SETTINGS) == {"x": 2.0}  # healed: parses again
    path.write_text(json.dumps(["no value field"]))
    with pytest.warns(RuntimeWarning, match="no 'value' field"):
        assert cache.get(SETTINGS) is None
    assert not path.exists()


def test_make_executor_caps_workers_at_the_cpus() -> None:
    import os

    from validation.figures.common import make_executor

    cpus = len(os.sched_getaffinity(0))
    with pytest.warns(RuntimeWarning, match="more than the"), make_executor(cpus + 5) as ex:
        if ex is not None:
            assert ex._max_workers == cpus  # noqa: SLF001
