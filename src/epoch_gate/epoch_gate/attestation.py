"""The verdict as an in-toto Statement (v1), unsigned: the CI's own signer (cosign, a DSSE envelope) signs it.

Its subject is the reviewed tree (the HEAD commit and git's tree id of the working tree that was judged);
its predicate carries the verdict, the three identities, the reasons and the digest of report.json, so
a verifier can tie a signed verdict to the exact tree and report it speaks for.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import epoch_gate
from epoch_gate.hashing import canonical_json, sha256_bytes
from epoch_gate.report import Report
from epoch_gate.tree import ReviewedTree

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# A name for the predicate's layout (docs/concepts.md describes it), not a document fetched at runtime.
PREDICATE_TYPE = "https://epoch-gate.dev/verdict/v1"
STATEMENT_FILE = "statement.intoto.json"
SUBJECT_NAME = "git-worktree"

# The algorithms this Statement uses, with the hex length each must have.
DIGEST_LENGTHS = {"sha256": 64, "gitCommit": 40, "gitTree": 40}


def statement(report: Report, tree: ReviewedTree, report_bytes: bytes) -> dict[str, Any]:
    body = report.to_json()
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": SUBJECT_NAME, "digest": tree.digest()}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "verdict": body["verdict"],
            "exit_code": body["exit_code"],
            "identities": body["identities"],
            "reasons": body["reasons"],
            "base": report.base,
            "head_commit": tree.head_commit,
            "worktree_clean": tree.clean,
            "report": {"name": "report.json", "digest": {"sha256": sha256_bytes(report_bytes)}},
            "gate": {"name": "epoch_gate", "version": epoch_gate.__version__},
        },
    }


def statement_bytes(report: Report, tree: ReviewedTree, report_bytes: bytes) -> bytes:
    return canonical_json(statement(report, tree, report_bytes)) + b"\n"


def layout_problems(value: Any) -> list[str]:
    """Where `value` departs from the Statement v1 layout and this predicate's digests; [] when it holds."""
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
    if not isinstance(value.get("predicateType"), str) or not re.match(r"[a-z][a-z0-9+.-]*:", value["predicateType"]):
        problems.append("predicateType must be a URI")
    predicate = value.get("predicate")
    if not isinstance(predicate, dict):
        problems.append("predicate must be an object")
    elif value.get("predicateType") == PREDICATE_TYPE:
        report = predicate.get("report")
        report_digest: Optional[Any] = report.get("digest") if isinstance(report, dict) else None
        problem = _digest_problem(report_digest)
        if problem:
            problems.append(f"predicate.report.digest: {problem}")
        if predicate.get("verdict") not in ("eligible", "closed", "hold"):
            problems.append("predicate.verdict must be eligible, closed or hold")
    return problems


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
