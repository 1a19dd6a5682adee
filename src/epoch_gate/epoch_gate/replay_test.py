from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from epoch_gate import replay
from epoch_gate.catalog import Catalog, Property
from epoch_gate.check import check_replay
from epoch_gate.manifest import sample
from epoch_gate.observations import load_observations, observation_id
from epoch_gate.world import world_sha256

PREDICATES = '''
STATE = {"seen": set()}

def positive(record):
    return record["amount"] >= 0

def flaky(record):
    # Fails the first time it sees a record, passes the rerun: a flake.
    key = record["id"]
    if key in STATE["seen"]:
        return True
    STATE["seen"].add(key)
    return record["amount"] >= 0

def raises(record):
    raise KeyError("boom")

def not_bool(record):
    return None
'''


@pytest.fixture
def world(tmp_path: Path) -> Path:
    (tmp_path / "preds").mkdir()
    (tmp_path / "preds" / "replay_preds.py").write_text(PREDICATES)
    world = tmp_path / "world"
    world.mkdir()
    lines = [json.dumps({"id": i, "amount": -5 if i == 3 else i}, separators=(",", ":")) for i in range(10)]
    (world / "payments.jsonl").write_text("\n".join(lines) + "\n")
    return world


def run(world: Path, out: Path, *names: str) -> replay.ReplayResult:
    props = tuple(Property(n, "payments", f"replay_preds:{n}", f"{n}.") for n in names)
    manifest = sample(Catalog(props), 1, len(props))
    return replay.run(manifest, world, out, suite="suite", epoch_id="e1", child=child(world))


def child(world: Path, *names: str) -> replay.Child:
    """The sandbox beside the world: the predicates (the oracle) and, under `names`, the product."""
    return replay.Child(world.parent / "preds", names, oracle_names=("replay_preds", "mask_preds"))


def test_pass_fail_flake_error(world: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(world, out, "positive", "flaky", "raises", "not_bool")
    outcomes = {p.name: p.outcome for p in result.properties}
    assert outcomes == {"positive": "fail", "flaky": "flake", "raises": "fail", "not_bool": "fail"}
    observations, reasons = load_observations(out / "observations", "obs", "replay")
    assert reasons == []
    by_prop = {o.property: o for o in observations}
    witness = (out / "observations" / f"{by_prop['positive'].id}.bin").read_bytes()
    assert json.loads(witness) == {"id": 3, "amount": -5}  # exactly the offending record
    assert by_prop["positive"].id == observation_id("suite", "positive", witness)
    assert by_prop["flaky"].status == "flake" and by_prop["flaky"].rerun_passed
    assert "KeyError" in by_prop["raises"].detail
    assert "not bool" in by_prop["not_bool"].detail


def test_summary_round_trips_through_check_replay(world: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(world, out, "positive")
    files = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    evidence = check_replay(files, "replay")
    assert evidence.reasons == () and evidence.result is not None
    assert [o.property for o in evidence.observations] == ["positive"]


def test_missing_bound_and_missing_predicate_are_errors(world: Path, tmp_path: Path) -> None:
    props = (Property("a", "orders", "replay_preds:positive", "a."),
             Property("b", "payments", "replay_preds:absent", "b."))
    result = replay.run(sample(Catalog(props), 1, 2), world, tmp_path / "o", suite="suite", epoch_id="e1", child=child(world))
    by_name = {p.name: p for p in result.properties}
    assert by_name["a"].outcome == "error" and by_name["a"].error_code == "bound-missing"
    assert by_name["b"].outcome == "error" and by_name["b"].error_code == "predicate-error"


def test_replay_is_deterministic_and_never_rewrites_evidence(world: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run(world, out, "positive")
    snapshot = {p.name: p.read_bytes() for p in (out / "observations").iterdir()}
    second = run(world, out, "positive")  # same bytes: an identical rewrite is a no-op
    assert first == second
    assert {p.name: p.read_bytes() for p in (out / "observations").iterdir()} == snapshot
    assert not [n for n in os.listdir(out / "observations") if n.startswith(".")]


def test_a_flake_never_stops_the_scan_and_every_failure_is_counted(tmp_path: Path) -> None:
    # Record 1 flakes (fails once, passes its rerun); records 5 and 8 fail for real. With one witness
    # allowed, the failure must still be found, and the flake still reported.
    (tmp_path / "preds").mkdir()
    (tmp_path / "preds" / "mask_preds.py").write_text(
        "SEEN = set()\n"
        "def masked(record):\n"
        "    if record['id'] == 1 and record['id'] not in SEEN:\n"
        "        SEEN.add(record['id'])\n"
        "        return False\n"
        "    return record['id'] not in (5, 8)\n")
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_text("".join(f'{{"id":{i}}}\n' for i in range(10)))
    props = (Property("masked", "payments", "mask_preds:masked", "m."),)
    result = replay.run(sample(Catalog(props), 1, 1), world, tmp_path / "out", suite="suite", epoch_id="e1", child=child(world),
                        max_witnesses=1)
    (outcome,) = result.properties
    assert (outcome.outcome, outcome.records, outcome.failures) == ("fail", 10, 2)
    observations, _ = load_observations(tmp_path / "out" / "observations", "obs", "replay")
    assert sorted((o.status, o.line) for o in observations) == [("fail", 6), ("flake", 2)]
    assert set(outcome.observation_ids) == {o.id for o in observations}
    assert result.world_sha256 == world_sha256(world)
