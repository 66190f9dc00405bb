"""``--help`` is a reference card (issue 48): a one-paragraph summary, the options one line each
with its default, and two or three runnable examples; no history, versions or statistics.

Every command's help is formatted as a terminal of 80 columns shows it (``COLUMNS=80``). The
explanations, numbers and advice live in docs/cli.md and docs/tips.md.
"""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from dmftsolve.cli import build_parser

#: Longest help, in lines of an 80-column terminal.
MAX_LINES = 60
COLUMNS = 80

#: A version number, and words that tell the history of a default or an option.
VERSION = re.compile(r"\b\d+\.\d+\.\d+\b")
HISTORY = re.compile(r"\b(since|was|were|before|used to|previously|formerly|no longer|now)\b", re.I)
#: A measured timing ("14 s", "80 s of CPU", "2.5 min") and a count of checks ("5 of 9").
TIMING = re.compile(r"\b\d+(\.\d+)?\s?(s|ms|min|h|hours?|seconds?)\b(?![\w*])")
STATISTIC = re.compile(r"\b\d+ of \d+\b")


def _parser() -> argparse.ArgumentParser:
    return build_parser()


def _commands() -> list[str]:
    return list(_parser().command_parsers)  # type: ignore[attr-defined]


def _help(command: str | None, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    parser = _parser()
    p = parser if command is None else parser.command_parsers[command]  # type: ignore[attr-defined]
    return p.format_help()


def _screen_lines(text: str) -> int:
    """Lines the text takes on a terminal of :data:`COLUMNS` columns (a longer line wraps)."""
    return sum(max(1, -(-len(line) // COLUMNS)) for line in text.rstrip("\n").split("\n"))


def _examples(text: str) -> list[str]:
    """The command lines under ``examples:`` (up to the next blank line)."""
    lines = text.split("\n")
    start = lines.index("examples:") + 1
    out = []
    for line in lines[start:]:
        if not line.strip():
            break
        out.append(line.strip())
    return out


def _option_sections(text: str) -> list[list[str]]:
    """The lines of each section that lists options (``options:``, the groups)."""
    sections, current = [], None
    for line in text.split("\n"):
        if line and not line.startswith(" ") and line.endswith(":"):
            current = [] if line not in ("examples:",) else None
            if current is not None:
                sections.append(current)
        elif not line.strip():
            current = None
        elif current is not None:
            current.append(line)
    return sections


@pytest.mark.parametrize("command", [None, *_commands()])
def test_help_fits_on_one_screen(command: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _help(command, monkeypatch)
    assert _screen_lines(text) <= MAX_LINES, f"{command}: {_screen_lines(text)} lines"
    too_wide = [line for line in text.split("\n") if len(line) > COLUMNS]
    assert not too_wide, too_wide


@pytest.mark.parametrize("command", [None, *_commands()])
def test_help_has_runnable_examples(command: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two or three examples, each a command line that the parser accepts as written."""
    text = _help(command, monkeypatch)
    assert "examples:" in text.split("\n"), f"{command}: no examples section"
    examples = _examples(text)
    assert 2 <= len(examples) <= 3, examples
    for line in examples:
        argv = shlex.split(line.split(" > ")[0], comments=True)
        assert argv[0] == "dmftsolve"
        if command is not None:
            assert argv[1] == command, line
        try:
            args = _parser().parse_args(argv[1:])
        except SystemExit as exc:  # a usage error exits 2
            pytest.fail(f"example does not parse ({exc.code}): {line}")
        assert args.command == argv[1]


@pytest.mark.parametrize("command", [None, *_commands()])
def test_help_tells_no_history_versions_timings_or_statistics(
        command: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(_help(command, monkeypatch).split())
    for pattern in (VERSION, HISTORY, TIMING, STATISTIC):
        found = pattern.search(text)
        assert found is None, f"{command}: {pattern.pattern!r} matches {found.group(0)!r} in " \
                              f"...{text[max(0, found.start() - 60):found.end() + 60]}..."


@pytest.mark.parametrize("command", _commands())
def test_every_option_is_one_line_with_its_default(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """In every options section each line is an option (no wrapped continuation), and an
    option that takes a value states its default (or that it is required)."""
    text = _help(command, monkeypatch)
    sections = _option_sections(text)
    assert sections, text
    lines = [line for s in sections for line in s]
    wrapped = [line for line in lines if not line.startswith("  -")]
    assert not wrapped, f"{command}: continuation lines (an option's help wraps): {wrapped}"
    p = _parser().command_parsers[command]  # type: ignore[attr-defined]
    shown = [a for a in p._actions if a.help != argparse.SUPPRESS]
    assert len(lines) == len(shown), (len(lines), len(shown))
    for a in shown:
        if a.nargs == 0 or isinstance(a, (argparse._HelpAction, argparse.BooleanOptionalAction)):
            if isinstance(a, argparse.BooleanOptionalAction):
                assert "(default:" in a.help, a.option_strings
            continue
        if a.help.startswith("ignored"):  # threshold's --steps: no default to state
            continue
        assert "(default:" in a.help or "(required)" in a.help, f"{command} {a.option_strings}: {a.help}"


def test_the_default_target_is_stated_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default label is z**2 - 1 everywhere (simulate and threshold said z**2)."""
    from dmftsolve.defaults import PROBLEM_DEFAULTS

    for command in _commands():
        text = " ".join(_help(command, monkeypatch).split())
        assert f"(default: {PROBLEM_DEFAULTS['target']})" in text, command
        assert "headline case" not in text


def test_steps_is_described_as_what_it_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """``threshold`` ignores --steps (and says so when it is given); ``spectrum`` takes it as --t."""
    th = " ".join(_help("threshold", monkeypatch).split())
    sp = " ".join(_help("spectrum", monkeypatch).split())
    assert "--steps T ignored" in th
    assert "--steps T the same as --t" in sp
    assert "not used" not in th + sp


def _cli_md_sections() -> dict[str, str]:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.split("\n", 1)[0].strip(): p for p in parts[1:]}


@pytest.mark.parametrize("command", _commands())
def test_docs_cli_explains_every_option(command: str) -> None:
    """docs/cli.md has a section per command that names each of its options (the problem
    options and the output options are explained once, under "Every command")."""
    sections = _cli_md_sections()
    assert command in sections, f"docs/cli.md has no section '## {command}'"
    text = sections[command] + sections["Every command"]
    p = _parser().command_parsers[command]  # type: ignore[attr-defined]
    missing = []
    for a in p._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        names = [o for o in a.option_strings if o.startswith("--")]
        if isinstance(a, argparse.BooleanOptionalAction):
            names.append("--[no-]" + names[0].removeprefix("--"))
        if not any(re.search(re.escape(n) + r"(?![\w-])", text) for n in names):
            missing.append(names[0])
    assert not missing, f"docs/cli.md, {command}: options not explained: {missing}"
