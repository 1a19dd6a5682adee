from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from epoch_gate.cli.launcher import IGNORED, install, launcher_files
from epoch_gate.cli.main import main

FILES = {
    "pants": b"#!/usr/bin/env bash\necho launcher\n",
    "3rdparty/bootstrap/pants-pins.txt": b"pantsbuild.pants==2.17.1 --hash=sha256:00\n",
    "3rdparty/bootstrap/pants.toml": b"[pex-cli]\nversion = 'v2.1.137'\n",
}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "wheel" / "launcher"
    for rel, data in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    (folder / "__init__.py").write_text("")
    return folder


def test_the_launcher_and_its_ignore_lines_are_written_once(source: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_text("/dist/\n__pycache__/")  # a last line without its newline
    assert sorted(map(str, launcher_files(source))) == sorted(FILES)
    done, refused = install(root, source)
    assert refused == [] and done == [
        "wrote    3rdparty/bootstrap/pants-pins.txt",
        "wrote    3rdparty/bootstrap/pants.toml",
        "wrote    pants",
        "ignored  /.pants.bootstrap/, /.pants.d/, /.pids/ (.gitignore)",
    ]
    assert {rel: (root / rel).read_bytes() for rel in FILES} == FILES
    assert (
        os.stat(root / "pants").st_mode & stat.S_IXUSR
        and not os.stat(root / "3rdparty/bootstrap/pants.toml").st_mode & stat.S_IXUSR
    )
    assert (root / ".gitignore").read_text() == "/dist/\n__pycache__/\n/.pants.bootstrap/\n/.pants.d/\n/.pids/\n"
    again, refused = install(root, source)
    assert refused == [] and again == [f"kept     {rel} (the same bytes)" for rel in sorted(FILES)]
    assert (root / ".gitignore").read_text().count("/.pids/") == 1 and set(IGNORED) <= set(
        (root / ".gitignore").read_text().splitlines()
    )


def test_other_bytes_are_refused_whole_unless_replaced(source: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "3rdparty/bootstrap").mkdir(parents=True)
    (root / "pants").write_text("#!/bin/sh\necho scie\n")
    (root / "3rdparty/bootstrap/pants.toml").symlink_to("/etc/hostname")
    done, refused = install(root, source)
    assert done == [] and refused == [
        "3rdparty/bootstrap/pants.toml: expected a regular file or nothing; found a symlink at "
        "3rdparty/bootstrap/pants.toml",
        "pants: expected the launcher's bytes or nothing; found other bytes (--replace to overwrite)",
    ]
    assert not (root / "3rdparty/bootstrap/pants-pins.txt").exists() and not (root / ".gitignore").exists()
    (root / "3rdparty/bootstrap/pants.toml").unlink()
    done, refused = install(root, source, replace=True)
    assert refused == [] and (root / "pants").read_bytes() == FILES["pants"]


def test_a_wheel_without_the_launcher_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "launcher"
    empty.mkdir()
    assert install(tmp_path, empty) == (
        [],
        ["this wheel holds no launcher (launcher_files/ of epoch_gate.cli is empty): build it with `pants package`"],
    )


def test_the_command_refuses_in_words_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("epoch_gate.cli.launcher.packaged", lambda: tmp_path / "nothing-here")
    (tmp_path / "nothing-here").mkdir()
    assert main(["launcher", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith("refused: this wheel holds no launcher")


def test_nothing_is_written_through_a_symlinked_folder_or_over_an_unreadable_ignore_file(
    source: Path, tmp_path: Path
) -> None:
    outside, root = tmp_path / "outside", tmp_path / "repo"
    outside.mkdir()
    root.mkdir()
    (root / "3rdparty").symlink_to(outside)
    done, refused = install(root, source)
    assert done == [] and refused == [
        "3rdparty/bootstrap/pants-pins.txt: expected a regular file or nothing; found a symlink at 3rdparty",
        "3rdparty/bootstrap/pants.toml: expected a regular file or nothing; found a symlink at 3rdparty",
    ]
    assert list(outside.iterdir()) == [] and not (root / "pants").exists()
    (root / "3rdparty").unlink()
    (root / "3rdparty").write_text("a file where a folder goes")
    assert install(root, source)[1] == [
        "3rdparty/bootstrap/pants-pins.txt: expected a folder or nothing at 3rdparty; found a file",
        "3rdparty/bootstrap/pants.toml: expected a folder or nothing at 3rdparty; found a file",
    ]
    (root / "3rdparty").unlink()
    (root / ".gitignore").mkdir()
    assert install(root, source) == ([], [".gitignore: expected a regular file or nothing; found a folder"])
    assert not (root / "pants").exists()


def test_the_ignore_file_keeps_its_line_endings_and_a_launcher_gets_its_mode_back(source: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_bytes(b"/dist/\r\n\xff-not-utf8\r\n")
    assert install(root, source)[1] == []
    assert (
        root / ".gitignore"
    ).read_bytes() == b"/dist/\r\n\xff-not-utf8\r\n/.pants.bootstrap/\r\n/.pants.d/\r\n/.pids/\r\n"
    os.chmod(root / "pants", 0o700)  # the same bytes, but not runnable by all: written again
    done, refused = install(root, source)
    assert refused == [] and "wrote    pants" in done and stat.S_IMODE(os.stat(root / "pants").st_mode) == 0o755
