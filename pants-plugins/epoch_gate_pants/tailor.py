"""`pants tailor`: propose `epoch_fixture`, `property_manifest` and `sampled_properties` targets.

An `epoch_fixture` is proposed where an `EPOCH` pin exists (its generator and inputs are read from the
pin) or, before the first pin, beside a `generate_*.py` generator, with the data files under its folder
as inputs. A `property_manifest` is proposed beside a `catalog.yaml`, and a `sampled_properties` suite
for each fixture and manifest no suite uses yet: the only two, or a pair sharing a name (so a monorepo's
`fixtures/inventory` and `checks/inventory` make one suite, `payments`' another).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import PurePosixPath

from pants.core.goals.tailor import PutativeTarget, PutativeTargets, PutativeTargetsRequest
from pants.engine.fs import DigestContents, PathGlobs, Paths
from pants.build_graph.address import Address, AddressInput
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import AllTargets, Target
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel

from epoch_gate.evidence.pin import parse_pin
from epoch_gate.change.product_calls import old_shape_predicates
from epoch_gate.reasons import EvidenceError
from epoch_gate_pants.subsystems import GateSubsystem
from epoch_gate_pants.target_types import (
    EpochFixtureGeneratorField,
    EpochFixturePinField,
    EpochFixtureTarget,
    PropertyManifestCatalogField,
    PropertyManifestSourceField,
    PropertyManifestTarget,
    SampledPropertiesFixtureField,
    SampledPropertiesManifestField,
    SampledPropertiesTarget,
)

logger = logging.getLogger(__name__)

PIN = EpochFixturePinField.default
CATALOGS = ("catalog.yaml", "catalog.yml")
GENERATORS = "generate_*.py"
PREDICATES = "*_properties.py"
NOT_INPUTS = (".py", ".pyc")


@dataclass(frozen=True)
class PutativeEpochGateTargetsRequest(PutativeTargetsRequest):
    pass


def _address(ptgt: PutativeTarget) -> str:
    return f"{ptgt.path}:{ptgt.name}" if ptgt.path else f"//:{ptgt.name}"


def _relative(path: str, folder: str) -> str | None:
    """`path` relative to `folder`, or None when it lies outside (a BUILD file cannot reach up)."""
    if not folder:
        return path
    return path[len(folder) + 1 :] if path.startswith(folder + "/") else None


def _is_input(path: str) -> bool:
    name = PurePosixPath(path).name
    return not (name.endswith(NOT_INPUTS) or name.startswith(("BUILD", ".")) or name == PIN or "__pycache__" in path)


def _fixture_name(generator: str) -> str:
    stem = PurePosixPath(generator).stem
    return (stem[len("generate_") :] if stem.startswith("generate_") else stem) + "_epoch"


def _from_pin(folder: str, pin_path: str, data: bytes) -> PutativeTarget | None:
    try:
        pin = parse_pin(data, pin_path)
    except EvidenceError as error:
        logger.warning(f"tailor: not proposing an epoch_fixture for {pin_path}: {error.reason.message}")
        return None
    generator = _relative(pin.generator.path, folder)
    inputs = [_relative(i.path, folder) for i in pin.inputs]
    if generator is None or None in inputs:
        logger.warning(f"tailor: {pin_path} names files outside {folder or 'the build root'}; declare it by hand")
        return None
    kwargs: dict = {"generator": generator}
    if inputs:
        kwargs["inputs"] = tuple(inputs)
    return PutativeTarget.for_target_type(
        EpochFixtureTarget,
        folder,
        _fixture_name(generator),
        [PIN],
        kwargs,
        comments=[f"# From the pin of epoch {pin.epoch_id}."],
    )


def _from_generator(folder: str, generator: str, inputs: list[str], alone: bool) -> PutativeTarget:
    name = PurePosixPath(generator).name
    kwargs: dict = {"generator": name}
    comments = ["# Before `pants pin-epoch`: check that the inputs are exactly what the generator reads."]
    if alone and inputs:
        kwargs["inputs"] = tuple(sorted(inputs))
    elif not alone:
        comments = ["# Several generators share this folder: list the inputs this one reads."]
    return PutativeTarget.for_target_type(
        EpochFixtureTarget, folder, _fixture_name(name), [name], kwargs, comments=comments
    )


@dataclass(frozen=True)
class _Side:
    """A fixture or manifest no suite uses yet: its address, folder, and the names it answers to."""

    address: str
    folder: str
    keys: set[str]


def _fixture_keys(folder: str, generator: str) -> set[str]:
    stem = PurePosixPath(generator).stem
    return {PurePosixPath(folder).name, stem[len("generate_") :] if stem.startswith("generate_") else stem} - {""}


def _pairs(fixtures: list[_Side], manifests: list[_Side]) -> list[tuple[_Side, _Side]]:
    """The only fixture with the only manifest; else each manifest with the one fixture sharing its name."""
    if len(fixtures) == 1 and len(manifests) == 1:
        return [(fixtures[0], manifests[0])]
    pairs = []
    for manifest in manifests:
        named = [f for f in fixtures if f.keys & manifest.keys]
        if len(named) == 1:
            pairs.append((named[0], manifest))
    return pairs


def _claimed(fixtures: list[Target], manifests: list[Target]) -> set[str]:
    """The files existing fixtures and manifests already name."""
    claimed = {
        os.path.join(t.address.spec_path, t[f].value)
        for t in fixtures
        for f in (EpochFixturePinField, EpochFixtureGeneratorField)
        if t[f].value
    }
    return claimed | {
        os.path.join(t.address.spec_path, t[f].value)
        for t in manifests
        for f in (PropertyManifestCatalogField, PropertyManifestSourceField)
        if t[f].value
    }


async def _from_pins(unclaimed: list[str]) -> list[PutativeTarget]:
    """An `epoch_fixture` for each unclaimed pin, as the pin itself records it."""
    pins = [p for p in unclaimed if PurePosixPath(p).name == PIN]
    contents = await Get(DigestContents, PathGlobs(pins)) if pins else ()
    found = (_from_pin(os.path.dirname(c.path), c.path, c.content) for c in contents)
    return [ptgt for ptgt in found if ptgt]


async def _from_generators(unclaimed: list[str], claimed: set[str], pinned: set[str]) -> list[PutativeTarget]:
    """An `epoch_fixture` for each unclaimed generator in a folder without a pin, with its folder's data files."""
    generators: dict[str, list[str]] = {}
    for path in unclaimed:
        if PurePosixPath(path).match(GENERATORS) and path not in claimed:
            generators.setdefault(os.path.dirname(path), []).append(path)
    proposals: list[PutativeTarget] = []
    for folder, paths in sorted(generators.items()):
        if folder in pinned:
            continue
        inputs: list[str] = []
        if folder:  # at the build root, "every data file below" would be the whole repository
            listing = await Get(Paths, PathGlobs([os.path.join(folder, "**")]))
            relative = (_relative(f, folder) for f in listing.files if _is_input(f) and f not in claimed)
            inputs = [p for p in relative if p]
        proposals += [_from_generator(folder, path, inputs, len(paths) == 1) for path in sorted(paths)]
    return proposals


def _from_catalogs(unclaimed: list[str]) -> list[PutativeTarget]:
    """A `property_manifest` beside each unclaimed catalog."""
    names = [(path, PurePosixPath(path).name) for path in unclaimed if PurePosixPath(path).name in CATALOGS]
    return [
        PutativeTarget.for_target_type(
            PropertyManifestTarget,
            os.path.dirname(path),
            "manifest",
            [name],
            {} if name == PropertyManifestCatalogField.default else {"catalog": name},
        )
        for path, name in names
    ]


async def _suites(all_targets: AllTargets, proposals: list[PutativeTarget]) -> list[PutativeTarget]:
    """Pair each fixture and manifest no suite uses yet: the only ones, or by name (a manifest folder
    `checks/inventory` with the fixture folder `fixtures/inventory` or generator `generate_inventory.py`)."""
    suites = [t for t in all_targets if isinstance(t, SampledPropertiesTarget)]
    used = await MultiGet(
        Get(
            Address,
            AddressInput,
            AddressInput.parse(str(s[f].value), relative_to=s.address.spec_path, description_of_origin="tailor"),
        )
        for s in suites
        for f in (SampledPropertiesFixtureField, SampledPropertiesManifestField)
    )
    used_specs = {a.spec for a in used}
    free = [t for t in all_targets if t.address.spec not in used_specs]
    free_fixtures = [
        _Side(
            t.address.spec, t.address.spec_path, _fixture_keys(t.address.spec_path, t[EpochFixtureGeneratorField].value)
        )
        for t in free
        if isinstance(t, EpochFixtureTarget)
    ]
    free_fixtures += [
        _Side(_address(p), p.path, _fixture_keys(p.path, p.kwargs.get("generator") or p.triggering_sources[0]))
        for p in proposals
        if p.type_alias == EpochFixtureTarget.alias
    ]
    free_manifests = [
        _Side(t.address.spec, t.address.spec_path, {PurePosixPath(t.address.spec_path).name})
        for t in free
        if isinstance(t, PropertyManifestTarget)
    ]
    free_manifests += [
        _Side(_address(p), p.path, {PurePosixPath(p.path).name})
        for p in proposals
        if p.type_alias == PropertyManifestTarget.alias
    ]
    found = []
    for fixture, manifest in _pairs(free_fixtures, free_manifests):
        predicates = await Get(Paths, PathGlobs([os.path.join(manifest.folder, PREDICATES)]))
        # The code under test is inferred from the product names the predicates call (`product.pkg.mod`).
        kwargs: dict = {"fixture": fixture.address, "manifest": manifest.address}
        if predicates.files:
            kwargs["dependencies"] = tuple(predicates.files)
            for content in await Get(DigestContents, PathGlobs(predicates.files)):
                _warn_old_shape(content.path, content.content)
        found.append(PutativeTarget.for_target_type(SampledPropertiesTarget, manifest.folder, "properties", [], kwargs))
    return found


@rule(level=LogLevel.DEBUG, desc="Determine candidate epoch_gate targets to create")
async def find_putative_epoch_gate_targets(
    request: PutativeEpochGateTargetsRequest, all_targets: AllTargets, gate: GateSubsystem
) -> PutativeTargets:
    if not gate.tailor:
        return PutativeTargets()
    claimed = _claimed(
        [t for t in all_targets if isinstance(t, EpochFixtureTarget)],
        [t for t in all_targets if isinstance(t, PropertyManifestTarget)],
    )
    found = await Get(Paths, PathGlobs, request.path_globs(PIN, GENERATORS, *CATALOGS))
    unclaimed = [p for p in found.files if p not in claimed]
    pinned = await _from_pins(unclaimed)
    claimed |= {os.path.join(p.path, p.kwargs["generator"]) for p in pinned}
    proposals = [
        *pinned,
        *await _from_generators(unclaimed, claimed, {p.path for p in pinned}),
        *_from_catalogs(unclaimed),
    ]
    return PutativeTargets([*proposals, *await _suites(all_targets, proposals)])


def _warn_old_shape(path: str, source: bytes) -> None:
    """A predicate of the old shape (`predicate(record)`, beside the product) would close every replay:
    say so now, with the new shape, rather than after the first gate."""
    old = old_shape_predicates(source)
    if old:
        logger.warning(
            f"{path}: {', '.join(old)} take a record only. A predicate now takes (record, product) "
            "and calls the code under test through `product` (`product.pkg.module.function(...)`) "
            "instead of importing it: see docs/adopting.md, 'Writing predicates'."
        )


def rules() -> list:
    return [*collect_rules(), UnionRule(PutativeTargetsRequest, PutativeEpochGateTargetsRequest)]
