from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from epoch_gate.change.tree import plain_url, repository_url, reviewed_tree


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_repo(root: Path) -> None:
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "a").mkdir()
    (root / "a" / "b.txt").write_text("b\n")
    (root / "a.txt").write_text("a\n")  # sorts before the tree "a" as git orders it ("a.txt" < "a/")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / ".gitignore").write_text("ignored/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")


def written_tree(root: Path) -> str:
    """What git itself records for the working tree (through a throwaway index, so nothing moves)."""
    env = {**os.environ, "GIT_INDEX_FILE": str(root / ".git" / "scratch-index")}
    subprocess.run(["git", "-C", str(root), "read-tree", "HEAD"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    return subprocess.run(
        ["git", "-C", str(root), "write-tree"], check=True, env=env, capture_output=True, text=True
    ).stdout.strip()


def test_a_clean_tree_is_heads_tree_and_names_the_commit(tmp_path: Path) -> None:
    make_repo(tmp_path)
    tree = reviewed_tree(tmp_path)
    assert tree.clean
    assert tree.tree_id == git(tmp_path, "rev-parse", "HEAD^{tree}")
    assert tree.digest() == {"gitCommit": git(tmp_path, "rev-parse", "HEAD"), "gitTree": tree.tree_id}


def test_every_kind_of_local_edit_is_in_the_tree_as_git_add_would_record_it(tmp_path: Path) -> None:
    make_repo(tmp_path)
    (tmp_path / "a" / "b.txt").write_text("edited, unstaged\n")
    (tmp_path / "a.txt").unlink()
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "new" / "deep").mkdir(parents=True)
    (tmp_path / "new" / "deep" / "c.txt").write_text("untracked\n")
    (tmp_path / "link").symlink_to("a/b.txt")
    (tmp_path / "staged.txt").write_text("staged\n")
    git(tmp_path, "add", "staged.txt")
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "x").write_text("not reviewed\n")
    tree = reviewed_tree(tmp_path)
    assert not tree.clean
    assert tree.tree_id == written_tree(tmp_path)
    assert "gitCommit" not in tree.digest()
    assert git(tmp_path, "status", "--porcelain", "--", "staged.txt") == "A  staged.txt"  # the index is untouched


def test_git_filters_a_folder_over_a_deleted_file_and_a_nested_repository_match_git(tmp_path: Path) -> None:
    make_repo(tmp_path)
    (tmp_path / ".gitattributes").write_text("* text=auto\n")
    (tmp_path / "windows.txt").write_bytes(b"one\r\ntwo\r\n")  # stored as LF by git's eol filter
    (tmp_path / "a" / "b.txt").unlink()
    (tmp_path / "a").rmdir()
    (tmp_path / "a").write_text("a file where a folder was\n")  # lstat("a/b.txt") is ENOTDIR
    nested = tmp_path / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    git(nested, "config", "user.email", "t@example.com")
    git(nested, "config", "user.name", "t")
    (nested / "x").write_text("x\n")
    git(nested, "add", "-A")
    git(nested, "commit", "-qm", "nested")
    assert reviewed_tree(tmp_path).tree_id == written_tree(tmp_path)


def test_without_core_filemode_the_index_mode_stands(tmp_path: Path) -> None:
    make_repo(tmp_path)
    git(tmp_path, "config", "core.fileMode", "false")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho changed\n")
    assert reviewed_tree(tmp_path).tree_id == written_tree(tmp_path)


@pytest.mark.parametrize(
    "remote, url",
    [
        ("https://github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("https://x-access-token:SECRET@github.com/org/repo.git", "https://github.com/org/repo.git"),
        ("https://gitlab-ci-token:SECRET@gitlab.example:8443/g/r.git?q=1#f", "https://gitlab.example:8443/g/r.git"),
        ("git@github.com:org/repo.git", "ssh://git@github.com/org/repo.git"),
        ("ssh://git@host:2222/r.git", "ssh://git@host:2222/r.git"),
        ("ssh://u:SECRET@host/r.git", "ssh://host/r.git"),
        ("/srv/repo.git", "file:///srv/repo.git"),
    ],
)
def test_a_remote_becomes_a_url_without_credentials(remote: str, url: str, tmp_path: Path) -> None:
    assert plain_url(remote, tmp_path) == url


def test_the_repository_is_origin_or_else_the_checkout(tmp_path: Path) -> None:
    make_repo(tmp_path)
    assert repository_url(tmp_path) == tmp_path.resolve().as_uri()
    git(tmp_path, "remote", "add", "origin", "https://ci:SECRET@example.com/org/repo.git")
    assert repository_url(tmp_path) == "https://example.com/org/repo.git"
