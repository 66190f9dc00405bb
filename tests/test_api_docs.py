"""The site (the Markdown guides and the API reference, configured in docs/api) builds with
warnings as errors.

It is the documented command, ``python3 -m sphinx -W --keep-going -b html -c docs/api . <out>``
from the repository's root, into a temporary directory, plus checks that every guide is a page
and that every name the package and its sub-packages export is documented, under the module that
defines it. Skipped without the ``docs`` extra (``pip install ".[docs]"``).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("numpydoc")
pytest.importorskip("myst_parser")

ROOT = Path(__file__).resolve().parents[1]
#: The Markdown guides the site renders (docs/api/conf.py lists the same).
GUIDES = ["README.md", "docs/tutorial.md", "docs/cli.md", "docs/tips.md", "docs/theory.md",
          "docs/findings.md", "docs/results.md", "docs/accuracy.md", "docs/figures.md",
          "docs/bad_inputs.md", "docs/investigations.md"]
PACKAGES = ["dmftsolve", "dmftsolve.dynamics", "dmftsolve.hessian", "dmftsolve.thresholds",
            "dmftsolve.finite_d",
            "dmftsolve.simulation", "dmftsolve.seeds"]


def test_api_reference_builds_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "html"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONWARNINGS": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-c", str(ROOT / "docs" / "api"), "-d", str(tmp_path / "doctrees"), str(ROOT), str(out)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False,
    )
    assert proc.returncode == 0, f"sphinx failed ({proc.returncode}):\n{proc.stderr[-5000:]}"
    assert "WARNING" not in proc.stderr, proc.stderr[-5000:]

    # Every guide is a page, reached from the front page's table of contents.
    index = (out / "docs" / "api" / "index.html").read_text(encoding="utf-8")
    for guide in GUIDES:
        page = Path(guide).with_suffix(".html")
        assert (out / page).is_file(), f"{guide} is not rendered"
        assert f'href="{os.path.relpath(page, "docs/api")}"' in index, f"{guide} is not in the contents"

    # Every exported name has an entry (an HTML anchor) under its defining module.
    html = "\n".join(p.read_text(encoding="utf-8") for p in (out / "docs" / "api").glob("*.html"))
    missing = []
    for package in PACKAGES:
        mod = importlib.import_module(package)
        for name in mod.__all__:
            home = getattr(getattr(mod, name), "__module__", None) or package
            if not home.startswith("dmftsolve"):  # an alias such as SeedLike
                home = package
            if f'id="{home}.{name}"' not in html:
                missing.append(f"{package}.{name} (expected under {home})")
    assert not missing, "exported but not in the API reference: " + ", ".join(missing)
