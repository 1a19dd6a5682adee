"""The `fixture` and `manifest` fields of a `sampled_properties` target as real dependency edges.

They are address strings, which Pants does not read as dependencies: without this rule `dependencies`,
`dependents`, `peek` and `--changed-dependents` do not see that a suite depends on its pin and catalog,
so `pants --changed-since=... --changed-dependents=transitive test` would skip a suite whose epoch or
manifest changed. Inference adds the edges only when the string names an existing target of the right
type; anything else infers nothing, so the gate (`suite.resolve_suite`) reports it as a closing reason
instead of the whole run ending in a Pants error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pants.build_graph.address import Address, AddressInput
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import (
    FieldSet,
    InferDependenciesRequest,
    InferredDependencies,
    StringField,
    Target,
    WrappedTarget,
    WrappedTargetRequest,
)
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel

from epoch_gate_pants.target_types import (
    EpochFixtureTarget,
    PropertyManifestTarget,
    SampledPropertiesDependenciesField,
    SampledPropertiesFixtureField,
    SampledPropertiesManifestField,
)


@dataclass(frozen=True)
class SuiteEdgesFieldSet(FieldSet):
    required_fields = (SampledPropertiesDependenciesField, SampledPropertiesFixtureField,
                       SampledPropertiesManifestField)

    dependencies: SampledPropertiesDependenciesField
    fixture: SampledPropertiesFixtureField
    manifest: SampledPropertiesManifestField


class InferSuiteEdges(InferDependenciesRequest):
    infer_from = SuiteEdgesFieldSet


@dataclass(frozen=True)
class _EdgeRequest:
    address: Address
    field: StringField
    expected: type[Target]


@dataclass(frozen=True)
class _Edge:
    address: Optional[Address]


@rule(desc="Resolve an address field of a sampled-properties suite", level=LogLevel.DEBUG)
async def resolve_edge(request: _EdgeRequest) -> _Edge:
    origin = f"the `{request.field.alias}` field of {request.address}"
    try:
        address = await Get(Address, AddressInput, AddressInput.parse(
            str(request.field.value), relative_to=request.address.spec_path, description_of_origin=origin))
        wrapped = await Get(WrappedTarget, WrappedTargetRequest(address, description_of_origin=origin))
    except Exception:  # noqa: BLE001 - an unresolvable string is the gate's reason to report, not an edge
        return _Edge(None)
    return _Edge(address if isinstance(wrapped.target, request.expected) else None)


@rule(desc="Infer a sampled-properties suite's fixture and manifest dependencies", level=LogLevel.DEBUG)
async def infer_suite_edges(request: InferSuiteEdges) -> InferredDependencies:
    fields = request.field_set
    edges = await MultiGet(
        Get(_Edge, _EdgeRequest(fields.address, fields.fixture, EpochFixtureTarget)),
        Get(_Edge, _EdgeRequest(fields.address, fields.manifest, PropertyManifestTarget)),
    )
    return InferredDependencies(edge.address for edge in edges if edge.address is not None)


def rules() -> list:
    return [*collect_rules(), UnionRule(InferDependenciesRequest, InferSuiteEdges)]
