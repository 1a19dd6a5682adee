from __future__ import annotations

import datetime

import pytest

from epoch_gate.evidence.freezes import parse_freeze, parse_freeze_files
from epoch_gate.reasons import Code, EvidenceError

OID = "retry_applies_once-" + "a" * 24


def test_valid_freeze() -> None:
    freeze = parse_freeze(
        b'{"observation_id":"%s","suite":"s","epoch_id":"e1","expires_on":"2026-12-31","reason":"r"}' % OID.encode(),
        "freezes/f.json",
    )
    assert freeze.expires_on == datetime.date(2026, 12, 31)
    assert not freeze.expired(datetime.date(2026, 12, 30))
    assert freeze.expired(datetime.date(2026, 12, 31))


@pytest.mark.parametrize(
    "body, code",
    [
        (
            b'{"test":"tests/test_retry.py::test_retry","suite":"s","epoch_id":"e1","expires_on":"2026-12-31","reason":"r"}',
            Code.FREEZE_CITES_TEST,
        ),
        (
            b'{"observation_id":"tests/test_retry.py::test_retry","suite":"s","epoch_id":"e1","expires_on":"2026-12-31",'
            b'"reason":"r"}',
            Code.FREEZE_CITES_TEST,
        ),
        (
            b'{"observation_id":"%s","suite":"s","epoch_id":"e1","expires_on":"2026-02-30","reason":"r"}'
            % OID.encode(),
            Code.ARTIFACT_MALFORMED,
        ),
        (
            b'{"observation_id":"%s","suite":"s","epoch_id":"e1","expires_on":"31/12/2026","reason":"r"}'
            % OID.encode(),
            Code.ARTIFACT_MALFORMED,
        ),
        (
            b'{"observation_id":"%s","suite":"s","epoch_id":"e1","expires_on":"2026-12-31","reason":" "}'
            % OID.encode(),
            Code.ARTIFACT_MALFORMED,
        ),
        (
            b'{"observation_id":"%s","suite":"s","epoch_id":"e1","expires_on":"2026-12-31"}' % OID.encode(),
            Code.ARTIFACT_MALFORMED,
        ),
    ],
)
def test_malformed_freezes(body: bytes, code: Code) -> None:
    with pytest.raises(EvidenceError) as caught:
        parse_freeze(body, "freezes/f.json")
    assert caught.value.reason.code is code


def test_freeze_folder_refuses_odd_names() -> None:
    freezes, reasons = parse_freeze_files({"sub/escape.json": b"{}", "notes.txt": b""}, "freezes")
    assert freezes == [] and [r.code for r in reasons] == [Code.ARTIFACT_MALFORMED] * 2
