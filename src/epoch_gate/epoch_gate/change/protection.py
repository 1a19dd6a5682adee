"""What a change must not touch, beyond the oracle's own files: everything that shapes how they are read.

Each function maps one kind of fact (a folder, a predicate's module, a path Pants was configured with) to
the globs that protect it, so the caller derives the protected set from facts rather than a list.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Iterable, Optional

from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.pin import parse_pin
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.text import from_os


@dataclass(frozen=True)
class ProtectedSet:
    """Exact paths (derived from the build graph) plus globs (`*`, `?`, `**`; a trailing `/` is a folder),
    and the requirement paths (the resolves' lockfiles, the files requirements are generated from): what
    the product is installed with, so a change to it is judged as a dependency change."""

    paths: frozenset[str]
    globs: tuple[str, ...]
    requirements: frozenset[str] = frozenset()

    def matches(self, path: str) -> bool:
        return path in self.paths or path in self.requirements or any(_glob_regex(g).match(path) for g in self.globs)

    def sorted_entries(self) -> list[str]:
        return sorted(self.paths | self.requirements) + sorted(self.globs)


@lru_cache(maxsize=512)
def _glob_regex(glob: str) -> re.Pattern[str]:
    glob = glob.lstrip("/")  # globs are anchored at the build root already; a leading `/` says so
    folder = glob.endswith("/")
    glob = glob.rstrip("/")
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    # A folder matches its own path too: a symlink or file committed in the folder's place is a change to it.
    return re.compile("".join(out) + (r"(?:/.*)?\Z" if folder else r"\Z"), re.DOTALL)


def protected_changes(changed: tuple[ChangedPath, ...], protected: ProtectedSet) -> list[Reason]:
    """A reason for each changed protected path: a requirement change is named as one (the replay runs the
    base's resolve, not what the change would install), any other is an oracle change."""
    return [
        Reason(
            Code.REQUIREMENTS_CHANGED,
            c.path,
            expected="the base's requirements and lockfile",
            found=c.status,
            message=f"a requirement path is {c.status.replace('-', ' ')} in this change: the replay judges the "
            "product with the base's resolve, not with what this change would install",
        )
        if c.path in protected.requirements
        else Reason(
            Code.PROTECTED_PATH_CHANGED,
            c.path,
            expected="unchanged (protected)",
            found=c.status,
            message=f"a protected path is {c.status.replace('-', ' ')} in this change",
        )
        for c in changed
        if protected.matches(c.path)
    ]


# Files that change what git (and so the changed set and the reviewed tree) or Pants sees of a folder.
VCS_FILES = (".gitignore", ".gitattributes")


def folders_up(folder: str) -> list[str]:
    """`a/b` -> [`a/b`, `a`, ``]: the folder and every ancestor up to the build root."""
    parts = PurePosixPath(folder).parts if folder not in ("", ".") else ()
    return ["/".join(parts[:n]) for n in range(len(parts), -1, -1)]


def join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def shaping_files(folders: Iterable[str], build_patterns: Iterable[str]) -> set[str]:
    """BUILD files (their `__defaults__` shape every target below them) and git's ignore and attribute
    files, in each folder and every ancestor; and the ignore and attribute files anywhere below it."""
    globs: set[str] = set()
    names = (*build_patterns, *VCS_FILES)
    for folder in set(folders):
        globs |= {join(up, name) for up in folders_up(folder) for name in names}
        globs |= {join(folder, f"**/{name}") for name in VCS_FILES}
    return globs


def strip_root(path: str, roots: Iterable[str]) -> tuple[str, str]:
    """(source root, path under it) for the deepest root holding `path`; the build root is `.`."""
    best = "."
    for root in roots:
        if root == "." or path.startswith(root.rstrip("/") + "/"):
            if best == "." or len(root) > len(best):
                best = root
    return best, path if best == "." else path[len(best.rstrip("/")) + 1 :]


def oracle_package(path: str, root: str) -> str:
    """What protects a predicate file's module: the whole top-level package folder it sits in (so its
    `__init__.py` files and every helper module of the package), or the file itself at the root."""
    _, stripped = strip_root(path, [root])
    top = stripped.split("/", 1)[0]
    if "/" not in stripped:
        return path
    return join("" if root == "." else root.rstrip("/"), top) + "/"


def inside(build_root: str, path: str) -> Optional[str]:
    """`path` (absolute, or relative to the build root; `~` expanded) relative to the build root, or
    None when it lies outside it."""
    full = os.path.normpath(os.path.join(build_root, os.path.expanduser(path)))
    rel = os.path.relpath(full, os.path.normpath(build_root))
    if rel == ".":
        return ""
    if rel == ".." or rel.startswith("../"):
        return None
    return rel.replace(os.sep, "/")


def _not_regular(path: str, expected: str, found: str, message: str) -> Reason:
    return Reason(Code.PATH_NOT_REGULAR, path, expected, found, message)


def _symlink_on_the_way(root: Path, path: str) -> Optional[str]:
    """The first component of `path` (itself included) that is a symlink, if any."""
    parts = PurePosixPath(path).parts
    for n in range(1, len(parts) + 1):
        prefix = "/".join(parts[:n])
        if os.path.islink(root / prefix):
            return prefix
    return None


def _symlinks_below(root: Path, folder: str) -> list[str]:
    found = []
    for current, dirs, files in os.walk(root / folder):  # os.walk does not follow symlinked folders
        rel = os.path.relpath(current, root).replace(os.sep, "/")
        found += [
            from_os(f"{rel}/{name}") for name in sorted(dirs + files) if os.path.islink(os.path.join(current, name))
        ]
        dirs.sort()
    return found


def irregular_paths(
    root: Path, files: Iterable[str], folders: Iterable[str], trees: Iterable[str] = ()
) -> list[Reason]:
    """Oracle files and evidence folders must be what they seem: a symlink (anywhere on the path) would
    let an unprotected file stand in for a protected one, and Pants follows symlinks when it reads.
    `trees` are protected folders (the predicates' package, say) that must hold no symlink at any depth."""
    reasons = []
    for tree in sorted({t.rstrip("/") for t in trees} - {f.rstrip("/") for f in folders}):
        link = _symlink_on_the_way(root, tree)
        inner = [link] if link else _symlinks_below(root, tree) if os.path.isdir(root / tree) else []
        reasons += [
            _not_regular(
                path,
                "no symlink in a protected folder",
                "symlink",
                "a protected folder holds a symlink: what it points to is not protected",
            )
            for path in inner
        ]
    for path in sorted(set(files)):
        link = _symlink_on_the_way(root, path)
        if link is not None:
            reasons.append(
                _not_regular(
                    path, "a regular file", f"symlink at {link}", "an oracle file is reached through a symlink"
                )
            )
        elif os.path.lexists(root / path) and not stat.S_ISREG(os.lstat(root / path).st_mode):
            reasons.append(
                _not_regular(path, "a regular file", "not a regular file", "an oracle path is not a regular file")
            )
    for folder in sorted({f.rstrip("/") for f in folders}):
        link = _symlink_on_the_way(root, folder)
        if link is not None:
            reasons.append(
                _not_regular(
                    folder, "a folder", f"symlink at {link}", "an evidence folder is reached through a symlink"
                )
            )
            continue
        if not os.path.lexists(root / folder):
            continue
        if not os.path.isdir(root / folder):
            reasons.append(_not_regular(folder, "a folder", "a file", "an evidence folder is not a folder"))
            continue
        for entry in sorted(os.scandir(root / folder), key=lambda e: e.name):
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                reasons.append(
                    _not_regular(
                        from_os(f"{folder}/{entry.name}"),
                        "a regular file",
                        "symlink" if entry.is_symlink() else "not a regular file",
                        "evidence must be regular files, directly in its folder",
                    )
                )
    return reasons


def pinned_at_base(pin_bytes: Optional[bytes], pin_path: str) -> set[str]:
    """The generator and inputs the base's pin names: still protected when the change deletes or renames
    them (the changed tree's graph no longer holds them)."""
    if pin_bytes is None:
        return set()
    try:
        pin = parse_pin(pin_bytes, pin_path)
    except EvidenceError:
        return set()  # the base's own pin is unreadable: the current one is judged on its own
    return {pin.generator.path, *(i.path for i in pin.inputs)}
