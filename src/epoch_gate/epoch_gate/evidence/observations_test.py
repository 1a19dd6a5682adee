from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from epoch_gate.evidence.hashing import canonical_json
from epoch_gate.evidence.observations import load_observations, make_observation, write_observation
from epoch_gate.reasons import Code, EvidenceError

WITNESS = b'{"id":7,"refund":500,"captured":100}'


def write(folder: Path, witness: bytes = WITNESS, status: str = "fail") -> str:
    observation = make_observation(
        suite="suite",
        epoch_id="e1",
        prop="refund_le_captured",
        status=status,
        rerun_passed=status == "flake",
        witness=witness,
        bound="payments",
        line=7,
        detail="predicate returned False",
    )
    write_observation(folder, observation, witness)
    return observation.id


def test_written_observations_load(tmp_path: Path) -> None:
    oid = write(tmp_path)
    observations, reasons = load_observations(tmp_path, "observations", "archive")
    assert reasons == [] and [o.id for o in observations] == [oid]


RENAMED = "refund_le_captured-" + "0" * 24


@pytest.mark.parametrize(
    "tamper, code, file, kept",
    [
        (lambda d, oid: (d / f"{oid}.bin").unlink(), Code.OBSERVATION_WITNESS_MISSING, "{oid}.json", False),
        (
            lambda d, oid: (d / f"{oid}.bin").write_bytes(b"other"),
            Code.OBSERVATION_WITNESS_MISMATCH,
            "{oid}.json",
            False,
        ),
        (lambda d, oid: (d / f"{oid}.json").write_bytes(b"{"), Code.ARTIFACT_MALFORMED, "{oid}.json", False),
        (
            lambda d, oid: (d / f"{oid}.json").rename(d / f"{RENAMED}.json"),
            Code.OBSERVATION_ID_MISMATCH,
            f"{RENAMED}.json",
            False,
        ),
        # A stray file is its own reason; the observation beside it still stands.
        (lambda d, oid: (d / "notes.txt").write_text("x"), Code.ARTIFACT_MALFORMED, "notes.txt", True),
    ],
)
def test_tampered_evidence_is_a_reason(tmp_path: Path, tamper: object, code: Code, file: str, kept: bool) -> None:
    oid = write(tmp_path)
    tamper(tmp_path, oid)  # type: ignore[operator]
    observations, reasons = load_observations(tmp_path, "observations", "archive")
    assert [(r.code, r.path) for r in reasons] == [(code, "observations/" + file.format(oid=oid))]
    assert [o.id for o in observations] == ([oid] if kept else [])


def test_a_consistent_forgery_with_another_id_is_caught(tmp_path: Path) -> None:
    oid = write(tmp_path)
    body = json.loads((tmp_path / f"{oid}.json").read_bytes())
    forged = "refund_le_captured-" + "f" * 24
    body["id"] = forged
    (tmp_path / f"{forged}.json").write_bytes(canonical_json(body))
    (tmp_path / f"{forged}.bin").write_bytes(WITNESS)
    _, reasons = load_observations(tmp_path, "observations", "archive")
    assert [r.code for r in reasons] == [Code.OBSERVATION_ID_MISMATCH]


def test_symlinked_witness_is_refused(tmp_path: Path) -> None:
    oid = write(tmp_path)
    (tmp_path / "elsewhere.bin").write_bytes(WITNESS)
    (tmp_path / f"{oid}.bin").unlink()
    os.symlink(tmp_path / "elsewhere.bin", tmp_path / f"{oid}.bin")
    folder_reasons = load_observations(tmp_path, "observations", "archive")[1]
    assert Code.ARTIFACT_MALFORMED in [r.code for r in folder_reasons]


def test_existing_evidence_is_never_overwritten(tmp_path: Path) -> None:
    oid = write(tmp_path)
    (tmp_path / f"{oid}.bin").write_bytes(b"changed by someone")
    with pytest.raises(EvidenceError) as caught:
        write(tmp_path)
    assert caught.value.reason.code is Code.OBSERVATION_CONFLICT
    assert (tmp_path / f"{oid}.bin").read_bytes() == b"changed by someone"


WRITER = """
import sys, time
from pathlib import Path
from epoch_gate.evidence import atomic
real_fsync = atomic.os.fsync
def slow_fsync(fd):
    print("fsync", flush=True)
    time.sleep(0.2)
    real_fsync(fd)
atomic.os.fsync = slow_fsync
from epoch_gate.evidence.observations import make_observation, write_observation
w = b"x" * 2_000_000
o = make_observation(suite="suite", epoch_id="e1", prop="p", status="fail", rerun_passed=False, witness=w, bound="b", line=1,
                     detail="d")
write_observation(Path(sys.argv[1]), o, w)
print("done", flush=True)
"""


@pytest.mark.parametrize("kill_after_fsyncs", [1, 2, 3, 4])
def test_a_writer_killed_midway_leaves_nothing_that_validates_partially(tmp_path: Path, kill_after_fsyncs: int) -> None:
    folder = tmp_path / "obs"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(folder)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        if line.startswith(b"fsync"):
            seen += 1
            if seen == kill_after_fsyncs:
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait()
    observations, reasons = load_observations(folder, "obs", "archive")
    # Either nothing (a crash before the status record) or the complete observation; never a partial one.
    assert reasons == []
    for observation in observations:
        assert (folder / f"{observation.id}.bin").read_bytes() == b"x" * 2_000_000
