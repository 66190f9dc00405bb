"""``validation/gd_transition_counts.py`` in its ``--quick`` configuration (d = 60, 2 δ, 2 trials).

Checks the JSON structure, that every trial's escape step agrees with its cosines, that a trial
re-run with :func:`dmftsolve.simulation.simulator.simulate` from the seed written in the JSON
gives the same escape step and final cosine (computed here from the raw trajectory, not with the
script's helper), that a rerun resumes from the JSON without recomputing, and that the case
definitions are those of ``validation/transition_vs_simulation.py``.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dmftsolve.simulation.simulator import simulate
from validation import gd_transition_counts as gtc
from validation import transition_vs_simulation as tvs

ROOT = Path(__file__).resolve().parents[1]



TRIAL_KEYS = {"escape_step", "final_cosine", "max_cosine", "min_cosine_after_escape", "nonfinite", "seed"}


def check_trial(t: dict[str, Any], T: int, every: int, threshold: float = 0.5) -> None:
    """Escape step consistent with the recorded cosines (raises AssertionError otherwise)."""
    e, fin, mx = t["escape_step"], t["final_cosine"], t["max_cosine"]
    assert fin is not None and mx is not None and not t["nonfinite"]
    assert -1e-9 <= fin <= mx <= 1 + 1e-9
    if e is None:
        # never above the threshold at a recorded step: neither the final nor the largest cosine
        assert mx <= threshold and fin <= threshold and t["min_cosine_after_escape"] is None
    else:
        assert 0 <= e <= T and (e % every == 0 or e == T)
        assert mx > threshold
        assert t["min_cosine_after_escape"] is not None and t["min_cosine_after_escape"] <= fin
    if fin > threshold:
        assert e is not None


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("gtc")
    gtc.main(["--quick", "--out-dir", str(out)])
    return out, json.loads((out / "gd_transition_counts_quick.json").read_text())


def test_structure(quick: tuple[Path, dict[str, Any]]) -> None:
    out, res = quick
    assert set(res["runs"]) == {"gelu_z2m1|60"}
    entry = res["runs"]["gelu_z2m1|60"]
    assert entry["root_seed"] == gtc.ROOT_SEEDS["gelu_z2m1|60"]
    assert (entry["record_every"], entry["dtype"], entry["T"], entry["d"]) == (5, "float32", 400, 60)
    assert set(entry["points"]) == {"3", "12"}
    for k, pt in entry["points"].items():
        trs = [t for ch in pt["chunks"] for t in ch["trials"]]
        assert len(trs) == 2
        assert pt["chunks"][0]["n"] == round(float(k) * 60)
        for t in trs:
            assert set(t) == TRIAL_KEYS
    rows = res["summary"]["gelu_z2m1|60"]["rows"]
    assert [r["delta"] for r in rows] == [3.0, 12.0]
    for r in rows:
        trs = [t for ch in entry["points"][f"{r['delta']:g}"]["chunks"] for t in ch["trials"]]
        assert r["successes"] == sum(t["escape_step"] is not None for t in trs)
        assert r["trials"] == 2 and r["p"] == r["successes"] / 2
    # counts by earlier steps, re-read from the escape steps: non-decreasing in T', equal at T' = T
    bt = res["summary"]["gelu_z2m1|60"]["by_T"]
    assert list(bt) == ["100", "200", "300", "400"]
    for i in range(len(rows)):
        ks = [bt[t]["successes"][i] for t in bt]
        assert ks == sorted(ks) and ks[-1] == rows[i]["successes"]
    assert bt["400"]["delta_50"] == res["summary"]["gelu_z2m1|60"]["delta_50"]
    md = (out / "gd_transition_counts_quick.md").read_text()
    assert "δ_50" in md and "--quick" in md and "| 3 | 180 |" in md and "| 12 | 720 |" in md


def test_escape_steps_consistent(quick: tuple[Path, dict[str, Any]]) -> None:
    _, res = quick
    entry = res["runs"]["gelu_z2m1|60"]
    trs = [t for pt in entry["points"].values() for ch in pt["chunks"] for t in ch["trials"]]
    # the quick run has both outcomes, so both branches of the check are exercised
    assert any(t["escape_step"] is None for t in trs) and any(t["escape_step"] is not None for t in trs)
    for t in trs:
        check_trial(t, entry["T"], entry["record_every"])
    # the check fails on inconsistent records
    esc = next(t for t in trs if t["escape_step"] is not None)
    fail = next(t for t in trs if t["escape_step"] is None)
    for bad in ({**esc, "escape_step": None}, {**fail, "escape_step": 5}, {**esc, "escape_step": 403},
                {**fail, "final_cosine": 0.9, "max_cosine": 0.9}):
        with pytest.raises(AssertionError):
            check_trial(bad, entry["T"], entry["record_every"])


def test_rerun_from_recorded_seed(quick: tuple[Path, dict[str, Any]]) -> None:
    # each trial is reproducible from its recorded SeedSequence (module docstring), and the script's
    # escape step / final cosine are those of the raw trajectory
    _, res = quick
    entry = res["runs"]["gelu_z2m1|60"]
    p = gtc.problem_of("gelu_z2m1")
    for k in ("3", "12"):
        ch = entry["points"][k]["chunks"][0]
        j = 1
        rec = ch["trials"][j]["seed"]
        root = np.random.SeedSequence(rec["entropy"], spawn_key=tuple(rec["spawn_key"][:-1]))
        run = simulate(p, 60, float(k), seed=root, trials=j + 1, record_every=5, dtype=np.float32,
                       throw=False)
        cos = run.cosine[j]
        steps = np.asarray(run.steps)
        assert steps[0] == 0 and steps[-1] == 400 and np.all(np.diff(steps) == 5)
        above = [int(s) for s, c in zip(steps, cos, strict=True) if c > 0.5]
        assert ch["trials"][j]["escape_step"] == (above[0] if above else None)
        assert ch["trials"][j]["final_cosine"] == pytest.approx(float(cos[-1]), rel=1e-12, abs=1e-12)


def test_resume_does_not_recompute(quick: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, res = quick
    src = out / "gd_transition_counts_quick.json"
    (tmp_path / src.name).write_text(src.read_text())
    res2 = gtc.main(["--quick", "--out-dir", str(tmp_path)])
    # the chunks (with their wall times) are read back unchanged, not re-run
    assert json.loads(json.dumps(res2["runs"])) == res["runs"]
    # a cache written with other settings is refused
    bad = copy.deepcopy(res)
    bad["runs"]["gelu_z2m1|60"]["record_every"] = 10
    (tmp_path / src.name).write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="record_every"):
        gtc.main(["--quick", "--out-dir", str(tmp_path)])


def test_not_run_of_other_runs_is_kept(quick: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    # an invocation replaces the skipped-chunk notes of the runs it planned, and only those
    out, res = quick
    old = copy.deepcopy(res)
    old["not_run"] = ["run 1 (gelu_z2m1|60) δ = 3: 2 trials", "run 7 (quad_z2|500) δ = 5: 40 trials"]
    (tmp_path / "gd_transition_counts_quick.json").write_text(json.dumps(old))
    res2 = gtc.main(["--quick", "--out-dir", str(tmp_path)])
    assert res2["not_run"] == ["run 7 (quad_z2|500) δ = 5: 40 trials"]
    assert "run 7 (quad_z2|500) δ = 5: 40 trials" in (tmp_path / "gd_transition_counts_quick.md").read_text()


def test_cases_match_transition_vs_simulation() -> None:
    for name, c in gtc.CASES.items():
        ref = tvs.CASES[name]
        assert {k: c[k] for k in ("target", "activation", "eta", "T")} == \
            {k: ref[k] for k in ("target", "activation", "eta", "T")}
    assert gtc.problem_of("gelu_z2m1").to_dict()["q0"] == 1.0
    for r in gtc.RUNS.values():
        assert f"{r['case']}|{r['d']}" in gtc.ROOT_SEEDS


def test_workers_do_not_change_the_trials(quick: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    # each trial has its own seed, so a process pool gives the serial run's trials exactly
    _, res = quick
    res2 = gtc.main(["--quick", "--workers", "2", "--out-dir", str(tmp_path)])
    for key, entry in res["runs"].items():
        for dk, pt in entry["points"].items():
            got = res2["runs"][key]["points"][dk]["chunks"]
            assert [ch["trials"] for ch in got] == [ch["trials"] for ch in pt["chunks"]]
            assert all(ch["workers"] == 2 for ch in got)


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--workers"):
        gtc.main(["--workers", "0", "--out-dir", str(tmp_path)])
    with pytest.raises(ValueError, match="--cases"):
        gtc.main(["--cases", "999", "--out-dir", str(tmp_path)])
    with pytest.raises(ValueError, match="--budget-minutes"):
        gtc.main(["--budget-minutes", "0", "--out-dir", str(tmp_path)])


def test_transition_curves_pooled_over_seeds() -> None:
    """``pooled`` sums the counts of one configuration's seeds per δ (δ grids may differ) and
    fits those; a configuration with one seed is not pooled. Reference: the summed counts by hand
    and ``probit_fit`` on them."""
    base = {"case": "gelu_z2m1", "d": 2000, "gd_delta_50": 7.0, "gd_delta_50_err": 0.1}
    curves = {
        "gelu_z2m1|2000|forced@paired": {**base, "seed": 1, "deltas": [6.5, 7.0, 7.5],
                                         "successes": [2, 5, 12], "draws": [16, 16, 16],
                                         "p_err": [0.05, 0.1, 0.1]},
        "gelu_z2m1|2000|forced@paired@seed2": {**base, "seed": 2, "deltas": [6.5, 7.0, 8.0],
                                               "successes": [10, 20, 30], "draws": [32, 32, 32],
                                               "p_err": [0.08, 0.09, 0.05]},
        "gelu_z2|2000|forced@paired": {**base, "seed": 1, "deltas": [9.0], "successes": [3],
                                       "draws": [16], "p_err": [0.1]},
    }
    out = tvs.pooled(curves)
    assert list(out) == ["gelu_z2m1|2000|forced@paired"]
    q = out["gelu_z2m1|2000|forced@paired"]
    assert q["seeds"] == [1, 2]
    assert q["deltas"] == [6.5, 7.0, 7.5, 8.0]
    assert q["successes"] == [12, 25, 12, 30]
    assert q["draws"] == [48, 48, 16, 32]
    ref = tvs.probit_fit(np.array([6.5, 7.0, 7.5, 8.0]), np.array([12, 25, 12, 30]),
                         np.array([48, 48, 16, 32]))
    assert q["delta_50"] == pytest.approx(ref[0]) and q["width"] == pytest.approx(ref[2])
    assert 6.5 < q["delta_50"] < 8.0


def test_default_curve_picks_paired_then_poisson() -> None:
    """``default_curve`` takes the paired N = 2n curves of (case, d), pooled over seeds, before the
    paired 2·10⁴-path one, and the Poisson one only when no paired curve exists (saying so);
    curves with other path counts or constructions are never taken. Reference: hand-summed counts
    and ``probit_fit`` on them."""

    def curve(**kw: Any) -> dict[str, Any]:
        c = {"case": "gelu_z2m1", "d": 2000, "construction": "forced", "n_paths": None,
             "paths_per_sample": None, "force_weights": "poisson", "seed": 1,
             "deltas": [6.5, 7.0, 7.5], "successes": [2, 8, 14], "draws": [16, 16, 16],
             "p_err": [0.05, 0.1, 0.05], "delta_50": 7.0, "delta_50_err": 0.2, "width": 0.6,
             "gd": {"source": "x"}, "gd_delta_50": 7.1, "gd_delta_50_err": 0.1, "gd_width": 0.5}
        return {**c, **kw}

    res = {"curves": {
        "a|2000|forced": curve(),
        "a|2000|forced@60000": curve(n_paths=60000, delta_50=1.0),
        "a|2000|quenched": curve(construction="quenched", delta_50=2.0),
    }}
    q = tvs.default_curve(res, "gelu_z2m1", 2000)
    assert q["keys"] == ["a|2000|forced"] and q["weights"] == "poisson" and q["delta_50"] == 7.0
    assert tvs.within(q["delta_50"], q["gd_delta_50"]) == ("-0.10", "yes")
    res["curves"]["a|2000|forced@paired"] = curve(force_weights="paired", delta_50=7.2)
    assert tvs.default_curve(res, "gelu_z2m1", 2000)["keys"] == ["a|2000|forced@paired"]
    res["curves"]["a|2000|forced@pps2@paired"] = curve(force_weights="paired", paths_per_sample=2)
    res["curves"]["a|2000|forced@pps2@paired@seed2"] = curve(
        force_weights="paired", paths_per_sample=2, seed=2, deltas=[7.0, 8.0], successes=[10, 30],
        draws=[32, 32], p_err=[0.08, 0.03])
    q = tvs.default_curve(res, "gelu_z2m1", 2000)
    assert q["keys"] == ["a|2000|forced@pps2@paired", "a|2000|forced@pps2@paired@seed2"]
    assert q["deltas"] == [6.5, 7.0, 7.5, 8.0]
    assert q["successes"] == [2, 18, 14, 30] and q["draws"] == [16, 48, 16, 32]
    # errors combined by draws: sqrt((16·0.1)² + (32·0.08)²) / 48 at δ = 7
    assert q["p_err"][1] == pytest.approx(math.hypot(16 * 0.1, 32 * 0.08) / 48)
    ref = tvs.probit_fit(np.array([6.5, 7.0, 7.5, 8.0]), np.array([2, 18, 14, 30]),
                         np.array([16, 48, 16, 32]))
    assert q["delta_50"] == pytest.approx(ref[0]) and "2 seeds pooled" in q["run"]
    assert tvs.default_curve(res, "gelu_z2m1", 4000) is None
    assert tvs.within(8.0, 7.0) == ("+1.00", "no") and tvs.within(None, 7.0) == ("–", "–")
    assert tvs.within(11.606, 11.61) == ("+0.00", "yes")  # a difference that rounds to 0: no '-0.00'


def test_by_horizon_counts_escapes_by_step_T(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``by_horizon`` counts a theory draw (escape step, −1: none) and a GD trial (escape step,
    None: none) as a success by T when it escaped at a step ≤ T, and fits both with
    ``probit_fit``. Reference: counts by hand."""
    trials = {5.0: [10, 150, None, None], 6.0: [20, 90, 300, None], 7.0: [5, 40, 60, 500]}
    run = {"points": {f"{x:g}": {"delta": x, "chunks": [{"trials": [{"escape_step": e} for e in es]}]}
                      for x, es in trials.items()}}
    path = tmp_path / "counts.json"
    path.write_text(json.dumps({"runs": {"quad_z2|2000": run}}))
    monkeypatch.setattr(tvs, "GD_COUNTS", path)
    q = {"case": "quad_z2", "d": 2000, "deltas": [5.0, 6.0, 7.0], "draws": [3, 3, 3],
         "escape_steps": [[-1, 30, 250], [15, -1, 120], [8, 9, 700]]}
    out = tvs.by_horizon(q, (100, 400))
    for T, k_th, k_gd in ((100, [1, 1, 2], [1, 2, 3]), (400, [2, 2, 2], [2, 3, 3])):
        th = tvs.probit_fit(np.array([5.0, 6.0, 7.0]), np.array(k_th), np.array([3, 3, 3]))
        gd = tvs.probit_fit(np.array([5.0, 6.0, 7.0]), np.array(k_gd), np.array([4, 4, 4]))
        assert out[T][0] == pytest.approx(th[:2]) and out[T][1] == pytest.approx(gd[:2])
    # a curve without escape steps (older runs) gives nothing rather than wrong counts
    assert tvs.by_horizon({**q, "escape_steps": [[], [], []]}, (100,)) == {}
    assert tvs.by_horizon({**q, "d": 4000}, (100,)) == {}
