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
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator, Protocol

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


def _missing_lines(gitignore: Path, lines: Iterable[str]) -> list[str]:
    have = set(gitignore.read_text().splitlines()) if gitignore.is_file() else set()
    return [line for line in lines if line not in have]


def install(root: Path, source: Source, replace: bool = False) -> tuple[list[str], list[str]]:
    """Copies the launcher into `root`: (what was done, one line each; what was refused, one line each).
    Nothing is written when anything is refused."""
    files = launcher_files(source)
    if not files:
        return [], [
            f"this wheel holds no launcher ({PACKAGED}/ of epoch_gate.cli is empty): build it with `pants package`"
        ]
    done, refused, writes = [], [], []
    for rel, data in sorted(files.items()):
        path = root / rel
        if path.is_symlink() or (path.exists() and not path.is_file()):
            refused.append(
                f"{rel}: expected a regular file or nothing; found {'a symlink' if path.is_symlink() else 'a folder'}"
            )
        elif path.is_file() and path.read_bytes() == data:
            done.append(f"kept     {rel} (the same bytes)")
        elif path.is_file() and not replace:
            refused.append(
                f"{rel}: expected the launcher's bytes or nothing; found other bytes (--replace to overwrite)"
            )
        else:
            writes.append((path, data, rel.name in EXECUTABLE and len(rel.parts) == 1))
            done.append(f"wrote    {rel}")
    gitignore = root / ".gitignore"
    if gitignore.is_symlink() or (gitignore.exists() and not gitignore.is_file()):
        refused.append(".gitignore: expected a regular file or nothing; found something else")
    if refused:
        return [], refused
    for path, data, executable in writes:
        _write(path, data, executable)
    missing = _missing_lines(gitignore, IGNORED)
    if missing:
        text = gitignore.read_text() if gitignore.is_file() else ""
        _write(
            gitignore,
            (text + ("\n" if text and not text.endswith("\n") else "") + "\n".join(missing) + "\n").encode(),
            False,
        )
        done.append(f"ignored  {', '.join(missing)} (.gitignore)")
    return done, []
