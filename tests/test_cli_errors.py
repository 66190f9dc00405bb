"""Every failure of every ``dmftsolve`` command: a non-zero exit status and exactly one
line on stderr, ``dmftsolve <command>: error: ...``, never a traceback, never NaN
output with exit status 0 (issue 8 §2).

Exit status: 2 for bad input (checked before any work), 1 for a failed computation,
130 for an interrupt. The CLI runs in-process (``dmftsolve.cli.main``) at tiny sizes.
The wider table of bad inputs is ``validation/bad_inputs.py`` -> ``docs/bad_inputs.md``;
its fast cases run here too (``test_bad_input_table_fast_subset``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings
from pathlib import Path

import pytest

from dmftsolve.cli import main, one_line

ROOT = Path(__file__).resolve().parents[1]

TINY_SIM = ["--d", "20", "--delta", "2", "--trials", "2", "--steps", "30", "--workers", "1"]
TINY_DMFT = ["--delta", "2", "--steps", "5", "--paths", "400", "--batches", "2"]
TINY_THR = [
    "--target",
    "Min(z**2, 3)",
    "--activation",
    "quad",
    "--eta",
    "0.05",
    "--t",
    "0",
    "--paths",
    "2000",
    "--grid",
    "2",
    "--replicates",
    "1",
]

# (id, argv, expected exit status, a fragment the error line must contain)
CASES = [
    # --- simulate: diverging runs used to print NaN tables and exit 0
    (
        "simulate-quad-eta100",
        ["simulate", *TINY_SIM, "--activation", "quad", "--eta", "100"],
        1,
        "nonfinite",
    ),
    ("simulate-exp-r", ["simulate", *TINY_SIM, "--activation", "exp(r)", "--eta", "1"], 1, "nonfinite"),
    (
        "simulate-float32-eta1e30",
        ["simulate", *TINY_SIM, "--dtype", "float32", "--eta", "1e30"],
        1,
        "nonfinite",
    ),
    # --- simulate: huge sizes are refused up front with the estimate
    ("simulate-steps-1e7", ["simulate", "--steps", "10000000"], 2, "would take about"),
    (
        "simulate-d-1e7",
        ["simulate", "--d", "10000000", "--delta", "2", "--trials", "1"],
        2,
        "GiB of memory",
    ),
    ("simulate-trials-1e6", ["simulate", "--trials", "1000000"], 2, "would take about"),
    ("simulate-trials-too-many", ["simulate", "--trials", "10000000"], 2, "--trials must be <="),
    # --- simulate: bad input
    (
        "simulate-plot-missing-dir",
        ["simulate", *TINY_SIM, "--plot", "/nonexistent/dir/f.png"],
        2,
        "does not exist",
    ),
    ("simulate-plot-bad-format", ["simulate", *TINY_SIM, "--plot", "f.notaformat"], 2, "figure format"),
    ("simulate-delta-negative", ["simulate", *TINY_SIM[:2], "--delta", "-1"], 2, "--delta"),
    ("simulate-delta-nan", ["simulate", "--delta", "nan"], 2, "finite"),
    ("simulate-delta-text", ["simulate", "--delta", "abc"], 2, "--delta"),
    ("simulate-eta-inf", ["simulate", "--eta", "inf"], 2, "finite"),
    ("simulate-workers-0", ["simulate", "--workers", "0"], 2, "--workers must be >= 1"),
    ("simulate-d-0", ["simulate", "--d", "0"], 2, "--d must be >= 1"),
    ("simulate-unknown-option", ["simulate", "--frobnicate"], 2, "unrecognized"),
    # --- dmft
    ("dmft-eta-1e308", ["dmft", *TINY_DMFT, "--eta", "1e308"], 1, "OverflowError"),
    ("dmft-74GiB", ["dmft", "--delta", "2", "--paths", "40", "--steps", "100000"], 2, "GiB of memory"),
    ("dmft-diverges", ["dmft", *TINY_DMFT, "--activation", "quad", "--eta", "100"], 1, "nonfinite"),
    ("dmft-delta-0", ["dmft", "--delta", "0", "--steps", "2"], 2, "delta"),
    ("dmft-paths-0", ["dmft", "--delta", "2", "--paths", "0"], 2, "--paths must be >= 1"),
    ("dmft-batches-1", ["dmft", *TINY_DMFT[:4], "--paths", "400", "--batches", "1"], 2, "batches"),
    ("dmft-steps-negative", ["dmft", "--delta", "2", "--steps", "-1"], 2, "steps"),
    ("dmft-no-delta", ["dmft"], 2, "--delta"),
    ("dmft-null-rtol-1", ["dmft", *TINY_DMFT, "--null-rtol", "1"], 2, "--null-rtol must be in [0, 1)"),
    # --- threshold
    ("threshold-no-root", ["threshold", *TINY_THR, "--bracket", "1,1.2"], 1, "no_root"),
    ("threshold-bracket-reversed", ["threshold", "--bracket", "5,1"], 2, "low < high"),
    ("threshold-bracket-nan", ["threshold", "--bracket", "nan,3"], 2, "--bracket"),
    ("threshold-grid-0", ["threshold", "--grid", "0"], 2, "--grid"),
    ("threshold-grid-1", ["threshold", *TINY_THR, "--grid", "1"], 2, "grid must be an integer >= 2"),
    ("threshold-xtol-0", ["threshold", *TINY_THR, "--xtol", "0"], 2, "xtol"),
    ("threshold-t-negative", ["threshold", "--t", "-1"], 2, "--t"),
    ("threshold-t-text", ["threshold", "--t", "soon"], 2, "--t"),
    ("threshold-long-time-huge", ["threshold", "--long-time", "20000"], 2, "GiB of memory"),
    ("threshold-long-time-too-big", ["threshold", "--long-time", "10000000"], 2, "--long-time must be <="),
    (
        "threshold-no-hard-direction",
        ["threshold", "--target", "z + 0.3*z**2", "--t", "0"],
        2,
        "no hard direction",
    ),
    ("threshold-paths-too-few", ["threshold", *TINY_THR, "--paths", "10"], 2, "n_paths"),
    ("threshold-null-rtol-text", ["threshold", *TINY_THR, "--null-rtol", "tiny"], 2, "--null-rtol"),
    # --- spectrum (helper B's command; the exits are the shared handler's)
    (
        "spectrum-diverges",
        [
            "spectrum",
            "--activation",
            "exp(r)",
            "--eta",
            "0.5",
            "--t",
            "10",
            "--delta",
            "2",
            "--paths",
            "2000",
        ],
        1,
        "nonfinite",
    ),
    ("spectrum-delta-negative", ["spectrum", "--delta", "-1"], 2, "delta"),
    (
        "spectrum-plot-missing-dir",
        ["spectrum", "--delta", "2", "--plot", "/nonexistent/dir/f.png"],
        2,
        "does not exist",
    ),
    # --- alg-threshold, and echo caps for every command
    ("alg-threshold-unknown-symbol", ["alg-threshold", "--target", "w**2"], 2, "target"),
    ("alg-threshold-k-1e6", ["alg-threshold", "--k", "1000000"], 2, "k"),
    ("dmft-k-1e6", ["dmft", "--delta", "2", "--k", "1000000"], 2, "--k must be <="),
    ("alg-threshold-long-target", ["alg-threshold", "--target", "z" + "+z" * 10000], 2, "target"),
    (
        "alg-threshold-hostile",
        ["alg-threshold", "--target", "__import__('os').system('echo pwned')"],
        2,
        "__import__",
    ),
    ("dmft-hostile-activation", ["dmft", "--delta", "2", "--activation", "r.__class__"], 2, "activation"),
    ("simulate-long-text-value", ["simulate", "--delta", "x" * 20000], 2, "--delta"),
    # --- transition (helper D's command)
    ("transition-d-0", ["transition", "--d", "0"], 2, "--d must be >= 1"),
    ("transition-null-rtol-1", ["transition", "--null-rtol", "1"], 2, "--null-rtol must be in [0, 1)"),
    ("transition-null-rtol-nan", ["transition", "--null-rtol", "nan"], 2, "--null-rtol"),
    # an empty list used to end in "max() arg is an empty sequence" (docs/bad_inputs.md)
    ("transition-delta-empty", ["transition", "--d", "100", "--delta="], 2,
     "argument --delta: expected comma-separated numbers, got an empty list"),
    ("simulate-delta-empty", ["simulate", "--d", "100", "--delta="], 2,
     "argument --delta: expected comma-separated numbers, got an empty list"),
    ("transition-plot-unwritable", ["transition", "--d", "100", "--delta", "5,6", "--draws", "2",
                                    "--plot", "/proc/version"], 2, "cannot write"),
    ("transition-huge-steps", ["transition", "--d", "100", "--delta", "5,6", "--draws", "2",
                               "--steps", "100000"], 2, "GiB"),
    ("transition-diverges", ["transition", "--d", "100", "--delta", "5,6", "--draws", "2", "--steps", "20",
                             "--activation", "quad", "--eta", "100"], 1, "failed"),
    # --- no command, unknown command
    ("no-command", [], 2, "no command given"),
    ("unknown-command", ["frobnicate"], 2, "invalid choice"),
]


def _command(argv: list[str]) -> str:
    return argv[0] if argv and not argv[0].startswith("-") and argv[0] != "frobnicate" else ""


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # only --help/--version leave this way
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_error_line(err: str, command: str, fragment: str = "") -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {err[:500]!r}"
    prefix = f"dmftsolve {command}: error: " if command else "dmftsolve: error: "
    assert lines[0].startswith(prefix), lines[0][:300]
    assert fragment in lines[0], (fragment, lines[0][:300])
    assert len(lines[0]) <= 400
    return lines[0]


@pytest.mark.parametrize(("argv", "code", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_failure_is_one_line_and_non_zero(
    argv: list[str], code: int, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    got, out, err = _run(argv, capsys)
    assert got == code, (got, err[:500])
    _assert_one_error_line(err, _command(argv), fragment)
    assert "nan" not in out.lower().split() or got != 0


def test_simulate_diverging_json_prints_status_then_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["simulate", *TINY_SIM, "--activation", "quad", "--eta", "100", "--json"], capsys)
    assert code == 1
    data = json.loads(out)
    assert data["summary"]["status"] == "nonfinite"
    _assert_one_error_line(err, "simulate", "nonfinite")


def test_dmft_diverging_table_stops_at_the_first_nonfinite_step(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["dmft", *TINY_DMFT, "--activation", "quad", "--eta", "100"], capsys)
    assert code == 1 and "nan" not in out.lower().split()
    line = _assert_one_error_line(err, "dmft", "first non-finite value at step")
    step = int(line.split("at step ")[1].split(")")[0])
    rows = out.strip().splitlines()
    assert int(rows[-1].split()[0]) == step and "non-finite" in rows[-1]
    assert "non-finite" not in rows[-2]


def test_long_quoted_values_are_cut(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["simulate", "--delta", "x" * 20000], capsys)
    assert code == 2 and len(err) < 400 and "…" in err
    assert one_line("a\n  b " + repr("y" * 1000)).count("y") < 100


def test_ok_run_exits_0_and_stderr_is_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["simulate", *TINY_SIM, "--activation", "quad", "--eta", "0.05"], capsys)
    assert code == 0 and err == "" and "success" in out


def test_null_rtol_flag_reaches_the_solvers(capsys: pytest.CaptureFixture[str]) -> None:
    """``--null-rtol`` is recorded in the JSON settings of ``dmft``, ``threshold`` and ``transition``."""
    code, out, _ = _run(["dmft", *TINY_DMFT, "--null-rtol", "0.002", "--json"], capsys)
    assert code == 0 and json.loads(out)["settings"]["null_rtol"] == 0.002
    argv = ["threshold", *TINY_THR, "--bracket", "1,3", "--xtol", "0.5", "--null-rtol", "0.002", "--json"]
    code, out, _ = _run(argv, capsys)
    assert code == 0 and json.loads(out)["settings"]["null_rtol"] == 0.002
    argv = ["transition", "--d", "100", "--delta", "3,5", "--draws", "2", "--steps", "20", "--workers", "1",
            "--null-rtol", "0.002", "--json"]
    _, out, _ = _run(argv, capsys)  # the tiny grid may not bracket δ_50; the settings are recorded either way
    assert json.loads(out)["result"]["settings"]["null_rtol"] == 0.002


def test_threshold_prints_the_answer_last_and_the_table_only_with_verbose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["threshold", *TINY_THR, "--bracket", "1,3", "--xtol", "0.5"]
    code, out, err = _run(argv, capsys)
    assert code == 0 and err == ""
    assert out.strip().splitlines()[-1].startswith("delta_NN = ")
    assert "outliers (overlap²)" not in out and "(" not in out.split("bracket")[-1].split("]")[0]
    code, out_v, _ = _run([*argv, "--verbose"], capsys)
    assert code == 0 and "outliers (overlap²)" in out_v
    assert out_v.strip().splitlines()[-1].startswith("delta_NN = ")


def test_threshold_messages_are_consistent() -> None:
    """With replicates the time rule is the means'; the first replicate's own single-seed rule,
    which may disagree, is not repeated in the notes; brackets print as [a, b]."""
    from types import SimpleNamespace

    from dmftsolve.cli.threshold import _notes

    res = SimpleNamespace(
        replicates=[{"seed": 0}, {"seed": 1}],
        message="δ_NN = 11 ± 0.9 (mean ± standard error over 2 independent DMFT seeds; replicate brackets "
        "[10, 11], [11, 12]); long-time rule met: δ_NN(T/2=100) = 10.5 ± 1 vs δ_NN(T=200) = 11 ± 0.9 "
        "(tolerance 2); first replicate: δ_NN in [10, 11]; not converged in time: at T/2=100 the "
        "bracket is (6.25, 7.5); warning: not monotone in δ",
    )
    notes = _notes(res)
    text = " ".join(notes)
    assert "long-time rule met" in text and "not converged" not in text
    assert "seed 0: warning: not monotone in δ" in notes
    one = SimpleNamespace(
        replicates=[{"seed": 0}],
        message="δ_NN in [10, 11]; not converged in time: at T/2=100 the bracket is (6.25, 7.5)",
    )
    assert _notes(one)[1] == "not converged in time: at T/2=100 the bracket is [6.25, 7.5]"


def test_plot_path_checked_before_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    import dmftsolve.simulation.sweeps as sweeps

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the work started before the path was checked")

    monkeypatch.setattr(sweeps, "sweep", boom)
    code, _, err = _run(["simulate", *TINY_SIM, "--plot", str(tmp_path)], capsys)
    assert code == 2
    _assert_one_error_line(err, "simulate", "is a directory")


def test_threshold_settings_validates_every_field() -> None:
    from dmftsolve.thresholds.settings import ThresholdSettings

    for bad in (
        {"grid": 2.5},
        {"grid": 1},
        {"xtol": float("nan")},
        {"n_paths": 1e4},
        {"seed": -1},
        {"long_time": 2.0},
        {"time_rtol": -1.0},
        {"replicates": True},
        {"bracket": (1.0,)},
        {"bracket": (3.0, 1.0)},
        {"criterion": "any"},
        {"tails": "x"},
        {"fixed_point": 3},
        {"null_rtol": 1.0},
        {"null_rtol": "1e-3"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
            ThresholdSettings(**bad)
    ThresholdSettings(grid=3, xtol=0.1, n_paths=200, seed=4)


@pytest.mark.parametrize(
    ("exc", "code", "fragment"),
    [
        (KeyboardInterrupt(), 130, "interrupted"),
        (MemoryError("Unable to allocate 74.5 GiB"), 1, "out of memory"),
        (OverflowError("(34, 'Numerical result out of range')"), 1, "OverflowError"),
        (FloatingPointError("overflow encountered"), 1, "FloatingPointError"),
        (RecursionError("maximum recursion depth exceeded"), 2, "recursion"),
        (TypeError("unsupported operand"), 1, "--debug"),
        (RuntimeError("x" * 5000), 1, "--debug"),
    ],
    ids=["interrupt", "memory", "overflow", "floatingpoint", "recursion", "internal", "long-internal"],
)
def test_unexpected_exceptions_are_one_line(
    exc: BaseException,
    code: int,
    fragment: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import dmftsolve.cli.dmft as cmd

    def fail(args: object) -> int:
        raise exc

    monkeypatch.setattr(cmd, "run", fail)
    got, _, err = _run(["dmft", "--delta", "2"], capsys)
    assert got == code
    _assert_one_error_line(err, "dmft", fragment)


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import dmftsolve.cli.dmft as cmd

    def fail(args: object) -> int:
        raise TypeError("a bug")

    monkeypatch.setattr(cmd, "run", fail)
    with pytest.raises(TypeError, match="a bug"):
        main(["--debug", "dmft", "--delta", "2"])
    with pytest.raises(TypeError, match="a bug"):
        main(["dmft", "--delta", "2", "--debug"])


def test_warnings_of_a_successful_run_are_one_line_each(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dmftsolve.cli.dmft as cmd

    def warn_twice(args: object) -> int:
        warnings.warn("first\nsecond line", UserWarning, stacklevel=1)
        warnings.warn("first\nsecond line", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(cmd, "run", warn_twice)
    got, _, err = _run(["dmft", "--delta", "2"], capsys)
    assert got == 0 and err.strip() == "dmftsolve dmft: warning: first second line"


def test_help_is_lazy() -> None:
    """``--help`` does not import the solvers (the reason it was 2.5x ``import dmftsolve``)."""
    import subprocess

    code = (
        "import sys; from dmftsolve.cli import build_parser; build_parser().format_help(); "
        "heavy = [m for m in ('dmftsolve.thresholds.hessian_threshold', 'dmftsolve.dynamics.dmft', "
        "'dmftsolve.hessian.outlier_equation', 'dmftsolve.simulation.sweeps', 'scipy.optimize') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    assert out == "[]"


def _bad_inputs_module():  # validation/ is not a package
    spec = importlib.util.spec_from_file_location("bad_inputs", ROOT / "validation" / "bad_inputs.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["bad_inputs"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_bad_input_table_fast_subset() -> None:
    """The fast cases of validation/bad_inputs.py (those failing before any solver work), run in-process:
    none gives a traceback, an exit-0 failure, or more than one line on stderr."""
    mod = _bad_inputs_module()
    cases = [c for c in mod.CASES if c.fast]
    assert len(cases) >= 100
    rows = [mod.run_case(c, timeout=None) for c in cases]
    bad = [r for r in rows if r.problem]
    assert not bad, [(r.case.name, r.problem, r.first_line) for r in bad[:10]]
