"""Trusted mode: the change under review is a git revision, read as data from git's object store.

The judge runs from a checkout of the trusted ref (its code, configuration and BUILD files); the
candidate is never checked out, loaded or executed outside the jailed replay. Its changed set is what it
changes since its merge base with the judge, and its files are blobs read by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from epoch_gate.changes import STATUS_NAMES, ChangedPath, check_trusted, commit_of, git_text, run_git
from epoch_gate.reasons import Code, fail
from epoch_gate.text import from_os
from epoch_gate.tree import ReviewedTree

REGULAR_MODES = ("100644", "100755")


@dataclass(frozen=True)
class Candidate:
    commit: str
    tree: str  # git's tree id of the candidate commit: what the statement attests
    merge_base: str  # where the candidate branched from the judge's history
    changed: tuple[ChangedPath, ...]
    blobs: Mapping[str, tuple[str, str]]  # path -> (git mode, blob id), every file of the candidate

    def reviewed_tree(self) -> ReviewedTree:
        return ReviewedTree(self.commit, self.tree, clean=True)


def _judge_is_trusted(root: Path, trusted_refs: Sequence[str]) -> None:
    """The checkout that judges must be reviewed history, exactly as committed: its code decides."""
    head = commit_of(root, "HEAD")
    if head is None:
        raise fail(Code.CHANGED_SET_UNAVAILABLE, ".", "the judge's checkout has no HEAD commit",
                   expected="a checkout of the trusted ref", found="no HEAD")
    check_trusted(root, head, trusted_refs)
    dirty = git_text(root, "status", "--porcelain", "--untracked-files=normal", "-z").split("\0")
    dirty = [entry[3:] for entry in dirty if entry]
    if dirty:
        raise fail(Code.BASE_UNTRUSTED, dirty[0], "the judge's checkout differs from its commit: trusted mode "
                   "runs from a clean checkout of the trusted ref (a detached worktree)",
                   expected="a clean checkout", found=f"{len(dirty)} changed path(s), first {from_os(dirty[0])}")


def _changed(root: Path, merge_base: str, commit: str) -> tuple[ChangedPath, ...]:
    diff = git_text(root, "-c", "core.quotepath=off", "diff-tree", "-r", "--no-renames", "--name-status", "-z",
                    merge_base, commit)
    fields = diff.split("\0")
    changed = {path: STATUS_NAMES.get(status[0], status)
               for status, path in zip(fields[0::2], fields[1::2]) if status}
    return tuple(ChangedPath(from_os(p), s) for p, s in sorted(changed.items()))


def _blobs(root: Path, commit: str) -> dict[str, tuple[str, str]]:
    listing = git_text(root, "-c", "core.quotepath=off", "ls-tree", "-r", "-z", "--full-tree", commit)
    blobs = {}
    for entry in listing.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            mode, kind, oid = meta.split(" ")
            if kind == "blob":
                blobs[path] = (mode, oid)
    return blobs


def open_candidate(root: Path, revision: str, trusted_refs: Sequence[str]) -> Candidate:
    """The candidate `revision`, judged from the trusted checkout at `root`; EvidenceError when either
    cannot be trusted to be what it says."""
    _judge_is_trusted(root, trusted_refs)
    if not revision or revision.startswith("-"):
        raise fail(Code.CHANGED_SET_UNAVAILABLE, ".", "no usable candidate revision",
                   expected="a git revision", found=revision or "empty")
    commit = commit_of(root, revision)
    if commit is None:
        raise fail(Code.CHANGED_SET_UNAVAILABLE, ".", f"the candidate {revision!r} is not a commit in this "
                   "repository (fetch it first, e.g. `git fetch origin pull/N/head`)",
                   expected="a commit", found=revision)
    done = run_git(root, "merge-base", "HEAD", commit)
    merge_base = done.stdout.decode().strip()
    if done.returncode != 0 or not merge_base:
        raise fail(Code.BASE_UNPROVABLE, ".", f"the candidate {commit[:12]} shares no history with the judge's "
                   "checkout (a shallow clone? fetch the full history)", expected="a merge base", found="none")
    tree = git_text(root, "rev-parse", "--verify", f"{commit}^{{tree}}").strip()
    return Candidate(commit, tree, merge_base, _changed(root, merge_base, commit), _blobs(root, commit))


def read_blobs(root: Path, oids: Iterable[str]) -> dict[str, bytes]:
    """Blob bytes by id, in one `git cat-file --batch` call."""
    wanted = sorted(set(oids))
    if not wanted:
        return {}
    done = run_git(root, "cat-file", "--batch", stdin="".join(f"{oid}\n" for oid in wanted).encode())
    out, found, at = done.stdout, {}, 0
    for oid in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        if len(header) != 3 or header[1] != b"blob":
            raise fail(Code.CHANGED_SET_UNAVAILABLE, ".", f"git could not read blob {oid}",
                       expected="a blob", found=out[at:end].decode("utf-8", "replace")[:80])
        size = int(header[2])
        found[oid] = out[end + 1:end + 1 + size]
        at = end + 1 + size + 1
    return found
