"""``validation/transition_defaults.py``: its tiny search end to end, and its report against
hand-made results."""

from __future__ import annotations

import pytest

from validation import transition_defaults as mod


def test_tiny_search_records_what_it_used() -> None:
    out = mod.main(["--tiny"])
    (k, v), = out.items()
    assert k == "gelu_z2m1|100"
    assert sum(v["draws"]) >= 8 and len(v["deltas"]) == len(v["successes"]) >= 2
    assert v["settings"]["n_paths"] == 400 and v["settings"]["cpu"] and v["cpu_seconds"] > 0
    # n = 100 δ samples against N = 400 paired paths: excess 2n/N − 1 (the closed form of
    # dmftsolve.finite_d.diagnostics.curvature_excess) at the largest δ visited, at least 2 (δ = 6),
    # so the command's warning is recorded
    expected = max(2 * round(100 * x) / 400 - 1 for x in v["deltas"])
    assert expected >= 2 and v["curvature_excess_max"] == pytest.approx(expected)
    assert any("paths_per_sample=2" in w for w in v["warnings"])
    assert v["failed_draws"] == mod.failed_draws(v) >= 0


def test_bad_options_exit_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in ((["--ds", "abc"], "--ds must be"), (["--seed", "-1"], "must be positive"),
                        (["--paths", "10"], "--paths must be at least 40"),
                        (["--paths-per-sample", "-2"], "--paths-per-sample must be in"),
                        (["--null-rtol", "0"], "--null-rtol must be in"),
                        (["--only", "nope"], "unknown case")):
        with pytest.raises(SystemExit) as e:
            mod.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and words in err[-1], (argv, err)


@pytest.mark.parametrize("args", [("gelu_z2m1", 1000, None, 0, None, None),
                                  ("gelu_z2m1", 500, 2.0, 1, 5000, 0.003),
                                  ("quad_z2", 4000, None, 0, 20000, None),
                                  ("quad_z2m1", 2000, 2.0, 3, None, None)])
def test_parse_key_inverts_key(args: tuple) -> None:
    case, d, pps, seed, paths, rtol = args
    k = mod.key(case, d, pps, seed, paths, rtol)
    got_case, got_d, opts, got_seed = mod.parse_key(k)
    assert (got_case, got_d, got_seed) == (case, d, seed)
    assert opts == mod.key(case, d, pps, 0, paths, rtol).partition("@")[2]


def test_failed_draws_from_the_record_else_the_message() -> None:
    """Reference: the counts written into hand-made records."""
    msg = "2 of 3 points had failed draws: δ = 5: 1 DMFT draws failed: [..]; δ = 6: 2 DMFT draws failed"
    assert mod.failed_draws({"message": msg}) == 3
    assert mod.failed_draws({"message": msg, "failed_draws": 7}) == 7
    assert mod.failed_draws({"message": ""}) == 0


def test_report_counts_the_bar_at_the_defaults_only() -> None:
    """Two searches of GeLU ``z² − 1`` at d = 1000 against GD's stored 6.89: 7.1 is within
    max(0.3, 5 %) = 0.34, 7.4 is not; the `@pps2` and `@seed1` rows are shown but not counted."""
    gd = mod.gd_of("gelu_z2m1", 1000)
    assert gd is not None and 6.7 < gd[0] < 7.1  # findings §9.2: 6.89 ± 0.07

    def row(x: float, pps: float | None) -> dict:
        return {"delta_50": x, "err": 0.14, "status": "success", "draws": [40, 40], "seconds": 12.0,
                "cpu_seconds": 20.0, "curvature_excess_max": 0.0,
                "settings": {"n_paths": 20000, "paths_per_sample": pps}}

    seeded = row(gd[0] + 0.9, None)
    seeded["settings"]["seed"] = 1
    text = mod.report({"gelu_z2m1|1000": row(gd[0] + 0.2, None), "gelu_z2m1|500": row(10.0, None),
                       "gelu_z2m1|1000@pps2": row(gd[0] + 0.9, 2), "gelu_z2m1|1000@seed1": seeded})
    assert mod.key("gelu_z2m1", 1000, None, 1) == "gelu_z2m1|1000@seed1"
    assert mod.key("gelu_z2m1", 1000, None, 0, 80_000) == "gelu_z2m1|1000@paths80000"
    assert "| 1000 | 20000, seed 1 | " in text
    assert "With seed 1 (the default searches again): 0 of 1 within." in text
    assert "| 1000 | 20000 | " in text and "| 1000 | N = 2 n | " in text
    assert "1 of 2 searches are within the bar" in text
    # no search warned (excess 0): the heeded count is the defaults'
    assert mod.heeded_count({"gelu_z2m1|1000": row(gd[0] + 0.2, None), "gelu_z2m1|500": row(10.0, None),
                             "gelu_z2m1|1000@pps2": row(gd[0] + 0.9, 2)}) == (1, 2, 0, 0, 0)
    assert text.index("| 500 |") < text.index("| 1000 | 20000")


def test_heeded_count_swaps_in_the_n_2n_search_where_the_command_warned() -> None:
    """A default search 0.9 high whose curvature excess is 2.3 (above the warning's 1) and its
    N = 2n search 0.1 high: within after the swap; a search with excess 0.5 keeps its own."""
    g = mod.gd_of("gelu_z2", 2000)[0]
    g2 = mod.gd_of("gelu_z2", 1000)[0]

    def row(x: float, excess: float) -> dict:
        return {"delta_50": x, "curvature_excess_max": excess}

    data = {"gelu_z2|2000": row(g + 0.9, 2.3), "gelu_z2|2000@pps2": row(g + 0.1, 0.0),
            "gelu_z2|1000": row(g2 + 0.9, 0.5), "gelu_z2|1000@pps2": row(g2, 0.0)}
    assert mod.heeded_count(data) == (1, 2, 1, 0, 1)
