"""Regression records: world records a candidate's product once failed, kept so that every later judgement
replays them under every property of the suite's catalog over their bound, whatever the manifest samples
and whatever a draw picks.

The file sits beside its fixture's pin (`epoch_fixture(regressions=...)`, a protected path). Each record
is named by the sha256 of its exact bytes, which the file carries as text: reading it checks every
record against its digest. Adding one is a reviewer's act (`epoch-gate keep-witness`): it takes a
failure's witness from a gate's report and refuses bytes whose digest is not the report's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.catalog import BOUND, NAME
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.evidence.observations import OBSERVATION_ID
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
    """Why `record` cannot be kept as a record of `bound`, or None: a world record is one line of UTF-8."""
    if not BOUND.match(bound):
        return f"the bound {bound[:80]!r} is not a bound's name"
    if not record or b"\n" in record or b"\r" in record:
        return "a record is one non-empty line"
    try:
        record.decode("utf-8")
    except UnicodeDecodeError:
        return "a record is UTF-8 text"
    return None


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
        if not NAME.match(entry["property"]) or not OBSERVATION_ID.match(entry["observation_id"]):
            raise _malformed(where, "not a property's name or an observation id", "names", entry["property"])
        kept = Regression(entry["bound"], record, entry["suite"], entry["property"], entry["observation_id"])
        if entry["record_sha256"] != kept.sha256:
            raise fail(
                Code.ARTIFACT_MALFORMED,
                where,
                "the record's bytes do not match record_sha256: records are kept by `epoch-gate keep-witness` only",
                expected=entry["record_sha256"][:80],
                found=kept.sha256,
            )
        found.append(kept)
    ordered = tuple(sorted(found, key=lambda r: (r.bound, r.sha256)))
    if tuple(found) != ordered or len({(r.bound, r.record) for r in found}) != len(found):
        raise _malformed(
            path, "records are kept once each, by bound then digest", "the order keep-witness writes", "another"
        )
    return Regressions(ordered)


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
