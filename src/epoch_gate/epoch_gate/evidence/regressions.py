"""Regression records: world records a candidate's product once failed, kept so that every later judgement
replays them under every property of the suite's catalog over their bound, whatever the manifest samples
and whatever a draw picks.

The file sits beside its fixture's pin (`epoch_fixture(regressions=...)`, a protected path). Each record
is named by the sha256 of its exact bytes, which the file carries as text: reading it checks every
record against its digest. Adding one is a reviewer's act (`epoch-gate keep-witness`): it takes a
failure's witness from a gate's report and refuses bytes whose digest is not the report's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Optional

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.catalog import BOUND, NAME
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.evidence.observations import MAX_WITNESS_BYTES, OBSERVATION_ID, observation_id
from epoch_gate.evidence.world import SUFFIX
from epoch_gate.reasons import Code, fail

SCHEMA = 1


@dataclass(frozen=True)
class Regression:
    """One kept record: its bound, its exact bytes, and the failure it was kept from."""

    bound: str
    record: bytes
    suite: str  # the suite whose replay failed on it
    property: str  # the property it failed
    observation_id: str

    @property
    def sha256(self) -> str:
        return sha256_bytes(self.record)

    def to_json(self) -> dict[str, object]:
        return {
            "bound": self.bound,
            "record_sha256": self.sha256,
            "record": self.record.decode("utf-8"),
            "suite": self.suite,
            "property": self.property,
            "observation_id": self.observation_id,
        }


@dataclass(frozen=True)
class Regressions:
    """A fixture's regression records, in the file's order: by bound, then by digest."""

    records: tuple[Regression, ...] = ()

    def counts(self) -> dict[str, int]:
        """{bound: records kept}."""
        found: dict[str, int] = {}
        for kept in self.records:
            found[kept.bound] = found.get(kept.bound, 0) + 1
        return found

    def over(self, bounds: Iterable[str]) -> "Regressions":
        """The records of these bounds only (a fixture's records over bounds a suite's catalog reads)."""
        wanted = set(bounds)
        return Regressions(tuple(r for r in self.records if r.bound in wanted))

    def world_files(self) -> dict[str, bytes]:
        """The records as a fixture world: one `<bound>.jsonl` per bound, a record a line."""
        lines: dict[str, list[bytes]] = {}
        for kept in self.records:
            lines.setdefault(kept.bound, []).append(kept.record)
        return {f"{bound}{SUFFIX}": b"".join(line + b"\n" for line in found) for bound, found in sorted(lines.items())}

    def to_bytes(self) -> bytes:
        return canonical_json({"schema": SCHEMA, "records": [r.to_json() for r in self.records]}) + b"\n"

    def kept(self, added: Regression) -> "Regressions":
        """These records and `added`, in the file's order (a record already kept for its bound is kept once)."""
        if any(r.bound == added.bound and r.record == added.record for r in self.records):
            return self
        return Regressions(tuple(sorted((*self.records, added), key=lambda r: (r.bound, r.sha256))))


def _malformed(path: str, message: str, expected: str, found: str) -> Exception:
    return fail(Code.ARTIFACT_MALFORMED, path, message, expected=expected, found=found[:120])


def record_problem(bound: str, record: bytes) -> Optional[str]:
    """Why `record` cannot be kept as a record of `bound`, or None: a world record is one line holding a
    JSON object, as the world's files hold them (docs/contract.md)."""
    if not BOUND.match(bound):
        return f"the bound {bound[:80]!r} is not a bound's name"
    if not record or b"\n" in record:
        return "a record is one non-empty line"
    if len(record) > MAX_WITNESS_BYTES:
        return f"a record of over {MAX_WITNESS_BYTES} bytes"
    try:
        value = json.loads(record.decode("utf-8"), parse_constant=_refuse)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "a record is a JSON object in UTF-8"
    return None if isinstance(value, dict) else "a record is a JSON object in UTF-8"


def _refuse(token: str) -> None:
    raise ValueError(token)


def parse_regressions(data: bytes, path: str) -> Regressions:
    """The file's records, each checked against its digest; EvidenceError naming the first problem."""
    raw = strictjson.require_object(strictjson.loads(data, path), path, {"schema": int, "records": list})
    if raw["schema"] != SCHEMA:
        raise _malformed(path, "the regression records have another schema", str(SCHEMA), str(raw["schema"]))
    found: list[Regression] = []
    for index, item in enumerate(raw["records"]):
        where = f"{path}#records[{index}]"
        entry = strictjson.require_object(
            item,
            where,
            {
                "bound": str,
                "record_sha256": str,
                "record": str,
                "suite": str,
                "property": str,
                "observation_id": str,
            },
        )
        record = entry["record"].encode("utf-8")
        problem = record_problem(entry["bound"], record)
        if problem is not None:
            raise _malformed(where, problem, "a record of a bound", entry["record"])
        if not NAME.match(entry["property"]):
            raise _malformed(where, "not a property's name", "[a-z][a-z0-9_]{0,63}", entry["property"])
        if not OBSERVATION_ID.match(entry["observation_id"]):
            raise _malformed(where, "not an observation id", "<property>-<24 hex>", entry["observation_id"])
        kept = Regression(entry["bound"], record, entry["suite"], entry["property"], entry["observation_id"])
        derived = observation_id(kept.suite, kept.property, record)
        if entry["observation_id"] != derived:
            raise fail(
                Code.ARTIFACT_MALFORMED,
                where,
                "the observation id is not derived from the suite, the property and the record",
                expected=derived,
                found=entry["observation_id"][:80],
            )
        if entry["record_sha256"] != kept.sha256:
            raise fail(
                Code.ARTIFACT_MALFORMED,
                where,
                "the record's bytes do not match record_sha256: records are kept by `epoch-gate keep-witness` only",
                expected=entry["record_sha256"][:80],
                found=kept.sha256,
            )
        found.append(kept)
    for index in range(1, len(found)):  # each after the one before: by bound, then digest, none twice
        before, this = found[index - 1], found[index]
        if (before.bound, before.sha256) >= (this.bound, this.sha256):
            raise _malformed(
                f"{path}#records[{index}]",
                "records are kept once each, by bound then digest",
                f"after {before.bound} {before.sha256[:12]}",
                f"{this.bound} {this.sha256[:12]}",
            )
    return Regressions(tuple(found))


@dataclass(frozen=True)
class RegressionStatus:
    """What the report says of a suite's regression records: the file, how many it keeps per bound, the
    world they make, and whether their replay came from a cache."""

    file: str = ""  # "" when not judged
    records: tuple[tuple[str, int], ...] = ()
    world_sha256: Optional[str] = None
    cached: Optional[bool] = None

    @property
    def kept(self) -> int:
        return sum(count for _, count in self.records)

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "records": dict(self.records),
            "world_sha256": self.world_sha256,
            "cached": self.cached,
        }
