"""The protected set, derived from the build graph rather than a hand-kept list."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pants.base.build_root import BuildRoot
from pants.build_graph.address import BuildFileAddress, BuildFileAddressRequest
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import AllTargets, HydratedSources, HydrateSourcesRequest, SourcesField
from pants.util.logging import LogLevel

import epoch_gate
import epoch_gate_pants
from epoch_gate.changes import ProtectedSet
from epoch_gate_pants.subsystems import GateSubsystem
from epoch_gate_pants.target_types import EpochFixtureTarget, PropertyManifestTarget, SampledPropertiesTarget

ORACLE_TARGETS = (EpochFixtureTarget, PropertyManifestTarget, SampledPropertiesTarget)


@dataclass(frozen=True)
class ProtectedPaths:
    paths: tuple[str, ...]
    globs: tuple[str, ...]

    def as_set(self) -> ProtectedSet:
        return ProtectedSet(frozenset(self.paths), self.globs)


def _in_tree_package(module_file: str, build_root: str) -> list[str]:
    """The package folder of in-repo gate code (as a folder glob); nothing when it is installed."""
    folder = Path(module_file).resolve().parent
    try:
        return [folder.relative_to(Path(build_root).resolve()).as_posix() + "/"]
    except ValueError:
        return []


@rule(desc="Derive the protected set", level=LogLevel.DEBUG)
async def derive_protected_set(all_targets: AllTargets, gate: GateSubsystem) -> ProtectedPaths:
    oracle = [t for t in all_targets if isinstance(t, ORACLE_TARGETS)]
    fields = [field for t in oracle for field in t.field_values.values() if isinstance(field, SourcesField)]
    hydrated = await MultiGet(Get(HydratedSources, HydrateSourcesRequest(f)) for f in fields)
    build_files = await MultiGet(
        Get(BuildFileAddress, BuildFileAddressRequest(t.address, description_of_origin="epoch_gate"))
        for t in oracle
    )
    paths = {path for h in hydrated for path in h.snapshot.files}
    # Globbed sources (inputs, predicates) can gain files: protect what the globs could match too.
    globs = {os.path.join(f.address.spec_path, g) for f in fields for g in (f.globs or ())
             if not g.startswith("!") and any(c in g for c in "*?[")}
    paths |= {b.rel_path for b in build_files}
    paths.add("pants.toml")
    root = BuildRoot().path
    gate_code = [*_in_tree_package(epoch_gate.__file__, root), *_in_tree_package(epoch_gate_pants.__file__, root)]
    evidence = [gate.observations_dir.rstrip("/") + "/", gate.freezes_dir.rstrip("/") + "/"]
    return ProtectedPaths(tuple(sorted(paths)), tuple(sorted({*globs, *gate_code, *evidence, *gate.protected})))


def rules() -> list:
    return [*collect_rules()]
