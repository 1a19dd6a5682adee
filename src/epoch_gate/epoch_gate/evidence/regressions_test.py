from __future__ import annotations

import json

import pytest

from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.evidence.observations import observation_id
from epoch_gate.evidence.regressions import Regression, Regressions, parse_regressions, record_problem
from epoch_gate.reasons import Code, EvidenceError


def kept(*records: tuple[str, bytes]) -> Regressions:
    found = Regressions()
    for bound, record in records:
        found = found.kept(Regression(bound, record, "checks:s", "p", observation_id("checks:s", "p", record)))
    return found


def test_records_round_trip_in_one_order_and_make_a_world() -> None:
    found = kept(("orders", '{"n":"é"}'.encode()), ("orders", b'{"n":1}'), ("payments", b'{"n":2}'))
    assert found.over(["payments"]).counts() == {"payments": 1}
    assert parse_regressions(found.to_bytes(), "R") == found
    assert [r.bound for r in found.records] == ["orders", "orders", "payments"]
    assert found.kept(found.records[0]) is found  # once each
    assert found.counts() == {"orders": 2, "payments": 1}
    world = found.world_files()
    assert sorted(world) == ["orders.jsonl", "payments.jsonl"]
    assert world["orders.jsonl"].splitlines() == [r.record for r in found.records[:2]]


def test_a_record_is_one_line_of_utf8_of_a_named_bound() -> None:
    assert record_problem("orders", b'{"n":1}') is None
    assert record_problem("orders", b"a\nb") == "a record is one non-empty line"
    assert record_problem("orders", b"") == "a record is one non-empty line"
    assert record_problem("orders", b"\xff") == "a record is a JSON object in UTF-8"
    assert record_problem("orders", b"[1]") == "a record is a JSON object in UTF-8"
    assert record_problem("orders", b'{"n":Infinity}') == "a record is a JSON object in UTF-8"
    assert record_problem("orders", b'{"n":1}\r') is None  # a world written with CRLF
    assert record_problem("orders", b"{}" + b" " * (4 << 20)) == f"a record of over {4 << 20} bytes"
    assert record_problem("../x", b"{}") is not None


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda raw: raw["records"][0].update(record='{"n":9}'), "the observation id is not derived from"),
        (lambda raw: raw["records"][0].update(record_sha256="0" * 64), "the record's bytes do not match record_sha256"),
        (lambda raw: raw.update(schema=2), "the regression records have another schema"),
        (lambda raw: raw["records"].reverse(), "records are kept once each, by bound then digest"),
        (lambda raw: raw["records"].append(dict(raw["records"][0])), "records are kept once each"),
        (lambda raw: raw["records"][0].update(bound="../etc"), "the bound '../etc' is not a bound's name"),
        (lambda raw: raw["records"][0].pop("suite"), "missing"),
    ],
)
def test_a_file_edited_by_hand_is_refused(edit, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads(kept(("orders", b'{"n":1}'), ("orders", b'{"n":2}')).to_bytes())
    edit(raw)
    with pytest.raises(EvidenceError) as raised:
        parse_regressions(json.dumps(raw).encode(), "R")
    assert raised.value.reason.code is Code.ARTIFACT_MALFORMED
    assert message in raised.value.reason.message + " " + raised.value.reason.found


def test_the_digest_names_the_exact_bytes() -> None:
    (record,) = kept(("orders", b'{"n":1}')).records
    assert record.sha256 == sha256_bytes(b'{"n":1}')
