"""Property-based: arbitrary bytes as any artifact parse or become a reason, never an exception; and the
verdict is monotone (more failure or less evidence never improves it)."""

from __future__ import annotations

import dataclasses
import datetime
import os

from hypothesis import HealthCheck, given, settings, strategies as st

from epoch_gate.catalog import parse_catalog
from epoch_gate.changes import ChangedPath, ProtectedSet
from epoch_gate.check import check_manifest, check_pin, check_replay
from epoch_gate.decision import Evidence, Identities, Label, decide
from epoch_gate.freezes import Freeze, parse_freeze_files
from epoch_gate.observations import make_observation, parse_observation_files
from epoch_gate.reasons import EvidenceError
from epoch_gate.replay import PropertyOutcome, ReplayResult

settings.register_profile("ci", max_examples=int(os.environ.get("EPOCH_GATE_FUZZ_EXAMPLES", "200")),
                          suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("ci")

json_ish = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
artifact_bytes = st.one_of(st.binary(max_size=300), json_ish.map(lambda v: repr(v).encode()),
                           st.builds(lambda v: __import__("json").dumps(v).encode(), json_ish))


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


@given(st.dictionaries(st.sampled_from(["replay.json", "observations/p-" + "a" * 24 + ".json",
                                        "observations/p-" + "a" * 24 + ".bin", "observations/x"]),
                       artifact_bytes, max_size=4))
def test_any_replay_output(files: dict[str, bytes]) -> None:
    evidence = check_replay(files, "replay")
    assert evidence.result is not None or evidence.reasons


@given(st.dictionaries(st.text(max_size=30), artifact_bytes, max_size=4))
def test_any_evidence_folder(files: dict[str, bytes]) -> None:
    parse_observation_files(files, "observations", "archive")
    parse_freeze_files(files, "freezes")


TODAY = datetime.date(2026, 12, 2)
FLAKE = make_observation(epoch_id="e1", prop="p", status="flake", rerun_passed=True, witness=b"w", bound="b",
                         line=1, detail="d")
FAIL = make_observation(epoch_id="e1", prop="q", status="fail", rerun_passed=False, witness=b"v", bound="b",
                        line=1, detail="d")


def _evidence(flaky: bool, failed: bool, frozen: bool, protected_touch: bool, archive: bool) -> Evidence:
    outcomes = [PropertyOutcome("r", "b", 1, "pass", (), "")]
    observations = []
    if flaky:
        outcomes.append(PropertyOutcome("p", "b", 1, "flake", (FLAKE.id,), ""))
        observations.append(FLAKE)
    if failed:
        outcomes.append(PropertyOutcome("q", "b", 1, "fail", (FAIL.id,), ""))
        observations.append(FAIL)
    if archive:
        observations.append(dataclasses.replace(FLAKE, source="archive"))
    freezes = (Freeze("freezes/f.json", FLAKE.id, "e1", datetime.date(2027, 1, 1), "r"),) if frozen else ()
    changed = (ChangedPath("fixtures/EPOCH" if protected_touch else "src/x.py", "modified"),)
    return Evidence(Identities("e1", "g", "m"), changed, ProtectedSet(frozenset({"fixtures/EPOCH"}), ()),
                    ReplayResult("e1", "m", tuple(outcomes)), tuple(observations), freezes, TODAY)


@given(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_adding_a_failure_never_improves_the_verdict(flaky: bool, failed: bool, frozen: bool, touch: bool,
                                                     archive: bool) -> None:
    before = decide(_evidence(flaky, failed, frozen, touch, archive)).label
    worse = [decide(_evidence(flaky, True, frozen, touch, archive)).label,
             decide(_evidence(flaky, failed, frozen, True, archive)).label]
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
