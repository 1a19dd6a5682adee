from __future__ import annotations

import os
from pathlib import Path

import pytest

from epoch_gate.evidence.folders import output_folder, output_folder_problem, read_folder
from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.reasons import Code, Severity

FALLBACK = ".pants.d/epoch_gate/gate"


def test_missing_or_real_folders_are_safe(tmp_path: Path) -> None:
    assert output_folder(tmp_path, "dist/gate", FALLBACK) == ("dist/gate", [])
    (tmp_path / "dist" / "gate").mkdir(parents=True)
    assert output_folder(tmp_path, "dist/gate", FALLBACK) == ("dist/gate", [])


def test_a_committed_dist_file_closes_and_the_report_goes_to_the_fallback(tmp_path: Path) -> None:
    (tmp_path / "dist").write_text("a regular file named dist\n")
    out, reasons = output_folder(tmp_path, "dist/gate", FALLBACK)
    assert out == FALLBACK
    assert [(r.code, r.path, r.found) for r in reasons] == [(Code.OUTPUT_FOLDER_UNSAFE, "dist", "a file")]
    assert reasons[0].code.severity is Severity.CLOSED


@pytest.mark.parametrize("link, target", [("dist", "."), ("dist", "src"), ("dist/gate", "../src"), ("dist", "/tmp")])
def test_a_symlink_on_the_way_is_refused_not_followed(tmp_path: Path, link: str, target: str) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, tmp_path / link)
    out, reasons = output_folder(tmp_path, "dist/gate", FALLBACK)
    assert out == FALLBACK
    assert [(r.path, r.found) for r in reasons] == [(link, "a symlink")]


@pytest.mark.parametrize("folder", ["../out", "/abs/gate", "dist/../../x", ""])
def test_a_folder_outside_the_build_root_is_refused(tmp_path: Path, folder: str) -> None:
    problem = output_folder_problem(tmp_path, folder)
    assert problem is not None and problem.code is Code.OUTPUT_FOLDER_UNSAFE


def test_no_safe_folder_at_all_still_says_why(tmp_path: Path) -> None:
    (tmp_path / "dist").write_text("")
    (tmp_path / ".pants.d").write_text("")
    out, reasons = output_folder(tmp_path, "dist/gate", FALLBACK)
    assert out is None and [r.path for r in reasons] == ["dist"]


def test_an_evidence_name_that_is_not_utf8_is_read_by_its_escaped_name(tmp_path: Path) -> None:
    folder = tmp_path / "freezes"
    folder.mkdir()
    with open(os.fsencode(folder) + b"/\xff.json", "wb") as handle:
        handle.write(b"{}\n")
    (folder / "\\xff.json").write_bytes(b"[]\n")  # the same name once escaped: never silently one of the two
    files, reasons = read_folder(folder, "freezes", 1024)
    assert files == {"\\xff.json": b"[]\n"}
    assert [(r.code, r.path) for r in reasons] == [(Code.ARTIFACT_MALFORMED, "freezes/\\xff.json")]
    canonical_json([r.to_json() for r in reasons])
