"""Reads an evidence folder into {name: bytes}: regular files only, never through a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from epoch_gate import strictjson
from epoch_gate.reasons import Code, EvidenceError, Reason


def read_folder(folder: Path, display: str, cap: int) -> tuple[dict[str, bytes], list[Reason]]:
    """A missing folder is empty (no archive yet); a symlinked folder or entry is a reason."""
    if folder.is_symlink():
        return {}, [Reason(Code.ARTIFACT_MALFORMED, display, "a regular folder", "a symlink",
                           "an evidence folder must not be a symlink")]
    if not folder.is_dir():
        return {}, []
    files: dict[str, bytes] = {}
    reasons: list[Reason] = []
    for entry in sorted(os.listdir(folder)):
        if entry.startswith("."):
            continue
        shown = f"{display}/{entry}"
        mode = os.lstat(folder / entry).st_mode
        if not stat.S_ISREG(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
            reasons.append(Reason(Code.ARTIFACT_MALFORMED, shown, "a regular file", kind,
                                  "evidence must be a regular file"))
            continue
        try:
            files[entry] = strictjson.read_bytes(folder / entry, shown, max_bytes=cap)
        except EvidenceError as error:
            reasons.append(error.reason)
    return files, reasons
