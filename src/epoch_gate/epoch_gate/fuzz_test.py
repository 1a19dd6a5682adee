"""Property-based: arbitrary bytes, and valid artifacts with arbitrary edits, parse or become a reason,
never an exception; evidence that produced a reason never yields `eligible`; and the verdict is monotone
(more failure or less evidence never improves it).

`./pants test` runs the `ci` profile (EPOCH_GATE_FUZZ_EXAMPLES, default 200 per test); the fuzz job runs
EPOCH_GATE_FUZZ_EXAMPLES=10000 (docs/reliability.md has the command and the figures)."""

from __future__ import annotations

import dataclasses
import datetime
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.change.changed import ChangedPath
from epoch_gate.evidence.verify import check_manifest, check_pin, check_replay
from epoch_gate.verdict.suite import Expected, Identities, Label
from epoch_gate.evidence.freezes import Freeze, parse_freeze_files
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.evidence.manifest import parse_manifest, sample
from epoch_gate.evidence.observations import make_observation, parse_observation_files
from epoch_gate.evidence.pin import Pin, PinnedFile
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Code, EvidenceError, Reason, Severity
from epoch_gate.evidence.replay_result import PropertyOutcome, ReplayResult
from epoch_gate.testutil import Evidence, decide

settings.register_profile(
    "ci",
    max_examples=int(os.environ.get("EPOCH_GATE_FUZZ_EXAMPLES", "200")),
    suppress_health_check=[HealthCheck.too_slow],
    deadline=None,
)
settings.load_profile("ci")

json_ish = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
artifact_bytes = st.one_of(
    st.binary(max_size=300),
    json_ish.map(lambda v: repr(v).encode()),
    st.builds(lambda v: __import__("json").dumps(v).encode(), json_ish),
)


@given(artifact_bytes)
def test_any_pin_bytes_parse_or_reason(data: bytes) -> None:
    checked = check_pin(pin_path="EPOCH", pin_bytes=data, generator="g.py", generator_sha256="a" * 64, inputs={})
    assert checked.pin is not None or checked.reasons


@given(artifact_bytes, artifact_bytes)
def test_any_manifest_and_catalog_bytes_parse_or_reason(manifest: bytes, catalog: bytes) -> None:
    checked = check_manifest(manifest_path="m", manifest_bytes=manifest, catalog_path="c", catalog_bytes=catalog)
    assert checked.reasons or (checked.manifest is not None and checked.catalog is not None)


@given(artifact_bytes)
def test_any_catalog_bytes(data: bytes) -> None:
    try:
        parse_catalog(data, "c")
    except EvidenceError:
        pass


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "replay.json",
                "observations/p-" + "a" * 24 + ".json",
                "observations/p-" + "a" * 24 + ".bin",
                "observations/x",
            ]
        ),
        artifact_bytes,
        max_size=4,
    )
)
def test_any_replay_output(files: dict[str, bytes]) -> None:
    evidence = check_replay(files, "replay")
    assert evidence.result is not None or evidence.reasons


@given(st.dictionaries(st.text(max_size=30), artifact_bytes, max_size=4))
def test_any_evidence_folder(files: dict[str, bytes]) -> None:
    parse_observation_files(files, "observations", "archive")
    parse_freeze_files(files, "freezes")


def mutate(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """Applies (kind, position, byte) edits: 0 replaces, 1 inserts, 2 deletes a byte."""
    out = bytearray(data)
    for kind, position, byte in edits:
        at = position % (len(out) + 1)
        if kind == 1 or not out:
            out.insert(at, byte)
        elif kind == 0:
            out[at % len(out)] = byte
        else:
            del out[at % len(out)]
    return bytes(out)


edits = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1, max_size=4)
GENERATOR_SHA = sha256_bytes(b"generator")
INPUT_SHA = sha256_bytes(b"input")
VALID_PIN = Pin("e1", PinnedFile("g.py", GENERATOR_SHA), (PinnedFile("in.json", INPUT_SHA),)).to_bytes()
CATALOG_BYTES = b"""properties:
  - name: p
    bound: b
    predicate: checks.props:p
    description: One.
  - name: q
    bound: b
    predicate: checks.props:q
    description: Two.
"""
VALID_MANIFEST = sample(parse_catalog(CATALOG_BYTES, "c"), 7, 1).to_bytes()
VALID_FREEZE = Freeze("f.json", "p-" + "a" * 24, "suite", "e1", datetime.date(2027, 1, 1), "r").to_bytes()


@given(edits)
def test_an_edited_pin_is_the_pin_or_a_reason(change: list[tuple[int, int, int]]) -> None:
    data = mutate(VALID_PIN, change)
    checked = check_pin(
        pin_path="EPOCH",
        pin_bytes=data,
        generator="g.py",
        generator_sha256=GENERATOR_SHA,
        inputs={"in.json": INPUT_SHA},
    )
    if not checked.reasons:
        # Accepted: then it pins exactly the loaded bytes (only the epoch id's spelling may differ).
        assert checked.pin is not None and checked.pin.generator == PinnedFile("g.py", GENERATOR_SHA)
        assert checked.pin.inputs == (PinnedFile("in.json", INPUT_SHA),)


@given(edits, st.booleans())
def test_an_edited_manifest_or_catalog_is_the_draw_or_a_reason(
    change: list[tuple[int, int, int]], catalog: bool
) -> None:
    manifest = VALID_MANIFEST if catalog else mutate(VALID_MANIFEST, change)
    catalog_bytes = mutate(CATALOG_BYTES, change) if catalog else CATALOG_BYTES
    checked = check_manifest(manifest_path="m", manifest_bytes=manifest, catalog_path="c", catalog_bytes=catalog_bytes)
    if not checked.reasons:
        # Accepted: the same draw and digest (JSON whitespace is not identity: the digest is over the
        # canonical body), and the catalog still defines every sampled property as drawn.
        original = parse_manifest(VALID_MANIFEST, "m")
        assert checked.manifest is not None
        assert (checked.manifest.seed, checked.manifest.properties, checked.manifest.manifest_sha256) == (
            original.seed,
            original.properties,
            original.manifest_sha256,
        )


@given(edits, st.booleans())
def test_an_edited_observation_is_the_observation_or_a_reason(
    change: list[tuple[int, int, int]], witness: bool
) -> None:
    data = canonical_json(FLAKE.to_json()) + b"\n"  # as write_observation stores it
    files = {
        f"{FLAKE.id}.json": data if witness else mutate(data, change),
        f"{FLAKE.id}.bin": mutate(b"w", change) if witness else b"w",
    }
    found, reasons = parse_observation_files(files, "observations", "archive")
    for observation in found:
        assert observation.id == FLAKE.id and observation.witness_sha256 == sha256_bytes(b"w")
    assert found or reasons


@given(edits)
def test_an_edited_freeze_is_the_freeze_or_a_reason(change: list[tuple[int, int, int]]) -> None:
    found, reasons = parse_freeze_files({"f.json": mutate(VALID_FREEZE, change)}, "freezes")
    assert len(found) + len(reasons) == 1


closed_codes = st.sampled_from([c for c in Code if c.severity is Severity.CLOSED])


@given(st.lists(closed_codes, min_size=1, max_size=3), st.booleans(), st.booleans(), st.booleans())
def test_evidence_with_any_closed_finding_is_never_eligible(
    codes: list[Code], flaky: bool, frozen: bool, archive: bool
) -> None:
    findings = tuple(Reason(c, "x", "e", "f", "m") for c in codes)
    evidence = dataclasses.replace(_evidence(flaky, False, frozen, False, archive), findings=findings)
    assert decide(evidence).label is Label.CLOSED


TODAY = datetime.date(2026, 12, 2)
FLAKE = make_observation(
    suite="suite",
    epoch_id="e1",
    prop="p",
    status="flake",
    rerun_passed=True,
    witness=b"w",
    bound="b",
    line=1,
    detail="d",
)
FAIL = make_observation(
    suite="suite",
    epoch_id="e1",
    prop="q",
    status="fail",
    rerun_passed=False,
    witness=b"v",
    bound="b",
    line=1,
    detail="d",
)


def _evidence(flaky: bool, failed: bool, frozen: bool, protected_touch: bool, archive: bool) -> Evidence:
    outcomes = [PropertyOutcome("r", "b", 1, "pass", (), "")]
    observations = []
    if flaky:
        outcomes.append(PropertyOutcome("p", "b", 1, "flake", (FLAKE.id,), ""))
        observations.append(FLAKE)
    if failed:
        outcomes.append(PropertyOutcome("q", "b", 1, "fail", (FAIL.id,), "", failures=1))
        observations.append(FAIL)
    if archive:
        observations.append(dataclasses.replace(FLAKE, source="archive"))
    freezes = (Freeze("freezes/f.json", FLAKE.id, "suite", "e1", datetime.date(2027, 1, 1), "r"),) if frozen else ()
    changed = (ChangedPath("fixtures/EPOCH" if protected_touch else "src/x.py", "modified"),)
    return Evidence(
        Identities("e1", "g", "m", "w"),
        changed,
        ProtectedSet(frozenset({"fixtures/EPOCH"}), ()),
        ReplayResult("suite", "e1", "m", "w", tuple(outcomes)),
        tuple(observations),
        freezes,
        TODAY,
        expected=Expected(tuple((o.name, o.bound) for o in outcomes), {"b": 1}),
    )


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_adding_a_failure_never_improves_the_verdict(
    flaky: bool, failed: bool, frozen: bool, touch: bool, archive: bool
) -> None:
    before = decide(_evidence(flaky, failed, frozen, touch, archive)).label
    worse = [
        decide(_evidence(flaky, True, frozen, touch, archive)).label,
        decide(_evidence(flaky, failed, frozen, True, archive)).label,
    ]
    if not frozen:  # a replayed flake is also the evidence a freeze cites; unfrozen, it only adds a reason
        worse.append(decide(_evidence(True, failed, frozen, touch, archive)).label)
    assert all(w.rank <= before.rank for w in worse)


@given(st.booleans(), st.booleans(), st.booleans())
def test_removing_evidence_never_improves_the_verdict(failed: bool, frozen: bool, touch: bool) -> None:
    full = decide(_evidence(True, failed, frozen, touch, True)).label
    without_archive = decide(_evidence(True, failed, frozen, touch, False)).label
    replay_gone = decide(dataclasses.replace(_evidence(True, failed, frozen, touch, True), replay=None)).label
    changed_gone = decide(dataclasses.replace(_evidence(True, failed, frozen, touch, True), changed=None)).label
    assert without_archive.rank <= full.rank
    assert replay_gone is Label.CLOSED and changed_gone is Label.CLOSED
