from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from epoch_gate.runner.requirements import unpacked


def test_a_zipped_wheel_is_unpacked_and_importable(tmp_path: Path) -> None:
    wheel = tmp_path / "deps" / "shiny-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("shiny/__init__.py", "VALUE = 42\n")
        archive.writestr("../escape.py", "")  # zipfile drops `..`: nothing lands outside the target
    folder = tmp_path / "plain"
    folder.mkdir()
    entries = unpacked([str(wheel), str(folder)], tmp_path / "unpacked")
    assert entries == [str(tmp_path / "unpacked" / wheel.name), str(folder)]
    assert not (tmp_path / "unpacked" / "escape.py").exists()
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            "import sys; sys.path.extend(sys.argv[1:]); " "import shiny; print(shiny.VALUE)",
            *entries,
        ],
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "42", done.stderr
