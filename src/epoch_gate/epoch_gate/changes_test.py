from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from epoch_gate.changes import ChangedPath, ProtectedSet, changed_paths, protected_changes
from epoch_gate.reasons import Code, EvidenceError


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env,
                          text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "gen.py").write_text("print(1)\n")
    (tmp_path / "fixtures" / "base.json").write_text("{}\n")
    (tmp_path / "src.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("dist/\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def statuses(repo: Path, base: str = "HEAD") -> dict[str, str]:
    return {c.path: c.status for c in changed_paths(repo, base)[1]}


def test_clean_tree_has_no_changes(repo: Path) -> None:
    assert statuses(repo) == {}


def test_committed_staged_unstaged_untracked_are_all_changes(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "committed")
    (repo / "staged.py").write_text("")
    git(repo, "add", "staged.py")
    (repo / "fixtures" / "gen.py").write_text("print(2)\n")  # unstaged
    (repo / "new.py").write_text("")  # untracked
    (repo / "dist").mkdir()
    (repo / "dist" / "ignored").write_text("")
    assert statuses(repo, base) == {"src.py": "modified", "staged.py": "added", "fixtures/gen.py": "modified",
                                    "new.py": "untracked"}


def test_rename_shows_both_paths(repo: Path) -> None:
    git(repo, "mv", "fixtures/gen.py", "fixtures/gen2.py")
    assert statuses(repo) == {"fixtures/gen.py": "deleted", "fixtures/gen2.py": "added"}


def test_mode_change_and_symlink_swap_count(repo: Path) -> None:
    os.chmod(repo / "fixtures" / "gen.py", 0o755)
    (repo / "fixtures" / "base.json").unlink()
    os.symlink("gen.py", repo / "fixtures" / "base.json")
    assert statuses(repo) == {"fixtures/gen.py": "modified", "fixtures/base.json": "type-changed"}


@pytest.mark.parametrize("base", ["no-such-ref", "0" * 40, "--output=/tmp/x", ""])
def test_unresolvable_base_is_an_error_not_nothing_changed(repo: Path, base: str) -> None:
    with pytest.raises(EvidenceError) as caught:
        changed_paths(repo, base)
    assert caught.value.reason.code is Code.CHANGED_SET_UNAVAILABLE


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError) as caught:
        changed_paths(tmp_path, "HEAD")
    assert caught.value.reason.code is Code.CHANGED_SET_UNAVAILABLE


@pytest.mark.parametrize(
    "glob, path, hit",
    [
        ("observations/", "observations/a.json", True),
        ("observations/", "observations", False),
        ("pants-plugins/**", "pants-plugins/x/y.py", True),
        ("**/BUILD", "BUILD", True),
        ("**/BUILD", "a/b/BUILD", True),
        ("fixtures/*.py", "fixtures/a/b.py", False),
        ("fixtures/?.py", "fixtures/a.py", True),
        ("a.b", "aXb", False),
    ],
)
def test_protected_globs(glob: str, path: str, hit: bool) -> None:
    assert ProtectedSet(frozenset(), (glob,)).matches(path) is hit


def test_protected_changes_name_the_status() -> None:
    reasons = protected_changes((ChangedPath("fixtures/EPOCH", "deleted"), ChangedPath("src.py", "modified")),
                                ProtectedSet(frozenset({"fixtures/EPOCH"}), ()))
    assert [(r.code, r.path, r.found) for r in reasons] == [(Code.PROTECTED_PATH_CHANGED, "fixtures/EPOCH",
                                                             "deleted")]
