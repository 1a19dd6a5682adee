from __future__ import annotations

import os
from pathlib import Path

import pytest

from epoch_gate.evidence import strictjson
from epoch_gate.reasons import Code, EvidenceError


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b'{"a": 1, "a": 2}', "duplicate key"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": Infinity}', "Infinity"),
        (b'{"a": -Infinity}', "Infinity"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b'{"a": "\xff"}', "not UTF-8"),
        (b"{", "not strict JSON"),
        (b"", "not strict JSON"),
        (b"[" * 100000, "not strict JSON"),
        (b'{"a": "\\ud800"}', "lone surrogate"),
        (b'[["x\\uDFFFy"]]', "lone surrogate"),
        (b'{"\\udc80": 1}', "lone surrogate"),
    ],
)
def test_loads_refuses_ambiguous_json(data: bytes, fragment: str) -> None:
    with pytest.raises(EvidenceError) as caught:
        strictjson.loads(data, "x.json")
    assert caught.value.reason.code is Code.ARTIFACT_MALFORMED
    assert fragment in caught.value.reason.message
    assert caught.value.reason.path == "x.json"


def test_loads_keeps_a_surrogate_pair_and_an_escaped_backslash() -> None:
    assert strictjson.loads(b'["\\ud83d\\ude00", "\\\\ud800"]', "x.json") == ["\U0001f600", "\\ud800"]


def test_loads_refuses_oversized() -> None:
    with pytest.raises(EvidenceError) as caught:
        strictjson.loads(b"[" + b"1," * 100 + b"1]", "big.json", max_bytes=50)
    assert caught.value.reason.expected == "<= 50 bytes"


def test_read_bytes_refuses_symlinks_and_reports_missing(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("{}")
    os.symlink(tmp_path / "real.json", tmp_path / "link.json")
    with pytest.raises(EvidenceError) as link:
        strictjson.read_bytes(tmp_path / "link.json", "link.json")
    assert link.value.reason.found == "a symlink"
    with pytest.raises(EvidenceError) as missing:
        strictjson.read_bytes(tmp_path / "absent.json", "absent.json")
    assert missing.value.reason.code is Code.ARTIFACT_MISSING


@pytest.mark.parametrize(
    "value, fragment",
    [
        ([], "expected a JSON object"),
        ({"a": 1}, "missing field"),
        ({"a": 1, "b": "x", "c": 3}, "unknown field"),
        ({"a": True, "b": "x"}, "wrong type"),
        ({"a": "1", "b": "x"}, "wrong type"),
    ],
)
def test_require_object_checks_fields_and_types(value: object, fragment: str) -> None:
    with pytest.raises(EvidenceError) as caught:
        strictjson.require_object(value, "f.json", {"a": int, "b": str})
    assert fragment in caught.value.reason.message
