"""Rules for `epoch_fixture`: run the generator hermetically, and check the pin against loaded bytes."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Optional

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.engine.addresses import Address
from pants.engine.fs import (
    EMPTY_DIGEST,
    Digest,
    DigestContents,
    DigestEntries,
    CreateDigest,
    DigestSubset,
    FileContent,
    FileEntry,
    MergeDigests,
    PathGlobs,
)
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import HydratedSources, HydrateSourcesRequest, WrappedTarget, WrappedTargetRequest
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.evidence.regressions import Regressions, parse_regressions
from epoch_gate.evidence.verify import PinCheck, check_pin
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.text import last_line
from epoch_gate.evidence.world import listing_sha256, record_counts
from epoch_gate_pants.isolation import GENERATOR_TASKS, Interpreter, Jail
from epoch_gate_pants.subsystems import SampledPropertiesSubsystem
from epoch_gate_pants.target_types import (
    EpochFixtureGeneratorField,
    EpochFixtureInputsField,
    EpochFixturePinField,
    EpochFixtureRegressionsField,
)

WORLD_DIR = "__world"
# A fixed, minimal environment: nothing of the host's (clock zone, locale, hash seed) reaches the output.
HERMETIC_ENV = FrozenDict(
    {
        "PYTHONHASHSEED": "0",
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }
)


@dataclass(frozen=True)
class FixtureFilesRequest:
    address: Address


@dataclass(frozen=True)
class FixtureFiles:
    """The pin, generator and inputs of an `epoch_fixture`, as Pants loaded them."""

    address: Address
    pin_path: str
    generator_path: str
    input_paths: tuple[str, ...]
    sources: Digest
    sha256: FrozenDict[str, str]  # build-root path -> sha256 of the loaded bytes


@dataclass(frozen=True)
class FixtureWorldRequest:
    """The pinned world, or with `seed` (64 hex digits: a held-out seed) the world drawn from it."""

    address: Address
    seed: Optional[str] = field(default=None, repr=False)


@dataclass(frozen=True)
class FixtureWorld:
    """The generator's output under WORLD_DIR/, or why there is none."""

    digest: Digest
    world_sha256: Optional[str]
    failure: Optional[Reason]
    records: FrozenDict[str, int] = FrozenDict()  # bound -> record count: what a complete replay evaluates


@dataclass(frozen=True)
class EpochCheckRequest:
    address: Address


@dataclass(frozen=True)
class EpochCheck:
    files: FixtureFiles
    world: FixtureWorld
    pin: PinCheck


@rule(desc="Load an epoch fixture", level=LogLevel.DEBUG)
async def load_fixture_files(request: FixtureFilesRequest) -> FixtureFiles:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="epoch_gate"))
    target = wrapped.target
    pin, generator, inputs = await MultiGet(
        Get(HydratedSources, HydrateSourcesRequest(target[EpochFixturePinField])),
        Get(HydratedSources, HydrateSourcesRequest(target[EpochFixtureGeneratorField])),
        Get(HydratedSources, HydrateSourcesRequest(target[EpochFixtureInputsField])),
    )
    sources = await Get(Digest, MergeDigests([pin.snapshot.digest, generator.snapshot.digest, inputs.snapshot.digest]))
    entries = await Get(DigestEntries, Digest, sources)
    # Pants' file digests are SHA-256 of the content: the bytes that will actually be loaded.
    sha256 = {e.path: e.file_digest.fingerprint for e in entries if isinstance(e, FileEntry)}
    # Declared paths, not matched ones: a missing pin or generator is a reason, not an IndexError.
    return FixtureFiles(
        request.address,
        target[EpochFixturePinField].file_path,
        target[EpochFixtureGeneratorField].file_path,
        tuple(sorted(inputs.snapshot.files)),
        sources,
        FrozenDict(sha256),
    )


def _generator_argv(python: str, files: FixtureFiles, seed: Optional[str]) -> list[str]:
    argv = [python, "-B", "-S", "-s", files.generator_path, "--out", WORLD_DIR]
    for path in files.input_paths:
        argv += ["--input", path]
    return argv + (["--seed", seed] if seed is not None else [])


def _generator_failed(result: FallibleProcessResult, files: FixtureFiles, seed: Optional[str]) -> Reason:
    if seed is not None:  # the seed is named by its digest only, even in an echo of it
        said = last_line(result.stderr.replace(seed.encode(), b"<seed>"))
        return Reason(
            Code.HELD_OUT_UNAVAILABLE,
            files.generator_path,
            "a held-out world from --seed",
            f"exit {result.exit_code}",
            f"the generator failed with --seed: {said}. Make it take "
            "`--seed HEX` (docs/contract.md), or opt the fixture out with `epoch_fixture(held_out=False)`",
        )
    return Reason(
        Code.GENERATOR_FAILED,
        files.generator_path,
        "exit 0",
        f"exit {result.exit_code}",
        f"the generator failed in its sandbox: {last_line(result.stderr)}",
    )


async def _world_of(output: Digest, generator: str) -> FixtureWorld:
    """The generated world: its listing digest and record counts, or why it is not a world (about the generator
    when it wrote nothing)."""
    entries, contents = await MultiGet(Get(DigestEntries, Digest, output), Get(DigestContents, Digest, output))
    listing = {
        os.path.relpath(e.path, WORLD_DIR): e.file_digest.fingerprint for e in entries if isinstance(e, FileEntry)
    }
    records = record_counts({os.path.relpath(c.path, WORLD_DIR): c.content for c in contents})
    try:
        return FixtureWorld(output, listing_sha256(listing), None, FrozenDict(records))
    except EvidenceError as error:
        return FixtureWorld(output, None, dataclasses.replace(error.reason, path=error.reason.path or generator))


@rule(desc="Generate a fixture world", level=LogLevel.DEBUG)
async def generate_fixture_world(
    request: FixtureWorldRequest, python_setup: PythonSetup, options: SampledPropertiesSubsystem
) -> FixtureWorld:
    constraints = InterpreterConstraints(python_setup.interpreter_constraints)
    files, jail, interpreter = await MultiGet(
        Get(FixtureFiles, FixtureFilesRequest(request.address)),
        Get(Jail, InterpreterConstraints, constraints),
        Get(Interpreter, InterpreterConstraints, constraints),
    )
    if interpreter.python is None:
        return FixtureWorld(
            EMPTY_DIGEST, None, interpreter.reason(Code.GENERATOR_FAILED, files.generator_path, constraints)
        )
    if jail.refusal is not None:
        return FixtureWorld(EMPTY_DIGEST, None, jail.refusal)
    # The sandbox holds the generator and its inputs only: never fixtures a working tree already has.
    inputs_only = await Get(Digest, DigestSubset(files.sources, PathGlobs([files.generator_path, *files.input_paths])))
    argv, env = jail.wrap(
        _generator_argv(interpreter.python.path, files, request.seed), dict(HERMETIC_ENV), GENERATOR_TASKS
    )
    sandbox = await Get(Digest, MergeDigests([inputs_only, jail.tools]))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=argv,
            input_digest=sandbox,
            output_directories=(WORLD_DIR,),
            env=env,
            description=f"Generate the {'held-out' if request.seed else 'fixture'} world of {request.address}",
            level=LogLevel.INFO,  # progress in a CI log: Pants names it while it runs and when it completes
            remote_cache_speculation_delay_millis=options.speculation_delay_millis,
        ),
    )
    if result.exit_code != 0:
        return FixtureWorld(result.output_digest, None, _generator_failed(result, files, request.seed))
    return await _world_of(result.output_digest, files.generator_path)


@rule(desc="Check an epoch pin", level=LogLevel.DEBUG)
async def check_epoch(request: EpochCheckRequest) -> EpochCheck:
    files, world = await MultiGet(
        Get(FixtureFiles, FixtureFilesRequest(request.address)), Get(FixtureWorld, FixtureWorldRequest(request.address))
    )
    pin_only = await Get(Digest, DigestSubset(files.sources, PathGlobs([files.pin_path])))
    contents = await Get(DigestContents, Digest, pin_only)
    pin = check_pin(
        pin_path=files.pin_path,
        pin_bytes=contents[0].content if contents else None,
        generator=files.generator_path,
        generator_sha256=files.sha256.get(files.generator_path),
        inputs={path: files.sha256.get(path) for path in files.input_paths},
        world_sha256=world.world_sha256,
    )
    if world.failure is not None:
        pin = PinCheck(pin.pin, (*pin.reasons, world.failure))
    return EpochCheck(files, world, pin)


@dataclass(frozen=True)
class RegressionWorldRequest:
    address: Address  # the epoch_fixture
    bounds: tuple[str, ...]  # the bounds a suite's catalog reads: the records it judges of the fixture's


@dataclass(frozen=True)
class RegressionWorld:
    """A fixture's regression records over the bounds asked for, and the world they make under WORLD_DIR/
    (no digest when there are none; its failure when the file cannot be read)."""

    file: str
    kept: Regressions
    world: FixtureWorld


@rule(desc="Read a fixture's regression records", level=LogLevel.DEBUG)
async def regression_world(request: RegressionWorldRequest) -> RegressionWorld:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="epoch_gate"))
    field = wrapped.target[EpochFixtureRegressionsField]
    hydrated = await Get(HydratedSources, HydrateSourcesRequest(field))
    contents = await Get(DigestContents, Digest, hydrated.snapshot.digest)
    file, none = field.file_path, FixtureWorld(EMPTY_DIGEST, None, None)
    if not contents:
        return RegressionWorld(file, Regressions(), none)
    try:
        kept = parse_regressions(contents[0].content, file).over(request.bounds)
    except EvidenceError as error:
        return RegressionWorld(file, Regressions(), FixtureWorld(EMPTY_DIGEST, None, error.reason))
    if not kept.records:
        return RegressionWorld(file, kept, none)
    files = kept.world_files()
    digest = await Get(Digest, CreateDigest([FileContent(f"{WORLD_DIR}/{n}", data) for n, data in files.items()]))
    listing = {name: sha256_bytes(data) for name, data in files.items()}
    return RegressionWorld(
        file, kept, FixtureWorld(digest, listing_sha256(listing), None, FrozenDict(record_counts(files)))
    )


def rules() -> list:
    return [*collect_rules()]
