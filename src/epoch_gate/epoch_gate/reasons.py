"""Reason codes: one closed enum; every finding carries its file and what was expected versus found."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from epoch_gate.text import printable


class Severity(enum.Enum):
    CLOSED = "closed"
    HOLD = "hold"


class Code(enum.Enum):
    """Every reason the gate can give. Values are stable: reports and CI annotations key on them."""

    # The changed set against the protected set.
    PROTECTED_PATH_CHANGED = "protected-path-changed"
    CHANGED_SET_UNAVAILABLE = "changed-set-unavailable"
    BASE_UNTRUSTED = "base-untrusted"
    BASE_UNPROVABLE = "base-unprovable"
    # Any artifact.
    ARTIFACT_MISSING = "artifact-missing"
    ARTIFACT_MALFORMED = "artifact-malformed"
    PATH_NOT_REGULAR = "path-not-regular"  # an oracle or evidence path that is a symlink or not a plain file
    # The pin (fixtures/EPOCH).
    GENERATOR_MISMATCH = "generator-mismatch"
    INPUT_MISMATCH = "input-mismatch"
    INPUT_MISSING = "input-missing"
    INPUT_UNPINNED = "input-unpinned"
    WORLD_MISMATCH = "world-mismatch"
    GENERATOR_FAILED = "generator-failed"
    ISOLATION_UNAVAILABLE = "isolation-unavailable"
    EPOCH_ID_REUSED = "epoch-id-reused"
    EPOCH_ID_DUPLICATE = "epoch-id-duplicate"  # two fixtures in scope pin the same epoch id
    # The manifest and catalog.
    MANIFEST_DIGEST_MISMATCH = "manifest-digest-mismatch"
    MANIFEST_NOT_DRAW = "manifest-not-draw"
    PROPERTY_NOT_IN_CATALOG = "property-not-in-catalog"
    PROPERTY_DIFFERS_FROM_CATALOG = "property-differs-from-catalog"
    CATALOG_DUPLICATE = "catalog-duplicate"
    # Replays.
    PROPERTY_FAILED = "property-failed"
    PREDICATE_ERROR = "predicate-error"
    REPLAY_FAILED = "replay-failed"
    REPLAY_INCOMPLETE = "replay-incomplete"
    RUNNER_PROTOCOL = "runner-protocol"  # the replay's child broke the protocol, ended early, or said too much
    HANDLE_MISUSED = "handle-misused"  # a predicate compared, hashed, iterated or converted a product value
    MODULE_SHADOWED = "module-shadowed"
    PREDICATE_UNPROTECTED = "predicate-unprotected"
    BOUND_MISSING = "bound-missing"
    REQUIREMENTS_UNAVAILABLE = "requirements-unavailable"  # the replay's third-party resolve did not build
    BUILD_FILE_CODE = "build-file-code"  # trusted mode: a changed BUILD file that is more than declarations
    SUITE_MISMATCH = "suite-mismatch"  # a replay's summary names another suite than the one replayed
    HELD_OUT_UNAVAILABLE = "held-out-unavailable"  # trusted mode with the key: no held-out world to judge on
    # Observations.
    OBSERVATION_WRONG_EPOCH = "observation-wrong-epoch"
    OBSERVATION_WITNESS_MISSING = "observation-witness-missing"
    OBSERVATION_WITNESS_MISMATCH = "observation-witness-mismatch"
    OBSERVATION_ID_MISMATCH = "observation-id-mismatch"
    OBSERVATION_CONFLICT = "observation-conflict"
    # Flakes and freezes.
    FLAKE_UNFROZEN = "flake-unfrozen"
    FLAKE_FROZEN = "flake-frozen"
    FREEZE_UNUSED = "freeze-unused"
    FREEZE_OBSERVATION_MISSING = "freeze-observation-missing"
    FREEZE_WRONG_EPOCH = "freeze-wrong-epoch"
    FREEZE_NOT_A_FLAKE = "freeze-not-a-flake"
    FREEZE_EXPIRED = "freeze-expired"
    FREEZE_CITES_TEST = "freeze-cites-test"
    # The gate's own output folder.
    OUTPUT_FOLDER_UNSAFE = "output-folder-unsafe"

    @property
    def severity(self) -> Severity:
        return Severity.HOLD if self in _HOLD_CODES else Severity.CLOSED


_HOLD_CODES = frozenset({Code.FLAKE_FROZEN, Code.FREEZE_UNUSED})


@dataclass(frozen=True)
class Reason:
    code: Code
    path: str
    expected: str
    found: str
    message: str

    def line(self) -> str:
        """`[code] path: message` on one printable line: how every printer shows a reason."""
        return printable(f"[{self.code.value}] {self.path}: {self.message}")

    def comparison(self) -> str:
        """`expected ...; found ...` on one printable line ("-" for either left empty)."""
        return printable(f"expected {self.expected or '-'}; found {self.found or '-'}")

    def to_json(self) -> dict[str, str]:
        return {
            "code": self.code.value,
            "severity": self.code.severity.value,
            "path": self.path,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
        }


class EvidenceError(Exception):
    """The one error type of the core: an input that cannot be trusted, with the reason why."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(f"{reason.code.value}: {reason.path}: {reason.message}")
        self.reason = reason


def fail(code: Code, path: str, message: str, *, expected: str = "", found: str = "") -> EvidenceError:
    """Builds the error to raise; `raise fail(...)` keeps the raise visible at the call site."""
    return EvidenceError(Reason(code, path, expected, found, message))
