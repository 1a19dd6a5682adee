"""The replay runner: evaluates each sampled predicate over every record of its bound.

A violation is rerun once on the same bytes: failing twice is a `fail`, passing the rerun a `flake`.
Every record of a bound is evaluated: a flake never hides a later failure, and the record count is
evidence the gate checks against the world. It imports nothing beyond the standard library, so it runs
in a bare sandboxed interpreter.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from epoch_gate import strictjson
from epoch_gate.atomic import replace_file
from epoch_gate.catalog import Property
from epoch_gate.hashing import canonical_json
from epoch_gate.manifest import Manifest
from epoch_gate.observations import Observation, make_observation, write_observation
from epoch_gate.reasons import Code, EvidenceError, fail
from epoch_gate.world import records, world_sha256

OUTCOMES = ("pass", "fail", "flake", "error")
SUMMARY = "replay.json"
OBSERVATIONS = "observations"
RAISED = "predicate raised "
SCHEMA = 2

Predicate = Callable[[dict], object]


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

    def summary(self) -> str:
        """One line for people: how many records held or failed (a count of records read alone looks like
        a count of failures)."""
        if self.outcome == "pass":
            return f"pass  {self.name} (all {self.records} {self.bound} records)"
        if self.outcome == "fail":
            return f"fail  {self.name} ({self.failures} of {self.records} {self.bound} records failed)"
        if self.outcome == "flake":
            return f"flake {self.name} (flaked over {self.records} {self.bound} records)"
        return f"error {self.name}"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "bound": self.bound, "records": self.records, "outcome": self.outcome,
                "observations": list(self.observation_ids), "detail": self.detail,
                "error_code": self.error_code, "failures": self.failures}


@dataclass(frozen=True)
class ReplayResult:
    epoch_id: str
    manifest_sha256: str
    world_sha256: str  # the world the replay actually read: the gate compares it with the pin's
    properties: tuple[PropertyOutcome, ...]

    def to_json(self) -> dict[str, object]:
        return {"schema": SCHEMA, "epoch_id": self.epoch_id, "manifest_sha256": self.manifest_sha256,
                "world_sha256": self.world_sha256, "properties": [p.to_json() for p in self.properties]}


def _load_predicate(spec: str) -> Predicate:
    module, _, function = spec.partition(":")
    found = getattr(importlib.import_module(module), function)
    if not callable(found):
        raise TypeError(f"{spec} is not callable")
    return found


def _holds(predicate: Predicate, witness: bytes) -> tuple[bool, str]:
    """Parses the bytes afresh (a predicate may mutate its record) and evaluates; raising is a violation."""
    try:
        verdict = predicate(json.loads(witness))
    except Exception as exc:  # noqa: BLE001 - a raising predicate is a failure, reported, not a crash
        return False, f"{RAISED}{type(exc).__name__}: {exc}"[:500]
    if not isinstance(verdict, bool):
        return False, f"predicate returned {type(verdict).__name__}, not bool"
    return verdict, "" if verdict else "predicate returned False"


def replay_property(prop: Property, world: Path, epoch_id: str, out: Path,
                    max_witnesses: int) -> PropertyOutcome:
    try:
        predicate = _load_predicate(prop.predicate)
    except Exception as exc:  # noqa: BLE001
        return PropertyOutcome(prop.name, prop.bound, 0, "error", (),
                               f"cannot load predicate {prop.predicate}: {type(exc).__name__}: {exc}"[:500],
                               Code.PREDICATE_ERROR.value)
    count = failures = 0
    observed: list[Observation] = []
    try:
        for line, witness in records(world, prop.bound):
            count += 1
            held, detail = _holds(predicate, witness)
            if held:
                continue
            rerun_held, _ = _holds(predicate, witness)
            failures += not rerun_held
            if not rerun_held and failures > max_witnesses:
                continue  # counted; the saved witnesses already show that it fails
            observation = make_observation(
                epoch_id=epoch_id, prop=prop.name, status="flake" if rerun_held else "fail",
                rerun_passed=rerun_held, witness=witness, bound=prop.bound, line=line, detail=detail)
            write_observation(out / OBSERVATIONS, observation, witness)
            observed.append(observation)
    except EvidenceError as error:
        return PropertyOutcome(prop.name, prop.bound, count, "error", (), error.reason.message,
                               error.reason.code.value)
    if count == 0:
        return PropertyOutcome(prop.name, prop.bound, 0, "error", (), f"bound {prop.bound} has no records",
                               Code.BOUND_MISSING.value)
    outcome = "fail" if failures else "flake" if observed else "pass"
    first = next((o for o in observed if o.status == "fail"), observed[0] if observed else None)
    return PropertyOutcome(prop.name, prop.bound, count, outcome, tuple(o.id for o in observed),
                           first.detail if first else "", failures=failures)


def run(manifest: Manifest, world: Path, out: Path, *, epoch_id: str, max_witnesses: int = 1) -> ReplayResult:
    (out / OBSERVATIONS).mkdir(parents=True, exist_ok=True)
    result = ReplayResult(epoch_id, manifest.manifest_sha256, world_sha256(world), tuple(
        replay_property(prop, world, epoch_id, out, max_witnesses) for prop in manifest.properties))
    replace_file(out / SUMMARY, canonical_json(result.to_json()) + b"\n")
    return result


def parse_result(data: bytes, path: str) -> ReplayResult:
    raw = strictjson.require_object(strictjson.loads(data, path), path,
                                    {"schema": int, "epoch_id": str, "manifest_sha256": str, "world_sha256": str,
                                     "properties": list})
    if raw["schema"] != SCHEMA:
        raise fail(Code.ARTIFACT_MALFORMED, path, "the replay summary has another schema",
                   expected=str(SCHEMA), found=str(raw["schema"]))
    outcomes = []
    for index, item in enumerate(raw["properties"]):
        entry = strictjson.require_object(item, f"{path}#properties[{index}]", {
            "name": str, "bound": str, "records": int, "outcome": str, "observations": list, "detail": str,
            "error_code": str, "failures": int})
        if entry["outcome"] not in OUTCOMES or not all(isinstance(i, str) for i in entry["observations"]):
            raise fail(Code.ARTIFACT_MALFORMED, path, f"property {index} has an unknown outcome",
                       expected="/".join(OUTCOMES), found=str(entry["outcome"])[:80])
        outcomes.append(PropertyOutcome(entry["name"], entry["bound"], entry["records"], entry["outcome"],
                                        tuple(entry["observations"]), entry["detail"], entry["error_code"],
                                        entry["failures"]))
    return ReplayResult(raw["epoch_id"], raw["manifest_sha256"], raw["world_sha256"], tuple(outcomes))


def load_result(path: Path, display: str) -> ReplayResult:
    return parse_result(strictjson.read_bytes(path, display), display)
