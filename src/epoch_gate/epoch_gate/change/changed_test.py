from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from epoch_gate.change.changed import ChangedPath, changed_paths, check_trusted, default_base
from epoch_gate.change.protection import ProtectedSet, protected_changes
from epoch_gate.reasons import Code, EvidenceError


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env, text=True).stdout


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
    assert statuses(repo, base) == {
        "src.py": "modified",
        "staged.py": "added",
        "fixtures/gen.py": "modified",
        "new.py": "untracked",
    }


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
        ("observations/", "observations", True),  # a symlink or file in the folder's place
        ("observations/", "observations2/a.json", False),
        ("freezes/", "freezes/a\nb.json", True),
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
    reasons = protected_changes(
        (ChangedPath("fixtures/EPOCH", "deleted"), ChangedPath("src.py", "modified")),
        ProtectedSet(frozenset({"fixtures/EPOCH"}), ()),
    )
    assert [(r.code, r.path, r.found) for r in reasons] == [(Code.PROTECTED_PATH_CHANGED, "fixtures/EPOCH", "deleted")]


def trust_code(repo: Path, base: str, refs: tuple[str, ...] = ("refs/remotes/origin/main",)) -> Code | None:
    try:
        check_trusted(repo, changed_paths(repo, base)[0], refs)
    except EvidenceError as error:
        return error.reason.code
    return None


def test_base_reachable_from_the_trusted_ref_is_trusted(repo: Path) -> None:
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    (repo / "src.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "change")
    assert trust_code(repo, "origin/main") is None
    assert trust_code(repo, "HEAD~1") is None


def test_base_inside_the_change_is_untrusted(repo: Path) -> None:
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    (repo / "fixtures" / "gen.py").write_text("print(2)\n")
    git(repo, "commit", "-qam", "the change edits the oracle")
    (repo / "src.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "then the product")
    # Against HEAD~1 the generator edit is invisible; the base is not reviewed history.
    assert statuses(repo, "HEAD~1") == {"src.py": "modified"}
    assert trust_code(repo, "HEAD~1") is Code.BASE_UNTRUSTED
    assert trust_code(repo, "HEAD") is Code.BASE_UNTRUSTED


def test_missing_trusted_ref_is_untrusted_and_an_empty_list_turns_the_check_off(repo: Path) -> None:
    assert trust_code(repo, "HEAD") is Code.BASE_UNTRUSTED
    assert trust_code(repo, "HEAD", ()) is None
    git(repo, "branch", "release")
    assert trust_code(repo, "HEAD", ("refs/remotes/origin/main", "refs/heads/release")) is None


def test_shallow_clone_that_cannot_prove_the_base_says_how_to_fetch(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "reviewed", first)
    for n in range(3):
        (repo / "src.py").write_text(f"x = {n + 2}\n")
        git(repo, "commit", "-qam", f"change {n}")
    clone = tmp_path_factory.mktemp("shallow") / "clone"
    subprocess.run(["git", "clone", "-q", "--depth=1", f"file://{repo}", str(clone)], check=True)
    git(clone, "fetch", "-q", "--depth=1", "origin", "tag", "reviewed")
    try:
        changed_paths(clone, "reviewed")
    except EvidenceError as error:
        assert error.reason.code is Code.BASE_UNPROVABLE
        assert "git fetch --unshallow" in error.reason.message and "fetch-depth: 0" in error.reason.message
    else:
        raise AssertionError("a shallow clone proved a merge base it does not hold")
    # With the whole history fetched, the same base is proven reviewed.
    git(clone, "fetch", "-q", "--unshallow", "origin")
    assert trust_code(clone, "reviewed") is None


def test_a_tag_shadowing_the_trusted_ref_is_refused(repo: Path) -> None:
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    (repo / "fixtures" / "gen.py").write_text("print(2)\n")
    git(repo, "commit", "-qam", "the change edits the oracle")
    git(repo, "tag", "origin/main")  # pushed by the change: `origin/main` now names its own commit too
    (repo / "src.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "then the product")
    with pytest.raises(EvidenceError) as caught:
        changed_paths(repo, "origin/main")
    assert caught.value.reason.code is Code.CHANGED_SET_UNAVAILABLE and "ambiguous" in caught.value.reason.message
    # Against the full name the oracle edit is in the changed set, and the base is trusted.
    assert "fixtures/gen.py" in statuses(repo, "refs/remotes/origin/main")
    assert trust_code(repo, "refs/remotes/origin/main") is None


def test_trusted_refs_must_be_full_names(repo: Path) -> None:
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    assert trust_code(repo, "HEAD", ("origin/main",)) is Code.BASE_UNTRUSTED


def test_without_a_base_a_branch_is_judged_from_where_it_left_the_first_trusted_ref(repo: Path) -> None:
    reviewed = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-qb", "feature")
    (repo / "src.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "one local commit")
    git(repo, "checkout", "-q", "main")  # and main moves on without the branch
    (repo / "other.py").write_text("")
    git(repo, "add", "other.py")
    git(repo, "commit", "-qm", "elsewhere on main")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", "feature")
    refs = ("refs/remotes/upstream/main", "refs/remotes/origin/main")  # the first one present is used
    base = default_base(repo, refs)
    assert base == reviewed  # the merge base, not origin/main's tip (which would show other.py deleted)
    assert statuses(repo, base) == {"src.py": "modified"}
    check_trusted(repo, base, refs)


@pytest.mark.parametrize("refs", [("refs/remotes/origin/main",), ()])
def test_without_a_base_or_a_trusted_ref_present_it_says_to_fetch_or_pass_one(
    repo: Path, refs: tuple[str, ...]
) -> None:
    with pytest.raises(EvidenceError) as caught:
        default_base(repo, refs)
    reason = caught.value.reason
    assert reason.code is Code.BASE_UNTRUSTED and reason.found == "none present"
    assert "git fetch origin main" in reason.message and "--base=" in reason.message
    assert reason.expected.startswith("one of ")


def test_without_a_base_a_short_trusted_ref_is_refused(repo: Path) -> None:
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    with pytest.raises(EvidenceError) as caught:
        default_base(repo, ("origin/main",))
    assert caught.value.reason.code is Code.BASE_UNTRUSTED and "full ref names" in caught.value.reason.message


def test_a_name_that_is_not_utf8_is_judged_and_reported_escaped(repo: Path) -> None:
    import datetime

    from epoch_gate.verdict import report
    from epoch_gate.verdict.attestation import statement_bytes
    from epoch_gate.verdict.suite import Identities
    from epoch_gate.testutil import Evidence, one_suite
    from epoch_gate.change.tree import repository_url, reviewed_tree
    from epoch_gate.change.tree_test import written_tree

    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "freezes").mkdir()
    with open(os.fsencode(repo) + b"/freezes/\xff.json", "wb") as handle:
        handle.write(b"{}\n")
    git(repo, "add", "freezes")
    git(repo, "commit", "-qm", "a committed name that is not UTF-8")
    with open(os.fsencode(repo) + b"/src-\xfe.py", "wb") as handle:  # and an untracked one
        handle.write(b"x = 3\n")

    commit, changed = changed_paths(repo, base)
    assert {c.path: c.status for c in changed} == {"freezes/\\xff.json": "added", "src-\\xfe.py": "untracked"}
    protected = ProtectedSet(frozenset(), ("freezes/",))
    assert [r.path for r in protected_changes(changed, protected)] == ["freezes/\\xff.json"]

    ids = Identities("e1", "a" * 64, "b" * 64)
    result = one_suite(Evidence(ids, changed, protected, None, (), (), datetime.date(2026, 12, 2)), commit)
    files = report.output_files(result, {})
    tree = reviewed_tree(repo)  # hashed from the real bytes, as git records them
    assert tree.tree_id == written_tree(repo)
    statement_bytes(
        result,
        tree,
        files["report.json"],
        time=datetime.datetime.now(datetime.timezone.utc),
        repository=repository_url(repo),
        oracle_commit=commit,
    )
    assert b'"freezes/\\\\xff.json"' in files["report.json"] and "freezes/\\xff.json" in files["report.md"].decode()
    assert any(
        "protected-path-changed" in line and "freezes/\\xff.json" in line for line in report.console_lines(result)
    )


@pytest.mark.parametrize(
    "glob, path",
    [
        ("freezes/", "freezes/a\n::stop-commands::x/y.json"),
        ("freezes/**", "freezes/\n/y.json"),
        ("**/y.json", "a\nb/y.json"),
        ("freezes/*", "freezes/a\n.json"),
        ("freezes/?.json", "freezes/\n.json"),
    ],
)
def test_a_newline_in_a_path_keeps_it_inside_a_protected_glob(glob: str, path: str) -> None:
    assert ProtectedSet(frozenset(), (glob,)).matches(path)
