"""Replays a suite's sampled properties over its fixture world, hermetically and cached; `pants test`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Iterable, Optional, Union

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import Pex, PexRequest
from pants.backend.python.util_rules.pex_from_targets import (
    ChosenPythonResolve,
    ChosenPythonResolveRequest,
    RequirementsPexRequest,
)
from pants.backend.python.util_rules.pex_requirements import EntireLockfile
from pants.backend.python.util_rules.python_sources import (
    PythonSourceFiles,
    PythonSourceFilesRequest,
    StrippedPythonSourceFiles,
)
from pants.base.build_root import BuildRoot
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.core.util_rules.stripped_source_files import StrippedSourceFiles
from pants.engine.addresses import Address, Addresses
from pants.engine.fs import (
    EMPTY_DIGEST,
    AddPrefix,
    CreateDigest,
    Digest,
    DigestSubset,
    FileContent,
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

from epoch_gate.evidence import held_out as epoch_gate_held_out
from epoch_gate.evidence.catalog import Property
from epoch_gate.evidence.held_out import PropertyDraw
from epoch_gate.evidence.manifest import properties_bytes
from epoch_gate import runner as epoch_gate_runner
from epoch_gate.runner.jail.isolation import TOOLS_DIR
from epoch_gate.change.modules import module_name, shadowing, top_level, unowned_predicates
from epoch_gate.change.protection import oracle_package, strip_root
from epoch_gate.reasons import Code, Reason
from epoch_gate.runner.requirements import UNPACKED
from epoch_gate_pants.candidate import RUNNER_PACKAGE, CandidateClosure, CandidateClosureRequest, CandidateFiles
from epoch_gate_pants.failures import failure_line
from epoch_gate_pants.fixture import (
    HERMETIC_ENV,
    WORLD_DIR,
    EpochCheck,
    EpochCheckRequest,
    FixtureWorld,
    FixtureWorldRequest,
    RegressionWorld,
    RegressionWorldRequest,
)
from epoch_gate_pants.isolation import Interpreter, Jail
from epoch_gate_pants.runner import RUNNER_DIR, CoreRunner
from epoch_gate_pants.subsystems import SampledPropertiesSubsystem
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest, Suite, SuiteRequest
from epoch_gate_pants.target_types import (
    PropertyManifestPredicatesField,
    SampledPropertiesHeldOutPropertiesField,
    SampledPropertiesMaxWitnessesField,
    SampledPropertiesProductSetupField,
)

REPLAY_DIR = "__replay"
MANIFEST_DIR = "__manifest"
HELD_OUT_DIR = "__held_out"
HELD_OUT_PROPERTIES = f"{HELD_OUT_DIR}/properties.json"  # the properties judged besides (or instead of) the manifest's
REQUIREMENTS_DIR = "__requirements"
# The top-level names of the gate's own in the replay's sandbox: nothing of the product's may be under them
RESERVED_NAMES = (
    RUNNER_PACKAGE,
    RUNNER_DIR,
    WORLD_DIR,
    REPLAY_DIR,
    MANIFEST_DIR,
    HELD_OUT_DIR,
    REQUIREMENTS_DIR,
    UNPACKED,
    TOOLS_DIR,
)
# Isolated mode (-I: no PYTHONPATH, no script folder, no user site; -S: no site-packages): the runner
# first, then the standard library, and nothing of the product. The runner starts one child process for
# the product's code (epoch_gate.runner.product.child), which imports the sandbox's own files only under the
# product's top-level names, after the standard library, so the change can shadow neither.
KEPT = "the regression records of "  # what the replay of a fixture's regression records is over
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
    # The merged tree's draw key again, for held-out properties: the replay also judges the properties of
    # the catalog outside the manifest that the suite's property seed draws (held_out.draw_properties).
    property_key: Optional[str] = field(default=None, repr=False)
    # The replay is over the fixture's regression records, under the manifest's properties and every
    # catalog property over their bounds.
    regressions: bool = False


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
    draw: Optional[PropertyDraw] = None  # the held-out properties drawn, when asked (`property_key`)
    drawn: tuple[Property, ...] = ()  # and those properties, judged after the manifest's
    regressions: Optional[RegressionWorld] = None  # the regression records replayed, when asked
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
    entries = {
        "/".join(path.split("/")[:4])
        for path in (*snapshot.files, *snapshot.dirs)
        if path.split("/")[2:3] == [".deps"] and len(path.split("/")) >= 4
    }
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


def _runner_root(build_root: str) -> str:
    """The folder holding the very package Pants loaded the runner from, when the repository holds it
    ("" for an adopter's: the plugin's distribution, outside the repository)."""
    core = Path(epoch_gate_runner.__file__ or "").resolve().parent.parent.parent  # as runner.runner_files
    return f"{core.relative_to(build_root).as_posix()}/" if core.is_relative_to(build_root) else ""


def _without_runner(placed: dict[str, str], build_root: str) -> dict[str, str]:
    """The predicates import the runner's API (`epoch_gate.runner.api`): the runner's own copy serves
    them, so the files of the very package Pants loaded the runner from (its modules and their data) are
    not shipped again, nor refused as shadowing it. Any other file under its package name still is."""
    root = _runner_root(build_root)
    if not root:
        return placed
    return {
        path: stripped
        for path, stripped in placed.items()
        if not (top_level(stripped) == RUNNER_PACKAGE and path == f"{root}{stripped}")
    }


@dataclass(frozen=True)
class ReplaySourcesRequest:
    """The suite's code and predicates, to place in its replay's sandbox: from its transitive targets,
    or in trusted mode the oracle's from them and the rest from the candidate's files."""

    address: Address
    closure: tuple[Target, ...]
    predicates: PropertyManifestPredicatesField
    manifest: ManifestFiles
    candidate: Optional[CandidateFiles]


@dataclass(frozen=True)
class ReplaySources:
    """What the replay ships besides the world, the manifest and the runner, or why it may not run."""

    code: Digest  # the code under test and the oracle's packages, source roots stripped
    predicates: Digest
    names: tuple[str, ...]  # the sandbox's top-level names (the stand-ins' too)
    oracle: tuple[str, ...]  # the oracle's top-level names: the parent imports only these
    refusals: tuple[Reason, ...] = ()


def _placements(
    unstripped: PythonSourceFiles, predicate_roots: SourceRootsResult, build_root: str
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(every file's place in the merged sandbox, the predicates' places, the oracle's top-level names to
    their packages), worked out before Pants merges the source roots: a path placed twice with other
    bytes would fail that merge, and a path or module provided twice, a file landing on the runner's
    package, a folder of the gate's or the oracle's own package, must be refused before anything runs."""
    predicate_places = {
        str(path): strip_root(str(path), [root.path])[1] for path, root in predicate_roots.path_to_root.items()
    }
    placed = {path: strip_root(path, unstripped.source_roots)[1] for path in unstripped.source_files.snapshot.files}
    placed.update(predicate_places)
    placed = _without_runner(placed, build_root)
    oracle = {
        top_level(stripped): oracle_package(path, predicate_roots.path_to_root[PurePath(path)].path)
        for path, stripped in predicate_places.items()
    }
    return placed, predicate_places, oracle


async def _candidate_code(
    candidate: CandidateFiles,
    unstripped: PythonSourceFiles,
    placed: dict[str, str],
    oracle: dict[str, str],
    runner_root: str,
) -> tuple[dict[str, str], CandidateClosure]:
    """Trusted mode: the oracle's packages from the trusted checkout, everything else the suite imports
    from the candidate's files; nothing of the working tree's product. The predicates call the product by
    name, not by import: the candidate's code ships from the modules the suite depends on in the trusted
    build graph, and whatever they import."""
    oracle_placed = {path: stripped for path, stripped in placed.items() if top_level(stripped) in oracle}
    oracle_digest = await Get(
        Digest, DigestSubset(unstripped.source_files.snapshot.digest, PathGlobs(sorted(oracle_placed)))
    )
    product = tuple(
        sorted(
            {
                name
                for name in map(module_name, placed.values())
                if name is not None and name.split(".")[0] not in oracle
            }
        )
    )
    reached = await Get(
        CandidateClosure,
        CandidateClosureRequest(
            candidate, oracle_digest, tuple(sorted(oracle_placed.items())), product, RESERVED_NAMES, runner_root
        ),
    )
    return oracle_placed, reached


async def _shipped_code(
    stripped: StrippedPythonSourceFiles, oracle_placed: Optional[dict[str, str]], reached: Optional[CandidateClosure]
) -> Digest:
    """The code the sandbox holds: the suite's (or the oracle's and the candidate's), without anything
    under the runner's package, which past the shadowing check is the gate's own."""
    digest = stripped.stripped_source_files.snapshot.digest
    if oracle_placed is not None and reached is not None:
        oracle_code = await Get(Digest, DigestSubset(digest, PathGlobs(sorted(oracle_placed.values()))))
        digest = await Get(Digest, MergeDigests([oracle_code, reached.stripped]))
    return await Get(Digest, DigestSubset(digest, PathGlobs(["**", f"!{RUNNER_PACKAGE}/**"])))


def _unlisted(placed: dict[str, str], reached: Optional[CandidateClosure]) -> list[Reason]:
    """The modules whose top-level name the runner's list of the product's names cannot carry (it is
    comma-separated): imported by that name, the child would not find them and could fall back."""
    stand_ins = {f"(stand-in) {path}": path for path in (reached.stand_ins if reached else ())}
    return [
        Reason(
            Code.MODULE_SHADOWED,
            path,
            "a top-level module name without a comma",
            top_level(stripped),
            f"{path} has a name the replay cannot pass on to its child (a comma): rename it",
        )
        for path, stripped in sorted({**placed, **stand_ins}.items())
        if "," in top_level(stripped)
    ]


@rule(desc="Place a suite's code and predicates for its replay", level=LogLevel.DEBUG)
async def replay_sources(request: ReplaySourcesRequest, build_root: BuildRoot) -> ReplaySources:
    unstripped, predicate_sources = await MultiGet(
        Get(PythonSourceFiles, PythonSourceFilesRequest(request.closure)),
        Get(SourceFiles, SourceFilesRequest([request.predicates])),
    )
    predicate_roots = await Get(SourceRootsResult, SourceRootsRequest.for_files(predicate_sources.snapshot.files))
    placed, predicate_places, oracle = _placements(unstripped, predicate_roots, build_root.path)
    oracle_placed: Optional[dict[str, str]] = None
    reached: Optional[CandidateClosure] = None
    if request.candidate is not None:
        oracle_placed, reached = await _candidate_code(
            request.candidate, unstripped, placed, oracle, _runner_root(build_root.path)
        )
        placed = {**oracle_placed, **dict(reached.places)}
    refusals = (
        *(reached.refusals if reached else ()),
        *shadowing(placed, RESERVED_NAMES, oracle),
        *_unlisted(placed, reached),
        *unowned_predicates(request.manifest.check.catalog, predicate_places.values(), request.manifest.catalog_path),
    )
    if refusals:
        return ReplaySources(EMPTY_DIGEST, EMPTY_DIGEST, (), (), tuple(refusals))
    stripped, predicates = await MultiGet(
        Get(StrippedPythonSourceFiles, PythonSourceFiles, unstripped),
        Get(StrippedSourceFiles, SourceFiles, predicate_sources),
    )
    code = await _shipped_code(stripped, oracle_placed, reached)
    # The stand-ins' names too: the child imports a stand-in (and so ends) where it would miss the module.
    names = {top_level(path) for path in (*placed.values(), *(reached.stand_ins if reached else ()))}
    return ReplaySources(code, predicates.snapshot.digest, tuple(sorted(names)), tuple(sorted(oracle)))


MAX_PATCH = 256  # the releases of a minor series `_shortest` checks: CPython's have stayed under 30


def suite_constraints(closure: Iterable[Target], python_setup: PythonSetup) -> InterpreterConstraints:
    """The interpreter a suite's replay runs on (its runner and predicates, and the product in its child),
    chosen as Pants' own goals choose one for the code: the constraints of every target the suite reaches
    (their `interpreter_constraints`, else `[python].interpreter_constraints`), all at once."""
    found = InterpreterConstraints.create_from_targets(closure, python_setup)
    return _shortest(found) if found is not None else InterpreterConstraints(python_setup.interpreter_constraints)


def _shortest(constraints: InterpreterConstraints) -> InterpreterConstraints:
    """The same interpreters, each requirement that pins one minor series (`==3.9.*`) and whose other
    clauses every release of that series meets (`>=3.9,<3.12`, the core's range) written as the series
    alone: the suites whose targets allow just what `[python]` does then share its interpreter search
    (a process of its own for each spelling, seconds each in a run without pantsd)."""
    shortest = []
    for requirement in constraints:
        series = [s.version[:-2] for s in requirement.specifier if s.operator == "==" and s.version.endswith(".*")]
        whole = len(series) == 1 and all(
            requirement.specifier.contains(f"{series[0]}.{patch}") for patch in range(MAX_PATCH)
        )
        shortest.append(f"{requirement.project_name}=={series[0]}.*" if whole else str(requirement))
    return InterpreterConstraints(shortest)


async def _requirements(
    address: Address, constraints: InterpreterConstraints, python_setup: PythonSetup
) -> Union[tuple[Digest, tuple[str, ...]], Reason]:
    """The suite's third-party requirements (wheels only, `[python].resolves_to_only_binary`: one that
    needs a build fails here), unpacked under REQUIREMENTS_DIR, and their import path entries. With
    resolves, the whole of the suite's resolve: what production installs whatever the candidate's code
    imports (its import of a locked package the trusted graph does not infer must not fall back here)."""
    try:
        if python_setup.enable_resolves:
            resolve = await Get(ChosenPythonResolve, ChosenPythonResolveRequest(Addresses([address])))
            pex_request = PexRequest(
                output_filename="requirements.pex",
                internal_only=True,
                requirements=EntireLockfile(resolve.lockfile),
                interpreter_constraints=constraints,
                description=f"Resolve {resolve.name} for the replay of {address}",
            )
            requirements = await Get(Pex, PexRequest, pex_request)
        else:
            requirements = await Get(
                Pex, RequirementsPexRequest([address], hardcoded_interpreter_constraints=constraints)
            )
    except Exception as error:  # noqa: BLE001 - any failure to resolve is a reason, never a traceback
        return Reason(
            Code.REQUIREMENTS_UNAVAILABLE,
            str(address),
            "the suite's third-party requirements from its " "resolve's lockfile, as wheels",
            failure_line(error),
            "the replay's third-party requirements could not be resolved: regenerate the lockfile "
            "(`pants generate-lockfiles`), with wheels for every requirement",
        )
    digest = await Get(Digest, AddPrefix(requirements.digest, REQUIREMENTS_DIR))
    return digest, await _requirement_paths(digest)


async def _manifest_only(manifest: ManifestFiles, drawn: tuple[Property, ...]) -> tuple[Digest, str]:
    """The manifest alone under MANIFEST_DIR, and its path there; and the held-out properties drawn, when
    there are any, at HELD_OUT_PROPERTIES."""
    name = manifest.manifest_path.rsplit("/", 1)[-1]
    folder = manifest.manifest_path[: -len(name)].rstrip("/")
    digest = await Get(Digest, DigestSubset(manifest.sources, PathGlobs([manifest.manifest_path])))
    if folder:
        digest = await Get(Digest, RemovePrefix(digest, folder))
    digest = await Get(Digest, AddPrefix(digest, MANIFEST_DIR))
    if drawn:
        extra = FileContent(HELD_OUT_PROPERTIES, properties_bytes(drawn))
        digest = await Get(Digest, MergeDigests([digest, await Get(Digest, CreateDigest([extra]))]))
    return digest, f"{MANIFEST_DIR}/{name}"


def _properties(
    request: ReplayRequest, suite: Suite, manifest: ManifestFiles, epoch: EpochCheck, epoch_id: str
) -> tuple[Optional[PropertyDraw], tuple[Property, ...], tuple[Reason, ...]]:
    """The held-out properties this replay judges besides the manifest's: those the suite's property seed
    draws from the catalog outside the manifest, when the request has the tree's draw key; and why the
    draw cannot be judged, whatever it picks: a catalog property over a bound the pinned world lacks."""
    catalog, parsed = manifest.check.catalog, manifest.check.manifest
    if request.property_key is None:
        return None, (), ()
    if catalog is None or parsed is None:
        return PropertyDraw(False, "the manifest or its catalog cannot be read"), (), ()
    sampled = {p.name for p in parsed.properties}
    unbound = sorted(
        (p.name, p.bound)
        for p in catalog.properties
        if p.name not in sampled and epoch.world.records.get(p.bound, 0) == 0
    )
    if unbound:
        not_drawn = PropertyDraw(False, "the catalog has properties over bounds the world lacks")
        if request.held_out_key is not None:  # the pinned world's replay says why, once
            return not_drawn, (), ()
        found = ", ".join(f"{name} (over {bound})" for name, bound in unbound)
        why = Reason(
            Code.BOUND_MISSING,
            manifest.catalog_path,
            "every catalog property over a bound the pinned world holds",
            found[:500],
            "a held-out draw may pick any catalog property outside the manifest, and the pinned world has no "
            "record for these: give the world their bounds, or take them out of the catalog",
        )
        return not_drawn, (), (why,)
    count = suite.target[SampledPropertiesHeldOutPropertiesField].value
    seed = epoch_gate_held_out.property_seed(request.property_key, str(request.address), epoch_id)
    drawn = epoch_gate_held_out.draw_properties(catalog, parsed, seed, count)
    if not drawn:
        why = "held_out_properties is 0" if count == 0 else "the catalog has no property outside the manifest"
        return PropertyDraw(False, why), (), ()
    names = tuple(p.name for p in drawn)
    draw = PropertyDraw(True, seed_sha256=epoch_gate_held_out.seed_sha256(seed), names=names, count=str(count))
    return draw, drawn, ()


def _kept_properties(manifest: ManifestFiles, kept: RegressionWorld) -> tuple[Property, ...]:
    """Every catalog property over a bound with regression records, whatever the manifest samples: what
    the replay of those records judges, instead of the manifest's."""
    catalog, bounds = manifest.check.catalog, kept.kept.counts()
    return tuple(p for p in catalog.properties if p.bound in bounds) if catalog is not None else ()


async def _world(
    request: ReplayRequest, fixture: Address, epoch: EpochCheck, epoch_id: str
) -> tuple[FixtureWorld, Optional[HeldOutWorld]]:
    """The world to replay over: the pinned one, or the one the generator draws from this suite's seed."""
    if request.held_out_key is None:
        return epoch.world, None
    seed = epoch_gate_held_out.seed(request.held_out_key, str(request.address), epoch_id)
    world = await Get(FixtureWorld, FixtureWorldRequest(fixture, seed))
    return world, HeldOutWorld(epoch_gate_held_out.seed_sha256(seed), world)


async def _replay_process(
    request: ReplayRequest,
    suite: Suite,
    epoch_id: str,
    manifest: ManifestFiles,
    world: FixtureWorld,
    world_name: str,
    drawn: tuple[Property, ...],
    sources: ReplaySources,
    python: str,
    constraints: InterpreterConstraints,
    jail: Jail,
    runner: CoreRunner,
    options: SampledPropertiesSubsystem,
    python_setup: PythonSetup,
) -> Union[Process, Reason]:
    """The replay's process, or why its third-party requirements cannot ship."""
    properties = manifest.check.manifest.properties if manifest.check.manifest and world_name != KEPT else ()
    requirements = await _requirements(request.address, constraints, python_setup)
    if isinstance(requirements, Reason):
        return requirements
    requirements_digest, requirement_paths = requirements
    manifest_digest, manifest_path = await _manifest_only(manifest, drawn)
    setup = suite.target[SampledPropertiesProductSetupField].value
    # Exactly the world, the manifest, the predicates, the code under test, its third-party requirements
    # and the runner: the cache key.
    sandbox = await Get(
        Digest,
        MergeDigests(
            [
                runner.digest,
                sources.code,
                sources.predicates,
                world.digest,
                manifest_digest,
                requirements_digest,
                jail.tools,
            ]
        ),
    )
    argv, env = jail.wrap(
        [
            python,
            "-I",
            "-B",
            "-S",
            "-c",
            BOOT.format(runner=RUNNER_DIR),
            "replay",
            "--manifest",
            manifest_path,
            *(
                [f"--{'properties' if world_name == KEPT else 'held-out-properties'}={HELD_OUT_PROPERTIES}"]
                if drawn
                else []
            ),
            "--world",
            WORLD_DIR,
            "--suite",
            str(request.address),
            "--epoch-id",
            epoch_id,
            "--out",
            REPLAY_DIR,
            "--max-witnesses",
            str(suite.target[SampledPropertiesMaxWitnessesField].value),
            *([f"--product-setup={setup}"] if setup else []),
            "--sandbox-names",
            ",".join(sources.names),
            "--oracle-names",
            ",".join(sources.oracle),
            *(f"--child-path={path}" for path in requirement_paths),
            f"--children={options.replay_children}",  # in the argv, so in the cache key: a product that
            # keeps state across records may answer otherwise with another count, never with another load
            *jail.child_arguments(options.child_limits),
        ],
        dict(HERMETIC_ENV),
        options.child_limits.tasks(options.replay_children),
        clock_for_child=True,
    )
    return Process(
        argv=argv,
        input_digest=sandbox,
        output_directories=(REPLAY_DIR,),
        env=env,
        description=f"Replay {len(properties)} sampled properties"
        f"{f' and {len(drawn)} held-out' if drawn and properties else ''}"
        f"{f' {len(drawn)} catalog properties' if not properties else ''} of {request.address} over "
        f"{sum(world.records.get(b, 0) for b in {p.bound for p in (*properties, *drawn)}):,} records of "
        f"{world_name}epoch {epoch_id}",
        level=LogLevel.INFO,  # progress in a CI log: Pants names it while it runs and when it completes
        timeout_seconds=options.timeout,
        cache_scope=ProcessCacheScope.PER_SESSION if request.force else ProcessCacheScope.SUCCESSFUL,
        remote_cache_speculation_delay_millis=options.speculation_delay_millis,
    )


async def _set_up(
    request: ReplayRequest,
    suite: Suite,
    epoch_id: str,
    manifest: ManifestFiles,
    world: FixtureWorld,
    world_name: str,
    drawn: tuple[Property, ...],
    dependencies: SuiteDependencies,
    python_setup: PythonSetup,
    runner: CoreRunner,
    options: SampledPropertiesSubsystem,
) -> Union[Process, tuple[Reason, ...]]:
    """The replay's process (its sources placed, an interpreter found, the jail probed), or why it cannot run."""
    try:
        constraints = suite_constraints(dependencies.closure, python_setup)
    except Exception as error:  # noqa: BLE001 - constraints that cannot be merged are a reason, not a traceback
        return (
            Reason(
                Code.REPLAY_FAILED,
                str(request.address),
                "interpreter constraints the suite's targets agree on",
                failure_line(error),
                "the interpreter_constraints of the targets the suite reaches cannot be merged: give them one "
                "interpreter",
            ),
        )
    gate_constraints = InterpreterConstraints(python_setup.interpreter_constraints)
    sources, interpreter, jail, gate_jail = await MultiGet(
        Get(
            ReplaySources,
            ReplaySourcesRequest(
                request.address,
                dependencies.closure,
                suite.manifest[PropertyManifestPredicatesField],
                manifest,
                request.candidate,
            ),
        ),
        Get(Interpreter, InterpreterConstraints, constraints),
        Get(Jail, InterpreterConstraints, constraints),
        Get(Jail, InterpreterConstraints, gate_constraints),
    )
    if interpreter.python is None:
        return (interpreter.reason(Code.REPLAY_FAILED, str(request.address), constraints),)
    if jail.refusal is not None:
        return (jail.refusal,)
    isolated = (jail.isolation.jailed, jail.isolation.fixed_clock)
    if isolated != (gate_jail.isolation.jailed, gate_jail.isolation.fixed_clock):
        # The report and the statement say how the gate isolated what it judged: one jail for every replay
        return (
            Reason(
                Code.ISOLATION_UNAVAILABLE,
                str(request.address),
                gate_jail.isolation.description,
                jail.isolation.description,
                f"the suite's interpreter ({constraints}) is not isolated as the gate's is, so the report "
                "would misstate how it was judged: make the jail hold for both",
            ),
        )
    if sources.refusals:
        return sources.refusals
    process = await _replay_process(
        request,
        suite,
        epoch_id,
        manifest,
        world,
        world_name,
        drawn,
        sources,
        interpreter.python.path,
        constraints,
        jail,
        runner,
        options,
        python_setup,
    )
    return (process,) if isinstance(process, Reason) else process


@rule(desc="Replay sampled properties", level=LogLevel.DEBUG)
async def replay_sampled_properties(
    request: ReplayRequest, python_setup: PythonSetup, runner: CoreRunner, options: SampledPropertiesSubsystem
) -> ReplayRun:
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
    kept: Optional[RegressionWorld] = None
    if request.regressions:
        catalog = manifest.check.catalog
        bounds = tuple(sorted({p.bound for p in catalog.properties})) if catalog is not None else ()
        kept = await Get(RegressionWorld, RegressionWorldRequest(suite.fixture.address, bounds))
        world, held_out, draw, drawn, undrawable = kept.world, None, None, _kept_properties(manifest, kept), ()
        world_name = KEPT
    else:
        world, held_out = await _world(request, suite.fixture.address, epoch, pin.epoch_id)
        draw, drawn, undrawable = _properties(request, suite, manifest, epoch, pin.epoch_id)
        world_name = "a held-out world of " if held_out else ""

    def refused(*reasons: Reason) -> ReplayRun:
        return ReplayRun(request.address, epoch, manifest, None, EMPTY_DIGEST, reasons, held_out, draw, drawn, kept)

    if kept is not None and kept.world.failure is None and not drawn:
        return refused()  # no record kept, or no property over their bounds: nothing to replay
    if undrawable:
        return refused(*undrawable)
    if world.failure is not None:
        return refused(world.failure)
    if dependencies.failure is not None:
        return refused(
            Reason(
                Code.ARTIFACT_MALFORMED,
                str(request.address),
                "the suite's dependencies resolve in the build graph",
                dependencies.failure,
                "the suite's transitive dependencies could not be resolved: fix the address "
                "or import the error names",
            )
        )
    process = await _set_up(
        request,
        suite,
        pin.epoch_id,
        manifest,
        world,
        world_name,
        drawn,
        dependencies,
        python_setup,
        runner,
        options,
    )
    if not isinstance(process, Process):
        return refused(*process)
    result = await Get(FallibleProcessResult, Process, process)
    output = await Get(Digest, RemovePrefix(result.output_digest, REPLAY_DIR))
    return ReplayRun(request.address, epoch, manifest, result, output, (), held_out, draw, drawn, kept)


def rules() -> list:
    return collect_rules()
