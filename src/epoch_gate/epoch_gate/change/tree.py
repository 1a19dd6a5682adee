"""The reviewed tree: git's own tree id of the working tree the gate judged, computed without writing.

In CI the working tree is HEAD's, so the id equals `git rev-parse HEAD^{tree}`. On a laptop it also
covers staged, unstaged and untracked (not ignored) files, exactly as `git add -A && git write-tree`
would, but from the index's blob ids plus a re-hash of only the paths that differ from the index.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from epoch_gate.change.git import git_text
from epoch_gate.reasons import Code, fail
from epoch_gate.text import from_os

Entry = tuple[str, str]  # (git mode, object id)


@dataclass(frozen=True)
class ReviewedTree:
    head_commit: str
    tree_id: str  # git tree id (sha1) of the working tree the gate judged
    clean: bool  # the working tree is HEAD's tree

    def digest(self) -> dict[str, str]:
        """An in-toto DigestSet: every digest names the same tree, so the commit only when it is HEAD's."""
        return {"gitCommit": self.head_commit, "gitTree": self.tree_id} if self.clean else {"gitTree": self.tree_id}


def _object_id(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def _lstat(full: Path) -> os.stat_result | None:
    try:
        return full.lstat()
    except (FileNotFoundError, NotADirectoryError):  # deleted, or a folder on its path became a file
        return None
    except OSError as exc:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            from_os(str(full)),
            f"cannot read the working tree: {exc}",
            expected="a readable path",
            found=type(exc).__name__,
        ) from None


def _gitlink(full: Path) -> Entry | None:
    """A nested repository (a submodule, or untracked) is recorded by git as its checked-out commit."""
    if not (full / ".git").exists():
        return None
    return "160000", git_text(full, "rev-parse", "--verify", "HEAD^{commit}").strip()


def _blob_ids(root: Path, paths: list[str]) -> list[str]:
    """git's blob ids after its clean filters (eol, LFS, ident), as `git add` would store them."""
    if not paths:
        return []
    if any("\n" in p for p in paths):
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            "a path with a newline cannot be hashed by git's --stdin-paths",
            expected="paths without newlines",
            found=from_os(next(p for p in paths if "\n" in p)),
        )
    out = git_text(root, "hash-object", "--stdin-paths", stdin="".join(f"{p}\n" for p in paths)).split()
    if len(out) != len(paths):
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            "git hash-object answered for another number of paths",
            expected=str(len(paths)),
            found=str(len(out)),
        )
    return out


def _tree_id(entries: dict[str, Entry]) -> str:
    children: dict[str, dict[str, Entry]] = {}
    files: dict[str, Entry] = {}
    for path, entry in entries.items():
        head, _, rest = path.partition("/")
        if rest:
            children.setdefault(head, {})[rest] = entry
        else:
            files[head] = entry
    items = [(name, entry) for name, entry in files.items()]
    items += [(name, ("40000", _tree_id(sub))) for name, sub in children.items()]
    # git orders a tree's entries by name, a subtree's name compared as if it ended in "/".
    items.sort(key=lambda item: os.fsencode(item[0]) + (b"/" if item[1][0] == "40000" else b""))
    body = b"".join(f"{mode} ".encode() + os.fsencode(name) + b"\0" + bytes.fromhex(oid) for name, (mode, oid) in items)
    return _object_id("tree", body)


def head_commit(root: Path) -> str:
    return git_text(root, "rev-parse", "--verify", "HEAD^{commit}").strip()


def reviewed_tree(root: Path) -> ReviewedTree:
    head = head_commit(root)
    head_tree = git_text(root, "rev-parse", "--verify", "HEAD^{tree}").strip()
    if len(head) != 40:
        raise fail(
            Code.CHANGED_SET_UNAVAILABLE,
            ".",
            "the reviewed tree needs a SHA-1 repository",
            expected="a 40-hex commit id",
            found=head,
        )
    entries: dict[str, Entry] = {}
    for record in git_text(root, "ls-files", "--stage", "-z").split("\0"):
        if record:
            meta, path = record.split("\t", 1)
            mode, oid, _stage = meta.split(" ")
            entries[path] = (mode, oid)
    differing = git_text(root, "diff-files", "--name-only", "-z").split("\0")
    untracked = git_text(root, "ls-files", "--others", "--exclude-standard", "-z").split("\0")
    file_mode = git_text(root, "config", "--bool", "--default", "true", "core.fileMode").strip() == "true"
    regular: list[str] = []
    for path in sorted({p.rstrip("/") for p in (*differing, *untracked) if p}):
        full = root / path
        info = _lstat(full)
        entry: Entry | None = None
        if info is None:
            entry = None
        elif stat.S_ISLNK(info.st_mode):
            entry = "120000", _object_id("blob", os.fsencode(os.readlink(full)))
        elif stat.S_ISDIR(info.st_mode):
            entry = _gitlink(full)  # a plain folder: its files are listed on their own
        elif stat.S_ISREG(info.st_mode):
            executable = info.st_mode & stat.S_IXUSR if file_mode else entries.get(path, ("",))[0] == "100755"
            entry = ("100755" if executable else "100644"), ""
            regular.append(path)
        if entry is None:
            entries.pop(path, None)
        else:
            entries[path] = entry
    for path, oid in zip(regular, _blob_ids(root, regular)):
        entries[path] = entries[path][0], oid
    tree = _tree_id(entries)
    return ReviewedTree(head, tree, tree == head_tree)


# `user@host:path`, git's scp-like form of an SSH remote (no scheme, a colon before any slash).
_SCP_LIKE = re.compile(r"([^/:@]+@)?([^/:]+):(?!//)(.*)\Z")


def plain_url(remote: str, root: Path) -> str:
    """A remote as a URL with no credentials in it (CI clones can embed a token in the HTTPS URL)."""
    if "://" not in remote:
        scp = _SCP_LIKE.match(remote)
        if scp and not (root / remote).exists():
            remote = f"ssh://{scp.group(1) or ''}{scp.group(2)}/{scp.group(3).lstrip('/')}"
        else:  # a path: a clone of a folder on this machine
            return (root / remote).resolve().as_uri()
    parts = urlsplit(remote)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    # Keep an SSH login name (`git@`, no secret); drop every other user and any password.
    if parts.scheme == "ssh" and parts.username and parts.password is None:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def repository_url(root: Path) -> str:
    """Where the reviewed commit can be fetched: origin's URL without credentials, else this checkout's folder."""
    remote = git_text(root, "config", "--default", "", "--get", "remote.origin.url").strip()
    return plain_url(remote, root) if remote else root.resolve().as_uri()
