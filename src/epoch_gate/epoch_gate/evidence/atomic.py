"""Crash-safe writes: temp file in the same folder, fsync, rename (or link, to never clobber)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from epoch_gate.reasons import Code, fail


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(folder: Path, name: str, data: bytes) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp)


def replace_file(path: Path, data: bytes) -> None:
    """Replaces path with data atomically: a reader sees the old file or the new one, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path.parent, path.name, data)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def create_file(path: Path, data: bytes) -> bool:
    """Creates path with data, never overwriting: True if written, False if identical bytes were there.

    Raises EvidenceError(OBSERVATION_CONFLICT) when path holds other bytes: archived evidence is never
    rewritten.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path.parent, path.name, data)
    try:
        os.link(tmp, path)  # atomic and refuses to clobber, unlike rename
    except FileExistsError:
        if not path.is_symlink() and path.is_file() and path.read_bytes() == data:
            return False
        raise fail(
            Code.OBSERVATION_CONFLICT,
            str(path),
            "refusing to overwrite existing evidence",
            expected="absent or identical bytes",
            found="different bytes",
        ) from None
    finally:
        os.unlink(tmp)
    _fsync_dir(path.parent)
    return True
