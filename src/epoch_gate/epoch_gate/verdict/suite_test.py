"""The verdict's rules (docs/contract.md, "The verdict"), each through the one judgement (`judge.judge`), and
the four defects of the naive checker this design replaces."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Optional

import pytest

from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.verify import check_manifest, check_pin
from epoch_gate.verdict.suite import Expected, Identities, Label
from epoch_gate.evidence.freezes import Freeze, parse_freeze_files
from epoch_gate.evidence.hashing import canonical_json, canonical_sha256
from epoch_gate.evidence.manifest import ALGORITHM, draw, manifest_body, sample
from epoch_gate.evidence.observations import Observation, make_observation
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Code, Reason
from epoch_gate.evidence.replay_result import PropertyOutcome, ReplayResult
from epoch_gate.testutil import Evidence, decide, witness_path

TODAY = datetime.date(2026, 12, 2)
IDS = Identities("e1", "a" * 64, "m" * 64, "w" * 64)
PROTECTED = ProtectedSet(frozenset({"fixtures/EPOCH", "checks/manifest.json"}), ("observations/", "freezes/"))


def observation(
    prop: str = "retry_applies_once",
    status: str = "flake",
    epoch: str = "e1",
    source: str = "replay",
    witness: bytes = b'{"id":1}',
) -> Observation:
    made = make_observation(
        suite="suite",
        epoch_id=epoch,
        prop=prop,
        status=status,
        rerun_passed=status == "flake",
        witness=witness,
        bound="retries",
        line=1,
        detail="predicate returned False",
    )
    return dataclasses.replace(made, source=source)


def replay(*outcomes: PropertyOutcome) -> ReplayResult:
    return ReplayResult(
        "suite", "e1", "m" * 64, "w" * 64, outcomes or (PropertyOutcome("p", "orders", 10, "pass", (), ""),)
    )


def outcome_for(obs: Observation) -> PropertyOutcome:
    return PropertyOutcome(
        obs.property, obs.bound, 10, obs.status, (obs.id,), obs.detail, failures=int(obs.status == "fail")
    )


def freeze(
    obs: Observation,
    *,
    epoch: str = "e1",
    expires: datetime.date = datetime.date(2026, 12, 31),
    name: str = "freezes/f.json",
) -> Freeze:
    return Freeze(name, obs.id, "suite", epoch, expires, "flaky upstream sandbox; ticket 123")


def evidence(**overrides: object) -> Evidence:
    base: dict[str, object] = dict(
        identities=IDS,
        changed=(ChangedPath("src/orders/orders/totals.py", "modified"),),
        protected=PROTECTED,
        replay=replay(),
        observations=(),
        freezes=(),
        today=TODAY,
    )
    base.update(overrides)
    if "expected" not in base:  # what the manifest and the world say, when a test is not about that
        played = base["replay"].properties if base["replay"] else ()  # type: ignore[attr-defined]
        base["expected"] = Expected(tuple((p.name, p.bound) for p in played), {p.bound: 10 for p in played})
    return Evidence(**base)  # type: ignore[arg-type]


def codes(ev: Evidence) -> list[Code]:
    return [r.code for r in decide(ev).reasons]


@pytest.mark.parametrize("code", [Code.RUNNER_PROTOCOL, Code.HANDLE_MISUSED, Code.BOUND_MISSING, Code.REPLAY_FAILED])
def test_a_replay_error_closes_with_its_own_code(code: Code) -> None:
    errored = PropertyOutcome("p", "orders", 0, "error", (), "the child failed", code.value)
    verdict = decide(evidence(replay=replay(errored)))
    assert verdict.label is Label.CLOSED and [r.code for r in verdict.reasons] == [code]


def test_a_replay_error_naming_a_hold_code_still_closes() -> None:
    errored = PropertyOutcome("p", "orders", 0, "error", (), "softened?", Code.FLAKE_FROZEN.value)
    verdict = decide(evidence(replay=replay(errored)))
    assert verdict.label is Label.CLOSED and [r.code for r in verdict.reasons] == [Code.PREDICATE_ERROR]


def test_eligible_when_identities_agree_and_nothing_failed() -> None:
    verdict = decide(evidence())
    assert verdict.label is Label.ELIGIBLE and verdict.reasons == ()
    assert verdict.label.exit_code == 0


@pytest.mark.parametrize("path", ["fixtures/EPOCH", "checks/manifest.json", "observations/x.json", "freezes/f.json"])
def test_protected_path_in_changed_set_is_closed(path: str) -> None:
    ev = evidence(changed=(ChangedPath(path, "deleted"),))
    assert decide(ev).label is Label.CLOSED
    assert codes(ev) == [Code.PROTECTED_PATH_CHANGED]


def test_unavailable_changed_set_is_closed_not_empty() -> None:
    assert codes(evidence(changed=None)) == [Code.CHANGED_SET_UNAVAILABLE]


def test_generator_bytes_differ_from_the_pin() -> None:
    pin = check_pin(
        pin_path="EPOCH",
        pin_bytes=b'{"schema":1,"epoch_id":"e1","generator":"g.py","generator_sha256":"'
        + b"a" * 64
        + b'","inputs":[]}',
        generator="g.py",
        generator_sha256="b" * 64,
        inputs={},
    )
    ev = evidence(findings=pin.reasons)
    assert decide(ev).label is Label.CLOSED and codes(ev) == [Code.GENERATOR_MISMATCH]


def test_manifest_whose_digest_matches_its_own_body_but_is_not_the_draw() -> None:
    catalog_bytes = b"properties:\n" + b"".join(
        b"  - {name: p%d, bound: b, predicate: 'm:f%d', description: d.}\n" % (i, i) for i in range(5)
    )
    catalog = parse_catalog(catalog_bytes, "c.yaml")
    real = draw(catalog, 1, 1)[0]
    other = next(p for p in catalog.properties if p != real)
    body = manifest_body(1, (other,))
    forged = canonical_json(
        {"schema": 1, "algorithm": ALGORITHM, "k": 1, **body, "manifest_sha256": canonical_sha256(body)}
    )
    checked = check_manifest(
        manifest_path="m.json", manifest_bytes=forged, catalog_path="c.yaml", catalog_bytes=catalog_bytes
    )
    assert [r.code for r in checked.reasons] == [Code.MANIFEST_NOT_DRAW]  # the naive checker accepted it
    assert decide(evidence(findings=checked.reasons)).label is Label.CLOSED


def test_sampled_property_failed_names_the_property_and_the_record() -> None:
    failed = observation("refund_le_captured", status="fail")
    ev = evidence(replay=replay(outcome_for(failed)), observations=(failed,))
    assert [r.to_json() for r in decide(ev).reasons] == [
        {
            "code": "property-failed",
            "severity": "closed",
            "path": "suite#refund_le_captured",
            "expected": "refund_le_captured holds",
            "found": f"violated by retries line 1 (witness {failed.witness_sha256[:12]})",
            "message": f"the retries record at line 1 (saved as {witness_path(failed.id)}) fails it: "
            "predicate returned False",
            "advice": "Fix the product so that the property holds for this record (`pants test <suite>` replays it).",
        }
    ]


def test_a_failure_says_what_the_predicate_read_on_the_reasons_line() -> None:
    detail = (
        "the product raised ValueError: bad\nits 2 calls and the product's answers:\n"
        "  payments.refund(150) -> raised ValueError: bad\n  payments.captured() -> 100\n  File \"x\", line 1"
    )
    failed = dataclasses.replace(observation("refund_le_captured", status="fail"), detail=detail)
    (reason,) = decide(evidence(replay=replay(outcome_for(failed)), observations=(failed,))).reasons
    assert reason.message.rpartition(" fails it: ")[2] == (
        "the product raised ValueError: bad; its 2 calls and the product's answers: "
        "payments.refund(150) -> raised ValueError: bad; payments.captured() -> 100"
    )
    long = dataclasses.replace(
        failed, detail="predicate returned False\nits 1 call and the product's answers:\n  " + "x" * 900
    )
    (reason,) = decide(evidence(replay=replay(outcome_for(long)), observations=(long,))).reasons
    assert len(reason.message.rpartition(" fails it: ")[2]) == 600 and reason.message.endswith("x...")


def test_a_predicate_reading_what_the_answer_lacks_is_told_to_check_the_predicate_too() -> None:
    """Django's `response.status_code` read from an answer that carried only its fields: the product was
    fine, and "fix the product" sent its authors the wrong way."""
    lacks = "the product's answer a dict without the item 'status_code'"
    failed = dataclasses.replace(observation("refund_le_captured", status="fail"), detail=lacks)
    ev = evidence(replay=replay(outcome_for(failed)), observations=(failed,))
    ((code, message, advice),) = [(r.code, r.message, r.advice) for r in decide(ev).reasons]
    assert (code, message.rpartition(" fails it: ")[2]) == (Code.PROPERTY_FAILED, lacks)
    assert advice == (
        "The predicate read what the product's answer does not have: if the product answered as it should, "
        "fix the predicate (an oracle change for its reviewers), else fix the product (`pants test <suite>` "
        "replays it)."
    )


def test_an_unfrozen_flake_names_the_property_the_record_and_what_to_do() -> None:
    flaked = observation("retry_applies_once", status="flake")
    ev = evidence(replay=replay(outcome_for(flaked)), observations=(flaked,))
    [reason] = decide(ev).reasons
    assert (reason.code, reason.path, reason.message) == (
        Code.FLAKE_UNFROZEN,
        "suite#retry_applies_once",
        f"the retries record at line 1 (saved as {witness_path(flaked.id)}) failed it once and passed its rerun "
        "on the same bytes; no valid freeze covers it",
    )
    assert (
        reason.code.advice
        == "Fix the flake, or have a reviewer freeze it (a file in `freezes/` citing the observation)."
    )


def test_a_product_that_raises_fails_its_property() -> None:
    """The product's exception on a record is that record's failure, not the oracle's error."""
    raised = dataclasses.replace(
        observation("p", status="fail"), detail="the product raised IndexError: list index out of range\n  File ..."
    )
    reasons = decide(evidence(replay=replay(outcome_for(raised)), observations=(raised,))).reasons
    assert [(r.code, r.message) for r in reasons] == [
        (
            Code.PROPERTY_FAILED,
            f"the retries record at line 1 (saved as {witness_path(raised.id)}) fails it: "
            "the product raised IndexError: list index out of range",
        )
    ]


def test_observation_from_another_epoch_is_closed() -> None:
    stale = observation(epoch="e0")
    ev = evidence(replay=replay(outcome_for(stale)), observations=(stale,))
    assert decide(ev).label is Label.CLOSED and codes(ev) == [Code.OBSERVATION_WRONG_EPOCH]
    # The same flake of this epoch is judged as a flake: the epoch is what gave the code.
    current = observation()
    assert codes(evidence(replay=replay(outcome_for(current)), observations=(current,))) == [Code.FLAKE_UNFROZEN]


def test_replay_observation_without_its_bytes_is_closed() -> None:
    flake = observation()
    assert codes(evidence(replay=replay(outcome_for(flake)), observations=())) == [Code.OBSERVATION_WITNESS_MISSING]


def test_unfrozen_flake_is_closed() -> None:
    flake = observation()
    ev = evidence(replay=replay(outcome_for(flake)), observations=(flake,))
    assert decide(ev).label is Label.CLOSED  # the naive checker said eligible
    assert codes(ev) == [Code.FLAKE_UNFROZEN]


def test_flake_covered_by_a_valid_freeze_is_hold() -> None:
    flake = observation()
    archived = dataclasses.replace(flake, source="archive")
    ev = evidence(replay=replay(outcome_for(flake)), observations=(flake, archived), freezes=(freeze(flake),))
    verdict = decide(ev)
    assert verdict.label is Label.HOLD and verdict.label.exit_code == 2
    assert codes(ev) == [Code.FLAKE_FROZEN]


@pytest.mark.parametrize(
    "make, code",
    [
        (lambda f: (freeze(observation(witness=b"gone")), (f,)), Code.FREEZE_OBSERVATION_MISSING),
        (lambda f: (freeze(f, epoch="e0"), (f,)), Code.FREEZE_WRONG_EPOCH),
        (lambda f: (freeze(f, expires=TODAY), (f,)), Code.FREEZE_EXPIRED),
        (lambda f: (freeze(f, expires=datetime.date(2020, 1, 1)), (f,)), Code.FREEZE_EXPIRED),
    ],
)
def test_invalid_freeze_is_closed(make: object, code: Code) -> None:
    flake = observation()
    made_freeze, present = make(flake)  # type: ignore[operator]
    # The freeze alone: its flake is archived, not in this replay (a valid freeze would only hold, unused).
    archived = tuple(dataclasses.replace(o, source="archive") for o in present)
    ev = evidence(observations=archived, freezes=(made_freeze,))
    assert decide(ev).label is Label.CLOSED and codes(ev) == [code]
    assert codes(evidence(observations=archived, freezes=(freeze(flake),))) == [Code.FREEZE_UNUSED]
    # Facing the flake it was written for, the invalid freeze covers nothing; a valid one would hold.
    ev = evidence(replay=replay(outcome_for(flake)), observations=present, freezes=(made_freeze,))
    assert codes(ev) == [code, Code.FLAKE_UNFROZEN]


def test_freeze_of_an_observation_from_another_epoch() -> None:
    old = observation(epoch="e0", source="archive")
    ev = evidence(observations=(old,), freezes=(freeze(old),))
    assert codes(ev) == [Code.FREEZE_WRONG_EPOCH]


def test_freeze_of_a_failure_without_passed_rerun() -> None:
    failed = observation(status="fail", source="archive")
    assert codes(evidence(observations=(failed,), freezes=(freeze(failed),))) == [Code.FREEZE_NOT_A_FLAKE]


def test_freeze_naming_a_test_is_closed() -> None:
    flake = observation()
    test_name = b'"test":"tests/test_retry.py::test_retry_applies_once"'

    def with_freeze(cites: bytes, *, flaky: bool = True) -> Evidence:
        """The freeze folder holding one freeze, as the gate loads it; with this replay's flake when flaky."""
        body = (
            b'{%s,"suite":"suite","epoch_id":"e1","expires_on":"2026-12-31","reason":"flaky upstream sandbox"}' % cites
        )
        freezes, findings = parse_freeze_files({"retry.json": body}, "freezes")
        flakes = (flake,) if flaky else ()
        return evidence(
            replay=replay(*map(outcome_for, flakes)),
            observations=flakes,
            freezes=tuple(freezes),
            findings=tuple(findings),
        )

    # Alone, in an otherwise clean change.
    ev = with_freeze(test_name, flaky=False)
    assert decide(ev).label is Label.CLOSED and codes(ev) == [Code.FREEZE_CITES_TEST]
    assert decide(ev).reasons[0].found == "tests/test_retry.py::test_retry_applies_once"
    assert decide(evidence()).label is Label.ELIGIBLE  # the same change without it
    # Written for the flake, by test name (either key), it covers nothing; citing the observation, it holds.
    for cites in (test_name, b'"observation_id":"tests/test_retry.py::test_retry_applies_once"'):
        ev = with_freeze(cites)
        assert decide(ev).label is Label.CLOSED and codes(ev) == [Code.FREEZE_CITES_TEST, Code.FLAKE_UNFROZEN]
    ev = with_freeze(b'"observation_id":"%s"' % flake.id.encode())
    assert decide(ev).label is Label.HOLD and codes(ev) == [Code.FLAKE_FROZEN]


def test_every_freeze_is_checked_not_just_the_first() -> None:
    flake_a, flake_b = observation("a_prop", witness=b"1"), observation("b_prop", witness=b"2")
    ev = evidence(
        replay=replay(outcome_for(flake_a), outcome_for(flake_b)),
        observations=(flake_a, flake_b),
        freezes=(
            freeze(flake_a, name="freezes/a.json"),
            freeze(flake_b, name="freezes/b.json", expires=datetime.date(2026, 1, 1)),
        ),
    )
    reasons = decide(ev).reasons
    assert decide(ev).label is Label.CLOSED
    assert {r.code for r in reasons} == {Code.FREEZE_EXPIRED, Code.FLAKE_FROZEN, Code.FLAKE_UNFROZEN}


def test_valid_freeze_with_no_current_flake_holds() -> None:
    archived = observation(source="archive")
    assert codes(evidence(observations=(archived,), freezes=(freeze(archived),))) == [Code.FREEZE_UNUSED]
    assert decide(evidence(observations=(archived,), freezes=(freeze(archived),))).label is Label.HOLD


MANIFEST_CATALOG = b"properties:\n" + b"".join(
    b"  - {name: p%d, bound: b, predicate: 'm:f%d', description: d.}\n" % (i, i) for i in range(3)
)


@pytest.mark.parametrize(
    "manifest, code",
    [
        (None, Code.ARTIFACT_MISSING),
        (b'{"schema": 1, "k": 1', Code.ARTIFACT_MALFORMED),  # cut short
        (
            sample(parse_catalog(MANIFEST_CATALOG, "c.yaml"), 1, 1).to_bytes().replace(b'"k":1', b'"k":"1"'),
            Code.ARTIFACT_MALFORMED,
        ),  # whole, but k is not a number
    ],
)
def test_missing_or_malformed_artifact_is_closed(manifest: Optional[bytes], code: Code) -> None:
    def with_manifest(data: Optional[bytes]) -> Evidence:
        """A change whose only evidence problem is the manifest, as check_manifest finds it."""
        checked = check_manifest(
            manifest_path="checks/manifest.json",
            manifest_bytes=data,
            catalog_path="checks/catalog.yaml",
            catalog_bytes=MANIFEST_CATALOG,
        )
        return evidence(findings=checked.reasons)

    ev = with_manifest(manifest)
    assert decide(ev).label is Label.CLOSED and codes(ev) == [code]
    assert decide(ev).reasons[0].path == "checks/manifest.json"
    # The drawn manifest in its place: nothing else was wrong.
    assert (
        decide(with_manifest(sample(parse_catalog(MANIFEST_CATALOG, "c.yaml"), 1, 1).to_bytes())).label
        is Label.ELIGIBLE
    )


def test_missing_replay_is_closed() -> None:
    assert codes(evidence(replay=None)) == [Code.REPLAY_FAILED]


def test_every_reason_is_reported_together() -> None:
    flake = observation()
    ev = evidence(
        changed=(ChangedPath("fixtures/EPOCH", "modified"),),
        replay=replay(outcome_for(flake)),
        observations=(flake,),
        findings=(Reason(Code.GENERATOR_MISMATCH, "g.py", "a", "b", "m"),),
    )
    assert codes(ev) == [Code.GENERATOR_MISMATCH, Code.PROTECTED_PATH_CHANGED, Code.FLAKE_UNFROZEN]


# The replay's output is checked against the manifest and the world, not believed.
FULL = Expected((("p", "orders"),), {"orders": 10})


def test_a_replay_that_skips_a_manifest_property_is_closed() -> None:
    expected = Expected((("p", "orders"), ("q", "orders")), {"orders": 10})
    assert codes(evidence(expected=expected)) == [Code.REPLAY_INCOMPLETE]
    assert codes(evidence(expected=FULL)) == []


def test_a_replay_over_fewer_records_than_the_bound_holds_is_closed() -> None:
    assert codes(evidence(expected=Expected(FULL.properties, {"orders": 11}))) == [Code.REPLAY_INCOMPLETE]
    empty = replay(PropertyOutcome("p", "orders", 0, "pass", (), ""))
    assert codes(evidence(replay=empty, expected=Expected(FULL.properties, {"orders": 0}))) == [
        Code.REPLAY_INCOMPLETE
    ]  # a pass over nothing is not a pass


def test_a_non_pass_without_witnesses_is_closed() -> None:
    for outcome in ("fail", "flake"):
        bare = replay(PropertyOutcome("p", "orders", 10, outcome, (), "", failures=int(outcome == "fail")))
        assert Code.REPLAY_INCOMPLETE in codes(evidence(replay=bare, expected=FULL))


def test_a_replay_over_another_world_or_without_expectations_is_closed() -> None:
    other = dataclasses.replace(replay(), world_sha256="x" * 64)
    assert codes(evidence(replay=other, expected=FULL)) == [Code.WORLD_MISMATCH]
    assert codes(evidence(identities=dataclasses.replace(IDS, world_sha256=None), expected=FULL)) == [
        Code.WORLD_MISMATCH
    ]
    assert codes(evidence(expected=None)) == [Code.REPLAY_INCOMPLETE]
