from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from epoch_gate.change.candidate import open_candidate, read_blobs
from epoch_gate.change.changed_test import git
from epoch_gate.reasons import Code, EvidenceError

TRUSTED = ("refs/remotes/origin/main",)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "p.py").write_text("x = 1\n")
    (tmp_path / "app.py").write_text("a = 1\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    git(tmp_path, "update-ref", "refs/remotes/origin/main", "HEAD")
    return tmp_path


def branch(repo: Path, name: str, files: dict[str, str]) -> str:
    """A candidate commit on its own branch; the judge's checkout stays on main."""
    git(repo, "checkout", "-q", "-b", name)
    for path, text in files.items():
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", name)
    commit = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    return commit


def test_changed_set_and_files_come_from_git(repo: Path) -> None:
    commit = branch(repo, "feature", {"app.py": "a = 2\n", "new.py": ""})
    candidate = open_candidate(repo, commit, TRUSTED)
    assert {c.path: c.status for c in candidate.changed} == {"app.py": "modified", "new.py": "added"}
    assert candidate.tree == git(repo, "rev-parse", f"{commit}^{{tree}}").strip()
    assert candidate.reviewed_tree().digest() == {"gitCommit": commit, "gitTree": candidate.tree}
    mode, oid = candidate.entries["app.py"]
    assert mode == "100644" and read_blobs(repo, [oid]) == {oid: b"a = 2\n"}
    assert (repo / "app.py").read_text() == "a = 1\n"  # never checked out


def test_an_older_candidate_is_judged_as_it_would_land(repo: Path) -> None:
    commit = branch(repo, "old", {"app.py": "a = 3\n"})
    (repo / "checks" / "p.py").write_text("x = 2\n")  # main moves on: the oracle changes after the branch
    git(repo, "commit", "-qam", "oracle")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    candidate = open_candidate(repo, commit, TRUSTED)
    assert [c.path for c in candidate.changed] == ["app.py"]
    # The files judged are the merge: today's oracle with the candidate's change, not the old tree.
    merged = read_blobs(repo, [candidate.entries["checks/p.py"][1], candidate.entries["app.py"][1]])
    assert sorted(merged.values()) == [b"a = 3\n", b"x = 2\n"]
    assert not candidate.lands_as_is and candidate.reviewed_tree().digest() == {"gitTree": candidate.tree}


def test_a_candidate_that_reverts_the_oracle_in_a_merge_shows_the_revert(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "evil")
    (repo / "app.py").write_text("a = 4\n")
    git(repo, "commit", "-qam", "work")
    git(repo, "checkout", "-q", "main")
    (repo / "checks" / "p.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "oracle")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", "evil")
    git(repo, "merge", "-q", "--no-commit", "main")
    (repo / "checks" / "p.py").write_text("x = 1\n")  # an "evil merge": keeps the old oracle
    git(repo, "commit", "-qam", "merge main")
    commit = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    assert {c.path for c in open_candidate(repo, commit, TRUSTED).changed} == {"app.py", "checks/p.py"}


def test_a_candidate_that_does_not_merge_is_refused(repo: Path) -> None:
    commit = branch(repo, "conflict", {"app.py": "a = 5\n"})
    (repo / "app.py").write_text("a = 6\n")
    git(repo, "commit", "-qam", "main edits app")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    with pytest.raises(EvidenceError) as error:
        open_candidate(repo, commit, TRUSTED)
    assert error.value.reason.code is Code.CHANGED_SET_UNAVAILABLE and error.value.reason.found == "conflicts"


def test_the_judge_must_be_a_clean_trusted_checkout(repo: Path) -> None:
    commit = branch(repo, "feature", {"app.py": "a = 2\n"})
    (repo / "app.py").write_text("patched judge\n")
    with pytest.raises(EvidenceError) as dirty:
        open_candidate(repo, commit, TRUSTED)
    assert dirty.value.reason.code is Code.BASE_UNTRUSTED
    git(repo, "checkout", "-q", "app.py")
    git(repo, "checkout", "-q", "feature")  # judging from the candidate's own checkout
    with pytest.raises(EvidenceError) as untrusted:
        open_candidate(repo, commit, TRUSTED)
    assert untrusted.value.reason.code is Code.BASE_UNTRUSTED


@pytest.mark.parametrize("revision", ["", "--output=x", "no-such-branch"])
def test_a_candidate_that_is_not_a_commit_is_refused(repo: Path, revision: str) -> None:
    with pytest.raises(EvidenceError) as error:
        open_candidate(repo, revision, TRUSTED)
    assert error.value.reason.code is Code.CHANGED_SET_UNAVAILABLE


def test_blobs_are_read_in_one_batch(repo: Path) -> None:
    blobs = open_candidate(repo, "HEAD", TRUSTED).entries
    oids = [oid for _, oid in blobs.values()]
    assert sorted(read_blobs(repo, oids).values()) == [b"a = 1\n", b"x = 1\n"]
    assert read_blobs(repo, []) == {}


def test_a_blob_git_cannot_read_is_a_reason(repo: Path) -> None:
    with pytest.raises(EvidenceError) as error:
        read_blobs(repo, ["0" * 40])
    assert error.value.reason.code is Code.CHANGED_SET_UNAVAILABLE and "missing" in error.value.reason.found


def test_files_at_reads_many_files_as_read_at_does(tmp_path: Path) -> None:
    from epoch_gate.change.candidate import files_at
    from epoch_gate.change.git import read_at
    from epoch_gate.change.tree_test import make_repo

    make_repo(tmp_path)
    paths = ["a/b.txt", "a.txt", "a", "missing", "run.sh"]
    assert files_at(tmp_path, "HEAD", paths) == {p: read_at(tmp_path, "HEAD", p) for p in paths}
    assert files_at(tmp_path, "HEAD", []) == {}


def fed(repo: Path, stdin: str, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, check=True, capture_output=True, text=True
    ).stdout.strip()


def mktree(repo: Path, entries: list[tuple[str, ...]]) -> str:
    """A tree as `git mktree` takes it, whatever the names: (mode, type, object id, name)."""
    return fed(repo, "".join(f"{mode} {kind} {oid}\t{name}\0" for mode, kind, oid, name in entries), "mktree", "-z")


def planted(repo: Path, name: str, inner: str = "x.py") -> str:
    """A commit on main's history whose tree adds a folder `name` holding one file `inner`."""
    blob = fed(repo, "x = 1\n", "hash-object", "-w", "--stdin")
    folder = mktree(repo, [("100644", "blob", blob, inner)])
    top = [tuple(line.split(None, 3)) for line in git(repo, "ls-tree", "HEAD").splitlines()]
    tree = mktree(repo, [(m, k, o, n) for m, k, o, n in top] + [("040000", "tree", folder, name)])
    return git(repo, "commit-tree", tree, "-p", "HEAD", "-m", "planted").strip()


@pytest.mark.parametrize(
    "name, inner, found",
    [
        ("..", "x.py", "a name '..'"),
        (".", "x.py", "a name '.'"),
        (".git", "hooks.py", "git's own folder name"),
        (".GIT", "hooks.py", "git's own folder name"),
        ("pkg", "m" * 300 + ".py", "a name of 303 bytes"),
        ("pkg", "é" * 128 + ".py", "a name of 259 bytes"),  # 131 characters, 259 bytes in UTF-8
    ],
)
def test_a_tree_entry_no_file_system_holds_refuses_the_candidate(repo: Path, name: str, inner: str, found: str) -> None:
    commit = planted(repo, name, inner)
    with pytest.raises(EvidenceError) as refused:
        open_candidate(repo, commit, TRUSTED)
    reason = refused.value.reason
    assert (reason.code, reason.path, reason.found) == (Code.PATH_NOT_REGULAR, f"{name}/{inner}", found)


def test_a_path_longer_than_a_file_system_holds_refuses_the_candidate(repo: Path) -> None:
    deep = "/".join(["d" * 200] * 21)  # every name fits; the path, 4,230 bytes, does not
    blob = fed(repo, "x = 1\n", "hash-object", "-w", "--stdin")
    tree = mktree(repo, [("100644", "blob", blob, "x.py")])
    for name in reversed(deep.split("/")):
        tree = mktree(repo, [("040000", "tree", tree, name)])
    top = [tuple(line.split(None, 3)) for line in git(repo, "ls-tree", "HEAD").splitlines()]
    commit = git(
        repo, "commit-tree", mktree(repo, [*top, ("040000", "tree", tree, "deep")]), "-p", "HEAD", "-m", "deep"
    ).strip()
    with pytest.raises(EvidenceError) as refused:
        open_candidate(repo, commit, TRUSTED)
    assert (refused.value.reason.code, refused.value.reason.found) == (Code.PATH_NOT_REGULAR, "a path of 4230 bytes")
