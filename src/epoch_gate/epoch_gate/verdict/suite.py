"""The verdict (docs/contract.md, Verdict): pure functions from parsed evidence to `closed`, `hold` or `eligible`."""

from __future__ import annotations

import re

import dataclasses
import datetime
import enum
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.freezes import Freeze
from epoch_gate.evidence.observations import Observation
from epoch_gate.change.protection import ProtectedSet, protected_changes
from epoch_gate.reasons import Code, Reason, Severity
from epoch_gate.evidence.replay_result import ReplayResult


class Label(enum.Enum):
    CLOSED = "closed"
    HOLD = "hold"
    ELIGIBLE = "eligible"

    @property
    def exit_code(self) -> int:
        return {Label.ELIGIBLE: 0, Label.CLOSED: 1, Label.HOLD: 2}[self]

    @property
    def rank(self) -> int:
        """closed < hold < eligible: how much the verdict lets through."""
        return {Label.CLOSED: 0, Label.HOLD: 1, Label.ELIGIBLE: 2}[self]


@dataclass(frozen=True)
class Identities:
    epoch_id: Optional[str]
    generator_sha256: Optional[str]
    manifest_sha256: Optional[str]
    world_sha256: Optional[str] = None
    isolation: Optional[str] = None  # what jailed the generator and the replays (epoch_gate.runner.jail.isolation)

    def to_json(self) -> dict[str, Optional[str]]:
        return {
            "epoch_id": self.epoch_id,
            "generator_sha256": self.generator_sha256,
            "manifest_sha256": self.manifest_sha256,
            "world_sha256": self.world_sha256,
            "isolation": self.isolation,
        }


@dataclass(frozen=True)
class Expected:
    """What a complete replay must show, from the caller's own reading of the manifest and the world:
    the manifest's (name, bound) pairs in order, and the record count of each bound of the world."""

    properties: tuple[tuple[str, str], ...]
    records: Mapping[str, int]


@dataclass(frozen=True)
class SuiteEvidence:
    """What the caller observed of one suite. `findings` are the reasons loading and verifying its pin,
    manifest and world already produced; `observations` this replay's and the archive's, `freezes` the
    freezes naming this suite; a None replay means it is unavailable."""

    address: str
    identities: Identities
    replay: Optional[ReplayResult]
    observations: tuple[Observation, ...]
    freezes: tuple[Freeze, ...]
    today: datetime.date
    findings: tuple[Reason, ...] = ()
    witness_paths: Mapping[str, str] = field(default_factory=dict)
    expected: Optional[Expected] = None  # None: the manifest or the world could not be read
    held_out: Optional[WorldEvidence] = None  # None: no held-out world was drawn
    held_out_properties: tuple[str, ...] = ()  # the properties drawn outside the manifest, judged after it
    regressions: Optional[WorldEvidence] = None  # None: the suite's fixture keeps no regression record


@dataclass(frozen=True)
class WorldEvidence:
    """A replay over another world than the pinned one (a held-out world, the regression records): checked
    as the pinned world's is, against that world's digest and record counts (the epoch and manifest are
    the suite's)."""

    identities: Identities
    replay: Optional[ReplayResult]
    expected: Optional[Expected]
    observations: tuple[Observation, ...] = ()  # this replay's own


def by_id(observations: Sequence[Observation]) -> dict[str, Observation]:
    """Observations by id; the same id can be both replayed and archived, and this run's replay takes
    precedence."""
    return {o.id: o for o in sorted(observations, key=lambda o: o.source != "archive")}


def worst_by_id(*tables: Mapping[str, Observation]) -> dict[str, Observation]:
    """The tables of two worlds' replays as one: an id both hold (the same record's bytes in both worlds)
    is the failure when either world failed it, never the flake of the other, and a replay's over the
    archive's."""
    merged: dict[str, Observation] = {}
    for table in tables:
        for oid, found in table.items():
            kept = merged.get(oid)
            if (
                kept is None
                or (kept.source == "archive" and found.source != "archive")
                or (kept.source == found.source and kept.is_flake and not found.is_flake)
            ):
                merged[oid] = found
    return merged


# The runner's own codes for a property it could not evaluate; any other is the predicate's error.
_ERROR_CODES = {c.value: c for c in (Code.BOUND_MISSING, Code.RUNNER_PROTOCOL, Code.HANDLE_MISUSED, Code.REPLAY_FAILED)}


def _incomplete(path: str, expected: str, found: str, message: str) -> Reason:
    return Reason(Code.REPLAY_INCOMPLETE, path, expected, found, message)


def replay_problems(address: str, replay: ReplayResult, ids: Identities, expected: Optional[Expected]) -> list[Reason]:
    """The replay's output is checked, not believed: every manifest property over every record of its
    bound, over the pinned world, with witnesses for every non-pass."""
    problems = []
    if ids.world_sha256 is None or replay.world_sha256 != ids.world_sha256:
        problems.append(
            Reason(
                Code.WORLD_MISMATCH,
                address,
                expected=str(ids.world_sha256),
                found=replay.world_sha256,
                message="the replay ran over another fixture world",
                todo="Run the replay again over the pinned world (`pants test <suite>`).",
            )
        )
    if expected is None:
        return [
            *problems,
            _incomplete(
                address,
                "the manifest's properties and the world's record counts",
                "unavailable",
                "the replay's completeness cannot be checked",
            ),
        ]
    found = tuple((p.name, p.bound) for p in replay.properties)
    if found != expected.properties:
        problems.append(
            _incomplete(
                address,
                ", ".join(n for n, _ in expected.properties)[:500],
                ", ".join(n for n, _ in found)[:500],
                "the replay did not evaluate exactly the manifest's properties",
            )
        )
    for outcome in replay.properties:
        if outcome.outcome in ("fail", "flake") and not outcome.observation_ids:
            problems.append(
                _incomplete(
                    f"{address}#{outcome.name}",
                    "the witnesses of a non-passing property",
                    "none",
                    f"{outcome.outcome} without any observation",
                )
            )
        if outcome.outcome == "fail" and outcome.failures < 1:
            problems.append(
                _incomplete(
                    f"{address}#{outcome.name}",
                    "a count of failing records",
                    str(outcome.failures),
                    "fail without a failing record",
                )
            )
        if outcome.outcome == "error":
            continue
        want = expected.records.get(outcome.bound, 0)
        if outcome.records != want or want == 0:
            problems.append(
                _incomplete(
                    f"{address}#{outcome.name}",
                    f"{want} {outcome.bound} records",
                    f"{outcome.records} evaluated",
                    "the replay did not evaluate every record of its bound",
                )
            )
    return problems


@dataclass(frozen=True)
class Verdict:
    label: Label
    reasons: tuple[Reason, ...]


def _freeze_problems(
    freeze: Freeze, cited: Optional[Observation], epoch_id: Optional[str], today: datetime.date
) -> list[Reason]:
    problems = []
    if cited is None:
        problems.append(
            Reason(
                Code.FREEZE_OBSERVATION_MISSING,
                freeze.path,
                expected=freeze.observation_id,
                found="missing",
                message="the freeze cites an observation that is not present "
                "(in this replay or the archive) with valid bytes",
            )
        )
    if freeze.epoch_id != epoch_id:
        problems.append(
            Reason(
                Code.FREEZE_WRONG_EPOCH,
                freeze.path,
                expected=str(epoch_id),
                found=freeze.epoch_id,
                message="the freeze was written for another epoch",
            )
        )
    if cited is not None and cited.epoch_id != epoch_id:
        problems.append(
            Reason(
                Code.FREEZE_WRONG_EPOCH,
                freeze.path,
                expected=str(epoch_id),
                found=cited.epoch_id,
                message="the cited observation is from another epoch",
            )
        )
    if cited is not None and not cited.is_flake:
        problems.append(
            Reason(
                Code.FREEZE_NOT_A_FLAKE,
                freeze.path,
                expected="flake with rerun_passed=true",
                found=f"{cited.status}, rerun_passed={str(cited.rerun_passed).lower()}",
                message="only a flake (a failure whose rerun passed) can be frozen",
            )
        )
    if freeze.expired(today):
        problems.append(
            Reason(
                Code.FREEZE_EXPIRED,
                freeze.path,
                expected=f"before {freeze.expires_on}",
                found=today.isoformat(),
                message="the freeze has expired: delete it; the " "witness stays",
            )
        )
    return problems


def label_of(reasons: Sequence[Reason]) -> Label:
    """Any closing reason closes; any other reason holds; none is eligible."""
    if any(r.code.severity is Severity.CLOSED for r in reasons):
        return Label.CLOSED
    return Label.HOLD if reasons else Label.ELIGIBLE


def changed_reasons(
    changed: Optional[tuple[ChangedPath, ...]], protected: ProtectedSet, findings: Sequence[Reason] = ()
) -> list[Reason]:
    """The changed set: unavailable, or touching a protected path (the repository's, not a suite's)."""
    if changed is not None:
        return list(protected_changes(changed, protected))
    if any(r.code is Code.CHANGED_SET_UNAVAILABLE for r in findings):
        return []
    return [Reason(Code.CHANGED_SET_UNAVAILABLE, ".", "a changed set", "none", "the changed set could not be computed")]


def _replay_reasons(
    evidence: SuiteEvidence, by_id: Mapping[str, Observation]
) -> tuple[list[Reason], list[Observation]]:
    """The replay: missing, of another suite, epoch or manifest, incomplete, or a property that failed or
    errored; and the flakes it found."""
    ids, replay, reasons, flakes = evidence.identities, evidence.replay, [], []
    if replay is None:
        return [
            Reason(
                Code.REPLAY_FAILED,
                evidence.address,
                "a replay of the sampled properties",
                "none",
                "no replay result: the sampled properties were not evaluated",
            )
        ], []
    if not replay.properties:
        reasons.append(
            Reason(
                Code.REPLAY_FAILED,
                evidence.address,
                "at least one property",
                "none",
                "the replay evaluated no property",
            )
        )
    if replay.suite != evidence.address:
        reasons.append(
            Reason(
                Code.SUITE_MISMATCH,
                evidence.address,
                expected=evidence.address,
                found=replay.suite,
                message="the replay's summary is another suite's",
            )
        )
    reasons.extend(replay_problems(evidence.address, replay, ids, evidence.expected))
    if replay.epoch_id != ids.epoch_id or replay.manifest_sha256 != ids.manifest_sha256:
        reasons.append(
            Reason(
                Code.OBSERVATION_WRONG_EPOCH,
                evidence.address,
                expected=f"{ids.epoch_id} / {ids.manifest_sha256}",
                found=f"{replay.epoch_id} / {replay.manifest_sha256}",
                message="the replay ran for another epoch or manifest",
                todo="Run the replay again for the pinned epoch and manifest (`pants test <suite>`).",
            )
        )
    for outcome in replay.properties:
        if outcome.outcome == "error":
            # Only these codes pass through: a summary naming a hold code must not soften an error.
            code = _ERROR_CODES.get(outcome.error_code, Code.PREDICATE_ERROR)
            reasons.append(
                Reason(
                    code,
                    _about(evidence, outcome.name),
                    "an evaluated property",
                    "error",
                    _drawn(evidence, outcome.name) + outcome.detail,
                )
            )
        for oid in outcome.observation_ids:
            observation = by_id.get(oid)
            if observation is None or observation.source != "replay":
                reasons.append(
                    Reason(
                        Code.OBSERVATION_WITNESS_MISSING,
                        _about(evidence, outcome.name),
                        expected=oid,
                        found="missing",
                        message=f"the replay names the observation {oid} and did not write it",
                    )
                )
            elif observation.epoch_id != ids.epoch_id:
                reasons.append(
                    Reason(
                        Code.OBSERVATION_WRONG_EPOCH,
                        _about(evidence, outcome.name),
                        expected=str(ids.epoch_id),
                        found=observation.epoch_id,
                        message=f"{_record(observation, evidence)}: the observation is of another epoch",
                    )
                )
            elif observation.is_flake:
                flakes.append(observation)
            else:
                # The product failing on a record (raising, say) is the record's failure: the predicate's
                # own errors end its property as an error instead, above. The reason is about the property
                # and the record; the witness file only holds the record's bytes.
                reasons.append(
                    Reason(
                        Code.PROPERTY_FAILED,
                        _about(evidence, outcome.name),
                        expected=f"{outcome.name} holds",
                        found=f"violated by {outcome.bound} line {observation.line} "
                        f"(witness {observation.witness_sha256[:12]})",
                        message=f"{_drawn(evidence, outcome.name)}{_record(observation, evidence)} fails it: "
                        f"{_why(observation.detail)}",
                        todo=_misread(observation),
                    )
                )
    return reasons, flakes


# How the runner words a failure where the predicate read what the product's answer does not have
# (`judging.NotData`): the product may be right and the predicate wrong.
_NOT_DATA = "the product's answer "


# The runner's line before a violated record's calls and the product's answers, counting the lines that
# follow (`judging.transcript`)
_CALLS = re.compile(r"(?:the first (\d+) of )?its (\d+) calls? and the product's answers:")
MAX_WHY = 600


def _why(detail: str) -> str:
    """Why a record fails, on one line: the first of the detail, and the calls it made and their answers
    when the runner counts them (the product's traceback, on the lines after, is the observation's)."""
    first, *rest = detail.split("\n")
    counted = _CALLS.fullmatch(rest[0]) if rest else None
    if counted is None:
        return first[:MAX_WHY]
    calls = [line.strip() for line in rest[1 : 1 + int(counted[1] or counted[2])]]
    shown = f"{first}; {rest[0]} {'; '.join(calls)}"
    return shown if len(shown) <= MAX_WHY else shown[: MAX_WHY - 3] + "..."


def _misread(observation: Observation) -> str:
    """What to do about a failure, where the code's own advice (fix the product) may be wrong."""
    if not observation.detail.startswith(_NOT_DATA):
        return ""
    return (
        "The predicate read what the product's answer does not have: if the product answered as it should, "
        "fix the predicate (an oracle change for its reviewers), else fix the product (`pants test <suite>` "
        "replays it)."
    )


def _about(evidence: SuiteEvidence, prop: str) -> str:
    """What a property's reason is about, as Pants names a part of a target: `checks:suite#property`."""
    return f"{evidence.address}#{prop}"


def _drawn(evidence: SuiteEvidence, prop: str) -> str:
    """How a reason's message starts when its property was drawn outside the manifest."""
    return "held-out property: " if prop in evidence.held_out_properties else ""


def _record(observation: Observation, evidence: SuiteEvidence) -> str:
    """The record a reason is about, and where its bytes were saved when they were."""
    saved = evidence.witness_paths.get(observation.id)
    where = f" (saved as {saved})" if saved else ""
    return f"the {observation.bound} record at line {observation.line}{where}"


def judge_suite(evidence: SuiteEvidence) -> Verdict:
    """One suite's verdict; every check runs and the default is deny.

    1. Findings from loading and verifying its artifacts (pin, manifest, catalog, world).
    2. The replay: missing, of another suite, epoch or manifest, or a property that failed or errored.
    3. Freezes: each must cite a present, same-epoch flake observation of this suite with valid bytes, and
       not be expired.
    4. Flakes: each must be covered by a valid freeze (then hold), else closed.
    5. Valid freezes that cover no current flake hold the suite until they are deleted.
    """
    reasons: list[Reason] = list(evidence.findings)
    # Only this suite's evidence counts. Each world's replay is read against its own observations (and
    # the archive): the same record's bytes can be in both worlds, and one world's flake must not stand
    # for the other's failure.
    mine = [o for o in evidence.observations if o.suite == evidence.address]
    pinned = by_id(mine)
    replayed, flakes = _replay_reasons(evidence, pinned)
    reasons.extend(replayed)
    tables = [pinned]
    only: dict[str, str] = {}  # a flake seen in another world alone, and that world's name: its lines are there
    archived = [o for o in mine if o.source == "archive"]
    others = (
        ("held-out world", evidence.held_out, evidence.held_out_properties),
        ("regression record", evidence.regressions, ()),
    )
    for name, world, drawn in others:  # every property over each other world too, by the same rules
        if world is None:
            continue
        tables.append(by_id([*(o for o in world.observations if o.suite == evidence.address), *archived]))
        world_reasons, world_flakes = _replay_reasons(
            dataclasses.replace(
                evidence,
                identities=world.identities,
                replay=world.replay,
                expected=world.expected,
                held_out_properties=drawn,
            ),
            tables[-1],
        )
        reasons.extend(dataclasses.replace(r, message=f"{name}: {r.message}") for r in world_reasons)
        seen = {f.id for f in flakes}
        new = {f.id: f for f in world_flakes if f.id not in seen}
        only.update(dict.fromkeys(new, name))
        flakes.extend(new.values())
    every = worst_by_id(*tables)
    flakes = [f for f in flakes if every[f.id].is_flake]  # a flake in one world, failed in the other: failed

    valid: dict[str, Freeze] = {}
    for freeze in evidence.freezes:
        problems = _freeze_problems(
            freeze, every.get(freeze.observation_id), evidence.identities.epoch_id, evidence.today
        )
        reasons.extend(problems)
        if not problems:
            valid[freeze.observation_id] = freeze

    for flake in flakes:
        if flake.id in valid:
            freeze = valid.pop(flake.id)
            reasons.append(
                Reason(
                    Code.FLAKE_FROZEN,
                    freeze.path,
                    expected="no flake",
                    found=flake.id,
                    message=f"{flake.property} is flaky; frozen until {freeze.expires_on}: " f"{freeze.reason}",
                )
            )
        else:
            reasons.append(
                Reason(
                    Code.FLAKE_UNFROZEN,
                    _about(evidence, flake.property),
                    expected="a valid freeze citing " + flake.id,
                    found="none",
                    message=(f"{only[flake.id]}: " if flake.id in only else "")
                    + _drawn(evidence, flake.property)
                    + f"{_record(flake, evidence)} failed it once and passed its rerun on the same "
                    "bytes; no valid freeze covers it",
                )
            )

    for oid, freeze in sorted(valid.items()):
        reasons.append(
            Reason(
                Code.FREEZE_UNUSED,
                freeze.path,
                expected="a current flake",
                found=oid,
                message="the freeze covers no flake of this replay: delete it",
            )
        )
    return Verdict(label_of(reasons), tuple(reasons))
