"""The verdict as a SLSA Verification Summary Attestation (VSA v1) in an in-toto Statement v1, unsigned:
the CI's own signer (cosign, a DSSE envelope) signs it. Only trusted mode writes it (`should_attest`).

- subject: the reviewed tree (`git-worktree`: gitCommit and gitTree, or gitTree alone for local edits)
  and `report.json` (sha256). The report is a subject, not an input attestation: `inputAttestations`
  lists the attestations a verification consumed (all of them, once non-empty), and the report is this
  verification's own record. As a subject, blob tools (`cosign verify-blob-attestation`) tie it to the
  signature.
- verifier: `VERIFIER_ID`, a package URL naming the gate without claiming a registry, unless the caller
  names its CI (the trust base a consumer cares about); `version` maps `epoch_gate` to this release.
- policy: the oracle of the checkout the gate ran in (`git+<repository>@<its commit>`: in trusted mode a
  clean checkout of a trusted ref); its `annotations` are the identities the gate read, and its sha256
  digest is that of their canonical JSON.
- verificationResult: PASSED only for `eligible`; `hold` and `closed` are FAILED.
- verifiedLevels: `EPOCH_GATE_ELIGIBLE` when PASSED, with `EPOCH_GATE_JAILED` when every suite ran in the
  jail with the product in a jail of its own (each suite's isolation is also in the policy's annotations);
  `FAILED` otherwise.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any, Mapping, Optional

import epoch_gate
from epoch_gate import report as reports
from epoch_gate.decision import Label
from epoch_gate.hashing import canonical_json, sha256_bytes
from epoch_gate.isolation import is_jailed
from epoch_gate.report import Report
from epoch_gate.tree import ReviewedTree, head_commit, repository_url

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/verification_summary/v1"
STATEMENT_FILE = "statement.intoto.json"
SUBJECT_NAME = "git-worktree"
REPORT_NAME = "report.json"
# A purl of the distribution: `generic` names no registry, so it claims no name we do not hold.
VERIFIER_ID = "pkg:generic/epoch-gate"
POLICY_NAME = "epoch_gate oracle"
# What a consumer prenegotiates for a passing gate (VSA: custom values must not start with `SLSA_`).
ELIGIBLE_LEVEL = "EPOCH_GATE_ELIGIBLE"
# Beside it when every suite's generator and replay ran jailed, the product in a jail of its own
# (epoch_gate.isolation): what a consumer requires to refuse verdicts reached unjailed.
JAILED_LEVEL = "EPOCH_GATE_JAILED"
# Beside it when every suite was also judged over a held-out world drawn with CI's key (epoch_gate.held_out).
HELD_OUT_LEVEL = "EPOCH_GATE_HELD_OUT"
FAILED = "FAILED"

# The algorithms this Statement uses, with the hex length each must have.
DIGEST_LENGTHS = {"sha256": 64, "gitCommit": 40, "gitTree": 40}
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+\Z")
_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\Z")
_SLSA_LEVEL = re.compile(r"SLSA_([A-Z]+)_LEVEL_(\d+|UNEVALUATED)\Z")


def should_attest(report: Report) -> bool:
    """A local run is judged by code the change can rewrite: its verdict is advisory, never attested."""
    return report.mode == "trusted"


def policy_identities(report: Report) -> dict[str, Optional[str]]:
    """Every suite's identities, flat (`<address>.epoch_id`, ...): the policy the verdict was reached under."""
    out: dict[str, Optional[str]] = {}
    for suite in report.suites:
        ids = suite.identities
        out.update({f"{suite.address}.{name}": value for name, value in (
            ("epoch_id", ids.epoch_id), ("generator_sha256", ids.generator_sha256),
            ("manifest_sha256", ids.manifest_sha256), ("world_sha256", ids.world_sha256),
            ("isolation", ids.isolation))})
        held = suite.held_out
        if held.drawn:
            out[f"{suite.address}.held_out_seed_sha256"] = held.seed_sha256
            out[f"{suite.address}.held_out_world_sha256"] = held.world_sha256
        else:
            out[f"{suite.address}.held_out"] = f"not drawn: {held.why}"
    return out


def verified_levels(report: Report) -> list[str]:
    if report.verdict.label is not Label.ELIGIBLE:
        return [FAILED]
    jailed = bool(report.suites) and all(is_jailed(s.identities.isolation or "") for s in report.suites)
    held_out = bool(report.suites) and all(s.held_out.drawn for s in report.suites)
    return [ELIGIBLE_LEVEL, *([JAILED_LEVEL] if jailed else []), *([HELD_OUT_LEVEL] if held_out else [])]


def _git_uri(repository: str, commit: Optional[str]) -> str:
    return f"git+{repository}@{commit}" if commit else f"git+{repository}"


def resource_uri(repository: str, tree: ReviewedTree) -> str:
    """The commit where it names the judged tree; a dirty tree has no fetchable name beyond its subject."""
    return _git_uri(repository, tree.head_commit if tree.clean else None)


def rfc3339(time: datetime.datetime) -> str:
    if time.tzinfo is None:
        raise ValueError("timeVerified needs an aware datetime")
    return time.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def statement(report: Report, tree: ReviewedTree, report_bytes: bytes, *, time: datetime.datetime,
              repository: str, oracle_commit: str, verifier_id: str = VERIFIER_ID) -> dict[str, Any]:
    identities = policy_identities(report)
    passed = report.verdict.label is Label.ELIGIBLE
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": SUBJECT_NAME, "digest": tree.digest()},
                    {"name": REPORT_NAME, "digest": {"sha256": sha256_bytes(report_bytes)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": verifier_id, "version": {"epoch_gate": epoch_gate.__version__}},
            "timeVerified": rfc3339(time),
            "resourceUri": resource_uri(repository, tree),
            "policy": {"name": POLICY_NAME, "uri": _git_uri(repository, oracle_commit),
                       "digest": {"sha256": sha256_bytes(canonical_json(identities))},
                       "annotations": identities},
            "verificationResult": "PASSED" if passed else "FAILED",
            "verifiedLevels": verified_levels(report),
        },
    }


def statement_bytes(report: Report, tree: ReviewedTree, report_bytes: bytes, *, time: datetime.datetime,
                    repository: str, oracle_commit: str, verifier_id: str = VERIFIER_ID) -> bytes:
    value = statement(report, tree, report_bytes, time=time, repository=repository, oracle_commit=oracle_commit,
                      verifier_id=verifier_id)
    return canonical_json(value) + b"\n"


def output_files(report: Report, witnesses: Mapping[str, bytes], tree: Optional[ReviewedTree], *,
                 time: datetime.datetime, root: Path, verifier_id: str = VERIFIER_ID) -> dict[str, bytes]:
    """Everything the gate writes, by relative path: the statement too, in trusted mode with a known tree.

    `root` is the checkout the gate ran in: its origin names the repository, its HEAD the oracle's commit.
    """
    files = reports.output_files(report, witnesses)
    if tree is not None and should_attest(report):
        files[STATEMENT_FILE] = statement_bytes(report, tree, files[REPORT_NAME], time=time,
                                                repository=repository_url(root), oracle_commit=head_commit(root),
                                                verifier_id=verifier_id)
    return files


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
    if "timeVerified" in predicate and not (isinstance(predicate["timeVerified"], str)
                                            and _UTC.match(predicate["timeVerified"])):
        problems.append("predicate.timeVerified must be an RFC 3339 timestamp in UTC (Z)")
    if not _is_uri(predicate.get("resourceUri")):
        problems.append("predicate.resourceUri must be a URI")
    policy = predicate.get("policy")
    if not isinstance(policy, dict) or not _is_uri(policy.get("uri")):
        problems.append("predicate.policy.uri must be a URI")
    elif "digest" in policy and _digest_problem(policy["digest"]):
        problems.append(f"predicate.policy.digest: {_digest_problem(policy['digest'])}")
    inputs = predicate.get("inputAttestations", [])
    if not isinstance(inputs, list) or any(not isinstance(i, dict) or _digest_problem(i.get("digest"))
                                           for i in inputs):
        problems.append("predicate.inputAttestations must list descriptors with a digest each")
    result = predicate.get("verificationResult")
    if result not in ("PASSED", "FAILED"):
        problems.append("predicate.verificationResult must be PASSED or FAILED")
    problems += _levels_problems(predicate.get("verifiedLevels"), result)
    levels = predicate.get("dependencyLevels", {})
    if not isinstance(levels, dict) or any(not isinstance(n, int) or isinstance(n, bool) or n < 0
                                           for n in levels.values()):
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
