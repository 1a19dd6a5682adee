from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1 import resource_descriptor_pb2, statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement

from epoch_gate.verdict import attestation
from epoch_gate.verdict.suite import Label, Verdict
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.evidence.held_out import LOCAL, LOCAL_PROPERTIES, HeldOut, PropertyDraw
from epoch_gate.verdict.report import Report
from epoch_gate.verdict.report_test import sample_report
from epoch_gate.testutil import layout_problems
from epoch_gate.change.tree import ReviewedTree
from epoch_gate.change.tree_test import git, make_repo

CLEAN = ReviewedTree("1" * 40, "2" * 40, clean=True)
DIRTY = ReviewedTree("1" * 40, "3" * 40, clean=False)
REPOSITORY = "https://example.com/org/repo.git"
ORACLE = "4" * 40
WHEN = datetime.datetime(2026, 12, 3, 21, 5, 9, 123456, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))


def trusted(report: Report) -> Report:
    return dataclasses.replace(report, mode="trusted")


def eligible(report: Report) -> Report:
    return dataclasses.replace(report, verdict=Verdict(Label.ELIGIBLE, ()))


def make(report: Report, tree: ReviewedTree = CLEAN) -> dict[str, Any]:
    return attestation.statement(
        report, tree, report.to_bytes(), time=WHEN, repository=REPOSITORY, oracle_commit=ORACLE
    )


def reference_validate(data: bytes) -> None:
    """The in-toto project's own bindings: the Statement, its subjects and the policy as ResourceDescriptors,
    and the predicate as their VSA v1 proto."""
    proto = json_format.Parse(data, statement_pb2.Statement())
    Statement.copy_from_pb(proto).validate()
    predicate = json.loads(data)["predicate"]
    policy = json_format.Parse(json.dumps(predicate["policy"]), resource_descriptor_pb2.ResourceDescriptor())
    ResourceDescriptor.copy_from_pb(policy).validate()
    # in-toto-attestation 0.9's VSA proto models VSA 1.0 with verifiedLevels as one string (in-toto/attestation
    # #425: the spec's array wins), and not 1.1's verifier.version or the policy's other descriptor fields.
    modelled = {k: v for k, v in predicate.items() if k != "verifiedLevels"}
    json_format.Parse(json.dumps(modelled), vsa_pb2.VerificationSummary(), ignore_unknown_fields=True)
    for level in predicate["verifiedLevels"]:
        json_format.ParseDict({"verifiedLevels": level}, vsa_pb2.VerificationSummary())


@pytest.mark.parametrize("tree", [CLEAN, DIRTY])
@pytest.mark.parametrize("passing", [False, True])
def test_the_statement_is_a_vsa_v1_in_an_in_toto_v1_statement(tree: ReviewedTree, passing: bool) -> None:
    report = trusted(eligible(sample_report()) if passing else sample_report())
    data = attestation.statement_bytes(
        report, tree, report.to_bytes(), time=WHEN, repository=REPOSITORY, oracle_commit=ORACLE
    )
    reference_validate(data)
    value = json.loads(data)
    assert layout_problems(value) == []
    assert value["_type"] == "https://in-toto.io/Statement/v1"
    assert value["predicateType"] == "https://slsa.dev/verification_summary/v1"


def test_the_subjects_are_the_reviewed_tree_and_the_report() -> None:
    report = sample_report()
    value = make(report)
    assert value["subject"] == [
        {"name": "git-worktree", "digest": {"gitCommit": "1" * 40, "gitTree": "2" * 40}},
        {"name": "report.json", "digest": {"sha256": sha256_bytes(report.to_bytes())}},
    ]
    assert "inputAttestations" not in value["predicate"]


def test_the_predicate_names_verifier_time_resource_and_the_oracle_as_policy() -> None:
    predicate = make(sample_report())["predicate"]
    assert predicate["verifier"] == {"id": "pkg:generic/epoch-gate", "version": {"epoch_gate": "0.1.0"}}
    assert predicate["timeVerified"] == "2026-12-03T20:05:09Z"  # in UTC, whatever zone the clock gave
    assert predicate["resourceUri"] == f"git+{REPOSITORY}@{'1' * 40}"
    identities = {
        "suite.epoch_id": "e1",
        "suite.generator_sha256": "a" * 64,
        "suite.manifest_sha256": "b" * 64,
        "suite.world_sha256": "c" * 64,
        "suite.isolation": None,
        "suite.held_out": f"not drawn: {LOCAL}",
        "suite.held_out_properties": f"not drawn: {LOCAL_PROPERTIES}",
    }
    assert predicate["policy"] == {
        "name": "epoch_gate oracle",
        "uri": f"git+{REPOSITORY}@{ORACLE}",
        "digest": {"sha256": sha256_bytes(canonical_json(identities))},
        "annotations": identities,
    }


def test_only_eligible_passes() -> None:
    assert make(sample_report())["predicate"]["verificationResult"] == "FAILED"  # closed
    assert make(sample_report())["predicate"]["verifiedLevels"] == ["FAILED"]
    hold = dataclasses.replace(sample_report(), verdict=Verdict(Label.HOLD, ()))
    assert make(hold)["predicate"]["verificationResult"] == "FAILED"
    passed = make(eligible(sample_report()))["predicate"]
    assert passed["verificationResult"] == "PASSED" and passed["verifiedLevels"] == ["EPOCH_GATE_ELIGIBLE"]


JAILED = "bubblewrap 0.8.0: no working tree, no network, the product in a jail of its own, clock stopped at x"


def isolated(report: Report, *isolation: str) -> Report:
    (suite,) = report.suites
    suites = tuple(
        dataclasses.replace(
            suite, address=f"suite{i}", identities=dataclasses.replace(suite.identities, isolation=text)
        )
        for i, text in enumerate(isolation)
    )
    return dataclasses.replace(report, suites=suites)


@pytest.mark.parametrize(
    "isolation, levels",
    [
        ((JAILED,), ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED"]),
        ((JAILED, JAILED), ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED"]),
        ((JAILED, "none (bubblewrap unavailable)"), ["EPOCH_GATE_ELIGIBLE"]),
        (("UNJAILED ([gate].unsafe_allow_unjailed_verdict): none (bubblewrap unavailable)",), ["EPOCH_GATE_ELIGIBLE"]),
        (("bubblewrap 0.8.0: no working tree, no network, clock stopped at x",), ["EPOCH_GATE_ELIGIBLE"]),
    ],
)
def test_the_jailed_level_needs_every_suite_jailed_with_the_product_in_its_own(
    isolation: tuple[str, ...], levels: list[str]
) -> None:
    report = eligible(isolated(sample_report(), *isolation))
    predicate = make(report)["predicate"]
    assert predicate["verifiedLevels"] == levels
    assert [v for k, v in predicate["policy"]["annotations"].items() if k.endswith(".isolation")] == list(isolation)
    assert make(isolated(sample_report(), *isolation))["predicate"]["verifiedLevels"] == ["FAILED"]


def jailed_and_eligible(field: str, values: tuple[Any, ...]) -> dict[str, Any]:
    """The predicate of an eligible report of one jailed suite per value, each suite's `field` that value."""
    report = isolated(sample_report(), *(JAILED,) * len(values))
    suites = tuple(dataclasses.replace(suite, **{field: value}) for suite, value in zip(report.suites, values))
    return make(eligible(dataclasses.replace(report, suites=suites)))["predicate"]


DRAWN = HeldOut(True, seed_sha256="5" * 64, world_sha256="7" * 64, records=(("b", 3),), cached=False)


@pytest.mark.parametrize(
    "held_out, levels",
    [
        ((DRAWN,), ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED", "EPOCH_GATE_HELD_OUT"]),
        ((DRAWN, HeldOut(False, "opted out")), ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED"]),
        ((HeldOut(False, "no key"),), ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED"]),
    ],
)
def test_the_held_out_level_needs_every_suite_judged_over_a_held_out_world(
    held_out: tuple[HeldOut, ...], levels: list[str]
) -> None:
    predicate = jailed_and_eligible("held_out", held_out)
    assert predicate["verifiedLevels"] == levels
    annotations = predicate["policy"]["annotations"]
    assert {k: v for k, v in annotations.items() if ".held_out" in k and ".held_out_properties" not in k} == {
        **{f"suite{i}.held_out_seed_sha256": "5" * 64 for i, h in enumerate(held_out) if h.drawn},
        **{f"suite{i}.held_out_world_sha256": "7" * 64 for i, h in enumerate(held_out) if h.drawn},
        **{f"suite{i}.held_out": f"not drawn: {h.why}" for i, h in enumerate(held_out) if not h.drawn},
    }


def test_a_tree_that_is_not_the_commits_is_named_by_its_tree_and_the_commit_it_judged() -> None:
    """A candidate branched from an older main is judged merged into the trusted ref: the subject is the
    merged tree alone, and the resource still names the candidate's commit, which the consumer checks."""
    value = make(sample_report(), DIRTY)
    assert value["subject"][0]["digest"] == {"gitTree": "3" * 40}
    assert value["predicate"]["resourceUri"] == f"git+{REPOSITORY}@{'1' * 40}"


def test_a_naive_time_is_refused() -> None:
    with pytest.raises(ValueError):
        attestation.statement(
            sample_report(),
            CLEAN,
            b"",
            time=datetime.datetime(2026, 12, 3),
            repository=REPOSITORY,
            oracle_commit=ORACLE,
        )


def test_only_trusted_mode_writes_the_statement(tmp_path: Path) -> None:
    make_repo(tmp_path)  # the checkout the gate runs in: no origin, so its folder names the repository
    local = sample_report()
    assert not attestation.should_attest(local)
    assert attestation.STATEMENT_FILE not in attestation.output_files(local, {}, CLEAN, time=WHEN, root=tmp_path)
    files = attestation.output_files(trusted(local), {}, CLEAN, time=WHEN, root=tmp_path)
    statement = json.loads(files[attestation.STATEMENT_FILE])
    assert statement["subject"][1]["digest"] == {"sha256": sha256_bytes(files["report.json"])}
    assert statement["predicate"]["resourceUri"] == f"git+{tmp_path.resolve().as_uri()}@{'1' * 40}"
    assert statement["predicate"]["policy"]["uri"] == f"git+{tmp_path.resolve().as_uri()}@" + git(
        tmp_path, "rev-parse", "HEAD"
    )
    assert attestation.STATEMENT_FILE not in attestation.output_files(
        trusted(local), {}, None, time=WHEN, root=tmp_path
    )


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda s: s.update(_type="https://in-toto.io/Statement/v0.1"), "_type"),
        (lambda s: s.update(subject=[]), "subject"),
        (lambda s: s["subject"][0].update(digest={}), "subject[0].digest"),
        (lambda s: s["subject"][0]["digest"].update(gitTree="ABC"), "gitTree"),
        (lambda s: s["subject"][0]["digest"].update(md5="0" * 32), "unknown algorithm"),
        (lambda s: s["subject"][1]["digest"].update(sha256="0"), "subject[1].digest"),
        (lambda s: s["subject"].pop(), "report.json"),
        (lambda s: s.update(predicateType="verdict"), "predicateType"),
        (lambda s: s.update(predicate=[]), "predicate"),
        (lambda s: s["predicate"].pop("verifier"), "verifier.id"),
        (lambda s: s["predicate"]["verifier"].update(id="epoch gate"), "verifier.id"),
        (lambda s: s["predicate"]["verifier"].update(version={"epoch_gate": 1}), "verifier.version"),
        (lambda s: s["predicate"].update(timeVerified="2026-12-03 20:05:09"), "timeVerified"),
        (lambda s: s["predicate"].update(timeVerified="2026-12-03T21:05:09+01:00"), "timeVerified"),
        (lambda s: s["predicate"].pop("resourceUri"), "resourceUri"),
        (lambda s: s["predicate"]["policy"].pop("uri"), "policy.uri"),
        (lambda s: s["predicate"]["policy"]["digest"].update(sha256="0"), "policy.digest"),
        (lambda s: s["predicate"].update(inputAttestations=[{"uri": "https://example.com/a"}]), "inputAttestations"),
        (lambda s: s["predicate"].update(verificationResult="failed"), "verificationResult"),
        (lambda s: s["predicate"].update(verificationResult="PASSED"), "FAILED exactly when"),
        (lambda s: s["predicate"].update(verifiedLevels="FAILED"), "verifiedLevels"),
        (lambda s: s["predicate"].update(verifiedLevels=[]), "verifiedLevels"),
        (lambda s: s["predicate"]["verifiedLevels"].append("SLSA_EPOCH_GATE"), "must not start with SLSA_"),
        (
            lambda s: s["predicate"]["verifiedLevels"].extend(["SLSA_BUILD_LEVEL_1", "SLSA_BUILD_LEVEL_2"]),
            "more than one level",
        ),
        (lambda s: s["predicate"].update(dependencyLevels={"SLSA_BUILD_LEVEL_1": -1}), "dependencyLevels"),
        (lambda s: s["predicate"].update(slsaVersion="1"), "slsaVersion"),
    ],
)
def test_layout_problems_name_what_is_wrong(edit, problem: str) -> None:
    value = make(sample_report())
    edit(value)
    problems = layout_problems(value)
    assert problems and any(problem in p for p in problems), problems


def test_the_optional_vsa_fields_are_accepted_when_well_formed() -> None:
    value = make(sample_report())
    value["predicate"].update(
        dependencyLevels={"SLSA_BUILD_LEVEL_3": 2},
        slsaVersion="1.1",
        inputAttestations=[{"uri": "https://example.com/a", "digest": {"sha256": "0" * 64}}],
    )
    value["predicate"].pop("timeVerified")  # optional since VSA 1.1
    assert layout_problems(value) == []


def test_the_reference_bindings_refuse_what_the_layout_check_refuses() -> None:
    value = make(sample_report())
    value["subject"][0]["digest"] = {}
    with pytest.raises(ValueError):
        reference_validate(json.dumps(value).encode())
    value = make(sample_report())
    value["predicate"]["timeVerified"] = "yesterday"
    with pytest.raises(json_format.ParseError):
        reference_validate(json.dumps(value).encode())


@pytest.mark.parametrize(
    "draws, levels",
    [
        ((PropertyDraw(True, seed_sha256="6" * 64, names=("q", "r"), count="2"),), ["EPOCH_GATE_HELD_OUT_PROPERTIES"]),
        ((PropertyDraw(True, seed_sha256="6" * 64, names=("q",), count="2"), PropertyDraw(False, "no key")), []),
    ],
)
def test_the_held_out_properties_level_needs_every_suite_to_have_drawn_them(
    draws: tuple[PropertyDraw, ...], levels: list[str]
) -> None:
    predicate = jailed_and_eligible("property_draw", draws)
    assert predicate["verifiedLevels"] == ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED", *levels]
    annotations = predicate["policy"]["annotations"]
    assert {k: v for k, v in annotations.items() if ".held_out_properties" in k} == {
        **{f"suite{i}.held_out_properties_seed_sha256": "6" * 64 for i, d in enumerate(draws) if d.drawn},
        **{f"suite{i}.held_out_properties": ",".join(d.names) for i, d in enumerate(draws) if d.drawn},
        **{f"suite{i}.held_out_properties": f"not drawn: {d.why}" for i, d in enumerate(draws) if not d.drawn},
    }
