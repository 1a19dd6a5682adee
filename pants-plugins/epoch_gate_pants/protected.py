"""The protected set, derived from the build graph and the options system rather than a hand-kept list."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.target_types import PythonRequirementsField
from pants.base.build_root import BuildRoot
from pants.core.target_types import TargetGeneratorSourcesHelperSourcesField, TargetGeneratorSourcesHelperTarget
from pants.build_graph.address import BuildFileAddress, BuildFileAddressRequest
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import AllTargets, HydratedSources, HydrateSourcesRequest, SourcesField
from pants.option.global_options import GlobalOptions
from pants.source.source_root import SourceRootsRequest, SourceRootsResult
from pants.util.logging import LogLevel

import epoch_gate
import epoch_gate_pants
from epoch_gate.change.protection import ProtectedSet, inside, oracle_package, shaping_files
from epoch_gate_pants.subsystems import GateSubsystem
from epoch_gate_pants.target_types import (
    EpochFixtureTarget,
    PropertyManifestPredicatesField,
    PropertyManifestTarget,
    SampledPropertiesTarget,
)

ORACLE_TARGETS = (EpochFixtureTarget, PropertyManifestTarget, SampledPropertiesTarget)
# Read from the build root whatever the options say: a .pants.rc by default; another pants*.toml a CI
# job may name in PANTS_CONFIG_FILES; what the scie-pants launcher reads before Pants starts (a `.env` it
# exports, a `.pants.bootstrap` file it sources with bash); and the launcher itself, with the pins and the
# configuration of `epoch-gate launcher`'s (which installs them into the Pants that holds CI's keys, and
# gives Pants its configuration however Pants is started).
CONFIG_GLOBS = ("pants*.toml", ".pants.rc", "pantsrc", ".env", ".pants.bootstrap", "pants", "3rdparty/bootstrap/")


@dataclass(frozen=True)
class ProtectedPaths:
    paths: tuple[str, ...]
    globs: tuple[str, ...]
    requirements: tuple[str, ...] = ()  # what the product is installed with (`_requirement_paths`)

    def as_set(self) -> ProtectedSet:
        return ProtectedSet(frozenset(self.paths), self.globs, frozenset(self.requirements))


async def _requirement_paths(all_targets: AllTargets, python_setup: PythonSetup) -> set[str]:
    """What the product is installed with, from the options system and the build graph: each resolve's
    lockfile, the files requirement targets are generated from (requirements.txt, pyproject.toml,
    Pipfile.lock) and, without resolves, the BUILD files declaring requirements, whose strings then decide."""
    found = set(python_setup.resolves.values()) if python_setup.enable_resolves else set()
    helpers = [t for t in all_targets if isinstance(t, TargetGeneratorSourcesHelperTarget)]
    found |= {path for t in helpers if (path := t[TargetGeneratorSourcesHelperSourcesField].file_path)}
    if not python_setup.enable_resolves:
        declaring = [t for t in all_targets if t.has_field(PythonRequirementsField)]
        build_files = await MultiGet(
            Get(BuildFileAddress, BuildFileAddressRequest(t.address, description_of_origin="epoch_gate"))
            for t in declaring
        )
        found |= {b.rel_path for b in build_files}
    return found


def _in_tree_package(module_file: str, build_root: str) -> list[str]:
    """The package folder of in-repo gate code (as a folder glob); nothing when it is installed."""
    folder = inside(build_root, str(Path(module_file).resolve().parent))
    return [] if folder is None else [folder + "/"]


def _configuration(global_options: GlobalOptions, build_root: str) -> set[str]:
    """Every configuration file Pants was told to read, and every folder its plugins are imported from,
    that lies inside the repository."""
    files = {inside(build_root, p) for p in (*global_options.pants_config_files, *global_options.pantsrc_files)}
    folders = {inside(build_root, p) for p in (*global_options.pythonpath, *sys.path)}
    # The build root itself on a path would protect everything: the gate's own shadowing check covers it.
    return {f for f in files if f} | {f + "/" for f in folders if f}


@rule(desc="Derive the protected set", level=LogLevel.DEBUG)
async def derive_protected_set(
    all_targets: AllTargets, gate: GateSubsystem, global_options: GlobalOptions, python_setup: PythonSetup
) -> ProtectedPaths:
    oracle = [t for t in all_targets if isinstance(t, ORACLE_TARGETS)]
    fields = [field for t in oracle for field in t.field_values.values() if isinstance(field, SourcesField)]
    hydrated = await MultiGet(Get(HydratedSources, HydrateSourcesRequest(f)) for f in fields)
    build_files = await MultiGet(
        Get(BuildFileAddress, BuildFileAddressRequest(t.address, description_of_origin="epoch_gate")) for t in oracle
    )
    paths = {path for h in hydrated for path in h.snapshot.files}
    declared = {os.path.join(f.address.spec_path, g) for f in fields for g in (f.globs or ()) if not g.startswith("!")}
    # A declared file stays protected when it is deleted; globbed sources (inputs, predicates) can gain
    # files: protect what the globs could match too.
    globs = {g for g in declared if any(c in g for c in "*?[")}
    paths |= declared - globs
    paths |= {b.rel_path for b in build_files}

    predicates = [
        p for f, h in zip(fields, hydrated) if isinstance(f, PropertyManifestPredicatesField) for p in h.snapshot.files
    ]
    roots = await Get(SourceRootsResult, SourceRootsRequest.for_files(predicates))
    packages = {oracle_package(str(path), root.path) for path, root in roots.path_to_root.items()}

    folders = {os.path.dirname(p) for p in paths} | {t.address.spec_path for t in oracle}
    root = BuildRoot().path
    gate_code = {*_in_tree_package(epoch_gate.__file__, root), *_in_tree_package(epoch_gate_pants.__file__, root)}
    evidence = {gate.observations_dir.rstrip("/") + "/", gate.freezes_dir.rstrip("/") + "/"}
    globs |= (
        packages
        | shaping_files(folders, global_options.build_patterns)
        | set(CONFIG_GLOBS)
        | _configuration(global_options, root)
        | gate_code
        | evidence
        | set(gate.protected)
    )
    # git's ignore and attribute files above any protected folder can rewrite its bytes on checkout.
    plain = [g.rstrip("/") for g in globs if g.endswith("/") and not any(c in g for c in "*?[")]
    globs |= shaping_files(plain, ())
    requirements = await _requirement_paths(all_targets, python_setup)
    return ProtectedPaths(tuple(sorted(paths - globs)), tuple(sorted(globs)), tuple(sorted(requirements)))


def rules() -> list:
    return [*collect_rules()]
