"""A suite: one `sampled_properties` target with the `epoch_fixture` and `property_manifest` it names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pants.build_graph.address import Address, AddressInput
from pants.engine.fs import Digest, DigestContents, MergeDigests
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import (
    HydratedSources,
    HydrateSourcesRequest,
    InvalidFieldException,
    StringField,
    Target,
    WrappedTarget,
    WrappedTargetRequest,
)
from pants.util.logging import LogLevel

from epoch_gate.evidence.verify import ManifestCheck, check_manifest
from epoch_gate.reasons import Code, Reason
from epoch_gate_pants.target_types import (
    EpochFixtureTarget,
    PropertyManifestCatalogField,
    PropertyManifestPredicatesField,
    PropertyManifestSourceField,
    PropertyManifestTarget,
    SampledPropertiesFixtureField,
    SampledPropertiesManifestField,
)


@dataclass(frozen=True)
class SuiteRequest:
    address: Address


@dataclass(frozen=True)
class Suite:
    """A suite whose `fixture` and `manifest` name targets of the right types; else `problem` says why."""

    target: Target
    fixture: Optional[Target]
    manifest: Optional[Target]
    problem: Optional[Reason] = None


@dataclass(frozen=True)
class ManifestFiles:
    manifest_path: str
    catalog_path: str
    predicate_paths: tuple[str, ...]
    sources: Digest
    check: ManifestCheck


async def _referenced(target: Target, field_type: type[StringField], expected: type[Target]) -> Target:
    origin = f"the `{field_type.alias}` field of {target.address}"
    address = await Get(
        Address,
        AddressInput,
        AddressInput.parse(
            str(target[field_type].value), relative_to=target.address.spec_path, description_of_origin=origin
        ),
    )
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(address, description_of_origin=origin))
    if not isinstance(wrapped.target, expected):
        raise InvalidFieldException(
            f"{origin} must name an `{expected.alias}` target, not the " f"`{wrapped.target.alias}` target {address}."
        )
    return wrapped.target


@rule(desc="Resolve a sampled-properties suite", level=LogLevel.DEBUG)
async def resolve_suite(request: SuiteRequest) -> Suite:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="epoch_gate"))
    target = wrapped.target
    field: type[StringField] = SampledPropertiesFixtureField
    try:
        fixture = await _referenced(target, field, EpochFixtureTarget)
        field = SampledPropertiesManifestField
        manifest = await _referenced(target, field, PropertyManifestTarget)
    except Exception as error:  # noqa: BLE001 - any resolution failure is a closing reason, not a Pants error
        return Suite(
            target,
            None,
            None,
            Reason(
                Code.ARTIFACT_MALFORMED,
                str(target.address),
                f"`{field.alias}` naming an existing target of the " "right type",
                str(target[field].value),
                f"{target.address}: {str(error).splitlines()[0][:300]}",
            ),
        )
    return Suite(target, fixture, manifest)


@dataclass(frozen=True)
class ManifestFilesRequest:
    address: Address


@rule(desc="Check a property manifest", level=LogLevel.DEBUG)
async def check_property_manifest(request: ManifestFilesRequest) -> ManifestFiles:
    wrapped = await Get(WrappedTarget, WrappedTargetRequest(request.address, description_of_origin="epoch_gate"))
    target = wrapped.target
    manifest, catalog, predicates = await MultiGet(
        Get(HydratedSources, HydrateSourcesRequest(target[PropertyManifestSourceField])),
        Get(HydratedSources, HydrateSourcesRequest(target[PropertyManifestCatalogField])),
        Get(HydratedSources, HydrateSourcesRequest(target[PropertyManifestPredicatesField])),
    )
    manifest_contents, catalog_contents = await MultiGet(
        Get(DigestContents, Digest, manifest.snapshot.digest),
        Get(DigestContents, Digest, catalog.snapshot.digest),
    )
    sources = await Get(
        Digest, MergeDigests([manifest.snapshot.digest, catalog.snapshot.digest, predicates.snapshot.digest])
    )
    manifest_path = target[PropertyManifestSourceField].file_path
    catalog_path = target[PropertyManifestCatalogField].file_path
    check = check_manifest(
        manifest_path=manifest_path,
        manifest_bytes=manifest_contents[0].content if manifest_contents else None,
        catalog_path=catalog_path,
        catalog_bytes=catalog_contents[0].content if catalog_contents else None,
    )
    return ManifestFiles(manifest_path, catalog_path, tuple(sorted(predicates.snapshot.files)), sources, check)


def rules() -> list:
    return [*collect_rules()]
