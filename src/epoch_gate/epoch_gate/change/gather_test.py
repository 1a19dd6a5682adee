from __future__ import annotations

from pathlib import Path

from epoch_gate.change.changed import ChangedPath
from epoch_gate.change.changed_test import git, repo  # noqa: F401 - the fixture
from epoch_gate.change.gather import Change, local_change, reviewed
from epoch_gate.reasons import Code

TRUSTED = ("refs/remotes/origin/main",)


def test_a_base_inside_the_change_still_gives_the_changed_set(repo: Path) -> None:  # noqa: F811
    """The base is not reviewed history: closed for that, and the report still shows what changed."""
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    (repo / "src.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "the change's own first commit")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "fixtures" / "gen.py").write_text("print(2)\n")
    change = local_change(repo, base, TRUSTED)
    assert change.base == base and change.candidate is None
    assert change.changed == (ChangedPath("fixtures/gen.py", "modified"),)
    assert [r.code for r in change.findings] == [Code.BASE_UNTRUSTED]
    assert local_change(repo, base, TRUSTED, check_base=False).findings == ()


def test_a_base_that_does_not_resolve_leaves_no_changed_set(repo: Path) -> None:  # noqa: F811
    change = local_change(repo, "no-such-revision", TRUSTED)
    assert (change.base, change.changed) == (None, None)
    assert [r.code for r in change.findings] == [Code.CHANGED_SET_UNAVAILABLE]
    assert reviewed(repo, change) == (None, [])  # closed already, for the reason git gave


def test_the_working_tree_is_read_where_no_candidate_is(repo: Path) -> None:  # noqa: F811
    change = Change("HEAD", (), None, ())
    assert change.reader(repo)("src.py") == b"x = 1\n" and change.reader(repo)("missing.py") is None
