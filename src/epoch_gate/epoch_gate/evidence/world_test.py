from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.reasons import Code, EvidenceError
from epoch_gate.evidence.world import load_world, record_batches, records, world_sha256


def test_a_world_file_name_that_is_not_utf8_is_a_reason_not_an_identity(tmp_path: Path) -> None:
    (tmp_path / "payments.jsonl").write_text('{"amount":1}\n')
    before = world_sha256(tmp_path)
    with open(os.fsencode(tmp_path) + b"/\xff.jsonl", "wb") as handle:
        handle.write(b"{}\n")
    with pytest.raises(EvidenceError) as caught:
        world_sha256(tmp_path)
    assert (caught.value.reason.code, caught.value.reason.path) == (Code.GENERATOR_FAILED, "\\xff.jsonl")
    canonical_json(caught.value.reason.to_json())
    os.remove(os.fsencode(tmp_path) + b"/\xff.jsonl")
    assert world_sha256(tmp_path) == before


@pytest.mark.parametrize("tail", ["\n", "", "\n\n"])
def test_record_batches_are_the_records_in_bulk(tmp_path: Path, tail: str) -> None:
    # Over a megabyte, so lines straddle the bulk reads; blank lines are not records but keep their numbers.
    lines = [("" if i % 1000 == 7 else json.dumps({"id": i, "pad": "x" * (i % 300)})) for i in range(9000)]
    (tmp_path / "b.jsonl").write_text("\n".join(lines) + tail)
    batches = list(record_batches(load_world(tmp_path), "b", 512))
    assert [item for batch in batches for item in batch] == list(records(tmp_path, "b"))
    assert all(len(batch) == 512 for batch in batches[:-1]) and 0 < len(batches[-1]) <= 512


def test_a_loaded_world_hashes_as_on_disk_and_a_linked_bound_has_no_records(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.bin").write_bytes(b"\x00")
    (tmp_path / "payments.jsonl").write_text('{"amount":1}\n')
    (tmp_path / "linked.jsonl").symlink_to(tmp_path / "payments.jsonl")
    loaded = load_world(tmp_path)
    assert loaded.sha256() == world_sha256(tmp_path)
    (tmp_path / "payments.jsonl").write_text('{"amount":2}\n')  # later writes change nothing loaded
    assert list(record_batches(loaded, "payments", 8)) == [[(1, b'{"amount":1}')]]
    with pytest.raises(EvidenceError) as caught:
        next(record_batches(loaded, "linked", 8))
    assert caught.value.reason.code == Code.BOUND_MISSING
