"""The parent checks the child's answers, not believes them: fake children that break the protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epoch_gate import channel, replay
from epoch_gate.catalog import Catalog, Property
from epoch_gate.manifest import sample

# A child answering "held" to everything, but wrongly as `MODE` says: {mode} is filled in per test.
FAKE = """import sys
sys.path.insert(0, sys.argv[1])
from epoch_gate import stream
mode, answered = {mode!r}, 0
while True:
    got = stream.read_frame(sys.stdin.buffer)
    if got is None:
        break
    index, records = stream.parse_request(got[1])
    count = len(records) - (mode == "one short") + (mode == "one more")
    if mode == "stops at the second property" and index == 1:
        sys.exit(0)
    if mode == "exits" and answered:
        sys.exit(0)
    sys.stdout.buffer.write(stream.frame(stream.VERDICTS, b"\\n".join([stream.HELD] * count)))
    sys.stdout.buffer.flush()
    answered += 1
if mode == "exits 1 at the end":
    sys.exit(1)
"""


def replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> dict[str, replay.PropertyOutcome]:
    monkeypatch.setattr(channel, "CHILD_BOOT", FAKE.format(mode=mode))
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(10)))
    props = tuple(Property(n, "payments", f"anything:{n}", f"{n}.") for n in ("a", "b"))
    result = replay.run(sample(Catalog(props), 1, 2), world, tmp_path / "out", suite="suite", epoch_id="e1",
                        child=replay.Child(tmp_path, batch=4))
    return {p.name: p for p in result.properties}


def test_a_child_that_follows_the_protocol_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = replayed(tmp_path, monkeypatch, "honest")
    assert {(o.outcome, o.records) for o in outcomes.values()} == {("pass", 10)}


@pytest.mark.parametrize("mode, affected, says", [
    ("one short", "ab", "answered 3 verdicts for 4 records"),
    ("one more", "ab", "answered 5 verdicts for 4 records"),
    ("stops at the second property", "b", "ended early"),
    ("exits", "ab", "ended early"),
    ("exits 1 at the end", "ab", "exited 1"),
])
def test_a_child_breaking_the_protocol_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str,
                                                   affected: str, says: str) -> None:
    outcomes = replayed(tmp_path, monkeypatch, mode)
    errors = {name for name, o in outcomes.items() if (o.outcome, o.error_code) == ("error", "runner-protocol")}
    assert errors == set(affected)
    assert says in outcomes[affected[0]].detail
    if affected == "b":
        assert (outcomes["a"].outcome, outcomes["a"].records) == ("pass", 10)


# A runner that starts the real child on a predicate that never returns, says the child's pid, and waits.
RUNNER = """import sys, time
from pathlib import Path
from epoch_gate.channel import Channel
from epoch_gate import stream
channel = Channel(["predicate=spin:forever"], Path(sys.argv[1]), ["spin"], [])
print(channel._process.pid, flush=True)
channel._process.stdin.write(stream.request(0, [b"{}"]))
channel._process.stdin.flush()
time.sleep(600)
"""


def test_the_child_dies_with_its_runner(tmp_path: Path) -> None:
    """The child has its own session, so a runner killed from outside (a Pants timeout, with no jail to
    take the child along) must not leave a looping predicate running."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "spin.py").write_text("def forever(record):\n    while True:\n        pass\n")
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    child = int(runner.stdout.readline())  # type: ignore[union-attr]
    time.sleep(1)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    for _ in range(100):
        try:  # gone, or a zombie no one reaps (a container's pid 1 may not)
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except OSError:
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the child outlived its runner")
