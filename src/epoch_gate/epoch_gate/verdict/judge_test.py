"""The judgement of a repository: several suites, each on its own evidence, one verdict."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Optional, Sequence

import pytest

from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.verify import ReplayEvidence
from epoch_gate.verdict.suite import Expected, Identities
from epoch_gate.evidence.freezes import Freeze
from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.evidence.held_out import LOCAL, LOCAL_PROPERTIES, HeldOut, PropertyDraw
from epoch_gate.evidence.regressions import RegressionStatus
from epoch_gate.verdict.judge import (
    ChangeFacts,
    HeldOutFacts,
    Judgement,
    RegressionFacts,
    SuiteFacts,
    SuiteOracle,
    judge,
)
from epoch_gate.evidence.observations import Observation, make_observation
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Code, Reason
from epoch_gate.evidence.replay_result import PropertyOutcome, ReplayResult
from epoch_gate.verdict.report import console_lines, markdown

TODAY = datetime.date(2026, 12, 2)
PROTECTED = ProtectedSet(frozenset({"payments/EPOCH", "inventory/EPOCH"}), ("observations/", "freezes/"))
PRODUCT_CHANGE = (ChangedPath("src/app.py", "modified"),)


def oracle(address: str) -> SuiteOracle:
    name = address.split(":")[0]
    return SuiteOracle(address, f"{name}/EPOCH", f"{name}/manifest.json", f"{name}/catalog.yaml", ())


def observed(
    address: str, status: str = "fail", prop: str = "p", witness: bytes = b'{"id":1}', epoch: Optional[str] = None
) -> Observation:
    return make_observation(
        suite=address,
        epoch_id=epoch or f"{address}-e",
        prop=prop,
        status=status,
        rerun_passed=status == "flake",
        witness=witness,
        bound="b",
        line=1,
        detail="returned False",
    )


def suite(
    address: str,
    *found: Observation,
    epoch: Optional[str] = None,
    replayed_as: Optional[str] = None,
    findings: Sequence[Reason] = (),
) -> SuiteFacts:
    """A suite whose replay of one property `p` over 10 records passed, or found `found`."""
    epoch = epoch or f"{address}-e"
    ids = Identities(epoch, "g" * 64, "m" * 64, "w" * 64)
    outcome = PropertyOutcome(
        "p",
        "b",
        10,
        found[0].status if found else "pass",
        tuple(o.id for o in found),
        "",
        failures=sum(o.status == "fail" for o in found),
    )
    result = ReplayResult(replayed_as or address, epoch, "m" * 64, "w" * 64, (outcome,))
    replay = ReplayEvidence(result, found, {o.id: b'{"id":1}' for o in found}, ())
    return SuiteFacts(oracle(address), ids, Expected((("p", "b"),), {"b": 10}), replay, tuple(findings))


def facts(
    *,
    changed: Optional[tuple[ChangedPath, ...]] = PRODUCT_CHANGE,
    freezes: Sequence[Freeze] = (),
    archive: Sequence[Observation] = (),
    known: Sequence[str] = ("payments:props", "inventory:props"),
    findings: Sequence[Reason] = (),
) -> ChangeFacts:
    return ChangeFacts(
        mode="local",
        base=None,
        changed=changed,
        protected=PROTECTED,
        oracles=tuple(oracle(a) for a in known),
        archive=tuple(archive),
        freezes=tuple(freezes),
        today=TODAY,
        observations_dir="observations",
        freezes_dir="freezes",
        out="dist/gate",
        findings=tuple(findings),
    )


def judged(change: ChangeFacts, *suites: SuiteFacts, read_base=None) -> Judgement:  # type: ignore[no-untyped-def]
    return judge(change, suites, read_base=read_base, read_change=lambda path: None)


def verdicts(j: Judgement) -> dict[str, str]:
    return {s.address: s.verdict.label.value for s in j.report.suites}


def suite_codes(j: Judgement, address: str) -> set[Code]:
    return {r.code for s in j.report.suites if s.address == address for r in s.verdict.reasons}


def freeze(flake: Observation, address: str, path: str = "freezes/f.json") -> Freeze:
    return Freeze(path, flake.id, address, flake.epoch_id, datetime.date(2026, 12, 31), "ticket 1")


def test_a_failing_property_closes_its_suite_only() -> None:
    j = judged(facts(), suite("payments:props", observed("payments:props")), suite("inventory:props"))
    assert j.report.verdict.label.value == "closed" and j.report.verdict.reasons == ()
    assert verdicts(j) == {"inventory:props": "eligible", "payments:props": "closed"}
    assert suite_codes(j, "payments:props") == {Code.PROPERTY_FAILED}
    assert j.report.counts() == {"closed": 1, "hold": 0, "eligible": 1}


def test_every_suite_eligible_and_nothing_changed_that_is_protected_is_eligible() -> None:
    j = judged(facts(), suite("payments:props"), suite("inventory:props"))
    assert j.report.verdict.label.value == "eligible"


def test_no_suite_in_scope_is_closed_never_an_empty_pass() -> None:
    j = judged(facts())
    assert j.report.verdict.label.value == "closed"
    assert [r.code for r in j.report.verdict.reasons] == [Code.ARTIFACT_MISSING]


@pytest.mark.parametrize("lockfile", ["3rdparty/python/default.lock", "3rdparty/python/requirements.txt"])
def test_a_requirement_change_closes_naming_it_and_what_to_do(lockfile: str) -> None:
    """An upgrade or a downgrade alike: the replay ran the base's resolve, not what the change would
    install, so the change is judged as a dependency change, to land on its own first."""
    requirements = ProtectedSet(PROTECTED.paths, PROTECTED.globs, frozenset({lockfile}))
    change = dataclasses.replace(facts(changed=(ChangedPath(lockfile, "modified"),)), protected=requirements)
    j = judged(change, suite("payments:props"))
    assert j.report.verdict.label.value == "closed"
    (reason,) = j.report.verdict.reasons
    assert (reason.code, reason.path, reason.expected, reason.found) == (
        Code.REQUIREMENTS_CHANGED,
        lockfile,
        "the base's requirements and lockfile",
        "modified",
    )
    assert reason.code.advice.startswith("Land the dependency change on its own first")


def test_the_protected_set_is_the_repositorys_whatever_the_scope() -> None:
    # Only payments is in scope; the change edits inventory's pin.
    j = judged(facts(changed=(ChangedPath("inventory/EPOCH", "modified"),)), suite("payments:props"))
    assert j.report.verdict.label.value == "closed" and verdicts(j) == {"payments:props": "eligible"}
    assert [r.code for r in j.report.verdict.reasons] == [Code.PROTECTED_PATH_CHANGED]


def test_what_the_base_pinned_stays_protected() -> None:
    base_pin = canonical_json(
        {
            "schema": 1,
            "epoch_id": "old",
            "generator": "gen/old.py",
            "generator_sha256": "a" * 64,
            "inputs": [{"path": "gen/in.json", "sha256": "b" * 64}],
        }
    )
    j = judged(
        facts(changed=(ChangedPath("gen/in.json", "deleted"),)),
        suite("payments:props"),
        read_base=lambda path: base_pin if path == "payments/EPOCH" else None,
    )
    assert "gen/in.json" in j.report.protected.paths
    assert Code.PROTECTED_PATH_CHANGED in {r.code for r in j.report.verdict.reasons}


def test_two_fixtures_pinning_one_epoch_id_are_closed() -> None:
    j = judged(facts(), suite("payments:props", epoch="shared"), suite("inventory:props", epoch="shared"))
    assert [r.code for r in j.report.verdict.reasons] == [Code.EPOCH_ID_DUPLICATE]


def test_a_replay_of_another_suite_is_not_evidence() -> None:
    j = judged(facts(), suite("payments:props", replayed_as="inventory:props"))
    assert Code.SUITE_MISMATCH in suite_codes(j, "payments:props")


def test_observation_ids_differ_between_suites_sharing_a_property_and_bytes() -> None:
    assert observed("payments:props").id != observed("inventory:props").id


def test_a_freeze_binds_to_its_suite_only() -> None:
    flake = observed("payments:props", "flake")
    j = judged(
        facts(freezes=[freeze(flake, "payments:props")]), suite("payments:props", flake), suite("inventory:props")
    )
    assert verdicts(j) == {"inventory:props": "eligible", "payments:props": "hold"}
    assert suite_codes(j, "payments:props") == {Code.FLAKE_FROZEN}
    # The same freeze claimed for inventory: it covers no flake there and holds inventory, not payments.
    claimed = freeze(flake, "inventory:props", "freezes/g.json")
    j = judged(facts(freezes=[claimed]), suite("payments:props", flake), suite("inventory:props"))
    assert suite_codes(j, "payments:props") == {Code.FLAKE_UNFROZEN}
    assert Code.FREEZE_OBSERVATION_MISSING in suite_codes(j, "inventory:props")


def test_a_freeze_of_a_suite_out_of_scope_holds_nothing() -> None:
    flake = observed("inventory:props", "flake")
    j = judged(facts(freezes=[freeze(flake, "inventory:props")]), suite("payments:props"))
    assert j.report.verdict.label.value == "eligible"


def test_a_freeze_naming_no_suite_of_the_repository_holds_until_deleted() -> None:
    flake = observed("gone:props", "flake")
    j = judged(facts(freezes=[freeze(flake, "gone:props")]), suite("payments:props"))
    assert j.report.verdict.label.value == "hold"
    assert [r.code for r in j.report.verdict.reasons] == [Code.FREEZE_UNUSED]


def test_archived_evidence_of_another_suite_does_not_count() -> None:
    flake = observed("inventory:props", "flake")
    archived = dataclasses.replace(flake, source="archive")
    # payments' replay reports inventory's observation id as its own: it is not payments' evidence.
    j = judged(facts(archive=[archived]), suite("payments:props", flake))
    assert Code.OBSERVATION_WITNESS_MISSING in suite_codes(j, "payments:props")


def test_witnesses_go_under_their_suites_folder() -> None:
    failed = observed("payments:props")
    j = judged(facts(), suite("payments:props", failed))
    (reason,) = [r for s in j.report.suites for r in s.verdict.reasons]
    folder = j.report.suites[0].folder
    assert reason.path == f"payments:props#{failed.property}"  # about the property and the record; its bytes:
    assert f"(saved as dist/gate/{folder}/observations/{failed.id}.bin)" in reason.message
    assert folder.startswith("suites/payments_props-")
    from epoch_gate.verdict.report import output_files

    assert f"{folder}/observations/{failed.id}.bin" in output_files(j.report, j.witnesses)


def test_global_findings_close_whatever_the_suites_say() -> None:
    finding = Reason(Code.MODULE_SHADOWED, "x.py", "none", "x", "shadowed")
    j = judged(facts(findings=[finding]), suite("payments:props"))
    assert j.report.verdict.label.value == "closed" and verdicts(j) == {"payments:props": "eligible"}


def test_an_unavailable_changed_set_closes() -> None:
    j = judged(facts(changed=None), suite("payments:props"))
    assert [r.code for r in j.report.verdict.reasons] == [Code.CHANGED_SET_UNAVAILABLE]


def test_only_the_oracles_a_change_touches_are_read_for_the_reviewer() -> None:
    read: list[str] = []

    def reader(path: str) -> Optional[bytes]:
        read.append(path)
        return None

    change = dataclasses.replace(facts(changed=(ChangedPath("payments/EPOCH", "modified"),)), base="b" * 40)
    judge(change, [suite("payments:props"), suite("inventory:props")], read_base=reader, read_change=reader)
    assert "payments/catalog.yaml" in read and not any(
        p.startswith("inventory/") and p != "inventory/EPOCH" for p in read
    )


def _held_out(address: str, *found: Observation, records: int = 10) -> HeldOutFacts:
    """A held-out replay of `p` over `records` records of another world, that passed or found `found`."""
    epoch = f"{address}-e"
    outcome = PropertyOutcome(
        "p",
        "b",
        records,
        found[0].status if found else "pass",
        tuple(o.id for o in found),
        "",
        failures=sum(o.status == "fail" for o in found),
    )
    result = ReplayResult(address, epoch, "m" * 64, "h" * 64, (outcome,))
    status = HeldOut(True, seed_sha256="5" * 64, world_sha256="h" * 64, records=(("b", 10),))
    return HeldOutFacts(
        status,
        Identities(epoch, "g" * 64, "m" * 64, "h" * 64),
        Expected((("p", "b"),), {"b": 10}),
        ReplayEvidence(result, found, {o.id: b'{"id":2}' for o in found}, ()),
    )


def test_a_failure_on_a_held_out_record_closes_with_its_witness() -> None:
    failure = observed("payments:props", witness=b'{"id":2}')
    j = judged(facts(), dataclasses.replace(suite("payments:props"), held_out=_held_out("payments:props", failure)))
    (report,) = j.report.suites
    saved = f"dist/gate/{report.folder}/observations/{failure.id}.bin"
    assert [(r.code, r.path, r.message) for r in report.verdict.reasons] == [
        (
            Code.PROPERTY_FAILED,
            "payments:props#p",
            f"held-out world: the {failure.bound} record at line {failure.line} (saved as {saved}) fails it: "
            "returned False",
        )
    ]
    assert j.witnesses == {failure.id: b'{"id":2}'}
    assert report.to_json()["held_out"]["properties"][0]["outcome"] == "fail"


def test_a_flake_seen_only_in_the_held_out_world_says_its_line_is_that_worlds() -> None:
    flake = observed("payments:props", "flake", witness=b'{"id":7}')
    j = judged(facts(), dataclasses.replace(suite("payments:props"), held_out=_held_out("payments:props", flake)))
    (reason,) = j.report.suites[0].verdict.reasons
    assert reason.code is Code.FLAKE_UNFROZEN and reason.message.startswith("held-out world: the b record at line 1 ")


def test_a_held_out_replay_is_checked_as_the_pinned_one_is() -> None:
    """Fewer records than the held-out world holds, or a replay over another world, is not evidence."""
    short = _held_out("payments:props", records=9)
    elsewhere = dataclasses.replace(
        short,
        identities=Identities("payments:props-e", "g" * 64, "m" * 64, "x" * 64),
        replay=dataclasses.replace(
            short.replay,
            result=dataclasses.replace(
                short.replay.result, properties=(dataclasses.replace(short.replay.result.properties[0], records=10),)
            ),
        ),
    )
    for held, code in ((short, Code.REPLAY_INCOMPLETE), (elsewhere, Code.WORLD_MISMATCH)):
        j = judged(facts(), dataclasses.replace(suite("payments:props"), held_out=held))
        assert suite_codes(j, "payments:props") == {code}
    missing = dataclasses.replace(
        short,
        replay=None,
        findings=(Reason(Code.HELD_OUT_UNAVAILABLE, "fixtures/gen.py", "a world from --seed", "exit 2", "no seed"),),
    )
    j = judged(facts(), dataclasses.replace(suite("payments:props"), held_out=missing))
    assert suite_codes(j, "payments:props") == {Code.HELD_OUT_UNAVAILABLE, Code.REPLAY_FAILED}


def test_a_passing_held_out_draw_is_eligible_and_a_suite_without_one_says_why() -> None:
    j = judged(facts(), dataclasses.replace(suite("payments:props"), held_out=_held_out("payments:props")))
    assert verdicts(j) == {"payments:props": "eligible"}
    j = judged(facts(), suite("payments:props"))
    assert j.report.suites[0].to_json()["held_out"] == {"drawn": False, "why": LOCAL}


def test_a_flake_on_a_held_out_record_follows_the_rules_of_any_flake() -> None:
    flake = observed("payments:props", status="flake", witness=b'{"id":2}')
    drawn = dataclasses.replace(suite("payments:props"), held_out=_held_out("payments:props", flake))
    assert suite_codes(judged(facts(), drawn), "payments:props") == {Code.FLAKE_UNFROZEN}
    frozen = judged(facts(freezes=[freeze(flake, "payments:props")]), drawn)
    assert suite_codes(frozen, "payments:props") == {Code.FLAKE_FROZEN}
    assert verdicts(frozen) == {"payments:props": "hold"}


def test_one_records_flake_in_one_world_never_stands_for_its_failure_in_the_other() -> None:
    """The same record's bytes in both worlds have one observation id: failed twice in the pinned world and
    held on its rerun in the held-out one, it is failed, frozen or not, and the report shows the failure."""
    fail = observed("payments:props", status="fail", witness=b'{"id":1}')
    flake = observed("payments:props", status="flake", witness=b'{"id":1}')
    assert fail.id == flake.id
    for pinned, held in ((fail, flake), (flake, fail)):
        both = dataclasses.replace(suite("payments:props", pinned), held_out=_held_out("payments:props", held))
        for freezes in ([], [freeze(flake, "payments:props")]):
            j = judged(facts(freezes=freezes), both)
            assert verdicts(j) == {"payments:props": "closed"}
            codes = suite_codes(j, "payments:props")
            assert Code.PROPERTY_FAILED in codes and Code.FLAKE_FROZEN not in codes, codes
            assert codes - {Code.PROPERTY_FAILED} == ({Code.FREEZE_NOT_A_FLAKE} if freezes else set())
            assert [o.status for o in j.report.suites[0].observations] == ["fail"]


def test_a_held_out_property_that_fails_is_property_failed_and_marked_held_out() -> None:
    """A property drawn outside the manifest is judged as the manifest's are, after them; its failure says
    it was held out in the reason, the report's property list, the console and the Markdown."""
    failure = observed("payments:props", prop="q")
    base = suite("payments:props")
    extra = PropertyOutcome("q", "b", 10, "fail", (failure.id,), "", failures=1)
    replay = dataclasses.replace(
        base.replay,
        result=dataclasses.replace(base.replay.result, properties=(*base.replay.result.properties, extra)),
        observations=(failure,),
        witnesses={failure.id: b'{"id":1}'},
    )
    draw = PropertyDraw(True, seed_sha256="7" * 64, names=("q",), count="4")
    drawn = dataclasses.replace(
        base, replay=replay, expected=Expected((("p", "b"), ("q", "b")), {"b": 10}), property_draw=draw
    )
    j = judged(facts(), drawn)
    (report,) = j.report.suites
    assert [(r.code, r.path, r.message.split(":")[0]) for r in report.verdict.reasons] == [
        (Code.PROPERTY_FAILED, "payments:props#q", "held-out property")
    ]
    as_json = report.to_json()
    assert [(p["name"], p["held_out"]) for p in as_json["properties"]] == [("p", False), ("q", True)]
    assert as_json["held_out_properties"] == {
        "drawn": True,
        "seed_sha256": "7" * 64,
        "count": "4",
        "properties": ["q"],
    }
    lines = console_lines(j.report)
    assert "  held-out  held-out properties from seed 777777777777 (4): q" in lines
    assert "  property  fail  q (1 of 10 b records failed) (held-out property)" in lines
    assert "| `q` (held-out property) | fail |" in markdown(j.report)
    # Without it in the replay, the replay is incomplete: a drawn property must be judged
    unjudged = dataclasses.replace(drawn, replay=base.replay)
    assert suite_codes(judged(facts(), unjudged), "payments:props") == {Code.REPLAY_INCOMPLETE}


def test_without_a_draw_the_report_says_only_the_manifest_was_judged() -> None:
    (report,) = judged(facts(), suite("payments:props")).report.suites
    assert report.to_json()["held_out_properties"] == {"drawn": False, "why": LOCAL_PROPERTIES}
    assert all(p["held_out"] is False for p in report.to_json()["properties"])


def _kept(address: str, *found: Observation, records: int = 1) -> RegressionFacts:
    """The replay of one regression record under the catalog's `q` over `c` (the manifest samples `p` over
    `b` only), that passed or found `found`."""
    epoch = f"{address}-e"
    outcomes = (
        PropertyOutcome(
            "q", "c", records, found[0].status if found else "pass", tuple(o.id for o in found), "", failures=len(found)
        ),
    )
    result = ReplayResult(address, epoch, "m" * 64, "r" * 64, outcomes)
    return RegressionFacts(
        RegressionStatus("payments/REGRESSIONS", (("c", 1),), "r" * 64, False),
        Identities(epoch, "g" * 64, "m" * 64, "r" * 64),
        Expected((("q", "c"),), {"c": 1}),
        ReplayEvidence(result, found, {o.id: b'{"id":3}' for o in found}, ()),
    )


def test_a_regression_record_failed_again_closes_under_a_property_the_manifest_does_not_sample() -> None:
    failure = dataclasses.replace(observed("payments:props", prop="q", witness=b'{"id":3}'), bound="c")
    j = judged(facts(), dataclasses.replace(suite("payments:props"), regressions=_kept("payments:props", failure)))
    (report,) = j.report.suites
    saved = f"dist/gate/{report.folder}/observations/{failure.id}.bin"
    assert [(r.code, r.path, r.message) for r in report.verdict.reasons] == [
        (
            Code.PROPERTY_FAILED,
            "payments:props#q",
            f"regression record: the c record at line 1 (saved as {saved}) fails it: returned False",
        )
    ]
    assert j.witnesses == {failure.id: b'{"id":3}'}
    as_json = report.to_json()["regressions"]
    assert {k: v for k, v in as_json.items() if k != "properties"} == {
        "file": "payments/REGRESSIONS",
        "records": {"c": 1},
        "world_sha256": "r" * 64,
        "cached": False,
    }
    assert [(p["name"], p["outcome"]) for p in as_json["properties"]] == [("q", "fail")]
    lines = console_lines(j.report)
    assert "  kept      1 regression records replayed under every catalog property (1 c; payments/REGRESSIONS)" in lines
    assert "  kept      fail  q (1 of 1 c records failed)" in lines
    assert "| `q` (regression records) | fail | 1 c |" in markdown(j.report)


def test_regression_records_replayed_incompletely_or_elsewhere_are_not_evidence() -> None:
    kept = _kept("payments:props")
    passing = judged(facts(), dataclasses.replace(suite("payments:props"), regressions=kept))
    assert verdicts(passing) == {"payments:props": "eligible"}
    short = dataclasses.replace(kept, expected=Expected((("q", "c"),), {"c": 2}))
    elsewhere = dataclasses.replace(kept, identities=Identities("payments:props-e", "g" * 64, "m" * 64, "x" * 64))
    unread = RegressionFacts(
        RegressionStatus("payments/REGRESSIONS"),
        findings=(Reason(Code.ARTIFACT_MALFORMED, "payments/REGRESSIONS", "digest", "other", "bytes changed"),),
    )
    for facts_of, codes in (
        (short, {Code.REPLAY_INCOMPLETE}),
        (elsewhere, {Code.WORLD_MISMATCH}),
        (unread, {Code.ARTIFACT_MALFORMED, Code.REPLAY_FAILED}),
    ):
        j = judged(facts(), dataclasses.replace(suite("payments:props"), regressions=facts_of))
        assert suite_codes(j, "payments:props") == codes


def test_a_suite_without_regression_records_says_so() -> None:
    none = RegressionFacts(RegressionStatus("payments/REGRESSIONS"))
    j = judged(facts(), dataclasses.replace(suite("payments:props"), regressions=none))
    assert verdicts(j) == {"payments:props": "eligible"}
    assert j.report.suites[0].to_json()["regressions"] == {
        "file": "payments/REGRESSIONS",
        "records": {},
        "world_sha256": None,
        "cached": None,
        "properties": [],
    }
    assert "  kept      no regression record kept (payments/REGRESSIONS)" in console_lines(j.report)
