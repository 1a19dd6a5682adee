"""Test support, not shipped: the tests' way into the one judgement (`epoch_gate.verdict.judge.judge`), a suite
named "suite" and the change given as a flat set of facts and judged exactly as the plugin and the CLI
have them judged; and a structural check of an attestation (`layout_problems`), what a verifier would
read of the statement the gate writes."""

from __future__ import annotations

import dataclasses
import datetime
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from epoch_gate.verdict.attestation import FAILED, PREDICATE_TYPE, REPORT_NAME, STATEMENT_TYPE, SUBJECT_NAME
from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.verify import ReplayEvidence
from epoch_gate.verdict.suite import Expected, Identities, Verdict
from epoch_gate.evidence.freezes import Freeze
from epoch_gate.verdict.judge import ChangeFacts, SuiteFacts, SuiteOracle, judge
from epoch_gate.evidence.observations import Observation
from epoch_gate.change.oracle import OracleChange
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Reason
from epoch_gate.evidence.replay_result import ReplayResult
from epoch_gate.verdict.report import Report, suite_folder

SUITE = "suite"
OUT = "dist/gate"


@dataclass(frozen=True)
class Evidence:
    """One suite and the change. `observations`: the replay's (source "replay") and the archive's;
    `findings`: the repository's reasons; a None changed set means it is unavailable."""

    identities: Identities
    changed: Optional[tuple[ChangedPath, ...]]
    protected: ProtectedSet
    replay: Optional[ReplayResult]
    observations: tuple[Observation, ...]
    freezes: tuple[Freeze, ...]
    today: datetime.date
    findings: tuple[Reason, ...] = ()
    expected: Optional[Expected] = None
    suite_findings: tuple[Reason, ...] = ()
    witnesses: Mapping[str, bytes] = field(default_factory=dict)


def witness_path(observation_id: str) -> str:
    """Where the report says a witness of this run's replay of "suite" is."""
    return f"{OUT}/{suite_folder(SUITE)}/observations/{observation_id}.bin"


def one_suite(evidence: Evidence, base: Optional[str] = "base", oracle: tuple[OracleChange, ...] = ()) -> Report:
    """The report `judge` makes of the suite and the change, with these oracle changes."""
    played = tuple(o for o in evidence.observations if o.source == "replay")
    change = ChangeFacts(
        "local",
        base,
        evidence.changed,
        evidence.protected,
        (),
        tuple(o for o in evidence.observations if o.source != "replay"),
        evidence.freezes,
        evidence.today,
        "observations",
        "freezes",
        OUT,
        evidence.findings,
    )
    suite = SuiteFacts(
        SuiteOracle(SUITE, "fixtures/EPOCH", "checks/manifest.json", "checks/catalog.yaml", ()),
        evidence.identities,
        evidence.expected,
        ReplayEvidence(evidence.replay, played, evidence.witnesses, ()) if evidence.replay else None,
        evidence.suite_findings,
    )
    judged = judge(change, [suite], read_base=None, read_change=lambda path: None).report
    return dataclasses.replace(judged, oracle_changes=oracle)


def decide(evidence: Evidence) -> Verdict:
    """The verdict on the change judged with the suite: its label, and the repository's reasons followed
    by the suite's."""
    judged = one_suite(evidence)
    (suite,) = judged.suites
    return Verdict(judged.verdict.label, (*judged.verdict.reasons, *suite.verdict.reasons))


DIGEST_LENGTHS = {"sha256": 64, "gitCommit": 40, "gitTree": 40}
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+\Z")
_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\Z")
_SLSA_LEVEL = re.compile(r"SLSA_([A-Z]+)_LEVEL_(\d+|UNEVALUATED)\Z")


def layout_problems(value: Any) -> list[str]:
    """Where `value` departs from the Statement v1 layout, the VSA v1 field rules and this gate's subjects."""
    if not isinstance(value, dict):
        return ["a Statement is a JSON object"]
    problems = []
    if value.get("_type") != STATEMENT_TYPE:
        problems.append(f"_type must be {STATEMENT_TYPE}")
    subjects = value.get("subject")
    if not isinstance(subjects, list) or not subjects:
        problems.append("subject must be a non-empty list")
        subjects = []
    for i, subject in enumerate(subjects):
        digest = subject.get("digest") if isinstance(subject, dict) else None
        problem = _digest_problem(digest)
        if problem:
            problems.append(f"subject[{i}].digest: {problem}")
    if not isinstance(value.get("predicateType"), str) or not _URI.match(value["predicateType"]):
        problems.append("predicateType must be a URI")
    predicate = value.get("predicate")
    if not isinstance(predicate, dict):
        problems.append("predicate must be an object")
    elif value.get("predicateType") == PREDICATE_TYPE:
        problems += _vsa_problems(predicate)
        names = {s.get("name") for s in subjects if isinstance(s, dict)}
        if not {SUBJECT_NAME, REPORT_NAME} <= names:
            problems.append(f"subject must name {SUBJECT_NAME} and {REPORT_NAME}")
    return problems


def _vsa_problems(predicate: dict[str, Any]) -> list[str]:
    """The VSA v1 field rules (slsa.dev/spec/v1.1/verification_summary)."""
    problems = []
    verifier = predicate.get("verifier")
    if not isinstance(verifier, dict) or not _is_uri(verifier.get("id")):
        problems.append("predicate.verifier.id must be a URI")
    elif "version" in verifier and not _is_string_map(verifier["version"]):
        problems.append("predicate.verifier.version must map component names to version strings")
    if "timeVerified" in predicate and not (
        isinstance(predicate["timeVerified"], str) and _UTC.match(predicate["timeVerified"])
    ):
        problems.append("predicate.timeVerified must be an RFC 3339 timestamp in UTC (Z)")
    if not _is_uri(predicate.get("resourceUri")):
        problems.append("predicate.resourceUri must be a URI")
    policy = predicate.get("policy")
    if not isinstance(policy, dict) or not _is_uri(policy.get("uri")):
        problems.append("predicate.policy.uri must be a URI")
    elif "digest" in policy and _digest_problem(policy["digest"]):
        problems.append(f"predicate.policy.digest: {_digest_problem(policy['digest'])}")
    inputs = predicate.get("inputAttestations", [])
    if not isinstance(inputs, list) or any(not isinstance(i, dict) or _digest_problem(i.get("digest")) for i in inputs):
        problems.append("predicate.inputAttestations must list descriptors with a digest each")
    result = predicate.get("verificationResult")
    if result not in ("PASSED", "FAILED"):
        problems.append("predicate.verificationResult must be PASSED or FAILED")
    problems += _levels_problems(predicate.get("verifiedLevels"), result)
    levels = predicate.get("dependencyLevels", {})
    if not isinstance(levels, dict) or any(
        not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in levels.values()
    ):
        problems.append("predicate.dependencyLevels must map levels to counts")
    if "slsaVersion" in predicate and not re.fullmatch(r"\d+\.\d+", str(predicate["slsaVersion"])):
        problems.append("predicate.slsaVersion must be MAJOR.MINOR")
    return problems


def _levels_problems(levels: Any, result: Any) -> list[str]:
    if not isinstance(levels, list) or not levels or not all(isinstance(v, str) and v for v in levels):
        return ["predicate.verifiedLevels must be a non-empty list of strings"]
    problems = []
    tracks = [m.group(1) for m in map(_SLSA_LEVEL.match, levels) if m]
    if len(tracks) != len(set(tracks)):
        problems.append("predicate.verifiedLevels holds more than one level of a SLSA track")
    if any(v.startswith("SLSA_") and not _SLSA_LEVEL.match(v) for v in levels):
        problems.append("predicate.verifiedLevels: a custom value must not start with SLSA_")
    if (FAILED in levels) != (result == "FAILED"):
        problems.append("predicate.verifiedLevels holds FAILED exactly when verificationResult is FAILED")
    return problems


def _is_uri(value: Any) -> bool:
    return isinstance(value, str) and bool(_URI.match(value))


def _is_string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _digest_problem(digest: Any) -> Optional[str]:
    if not isinstance(digest, dict) or not digest:
        return "a non-empty map of algorithm to hex digest"
    for algorithm, hex_value in digest.items():
        length = DIGEST_LENGTHS.get(algorithm)
        if length is None:
            return f"unknown algorithm {algorithm!r}"
        if not isinstance(hex_value, str) or not re.fullmatch(f"[0-9a-f]{{{length}}}", hex_value):
            return f"{algorithm} must be {length} lowercase hex digits"
    return None
