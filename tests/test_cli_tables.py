"""What the command tables show (issue 48): ``dmftsolve dmft`` shows the error of Q(t,t) that its
JSON has and never leaves out a step without saying so; ``--steps`` does in ``spectrum`` and
``threshold`` what their help says."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dmftsolve.cli import main
from dmftsolve.cli.dmft import table_steps

TINY = ["--delta", "4", "--paths", "400", "--batches", "4", "--seed", "3"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> list[list[str]]:
    """The table rows of ``dmftsolve dmft`` (below the dashed rule), cells split at 2+ blanks."""
    lines = out.rstrip("\n").split("\n")
    rule = next(i for i, ln in enumerate(lines) if re.fullmatch(r"-+(\s+-+)+", ln.strip()))
    return [re.split(r"\s{2,}", ln.strip()) for ln in lines[rule + 1:]]


# ------------------------------------------------------------------ which steps
@given(last=st.integers(0, 5000), rows=st.integers(1, 200))
@example(last=10, rows=10)   # the case: t = 5 was left out
@example(last=0, rows=10)
@example(last=37, rows=10)
@settings(max_examples=200, deadline=None)
def test_table_steps_are_every_kth_and_the_last(last: int, rows: int) -> None:
    shown, words = table_steps(last, rows)
    assert shown[0] == 0 and shown[-1] == last
    assert shown == sorted(set(shown))
    k = shown[1] - shown[0] if len(shown) > 1 else 1
    multiples = [t for t in shown if t % k == 0]
    assert multiples == list(range(0, last + 1, k)), "a multiple of k is missing"
    assert set(shown) - set(multiples) <= {last}
    assert len(multiples) <= rows + 1
    assert (k == 1) == words.startswith("every step")
    assert words.endswith("and the last") == (last % k != 0)
    assert f"0..{last}" in words


def test_dmft_table_shows_every_step_up_to_the_last(capsys: pytest.CaptureFixture[str]) -> None:
    """``--steps 10`` with the default 10 rows: t = 0, 1, ..., 10 (it was 0-4, 6-10)."""
    code, out, _ = _run(["dmft", *TINY, "--steps", "10"], capsys)
    assert code == 0
    assert [int(r[0]) for r in _rows(out)] == list(range(11))
    assert "rows: every step of t = 0..10" in out


def test_dmft_table_states_the_step_choice(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["dmft", *TINY, "--steps", "10", "--rows", "3"], capsys)
    assert code == 0
    assert [int(r[0]) for r in _rows(out)] == [0, 4, 8, 10]
    assert "rows: every 4th step of t = 0..10, and the last" in out


def test_dmft_table_shows_the_error_of_q_that_the_json_has(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["dmft", *TINY, "--steps", "6"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    code, js, _ = _run([*argv, "--json"], capsys)
    assert code == 0
    data = json.loads(js)
    q = [float(v[0][0]) for v in data["Q_diag"]]
    qe = [float(v[0][0]) for v in data["Q_err"]]
    assert all(e > 0 for e in qe[1:]), "the DMFT reports an error of Q after step 0"
    for row in _rows(out):
        t = int(row[0])
        value, _, err = row[4].partition(" ± ")
        assert err, f"no error shown for Q({t},{t}): {row[4]!r}"
        assert float(value) == pytest.approx(q[t], rel=1e-3)
        assert float(err) == pytest.approx(qe[t], rel=0.06, abs=1e-12)  # printed to 2 digits


# ------------------------------------------------------------------ --steps
def test_spectrum_steps_alone_is_the_step_of_the_hessian(capsys: pytest.CaptureFixture[str]) -> None:
    """``--steps 1`` is ``--t 1`` (it was refused unless equal to --t)."""
    argv = ["spectrum", "--target", "Min(z**2, 3)", "--activation", "quad", "--delta", "3",
            "--paths", "2000", "--replicates", "2", "--points", "20", "--json"]
    code, a, _ = _run([*argv, "--steps", "1"], capsys)
    assert code == 0
    code, b, _ = _run([*argv, "--t", "1"], capsys)
    assert code == 0
    ja, jb = json.loads(a), json.loads(b)
    assert ja["t"] == jb["t"] == 1
    assert ja["summary"] == jb["summary"]


def test_spectrum_steps_and_t_must_agree(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["spectrum", "--delta", "3", "--t", "1", "--steps", "2"], capsys)
    assert code == 2
    assert "--steps 2 differs from --t 1" in err


def test_threshold_says_that_steps_is_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["threshold", "--target", "Min(z**2, 3)", "--activation", "quad", "--t", "0",
            "--bracket", "1,3", "--paths", "1000", "--grid", "3", "--xtol", "0.5", "--replicates", "1"]
    code, out, err = _run([*argv, "--steps", "7"], capsys)
    assert code == 0
    assert "warning: --steps 7 is ignored" in err
    code, out2, err2 = _run(argv, capsys)
    assert code == 0 and "--steps" not in err2
    strip = re.compile(r"elapsed \[s\].*")
    assert strip.sub("", out) == strip.sub("", out2)
