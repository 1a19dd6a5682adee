"""The reviewer's tools: `pants pin-epoch` and `pants sample-properties`, writing through the core."""

from __future__ import annotations

from pants.engine.console import Console
from pants.engine.fs import CreateDigest, Digest, FileContent, Workspace
from pants.engine.goal import Goal, GoalSubsystem
from pants.engine.rules import Get, MultiGet, collect_rules, goal_rule
from pants.engine.target import Target, Targets
from pants.option.option_types import IntOption, StrOption
from pants.util.strutil import help_text

from epoch_gate.evidence.manifest import sample
from epoch_gate.evidence.pin import PinnedFile, mint_pin
from epoch_gate.reasons import EvidenceError, Reason
from epoch_gate_pants.fixture import EpochCheck, EpochCheckRequest, FixtureFiles, FixtureFilesRequest
from epoch_gate_pants.formatting import Formatting, FormattingRequest
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest, Suite, SuiteRequest
from epoch_gate_pants.target_types import EpochFixtureTarget, PropertyManifestTarget, SampledPropertiesTarget


class PinEpochSubsystem(GoalSubsystem):
    name = "pin-epoch"
    help = help_text(
        """
        Mint the pin of one `epoch_fixture` (named, or the fixture of the suite named): run its
        generator in a sandbox, hash the generator, its inputs and the fixture world it produced, and
        write the pin. Refuses to give an existing epoch
        id other bytes: a changed generator needs a new `--epoch-id`. Refuses, too, a generator or input
        that the repository's formatters or fixers would rewrite, and prints the `pants fmt` command to run
        first: a formatter run after the pin would move the epoch.
        """
    )
    epoch_id = StrOption(default=None, help="The epoch id to pin (letters, digits, `.`, `_`, `-`).")


class PinEpoch(Goal):
    subsystem_cls = PinEpochSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


class SamplePropertiesSubsystem(GoalSubsystem):
    name = "sample-properties"
    help = help_text(
        """
        Draw the manifest of one `property_manifest` (named, or the manifest of the suite named):
        `--k` properties of its catalog chosen by `--seed` (sha256-rank-v1, the same on every
        interpreter and machine), with their digest.
        The reviewer draws it, never the drafting model; record the seed you used. Refuses a catalog or
        predicate module that the repository's formatters or fixers would rewrite, and prints the
        command to run first.
        """
    )
    seed = IntOption(default=None, help="The seed of the draw (0 to 2**63-1).")
    k = IntOption(default=None, help="How many properties to draw.")


class SampleProperties(Goal):
    subsystem_cls = SamplePropertiesSubsystem
    environment_behavior = Goal.EnvironmentBehavior.LOCAL_ONLY


async def _one(targets: Targets, kind: type[Target], goal: str, console: Console) -> Target | None:
    """The one target of `kind` the specs name, directly or as the fixture or manifest of a suite they
    name (`pants pin-epoch services/payments:suite`)."""
    suites = await MultiGet(
        Get(Suite, SuiteRequest(t.address)) for t in targets if isinstance(t, SampledPropertiesTarget)
    )
    referenced = [s.fixture if kind is EpochFixtureTarget else s.manifest for s in suites]
    found = {t.address: t for t in (*targets, *referenced) if isinstance(t, kind)}
    if len(found) != 1:
        console.print_stderr(
            f"{goal}: name exactly one `{kind.alias}` target or the suite that uses it (found "
            f"{len(found)}), e.g. `pants {goal} path/to:target`"
        )
        return None
    return next(iter(found.values()))


def _refused(console: Console, goal: str, r: Reason) -> None:
    console.print_stderr(f"{goal}: " + "\n".join(r.refusal()))


RECORDS = "the pin records by sha256 or the gate protects"


async def _formatted(console: Console, goal: str, targets: Targets, named: Target) -> bool:
    """Whether the repository's formatters leave as they are the files the two goals record: every named
    suite's generator, inputs, catalog and predicates (so that `pin-epoch … sample-properties <suite>`
    refuses once, naming them all, and one `pants fmt` clears both goals), and the named target's own.
    When not, the goal's refusal is printed."""
    suites = await MultiGet(
        Get(Suite, SuiteRequest(t.address)) for t in targets if isinstance(t, SampledPropertiesTarget)
    )
    fixtures = {s.fixture.address for s in suites if s.fixture is not None}
    manifests = {s.manifest.address for s in suites if s.manifest is not None}
    (fixtures if isinstance(named, EpochFixtureTarget) else manifests).add(named.address)
    pinned = await MultiGet(Get(FixtureFiles, FixtureFilesRequest(a)) for a in sorted(fixtures))
    drawn = await MultiGet(Get(ManifestFiles, ManifestFilesRequest(a)) for a in sorted(manifests))
    paths = {p for f in pinned for p in (f.generator_path, *f.input_paths)}
    paths |= {p for m in drawn for p in (m.catalog_path, *m.predicate_paths)}
    formatting = await Get(Formatting, FormattingRequest(tuple(sorted(paths))))
    for line in formatting.refusal(goal, RECORDS) if formatting.refuses else ():
        console.print_stderr(line)
    return not formatting.refuses


@goal_rule
async def pin_epoch(console: Console, workspace: Workspace, options: PinEpochSubsystem, targets: Targets) -> PinEpoch:
    target = await _one(targets, EpochFixtureTarget, "pin-epoch", console)
    if target is None or not options.epoch_id:
        if target is not None:
            console.print_stderr("pin-epoch: --epoch-id is required")
        return PinEpoch(exit_code=64)
    if not await _formatted(console, "pin-epoch", targets, target):
        return PinEpoch(exit_code=1)
    check = await Get(EpochCheck, EpochCheckRequest(target.address))
    files, world = check.files, check.world
    if world.failure is not None:
        _refused(console, "pin-epoch", world.failure)
        return PinEpoch(exit_code=1)
    # The pin as the check parsed it; a missing or unreadable one is replaced, never merged with.
    existing = check.pin.pin
    try:
        pin = mint_pin(
            epoch_id=options.epoch_id,
            generator=PinnedFile(files.generator_path, files.sha256[files.generator_path]),
            inputs={p: files.sha256[p] for p in files.input_paths},
            world_sha256=world.world_sha256,
            existing=existing,
            path=files.pin_path,
        )
    except EvidenceError as error:
        _refused(console, "pin-epoch", error.reason)
        return PinEpoch(exit_code=1)
    workspace.write_digest(await Get(Digest, CreateDigest([FileContent(files.pin_path, pin.to_bytes())])))
    console.print_stdout(f"pinned epoch {pin.epoch_id} in {files.pin_path}")
    console.print_stdout(f"  generator {pin.generator.path} sha256 {pin.generator.sha256}")
    for item in pin.inputs:
        console.print_stdout(f"  input     {item.path} sha256 {item.sha256}")
    console.print_stdout(f"  world     sha256 {pin.world_sha256}")
    return PinEpoch(exit_code=0)


@goal_rule
async def sample_properties(
    console: Console, workspace: Workspace, options: SamplePropertiesSubsystem, targets: Targets
) -> SampleProperties:
    target = await _one(targets, PropertyManifestTarget, "sample-properties", console)
    if target is None or options.seed is None or options.k is None:
        if target is not None:
            console.print_stderr("sample-properties: --seed and --k are required")
        return SampleProperties(exit_code=64)
    if not await _formatted(console, "sample-properties", targets, target):
        return SampleProperties(exit_code=1)
    files = await Get(ManifestFiles, ManifestFilesRequest(target.address))
    catalog = files.check.catalog
    if catalog is None:
        for reason in files.check.reasons:
            if reason.path.startswith(files.catalog_path):
                _refused(console, "sample-properties", reason)
        return SampleProperties(exit_code=1)
    try:
        manifest = sample(catalog, options.seed, options.k)
    except ValueError as exc:
        console.print_stderr(f"sample-properties: refused: {exc}")
        return SampleProperties(exit_code=1)
    workspace.write_digest(await Get(Digest, CreateDigest([FileContent(files.manifest_path, manifest.to_bytes())])))
    console.print_stdout(
        f"drew {manifest.k} of {len(catalog.properties)} properties with seed {manifest.seed} "
        f"into {files.manifest_path}:"
    )
    for prop in manifest.properties:
        console.print_stdout(f"  {prop.name} ({prop.bound})")
    console.print_stdout(f"manifest sha256 {manifest.manifest_sha256}")
    return SampleProperties(exit_code=0)


def rules() -> list:
    return [*collect_rules()]
