"""The parent checks the child's answers, not believes them: fake children that break the protocol."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.manifest import sample
from epoch_gate.evidence.replay_result import PropertyOutcome
from epoch_gate.runner.jail import reaper
from epoch_gate.runner.judge import channel
from epoch_gate.runner.judge import parent as replay

# A child answering 1 to every call, but wrongly as `mode` says: {mode} is filled in per test.
FAKE = """import sys, time
sys.path.insert(0, sys.argv[1])
from epoch_gate.runner import protocol
mode, answered = {mode!r}, 0
while True:
    got = protocol.read_frame(sys.stdin.buffer)
    if got is None:
        break
    kind, payload = got
    if mode == "stops at the second property" and b'"m":"fake_app.b"' in payload:
        sys.exit(0)
    if mode == "exits" and answered:
        sys.exit(0)
    if mode.startswith("cut short"):  # an answer's first bytes, then its end
        sys.stdout.buffer.write(protocol.frame(protocol.ANSWER, b'["v","int",1]' * 9)[:20])
        sys.stdout.buffer.flush()
        if mode == "cut short by a limit":  # the watch ends it: over its output limit
            sys.stderr.buffer.write(b"x" * (17 << 20))
            sys.stderr.buffer.flush()
            time.sleep(60)
        sys.exit(1)
    answer = {{
        "not JSON": b"[1",
        "an unknown answer": b'["held"]',
        "a key twice": b'["v","T",{{"amount":1,"amount":2}}]',
        "not ASCII": '["v","str","\u00e9"]'.encode(),
        "a NaN": b'["v","float",NaN]',
    }}.get(mode, b'["v","int",1]')
    sys.stdout.buffer.write(protocol.frame(protocol.ANSWER, answer))
    if mode == "unasked":  # an answer to a call the parent never made
        sys.stdout.buffer.write(protocol.frame(protocol.ANSWER, answer))
    sys.stdout.buffer.flush()
    answered += 1
if mode == "exits 1 at the end":
    sys.exit(1)
"""
PREDICATES = (
    "def a(record, product):\n    return product.fake_app.a(record) == 1\n"
    "def b(record, product):\n    return product.fake_app.b(record) == 1\n"
)


def replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> dict[str, PropertyOutcome]:
    monkeypatch.setattr(channel, "CHILD_BOOT", FAKE.format(mode=mode))
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(10)))
    (tmp_path / "fake_checks.py").write_text(PREDICATES)
    sys.modules.pop("fake_checks", None)
    props = tuple(Property(n, "payments", f"fake_checks:{n}", f"{n}.") for n in ("a", "b"))
    result = replay.run(
        sample(Catalog(props), 1, 2),
        world,
        tmp_path / "out",
        suite="suite",
        epoch_id="e1",
        child=replay.Child(tmp_path, ("fake_app",), oracle_names=("fake_checks",)),
    )
    return {p.name: p for p in result.properties}


def test_a_child_that_follows_the_protocol_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = replayed(tmp_path, monkeypatch, "honest")
    assert {(o.outcome, o.records) for o in outcomes.values()} == {("pass", 10)}


@pytest.mark.parametrize(
    "mode, affected, says",
    [
        ("not JSON", "ab", "the child broke the protocol: an answer that is not JSON (JSONDecodeError)"),
        ("an unknown answer", "ab", "the child broke the protocol: an answer of an unknown kind"),
        ("a key twice", "ab", "the child broke the protocol: an object with a key twice"),
        ("not ASCII", "ab", "the child broke the protocol: an answer that is not ASCII JSON"),
        ("a NaN", "ab", "the child broke the protocol: an answer that is not JSON (ValueError)"),
        ("unasked", "ab", "the child wrote more than its answers on the protocol channel"),
        ("stops at the second property", "b", "the child ended early"),
        ("exits", "ab", "the child ended early"),
        ("exits 1 at the end", "ab", "the child exited 1 after its answers"),
        ("cut short", "ab", "the child ended early (exit 1) mid-answer (truncated frame (15 of 117 bytes))"),
    ],
)
def test_a_child_breaking_the_protocol_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, affected: str, says: str
) -> None:
    outcomes = replayed(tmp_path, monkeypatch, mode)
    errors = {name for name, o in outcomes.items() if (o.outcome, o.error_code) == ("error", "runner-protocol")}
    assert errors == set(affected)
    assert says in outcomes[affected[0]].detail, outcomes[affected[0]].detail
    if affected == "b":
        assert (outcomes["a"].outcome, outcomes["a"].records) == ("pass", 10)


def test_a_limit_that_ends_the_child_mid_answer_is_named_not_blamed_on_the_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes = replayed(tmp_path, monkeypatch, "cut short by a limit")
    assert {(o.outcome, o.error_code) for o in outcomes.values()} == {("error", "replay-failed")}
    assert outcomes["a"].detail == f"the product went over {replay.Limits().output_limit()}", outcomes["a"].detail


# A runner that starts the real child on a predicate that never returns, says the child's pid, and waits.
RUNNER = """import sys, time
from pathlib import Path
from epoch_gate.runner.judge.channel import Channel
channel = Channel(Path(sys.argv[1]), ["spin"], [])
print(channel._process.pid, flush=True)
channel.ask(1, b'[{"m":"spin.forever"},[],{}]')
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

    (tmp_path / "spin.py").write_text("def forever():\n    while True:\n        pass\n")
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    child = int(runner.stdout.readline())  # type: ignore[union-attr]
    time.sleep(1)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    for _ in range(100):
        try:  # gone, or a zombie no one reaps (a container's pid 1 may not)
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (FileNotFoundError, ProcessLookupError):  # gone (ESRCH: it died while being read)
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the child outlived its runner")


def test_the_parent_guards_its_memory_and_adopts_what_the_child_leaves() -> None:
    """No process of the same uid may open /proc/<parent>/mem or ptrace it, and an orphan of the child's
    is reparented to the parent (to be killed before any output), not to init."""
    import ctypes

    reaper.guard_parent()
    libc = ctypes.CDLL(None, use_errno=True)
    value = ctypes.c_int(-1)
    assert libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE
    assert libc.prctl(37, ctypes.byref(value), 0, 0, 0) == 0 and value.value == 1  # PR_GET_CHILD_SUBREAPER
