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
    REQUIREMENTS_CHANGED = "requirements-changed"  # a lockfile or requirements file: what lands is not what ran
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
    STATEMENT_KEY_UNUSABLE = "statement-key-unusable"  # the signing key cannot be read, or reached pantsd
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

    @property
    def advice(self) -> str:
        """What to do about a reason of this code, for whoever reads the report."""
        return _ADVICE[self]


_HOLD_CODES = frozenset({Code.FLAKE_FROZEN, Code.FREEZE_UNUSED})
_RE_PIN = "pin it under a new epoch id (`pants pin-epoch --epoch-id=<new id>`)"
_SAMPLE = "`pants sample-properties --seed=<seed> --k=<k>`"
_RE_DRAW = f"Draw the manifest again ({_SAMPLE}); never edit it by hand."
_REPLAY_AGAIN = "delete it and run the replay again"
# One sentence per code, complete by construction (reasons_test checks every code has one): the message
# says what happened to which file, suite, property or record; this says what to do about it.
_ADVICE = {
    Code.PROTECTED_PATH_CHANGED: "This is an oracle change: land it on its own, approved by the oracle's reviewers "
    "(`pants gate-codeowners`), or revert it.",
    Code.REQUIREMENTS_CHANGED: "Land the dependency change on its own first, reviewed as one; then judge this "
    "change against it.",
    Code.CHANGED_SET_UNAVAILABLE: "Give the gate a base it can diff against (a full clone, `--changed-since=<rev>`), "
    "then run it again.",
    Code.BASE_UNTRUSTED: "Judge against reviewed history: `git fetch origin main`, or a base reachable from "
    "`[gate].trusted_refs`.",
    Code.BASE_UNPROVABLE: "Fetch the trusted refs with their history (`git fetch origin main`; in CI `fetch-depth: 0`) "
    "and run again.",
    Code.ARTIFACT_MISSING: "Restore the file, or write it with the goal that makes it (`pants pin-epoch`, "
    "`pants sample-properties`, a replay).",
    Code.ARTIFACT_MALFORMED: "Fix it as the message says; what a goal writes (pins, manifests, observations) is "
    "written again by that goal, never by hand.",
    Code.PATH_NOT_REGULAR: "Replace the symlink or special file with a regular file or folder.",
    Code.GENERATOR_MISMATCH: f"Restore the pinned generator, or {_RE_PIN}.",
    Code.INPUT_MISMATCH: f"Restore the pinned input, or {_RE_PIN}.",
    Code.INPUT_MISSING: f"Restore the pinned input, or {_RE_PIN}.",
    Code.INPUT_UNPINNED: f"Remove the new input, or {_RE_PIN}.",
    Code.WORLD_MISMATCH: f"Make the generator deterministic (no clock, no randomness), then {_RE_PIN}.",
    Code.GENERATOR_FAILED: "Fix the generator: run `python <generator> --out <folder> --input <file>...` and read "
    "its error.",
    Code.ISOLATION_UNAVAILABLE: "Install bubblewrap 0.5.0 or later where the gate runs; the message says what failed.",
    Code.EPOCH_ID_REUSED: "Choose a new `--epoch-id`: an epoch id never gets other bytes.",
    Code.EPOCH_ID_DUPLICATE: f"Give each fixture its own epoch id: {_RE_PIN} for one of them.",
    Code.MANIFEST_DIGEST_MISMATCH: _RE_DRAW,
    Code.MANIFEST_NOT_DRAW: _RE_DRAW,
    Code.PROPERTY_NOT_IN_CATALOG: f"Add the property to the catalog, or draw the manifest again ({_SAMPLE}).",
    Code.PROPERTY_DIFFERS_FROM_CATALOG: _RE_DRAW,
    Code.CATALOG_DUPLICATE: "Give each catalog entry a name of its own.",
    Code.PROPERTY_FAILED: "Fix the product so that the property holds for this record (`pants test <suite>` replays "
    "it).",
    Code.PREDICATE_ERROR: "Fix the predicate as the message says; the fix is an oracle change for its reviewers.",
    Code.REPLAY_FAILED: "Run `pants test <suite>` to see the replay's output, and fix what it reports.",
    Code.REPLAY_INCOMPLETE: "Run the replay again with this gate's runner: its output is checked, never edited.",
    Code.RUNNER_PROTOCOL: "Fix the product code the message names: it must not exit, detach, or write to the "
    "runner's channel.",
    Code.HANDLE_MISUSED: "In the predicate, compare the product value's fields or `plain(value)`, never the value "
    "itself.",
    Code.MODULE_SHADOWED: "Rename or remove the file that shadows the module.",
    Code.PREDICATE_UNPROTECTED: "Move the predicate into the files the property_manifest's `predicates` field names.",
    Code.BOUND_MISSING: f"Make the generator write records for that bound, then {_RE_PIN}.",
    Code.REQUIREMENTS_UNAVAILABLE: "Fix the suite's requirements or lockfile (`pants generate-lockfiles`) so that "
    "they resolve.",
    Code.BUILD_FILE_CODE: "Keep a changed BUILD file to literal target declarations, or land it as an oracle change.",
    Code.SUITE_MISMATCH: "Run this suite's own replay again: a summary never stands for another suite.",
    Code.HELD_OUT_UNAVAILABLE: "Make the generator draw its world from `--seed`, or set `held_out=False` on the "
    "fixture.",
    Code.STATEMENT_KEY_UNUSABLE: "Give the gate an Ed25519 key it can read (`openssl genpkey -algorithm ed25519`), "
    "without pantsd, as the CI recipes do.",
    Code.OBSERVATION_WRONG_EPOCH: f"The observation is of another epoch: {_REPLAY_AGAIN} for the pinned epoch.",
    Code.OBSERVATION_WITNESS_MISSING: f"Restore the observation's `.bin`, or {_REPLAY_AGAIN}.",
    Code.OBSERVATION_WITNESS_MISMATCH: f"Restore the observation's original bytes, or {_REPLAY_AGAIN}.",
    Code.OBSERVATION_ID_MISMATCH: f"Restore the observation's original name and bytes, or {_REPLAY_AGAIN}.",
    Code.OBSERVATION_CONFLICT: "Remove the earlier output (`dist/gate`) or write the report elsewhere, then run "
    "again.",
    Code.FLAKE_UNFROZEN: "Fix the flake, or have a reviewer freeze it (a file in `freezes/` citing the observation).",
    Code.FLAKE_FROZEN: "Fix the flake and delete its freeze before the freeze expires.",
    Code.FREEZE_UNUSED: "Delete the freeze: it covers no current flake.",
    Code.FREEZE_OBSERVATION_MISSING: "Cite an observation in the archive (`observations/`), or delete the freeze.",
    Code.FREEZE_WRONG_EPOCH: "Delete the freeze; if the flake recurs, a reviewer freezes this epoch's observation.",
    Code.FREEZE_NOT_A_FLAKE: "Delete the freeze and fix the failure: only a flake can be frozen.",
    Code.FREEZE_EXPIRED: "Fix the flake and delete the freeze, or have a reviewer renew it.",
    Code.FREEZE_CITES_TEST: "Cite the flake's observation id (`<property>-<24 hex>`) in the freeze.",
    Code.OUTPUT_FOLDER_UNSAFE: "Set `[gate].output_dir` to a plain folder inside the build root.",
}


@dataclass(frozen=True)
class Reason:
    code: Code
    path: str
    expected: str
    found: str
    message: str
    todo: str = ""  # what to do, where this cause of the code needs other advice than the code's

    @property
    def advice(self) -> str:
        return self.todo or self.code.advice

    def line(self) -> str:
        """`[code] path: message` on one printable line: how every printer shows a reason."""
        return printable(f"[{self.code.value}] {self.path}: {self.message}")

    def comparison(self) -> str:
        """`expected ...; found ...` on one printable line ("-" for either left empty)."""
        return printable(f"expected {self.expected or '-'}; found {self.found or '-'}")

    def refusal(self) -> list[str]:
        """How a goal that refuses prints it: the line, the comparison when there is one, what to do."""
        compared = [f"  {self.comparison()}"] if self.expected or self.found else []
        return [f"refused {self.line()}", *compared, f"  to do: {self.advice}"]

    def to_json(self) -> dict[str, str]:
        return {
            "code": self.code.value,
            "severity": self.code.severity.value,
            "path": self.path,
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
            "advice": self.advice,
        }


class EvidenceError(Exception):
    """The one error type of the core: an input that cannot be trusted, with the reason why."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(f"{reason.code.value}: {reason.path}: {reason.message}")
        self.reason = reason


def fail(code: Code, path: str, message: str, *, expected: str = "", found: str = "") -> EvidenceError:
    """Builds the error to raise; `raise fail(...)` keeps the raise visible at the call site."""
    return EvidenceError(Reason(code, path, expected, found, message))
