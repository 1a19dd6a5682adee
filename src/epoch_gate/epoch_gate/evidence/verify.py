"""From the bytes a caller holds (files, a Pants snapshot) to parsed, verified evidence.

Each step returns what it could parse plus the reasons it found; nothing raises, so every check runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from epoch_gate.evidence.catalog import Catalog, parse_catalog
from epoch_gate.evidence.manifest import Manifest, parse_manifest, verify_manifest
from epoch_gate.evidence.observations import Observation, parse_observation_files
from epoch_gate.evidence.pin import Pin, parse_pin, verify_pin
from epoch_gate.reasons import Code, EvidenceError, Reason
from epoch_gate.evidence.replay_result import OBSERVATIONS, SUMMARY, ReplayResult, parse_result


@dataclass(frozen=True)
class PinCheck:
    pin: Optional[Pin]
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class ManifestCheck:
    manifest: Optional[Manifest]
    catalog: Optional[Catalog]
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class ReplayEvidence:
    result: Optional[ReplayResult]
    observations: tuple[Observation, ...]
    witnesses: Mapping[str, bytes]
    reasons: tuple[Reason, ...]


def _missing(path: str, what: str) -> Reason:
    return Reason(Code.ARTIFACT_MISSING, path, expected=what, found="missing", message=f"{what} is missing")


def check_pin(
    *,
    pin_path: str,
    pin_bytes: Optional[bytes],
    generator: str,
    generator_sha256: Optional[str],
    inputs: Mapping[str, Optional[str]],
    world_sha256: Optional[str] = None,
) -> PinCheck:
    if pin_bytes is None:
        return PinCheck(None, (_missing(pin_path, "the epoch pin"),))
    try:
        pin = parse_pin(pin_bytes, pin_path)
    except EvidenceError as error:
        return PinCheck(None, (error.reason,))
    return PinCheck(
        pin,
        tuple(
            verify_pin(
                pin,
                pin_path,
                generator=generator,
                generator_sha256=generator_sha256,
                inputs=inputs,
                world_sha256=world_sha256,
            )
        ),
    )


def check_manifest(
    *, manifest_path: str, manifest_bytes: Optional[bytes], catalog_path: str, catalog_bytes: Optional[bytes]
) -> ManifestCheck:
    reasons: list[Reason] = []
    manifest = catalog = None
    if manifest_bytes is None:
        reasons.append(_missing(manifest_path, "the property manifest"))
    else:
        try:
            manifest = parse_manifest(manifest_bytes, manifest_path)
        except EvidenceError as error:
            reasons.append(error.reason)
    if catalog_bytes is None:
        reasons.append(_missing(catalog_path, "the property catalog"))
    else:
        try:
            catalog = parse_catalog(catalog_bytes, catalog_path)
        except EvidenceError as error:
            reasons.append(error.reason)
    if manifest is not None and catalog is not None:
        reasons.extend(verify_manifest(manifest, catalog, manifest_path))
    return ManifestCheck(manifest, catalog, tuple(reasons))


def check_replay(files: Mapping[str, bytes], display: str) -> ReplayEvidence:
    """`files` is the replay's output: replay.json and observations/<id>.json|.bin, by relative path."""
    if SUMMARY not in files:
        return ReplayEvidence(None, (), {}, (_missing(f"{display}/{SUMMARY}", "the replay summary"),))
    try:
        result = parse_result(files[SUMMARY], f"{display}/{SUMMARY}")
    except EvidenceError as error:
        return ReplayEvidence(None, (), {}, (error.reason,))
    prefix = f"{OBSERVATIONS}/"
    evidence = {name[len(prefix) :]: data for name, data in files.items() if name.startswith(prefix)}
    observations, reasons = parse_observation_files(evidence, f"{display}/{OBSERVATIONS}", "replay")
    witnesses = {o.id: evidence[f"{o.id}.bin"] for o in observations}
    return ReplayEvidence(result, tuple(observations), witnesses, tuple(reasons))
