"""SIGKILL at every step of writing a witness, a pin and a manifest: what remains is the old state or
the complete new one, and a partial write is never accepted.

The writer runs in a child process whose file-system steps (fsync, rename, link, unlink) each announce
themselves and wait for a go-ahead, so the kill lands exactly between two steps, deterministically.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Optional

import pytest

from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.evidence.manifest import parse_manifest, sample
from epoch_gate.evidence.observations import load_observations, make_observation, write_observation
from epoch_gate.evidence.pin import Pin, PinnedFile, parse_pin
from epoch_gate.reasons import Code, EvidenceError

STEPPED = """
import sys
from pathlib import Path
from epoch_gate.evidence import atomic

def stepped(name, real):
    def step(*args):
        print(name, flush=True)
        sys.stdin.readline()
        return real(*args)
    return step

for name in ("fsync", "replace", "link", "unlink"):
    setattr(atomic.os, name, stepped(name, getattr(atomic.os, name)))
"""

WRITERS = {
    "witness": """
from epoch_gate.evidence.observations import make_observation, write_observation
w = b"x" * 100_000
o = make_observation(suite="suite", epoch_id="e1", prop="p", status="fail", rerun_passed=False, witness=w, bound="b", line=1,
                     detail="d")
write_observation(Path(sys.argv[1]), o, w)
""",
    "pin": """
from epoch_gate.evidence.pin import Pin, PinnedFile, write_pin
write_pin(Pin("e-2", PinnedFile("fixtures/gen.py", "b" * 64), (), "c" * 64), Path(sys.argv[1]))
""",
    "manifest": """
from epoch_gate.evidence.catalog import parse_catalog
from epoch_gate.evidence.manifest import sample, write_manifest
catalog = parse_catalog(sys.argv[2].encode(), "catalog.yaml")
write_manifest(sample(catalog, 2, 3), Path(sys.argv[1]))
""",
}

CATALOG = "properties:\n" + "".join(
    f"  - name: p{i}\n    bound: b\n    predicate: checks.mod:p{i}\n    description: Property {i}.\n" for i in range(6)
)
OLD_PIN = Pin("e-1", PinnedFile("fixtures/gen.py", "a" * 64), (), None)
OLD_MANIFEST = sample(parse_catalog(CATALOG.encode(), "catalog.yaml"), 1, 3)
# What WRITERS["pin"] and WRITERS["manifest"] write.
NEW_PIN = Pin("e-2", PinnedFile("fixtures/gen.py", "b" * 64), (), "c" * 64)
NEW_MANIFEST = sample(parse_catalog(CATALOG.encode(), "catalog.yaml"), 2, 3)
# What a kill before the commit point leaves: the old file, or for a witness (written anew) nothing.
BEFORE = {"witness": "none", "pin": "old", "manifest": "old"}


def run_until(kind: str, target: Path, kill_at: Optional[int]) -> int:
    """Runs the writer, killing it when it announces step `kill_at` (1-based); returns the steps seen."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = STEPPED + textwrap.dedent(WRITERS[kind])
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(target), CATALOG],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    steps = 0
    for _line in proc.stdout:
        steps += 1
        if steps == kill_at:
            proc.kill()
            break
        proc.stdin.write("\n")
        proc.stdin.flush()
    proc.wait()
    assert kill_at is None and proc.returncode == 0 or kill_at is not None and proc.returncode == -9
    return steps


def the_state(kind: str, target: Path) -> str:
    """'old', 'new' or 'none' (nothing was accepted); anything partial fails the test."""
    if kind == "witness":
        observations, reasons = load_observations(target, "obs", "archive")
        assert reasons == [], reasons
        assert len(observations) <= 1
        return "new" if observations else "none"
    parse: Callable[[bytes, str], object] = parse_pin if kind == "pin" else parse_manifest
    try:
        value = parse(target.read_bytes(), target.name)
    except EvidenceError as error:  # pragma: no cover - the failure this test exists to catch
        raise AssertionError(f"a partial {kind} was left behind: {error}") from None
    old, new = (OLD_PIN, NEW_PIN) if kind == "pin" else (OLD_MANIFEST, NEW_MANIFEST)
    assert old != new
    assert value in (old, new), f"the {kind} left behind is neither the old nor the new one: {value}"
    return "old" if value == old else "new"


def prepare(kind: str, folder: Path) -> Path:
    """A fresh folder holding the old state (none, for a witness); returns the path the writer targets."""
    folder.mkdir(parents=True)
    if kind == "witness":
        return folder / "obs"
    target = folder / ("EPOCH" if kind == "pin" else "manifest.json")
    target.write_bytes(OLD_PIN.to_bytes() if kind == "pin" else OLD_MANIFEST.to_bytes())
    return target


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_a_kill_at_every_step_leaves_the_old_or_the_whole_new_state(kind: str, tmp_path: Path) -> None:
    complete = prepare(kind, tmp_path / "complete")
    total = run_until(kind, complete, None)
    assert total >= 3  # at least: fsync the temp file, rename or link it, fsync the folder
    assert the_state(kind, complete) == "new"
    states = []
    for kill_at in range(1, total + 1):
        target = prepare(kind, tmp_path / f"kill-{kill_at}")
        run_until(kind, target, kill_at)
        states.append(the_state(kind, target))
        run_until(kind, target, None)  # what a crash leaves never blocks the next writer
        assert the_state(kind, target) == "new"
    assert "new" in states, states  # a kill after the commit point, which is one of the writer's steps
    first_new = states.index("new")
    # Before the commit point only the old state (or nothing) is visible; after it, only the new one.
    assert 0 < first_new and states == [BEFORE[kind]] * first_new + ["new"] * (len(states) - first_new), states


def test_concurrent_writers_of_the_same_observation_agree(tmp_path: Path) -> None:
    folder = tmp_path / "obs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = textwrap.dedent(WRITERS["witness"]).replace(
        "from epoch_gate", "import sys\nfrom pathlib import Path\n" "from epoch_gate", 1
    )
    for _round in range(5):
        procs = [subprocess.Popen([sys.executable, "-c", code, str(folder)], env=env) for _ in range(6)]
        assert [p.wait() for p in procs] == [0] * 6
    observations, reasons = load_observations(folder, "obs", "archive")
    assert reasons == [] and len(observations) == 1
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{observations[0].id}.{s}" for s in ("bin", "json"))


def test_a_kill_never_lets_a_status_record_stand_without_its_bytes(tmp_path: Path) -> None:
    witness = b"w"
    o = make_observation(
        suite="suite",
        epoch_id="e1",
        prop="p",
        status="fail",
        rerun_passed=False,
        witness=witness,
        bound="b",
        line=1,
        detail="d",
    )
    folder = tmp_path / "obs"
    write_observation(folder, o, witness)
    # What a writer that wrote the record first would leave: the whole, valid record, and no bytes.
    (folder / f"{o.id}.bin").unlink()
    observations, reasons = load_observations(folder, "obs", "archive")
    assert observations == []
    assert [(r.code, r.path, r.message) for r in reasons] == [
        (Code.OBSERVATION_WITNESS_MISSING, f"obs/{o.id}.json", "a status record without its bytes is not evidence")
    ]
    # The bytes were the record's only problem: with them back it is evidence.
    (folder / f"{o.id}.bin").write_bytes(witness)
    observations, reasons = load_observations(folder, "obs", "archive")
    assert reasons == [] and [x.id for x in observations] == [o.id]
