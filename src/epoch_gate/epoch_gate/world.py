"""The fixture world: one `<bound>.jsonl` file per bound, one saved record (JSON object) per line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Mapping

from epoch_gate.hashing import canonical_sha256, sha256_file
from epoch_gate.reasons import Code, fail
from epoch_gate.text import from_os

SUFFIX = ".jsonl"


def bound_path(world: Path, bound: str) -> Path:
    return world / f"{bound}{SUFFIX}"


def records(world: Path, bound: str) -> Iterator[tuple[int, bytes]]:
    """Yields (line number from 1, exact record bytes without the newline) for every non-empty line."""
    path = bound_path(world, bound)
    if path.is_symlink() or not path.is_file():
        raise fail(Code.BOUND_MISSING, f"{bound}{SUFFIX}", f"the fixture world has no records for {bound}",
                   expected=f"{bound}{SUFFIX} in the world", found="missing")
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip(b"\n")
            if line:
                yield number, line


def record_batches(world: Path, bound: str, size: int) -> Iterator[list[tuple[int, bytes]]]:
    """`records`, `size` at a time, read in bulk: the replay's parent streams a world of millions."""
    path = bound_path(world, bound)
    if path.is_symlink() or not path.is_file():
        raise fail(Code.BOUND_MISSING, f"{bound}{SUFFIX}", f"the fixture world has no records for {bound}",
                   expected=f"{bound}{SUFFIX} in the world", found="missing")
    pending: list[tuple[int, bytes]] = []
    number, tail = 0, b""
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()  # the part after the last newline: the start of the next line, or the last line
            pending.extend((n, line) for n, line in enumerate(lines, number + 1) if line)
            number += len(lines)
            while len(pending) >= size:
                yield pending[:size]
                del pending[:size]
    if tail:
        pending.append((number + 1, tail))
    for start in range(0, len(pending), size):
        yield pending[start:start + size]


def count_records(data: bytes) -> int:
    """How many records `records` yields from a bound file's bytes: its non-empty lines."""
    return sum(1 for line in data.split(b"\n") if line)


def record_counts(files: Mapping[str, bytes]) -> dict[str, int]:
    """{bound: record count} of a world given as {relative path: bytes}."""
    return {path[:-len(SUFFIX)]: count_records(data) for path, data in files.items()
            if path.endswith(SUFFIX) and "/" not in path}


def world_record_counts(world: Path) -> dict[str, int]:
    """record_counts of a world folder on disk (regular files only, as `records` reads them)."""
    return record_counts({path.name: path.read_bytes() for path in world.glob(f"*{SUFFIX}")
                          if path.is_file() and not path.is_symlink()})


def listing_sha256(listing: Mapping[str, str]) -> str:
    """The epoch's content identity: the canonical digest of {relative path: sha256} of the world."""
    if not listing:
        raise fail(Code.GENERATOR_FAILED, "", "the generator wrote no fixture world",
                   expected="at least one record file", found="none")
    return canonical_sha256({"files": dict(listing)})


def world_sha256(world: Path) -> str:
    """listing_sha256 of a world folder on disk."""
    listing: dict[str, str] = {}
    for folder, dirs, files in os.walk(world):
        dirs.sort()
        for name in files:
            full = Path(folder) / name
            name = full.relative_to(world).as_posix()
            if from_os(name) != name:  # an identity is never taken over an escaped (ambiguous) name
                raise fail(Code.GENERATOR_FAILED, from_os(name), "a fixture world file's name is not UTF-8",
                           expected="UTF-8 file names", found=from_os(name))
            listing[name] = sha256_file(full)
    return listing_sha256(listing)
