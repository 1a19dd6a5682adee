"""Trusted mode: the change under review is a git revision, read as data from git's object store.

The judge runs from a checkout of the trusted ref (its code, configuration and BUILD files); the
candidate is never checked out, loaded or executed outside the jailed replay. What is judged is what
would land: git's merge of the candidate into the judge's commit (`merge-tree --write-tree`, no
checkout). Its changed set is that tree against the judge's commit, so neither a criss-cross merge base
nor a candidate branched from an older main can hide an edit, and its files are blobs read by id.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from epoch_gate.change.changed import ChangedPath, STATUS_NAMES, check_trusted
from epoch_gate.change.git import commit_of, git_text, run_git
from epoch_gate.reasons import Code, fail
from epoch_gate.text import from_os, last_line
from epoch_gate.change.tree import ReviewedTree

REGULAR_MODES = ("100644", "100755")
# What every file system the gate runs on can hold: a name of at most NAME_MAX bytes, a path of PATH_MAX.
NAME_MAX, PATH_MAX = 255, 4096


@dataclass(frozen=True)
class Candidate:
    commit: str
    tree: str  # git's tree id of the candidate merged into the judge's commit: what is judged and attested
    base: str  # the judge's commit, which the changed set is taken against
    changed: tuple[ChangedPath, ...]
    entries: Mapping[str, tuple[str, str]]  # path -> (git mode, object id), every entry of the merged tree
    lands_as_is: bool  # the candidate's own tree is the merge (it is up to date with the judge's commit)

    def reviewed_tree(self) -> ReviewedTree:
        """The commit names the judged tree only when the candidate lands as it is."""
        return ReviewedTree(self.commit, self.tree, clean=self.lands_as_is)


def _judge_is_trusted(root: Path, trusted_refs: Sequence[str]) -> None:
    """The checkout that judges must be reviewed history, exactly as committed: its code decides."""
    head = commit_of(root, "HEAD")
    if head is None:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            "the judge's checkout has no HEAD commit",
            expected="a checkout of the trusted ref",
            found="no HEAD",
        )
    check_trusted(root, head, trusted_refs)
    dirty = git_text(root, "status", "--porcelain", "--untracked-files=normal", "-z").split("\0")
    dirty = [entry[3:] for entry in dirty if entry]
    if dirty:
        raise fail(
            Code.BASE_UNTRUSTED,
            dirty[0],
            "the judge's checkout differs from its commit: trusted mode "
            "runs from a clean checkout of the trusted ref (a detached worktree)",
            expected="a clean checkout",
            found=f"{len(dirty)} changed path(s), first {from_os(dirty[0])}",
        )


def _changed(root: Path, base: str, tree: str) -> tuple[ChangedPath, ...]:
    diff = git_text(
        root, "-c", "core.quotepath=off", "diff-tree", "-r", "--no-renames", "--name-status", "-z", base, tree
    )
    fields = diff.split("\0")
    changed = {path: STATUS_NAMES.get(status[0], status) for status, path in zip(fields[0::2], fields[1::2]) if status}
    return tuple(ChangedPath(from_os(p), s) for p, s in sorted(changed.items()))


def _entries(root: Path, tree: str) -> dict[str, tuple[str, str]]:
    """Every blob and submodule of the tree: a submodule (`commit`) is listed so it can be refused."""
    listing = git_text(root, "-c", "core.quotepath=off", "ls-tree", "-r", "-z", "--full-tree", tree)
    entries = {}
    for entry in listing.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            mode, _kind, oid = meta.split(" ")
            entries[path] = (mode, oid)
    return entries


def _unportable(path: str) -> Optional[str]:
    """Why a file system cannot hold `path` (git's tree can: `git mktree` takes any name but `/` and NUL),
    or None."""
    encoded = os.fsencode(path)
    if len(encoded) > PATH_MAX:
        return f"a path of {len(encoded)} bytes"
    for name in path.split("/"):
        if name in ("", ".", ".."):
            return f"a name {name!r}"
        if name.lower() == ".git":
            return "git's own folder name"
        if len(os.fsencode(name)) > NAME_MAX:
            return f"a name of {len(os.fsencode(name))} bytes"
    return None


def _check_portable(entries: Mapping[str, tuple[str, str]]) -> None:
    """Refuses the whole candidate, before anything of it is written, at its first path that no file system
    holds as git names it: written, it would land elsewhere (`..`) or fail the build in the middle."""
    for path in sorted(entries):
        why = _unportable(path)
        if why is not None:
            raise fail(
                Code.PATH_NOT_REGULAR,
                from_os(path),
                "the candidate's tree holds a path no file system "
                "can hold as git names it: nothing of it is written",
                expected=(
                    f"names of 1 to {NAME_MAX} bytes, not `.`, `..` or `.git`, and paths of at most "
                    f"{PATH_MAX} bytes"
                ),
                found=why,
            )


def _merged_tree(root: Path, head: str, commit: str) -> str:
    done = run_git(root, "merge-tree", "--write-tree", "--no-messages", head, commit)
    first = done.stdout.decode("utf-8", "replace").split("\n", 1)[0].strip()
    if done.returncode == 1:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            f"the candidate {commit[:12]} does not merge cleanly into "
            f"the judge's commit {head[:12]}: rebase it on the trusted ref",
            expected="a clean merge",
            found="conflicts",
        )
    if done.returncode != 0 or len(first) != 40:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            "git cannot merge the candidate without a checkout "
            f"(`git merge-tree --write-tree` needs git 2.38 or later): {last_line(done.stderr)}",
            expected="a merged tree",
            found=f"exit {done.returncode}",
        )
    return first


def open_candidate(root: Path, revision: str, trusted_refs: Sequence[str]) -> Candidate:
    """The candidate `revision`, judged from the trusted checkout at `root`; EvidenceError when either
    cannot be trusted to be what it says."""
    _judge_is_trusted(root, trusted_refs)
    if not revision or revision.startswith("-"):
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            "no usable candidate revision",
            expected="a git revision",
            found=revision or "empty",
        )
    commit = commit_of(root, revision)
    if commit is None:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            f"the candidate {revision!r} is not a commit in this "
            "repository (fetch it first, e.g. `git fetch origin pull/N/head`)",
            expected="a commit",
            found=revision,
        )
    head = commit_of(root, "HEAD") or ""
    if run_git(root, "merge-base", head, commit).returncode != 0:
        raise fail(
            Code.BASE_UNPROVABLE,
            ".",
            f"the candidate {commit[:12]} shares no history with the judge's "
            "checkout (a shallow clone? fetch the full history)",
            expected="a merge base",
            found="none",
        )
    tree = _merged_tree(root, head, commit)
    own = git_text(root, "rev-parse", "--verify", f"{commit}^{{tree}}").strip()
    entries = _entries(root, tree)
    _check_portable(entries)
    return Candidate(commit, tree, head, _changed(root, head, tree), entries, tree == own)


def blob_sizes(root: Path, oids: Iterable[str]) -> dict[str, int]:
    """Blob sizes by id, without reading them (`git cat-file --batch-check`)."""
    wanted = sorted(set(oids))
    if not wanted:
        return {}
    done = run_git(
        root,
        "cat-file",
        "--batch-check=%(objectname) %(objectsize)",
        stdin="".join(f"{oid}\n" for oid in wanted).encode(),
    )
    sizes = {}
    for line in done.stdout.decode("ascii", "replace").splitlines():
        oid, _, size = line.partition(" ")
        if size.isdigit():
            sizes[oid] = int(size)
    return sizes


def read_blobs(root: Path, oids: Iterable[str]) -> dict[str, bytes]:
    """Blob bytes by id, in one `git cat-file --batch` call."""
    wanted = sorted(set(oids))
    if not wanted:
        return {}
    done = run_git(root, "cat-file", "--batch", stdin="".join(f"{oid}\n" for oid in wanted).encode())
    out, found, at = done.stdout, {}, 0
    for oid in wanted:
        end = out.find(b"\n", at)
        header = out[at:end].split(b" ") if end >= 0 else []
        if done.returncode != 0 or len(header) != 3 or header[1] != b"blob" or not header[2].isdigit():
            raise fail(
                Code.CHANGED_SET_UNAVAILABLE,
                ".",
                f"git could not read blob {oid}",
                expected="a blob",
                found=out[at : at + 80].decode("utf-8", "replace").split("\n")[0],
            )
        size = int(header[2])
        found[oid] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return found


def files_at(root: Path, commit: str, paths: Iterable[str]) -> dict[str, Optional[bytes]]:
    """Several files' bytes at a commit in two git calls, not one per file; None where a path is not a
    file there. Raises EvidenceError when git cannot list or read them."""
    wanted = sorted(set(paths))
    if not wanted:
        return {}
    listing = git_text(root, "-c", "core.quotepath=off", "ls-tree", "-z", "--full-tree", commit, "--", *wanted)
    oids = {}
    for entry in listing.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            _mode, kind, oid = meta.split(" ")
            if kind == "blob":
                oids[path] = oid
    blobs = read_blobs(root, oids.values())
    return {path: blobs[oids[path]] if path in oids else None for path in wanted}
