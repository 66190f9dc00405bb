"""Build hook (the rest of the metadata is in pyproject.toml): stamp the built package with the
git commit it was built from, so results computed by an installed copy (``pip install .``)
carry it in their metadata (``dmftsolve.results.git_commit``). Outside a git checkout of this
project (an sdist, no git) nothing is stamped and results record ``commit: null``."""

import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _head() -> str | None:
    """``HEAD`` of the checkout this file is the top of, else ``None`` (never raises). The same
    check as ``dmftsolve.results.git_commit``, repeated because the build cannot import the
    package (numpy is not in the isolated build environment)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=HERE,
                             capture_output=True, text=True, timeout=10, check=False)
        top, commit = out.stdout.split()[:2]
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or Path(top).resolve() != HERE:
        return None
    return commit if len(commit) == 40 and all(c in "0123456789abcdef" for c in commit) else None


class BuildPyWithCommit(build_py):
    """``build_py`` that also writes ``dmftsolve/_commit.txt`` (the commit id) into the build."""

    def run(self) -> None:
        super().run()
        commit = _head()
        if commit is not None:
            target = Path(self.build_lib) / "dmftsolve" / "_commit.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(commit + "\n")


setup(cmdclass={"build_py": BuildPyWithCommit})
