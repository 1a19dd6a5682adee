"""The fixture world: one `<bound>.jsonl` file per bound, one saved record (JSON object) per line."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from epoch_gate.evidence.hashing import canonical_sha256, sha256_bytes, sha256_file
from epoch_gate.reasons import Code, fail
from epoch_gate.text import from_os

SUFFIX = ".jsonl"


def bound_path(world: Path, bound: str) -> Path:
    return world / f"{bound}{SUFFIX}"


def records(world: Path, bound: str) -> Iterator[tuple[int, bytes]]:
    """Yields (line number from 1, exact record bytes without the newline) for every non-empty line."""
    path = bound_path(world, bound)
    if path.is_symlink() or not path.is_file():
        raise fail(
            Code.BOUND_MISSING,
            f"{bound}{SUFFIX}",
            f"the fixture world has no records for {bound}",
            expected=f"{bound}{SUFFIX} in the world",
            found="missing",
        )
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip(b"\n")
            if line:
                yield number, line


@dataclass(frozen=True)
class LoadedWorld:
    """A world folder read once into memory: the replay's parent hashes and streams these very bytes, so
    the child, which shares the (writable) sandbox, cannot rewrite records after the world was hashed."""

    files: Mapping[str, bytes]  # every file, by relative POSIX path: what world_sha256 hashes
    links: frozenset[str]  # those of them reached through a symlink: hashed, but never a bound's records

    def sha256(self) -> str:
        """world_sha256 of the folder as it was read."""
        return listing_sha256({name: sha256_bytes(data) for name, data in self.files.items()})


def load_world(world: Path) -> LoadedWorld:
    files: dict[str, bytes] = {}
    links: set[str] = set()
    for name, full in _walk(world):
        with open(full, "rb") as handle:
            files[name] = handle.read()
        if full.is_symlink():
            links.add(name)
    return LoadedWorld(files, frozenset(links))


def record_batches(world: LoadedWorld, bound: str, size: int) -> Iterator[list[tuple[int, bytes]]]:
    """`records`, `size` at a time, split in bulk: the replay's parent streams a world of millions."""
    name = f"{bound}{SUFFIX}"
    data = world.files.get(name)
    if data is None or name in world.links:
        raise fail(
            Code.BOUND_MISSING,
            name,
            f"the fixture world has no records for {bound}",
            expected=f"{name} in the world",
            found="missing",
        )
    pending: list[tuple[int, bytes]] = []
    number, tail = 0, b""
    for start in range(0, len(data), 1 << 20):
        lines = (tail + data[start : start + (1 << 20)]).split(b"\n")
        tail = lines.pop()  # the part after the last newline: the start of the next line, or the last line
        pending.extend((n, line) for n, line in enumerate(lines, number + 1) if line)
        number += len(lines)
        while len(pending) >= size:
            yield pending[:size]
            del pending[:size]
    if tail:
        pending.append((number + 1, tail))
    for start in range(0, len(pending), size):
        yield pending[start : start + size]


def count_records(data: bytes) -> int:
    """How many records `records` yields from a bound file's bytes: its non-empty lines."""
    return sum(1 for line in data.split(b"\n") if line)


def record_counts(files: Mapping[str, bytes]) -> dict[str, int]:
    """{bound: record count} of a world given as {relative path: bytes}."""
    return {
        path[: -len(SUFFIX)]: count_records(data)
        for path, data in files.items()
        if path.endswith(SUFFIX) and "/" not in path
    }


def world_record_counts(world: Path) -> dict[str, int]:
    """record_counts of a world folder on disk (regular files only, as `records` reads them)."""
    return record_counts(
        {path.name: path.read_bytes() for path in world.glob(f"*{SUFFIX}") if path.is_file() and not path.is_symlink()}
    )


def listing_sha256(listing: Mapping[str, str]) -> str:
    """The epoch's content identity: the canonical digest of {relative path: sha256} of the world."""
    if not listing:
        raise fail(
            Code.GENERATOR_FAILED,
            "",
            "the generator wrote no fixture world",
            expected="at least one record file",
            found="none",
        )
    return canonical_sha256({"files": dict(listing)})


def _walk(world: Path) -> Iterator[tuple[str, Path]]:
    """(relative POSIX name, path) of every file of a world folder; a name that is not UTF-8 is refused."""
    for folder, dirs, files in os.walk(world):
        dirs.sort()
        for name in files:
            full = Path(folder) / name
            name = full.relative_to(world).as_posix()
            if from_os(name) != name:  # an identity is never taken over an escaped (ambiguous) name
                raise fail(
                    Code.GENERATOR_FAILED,
                    from_os(name),
                    "a fixture world file's name is not UTF-8",
                    expected="UTF-8 file names",
                    found=from_os(name),
                )
            yield name, full


def world_sha256(world: Path) -> str:
    """listing_sha256 of a world folder on disk."""
    return listing_sha256({name: sha256_file(full) for name, full in _walk(world)})
