"""The package's text is reference, not history: no version tags, no "was/now" narratives and no
validation statistics in the strings a user reads.

What is scanned: every string literal of ``dmftsolve/**/*.py`` (docstrings, warning and error
messages, help texts; found with :mod:`ast`, implicitly concatenated literals joined, f-strings by
their literal parts) and every Sphinx attribute comment (``#:``, which the API reference renders),
except ``dmftsolve/_version.py``, whose one string is the version itself.

The rules (each hit is reported as ``file:line [rule] text``):

``version``
    a three-part version number, ``\\b\\d+.\\d+.\\d+\\b``.
``version-word``
    ``0.N`` after *since*, *before*, *until*, *in* or *was* (``since 0.9``, ``in 0.07 s``).
``history``
    a history phrase: *since 0.*, *before 0.*, *was N* (a digit after *was*), *(was *,
    *is now* / *are now* / *now the default*, and *used to* meaning "formerly" (not after a form of
    *be* or *get*, and not opening a sentence: "Used to infer …" and "is used to draw …" describe a
    purpose).
``count``
    a tally of a validation run: *N of M* followed by at most one word and then *searches*,
    *draws*, *seeds*, *runs*, *cases*, *points*, *trials* or *rows* ("6 of 10 such searches").
``gd-value``
    a number quoted for GD: *GD* or *GD's*, then at most three of the words *δ_50*, *delta_50*,
    *δ_NN*, *value*, *is*, *was*, *of*, *gives*, *gave* or the signs ``=``, ``:``, ``≈``, then a
    decimal number ("GD 10.7", "GD's δ_50 = 6.89").

A ``.. versionadded::`` / ``.. versionchanged::`` directive, its line and its indented body, is
exempt from ``version``, ``version-word`` and ``history``: it is the one place where a reader is
told that a behaviour changed, and when. ``count`` and ``gd-value`` apply everywhere: evidence
lives in ``docs/findings.md``, cited by section.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dmftsolve"
EXEMPT_FILES = {"_version.py"}

_UNITS = r"(?:searches|draws|seeds|runs|cases|points|trials|rows)"
_GD_WORD = r"(?:δ_50|delta_50|δ_NN|value|is|was|of|gives|gave|=|:|≈)"
RULES: dict[str, re.Pattern[str]] = {
    "version": re.compile(r"\b\d+\.\d+\.\d+\b"),
    "version-word": re.compile(r"\b(?:since|before|until|in|was)\s+0\.\d+\b", re.IGNORECASE),
    "history": re.compile(
        r"\bsince 0\.|\bbefore 0\.|\bwas \d|\(was |\b(?:is|are) now\b|\bnow the default\b"
        r"|\bused to\b",
        re.IGNORECASE,
    ),
    "count": re.compile(rf"\b\d+ of (?:the )?\d+ (?:\S+ )?{_UNITS}\b"),
    "gd-value": re.compile(rf"\bGD(?:'s)?(?:[ \t]*{_GD_WORD}){{0,3}}[ \t]*\d+\.\d+"),
}
#: The rules a version directive's block is exempt from.
DIRECTIVE_EXEMPT = {"version", "version-word", "history"}
#: What may stand before "used to" when it describes a purpose, not the past.
_PURPOSE = re.compile(r"(?:\b(?:is|are|be|been|being|was|were|get|gets|got)|^|[.!?:])\s*$", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^(\s*)\.\. version(?:added|changed)::")


def directive_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the ``.. versionadded::`` / ``.. versionchanged::`` blocks in ``text``:
    the directive's line and the following lines indented deeper than it (blank lines included)."""
    spans = []
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    i = 0
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        if not m:
            i += 1
            continue
        indent = len(m.group(1).expandtabs())
        j = i + 1
        while j < len(lines) and (
            not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
        ):
            j += 1
        spans.append((starts[i], starts[j]))
        i = j
    return spans


def scan_text(text: str) -> list[tuple[int, str, str]]:
    """The hits in one piece of text: ``(offset, rule, matched text)``, in order of offset."""
    spans = directive_spans(text)
    hits = []
    for name, rx in RULES.items():
        for m in rx.finditer(text):
            if name in DIRECTIVE_EXEMPT and any(a <= m.start() < b for a, b in spans):
                continue
            if m.group(0).lower() == "used to" and _PURPOSE.search(text[: m.start()]):
                continue
            hits.append((m.start(), name, m.group(0)))
    return sorted(hits)


def _texts(source: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of every string literal and ``#:`` comment block of a module."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    block: list[str] = []
    first = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.string.startswith("#:"):
            if not block:
                first = tok.start[0]
            block.append(tok.string[2:].strip())
            continue
        if tok.type in (tokenize.NL, tokenize.NEWLINE) and block:
            continue
        if block:
            out.append((first, "\n".join(block)))
            block = []
    return out


def scan_file(path: Path, root: Path = ROOT) -> list[str]:
    """Every hit in one module, as ``path:line [rule] text``."""
    source = path.read_text(encoding="utf-8")
    found = []
    for line, text in _texts(source):
        for offset, rule, match in scan_text(text):
            where = line + text.count("\n", 0, offset)
            shown = " ".join(match.split())
            found.append(f"{path.relative_to(root)}:{where} [{rule}] {shown}")
    return found


def package_hits() -> list[str]:
    return [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in EXEMPT_FILES
        for hit in scan_file(path)
    ]


# -- the rules themselves: each must catch what it is for and pass what it is not for ----------

@pytest.mark.parametrize(
    "text, rule",
    [
        ("the default since 0.9.0", "version"),
        ("reproduces 1.2.3 exactly", "version"),
        ("giving up since 0.9", "version-word"),
        ("as before 0.4", "version-word"),
        ("in 0.07 s instead of 0.23 s", "version-word"),
        ("its error was 0.89 of the reported one", "version-word"),
        ("the default since 0.", "history"),
        ("the default was 20000", "history"),
        ("20000 paths (was 10000)", "history"),
        ("the search is now self-bracketing", "history"),
        ("8e4 is now the default", "history"),
        ("``--workers 1000`` used to fork 1000 processes", "history"),
        ("6 of 10 searches were within", "count"),
        ("7 of 7 runs stay positive", "count"),
        ("6 of 10 such searches", "count"),
        ("19 of the 24 points", "count"),
        ("GD 10.7", "gd-value"),
        ("GD's δ_50 = 6.89", "gd-value"),
        ("against GD's 10.72 ± 0.15", "gd-value"),
        ("GD: 6.89", "gd-value"),
    ],
)
def test_each_rule_catches_its_phrase(text: str, rule: str) -> None:
    assert rule in {name for _, name, _ in scan_text(text)}, (text, scan_text(text))


@pytest.mark.parametrize(
    "text",
    [
        "Used to infer which variables an expression needs.",
        "The generator is used to draw the samples.",
        "The seed that was used to draw them.",
        "a margin of 0.1 below 1/2",
        "GD's finite-n gradient along the target",
        "2 of the neurons",
        "x was set by the caller",
        "the 0.5 quantile; 1e-4 relative",
    ],
)
def test_reference_text_passes(text: str) -> None:
    assert scan_text(text) == []


def test_a_version_directive_may_name_its_version() -> None:
    text = (
        "Parameters\n----------\nn_paths : int\n    Kernel paths.\n\n"
        "    .. versionchanged:: 0.10\n        The default was 20000 on every label.\n\n"
        "Returns\n-------\nx : float\n"
    )
    assert scan_text(text) == []
    # the exemption ends with the directive's block
    assert [r for _, r, _ in scan_text(text + "The default was 20000.\n")] == ["history"]
    # a validation statistic is not exempt, even inside the directive
    counted = text.replace("on every label", "(6 of 10 searches within)")
    assert [r for _, r, _ in scan_text(counted)] == ["count"]


def test_hits_are_reported_by_file_and_line(tmp_path: Path) -> None:
    module = tmp_path / "dmftsolve" / "m.py"
    module.parent.mkdir()
    module.write_text(
        '"""Module.\n\nSecond line.\nThe default since 0.9.0."""\n\n'
        "#: Attribute: GD 10.7.\nX = 1\n\n"
        "def f():\n    raise ValueError('n_paths=3: 6 of 10 searches')\n",
        encoding="utf-8",
    )
    hits = scan_file(module, root=tmp_path)
    assert "dmftsolve/m.py:4 [version] 0.9.0" in hits
    assert "dmftsolve/m.py:4 [history] since 0." in hits
    assert "dmftsolve/m.py:6 [gd-value] GD 10.7" in hits
    assert "dmftsolve/m.py:10 [count] 6 of 10 searches" in hits


# -- the package ----------------------------------------------------------------------------------

def test_package_text_has_no_history_or_statistics() -> None:
    hits = package_hits()
    assert not hits, "\n" + "\n".join(hits)

