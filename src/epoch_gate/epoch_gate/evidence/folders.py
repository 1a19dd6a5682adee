"""The working tree as the gate reads and writes it: a file's bytes, an evidence folder as {name: bytes}
(regular files only, never through a symlink), and the folder the gate may write its report into."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Optional

from epoch_gate.evidence import strictjson
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.text import from_os


def read_file(root: Path, path: str) -> Optional[bytes]:
    """A working-tree file's bytes, or None where it is absent (or not a regular file)."""
    try:
        return (root / path).read_bytes()
    except OSError:
        return None


def read_folder(folder: Path, display: str, cap: int) -> tuple[dict[str, bytes], list[Reason]]:
    """A missing folder is empty (no archive yet); a symlinked folder or entry is a reason."""
    if folder.is_symlink():
        return {}, [
            Reason(
                Code.ARTIFACT_MALFORMED,
                display,
                "a regular folder",
                "a symlink",
                "an evidence folder must not be a symlink",
            )
        ]
    if not folder.is_dir():
        return {}, []
    files: dict[str, bytes] = {}
    reasons: list[Reason] = []
    names = sorted(os.listdir(folder))
    shown_names = [from_os(raw) for raw in names]  # a name that is not UTF-8 is known by its escaped form
    for raw, entry in zip(names, shown_names):
        if raw.startswith("."):
            continue
        shown = f"{display}/{entry}"
        if entry != raw and shown_names.count(entry) > 1:
            reasons.append(
                Reason(
                    Code.ARTIFACT_MALFORMED,
                    shown,
                    "one file per name",
                    "two files",
                    "a name that is not UTF-8 reads the same as another file's name",
                )
            )
            continue
        mode = os.lstat(folder / raw).st_mode
        if not stat.S_ISREG(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
            reasons.append(
                Reason(Code.ARTIFACT_MALFORMED, shown, "a regular file", kind, "evidence must be a regular file")
            )
            continue
        try:
            files[entry] = strictjson.read_bytes(folder / raw, shown, max_bytes=cap)
        except EvidenceError as error:
            reasons.append(error.reason)
    return files, reasons


def output_folder_problem(root: Path, folder: str) -> Optional[Reason]:
    """Why the gate must not write under `root/folder` (None when it may).

    Every folder on the way must be a real folder or not exist yet: a file there (a committed `dist`,
    which the `/dist/` ignore pattern does not cover) would fail the write, a symlink would redirect it
    (into the tree under review, or anywhere).
    """
    relative = PurePosixPath(folder)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        return Reason(
            Code.OUTPUT_FOLDER_UNSAFE,
            from_os(folder),
            "a folder inside the build root",
            from_os(folder),
            "the report's folder is not inside the build root",
        )
    here = root
    for depth, part in enumerate(relative.parts, start=1):
        here = here / part
        shown = from_os("/".join(relative.parts[:depth]))
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return None  # written fresh from here on
        except OSError as exc:
            return Reason(
                Code.OUTPUT_FOLDER_UNSAFE,
                shown,
                "a folder or nothing",
                type(exc).__name__,
                f"the report's folder cannot be inspected: {exc.strerror}",
            )
        if not stat.S_ISDIR(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else "a file" if stat.S_ISREG(mode) else "not a folder"
            return Reason(
                Code.OUTPUT_FOLDER_UNSAFE,
                shown,
                "a folder or nothing",
                kind,
                f"the gate writes its report under {from_os(folder)}, and {shown} is {kind}",
            )
    return None


def output_folder(root: Path, preferred: str, fallback: str) -> tuple[Optional[str], list[Reason]]:
    """(where to write the report, reasons): `preferred` when safe; else `fallback` (when safe, or None)
    and the closing reason why `preferred` was refused."""
    problem = output_folder_problem(root, preferred)
    if problem is None:
        return preferred, []
    return (None if output_folder_problem(root, fallback) else fallback), [problem]
