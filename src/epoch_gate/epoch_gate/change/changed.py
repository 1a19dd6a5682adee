"""The changed set: every path that differs from the base, which must be reviewed history (a trusted ref's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from epoch_gate.change.git import commit_of, git_text, is_shallow, run_git
from epoch_gate.reasons import Code, fail
from epoch_gate.text import from_os

# git's one-letter statuses; renames are split into a deletion and an addition (--no-renames), so the
# old path of a moved file is seen too.
STATUS_NAMES = {"A": "added", "D": "deleted", "M": "modified", "T": "type-changed", "U": "unmerged", "?": "untracked"}


@dataclass(frozen=True)
class ChangedPath:
    path: str
    status: str


DEFAULT_TRUSTED_REFS = ("refs/remotes/origin/main",)
UNSHALLOW_HINT = (
    "fetch the full history: `git fetch --unshallow origin` (GitHub Actions: " "actions/checkout with `fetch-depth: 0`)"
)


def resolve_base(root: Path, base: str) -> str:
    """The merge base of `base` and HEAD, as Pants' --changed-since uses it; unresolvable is an error."""
    if not base or base.startswith("-"):
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            "no usable base revision",
            expected="a git revision",
            found=base or "empty",
        )
    commit = commit_of(root, base)
    if commit is None:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            f"base {base!r} does not resolve to a commit (a typo, or a shallow clone: fetch it, "
            "e.g. `git fetch --unshallow origin`)",
            expected="a commit",
            found=base,
        )
    head = git_text(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").strip()
    done = run_git(root, "merge-base", commit, head)
    merge_base = done.stdout.decode().strip()
    if done.returncode != 0 or not merge_base:
        if is_shallow(root):
            raise fail(
                Code.BASE_UNPROVABLE,
                ".",
                f"this shallow clone does not hold the history joining " f"base {base} to HEAD: {UNSHALLOW_HINT}",
                expected="a merge base",
                found="shallow history",
            )
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            f"base {base} shares no history with HEAD",
            expected="a merge base",
            found="none",
        )
    return merge_base


def _present_refs(root: Path, trusted_refs: Sequence[str]) -> list[str]:
    """The trusted refs this clone holds; a short name is refused, not looked up."""
    short = [ref for ref in trusted_refs if not ref.startswith("refs/")]
    if short:  # a short name resolves through refs/tags/ before refs/remotes/: a pushed tag would win
        raise fail(
            Code.BASE_UNTRUSTED,
            "pants.toml",
            "trusted refs must be full ref names " f"(refs/remotes/origin/main, not origin/main): {', '.join(short)}",
            expected="refs/...",
            found=", ".join(short),
        )
    return [ref for ref in trusted_refs if commit_of(root, ref) is not None]


def default_base(root: Path, trusted_refs: Sequence[str]) -> str:
    """The base when none is given: the merge base of HEAD with the first trusted ref this clone holds.

    A developer on a branch is then judged against the reviewed history the branch started from, as CI
    judges the pull request, rather than against HEAD, which is not reviewed history.
    """
    present = _present_refs(root, trusted_refs)
    if not present:
        fetch = UNSHALLOW_HINT if is_shallow(root) else "fetch it (`git fetch origin main`)"
        raise fail(
            Code.BASE_UNTRUSTED,
            ".",
            "no base was given and no trusted ref exists in this clone to take "
            f"one from: {fetch}, or pass a base (`--base=<revision>` or `--changed-since=<revision>`)",
            expected=f"one of {', '.join(trusted_refs) or 'the refs of [gate].trusted_refs'}",
            found="none present",
        )
    return resolve_base(root, present[0])


def check_trusted(root: Path, merge_base: str, trusted_refs: Sequence[str]) -> None:
    """The base the changed set is taken against must be history that was already reviewed.

    A base inside the change under review (say `HEAD~1` of the pull request) would let the change's own
    earlier commits rewrite the oracle unseen; so the merge base must be reachable from a trusted ref.
    No trusted refs configured means the check is off (an explicit, protected choice in pants.toml).
    """
    if not trusted_refs:
        return
    present = _present_refs(root, trusted_refs)
    if not present:
        hint = UNSHALLOW_HINT if is_shallow(root) else "fetch it, e.g. `git fetch origin main`"
        raise fail(
            Code.BASE_UNTRUSTED,
            ".",
            f"no trusted ref exists in this clone to vouch for the base: {hint}; "
            "or name the refs in [gate].trusted_refs",
            expected=f"one of {', '.join(trusted_refs)}",
            found="none present",
        )
    for ref in present:
        if run_git(root, "merge-base", "--is-ancestor", merge_base, ref).returncode == 0:
            return
    if is_shallow(root):
        raise fail(
            Code.BASE_UNPROVABLE,
            ".",
            f"this shallow clone cannot show that base {merge_base[:12]} "
            f"is reviewed history of {', '.join(present)}: {UNSHALLOW_HINT}",
            expected=f"an ancestor of {', '.join(present)}",
            found=f"{merge_base} (shallow history)",
        )
    raise fail(
        Code.BASE_UNTRUSTED,
        ".",
        f"the base {merge_base[:12]} is not reviewed history: it is not "
        f"reachable from {', '.join(present)}, so commits of the change itself could hide oracle edits; "
        f"judge against reviewed history: `pants --changed-since={present[0]} gate`",
        expected=f"an ancestor of {', '.join(present)}",
        found=merge_base,
    )


def changed_paths(root: Path, base: str) -> tuple[str, tuple[ChangedPath, ...]]:
    """(merge-base commit, every path differing from it: committed, staged, unstaged, untracked)."""
    commit = resolve_base(root, base)
    diff = git_text(
        root, "-c", "core.quotepath=off", "diff", "--no-renames", "--no-ext-diff", "--name-status", "-z", commit, "--"
    )
    fields = diff.split("\0")
    changed: dict[str, str] = {}
    for status, path in zip(fields[0::2], fields[1::2]):
        if status:
            changed[path] = STATUS_NAMES.get(status[0], status)
    # Mode changes (e.g. +x) show as M above; symlink swaps as T.
    untracked = git_text(root, "ls-files", "--others", "--exclude-standard", "-z")
    for path in untracked.split("\0"):
        if path:
            changed.setdefault(path, "untracked")
    # A name that is not UTF-8 is judged and reported as escaped text (`freezes/\xff.json`), never raw.
    return commit, tuple(ChangedPath(from_os(p), s) for p, s in sorted(changed.items()))
