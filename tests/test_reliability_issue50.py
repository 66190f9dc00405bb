"""Issue 50: atomic writes, cache trust, signals, encodings, fits of user counts, precision checks.

The wider table is ``validation/bad_inputs.py`` (its issue-50 section); these are the cheap,
direct checks of each mechanism, with reference values from closed forms.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from dmftsolve._files import FileWriteError, atomic_write, check_output_file, read_regular
from dmftsolve.cli import main
from dmftsolve.thresholds.delta50 import fit_counts

ROOT = Path(__file__).resolve().parents[1]


def test_atomic_write_failure_keeps_old_file_and_names_it(tmp_path: Path) -> None:
    target = tmp_path / "f.png"
    target.write_bytes(b"old")

    def full(fh: io.BufferedWriter) -> None:
        fh.write(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(FileWriteError, match="f.png.*No space left"):
        atomic_write(target, full)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.png"]  # no temporary file left


def test_atomic_write_follows_a_link_and_keeps_the_mode(tmp_path: Path) -> None:
    real = tmp_path / "real.png"
    real.write_bytes(b"old")
    os.chmod(real, 0o640)
    os.symlink(real, tmp_path / "link.png")
    atomic_write(tmp_path / "link.png", lambda fh: fh.write(b"new"))
    assert (tmp_path / "link.png").is_symlink() and real.read_bytes() == b"new"
    assert real.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("make", ["fifo", "dir", "devnull"])
def test_output_paths_that_are_not_regular_files_are_refused(tmp_path: Path, make: str) -> None:
    path = {"fifo": tmp_path / "x.png", "dir": tmp_path / "x.png", "devnull": Path("/dev/null")}[make]
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dir":
        path.mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        check_output_file(path, "--plot")
    with pytest.raises(FileWriteError):
        atomic_write(path, lambda fh: fh.write(b"x"))


def test_plot_to_a_fifo_fails_before_the_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "f.png")
    code = main(["simulate", "--d", "20", "--delta", "2", "--trials", "1", "--steps", "5", "--workers", "1",
                 "--plot", str(tmp_path / "f.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "FIFO" in err[0]


def test_read_regular_does_not_block_on_a_fifo_nor_read_an_endless_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    for name in ("fifo", "zero"):
        with pytest.raises(OSError, match="not a regular file"):
            read_regular(tmp_path / name, 1024)
    (tmp_path / "big").write_bytes(b"x" * 2000)
    with pytest.raises(OSError, match="more than the 1024"):
        read_regular(tmp_path / "big", 1024)


def _cache(root: Path):
    from validation.figures.common import PointCache

    return PointCache(root, "fig")


@pytest.mark.parametrize("spoil", ["copy", "fifo", "dir", "zero", "value"])
def test_cache_entry_is_trusted_only_for_its_own_key(tmp_path: Path, spoil: str) -> None:
    cache = _cache(tmp_path)
    a, b = {"d": 100, "delta": 2.5}, {"d": 100, "delta": 3.5}
    cache.put(a, {"v": 1})
    cache.put(b, {"v": 2})
    pa = cache.path(a)
    if spoil == "copy":
        shutil.copyfile(cache.path(b), pa)
    elif spoil == "value":
        rec = json.loads(pa.read_text())
        rec["value"] = {"v": 123}
        pa.write_text(json.dumps(rec))
    else:
        pa.unlink()
        {"fifo": lambda: os.mkfifo(pa), "dir": pa.mkdir, "zero": lambda: os.symlink("/dev/zero", pa)}[spoil]()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get(a) is None
        cache.put(a, {"v": 1})  # a directory in the way: a warning, not an exception
    assert any("not trusted" in str(w.message) for w in caught)
    assert cache.get(b) == {"v": 2}


def test_ascii_stdout_gets_ascii_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    code = main(["alg-threshold", "--target", "Min(z**2, 1e-3)"])
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert code == 0 and "+/-" in text and "delta_alg" in text
    assert stream.errors == "strict"  # restored


def _run_and_signal(sig: int, after: float) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = ["dmft", "--delta", "2", "--steps", "300", "--paths", "20000"]
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from dmftsolve.cli import main; "
                             "sys.exit(main())", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(after)
    proc.send_signal(sig)
    err = proc.communicate(timeout=60)[1]
    return proc.returncode, err.strip().splitlines()


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGUSR1, signal.SIGINT])
def test_every_signal_is_one_line_and_128_plus_signum(sig: int) -> None:
    code, lines = _run_and_signal(sig, 2.5)
    assert code == 128 + sig, lines
    assert len(lines) == 1 and lines[0].startswith("dmftsolve dmft: error: "), lines


def test_fit_counts_refuses_what_cannot_be_fitted() -> None:
    with pytest.raises(ValueError, match="distinct deltas"):
        fit_counts([5, 5], [0, 10], [10, 10])  # two contradictory points at one δ
    with pytest.raises(ValueError, match="outside the points"):
        fit_counts([1, 2], [999999, 1000000], [1000000, 1000000])  # a negative δ_50 before
    with pytest.raises(ValueError, match="does not rise"):
        fit_counts([4, 5, 6], [8, 4, 0], [8, 8, 8])
    mu, se, _ = fit_counts([4, 5], [0, 8], [8, 8])  # separated: a step somewhere in [4, 5]
    assert 4 <= mu <= 5 and se > 0.05  # the bootstrap gave 0 here


def test_sim_file_with_a_duplicated_key_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.json"
    p.write_text('{"deltas": [4, 5, 6], "successes": [0, 4, 8], "trials": [8, 8, 8], "deltas": [1, 2, 3]}')
    assert main(["transition", "--d", "100", "--sim", str(p)]) == 2
    assert "appears twice" in capsys.readouterr().err


@pytest.mark.parametrize("p", [2, 3, 10, 40])
def test_label_kurtosis_matches_its_closed_form(p: int) -> None:
    """κ of the centred z^p from E[z^2j] = (2j − 1)!!."""
    import dmftsolve as ds
    from dmftsolve.population import label_kurtosis

    def ez(q: int) -> int:  # E[z^q]
        return 0 if q % 2 else math.prod(range(q - 1, 0, -2))

    mu = ez(p)
    m2 = ez(2 * p) - mu**2
    m4 = ez(4 * p) - 4 * mu * ez(3 * p) + 6 * mu**2 * ez(2 * p) - 3 * mu**4
    got = label_kurtosis(ds.Problem.build(target=f"z**{p}"))
    assert got == pytest.approx(m4 / m2**2, rel=1e-6)


def test_dmft_refuses_paths_a_heavy_label_cannot_be_sampled_with(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dmft", "--target", "z**40", "--delta", "2", "--steps", "2"]) == 2
    assert "moments too heavy" in capsys.readouterr().err


def test_quadrature_whose_terms_cancel_is_not_a_success() -> None:
    from dmftsolve.gaussian import expect

    r = expect(lambda x: 1e20 * x[:, 0] ** 2 - 1e20, [0.0], [[1.0]], throw=False)
    assert not r.ok and "precision exhausted" in r.message
    assert r.error >= 1e20 * np.finfo(float).eps  # never an error below the rounding floor


def test_spectrum_width_beyond_the_t0_law_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spectrum", "--m", "50", "--delta", "3"]) == 2
    err = capsys.readouterr().err
    assert "product rule in 51 Gaussian coordinates" in err and "internal error" not in err


def test_target_without_its_latent_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["threshold", "--target", "eps", "--t", "0"]) == 2
    assert "does not depend on z" in capsys.readouterr().err


def test_diverging_simulate_with_overflowing_spread_fails(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--d", "20", "--delta", "2", "--trials", "3", "--steps", "10", "--workers", "1",
                 "--activation", "relu", "--eta", "1e10"])
    out, err = capsys.readouterr()
    assert code == 1 and "spread overflows" in err and "nan" not in out.lower()
