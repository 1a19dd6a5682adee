from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement

from epoch_gate import attestation
from epoch_gate.hashing import sha256_bytes
from epoch_gate.report_test import sample_report
from epoch_gate.tree import ReviewedTree

CLEAN = ReviewedTree("1" * 40, "2" * 40, clean=True)
DIRTY = ReviewedTree("1" * 40, "3" * 40, clean=False)


def reference_validate(data: bytes) -> None:
    """The in-toto project's own bindings: parse as the v1 Statement proto, then its validate()."""
    proto = json_format.Parse(data, statement_pb2.Statement())
    Statement.copy_from_pb(proto).validate()


@pytest.mark.parametrize("tree", [CLEAN, DIRTY])
def test_the_statement_is_an_in_toto_v1_statement(tree: ReviewedTree) -> None:
    report = sample_report()
    data = attestation.statement_bytes(report, tree, report.to_bytes())
    reference_validate(data)
    value = json.loads(data)
    assert attestation.layout_problems(value) == []
    assert value["_type"] == "https://in-toto.io/Statement/v1"
    assert value["predicateType"] == attestation.PREDICATE_TYPE


def test_the_predicate_carries_verdict_identities_reasons_and_the_report_digest() -> None:
    report = sample_report()
    value = attestation.statement(report, CLEAN, report.to_bytes())
    predicate = value["predicate"]
    assert value["subject"] == [{"name": "git-worktree", "digest": {"gitCommit": "1" * 40, "gitTree": "2" * 40}}]
    assert predicate["verdict"] == "closed" and predicate["exit_code"] == 1
    assert predicate["identities"]["epoch_id"] == "e1"
    assert predicate["identities"]["manifest_sha256"] == "b" * 64
    assert [w["observation_id"] for w in predicate["identities"]["witnesses"]] == [r.id for r in report.observations]
    assert {r["code"] for r in predicate["reasons"]} >= {"generator-mismatch", "protected-path-changed"}
    assert predicate["report"]["digest"] == {"sha256": sha256_bytes(report.to_bytes())}


def test_a_dirty_tree_is_not_named_by_its_commit() -> None:
    report = sample_report()
    value = attestation.statement(report, DIRTY, report.to_bytes())
    assert value["subject"][0]["digest"] == {"gitTree": "3" * 40}
    assert value["predicate"]["worktree_clean"] is False and value["predicate"]["head_commit"] == "1" * 40


@pytest.mark.parametrize("edit, problem", [
    (lambda s: s.update(_type="https://in-toto.io/Statement/v0.1"), "_type"),
    (lambda s: s.update(subject=[]), "subject"),
    (lambda s: s["subject"][0].update(digest={}), "subject[0].digest"),
    (lambda s: s["subject"][0]["digest"].update(gitTree="ABC"), "gitTree"),
    (lambda s: s["subject"][0]["digest"].update(md5="0" * 32), "unknown algorithm"),
    (lambda s: s.update(predicateType="verdict"), "predicateType"),
    (lambda s: s.update(predicate=[]), "predicate"),
    (lambda s: s["predicate"].update(verdict="maybe"), "verdict"),
    (lambda s: s["predicate"]["report"]["digest"].update(sha256="0"), "report.digest"),
    (lambda s: s["predicate"].update(report="report.json"), "report.digest"),
])
def test_layout_problems_name_what_is_wrong(edit, problem: str) -> None:
    report = sample_report()
    value = attestation.statement(report, CLEAN, report.to_bytes())
    edit(value)
    problems = attestation.layout_problems(value)
    assert problems and any(problem in p for p in problems), problems


def test_the_reference_bindings_refuse_what_the_layout_check_refuses() -> None:
    report = sample_report()
    value = attestation.statement(report, CLEAN, report.to_bytes())
    value["subject"][0]["digest"] = {}
    with pytest.raises(ValueError):
        reference_validate(json.dumps(value).encode())
