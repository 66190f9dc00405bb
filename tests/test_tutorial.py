"""docs/tutorial.md runs as written: each block marked runnable is run, and what it prints is
compared with the ``text`` block that follows it.

Marking. A fenced ``python`` or ``bash`` block directly after the line ``<!-- run -->`` is
runnable (the comment is invisible on GitHub and in the Sphinx site). Python blocks run in a
fresh namespace each (``__name__ == "__main__"``), or, when they guard their work with
``if __name__ == "__main__":`` (worker processes import the main module), as a script in a
subprocess; a bash block is one ``dmftsolve`` command a
line (``\\`` continues a line), each run through :func:`dmftsolve.cli.main` in this process,
which must return 0. A fenced ``text`` block right after a runnable block (blank lines between
are allowed) is the output expected on stdout.

The comparison rule, line by line (leading and trailing blanks ignored, runs of blanks equal):

* a line that is only ``…`` stands for any number of lines (none included);
* ``…`` inside a line stands for any text on that line (e.g. an elapsed time);
* every other character must match, except numbers: a number printed with ``n`` digits after
  the point (``1.445``, ``6e-10``) matches when the actual number is within one unit of its last
  digit (``1.445 ± 0.001``, ``6e-10 ± 1e-10``); a number without a point or exponent is an
  integer (a count, an index, a step) and must be equal.

So an output that moves by more than the digits the tutorial prints fails the test.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
MARK = "<!-- run -->"

NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_NUMBER = re.compile(NUMBER)
_TOKEN = re.compile(rf"(…)|({NUMBER})|(\s+)")


@dataclass(frozen=True)
class Block:
    """A runnable block: its language, code, line in the file, and the output expected (or None)."""

    language: str
    code: str
    line: int
    expected: str | None

    @property
    def name(self) -> str:
        return f"line{self.line}-{self.language}"


def _fences(text: str) -> list[tuple[int, str, str, int]]:
    """``(start line, info, body, end line)`` of every fenced block of ``text`` (1-based lines)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(```+)\s*(\S*)", lines[i])
        if m:
            fence, info = m.group(1), m.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].startswith(fence):
                j += 1
            out.append((i + 1, info, "\n".join(lines[i + 1:j]), j + 1))
            i = j + 1
        else:
            i += 1
    return out


def blocks(text: str) -> list[Block]:
    """The runnable blocks of ``text`` with their expected outputs (see the module docstring)."""
    lines = text.split("\n")
    fences = _fences(text)
    found = []
    for n, (start, info, body, end) in enumerate(fences):
        before = [ln for ln in lines[:start - 1] if ln.strip()]
        if not before or before[-1].strip() != MARK:
            continue
        if info not in ("python", "bash"):
            raise ValueError(f"{TUTORIAL.name}:{start}: a runnable block must be python or bash, "
                             f"not {info!r}")
        expected = None
        if n + 1 < len(fences):
            nstart, ninfo, nbody, _ = fences[n + 1]
            between = lines[end:nstart - 1]
            if ninfo == "text" and not any(ln.strip() for ln in between):
                expected = nbody
        found.append(Block(info, body, start, expected))
    return found


def _pattern(line: str) -> tuple[re.Pattern[str], list[str]]:
    """A regex for one expected line, and the numbers it prints (as text, in order)."""
    parts, numbers, pos = [], [], 0
    for m in _TOKEN.finditer(line):
        parts.append(re.escape(line[pos:m.start()]))
        if m.group(1):
            parts.append(".*?")
        elif m.group(2):
            parts.append(f"({NUMBER})")
            numbers.append(m.group(2))
        else:
            parts.append(r"\s+")
        pos = m.end()
    parts.append(re.escape(line[pos:]))
    return re.compile("".join(parts)), numbers


def _unit(printed: str) -> float:
    """One unit of the last digit of ``printed``; 0 for an integer (compared exactly)."""
    mantissa, _, exponent = printed.lower().partition("e")
    if "." not in mantissa and not exponent:
        return 0.0
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def line_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` matches one ``expected`` line by the rule of the module docstring."""
    pattern, numbers = _pattern(expected.strip())
    m = pattern.fullmatch(actual.strip())
    if m is None:
        return False
    for want, got in zip(numbers, m.groups(), strict=True):
        unit = _unit(want)
        if unit == 0.0:
            if _unit(got) != 0.0 or int(got) != int(want):
                return False
        elif not math.isclose(float(got), float(want), rel_tol=0.0, abs_tol=1.0001 * unit):
            return False
    return True


def output_matches(expected: str, actual: str) -> bool:
    """Whether the lines of ``actual`` match those of ``expected`` (``…`` lines: any lines)."""
    exp = [ln for ln in expected.strip("\n").split("\n")]
    act = [ln for ln in actual.strip("\n").split("\n")]

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(exp):
            return j == len(act)
        if exp[i].strip() == "…":
            return match(i + 1, j) or (j < len(act) and match(i, j + 1))
        return j < len(act) and line_matches(exp[i], act[j]) and match(i + 1, j + 1)

    return match(0, 0)


def _commands(code: str) -> list[list[str]]:
    text = code.replace("\\\n", " ")
    return [shlex.split(ln) for ln in text.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]


def _run_script(block: Block) -> str:
    """Run a Python block as a script of its own (``python file.py``), this checkout first."""
    import subprocess
    import sys
    import tempfile

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / f"tutorial_{block.line}.py"
        script.write_text(block.code + "\n", encoding="utf-8")
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=600, check=False)
    assert proc.returncode == 0, f"line {block.line}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc.stdout


def run_block(block: Block) -> str:
    """Run ``block`` and return what it printed on stdout."""
    out = io.StringIO()
    if block.language == "python" and 'if __name__ == "__main__":' in block.code:
        return _run_script(block)
    if block.language == "python":
        namespace = {"__name__": "__main__"}
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, f"{TUTORIAL.name}:{block.line}", "exec"), namespace)  # noqa: S102
        return out.getvalue()
    from dmftsolve.cli import main

    for argv in _commands(block.code):
        assert argv[0] == "dmftsolve", f"line {block.line}: a bash block runs dmftsolve commands only"
        with contextlib.redirect_stdout(out):
            code = main(argv[1:])
        assert code == 0, f"line {block.line}: {shlex.join(argv)} exited {code}"
    return out.getvalue()


BLOCKS = blocks(TUTORIAL.read_text(encoding="utf-8"))


# ------------------------------------------------------------------ the rule itself
@pytest.mark.parametrize(("expected", "actual", "ok"), [
    ("t=10  |w|^2 = 1.582", "t=10  |w|^2 = 1.583", True),
    ("t=10  |w|^2 = 1.582", "t=10  |w|^2 = 1.584", False),   # two units of the last digit
    ("t=10  |w|^2 = 1.582", "t=11  |w|^2 = 1.582", False),   # an integer differs
    ("error 6e-10", "error 7e-10", True),
    ("error 6e-10", "error 8e-10", False),
    ("0/4  0 (< 0.53)", "0/4   0 (< 0.53)", True),           # alignment blanks
    ("Status.SUCCESS … s", "Status.SUCCESS 12.5 s", True),   # an elapsed time
    ("left edge -2.136", "left edge -2.136 ", True),
    ("left edge -2.136", "right edge -2.136", False),
])
def test_line_rule(expected: str, actual: str, ok: bool) -> None:
    assert line_matches(expected, actual) is ok


def test_ellipsis_lines_stand_for_any_lines() -> None:
    assert output_matches("a\n…\nd", "a\nb\nc\nd")
    assert output_matches("a\n…\nd", "a\nd")
    assert not output_matches("a\n…\nd", "a\nb\nc")
    assert not output_matches("a\nd", "a\nb\nd")


def test_the_tutorial_has_runnable_blocks_with_outputs() -> None:
    assert len(BLOCKS) >= 6
    assert {b.language for b in BLOCKS} == {"python", "bash"}
    assert sum(b.expected is not None for b in BLOCKS) >= len(BLOCKS) - 1


# ------------------------------------------------------------------ the tutorial
@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_tutorial_block(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    if "distributed" in block.code:
        pytest.importorskip("distributed")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(ROOT)
    got = run_block(block)
    if block.expected is None:
        return
    assert output_matches(block.expected, got), (
        f"docs/tutorial.md line {block.line}: the output differs from the text block after it.\n"
        f"--- expected\n{block.expected}\n--- got\n{got}")


def test_no_stale_version_print() -> None:
    text = TUTORIAL.read_text(encoding="utf-8")
    assert "__version__" not in text
    assert re.search(r"\b\d+\.\d+\.\d+\b", text) is None, "a version number in the tutorial"


if __name__ == "__main__":  # print every block's output (to write the tutorial's text blocks)
    os.environ.setdefault("COLUMNS", "80")
    for b in BLOCKS:
        print(f"=== {b.name}")
        print(run_block(b), end="")
