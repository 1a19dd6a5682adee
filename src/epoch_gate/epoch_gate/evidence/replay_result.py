"""A replay's result as the judge reads it: each property's outcome, and the summary the runner writes
(`replay.json`). Stdlib only and outside the runner package, so the gate's judgement never imports the
code that ran beside the product."""

from __future__ import annotations

from dataclasses import dataclass

from epoch_gate.evidence import strictjson
from epoch_gate.reasons import Code, fail

OUTCOMES = ("pass", "fail", "flake", "error")
SUMMARY = "replay.json"
OBSERVATIONS = "observations"
SCHEMA = 3


@dataclass(frozen=True)
class PropertyOutcome:
    name: str
    bound: str
    records: int
    outcome: str
    observation_ids: tuple[str, ...]
    detail: str
    error_code: str = ""  # a reasons.Code value when outcome is "error"
    failures: int = 0  # records that failed twice; only `max_witnesses` of them are saved as witnesses
    first_failure: int = 0  # the first of them, counted from 1 among the bound's records; 0: none

    def summary(self) -> str:
        """One line for people: a count of records alone would read as a count of failures."""
        if self.outcome == "pass":
            return f"pass  {self.name} (all {self.records} {self.bound} records)"
        if self.outcome == "fail" and self.first_failure:
            return (
                f"fail  {self.name} (first failed at record {self.first_failure} of {self.records} "
                f"{self.bound} records; {self.failures} failed)"
            )
        if self.outcome == "fail":
            return f"fail  {self.name} ({self.failures} of {self.records} {self.bound} records failed)"
        if self.outcome == "flake":
            return f"flake {self.name} (flaked over {self.records} {self.bound} records)"
        return f"error {self.name}"

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "bound": self.bound,
            "records": self.records,
            "outcome": self.outcome,
            "observations": list(self.observation_ids),
            "detail": self.detail,
            "error_code": self.error_code,
            "failures": self.failures,
            "first_failure": self.first_failure,
        }


@dataclass(frozen=True)
class ReplayResult:
    suite: str  # the sampled_properties target it replayed: the gate checks it is the one it asked for
    epoch_id: str
    manifest_sha256: str
    world_sha256: str  # the world the replay actually read: the gate compares it with the pin's
    properties: tuple[PropertyOutcome, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "suite": self.suite,
            "epoch_id": self.epoch_id,
            "manifest_sha256": self.manifest_sha256,
            "world_sha256": self.world_sha256,
            "properties": [p.to_json() for p in self.properties],
        }


def parse_result(data: bytes, path: str) -> ReplayResult:
    raw = strictjson.require_object(
        strictjson.loads(data, path),
        path,
        {"schema": int, "suite": str, "epoch_id": str, "manifest_sha256": str, "world_sha256": str, "properties": list},
    )
    if raw["schema"] != SCHEMA:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "the replay summary has another schema",
            expected=str(SCHEMA),
            found=str(raw["schema"]),
        )
    outcomes = []
    for index, item in enumerate(raw["properties"]):
        entry = strictjson.require_object(
            item,
            f"{path}#properties[{index}]",
            {
                "name": str,
                "bound": str,
                "records": int,
                "outcome": str,
                "observations": list,
                "detail": str,
                "error_code": str,
                "failures": int,
            },
            optional={"first_failure": int},
        )
        if entry["outcome"] not in OUTCOMES or not all(isinstance(i, str) for i in entry["observations"]):
            raise fail(
                Code.ARTIFACT_MALFORMED,
                path,
                f"property {index} has an unknown outcome",
                expected="/".join(OUTCOMES),
                found=str(entry["outcome"])[:80],
            )
        outcomes.append(
            PropertyOutcome(
                entry["name"],
                entry["bound"],
                entry["records"],
                entry["outcome"],
                tuple(entry["observations"]),
                entry["detail"],
                entry["error_code"],
                entry["failures"],
                entry.get("first_failure", 0),
            )
        )
    return ReplayResult(raw["suite"], raw["epoch_id"], raw["manifest_sha256"], raw["world_sha256"], tuple(outcomes))
