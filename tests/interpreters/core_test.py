"""The core's own tests on CPython 3.11, 3.12 and 3.13: the runner runs on the product's interpreter, and
the import scanner reads sources as those interpreters do (Pants runs the same tests on 3.9).

Each interpreter gets a virtualenv of 3rdparty/python/core-tests.txt (hash-pinned wheels), made once per
requirements file and kept under `${XDG_CACHE_HOME:-~/.cache}/epoch_gate/core-tests/`. An interpreter
this machine lacks is skipped, except in CI, where a missing one fails: CI's run must say what it ran.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import pytest

REQUIREMENTS = Path("3rdparty/python/core-tests.txt")
CORE = Path("src/epoch_gate")
VERSIONS = ("3.11", "3.12", "3.13")


def interpreter(version: str) -> Optional[Path]:
    """pyenv's newest CPython `version`, or None."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    return Path(found[-1]) if found else None


def virtualenv(python: Path) -> Path:
    """A virtualenv of REQUIREMENTS for `python`, made once: built beside its place, then renamed there."""
    key = hashlib.sha256(REQUIREMENTS.read_bytes() + str(python.resolve()).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "epoch_gate" / "core-tests"
    place = cache / f"{python.name}-{key}"
    if (place / "ready").exists():
        return place
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{python.name}-", dir=cache))
    try:
        subprocess.run([str(python), "-m", "venv", str(building)], check=True, capture_output=True)
        pip = [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-input"]
        # No .pyc at install: the tests import a fraction of what is installed, compiled as it is imported
        pip += ["--disable-pip-version-check", "--no-compile", "--require-hashes", "--only-binary=:all:"]
        pip += ["-r", str(REQUIREMENTS)]
        installed = subprocess.run(pip, capture_output=True, text=True)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        (building / "ready").write_text("")
        try:
            building.rename(place)
        except OSError:  # another run made it first
            assert (place / "ready").exists()
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return place


@pytest.mark.parametrize("version", VERSIONS)
def test_the_core_passes_its_own_tests_on(version: str, tmp_path: Path) -> None:
    python = interpreter(version)
    if python is None:
        message = f"no CPython {version} under $PYENV_ROOT/versions (pyenv install {version})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    venv = virtualenv(python)
    shutil.copytree(CORE, tmp_path / "core")
    ran = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "epoch_gate"],
        cwd=tmp_path / "core",
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "PYTHONPATH": str(tmp_path / "core"),
        },
        capture_output=True,
        text=True,
    )
    summary = ran.stdout.strip().splitlines()[-1:] or [ran.stderr[-2000:]]
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]
    print(f"CPython {version}: {summary[0]}", file=sys.stderr)
