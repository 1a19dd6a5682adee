"""The `fixture` and `manifest` fields of a `sampled_properties` target as real dependency edges, and the
product code its predicates drive.

They are address strings, which Pants does not read as dependencies: without this rule `dependencies`,
`dependents`, `peek` and `--changed-dependents` do not see that a suite depends on its pin and catalog,
so `pants --changed-since=... --changed-dependents=transitive test` would skip a suite whose epoch or
manifest changed. Inference adds the edges only when the string names an existing target of the right
type; anything else infers nothing, so the gate (`suite.resolve_suite`) reports it as a closing reason
instead of the whole run ending in a Pants error.

The predicates never import the product: they call it through their `product` parameter
(`product.orders.totals.totals_from_record(record)`). Each dotted name they spell, and the suite's
`product_setup`, is mapped to the target owning its longest module prefix, so the suite depends on exactly
the product code its replay serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pants.backend.python.dependency_inference.module_mapper import PythonModuleOwners, PythonModuleOwnersRequest
from pants.backend.python.subsystems.setup import PythonSetup
from pants.build_graph.address import Address, AddressInput
from pants.core.util_rules.source_files import SourceFiles, SourceFilesRequest
from pants.engine.fs import Digest, DigestContents
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

from epoch_gate.change.product_calls import module_candidates, product_names
from epoch_gate_pants.target_types import (
    EpochFixtureTarget,
    PropertyManifestPredicatesField,
    PropertyManifestTarget,
    SampledPropertiesDependenciesField,
    SampledPropertiesFixtureField,
    SampledPropertiesManifestField,
    SampledPropertiesProductSetupField,
)


@dataclass(frozen=True)
class SuiteEdgesFieldSet(FieldSet):
    required_fields = (
        SampledPropertiesDependenciesField,
        SampledPropertiesFixtureField,
        SampledPropertiesManifestField,
    )

    dependencies: SampledPropertiesDependenciesField
    fixture: SampledPropertiesFixtureField
    manifest: SampledPropertiesManifestField
    product_setup: SampledPropertiesProductSetupField


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
    target: Optional[Target] = None


@rule(desc="Resolve an address field of a sampled-properties suite", level=LogLevel.DEBUG)
async def resolve_edge(request: _EdgeRequest) -> _Edge:
    origin = f"the `{request.field.alias}` field of {request.address}"
    try:
        address = await Get(
            Address,
            AddressInput,
            AddressInput.parse(
                str(request.field.value), relative_to=request.address.spec_path, description_of_origin=origin
            ),
        )
        wrapped = await Get(WrappedTarget, WrappedTargetRequest(address, description_of_origin=origin))
    except Exception:  # noqa: BLE001 - an unresolvable string is the gate's reason to report, not an edge
        return _Edge(None)
    if not isinstance(wrapped.target, request.expected):
        return _Edge(None)
    return _Edge(address, wrapped.target)


@dataclass(frozen=True)
class _ProductRequest:
    manifest: Optional[Target]
    setup: Optional[str]  # the suite's `product_setup`, module:function


@dataclass(frozen=True)
class _ProductOwners:
    addresses: tuple[Address, ...]


@rule(desc="Infer the product code a suite's predicates call", level=LogLevel.DEBUG)
async def infer_product_owners(request: _ProductRequest, python_setup: PythonSetup) -> _ProductOwners:
    called: set[str] = {request.setup.replace(":", ".")} if request.setup else set()
    if request.manifest is not None:
        sources = await Get(SourceFiles, SourceFilesRequest([request.manifest[PropertyManifestPredicatesField]]))
        contents = await Get(DigestContents, Digest, sources.snapshot.digest)
        called.update(*(product_names(c.content) for c in contents))
    names = sorted(called)
    candidates = sorted({module for name in names for module in module_candidates(name)})
    resolve = python_setup.default_resolve if python_setup.enable_resolves else None
    owners = await MultiGet(
        Get(PythonModuleOwners, PythonModuleOwnersRequest(module, resolve)) for module in candidates
    )
    owned = {module: found.unambiguous for module, found in zip(candidates, owners) if found.unambiguous}
    found: set[Address] = set()
    for name in names:
        longest = next((module for module in module_candidates(name) if module in owned), None)
        if longest is not None:
            found.update(owned[longest])
    return _ProductOwners(tuple(sorted(found)))


@rule(desc="Infer a sampled-properties suite's fixture and manifest dependencies", level=LogLevel.DEBUG)
async def infer_suite_edges(request: InferSuiteEdges) -> InferredDependencies:
    fields = request.field_set
    edges = await MultiGet(
        Get(_Edge, _EdgeRequest(fields.address, fields.fixture, EpochFixtureTarget)),
        Get(_Edge, _EdgeRequest(fields.address, fields.manifest, PropertyManifestTarget)),
    )
    addresses = [edge.address for edge in edges if edge.address is not None]
    product = await Get(_ProductOwners, _ProductRequest(edges[1].target, fields.product_setup.value))
    return InferredDependencies([*addresses, *product.addresses])


def rules() -> list:
    return [*collect_rules(), UnionRule(InferDependenciesRequest, InferSuiteEdges)]
