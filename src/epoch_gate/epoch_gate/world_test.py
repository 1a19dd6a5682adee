from __future__ import annotations

import os
from pathlib import Path

import pytest

from epoch_gate.hashing import canonical_json
from epoch_gate.reasons import Code, EvidenceError
from epoch_gate.world import world_sha256


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
