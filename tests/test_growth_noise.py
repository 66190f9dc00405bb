"""validation.growth_noise: the measurement's own invariants (the stored results are its runs)."""

from __future__ import annotations

import numpy as np
import pytest

from validation import growth_noise as gn


@pytest.mark.parametrize("m", [1, 2])
def test_growth_is_even_in_the_sign_of_the_start(m: int) -> None:
    """The paths are paired by the reflection of θ*, so in float64 the solve from −M_0 is the
    mirror image of the one from M_0: the same G at every reported step (findings §10.6; in
    float32 the summation order differs and the two part after a few dozen steps)."""
    f64 = {"path_dtype": "float64"}
    up = gn.growth(m, 3.4, 4000, seed=3, extra=f64, scale=1e-3)
    down = gn.growth(m, 3.4, 4000, seed=3, extra=f64, scale=-1e-3)
    assert np.all(np.isfinite(up["G"]))
    np.testing.assert_allclose(down["G"], up["G"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(down["Q"], up["Q"], rtol=1e-8)
    assert max(abs(g) for g in up["G"]) > 0.1  # the overlap does move


def test_summary_statistics() -> None:
    runs = [{"G": [float(i), 2.0 * i, 0, 0, float(i)], "Q": [1.0, 1.0, 1.0], "cpu_s": 1.0} for i in range(5)]
    s = gn.summarise(runs)
    assert s["n"] == 5
    assert s["mean"][0] == pytest.approx(2.0)
    assert s["sd"][1] == pytest.approx(np.std([0, 2, 4, 6, 8], ddof=1))
    assert s["se"][0] == pytest.approx(np.std(range(5), ddof=1) / np.sqrt(5))
    assert s["median"][4] == 2.0


def test_unknown_configuration_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        gn.main(["--only", "nope", "--report"])
    assert "unknown configuration 'nope'" in capsys.readouterr().err
