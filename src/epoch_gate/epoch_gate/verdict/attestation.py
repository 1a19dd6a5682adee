"""The verdict as a SLSA Verification Summary Attestation (VSA v1) in an in-toto Statement v1. Only trusted
mode writes it (`should_attest`); with `[gate].statement_key_*` also signed, in a DSSE envelope beside it
(`epoch_gate.verdict.dsse`), and otherwise CI's own signer (`actions/attest`, cosign) signs it.

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
from pathlib import Path
from typing import Any, Mapping, Optional

import epoch_gate
from epoch_gate.verdict import report as reports
from epoch_gate.verdict.suite import Label
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.runner.jail.isolation import is_jailed
from epoch_gate.verdict.report import Report
from epoch_gate.change.tree import ReviewedTree, head_commit, repository_url
from epoch_gate.verdict.dsse import ENVELOPE_FILE, sign

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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
# (epoch_gate.runner.jail.isolation): what a consumer requires to refuse verdicts reached unjailed.
JAILED_LEVEL = "EPOCH_GATE_JAILED"
# Beside it when every suite was also judged over a held-out world drawn with CI's key (epoch_gate.evidence.held_out).
HELD_OUT_LEVEL = "EPOCH_GATE_HELD_OUT"
# Beside it when every suite also judged properties of its catalog drawn outside its manifest with that key.
HELD_OUT_PROPERTIES_LEVEL = "EPOCH_GATE_HELD_OUT_PROPERTIES"
FAILED = "FAILED"

# The algorithms this Statement uses, with the hex length each must have.


def should_attest(report: Report) -> bool:
    """A local run is judged by code the change can rewrite: its verdict is advisory, never attested."""
    return report.mode == "trusted"


def policy_identities(report: Report) -> dict[str, Optional[str]]:
    """Every suite's identities, flat (`<address>.epoch_id`, ...): the policy the verdict was reached under."""
    out: dict[str, Optional[str]] = {}
    for suite in report.suites:
        ids = suite.identities
        out.update(
            {
                f"{suite.address}.{name}": value
                for name, value in (
                    ("epoch_id", ids.epoch_id),
                    ("generator_sha256", ids.generator_sha256),
                    ("manifest_sha256", ids.manifest_sha256),
                    ("world_sha256", ids.world_sha256),
                    ("isolation", ids.isolation),
                )
            }
        )
        held = suite.held_out
        if held.drawn:
            out[f"{suite.address}.held_out_seed_sha256"] = held.seed_sha256
            out[f"{suite.address}.held_out_world_sha256"] = held.world_sha256
        else:
            out[f"{suite.address}.held_out"] = f"not drawn: {held.why}"
        draw = suite.property_draw
        if draw.drawn:
            out[f"{suite.address}.held_out_properties_seed_sha256"] = draw.seed_sha256
            out[f"{suite.address}.held_out_properties"] = ",".join(draw.names)
        else:
            out[f"{suite.address}.held_out_properties"] = f"not drawn: {draw.why}"
        if suite.regressions.world_sha256:  # the records kept by reviewers, replayed under every catalog property
            out[f"{suite.address}.regressions_world_sha256"] = suite.regressions.world_sha256
    return out


def verified_levels(report: Report) -> list[str]:
    if report.verdict.label is not Label.ELIGIBLE:
        return [FAILED]
    jailed = bool(report.suites) and all(is_jailed(s.identities.isolation or "") for s in report.suites)
    held_out = bool(report.suites) and all(s.held_out.drawn for s in report.suites)
    properties = bool(report.suites) and all(s.property_draw.drawn for s in report.suites)
    return [
        ELIGIBLE_LEVEL,
        *([JAILED_LEVEL] if jailed else []),
        *([HELD_OUT_LEVEL] if held_out else []),
        *([HELD_OUT_PROPERTIES_LEVEL] if properties else []),
    ]


def _git_uri(repository: str, commit: Optional[str]) -> str:
    return f"git+{repository}@{commit}" if commit else f"git+{repository}"


def resource_uri(repository: str, tree: ReviewedTree) -> str:
    """The commit judged: in trusted mode the candidate's, even when what was judged is that commit merged
    into the trusted ref (the subject's gitTree then names the merged tree, and no gitCommit does)."""
    return _git_uri(repository, tree.head_commit)


def rfc3339(time: datetime.datetime) -> str:
    if time.tzinfo is None:
        raise ValueError("timeVerified needs an aware datetime")
    return time.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def statement(
    report: Report,
    tree: ReviewedTree,
    report_bytes: bytes,
    *,
    time: datetime.datetime,
    repository: str,
    oracle_commit: str,
    verifier_id: str = VERIFIER_ID,
) -> dict[str, Any]:
    identities = policy_identities(report)
    passed = report.verdict.label is Label.ELIGIBLE
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": SUBJECT_NAME, "digest": tree.digest()},
            {"name": REPORT_NAME, "digest": {"sha256": sha256_bytes(report_bytes)}},
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": verifier_id, "version": {"epoch_gate": epoch_gate.__version__}},
            "timeVerified": rfc3339(time),
            "resourceUri": resource_uri(repository, tree),
            "policy": {
                "name": POLICY_NAME,
                "uri": _git_uri(repository, oracle_commit),
                "digest": {"sha256": sha256_bytes(canonical_json(identities))},
                "annotations": identities,
            },
            "verificationResult": "PASSED" if passed else "FAILED",
            "verifiedLevels": verified_levels(report),
        },
    }


def statement_bytes(
    report: Report,
    tree: ReviewedTree,
    report_bytes: bytes,
    *,
    time: datetime.datetime,
    repository: str,
    oracle_commit: str,
    verifier_id: str = VERIFIER_ID,
) -> bytes:
    value = statement(
        report,
        tree,
        report_bytes,
        time=time,
        repository=repository,
        oracle_commit=oracle_commit,
        verifier_id=verifier_id,
    )
    return canonical_json(value) + b"\n"


def output_files(
    report: Report,
    witnesses: Mapping[str, bytes],
    tree: Optional[ReviewedTree],
    *,
    time: datetime.datetime,
    root: Path,
    verifier_id: str = VERIFIER_ID,
    key: Optional[Ed25519PrivateKey] = None,
) -> dict[str, bytes]:
    """Everything the gate writes, by relative path: the statement too, in trusted mode with a known tree,
    and with `key` the statement in a DSSE envelope signed by it.

    `root` is the checkout the gate ran in: its origin names the repository, its HEAD the oracle's commit.
    """
    files = reports.output_files(report, witnesses)
    if tree is not None and should_attest(report):
        files[STATEMENT_FILE] = statement_bytes(
            report,
            tree,
            files[REPORT_NAME],
            time=time,
            repository=repository_url(root),
            oracle_commit=head_commit(root),
            verifier_id=verifier_id,
        )
        if key is not None:
            files[ENVELOPE_FILE] = sign(files[STATEMENT_FILE], key)
    return files
