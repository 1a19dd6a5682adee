"""Trusted mode: the candidate's files a suite reaches, read from git objects and never from its BUILD files."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Mapping

from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.source.source_root import OptionalSourceRootsResult, SourceRootsRequest

from epoch_gate.change.candidate import REGULAR_MODES, Candidate, blob_sizes, read_blobs
from epoch_gate.change.closure import MAX_NAME, MAX_NAMES, ImportGraph, imported
from epoch_gate.change.modules import module_name, shadowing, top_level
from epoch_gate.change.protection import strip_root
from epoch_gate.reasons import Code, Reason, fail
from epoch_gate.runner.product.child import unshipped_stub
from epoch_gate.text import from_os

MAX_FILE = 64 * 1024 * 1024  # a larger file is not materialized (and refused if the suite reaches it)
MAX_TOTAL = 512 * 1024 * 1024  # what the deciding process reads of a candidate, at most
COMPILED = (".pyc", ".pyo", ".so", ".pyd")
RUNNER_PACKAGE = "epoch_gate"


@dataclass(frozen=True)
class CandidateFiles:
    """The candidate's regular files in and below folders that hold Python code, as git stores them, and
    the paths there that cannot be materialized as such (symlinks, submodules, names that are not UTF-8,
    oversized files): refused when a suite reaches them."""

    digest: Digest
    irregular: tuple[tuple[str, str], ...] = ()  # (path as git names it, why)


def _below_python(path: str, python_folders: set[str]) -> bool:
    folder = posixpath.dirname(path)
    while True:
        if folder in python_folders:
            return True
        if not folder:
            return False
        folder = posixpath.dirname(folder)


def candidate_files(root: Path, candidate: Candidate) -> tuple[list[FileContent], list[tuple[str, str]]]:
    """Read in the goal (git is the deciding process's own reader), as bytes and nothing else."""
    # Folders holding anything Python imports: source, and compiled code alone (which an import by a built
    # name would load in production)
    python_folders = {posixpath.dirname(path) for path in candidate.entries if path.endswith((".py", *COMPILED))}
    inside = {path: entry for path, entry in candidate.entries.items() if _below_python(path, python_folders)}
    irregular = []
    for path, (mode, _) in sorted(inside.items()):
        if mode not in REGULAR_MODES:
            irregular.append((path, "a symlink" if mode == "120000" else f"git mode {mode}"))
        elif from_os(path) != path:
            irregular.append((path, "a name that is not UTF-8"))
        elif any(c in path for c in "*?[]{}!\\"):  # Pants would read such a path as a glob somewhere
            irregular.append((path, "a name with glob characters"))
        elif path.endswith(COMPILED) or "__pycache__" in path.split("/"):  # Python may load it instead of source
            irregular.append((path, "compiled code, which cannot be reviewed or followed as source"))
    sizes = blob_sizes(root, (oid for path, (mode, oid) in inside.items() if mode in REGULAR_MODES))
    irregular += [
        (path, f"{sizes[oid]} bytes") for path, (mode, oid) in sorted(inside.items()) if sizes.get(oid, 0) > MAX_FILE
    ]
    refused = {path for path, _ in irregular}
    wanted = {path: oid for path, (_, oid) in inside.items() if path not in refused}
    total = sum(sizes.get(oid, 0) for oid in set(wanted.values()))
    if total > MAX_TOTAL:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            ".",
            "the candidate's Python folders are too large to read",
            expected=f"at most {MAX_TOTAL} bytes",
            found=f"{total} bytes",
        )
    blobs = read_blobs(root, wanted.values())
    files = [
        FileContent(path, blobs[oid], is_executable=inside[path][0] == "100755") for path, oid in sorted(wanted.items())
    ]
    return files, [(from_os(path), why) for path, why in irregular]


@dataclass(frozen=True)
class CandidateModules:
    """The candidate's files placed by the trusted configuration's source roots, with their import graph:
    read once per run and shared by every suite's closure (equal when the files are)."""

    files: CandidateFiles
    placed: tuple[tuple[str, str], ...]  # (path, sandbox path): the source roots can move under pantsd
    contents: Mapping[str, FileContent] = field(compare=False, hash=False)
    graph: ImportGraph = field(compare=False, hash=False)


@rule(desc="Read the candidate's Python files")
async def candidate_modules(files: CandidateFiles) -> CandidateModules:
    contents = await Get(DigestContents, Digest, files.digest)
    paths = [c.path for c in contents] + [path for path, _ in files.irregular]
    roots = await Get(OptionalSourceRootsResult, SourceRootsRequest.for_files(paths))
    places: dict[str, str] = {}
    for path in paths:
        found = roots.path_to_optional_root[PurePath(path)].source_root
        if found is not None:
            places[path] = strip_root(path, [found.path])[1]
    by_path = {c.path: c for c in contents if c.path in places}
    graph = ImportGraph(places, {path: c.content for path, c in by_path.items()})
    return CandidateModules(files, tuple(sorted(places.items())), by_path, graph)


@dataclass(frozen=True)
class CandidateClosureRequest:
    candidate: CandidateFiles
    oracle: Digest  # the trusted oracle package's files (repository paths), where the imports start
    oracle_places: tuple[tuple[str, str], ...]  # (repository path, sandbox path) of each oracle file
    product: tuple[str, ...] = ()  # the product's modules the suite depends on: the child imports them by name
    reserved: tuple[str, ...] = ()  # the top-level names of the gate's own in the replay's sandbox
    runner_root: str = ""  # where the repository holds the gate's own package, if it does (as a folder)


@dataclass(frozen=True)
class CandidateClosure:
    places: tuple[tuple[str, str], ...]  # (candidate path, sandbox path) of every file shipped
    stripped: Digest  # those files at their sandbox paths, and the stand-ins
    refusals: tuple[Reason, ...] = ()  # a reached package holding what cannot be shipped as it is
    stand_ins: tuple[str, ...] = ()  # sandbox paths of the stand-ins for top-level modules not shipped


def _stand_ins(places: Mapping[str, str], reached: set[str], excluded: set[str]) -> dict[str, bytes]:
    """A stand-in (`unshipped_stub`) for each module and package of the candidate that the suite's imports
    do not reach, at the first level where it leaves what ships: a top-level module or package, or one
    beside an enclosing package's `__init__`. Any name an import by a built name could ask for stands in
    (a dunder, one that is not an identifier); a name with a dot cannot be asked for. Imported, it ends
    the replay; the module simply missing would let the code fall back to other code."""
    shipped_folders = {posixpath.dirname(places[path]) for path in reached}
    shipped_folders |= {folder for path in shipped_folders for folder in _ancestors(path)}
    found: dict[str, bytes] = {}
    for path, place in sorted(places.items()):
        parts = place.split("/")
        # Not the oracle's names nor the runner's package (their trusted copies serve them), nor the
        # gate's other own names (refused: `_reserved`)
        if path in reached or not place.endswith(".py") or parts[0] in excluded:
            continue
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if depth < len(parts) and prefix in shipped_folders:
                continue
            name = parts[depth - 1][:-3] if depth == len(parts) else parts[depth - 1]
            if name and not any("." in part for part in [*parts[: depth - 1], name]):
                stand_in = prefix if depth == len(parts) else f"{prefix}/__init__.py"
                found.setdefault(stand_in, unshipped_stub(".".join([*parts[: depth - 1], name])))
            break
    # A name that is both a module and a package: the package wins, as it does for the import system.
    return {
        path: text
        for path, text in found.items()
        if not (path.endswith(".py") and not path.endswith("/__init__.py") and f"{path[:-3]}/__init__.py" in found)
    }


def _unreachable(
    places: Mapping[str, str], reached: set[str], reserved: set[str], owners: Mapping[str, str], runner_root: str
) -> list[Reason]:
    """The candidate's files the suite's imports do not reach that can neither ship nor stand in, and so
    may not be: under a top-level name of the gate's own sandbox, or of the oracle's or the runner's
    package from anywhere but its own folder (the child cannot import either name, so an import of it by
    a built name would fall back), and compiled code (a stand-in is source)."""
    unreached = {path: place for path, place in places.items() if path not in reached}
    named = {
        path: place
        for path, place in unreached.items()
        if (top_level(place) in reserved and top_level(place) != RUNNER_PACKAGE)
        or (top_level(place) in owners and not _owned(path, owners[top_level(place)]))
        or (top_level(place) == RUNNER_PACKAGE and not (runner_root and path.startswith(runner_root)))
    }
    refused = shadowing(named, reserved | {RUNNER_PACKAGE} | set(owners))
    refused += [
        Reason(
            Code.PATH_NOT_REGULAR,
            path,
            "Python source",
            place,
            f"the candidate's {path} is compiled code: it can neither be reviewed nor stand in for its module",
        )
        for path, place in sorted(unreached.items())
        if not place.endswith(".py") and module_name(place) is not None
    ]
    return refused


def _owner(path: str, place: str) -> str:
    """The oracle's package folder (or module file) in the repository, from one of its files' paths."""
    root = path[: len(path) - len(place)]
    return f"{root}{place.split('/', 1)[0]}/" if "/" in place else path


def _owned(path: str, owner: str) -> bool:
    return path == owner or (owner.endswith("/") and path.startswith(owner))


def _ancestors(folder: str) -> list[str]:
    found = []
    while folder:
        found.append(folder)
        folder = posixpath.dirname(folder)
    return found


def _unshippable(reached: set[str], irregular: Mapping[str, str], unreadable: Mapping[str, str]) -> tuple[Reason, ...]:
    """The reached files the replay cannot ship: not regular files, or importing more than the gate follows."""
    odd = (
        Reason(
            Code.PATH_NOT_REGULAR,
            path,
            "a regular source file",
            irregular[path],
            f"the candidate's package {posixpath.dirname(path)} holds a file the replay cannot ship as it is",
        )
        for path in sorted(reached)
        if path in irregular
    )
    too_many = (
        Reason(
            Code.ARTIFACT_MALFORMED,
            path,
            f"at most {MAX_NAMES} module names of at most {MAX_NAME} characters",
            unreadable[path],
            "the candidate's module imports more than the gate follows",
        )
        for path in sorted(reached)
        if path in unreadable
    )
    return (*odd, *too_many)


@rule(desc="Find the candidate's files a suite imports")
async def candidate_closure(request: CandidateClosureRequest) -> CandidateClosure:
    modules, oracle = await MultiGet(
        Get(CandidateModules, CandidateFiles, request.candidate), Get(DigestContents, Digest, request.oracle)
    )
    # The oracle's packages are the trusted checkout's: the candidate's copy of them is not the oracle.
    oracle_names = {top_level(stripped) for _, stripped in request.oracle_places}
    oracle_module = {path: module_name(stripped) or "" for path, stripped in request.oracle_places}
    starts = set(request.product).union(
        *(imported(c.content, oracle_module.get(c.path, ""), c.path.endswith("__init__.py")) for c in oracle)
    )
    # Nor is its copy of the runner's package: the trusted plugin's runner is the one that runs.
    reached = modules.graph.reach(starts, oracle_names | {RUNNER_PACKAGE})
    refusals = _unshippable(reached, dict(request.candidate.irregular), modules.graph.unreadable)
    shipped = sorted(path for path in reached if path in modules.contents)
    places = modules.graph.places
    # Two files placed on one sandbox path are refused by the replay's shadowing check; the first is kept
    # here so that building the digest cannot fail first.
    unique = {places[path]: modules.contents[path] for path in reversed(shipped)}
    owners = {top_level(place): _owner(path, place) for path, place in request.oracle_places}
    refusals = (*refusals, *_unreachable(places, reached, set(request.reserved), owners, request.runner_root))
    stand_ins = _stand_ins(places, reached, oracle_names | {RUNNER_PACKAGE, *request.reserved})
    stripped = await Get(
        Digest,
        CreateDigest(
            [
                *(
                    FileContent(place, content.content, is_executable=content.is_executable)
                    for place, content in unique.items()
                ),
                *(FileContent(place, text) for place, text in stand_ins.items()),
            ]
        ),
    )
    return CandidateClosure(tuple((path, places[path]) for path in shipped), stripped, refusals, tuple(stand_ins))


def rules() -> list:
    return [*collect_rules()]
