"""Observations: a replay's evidence. `<id>.bin` holds the exact witness record, `<id>.json` its status."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.folders import read_folder
from epoch_gate.evidence.atomic import create_file
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.reasons import Code, EvidenceError, Reason, fail

OBSERVATION_ID = re.compile(r"^[a-z][a-z0-9_]{0,63}-[0-9a-f]{24}$")
STATUSES = ("fail", "flake")
MAX_WITNESS_BYTES = 4 * 1024 * 1024


def observation_id(suite: str, prop: str, witness: bytes) -> str:
    """Content-addressed: the same failure of the same suite has the same id on every machine, and two
    suites that share a property name and a witness's bytes never share an id."""
    # The names as a JSON list, then NUL, then the bytes: no suite and property pair reads as another.
    digest = sha256_bytes(canonical_json([suite, prop]) + b"\0" + witness)
    return f"{prop}-{digest[:24]}"


@dataclass(frozen=True)
class Observation:
    id: str
    suite: str  # the address of the sampled_properties target whose replay found it
    epoch_id: str
    property: str
    status: str
    rerun_passed: bool
    witness_sha256: str
    bound: str
    line: int
    detail: str
    source: str  # "replay" or "archive": where the gate found it

    @property
    def is_flake(self) -> bool:
        return self.status == "flake" and self.rerun_passed

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "suite": self.suite,
            "epoch_id": self.epoch_id,
            "property": self.property,
            "status": self.status,
            "rerun_passed": self.rerun_passed,
            "witness_sha256": self.witness_sha256,
            "bound": self.bound,
            "line": self.line,
            "detail": self.detail,
        }


def make_observation(
    *,
    suite: str,
    epoch_id: str,
    prop: str,
    status: str,
    rerun_passed: bool,
    witness: bytes,
    bound: str,
    line: int,
    detail: str,
) -> Observation:
    return Observation(
        observation_id(suite, prop, witness),
        suite,
        epoch_id,
        prop,
        status,
        rerun_passed,
        sha256_bytes(witness),
        bound,
        line,
        detail,
        "replay",
    )


def write_observation(folder: Path, observation: Observation, witness: bytes) -> None:
    """Bytes first, status second: a status record never exists without its witness."""
    create_file(folder / f"{observation.id}.bin", witness)
    create_file(folder / f"{observation.id}.json", canonical_json(observation.to_json()) + b"\n")


def parse_observation(data: bytes, witness: Optional[bytes], path: str, stem: str, source: str) -> Observation:
    raw = strictjson.require_object(
        strictjson.loads(data, path),
        path,
        {
            "id": str,
            "suite": str,
            "epoch_id": str,
            "property": str,
            "status": str,
            "rerun_passed": bool,
            "witness_sha256": str,
        },
        optional={"bound": str, "line": int, "detail": str},
    )
    if raw["id"] != stem or not OBSERVATION_ID.match(raw["id"]):
        raise fail(
            Code.OBSERVATION_ID_MISMATCH,
            path,
            "observation id does not name its file",
            expected=stem,
            found=raw["id"][:80],
        )
    if raw["status"] not in STATUSES:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "unknown observation status",
            expected="/".join(STATUSES),
            found=raw["status"][:80],
        )
    if raw["status"] == "flake" and not raw["rerun_passed"]:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "a flake is a failure whose rerun passed",
            expected="rerun_passed=true",
            found="false",
        )
    if witness is None:
        raise fail(
            Code.OBSERVATION_WITNESS_MISSING,
            path,
            "a status record without its bytes is not evidence",
            expected=f"{stem}.bin",
            found="missing",
        )
    got = sha256_bytes(witness)
    if got != raw["witness_sha256"]:
        raise fail(
            Code.OBSERVATION_WITNESS_MISMATCH,
            path,
            "witness bytes do not match witness_sha256",
            expected=raw["witness_sha256"][:80],
            found=got,
        )
    derived = observation_id(raw["suite"], raw["property"], witness)
    if derived != raw["id"]:
        raise fail(
            Code.OBSERVATION_ID_MISMATCH,
            path,
            "id is not derived from the suite, the property and the witness bytes",
            expected=derived,
            found=raw["id"],
        )
    return Observation(
        raw["id"],
        raw["suite"],
        raw["epoch_id"],
        raw["property"],
        raw["status"],
        raw["rerun_passed"],
        raw["witness_sha256"],
        raw.get("bound", ""),
        raw.get("line", 0),
        raw.get("detail", ""),
        source,
    )


def parse_observation_files(
    files: Mapping[str, bytes], display: str, source: str
) -> tuple[list[Observation], list[Reason]]:
    """Every observation among {file name: bytes}, validated; each bad one becomes a reason instead."""
    found: list[Observation] = []
    reasons: list[Reason] = []
    for entry in sorted(files):
        if entry.startswith("."):
            continue  # a crashed writer's temp file is not evidence
        stem, _, suffix = entry.rpartition(".")
        shown = f"{display}/{entry}"
        if suffix == "bin":
            continue  # read with its status record; bytes alone are not evidence, and harmless
        if suffix != "json" or not OBSERVATION_ID.match(stem):
            reasons.append(
                Reason(
                    Code.ARTIFACT_MALFORMED,
                    shown,
                    "<property>-<24 hex>.json|.bin",
                    entry,
                    "unexpected file in the observations folder",
                )
            )
            continue
        try:
            found.append(parse_observation(files[entry], files.get(f"{stem}.bin"), shown, stem, source))
        except EvidenceError as error:
            reasons.append(error.reason)
    return found, reasons


def load_observations(folder: Path, display: str, source: str) -> tuple[list[Observation], list[Reason]]:
    files, reasons = read_folder(folder, display, MAX_WITNESS_BYTES)
    found, more = parse_observation_files(files, display, source)
    return found, reasons + more
