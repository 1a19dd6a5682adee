from __future__ import annotations

import pytest

from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.evidence.pin import Pin, PinnedFile, mint_pin, parse_pin, verify_pin
from epoch_gate.reasons import Code, EvidenceError

GEN = "a" * 64
INPUT = "b" * 64


def pin(**overrides: object) -> Pin:
    body = {
        "epoch_id": "orders-1",
        "generator": PinnedFile("fixtures/gen.py", GEN),
        "inputs": (PinnedFile("fixtures/base.json", INPUT),),
        "world_sha256": None,
    }
    body.update(overrides)
    return Pin(**body)  # type: ignore[arg-type]


def test_round_trip() -> None:
    original = pin(world_sha256="c" * 64)
    assert parse_pin(original.to_bytes(), "EPOCH") == original


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda b: b.update(schema=2), "schema"),
        (lambda b: b.update(epoch_id="../x"), "epoch_id"),
        (lambda b: b.update(generator_sha256="A" * 64), "generator_sha256"),
        (lambda b: b.update(generator="/etc/passwd"), "generator path"),
        (lambda b: b.update(generator="fixtures/../../x.py"), "generator path"),
        (lambda b: b.update(inputs=[{"path": "x", "sha256": INPUT}, {"path": "x", "sha256": INPUT}]), "twice"),
        (lambda b: b.update(generated_at="2026-01-01"), "unknown field"),
        (lambda b: b.pop("inputs"), "missing field"),
    ],
)
def test_parse_refuses_malformed(mutate: object, fragment: str) -> None:
    body = pin().to_json()
    mutate(body)  # type: ignore[operator]
    with pytest.raises(EvidenceError) as caught:
        parse_pin(canonical_json(body), "EPOCH")
    assert caught.value.reason.code is Code.ARTIFACT_MALFORMED
    assert fragment in caught.value.reason.message


def test_verify_agrees() -> None:
    assert (
        verify_pin(
            pin(), "EPOCH", generator="fixtures/gen.py", generator_sha256=GEN, inputs={"fixtures/base.json": INPUT}
        )
        == []
    )


@pytest.mark.parametrize(
    "generator_sha, inputs, world, code",
    [
        ("d" * 64, {"fixtures/base.json": INPUT}, None, Code.GENERATOR_MISMATCH),
        (None, {"fixtures/base.json": INPUT}, None, Code.GENERATOR_MISMATCH),
        (GEN, {"fixtures/base.json": "e" * 64}, None, Code.INPUT_MISMATCH),
        (GEN, {"fixtures/base.json": None}, None, Code.INPUT_MISSING),
        (GEN, {}, None, Code.INPUT_MISSING),
        (GEN, {"fixtures/base.json": INPUT, "fixtures/extra.json": INPUT}, None, Code.INPUT_UNPINNED),
        (GEN, {"fixtures/base.json": INPUT}, "f" * 64, Code.WORLD_MISMATCH),
    ],
)
def test_verify_reports_each_disagreement(
    generator_sha: str | None, inputs: dict, world: str | None, code: Code
) -> None:
    reasons = verify_pin(
        pin(world_sha256="c" * 64),
        "EPOCH",
        generator="fixtures/gen.py",
        generator_sha256=generator_sha,
        inputs=inputs,
        world_sha256=world,
    )
    assert [r.code for r in reasons] == [code]
    assert reasons[0].expected and reasons[0].found


def test_mint_refuses_to_reuse_an_epoch_id_for_other_bytes() -> None:
    existing = pin()
    with pytest.raises(EvidenceError) as caught:
        mint_pin(
            epoch_id="orders-1",
            generator=PinnedFile("fixtures/gen.py", "9" * 64),
            inputs={"fixtures/base.json": INPUT},
            world_sha256=None,
            existing=existing,
            path="EPOCH",
        )
    assert caught.value.reason.code is Code.EPOCH_ID_REUSED
    renewed = mint_pin(
        epoch_id="orders-2",
        generator=PinnedFile("fixtures/gen.py", "9" * 64),
        inputs={"fixtures/base.json": INPUT},
        world_sha256=None,
        existing=existing,
        path="EPOCH",
    )
    assert renewed.epoch_id == "orders-2"
    same = mint_pin(
        epoch_id="orders-1",
        generator=PinnedFile("fixtures/gen.py", GEN),
        inputs={"fixtures/base.json": INPUT},
        world_sha256=None,
        existing=existing,
        path="EPOCH",
    )
    assert same == existing
