"""Trusted mode: the candidate's files a suite reaches, read from git objects and never from its BUILD files."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePath

from pants.core.util_rules.source_files import SourceFiles
from pants.core.util_rules.stripped_source_files import StrippedSourceFiles
from pants.engine.fs import CreateDigest, Digest, DigestContents, DigestSubset, FileContent, PathGlobs, Snapshot
from pants.engine.rules import Get, collect_rules, rule
from pants.source.source_root import OptionalSourceRootsResult, SourceRootsRequest

from epoch_gate.candidate import REGULAR_MODES, Candidate, read_blobs
from epoch_gate.closure import closure, imported
from epoch_gate.modules import module_name, top_level
from epoch_gate.protection import strip_root


@dataclass(frozen=True)
class CandidateFiles:
    """Every regular file of the candidate in a folder that holds Python code, as git stores them."""

    digest: Digest


def candidate_files(root: Path, candidate: Candidate) -> list[FileContent]:
    """Read in the goal (git is the deciding process's own reader): symlinks and submodules are left out,
    so nothing of the candidate can point the replay at a path outside it."""
    regular = {path: entry for path, entry in candidate.blobs.items() if entry[0] in REGULAR_MODES}
    python_folders = {posixpath.dirname(path) for path in regular if path.endswith(".py")}
    wanted = {path: oid for path, (_, oid) in regular.items() if posixpath.dirname(path) in python_folders}
    blobs = read_blobs(root, wanted.values())
    return [FileContent(path, blobs[oid], is_executable=regular[path][0] == "100755")
            for path, oid in sorted(wanted.items())]


@dataclass(frozen=True)
class CandidateClosureRequest:
    candidate: CandidateFiles
    oracle: Digest  # the trusted oracle package's files (repository paths), where the imports start
    oracle_places: tuple[tuple[str, str], ...]  # (repository path, sandbox path) of each oracle file


@dataclass(frozen=True)
class CandidateClosure:
    places: tuple[tuple[str, str], ...]  # (candidate path, sandbox path) of every file the suite reaches
    stripped: Digest  # those files at their sandbox paths


@rule(desc="Find the candidate's files a suite imports")
async def candidate_closure(request: CandidateClosureRequest) -> CandidateClosure:
    snapshot = await Get(Snapshot, Digest, request.candidate.digest)
    oracle = await Get(DigestContents, Digest, request.oracle)
    roots = await Get(OptionalSourceRootsResult, SourceRootsRequest.for_files(snapshot.files))
    places: dict[str, str] = {}
    for path in snapshot.files:
        found = roots.path_to_optional_root[PurePath(path)].source_root
        if found is not None:
            places[path] = strip_root(path, [found.path])[1]
    # The oracle's packages are the trusted checkout's: the candidate's copy of them is not the oracle.
    oracle_names = {top_level(stripped) for _, stripped in request.oracle_places}
    modules: dict[str, list[str]] = {}
    for path, stripped in places.items():
        name = module_name(stripped)
        if name is not None and stripped.endswith(".py") and name.split(".")[0] not in oracle_names:
            modules.setdefault(name, []).append(path)
    oracle_module = {path: module_name(stripped) or "" for path, stripped in request.oracle_places}
    starts = set().union(*(imported(c.content, oracle_module.get(c.path, ""), c.path.endswith("__init__.py"))
                           for c in oracle))

    sources = await Get(DigestContents, DigestSubset(request.candidate.digest, PathGlobs(["**/*.py"])))
    by_path = {c.path: c.content for c in sources}
    reached = closure(starts, modules, lambda paths: {path: by_path[path] for path in paths})
    # Package data: the other files beside each module reached (a product reading its own JSON, say).
    folders = {posixpath.dirname(path) for path in reached}
    data = {path for path in places if posixpath.dirname(path) in folders and not path.endswith(".py")}
    chosen = sorted(reached | data)
    subset = await Get(Snapshot, DigestSubset(request.candidate.digest, PathGlobs(chosen)))
    stripped = await Get(StrippedSourceFiles, SourceFiles(subset, ()))
    return CandidateClosure(tuple((path, places[path]) for path in chosen), stripped.snapshot.digest)


def rules() -> list:
    return [*collect_rules()]
