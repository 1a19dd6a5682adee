"""Freezes: a human's note that one observed flake may hold a change until a date, never a test name."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.folders import read_folder
from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.evidence.observations import OBSERVATION_ID
from epoch_gate.reasons import Code, EvidenceError, Reason, fail

FREEZE_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.json$")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Freeze:
    path: str
    observation_id: str
    suite: str  # the sampled_properties target it is judged with, and only with
    epoch_id: str
    expires_on: datetime.date
    reason: str

    def to_json(self) -> dict[str, str]:
        return {
            "observation_id": self.observation_id,
            "suite": self.suite,
            "epoch_id": self.epoch_id,
            "expires_on": self.expires_on.isoformat(),
            "reason": self.reason,
        }

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json()) + b"\n"

    def expired(self, today: datetime.date) -> bool:
        """A freeze holds through the day before expires_on; on that day it is expired."""
        return today >= self.expires_on


def parse_date(value: str, path: str) -> datetime.date:
    if not ISO_DATE.match(value):
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "expires_on must be an ISO date", expected="YYYY-MM-DD", found=value[:80]
        )
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "expires_on is not a real date", expected="YYYY-MM-DD", found=value
        ) from None


def parse_freeze(data: bytes, path: str) -> Freeze:
    raw = strictjson.loads(data, path)
    if isinstance(raw, dict) and ("test" in raw or "test_name" in raw):
        cited = str(raw.get("test", raw.get("test_name")))[:80]
        raise fail(
            Code.FREEZE_CITES_TEST,
            path,
            "a freeze must cite an observation id, not a test name",
            expected="observation_id",
            found=cited,
        )
    raw = strictjson.require_object(
        raw, path, {"observation_id": str, "suite": str, "epoch_id": str, "expires_on": str, "reason": str}
    )
    if not OBSERVATION_ID.match(raw["observation_id"]):
        raise fail(
            Code.FREEZE_CITES_TEST,
            path,
            "a freeze must cite an observation id (<property>-<24 hex>), not a test name",
            expected=OBSERVATION_ID.pattern,
            found=raw["observation_id"][:80],
        )
    if not raw["reason"].strip():
        raise fail(Code.ARTIFACT_MALFORMED, path, "a freeze must say why", expected="a reason", found="empty")
    if not raw["suite"].strip():
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "a freeze must name its suite",
            expected="the address of a sampled_properties target",
            found="empty",
        )
    return Freeze(
        path, raw["observation_id"], raw["suite"], raw["epoch_id"], parse_date(raw["expires_on"], path), raw["reason"]
    )


def parse_freeze_files(files: Mapping[str, bytes], display: str) -> tuple[list[Freeze], list[Reason]]:
    freezes: list[Freeze] = []
    reasons: list[Reason] = []
    for entry in sorted(files):
        shown = f"{display}/{entry}"
        if entry.startswith("."):
            continue
        if not FREEZE_FILE.match(entry):
            reasons.append(
                Reason(Code.ARTIFACT_MALFORMED, shown, "<name>.json", entry, "unexpected file in the freezes folder")
            )
            continue
        try:
            freezes.append(parse_freeze(files[entry], shown))
        except EvidenceError as error:
            reasons.append(error.reason)
    return freezes, reasons


def load_freezes(folder: Path, display: str) -> tuple[list[Freeze], list[Reason]]:
    files, reasons = read_folder(folder, display, strictjson.MAX_BYTES)
    found, more = parse_freeze_files(files, display)
    return found, reasons + more
