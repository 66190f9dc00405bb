"""Shared plumbing of the figure scripts in ``validation/figures/`` (issue 11).

Every figure script

* takes the common options of :func:`base_parser` (``--quick``, ``--trials``, ``--ds``,
  ``--deltas``, ``--workers``, ``--dask``, ``--out``, ``--replot``, ``--seed``);
* caches each finished point as one JSON file ``<out>/cache/<figure>/<key>.json``, where
  ``key`` is a hash of the point's full settings (:class:`PointCache`), so a figure is
  redrawn from the cache with ``--replot`` without running anything, and an interrupted run
  resumes where it stopped;
* writes ``<out>/<figure>.json`` (settings, command, data) and ``<out>/<figure>.png`` whose
  caption states the settings (:func:`write_outputs`);
* sends its heavy sweeps through an executor (:func:`make_executor`): serial in this process
  with ``--workers 1``, a :class:`~concurrent.futures.ProcessPoolExecutor` with more, or a
  ``dask.distributed`` cluster with ``--dask ADDRESS``.

The default output directory is ``validation/results/figures``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import numpy as np

from dmftsolve.cli._common import positive_int
from dmftsolve.results import jsonable
from validation import script_parser

__all__ = [
    "DEFAULT_OUT",
    "CacheMiss",
    "PointCache",
    "base_parser",
    "float_list",
    "int_list",
    "make_executor",
    "settings_key",
    "command_line",
    "write_outputs",
    "caption_text",
    "all_finite",
]

#: Default output directory of the figures (PNG, JSON and the point caches).
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "results" / "figures"


#: Largest cache entry read (bytes): a point's record is kilobytes.
MAX_ENTRY_BYTES = 64 * 2**20


def _value_text(value: Any) -> str:
    """The canonical JSON text of a cached value (what the recorded byte count counts)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=True)


class CacheMiss(RuntimeError):
    """A point needed for ``--replot`` is not in the cache."""


def float_list(text: str) -> list[float]:
    """Parse ``"1,2.5,4"`` into floats (argparse ``type``); each must be finite and > 0."""
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not vals or not all(math.isfinite(v) and v > 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive finite numbers, got {text!r}")
    return vals


def int_list(text: str) -> list[int]:
    """Parse ``"1000,2000"`` into integers >= 2 (argparse ``type``)."""
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or min(vals) < 2:
        raise argparse.ArgumentTypeError(f"expected integers >= 2, got {text!r}")
    return vals


def base_parser(spec: ModuleSpec | None, description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every figure script takes (``spec``: the script's
    ``__spec__``, which names the command in the usage line).

    ``--trials``, ``--ds`` and ``--deltas`` default to None: each script fills in its own
    full-size (or ``--quick``) values.
    """
    p = script_parser(spec, description)
    p.add_argument("--quick", action="store_true",
                   help="tiny configuration (seconds; used by tests/test_figures.py)")
    p.add_argument("--trials", type=positive_int("--trials"), default=None, help="GD trials per point")
    p.add_argument("--ds", type=int_list, default=None, help="input dimensions, comma-separated")
    p.add_argument("--deltas", type=float_list, default=None, help="sample ratios δ, comma-separated")
    p.add_argument("--workers", type=positive_int("--workers"), default=1,
                   help="processes for the simulator jobs (1: serial in this process)")
    p.add_argument("--dask", metavar="ADDRESS", default=None,
                   help="run the jobs on the dask.distributed scheduler at ADDRESS instead")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"output directory (default {DEFAULT_OUT})")
    p.add_argument("--replot", action="store_true",
                   help="redraw from the cache only; fail if a point is missing")
    p.add_argument("--seed", type=int, default=0, help="root seed")
    return p


def settings_key(settings: dict[str, Any]) -> str:
    """A 20-hex-digit hash of ``settings`` (canonical JSON, sorted keys)."""
    text = json.dumps(jsonable(settings), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


class PointCache:
    """One JSON file per finished point, keyed by the hash of its full settings.

    Parameters
    ----------
    root : Path
        The output directory; files go to ``root/cache/<figure>/``.
    figure : str
        Name of the figure (sub-directory).
    replot : bool
        With True, :meth:`get_or_compute` never computes: a missing point raises
        :class:`CacheMiss`.
    """

    def __init__(self, root: Path, figure: str, *, replot: bool = False) -> None:
        self.dir = Path(root) / "cache" / figure
        self.replot = bool(replot)
        self.hits = 0
        self.computed = 0

    def path(self, settings: dict[str, Any]) -> Path:
        return self.dir / f"{settings_key(settings)}.json"

    def get(self, settings: dict[str, Any]) -> Any | None:
        """The cached value for ``settings``, or None.

        An entry is trusted only if it is a regular file of at most :data:`MAX_ENTRY_BYTES`
        (read without blocking, so a FIFO or a link to an endless file is no hang and no
        ``MemoryError``), parses, and carries the key of its file name, settings that hash to
        that key and, if recorded, the byte count of its value: an entry copied over another
        key's is not returned for the wrong settings. Anything else is discarded with a
        warning naming the file and reported as a miss, so the point is recomputed.
        """
        from dmftsolve._files import FileReadError, read_regular

        p = self.path(settings)
        try:
            raw = read_regular(p, MAX_ENTRY_BYTES, "cache entry")
            rec = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            return None
        except (FileReadError, ValueError, UnicodeDecodeError, OSError, RecursionError) as exc:
            self._discard(p, f"{type(exc).__name__}: {exc}")
            return None
        reason = self._untrusted(rec, p.stem, settings)
        if reason is not None:
            self._discard(p, reason)
            return None
        return rec["value"]

    @staticmethod
    def _untrusted(rec: Any, key: str, settings: dict[str, Any]) -> str | None:
        """Why ``rec`` is not the entry of ``key`` / ``settings``, or None if it is."""
        if not isinstance(rec, dict) or "value" not in rec:
            return "no 'value' field"
        if "key" in rec and rec["key"] != key:
            return f"it holds the entry of key {str(rec['key'])[:40]!r}, not of {key!r}"
        stored = rec.get("settings")
        if stored is None or settings_key(stored) != key:
            return "its settings do not hash to its file name (copied from another key?)"
        if stored != json.loads(json.dumps(jsonable(settings))):
            return "its settings differ from the requested ones"
        if "bytes" in rec and rec["bytes"] != len(_value_text(rec["value"]).encode()):
            return f"its value is not the {rec['bytes']} bytes recorded (edited or truncated?)"
        return None

    def _discard(self, path: Path, reason: str) -> None:
        """Remove an untrusted entry (warning once, naming the file and the reason).

        Only a file or a link is removed; a directory or FIFO in its place is left (and the
        point not cached, :meth:`put`)."""
        warnings.warn(f"cache entry {path} is not trusted ({reason[:200]}); discarded, the point "
                      "is recomputed", RuntimeWarning, stacklevel=3)
        with contextlib.suppress(OSError):
            if path.is_symlink() or path.is_file():
                path.unlink()

    def put(self, settings: dict[str, Any], value: Any) -> Any:
        """Store ``value`` (made JSON-ready) for ``settings``; return the stored form.

        The record holds the key, the settings, the value and the value's byte count (checked
        by :meth:`get`). It is written by :func:`dmftsolve._files.atomic_write`: to a
        temporary file of a unique name in the same directory, flushed and ``fsync``-ed, then
        renamed over ``<key>.json``. A reader sees the old entry or the new one, never a
        partial file, and a writer killed mid-write (even by ``kill -9``) leaves only its own
        ``.<key>.json.*.tmp``, never a published entry that does not parse.

        Caching only saves time: if the entry cannot be written (a full disk, a directory or
        FIFO where the file or its folder should be), a warning names the file and the value
        is returned uncached.
        """
        from dmftsolve._files import FileWriteError, atomic_write

        stored = json.loads(_value_text(jsonable(value)))
        text = json.dumps({"key": settings_key(settings), "settings": jsonable(settings),
                           "value": stored, "bytes": len(_value_text(stored).encode()),
                           "stored": time.time()}, allow_nan=True)
        p = self.path(settings)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write(p, lambda fh: fh.write(text.encode("utf-8")), "cache entry")
        except (FileWriteError, OSError) as exc:
            warnings.warn(f"cache entry {p} not written ({type(exc).__name__}: {exc}); the point is "
                          "not cached", RuntimeWarning, stacklevel=2)
        return stored

    def get_or_compute(self, settings: dict[str, Any], compute: Callable[..., Any], *args: Any,
                       **kwargs: Any) -> Any:
        """The cached value, or ``compute(*args, **kwargs)`` stored under ``settings``."""
        hit = self.get(settings)
        if hit is not None:
            self.hits += 1
            return hit
        if self.replot:
            raise CacheMiss(f"--replot: no cached point for {json.dumps(jsonable(settings))[:300]}")
        self.computed += 1
        return self.put(settings, compute(*args, **kwargs))


@contextlib.contextmanager
def make_executor(workers: int, dask_address: str | None = None) -> Iterator[Executor | None]:
    """The executor for the simulator jobs: None (serial) for one worker, a process pool for
    more, or ``distributed.Client(dask_address).get_executor()``.

    Worker processes are started with one BLAS thread each (``OMP_NUM_THREADS`` etc. set
    before the pool starts; the simulator also limits BLAS itself). ``workers`` above the CPUs
    available (``os.sched_getaffinity``) is lowered to them, with a ``RuntimeWarning``.
    """
    if dask_address:
        from distributed import Client

        client = Client(dask_address)
        try:
            yield client.get_executor()
        finally:
            client.close()
        return
    if workers <= 1:
        yield None
        return
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = max(1, os.cpu_count() or 1)
    if workers > cpus:  # more processes than CPUs only cost memory; results do not depend on it
        warnings.warn(f"--workers {workers} is more than the {cpus} CPU(s) available; using {cpus}",
                      RuntimeWarning, stacklevel=3)
        workers = cpus
        if workers <= 1:
            yield None
            return
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    with ProcessPoolExecutor(max_workers=workers) as pool:
        yield pool


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that computes this script's output (``python -m validation.figures.x args``;
    ``argv[0]`` is the script's path, as ``python -m`` sets it).

    ``--replot`` is left out of the command (it redraws the same numbers) and noted after it.
    """
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0])
    run = ["python", shlex.quote(str(script))]
    with contextlib.suppress(ValueError):
        rel = script.resolve().relative_to(Path(__file__).resolve().parents[2])
        if rel.suffix == ".py":
            run = ["python", "-m", ".".join(rel.with_suffix("").parts)]
    args = [a for a in argv[1:] if a != "--replot"]
    cmd = " ".join([*run, *map(shlex.quote, args)])
    return cmd + ("   (redrawn from the cache with --replot)" if len(args) < len(argv) - 1 else "")


def caption_text(settings: dict[str, Any], width: int = 150) -> str:
    """``key = value`` pairs of ``settings`` wrapped to ``width`` characters per line."""
    parts = []
    for k, v in settings.items():
        if isinstance(v, float):
            v = f"{v:g}"
        elif isinstance(v, (list, tuple)):
            v = ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v)
        parts.append(f"{k}={v}")
    lines, line = [], ""
    for part in parts:
        if line and len(line) + len(part) + 2 > width:
            lines.append(line)
            line = part
        else:
            line = f"{line}; {part}" if line else part
    if line:
        lines.append(line)
    return "\n".join(lines)


def write_outputs(out: Path, name: str, payload: dict[str, Any], fig: Any | None,
                  caption: str) -> tuple[Path, Path]:
    """Write ``out/name.json`` (``payload``) and ``out/name.png`` (``fig`` with ``caption``).

    The caption is drawn under the axes; the figure is closed afterwards.
    """
    from dmftsolve._files import savefig, write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    jpath, ppath = out / f"{name}.json", out / f"{name}.png"
    write_text(jpath, json.dumps(jsonable(payload), indent=1, allow_nan=True), "figure data")
    if fig is not None:
        import matplotlib.pyplot as plt

        n_lines = caption.count("\n") + 1
        height = fig.get_size_inches()[1]
        # caption lines (6.5 pt ≈ 0.11 in each) plus room for the x-axis label and ticks
        fig.subplots_adjust(bottom=min(0.5, (0.11 * n_lines + 0.6) / height))
        fig.text(0.01, 0.01, caption, fontsize=6.5, family="monospace", va="bottom", ha="left")
        try:
            savefig(fig, ppath, "figure", dpi=110)
        finally:
            plt.close(fig)
    return jpath, ppath


def all_finite(values: Any) -> bool:
    """Whether every number in a nested list/dict structure is finite (None is skipped)."""
    if values is None or isinstance(values, (str, bool)):
        return True
    if isinstance(values, dict):
        return all(all_finite(v) for v in values.values())
    if isinstance(values, (list, tuple)):
        return all(all_finite(v) for v in values)
    if isinstance(values, np.ndarray):
        return bool(np.all(np.isfinite(values)))
    if isinstance(values, (int, float, np.number)):
        return math.isfinite(float(values))
    return True
