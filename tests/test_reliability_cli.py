"""Issue 30, the command line: SIGTERM, worker caps, a closed stdout, hints that fit the command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dmftsolve.cli import _available_cpus, _classify, _options, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
#: ``dmftsolve`` as a child process (the console script may not be installed)
CLI = [sys.executable, "-c", "import sys; from dmftsolve.cli import main; sys.exit(main())"]


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir() or _available_cpus() < 2, reason="needs /proc and 2 CPUs")
@pytest.mark.parametrize("argv", [
    ["simulate", "--target", "z**2", "--activation", "quad", "--d", "300", "--delta", "2,3,4,5",
     "--trials", "8", "--steps", "20000", "--eta", "0.05", "--workers", "2"],
    ["transition", "--d", "400", "--delta", "3,4,5,6", "--draws", "8", "--workers", "2"],
])
def test_sigterm_ends_workers_and_prints_one_line(argv: list[str], tmp_path: Path) -> None:
    proc = subprocess.Popen([*CLI, *argv], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        workers: list[int] = []
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.2)
            workers = _children(proc.pid)
            assert proc.poll() is None, proc.communicate()
        assert len(workers) >= 2, "the pool did not start"
        time.sleep(1.0)  # the workers are busy in a task
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    lines = err.strip().splitlines()
    assert lines == [f"dmftsolve {argv[0]}: error: terminated (SIGTERM)"], err
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.1)
    assert not [p for p in workers if _alive(p)], "orphaned pool workers"


def test_workers_capped_at_available_cpus(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--target", "z**2", "--activation", "quad", "--d", "20", "--delta", "2,3",
                 "--trials", "1", "--steps", "3", "--workers", "1000", "--json", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    cpus = _available_cpus()
    assert json.loads(out)["workers"] <= cpus
    assert f"--workers 1000 is more than the {cpus} CPU(s) available" in err
    assert all(line.startswith("dmftsolve simulate: warning:") for line in err.strip().splitlines())


def test_closed_stdout_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    res = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *CLI, "dmft",
         "--target", "z**2", "--delta", "2", "--steps", "3", "--paths", "200"],
        cwd=tmp_path, capture_output=False, stderr=subprocess.PIPE, text=True, timeout=120,
    )
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "standard output is closed" in lines[0], res.stderr


def test_hints_name_only_options_the_command_has() -> None:
    parsers = build_parser().command_parsers  # type: ignore[attr-defined]
    alg, sim = _options(parsers["alg-threshold"]), _options(parsers["simulate"])
    assert "--eta" not in alg and "--eta" in sim
    _, msg = _classify(OverflowError("math range error"), alg)
    assert "--eta" not in msg and "double precision" in msg
    _, msg = _classify(OverflowError("math range error"), sim)
    assert "--eta" in msg
    from concurrent.futures.process import BrokenProcessPool

    _, msg = _classify(BrokenProcessPool("gone"), alg)
    assert "--workers" not in msg


def test_cli_overflow_hint_in_alg_threshold(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from dmftsolve.thresholds import weak_recovery

    def boom(*args, **kwargs):  # noqa: ANN002, ANN003, ARG001
        raise OverflowError("math range error")

    monkeypatch.setattr(weak_recovery, "alg_threshold", boom)
    code = main(["alg-threshold", "--target", "z**2"])
    err = capsys.readouterr().err
    assert code == 1 and "--eta" not in err and len(err.strip().splitlines()) == 1


def test_dmft_infinite_variance_label_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["dmft", "--target", "1/z", "--delta", "2", "--steps", "3", "--paths", "200"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "variance" in err and err.startswith("dmftsolve dmft: error: target")


def _simulate_json(capsys: pytest.CaptureFixture[str], workers: str, seed: str) -> dict:
    code = main(["simulate", "--target", "z**2", "--activation", "quad", "--d", "30", "--delta", "2,3",
                 "--trials", "2", "--steps", "5", "--workers", workers, "--json", "--no-progress",
                 "--seed", seed])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)["summary"]
    return {k: summary[k] for k in ("success_rate", "cosine_median", "cosine_q30", "train_loss", "test_loss")}


def test_same_seed_same_numbers_for_any_worker_count(capsys: pytest.CaptureFixture[str]) -> None:
    one = _simulate_json(capsys, "1", "3")
    assert _simulate_json(capsys, "1", "3") == one  # same seed: identical
    assert _simulate_json(capsys, "2", "3") == one  # --workers 2: identical to --workers 1
    assert _simulate_json(capsys, "1", "4") != one  # and the seed matters


def test_not_implemented_is_bad_input_not_internal_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["alg-threshold", "--target", "z1**2 + z2**2 + z3**2 + 0.5*eps", "--method", "additive"])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err and "not supported: additive-noise method: k=3" in err


def test_transition_search_memory_check_uses_the_start_when_paths_grow_with_n(monkeypatch) -> None:  # noqa: ANN001
    """``--paths-per-sample`` makes the kernel paths grow with ``n = δd``: a search is checked at
    the δ it starts from, so the ``--paths-per-sample`` the command's warning suggests is not
    refused at d = 3000 for what δ = 200 would need (it was: 32.6 GiB at 4 paths per sample);
    a grid is still checked at its largest δ, and a search starting too high is refused.
    Reference for the sizes: ``dmft_cost`` (memory of one DMFT) at 4·6·3000 and 4·200·3000
    paths, against an available memory set between them."""
    import argparse

    from dmftsolve import Problem
    from dmftsolve.cli import _common
    from dmftsolve.cli._common import CommandError, dmft_cost
    from dmftsolve.cli.transition import _check_transition_cost
    from dmftsolve.finite_d import TransitionSettings, resolve_settings

    p = Problem.build(target="z**2", activation="quad", eta=0.1, steps=600)
    small, _ = dmft_cost(p, 4 * 6 * 3000, replicate=False)
    large, _ = dmft_cost(p, 4 * 200 * 3000, replicate=False)
    assert small < 4 * 2**30 < large
    monkeypatch.setattr(_common, "available_memory", lambda: 4 * 2**30)

    def check(delta: list[float] | None, start: float | None) -> None:
        s = resolve_settings(TransitionSettings(paths_per_sample=4, start=start, workers=1), p)
        args = argparse.Namespace(delta=delta, d=3000, construction="forced", json=True)
        _check_transition_cost(args, p, s)

    check(None, None)  # the search from δ = 6
    with pytest.raises(CommandError, match="GiB of memory"):
        check([6.0, 200.0], None)  # a grid: its largest δ
    with pytest.raises(CommandError, match="GiB of memory"):
        check(None, 200.0)  # a search that starts where the paths do not fit


def test_transition_says_the_label_mean_warning_first_and_once(capsys: pytest.CaptureFixture[str]) -> None:
    """On an uncentred label (``z**2``, mean 1) the warning is printed before the search runs
    (before its first progress line), once, and kept in the JSON's warnings; on the centred
    ``z**2 - 1`` there is none."""
    from dmftsolve.cli import main

    argv = ["transition", "--target", "z**2", "--d", "100", "--delta", "5,9", "--draws", "2", "--steps", "10",
            "--paths", "400", "--workers", "1", "--json", "--progress"]
    main(argv)  # 2 draws per δ may not bracket δ_50 (exit 1): the warnings are what is tested
    out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.strip()]
    label = [i for i, x in enumerate(lines) if x.startswith("warning: the label's mean is 1")]
    assert len(label) == 1 and label[0] == 0, lines[:3]
    assert any("label's mean" in w for w in json.loads(out)["result"]["warnings"])
    main([*argv[:2], "z**2 - 1", *argv[3:]])
    assert "label's mean" not in capsys.readouterr().err


def test_a_signal_arriving_while_the_first_is_handled_does_not_replace_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C, then SIGTERM while the Ctrl-C handler runs and before it has set the others to
    ignore (under load a burst of signals lands there): the command still ends as interrupted."""
    import os

    from dmftsolve import cli

    quiet = cli._quiet_signals

    def sigterm_first() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs at the next bytecode, nested
        time.sleep(0.05)
        quiet()

    monkeypatch.setattr(cli, "_quiet_signals", sigterm_first)
    saved = {sig: signal.getsignal(sig) for sig in cli._signals()}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits it ignored
    try:
        with pytest.raises(cli.Signalled) as info, cli._signals_as_exceptions():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert info.value.signum == signal.SIGINT
    finally:  # the handlers stay ignoring after a signal, and children would inherit that
        for sig, old in saved.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
