"""The fixture epoch pin (`fixtures/EPOCH`): which generator and inputs, by content hash, make an epoch."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.atomic import replace_file
from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.reasons import Code, Reason, fail

SCHEMA = 1
EPOCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
REL_PATH = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[^\\\x00]+$")


@dataclass(frozen=True)
class PinnedFile:
    path: str
    sha256: str


@dataclass(frozen=True)
class Pin:
    epoch_id: str
    generator: PinnedFile
    inputs: tuple[PinnedFile, ...]
    world_sha256: Optional[str] = None

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "schema": SCHEMA,
            "epoch_id": self.epoch_id,
            "generator": self.generator.path,
            "generator_sha256": self.generator.sha256,
            "inputs": [{"path": i.path, "sha256": i.sha256} for i in self.inputs],
        }
        if self.world_sha256 is not None:
            body["world_sha256"] = self.world_sha256
        return body

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json()) + b"\n"


def _check(pattern: re.Pattern[str], value: str, path: str, what: str) -> str:
    if not pattern.match(value):
        raise fail(Code.ARTIFACT_MALFORMED, path, f"{what} is not valid", expected=pattern.pattern, found=value[:80])
    return value


def parse_pin(data: bytes, path: str) -> Pin:
    raw = strictjson.require_object(
        strictjson.loads(data, path),
        path,
        {"schema": int, "epoch_id": str, "generator": str, "generator_sha256": str, "inputs": list},
        optional={"world_sha256": str},
    )
    if raw["schema"] != SCHEMA:
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "unsupported pin schema", expected=str(SCHEMA), found=str(raw["schema"])
        )
    inputs = []
    for index, item in enumerate(raw["inputs"]):
        entry = strictjson.require_object(item, f"{path}#inputs[{index}]", {"path": str, "sha256": str})
        inputs.append(
            PinnedFile(
                _check(REL_PATH, entry["path"], path, "input path"),
                _check(SHA256, entry["sha256"], path, "input sha256"),
            )
        )
    if len({i.path for i in inputs}) != len(inputs):
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "an input is pinned twice",
            expected="unique input paths",
            found=", ".join(i.path for i in inputs),
        )
    world = raw.get("world_sha256")
    return Pin(
        epoch_id=_check(EPOCH_ID, raw["epoch_id"], path, "epoch_id"),
        generator=PinnedFile(
            _check(REL_PATH, raw["generator"], path, "generator path"),
            _check(SHA256, raw["generator_sha256"], path, "generator_sha256"),
        ),
        inputs=tuple(sorted(inputs, key=lambda i: i.path)),
        world_sha256=None if world is None else _check(SHA256, world, path, "world_sha256"),
    )


def load_pin(path: Path, display: str) -> Pin:
    return parse_pin(strictjson.read_bytes(path, display), display)


def verify_pin(
    pin: Pin,
    pin_path: str,
    *,
    generator: str,
    generator_sha256: Optional[str],
    inputs: Mapping[str, Optional[str]],
    world_sha256: Optional[str] = None,
) -> list[Reason]:
    """Compares the pin with the bytes that will actually be loaded; returns every disagreement.

    `generator`/`inputs` name what the build declares, each with the sha256 of its bytes (None: absent).
    `world_sha256` is the digest of the world the generator produced, when the caller ran it.
    """
    reasons: list[Reason] = []
    if generator != pin.generator.path:
        reasons.append(
            Reason(
                Code.GENERATOR_MISMATCH,
                pin_path,
                expected=pin.generator.path,
                found=generator,
                message="the build declares another generator than the pin",
            )
        )
    elif generator_sha256 != pin.generator.sha256:
        reasons.append(
            Reason(
                Code.GENERATOR_MISMATCH,
                generator,
                expected=pin.generator.sha256,
                found=generator_sha256 or "missing",
                message=f"generator bytes differ from epoch {pin.epoch_id}; a new generator " "needs a new epoch id",
            )
        )
    pinned = {i.path: i.sha256 for i in pin.inputs}
    for name in sorted(set(pinned) | set(inputs)):
        if name not in pinned:
            reasons.append(
                Reason(
                    Code.INPUT_UNPINNED,
                    name,
                    expected="pinned in " + pin_path,
                    found=inputs[name] or "missing",
                    message="input is not in the pin",
                )
            )
        elif inputs.get(name) is None:
            reasons.append(
                Reason(
                    Code.INPUT_MISSING,
                    name,
                    expected=pinned[name],
                    found="missing",
                    message="pinned input is missing from the build",
                )
            )
        elif inputs[name] != pinned[name]:
            reasons.append(
                Reason(
                    Code.INPUT_MISMATCH,
                    name,
                    expected=pinned[name],
                    found=str(inputs[name]),
                    message=f"input bytes differ from epoch {pin.epoch_id}",
                )
            )
    if pin.world_sha256 is not None and world_sha256 is not None and world_sha256 != pin.world_sha256:
        reasons.append(
            Reason(
                Code.WORLD_MISMATCH,
                pin_path,
                expected=pin.world_sha256,
                found=world_sha256,
                message="the generator did not reproduce the pinned fixture world "
                "(is it deterministic and hermetic?)",
            )
        )
    return reasons


def mint_pin(
    *,
    epoch_id: str,
    generator: PinnedFile,
    inputs: Mapping[str, str],
    world_sha256: Optional[str],
    existing: Optional[Pin],
    path: str,
) -> Pin:
    """A new pin; refuses to give an existing epoch id other bytes (a new generator needs a new id)."""
    _check(EPOCH_ID, epoch_id, path, "epoch_id")
    pin = Pin(
        epoch_id=epoch_id,
        generator=generator,
        inputs=tuple(PinnedFile(p, s) for p, s in sorted(inputs.items())),
        world_sha256=world_sha256,
    )
    if existing is not None and existing.epoch_id == epoch_id and existing != pin:
        raise fail(
            Code.EPOCH_ID_REUSED,
            path,
            f"epoch {epoch_id} is already pinned to other bytes; choose a new epoch id",
            expected=existing.generator.sha256,
            found=generator.sha256,
        )
    return pin


def write_pin(pin: Pin, path: Path) -> None:
    replace_file(path, pin.to_bytes())
