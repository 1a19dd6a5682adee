"""Replays a suite's sampled properties over its fixture world, hermetically and cached; `pants test`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Optional

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import Pex
from pants.backend.python.util_rules.pex_from_targets import RequirementsPexRequest
from pants.backend.python.util_rules.python_sources import (
    PythonSourceFiles,
    PythonSourceFilesRequest,
    StrippedPythonSourceFiles,
)
from pants.base.build_root import BuildRoot
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.core.util_rules.stripped_source_files import StrippedSourceFiles
from pants.engine.addresses import Address
from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    Digest,
    DigestSubset,
    MergeDigests,
    PathGlobs,
    RemovePrefix,
    Snapshot,
)
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import InvalidFieldException, Target, TransitiveTargets, TransitiveTargetsRequest
from pants.source.source_root import SourceRootsRequest, SourceRootsResult
from pants.util.logging import LogLevel

from epoch_gate import held_out as epoch_gate_held_out
from epoch_gate import runner as epoch_gate_runner
from epoch_gate.isolation import TOOLS_DIR
from epoch_gate.modules import module_name, shadowing, top_level, unowned_predicates
from epoch_gate.protection import oracle_package, strip_root
from epoch_gate.reasons import Code, Reason
from epoch_gate.requirements import UNPACKED
from epoch_gate_pants.candidate import RUNNER_PACKAGE, CandidateClosure, CandidateClosureRequest, CandidateFiles
from epoch_gate_pants.failures import failure_line
from epoch_gate_pants.fixture import (
    HERMETIC_ENV,
    WORLD_DIR,
    EpochCheck,
    EpochCheckRequest,
    FixtureWorld,
    FixtureWorldRequest,
)
from epoch_gate_pants.isolation import Interpreter, Jail
from epoch_gate_pants.runner import RUNNER_ROOT, CoreRunner
from epoch_gate_pants.subsystems import SampledPropertiesSubsystem
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest, Suite, SuiteRequest
from epoch_gate_pants.target_types import (
    PropertyManifestPredicatesField,
    SampledPropertiesMaxWitnessesField,
)

REPLAY_DIR = "__replay"
MANIFEST_DIR = "__manifest"
REQUIREMENTS_DIR = "__requirements"
# Isolated mode (-I: no PYTHONPATH, no script folder, no user site; -S: no site-packages): the runner
# first, then the standard library, and nothing of the product. The runner starts one child process for
# the product's code (epoch_gate.runner.child), which imports the sandbox's own files only under the
# product's top-level names, after the standard library, so the change can shadow neither.
BOOT = """import sys
sys.path.insert(0, {runner!r})
from epoch_gate.runner.main import main
sys.exit(main())
"""


@dataclass(frozen=True)
class ReplayRequest:
    address: Address
    force: bool = False
    # Trusted mode: the candidate's files (from git objects), which stand in for the code under test in
    # place of the working tree's; the oracle's own packages still come from the trusted checkout.
    candidate: Optional[CandidateFiles] = None
    # The merged tree's held-out draw key (held_out.draw_key): the replay is over the world the generator
    # draws from this suite's seed, not over the pinned one.
    held_out_key: Optional[str] = field(default=None, repr=False)


@dataclass(frozen=True)
class HeldOutWorld:
    """The held-out world a replay ran over, and its seed's sha256 (the seed itself goes no further)."""

    seed_sha256: str
    world: FixtureWorld


@dataclass(frozen=True)
class ReplayRun:
    """A suite's replay: the process result and its output (replay.json, observations/), or, when the
    pin or manifest cannot be read, no process and the reasons why."""

    address: Address
    epoch: EpochCheck
    manifest: ManifestFiles
    result: Optional[FallibleProcessResult]
    output: Digest
    refusals: tuple[Reason, ...] = ()  # why the sandbox was not run: a module provided twice, say
    held_out: Optional[HeldOutWorld] = None  # the held-out world replayed, when not the pinned one
    # Compared, unlike the result's metadata: a replay that runs again with the same output is then a new
    # value, so a memoized caller (the gate's `_Runs`, a test result) is recomputed rather than cleaned,
    # and does not hand back the earlier run's metadata (which would call this run's replay cached).
    result_run_id: Optional[int] = field(init=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "result_run_id", self.result.metadata.source_run_id if self.result else None)

    @property
    def reasons(self) -> tuple[Reason, ...]:
        return (*self.epoch.pin.reasons, *self.manifest.check.reasons, *self.refusals)


async def _requirement_paths(requirements: Digest) -> tuple[str, ...]:
    """The import path entries of a packed requirements PEX: one installed wheel per `.deps/` entry."""
    snapshot = await Get(Snapshot, Digest, requirements)
    entries = {"/".join(path.split("/")[:4]) for path in (*snapshot.files, *snapshot.dirs)
               if path.split("/")[2:3] == [".deps"] and len(path.split("/")) >= 4}
    return tuple(sorted(entries))


@dataclass(frozen=True)
class SuiteDependenciesRequest:
    address: Address


@dataclass(frozen=True)
class SuiteDependencies:
    """A suite's transitive targets, or why the build graph cannot give them."""

    closure: tuple[Target, ...]
    failure: Optional[str]


@rule(desc="Resolve a suite's dependencies", level=LogLevel.DEBUG)
async def resolve_suite_dependencies(request: SuiteDependenciesRequest) -> SuiteDependencies:
    try:
        transitive = await Get(TransitiveTargets, TransitiveTargetsRequest([request.address]))
    except Exception as error:  # noqa: BLE001 - a dependency that does not resolve is a reason, not a traceback
        return SuiteDependencies((), failure_line(error))
    return SuiteDependencies(tuple(transitive.closure), None)


def _without_runner(placed: dict[str, str], build_root: str) -> dict[str, str]:
    """The predicates import the runner's API (`epoch_gate.runner.judging`): the runner's own copy serves
    them, so the files of the very package Pants loaded the runner from (its modules and their data) are
    not shipped again, nor refused as shadowing it. Any other file under its package name still is."""
    core = Path(epoch_gate_runner.__file__ or "").resolve().parent.parent.parent  # as runner.runner_files
    if not core.is_relative_to(build_root):  # an adopter's: the plugin's distribution, outside the repository
        return placed
    root = core.relative_to(build_root).as_posix()
    return {path: stripped for path, stripped in placed.items()
            if not (top_level(stripped) == RUNNER_PACKAGE and path == f"{root}/{stripped}")}


@rule(desc="Replay sampled properties", level=LogLevel.DEBUG)
async def replay_sampled_properties(request: ReplayRequest, python_setup: PythonSetup, runner: CoreRunner,
                                    options: SampledPropertiesSubsystem, build_root: BuildRoot) -> ReplayRun:
    suite = await Get(Suite, SuiteRequest(request.address))
    if suite.problem is not None or suite.fixture is None or suite.manifest is None:
        raise InvalidFieldException(suite.problem.message if suite.problem else str(request.address))
    # The build graph's part (dependency inference) runs while the fixture world waits for the jail's
    # probe: neither needs the other.
    epoch, manifest, dependencies = await MultiGet(
        Get(EpochCheck, EpochCheckRequest(suite.fixture.address)),
        Get(ManifestFiles, ManifestFilesRequest(suite.manifest.address)),
        Get(SuiteDependencies, SuiteDependenciesRequest(request.address)),
    )
    pin, parsed = epoch.pin.pin, manifest.check.manifest
    if pin is None or parsed is None or epoch.world.failure is not None:
        return ReplayRun(request.address, epoch, manifest, None, EMPTY_DIGEST)
    world, held_out = epoch.world, None
    if request.held_out_key is not None:
        seed = epoch_gate_held_out.seed(request.held_out_key, str(request.address), pin.epoch_id)
        world = await Get(FixtureWorld, FixtureWorldRequest(suite.fixture.address, seed))
        held_out = HeldOutWorld(epoch_gate_held_out.seed_sha256(seed), world)
        if world.failure is not None:
            return ReplayRun(request.address, epoch, manifest, None, EMPTY_DIGEST, (world.failure,), held_out)
    if dependencies.failure is not None:
        return ReplayRun(request.address, epoch, manifest, None, EMPTY_DIGEST, held_out=held_out, refusals=(Reason(
            Code.ARTIFACT_MALFORMED, str(request.address), "the suite's dependencies resolve in the build graph",
            dependencies.failure, "the suite's transitive dependencies could not be resolved: fix the address "
            "or import the error names"),))

    predicates_field = suite.manifest[PropertyManifestPredicatesField]
    constraints = InterpreterConstraints(python_setup.interpreter_constraints)
    unstripped, predicate_sources, interpreter, jail = await MultiGet(
        Get(PythonSourceFiles, PythonSourceFilesRequest(dependencies.closure)),
        Get(SourceFiles, SourceFilesRequest([predicates_field])),
        Get(Interpreter, InterpreterConstraints, constraints),
        Get(Jail),
    )
    python = interpreter.python
    if python is None:
        return ReplayRun(request.address, epoch, manifest, None, EMPTY_DIGEST, held_out=held_out, refusals=
                         (interpreter.reason(Code.REPLAY_FAILED, str(request.address), constraints),))
    predicate_roots = await Get(SourceRootsResult, SourceRootsRequest.for_files(predicate_sources.snapshot.files))
    # Every file's place in the merged sandbox, worked out before Pants merges the source roots (a path
    # placed twice with other bytes would fail that merge): a path or module provided twice, a file
    # landing on the runner's package, a folder of the gate's or the oracle's own package, is refused
    # before anything runs.
    predicate_places = {str(path): strip_root(str(path), [root.path])[1]
                        for path, root in predicate_roots.path_to_root.items()}
    placed = {path: strip_root(path, unstripped.source_roots)[1] for path in unstripped.source_files.snapshot.files}
    placed.update(predicate_places)
    placed = _without_runner(placed, build_root.path)
    oracle = {top_level(stripped): oracle_package(path, predicate_roots.path_to_root[PurePath(path)].path)
              for path, stripped in predicate_places.items()}
    code_digest, closure_refusals, stand_ins = None, (), ()
    if request.candidate is not None:
        # Trusted mode: the oracle's packages from the trusted checkout, everything else the suite imports
        # from the candidate's files; nothing of the working tree's product.
        oracle_placed = {path: stripped for path, stripped in placed.items() if top_level(stripped) in oracle}
        oracle_digest = await Get(Digest, DigestSubset(unstripped.source_files.snapshot.digest,
                                                       PathGlobs(sorted(oracle_placed))))
        # The predicates call the product by name, not by import: the candidate's code ships from the
        # modules the suite depends on in the trusted build graph, and whatever they import.
        product = tuple(sorted({name for name in map(module_name, placed.values())
                                if name is not None and name.split(".")[0] not in oracle}))
        reached = await Get(CandidateClosure, CandidateClosureRequest(
            request.candidate, oracle_digest, tuple(sorted(oracle_placed.items())), product))
        placed = {**oracle_placed, **dict(reached.places)}
        code_digest = reached.stripped
        closure_refusals, stand_ins = reached.refusals, reached.stand_ins
    reserved = ("epoch_gate", RUNNER_ROOT, WORLD_DIR, REPLAY_DIR, MANIFEST_DIR, REQUIREMENTS_DIR, UNPACKED,
                TOOLS_DIR)
    refusals = (*closure_refusals, *shadowing(placed, reserved, oracle),
                *unowned_predicates(manifest.check.catalog, predicate_places.values(), manifest.catalog_path))
    if refusals:
        return ReplayRun(request.address, epoch, manifest, None, EMPTY_DIGEST, held_out=held_out, refusals=tuple(refusals))
    try:  # wheels only ([python].resolves_to_only_binary): a requirement that needs a build fails here
        requirements = await Get(Pex, RequirementsPexRequest([request.address]))
    except Exception as error:  # noqa: BLE001 - any failure to resolve is a reason, never a traceback
        return ReplayRun(request.address, epoch, manifest, None, EMPTY_DIGEST, held_out=held_out, refusals=(Reason(
            Code.REQUIREMENTS_UNAVAILABLE, str(request.address), "the suite's third-party requirements from "
            "its resolve's lockfile, as wheels", failure_line(error),
            "the replay's third-party requirements could not be resolved: regenerate the lockfile "
            "(`pants generate-lockfiles`), with wheels for every requirement"),))
    code, predicates, manifest_only = await MultiGet(
        Get(StrippedPythonSourceFiles, PythonSourceFiles, unstripped),
        Get(StrippedSourceFiles, SourceFiles, predicate_sources),
        Get(Digest, DigestSubset(manifest.sources, PathGlobs([manifest.manifest_path]))),
    )
    if code_digest is not None:
        oracle_code = await Get(Digest, DigestSubset(code.stripped_source_files.snapshot.digest,
                                                     PathGlobs(sorted(placed[p] for p in oracle_placed))))
        code_digest = await Get(Digest, MergeDigests([oracle_code, code_digest]))
    else:
        code_digest = code.stripped_source_files.snapshot.digest
    # Past the shadowing check, whatever the code holds under the runner's package is the gate's own.
    code_digest = await Get(Digest, DigestSubset(code_digest, PathGlobs(["**", f"!{RUNNER_PACKAGE}/**"])))
    # The stand-ins' names too: the child imports a stand-in (and so ends) where it would miss the module.
    names = sorted({top_level(stripped) for stripped in (*placed.values(), *stand_ins)})
    manifest_name = manifest.manifest_path.rsplit("/", 1)[-1]
    manifest_dir = manifest.manifest_path[: -len(manifest_name)].rstrip("/")
    if manifest_dir:
        manifest_only = await Get(Digest, RemovePrefix(manifest_only, manifest_dir))
    manifest_only = await Get(Digest, AddPrefix(manifest_only, MANIFEST_DIR))
    requirements_digest = await Get(Digest, AddPrefix(requirements.digest, REQUIREMENTS_DIR))
    requirement_paths = await _requirement_paths(requirements_digest)
    # Exactly the world, the manifest, the predicates, the code under test, its third-party requirements
    # and the runner: the cache key.
    sandbox = await Get(Digest, MergeDigests([
        runner.digest, code_digest, predicates.snapshot.digest,
        world.digest, manifest_only, requirements_digest, jail.tools,
    ]))
    max_witnesses = suite.target[SampledPropertiesMaxWitnessesField].value
    argv, env = jail.wrap(
        [python.path, "-I", "-B", "-S", "-c", BOOT.format(runner=RUNNER_ROOT), "replay",
         "--manifest", f"{MANIFEST_DIR}/{manifest_name}", "--world", WORLD_DIR, "--suite", str(request.address),
         "--epoch-id", pin.epoch_id,
         "--out", REPLAY_DIR, "--max-witnesses", str(max_witnesses), "--sandbox-names", ",".join(names),
         "--oracle-names", ",".join(sorted(oracle)),
         *(f"--child-path={path}" for path in requirement_paths),
         *jail.child_arguments(options.child_limits)],
        dict(HERMETIC_ENV))
    result = await Get(FallibleProcessResult, Process(
        argv=argv,
        input_digest=sandbox,
        output_directories=(REPLAY_DIR,),
        env=env,
        description=f"Replay {len(parsed.properties)} sampled properties of {request.address} "
                    f"over {'a held-out world of ' if held_out else ''}epoch {pin.epoch_id}",
        level=LogLevel.DEBUG,
        timeout_seconds=options.timeout,
        cache_scope=ProcessCacheScope.PER_SESSION if request.force else ProcessCacheScope.SUCCESSFUL,
        remote_cache_speculation_delay_millis=options.speculation_delay_millis,
    ))
    output = await Get(Digest, RemovePrefix(result.output_digest, REPLAY_DIR))
    return ReplayRun(request.address, epoch, manifest, result, output, held_out=held_out)


def rules() -> list:
    return collect_rules()
