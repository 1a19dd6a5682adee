from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from epoch_gate.evidence.hashing import canonical_json, canonical_sha256, sha256_bytes, sha256_file


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 7])
def test_sha256_file_matches_hashlib_across_chunk_edges(tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest() == sha256_bytes(data)


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"seed": 1, "properties": []}, b'{"properties":[],"seed":1}'),
        ({"b": 1, "a": {"d": 2, "c": 3}}, b'{"a":{"c":3,"d":2},"b":1}'),
        ({"name": "café"}, '{"name":"café"}'.encode("utf-8")),
        ([1, "x", None, True], b'[1,"x",null,true]'),
    ],
)
def test_canonical_json_is_sorted_compact_utf8(value: object, expected: bytes) -> None:
    assert canonical_json(value) == expected
    assert canonical_sha256(value) == hashlib.sha256(expected).hexdigest()


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
