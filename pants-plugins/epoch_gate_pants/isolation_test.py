"""Rule tests of `isolation.py`: the jail's tools, its probe, and what a jailed generator can reach."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pants.build_graph.address import Address
from pants.engine.fs import Digest, DigestContents
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.reasons import Code
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints

from epoch_gate_pants import fixture, isolation
from epoch_gate_pants.fixture import FixtureWorld, FixtureWorldRequest
from epoch_gate_pants.gate_harness import BWRAP_SHA, GENERATOR, bootstrapped, configure
from epoch_gate_pants.isolation import Jail, exec_retrying
from epoch_gate_pants.rule_harness import write_repo

MODULES = (fixture, isolation)
QUERIES = (
    QueryRule(Jail, [InterpreterConstraints]),
    QueryRule(FixtureWorld, [FixtureWorldRequest]),
    QueryRule(DigestContents, [Digest]),
)
GLOBAL = InterpreterConstraints(["CPython==3.9.*"])  # [python].interpreter_constraints of the harness


# Reads a working-tree file by absolute path, which a plain sandbox allows.
PEEKING_GENERATOR = """
import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--out")
parser.add_argument("--input", action="append")
args = parser.parse_args()
os.makedirs(args.out)
with open(os.path.join(args.out, "world.txt"), "w") as out:
    out.write(open("{root}/src/payments_lib.py").read())
"""


def peeking_world(runner: RuleRunner) -> tuple[FixtureWorld, bytes]:
    write_repo(runner)
    runner.write_files({"fixtures/gen.py": PEEKING_GENERATOR.replace("{root}", runner.build_root)})
    world = runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    contents = runner.request(DigestContents, [world.digest])
    return world, b"".join(c.content for c in contents)


def test_a_jailed_generator_cannot_read_the_working_tree(rule_runner: RuleRunner) -> None:
    configure(rule_runner, jailed=True)
    jail = rule_runner.request(Jail, [GLOBAL])
    assert jail.isolation.jailed and jail.isolation.fixed_clock, jail.isolation
    world, _ = peeking_world(rule_runner)
    assert world.failure is not None and world.failure.code is Code.GENERATOR_FAILED
    assert "No such file or directory" in world.failure.message

    # The same generator, unjailed, reads the working tree: the jail is what stopped it.
    configure(rule_runner, "--gate-isolation=off", jailed=True)
    world, data = peeking_world(rule_runner)
    assert world.failure is None and b"def refundable" in data


def test_the_jail_stops_the_clock(rule_runner: RuleRunner) -> None:
    configure(rule_runner, jailed=True)
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "fixtures/gen.py": GENERATOR.replace(
                'os.makedirs(args.out)',
                'os.makedirs(args.out)\nimport time\n'
                'open(os.path.join(args.out, "clock"), "w").write(str(time.time()))',
            )
        }
    )
    world = rule_runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    contents = {c.path: c.content for c in rule_runner.request(DigestContents, [world.digest])}
    assert contents["__world/clock"] == b"946684800.0"


def test_required_isolation_without_bubblewrap_runs_nothing(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    request = FixtureWorldRequest(Address("fixtures", target_name="epoch"))
    # auto: no bubblewrap, so the plain sandbox, and the report says so.
    assert rule_runner.request(Jail, [GLOBAL]).isolation.description.startswith("none (bubblewrap unavailable")
    assert rule_runner.request(FixtureWorld, [request]).failure is None
    configure(rule_runner, "--gate-isolation=required")
    world = rule_runner.request(FixtureWorld, [request])
    assert world.failure is not None and world.failure.code is Code.ISOLATION_UNAVAILABLE
    assert "bubblewrap unavailable" in world.failure.found


def test_without_the_pinned_bubblewrap_the_systems_is_used_when_recent_enough(
    rule_runner: RuleRunner, tmp_path: Path
) -> None:
    write_repo(rule_runner)
    system = tmp_path / "system"
    system.mkdir()
    shutil.copy(bootstrapped("isolation/bwrap", BWRAP_SHA), system / "bwrap")
    configure(rule_runner, f"--bwrap-system-search-path=['{system}']")  # the pinned one is not there
    jail = rule_runner.request(Jail, [GLOBAL])
    assert jail.isolation.jailed and jail.isolation.description.startswith("bubblewrap 0.8.0: no working tree")
    assert jail.isolation.description.endswith("the product in a jail of its own, host clock (libfaketime unavailable)")

    old = tmp_path / "old"  # another folder: the engine keeps a probe's answer while its options are the same
    old.mkdir()
    (old / "bwrap").write_text("#!/bin/sh\necho bubblewrap 0.4.1\n")
    (old / "bwrap").chmod(0o755)
    configure(rule_runner, f"--bwrap-system-search-path=['{old}']")
    jail = rule_runner.request(Jail, [GLOBAL])
    assert not jail.isolation.jailed
    assert jail.isolation.description.endswith(
        f"and the system's {old}/bwrap (bubblewrap 0.4.1) is not bubblewrap 0.5.0 or later)"
    ), jail.isolation


def test_a_bubblewrap_held_open_for_writing_is_waited_for_not_failed_on(tmp_path: Path) -> None:
    # What a process forked beside Pants' write of the sandbox does: it holds the file open for writing.
    program = tmp_path / "bwrap"
    shutil.copy("/bin/echo", program)
    with program.open("r+b"):
        with pytest.raises(OSError) as busy:
            subprocess.run([str(program), "held"])
        assert busy.value.errno == errno.ETXTBSY
        started = subprocess.Popen(exec_retrying(sys.executable, [str(program), "ran"]), stdout=subprocess.PIPE)
        time.sleep(0.1)
    assert started.communicate(timeout=30) == (b"ran\n", None) and started.returncode == 0

    # Anything else is not retried: it is said, and the process fails.
    gone = subprocess.run(exec_retrying(sys.executable, [str(tmp_path / "gone")]), capture_output=True, timeout=30)
    assert (gone.returncode, gone.stdout, gone.stderr) == (
        126,
        b"",
        f"cannot run {tmp_path}/gone: No such file or directory\n".encode(),
    )
