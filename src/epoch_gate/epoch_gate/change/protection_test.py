from __future__ import annotations

import json
import os
from pathlib import Path

from epoch_gate.change.protection import (
    ProtectedSet,
    folders_up,
    inside,
    irregular_paths,
    oracle_package,
    pinned_at_base,
    shaping_files,
    strip_root,
)
from epoch_gate.reasons import Code


def test_folders_up_reach_the_build_root() -> None:
    assert folders_up("a/b") == ["a/b", "a", ""]
    assert folders_up("") == [""]


def test_shaping_files_cover_ancestor_build_files_and_git_files_below() -> None:
    protected = ProtectedSet(frozenset(), tuple(shaping_files(["checks/sub"], ["BUILD", "BUILD.*"])))
    for path in (
        "BUILD",
        "BUILD.pants",
        "checks/BUILD",
        "checks/sub/BUILD",
        ".gitignore",
        "checks/.gitattributes",
        "checks/sub/deeper/.gitignore",
    ):
        assert protected.matches(path), path
    for path in ("src/BUILD", "checks/other/BUILD", "checks/x.py"):
        assert not protected.matches(path), path


def test_oracle_package_is_the_top_level_package_under_its_root() -> None:
    assert oracle_package("checks/orders_properties.py", ".") == "checks/"
    assert oracle_package("src/qa/checks/deep/p.py", "src/qa") == "src/qa/checks/"
    assert oracle_package("orders_properties.py", ".") == "orders_properties.py"
    assert strip_root("src/orders/checks/p.py", [".", "src/orders"]) == ("src/orders", "checks/p.py")


def test_inside_the_build_root(tmp_path: Path) -> None:
    root = str(tmp_path)
    assert inside(root, f"{root}/pants-plugins") == "pants-plugins"
    assert inside(root, ".pants.rc") == ".pants.rc"
    assert inside(root, root) == ""
    assert inside(root, "/etc/pantsrc") is None
    assert inside(root, f"{root}/../x") is None


def test_symlinked_oracle_files_and_evidence_are_not_regular(tmp_path: Path) -> None:
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "notes" / "f.json").write_text("{}")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "catalog.yaml").write_text("properties: []\n")
    assert irregular_paths(tmp_path, ["checks/catalog.yaml"], ["freezes", "observations"]) == []
    os.symlink("docs/notes", tmp_path / "freezes")
    (tmp_path / "observations").mkdir()
    os.symlink("../docs/notes/f.json", tmp_path / "observations" / "x.json")
    os.symlink("../docs/notes/f.json", tmp_path / "checks" / "manifest.json")
    reasons = irregular_paths(tmp_path, ["checks/catalog.yaml", "checks/manifest.json"], ["freezes/", "observations"])
    assert {(r.code, r.path) for r in reasons} == {
        (Code.PATH_NOT_REGULAR, "freezes"),
        (Code.PATH_NOT_REGULAR, "observations/x.json"),
        (Code.PATH_NOT_REGULAR, "checks/manifest.json"),
    }


def test_a_symlinked_folder_above_an_oracle_file_is_not_regular(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "EPOCH").write_text("{}")
    os.symlink("real", tmp_path / "fixtures")
    (reason,) = irregular_paths(tmp_path, ["fixtures/EPOCH"], [])
    assert reason.code is Code.PATH_NOT_REGULAR and reason.found == "symlink at fixtures"


def test_the_base_pin_keeps_its_generator_and_inputs_protected() -> None:
    pin = {
        "schema": 1,
        "epoch_id": "e1",
        "generator": "fixtures/gen.py",
        "generator_sha256": "a" * 64,
        "inputs": [{"path": "fixtures/in.json", "sha256": "b" * 64}],
    }
    assert pinned_at_base(json.dumps(pin).encode(), "fixtures/EPOCH") == {"fixtures/gen.py", "fixtures/in.json"}
    assert pinned_at_base(None, "fixtures/EPOCH") == set()
    assert pinned_at_base(b"not json", "fixtures/EPOCH") == set()


def test_a_symlink_inside_a_protected_folder_is_not_regular(tmp_path: Path) -> None:
    (tmp_path / "checks").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "rig.py").write_text("")
    os.symlink("../src/rig.py", tmp_path / "checks" / "__init__.py")
    assert irregular_paths(tmp_path, [], [], ["src/"]) == []
    (reason,) = irregular_paths(tmp_path, [], [], ["checks/", "missing/"])
    assert (reason.code, reason.path) == (Code.PATH_NOT_REGULAR, "checks/__init__.py")
