"""Packaging and API manners (issue 29): license, citation, changelog, typing marker,
a single-sourced version, the commit in each result, and reprs that show the answer."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

import dmftsolve
from dmftsolve import results
from dmftsolve.results import Result, Status

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# ------------------------------------------------------------------ files and metadata
def test_license_is_mit_and_declared_as_spdx() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "the dmftsolve developers" in text
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"  # an SPDX string, not the deprecated table
    assert "LICENSE" in project["license-files"]
    req = " ".join(PYPROJECT["build-system"]["requires"])
    m = re.search(r"setuptools>=(\d+)", req)
    assert m and int(m.group(1)) >= 77, "SPDX license strings need setuptools >= 77"


def test_citation_cites_the_software_and_the_paper() -> None:
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert str(cff["version"]) == dmftsolve.__version__
    assert cff["license"] == "MIT" and cff["authors"]
    refs = cff["references"]
    paper = next(r for r in refs if "Phase Transitions for Feature Learning" in r["title"])
    assert [a["family-names"] for a in paper["authors"]] == ["Montanari", "Wang"]
    assert any(i["value"] == "arXiv:2602.01434" for i in paper["identifiers"])


def test_changelog_has_unreleased_above_the_releases() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## (.+)$", text, flags=re.M)
    assert text.startswith("# Changelog")
    assert heads[0] == "Unreleased" and "0.1.0" in heads
    assert all(h == "Unreleased" or re.fullmatch(r"\d+\.\d+\.\d+.*", h) for h in heads)


def test_version_is_single_sourced() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "dmftsolve._version.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", dmftsolve.__version__)
    assert dmftsolve.__version__ != "0.1.0"  # bumped with the changed defaults (CHANGELOG)
    try:
        installed = importlib.metadata.version("dmftsolve")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("dmftsolve is not installed")
    assert installed == dmftsolve.__version__, "reinstall: the installed metadata is stale"


def test_py_typed_ships() -> None:
    assert (ROOT / "dmftsolve" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["dmftsolve"]


@pytest.mark.slow
def test_wheel_builds_without_deprecation_warnings(tmp_path: Path) -> None:
    """The check of issue 29: ``pip wheel . --no-deps`` prints no deprecation warning, and the
    wheel holds the license, the typing marker and, built from a checkout, the commit
    (builds in an isolated environment)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "-w", str(tmp_path),
                           "--no-deps"], capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        pytest.skip(f"the wheel did not build here (no index?): {proc.stderr[-300:]}")
    assert "deprecat" not in (proc.stdout + proc.stderr).lower()
    (wheel,) = tmp_path.glob("dmftsolve-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "dmftsolve/py.typed" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert wheel.name.startswith(f"dmftsolve-{dmftsolve.__version__}-")
    # setup.py's build hook stamps the wheel with the checkout's HEAD (results' metadata)
    git = shutil.which("git")
    if git is not None and (ROOT / ".git").exists():
        head = subprocess.run([git, "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        assert zipfile.ZipFile(wheel).read("dmftsolve/_commit.txt").decode().strip() == head
    assert not (ROOT / "dmftsolve" / "_commit.txt").exists()  # the source tree is left alone


# ------------------------------------------------------------------ the commit of a result
def _demo(**kw: object) -> Result:
    return Result(status=Status.SUCCESS, settings={}, diagnostics={}, elapsed=0.5, **kw)


def test_result_records_the_commit_of_this_checkout() -> None:
    r = _demo()
    assert r.to_dict()["commit"] == r.commit
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        assert r.commit is None
        return
    head = subprocess.run([git, "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=False).stdout.strip()
    assert r.commit == head


def test_commit_lookup_never_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("no git here")

    monkeypatch.setattr(results.subprocess, "run", boom)
    assert results.git_commit.__wrapped__() is None


def test_commit_lookup_ignores_an_enclosing_foreign_repository(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the package inside some other git work tree is not stamped with its commit."""
    class Out:
        returncode = 0
        stdout = f"{tmp_path}\n{'a' * 40}\n"

    monkeypatch.setattr(results.subprocess, "run", lambda *a, **k: Out())
    assert results.git_commit.__wrapped__() is None


def test_stamped_commit_reads_only_a_commit_id(tmp_path: Path) -> None:
    f = tmp_path / "_commit.txt"
    assert results.stamped_commit(f) is None  # no file
    f.write_text("b" * 40 + "\n")
    assert results.stamped_commit(f) == "b" * 40
    for bad in ("b" * 39, "B" * 40, "g" * 40, "", "b" * 40 + " extra"):
        f.write_text(bad)
        assert results.stamped_commit(f) is None, bad


def test_an_installed_copy_reports_the_commit_it_was_built_from(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a checkout (git fails) the build's stamp is the commit."""
    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("no git here")

    stamp = tmp_path / "_commit.txt"
    stamp.write_text("c" * 40)
    monkeypatch.setattr(results.subprocess, "run", boom)
    monkeypatch.setattr(results, "STAMP_FILE", stamp)
    assert results.git_commit.__wrapped__() == "c" * 40


# ------------------------------------------------------------------ reprs show the answer
@dataclasses.dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class _Answer(Result):
    _headline = ("x", "x_err", "label", "values")
    x: float | None
    x_err: float | None
    label: str = "a"
    values: np.ndarray = dataclasses.field(default_factory=lambda: np.array([1.0, 2.0]))


def _answer(**kw: object) -> _Answer:
    base: dict[str, object] = {"status": Status.SUCCESS, "settings": {}, "diagnostics": {},
                               "elapsed": 0.25, "x": 21.991, "x_err": 1.3}
    return _Answer(**(base | kw))


def test_repr_shows_the_headline_with_its_error() -> None:
    text = repr(_answer())
    assert text.startswith("<_Answer x=22.0 ± 1.3 label=a values=[1, 2] status=success")
    assert repr(_answer(x=None)).startswith("<_Answer x=none ± 1.3")
    assert "values=array(shape=(10,))" in repr(_answer(values=np.zeros(10)))


def test_repr_without_headline_is_unchanged() -> None:
    assert repr(_demo()) == "<Result status=success elapsed=0.5s>"


def test_solver_reprs_show_their_answer() -> None:
    res = dmftsolve.alg_threshold("z**2")
    assert re.match(r"<AlgThreshold delta_alg=0\.5\S* ", repr(res))
    for cls, names in [("AlgThreshold", ("delta_alg", "error")), ("Threshold", ("delta_nn", "stderr")),
                       ("SweepResult", ("success_rate", "success_error"))]:
        module = {"AlgThreshold": "dmftsolve.thresholds.weak_recovery",
                  "Threshold": "dmftsolve.thresholds.hessian_threshold",
                  "SweepResult": "dmftsolve.simulation.sweeps"}[cls]
        klass = getattr(importlib.import_module(module), cls)
        assert set(names) <= set(klass._headline), cls
