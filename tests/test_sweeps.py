"""Sweeps over δ × trials (``dmftsolve.simulation.sweeps``) through executors, and the
``dmftsolve simulate`` command."""

from __future__ import annotations

import json
import math
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest
from reference_problems import reference_problem

from dmftsolve import SolverError, Status
from dmftsolve.cli import main
from dmftsolve.simulation.simulator import simulate
from dmftsolve.simulation.sweeps import SweepResult, sweep

P = reference_problem("gelu_phase", eta=0.2, steps=15)
KW = {"d": 30, "deltas": [2.0, 5.0], "trials": 3, "seed": 9, "progress": False}


def _assert_same(a: SweepResult, b: SweepResult) -> None:
    for name in ("success_rate", "cosine_median", "train_loss", "test_loss"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for ra, rb in zip(a.runs, b.runs, strict=True):
        np.testing.assert_array_equal(ra.cosine, rb.cosine)
        np.testing.assert_array_equal(ra.gram, rb.gram)


@pytest.fixture(scope="module")
def serial() -> SweepResult:
    return sweep(P, **KW)


def test_serial_sweep_runs_equal_simulate_with_child_seeds(serial):
    root = np.random.SeedSequence(9)
    for i, delta in enumerate(KW["deltas"]):
        child = np.random.SeedSequence(root.entropy, spawn_key=(i,))
        ref = simulate(P, KW["d"], delta, seed=child, trials=3)
        np.testing.assert_array_equal(serial.runs[i].cosine, ref.cosine)
        np.testing.assert_array_equal(serial.runs[i].train_loss, ref.train_loss)


def test_thread_pool_sweep_equals_serial(serial):
    with ThreadPoolExecutor(max_workers=2) as pool:
        threaded = sweep(P, **KW, executor=pool)
    _assert_same(serial, threaded)
    assert threaded.settings["executor"] == "ThreadPoolExecutor"


def test_process_pool_sweep_equals_serial(serial):
    with ProcessPoolExecutor(max_workers=2) as pool:
        procs = sweep(P, **KW, executor=pool)
    _assert_same(serial, procs)


@pytest.mark.dask
def test_dask_local_cluster_sweep_equals_serial(serial):
    distributed = pytest.importorskip("distributed")
    # processes=False: scheduler and worker talk over the in-process transport
    # (inproc://, no sockets at all; host="127.0.0.1" does not apply to it)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        result = sweep(P, **KW, executor=client.get_executor())
    _assert_same(serial, result)


def test_summary_statistics_match_the_runs(serial):
    thr = 0.5
    for i, run in enumerate(serial.runs):
        final = run.cosine[:, -1]
        p = np.mean(final > thr)
        assert serial.success_rate[i] == p
        assert serial.success_stderr[i] == pytest.approx(math.sqrt(p * (1 - p) / 3))
        q30, q50, q70 = np.percentile(final, [30, 50, 70])
        assert serial.cosine_median[i] == pytest.approx(q50)
        assert serial.cosine_q30[i] == pytest.approx(q30)
        assert serial.cosine_q70[i] == pytest.approx(q70)
        assert serial.train_loss[i] == pytest.approx(run.train_loss[:, -1].mean())
        assert serial.test_loss_stderr[i] == pytest.approx(
            run.test_loss[:, -1].std(ddof=1) / math.sqrt(3))
    # a threshold of 0 counts every finite run as a success
    assert np.all(sweep(P, **KW, success_threshold=0.0).success_rate == 1.0)
    data = json.loads(json.dumps(serial.to_dict(runs=False), allow_nan=False))
    assert "runs" not in data and data["settings"]["trials"] == 3
    assert len(serial.rows()) == 2


def test_nonfinite_runs_count_as_failures():
    p = reference_problem("quad_phase", eta=50.0, steps=20)
    res = sweep(p, 20, [2.0], trials=2, seed=0, progress=False)
    assert res.status is Status.NONFINITE
    assert res.success_rate[0] == 0.0 and res.diagnostics["nonfinite"] == [2]
    with pytest.raises(SolverError):
        sweep(p, 20, [2.0], trials=1, seed=0, progress=False, throw=True)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"deltas": []}, "deltas must be a non-empty"),
        ({"deltas": [1.0, -2.0]}, "delta must be > 0"),
        ({"trials": 0}, "trials must be >= 1"),
        ({"success_threshold": 1.5}, "success_threshold must be in"),
        ({"bogus": 1}, "unknown simulate keyword"),
        ({"executor": "pool"}, "executor must be a concurrent.futures.Executor"),
        ({"d": 0}, "d must be >= 1"),
        ({"first_passage": "yes"}, "first_passage must be True or False"),
    ],
)
def test_sweep_validation(kwargs, needle):
    args = {**KW, **kwargs}
    with pytest.raises(ValueError, match=needle):
        sweep(P, **args)


# ----------------------------------------------------------------------------- CLI
def test_cli_json_sweep(capsys):
    code = main(["simulate", "--target", "z**2", "--d", "25", "--delta", "2,4", "--trials", "2",
                 "--steps", "10", "--eta", "0.2", "--workers", "1", "--record-every", "5",
                 "--no-progress", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["command"] == "simulate"
    assert data["summary"]["deltas"] == [2.0, 4.0]
    assert len(data["summary"]["success_rate"]) == 2
    assert data["runs"][0]["steps"] == [0, 5, 10]
    # the same numbers as the library call with the same seed
    ref = sweep(reference_problem("gelu_phase", eta=0.2, steps=10), 25,
                [2.0, 4.0], trials=2, seed=0, progress=False, record_every=5)
    np.testing.assert_allclose(data["summary"]["cosine_median"], ref.cosine_median)


def test_cli_single_delta_table_and_hessian(capsys):
    code = main(["simulate", "--activation", "quad", "--eta", "0.05", "--d", "30", "--delta",
                 "3", "--trials", "2", "--steps", "6", "--workers", "1", "--hessian-at", "0,6",
                 "--n-eigs", "2", "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "mean trajectory" in out and "Hessian extreme eigenvalues" in out
    assert "success" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--delta", "-1"],
        ["--d", "0"],
        ["--trials", "0"],
        ["--workers", "0"],
        ["--eta", "-0.1"],
        ["--hessian-at", "999"],
    ],
)
def test_cli_bad_input_exit_code_2(argv, capsys):
    code = main(["simulate", "--d", "20", "--steps", "5", "--trials", "1", "--workers", "1",
                 "--no-progress", *argv] if "--d" not in argv else
                ["simulate", "--steps", "5", "--trials", "1", "--workers", "1",
                 "--no-progress", *argv])
    assert code == 2
    assert "error" in capsys.readouterr().err


def _exit_code(argv: list[str]) -> int:
    """The CLI's exit code, whether ``main`` returns it or argparse raises SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_cli_unparsable_delta_exits_2(capsys):
    assert _exit_code(["simulate", "--delta", "abc"]) == 2
    assert "--delta" in capsys.readouterr().err


def test_cli_plot_without_matplotlib_is_a_clear_error(capsys, tmp_path):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        code = main(["simulate", "--d", "20", "--delta", "2", "--trials", "1", "--steps", "2",
                     "--workers", "1", "--no-progress", "--plot", str(tmp_path / "f.png")])
        assert code == 2
        assert "matplotlib" in capsys.readouterr().err
    else:
        code = main(["simulate", "--d", "20", "--delta", "2,3", "--trials", "1", "--steps", "2",
                     "--workers", "1", "--no-progress", "--plot", str(tmp_path / "f.png")])
        assert code == 0 and (tmp_path / "f.png").exists()


def test_cli_help_mentions_defaults(capsys):
    assert _exit_code(["simulate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--delta" in out and "--workers" in out and "GeLU" in out


def test_first_passage_counts_the_runs_that_ever_passed(capsys):
    """``first_passage=True`` counts a run that crossed the threshold at any recorded step
    (reference: the cosine arrays of the same runs, read directly); at d = 30 the cosine of a
    small network fluctuates, so some runs cross 0.4 and fall back (3 against 1 of 6 at δ = 1)."""
    p = reference_problem("gelu_phase", target="z**2 - 1", eta=0.5, steps=40)
    kw = {"trials": 6, "seed": 0, "progress": False, "record_every": 2, "success_threshold": 0.4}
    final = sweep(p, 30, [1.0, 3.0], **kw)
    ever = sweep(p, 30, [1.0, 3.0], first_passage=True, **kw)
    for run, k_final, k_ever in zip(ever.runs, final.successes, ever.successes, strict=True):
        cos = run.success_statistic()
        assert k_ever == int(np.sum(np.nanmax(cos, axis=1) > 0.4))
        assert k_final == int(np.sum(cos[:, -1] > 0.4))
    assert np.all(ever.successes >= final.successes) and np.any(ever.successes > final.successes)
    assert ever.settings["first_passage"] is True
    # the CLI flag gives the library's counts, and says which criterion it used
    argv = ["simulate", "--target", "z**2 - 1", "--d", "30", "--delta", "1,3", "--trials", "6",
            "--steps", "40", "--eta", "0.5", "--record-every", "2", "--success-threshold", "0.4",
            "--workers", "1", "--no-progress"]
    assert main([*argv, "--first-passage", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [sum(r["success"]) for r in data["runs"]] == ever.successes.tolist()
    assert main([*argv, "--first-passage"]) == 0
    assert "success = cosine at some recorded step > 0.4" in capsys.readouterr().out
