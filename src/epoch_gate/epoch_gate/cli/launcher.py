"""`epoch-gate launcher`: Pants on a machine without scie-pants, in one command from the wheel.

It copies the launcher this wheel was built with (`./pants`, which bootstraps Pants 2.17 and the tools it
runs from PyPI, by hash) and its files (`3rdparty/bootstrap/`: the pins and the launcher's own
configuration, which `./pants` reads before the repository's `pants.toml`) into a repository, and adds the
ignore lines for what the launcher and Pants write into the build root. Nothing else of the repository
changes. A file that is already there with other bytes is refused, naming it, unless `--replace`; the same
bytes again are left as they are. Stdlib only: it runs from the wheel itself (`PYTHONPATH=<the wheel>`).
"""

from __future__ import annotations

import importlib.resources
import os
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterator, Protocol

# Where the wheel keeps the launcher (relocated there from this repository's own, by the BUILD file)
PACKAGED = "launcher_files"
EXECUTABLE = frozenset({"pants"})
IGNORED = ("/.pants.bootstrap/", "/.pants.d/", "/.pids/", "/dist/")  # the launcher's tools, Pants' own


class Source(Protocol):
    """A folder of the launcher's files: importlib.resources' Traversable, or a Path."""

    name: str

    def iterdir(self) -> Iterator["Source"]:
        ...

    def is_dir(self) -> bool:
        ...

    def read_bytes(self) -> bytes:
        ...


def packaged() -> Source:
    return importlib.resources.files("epoch_gate.cli") / PACKAGED  # type: ignore[return-value]


def launcher_files(source: Source, under: PurePosixPath = PurePosixPath()) -> dict[PurePosixPath, bytes]:
    """Every file of the launcher, by its path in a repository."""
    found: dict[PurePosixPath, bytes] = {}
    for entry in source.iterdir():
        if entry.is_dir():
            found.update(launcher_files(entry, under / entry.name))
        elif entry.name != "__init__.py":
            found[under / entry.name] = entry.read_bytes()
    return found


def _write(path: Path, data: bytes, executable: bool) -> None:
    """`data` as `path`, whole or not at all (a temporary file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o755 if executable else 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _ignore_file(gitignore: Path) -> tuple[bytes, list[str]]:
    """`.gitignore` with the missing IGNORED lines added, in its own line endings, and those lines."""
    data = gitignore.read_bytes() if gitignore.is_file() else b""
    have = {line.strip() for line in data.splitlines()}
    missing = [line for line in IGNORED if line.encode() not in have]
    newline = b"\r\n" if b"\r\n" in data else b"\n"
    if data and not data.endswith(b"\n"):
        data += newline
    return data + b"".join(line.encode() + newline for line in missing), missing


def _not_regular(root: Path, rel: PurePosixPath) -> str:
    """Why `rel` cannot be written as a regular file inside `root` (a symlink on its way, a file where a
    folder goes, or a folder where the file goes), or ""."""
    for depth in range(1, len(rel.parts) + 1):
        at, named = root.joinpath(*rel.parts[:depth]), "/".join(rel.parts[:depth])
        if at.is_symlink():
            return f"{rel}: expected a regular file or nothing; found a symlink at {named}"
        if depth < len(rel.parts) and at.exists() and not at.is_dir():
            return f"{rel}: expected a folder or nothing at {named}; found a file"
    path = root / rel
    return f"{rel}: expected a regular file or nothing; found a folder" if path.exists() and not path.is_file() else ""


def _runnable(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o111 == 0o111


def install(root: Path, source: Source, replace: bool = False) -> tuple[list[str], list[str]]:
    """Copies the launcher into `root`: (what was done, one line each; what was refused, one line each).
    Everything is decided before anything is written: nothing is written when anything is refused (a write
    that then fails, a full disk say, leaves each file whole or as it was)."""
    files = launcher_files(source)
    if not files:
        return [], [
            f"this wheel holds no launcher ({PACKAGED}/ of epoch_gate.cli is empty): build it with `pants package`"
        ]
    done, refused, writes = [], [], []
    try:
        for rel, data in sorted(files.items()):
            path, executable = root / rel, rel.name in EXECUTABLE and len(rel.parts) == 1
            why = _not_regular(root, rel)
            if why:
                refused.append(why)
            elif path.is_file() and path.read_bytes() == data and (not executable or _runnable(path)):
                done.append(f"kept     {rel} (the same bytes)")
            elif path.is_file() and path.read_bytes() != data and not replace:
                refused.append(
                    f"{rel}: expected the launcher's bytes or nothing; found other bytes (--replace to overwrite)"
                )
            else:
                writes.append((path, data, executable))
                done.append(f"wrote    {rel}")
        why = _not_regular(root, PurePosixPath(".gitignore"))
        ignore, missing = (b"", []) if why else _ignore_file(root / ".gitignore")
    except OSError as exc:
        return [], [f"{exc.filename or root}: cannot be read ({exc.strerror or exc})"]
    if why:
        refused.append(why)
    if refused:
        return [], refused
    if missing:
        writes.append((root / ".gitignore", ignore, False))
        done.append(f"ignored  {', '.join(missing)} (.gitignore)")
    try:
        for path, data, executable in writes:
            _write(path, data, executable)
    except OSError as exc:  # each file is whole or as it was; those before it are written
        return [], [f"{exc.filename or root}: cannot be written ({exc.strerror or exc})"]
    return done, []
