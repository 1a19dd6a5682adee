"""The replay's child, through real subprocesses: product code cannot reach the verdict unseen."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from epoch_gate import replay
from epoch_gate.catalog import Catalog, Property
from epoch_gate.channel import RUNNER_ROOT
from epoch_gate.manifest import sample
from epoch_gate.world import world_sha256

ORACLE = "split_checks"  # the predicates' module: unique, so the parent's import cache never mixes tests


def sandbox(tmp_path: Path, predicates: str, product: str = "", records: int = 20) -> Path:
    """A sandbox (the predicates, the product `split_app`) beside a world of `records` payments, record 7
    negative."""
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / f"{ORACLE}.py").write_text(textwrap.dedent(predicates))
    (tmp_path / "sandbox" / "split_app.py").write_text(textwrap.dedent(product))
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_text("".join(
        json.dumps({"id": i, "amount": -5 if i == 7 else i}) + "\n" for i in range(1, records + 1)))
    sys.modules.pop(ORACLE, None)
    return world


def replayed(world: Path, *props: Property) -> dict[str, replay.PropertyOutcome]:
    child = replay.Child(world.parent / "sandbox", ("split_app",), oracle_names=(ORACLE,), batch=8)
    result = replay.run(sample(Catalog(props), 1, len(props)), world, world.parent / "out", suite="suite", epoch_id="e1",
                        child=child)
    return {p.name: p for p in result.properties}


def prop(name: str, predicate: str = "positive", probe: str = "") -> Property:
    return Property(name, "payments", f"{ORACLE}:{predicate}", f"{name}.", probe)


POSITIVE = """
import split_app

def positive(record):
    return split_app.amount(record) >= 0
"""


def test_an_honest_run_passes_and_fails_while_the_product_prints_to_stdout(tmp_path: Path) -> None:
    world = sandbox(tmp_path, POSITIVE + "\ndef small(record):\n    return record['amount'] < 100\n", """
        print("product imported")
        def amount(record):
            print("evaluating", record)
            return record["amount"]
    """)
    outcomes = replayed(world, prop("positive"), prop("small", "small"))
    assert (outcomes["positive"].outcome, outcomes["positive"].failures) == ("fail", 1)
    assert outcomes["positive"].first_failure == 7
    assert outcomes["positive"].summary() == \
        "fail  positive (first failed at record 7 of 20 payments records; 1 failed)"
    assert (outcomes["small"].outcome, outcomes["small"].records) == ("pass", 20)


@pytest.mark.parametrize("tamper", [
    # At import, after the predicate's definition.
    "import sys\nsys.modules['split_checks'].positive = lambda record: True\n",
    # At the first call, so the check after the batch catches it.
    "import sys\ndef amount(record):\n    sys.modules['split_checks'].positive.__code__ = (lambda r: True).__code__\n"
    "    return 0\n",
])
def test_a_replaced_predicate_is_an_error(tmp_path: Path, tamper: str) -> None:
    world = sandbox(tmp_path, "def positive(record):\n    return split_app.amount(record) >= 0\n"
                              "import split_app\n", "def amount(record):\n    return record['amount']\n" + tamper)
    outcomes = replayed(world, prop("positive"), prop("later"))
    assert (outcomes["positive"].outcome, outcomes["positive"].error_code) == ("error", "predicate-replaced")
    assert (outcomes["later"].outcome, outcomes["later"].error_code) == ("error", "predicate-replaced")


@pytest.mark.parametrize("tamper", [
    "import sys, types\nsys.modules['epoch_gate.stream'] = types.ModuleType('epoch_gate.stream')\n",
    "import sys, types\nsys.modules['epoch_gate.replay'] = types.ModuleType('epoch_gate.replay')\n",
    "import epoch_gate.child as c\nc.judge_predicate = lambda function, records: [b'1'] * len(records)\n",
])
def test_a_replaced_runner_module_is_an_error(tmp_path: Path, tamper: str) -> None:
    world = sandbox(tmp_path, POSITIVE, "def amount(record):\n    return record['amount']\n" + tamper)
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-replaced"), outcome.detail


def test_the_child_ending_early_is_an_error(tmp_path: Path) -> None:
    world = sandbox(tmp_path, POSITIVE, """
        import os
        def amount(record):
            if record["id"] == 12:
                os._exit(0)
            return record["amount"]
    """)
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "runner-protocol")
    assert "ended early" in outcome.detail


# Finds the child's protocol channel (a pipe open for writing, other than fds 0-2) and writes to it.
WRITE_TO_CHANNEL = """
import fcntl, os, stat
def channel_write(data):
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                os.write(fd, data)
        except OSError:
            pass
def amount(record):
    return record["amount"]
"""


FORGED = ("import struct\nverdicts = b'\\n'.join([b'1'] * 8)\n"
          "channel_write(struct.pack('>cI', b'V', len(verdicts)) + verdicts)\n")


@pytest.mark.parametrize("when", ["channel_write(b'1')\n",  # amid the answers: a broken frame
                                  FORGED])  # a well-formed answer: one answer too many at the end
def test_extra_bytes_on_the_protocol_channel_are_an_error(tmp_path: Path, when: str) -> None:
    world = sandbox(tmp_path, POSITIVE + "\ndef small(record):\n    return True\n", WRITE_TO_CHANNEL + when,
                    records=16)
    outcomes = replayed(world, prop("positive"), prop("small", "small"))
    assert {(o.outcome, o.error_code) for o in outcomes.values()} == {("error", "runner-protocol")}


PROBED = """
def amount_matches(record, observed):
    return observed == {"amount": record["amount"], "cents": [record["amount"] * 100]}
"""


def test_a_probe_is_judged_in_the_parent(tmp_path: Path) -> None:
    world = sandbox(tmp_path, PROBED, """
        def honest(record):
            return {"amount": record["amount"], "cents": [record["amount"] * 100]}
        def wrong_on_7(record):
            return {"amount": 0 if record["id"] == 7 else record["amount"], "cents": [record["amount"] * 100]}
    """)
    outcomes = replayed(world, prop("honest", "amount_matches", "split_app:honest"),
                        prop("wrong", "amount_matches", "split_app:wrong_on_7"))
    assert (outcomes["honest"].outcome, outcomes["honest"].records) == ("pass", 20)
    assert (outcomes["wrong"].outcome, outcomes["wrong"].failures, outcomes["wrong"].first_failure) == ("fail", 1, 7)


def test_a_probe_returning_an_object_that_equals_anything_is_an_error(tmp_path: Path) -> None:
    world = sandbox(tmp_path, PROBED, """
        class Anything(dict):
            def __eq__(self, other):
                return True
        def cheat(record):
            return {"amount": Anything()}
    """)
    outcome = replayed(world, prop("cheat", "amount_matches", "split_app:cheat"))["cheat"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-error")
    assert "not plain JSON data" in outcome.detail


def test_a_judge_that_imports_product_code_does_not_load(tmp_path: Path) -> None:
    world = sandbox(tmp_path, "import split_app\n" + PROBED, "def honest(record):\n    return {}\n")
    outcome = replayed(world, prop("p", "amount_matches", "split_app:honest"))["p"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-error")
    assert "split_app" in outcome.detail


BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from epoch_gate.runner_main import main; sys.exit(main(sys.argv[2:]))"
# As the plugin starts the parent: the runner in the sandbox (writable by the child), the cwd relative.
PLUGIN_BOOT = "import sys; sys.path.insert(0, '__epoch_gate'); from epoch_gate.runner_main import main; sys.exit(main())"


def test_the_isolated_parent_replays_with_the_product_in_the_child_only(tmp_path: Path) -> None:
    """As the plugin runs it: -I -S, the runner alone on the path, the sandbox as the cwd."""
    world = sandbox(tmp_path, POSITIVE, "def amount(record):\n    return record['amount']\n")
    manifest = sample(Catalog((prop("positive"),)), 1, 1)
    (tmp_path / "manifest.json").write_bytes(manifest.to_bytes())
    done = subprocess.run(
        [sys.executable, "-I", "-B", "-S", "-c", BOOT, RUNNER_ROOT, "replay", "--manifest", "../manifest.json",
         "--world", "../world", "--suite", "suite", "--epoch-id", "e1", "--out", "../out", "--sandbox-names", "split_app",
         "--oracle-names", ORACLE], cwd=world.parent / "sandbox", capture_output=True, text=True, check=True)
    assert done.stdout.startswith("fail  positive (first failed at record 7 of 20 payments records; 1 failed)")
    summary = json.loads((tmp_path / "out" / "replay.json").read_text())
    assert summary["properties"][0]["outcome"] == "fail"


def test_child_path_folders_come_after_the_sandbox_is_checked(tmp_path: Path) -> None:
    """A third-party folder serves the product; a predicate module served from one is not the oracle's."""
    world = sandbox(tmp_path, POSITIVE,
                    "import split_vendor\ndef amount(record):\n    return split_vendor.amount(record)\n")
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "split_vendor.py").write_text("def amount(record):\n    return abs(record['amount'])\n")
    (vendor / "split_elsewhere.py").write_text("def positive(record):\n    return True\n")
    props = (prop("positive"), Property("zz_elsewhere", "payments", "split_elsewhere:positive", "e."))
    child = replay.Child(world.parent / "sandbox", ("split_app",), (str(vendor),), (ORACLE,))
    result = replay.run(sample(Catalog(props), 1, 2), world, tmp_path / "out", suite="suite", epoch_id="e1", child=child)
    outcomes = {p.name: p for p in result.properties}
    assert (outcomes["positive"].outcome, outcomes["positive"].records) == ("pass", 20)
    assert (outcomes["zz_elsewhere"].outcome, outcomes["zz_elsewhere"].error_code) == ("error", "predicate-replaced")


LAZY_JUDGE = """
def mean_matches(record, observed):
    import statistics  # lazily: the first call comes after the child started
    return observed == statistics.mean([record["amount"]])
"""


def test_the_child_cannot_plant_modules_the_parent_imports_nor_rewrite_its_judges(tmp_path: Path) -> None:
    """The product, at import in the child, plants `statistics` in the runner's folder (the parent's
    sys.path[0] in the jail) and rewrites the judge's file: the parent still judges with its own."""
    world = sandbox(tmp_path, LAZY_JUDGE, """
        import pathlib
        pathlib.Path("__epoch_gate/statistics.py").write_text("def mean(values):\\n    return 'planted'\\n")
        pathlib.Path("split_checks.py").write_text("def mean_matches(record, observed):\\n    return True\\n")
        def probe(record):
            return "planted"
    """)
    shutil.copytree(Path(RUNNER_ROOT) / "epoch_gate", tmp_path / "sandbox" / "__epoch_gate" / "epoch_gate")
    manifest = sample(Catalog((prop("p", "mean_matches", "split_app:probe"),)), 1, 1)
    (tmp_path / "manifest.json").write_bytes(manifest.to_bytes())
    subprocess.run(
        [sys.executable, "-I", "-B", "-S", "-c", PLUGIN_BOOT, "replay", "--manifest", "../manifest.json",
         "--world", "../world", "--suite", "suite", "--epoch-id", "e1", "--out", "../out", "--sandbox-names", "split_app",
         "--oracle-names", ORACLE], cwd=world.parent / "sandbox", capture_output=True, text=True, check=True)
    assert (tmp_path / "sandbox" / "__epoch_gate" / "statistics.py").exists()  # planted, and never imported
    (summary,) = json.loads((tmp_path / "out" / "replay.json").read_text())["properties"]
    assert (summary["outcome"], summary["failures"], summary["first_failure"]) == ("fail", 20, 1)


def test_close_imports_leaves_nothing_of_the_sandbox_importable(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "runner" / "split_pkg").mkdir(parents=True)
    (tmp_path / "runner" / "split_pkg" / "__init__.py").write_text("")
    (tmp_path / "runner" / "split_pkg" / "late.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["runner", str(tmp_path / "runner"), "", *sys.path])
    importlib.import_module("split_pkg")  # a package of the sandbox, imported before the child starts
    try:
        replay.close_imports(tmp_path)
        assert sys.path and not [entry for entry in sys.path if Path(entry).resolve().is_relative_to(tmp_path)]
        assert not [key for key in sys.path_importer_cache if Path(key).resolve().is_relative_to(tmp_path)]
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("split_pkg.late")
    finally:
        sys.modules.pop("split_pkg", None)


# At import in the child: a grandchild that lets go of the protocol pipes, then waits for the parent's
# outputs to rewrite them.
LINGERING = """
import os, pathlib, time
if os.fork() == 0:
    os.closerange(0, 2)
    os.closerange(3, 1024)
    out = pathlib.Path("../out")
    for _ in range(600):
        if (out / "replay.json").exists():
            for path in [out / "replay.json", *(out / "observations").iterdir()]:
                path.write_text("forged")
            pathlib.Path("../rewrote").write_text("")
            break
        time.sleep(0.02)
    os._exit(0)
def amount(record):
    return record["amount"]
"""


def test_a_lingering_grandchild_cannot_rewrite_the_outputs(tmp_path: Path) -> None:
    world = sandbox(tmp_path, POSITIVE, LINGERING)
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.failures) == ("fail", 1)
    time.sleep(1)  # long enough for a surviving grandchild to have done it
    assert not (tmp_path / "rewrote").exists()
    assert json.loads((tmp_path / "out" / "replay.json").read_text())["properties"][0]["outcome"] == "fail"
    assert all(path.read_bytes() != b"forged" for path in (tmp_path / "out" / "observations").iterdir())


def test_the_child_cannot_rewrite_the_world_the_parent_streams(tmp_path: Path) -> None:
    """The product, at import, rewrites the world (same lines, record 7 now positive) before the second
    property's records are read: the parent streams the bytes it hashed before the child started."""
    world = sandbox(tmp_path, POSITIVE + "\ndef small(record):\n    return True\n", """
        import json, pathlib
        pathlib.Path("../world/payments.jsonl").write_text("".join(
            json.dumps({"id": i, "amount": i}) + "\\n" for i in range(1, 21)))
        def amount(record):
            return record["amount"]
    """)
    digest = world_sha256(world)
    result = replay.run(sample(Catalog((prop("a_small", "small"), prop("positive"))), 1, 2), world,
                        tmp_path / "out", suite="suite", epoch_id="e1", child=replay.Child(tmp_path / "sandbox", ("split_app",),
                                                                            oracle_names=(ORACLE,), batch=8))
    assert world_sha256(world) != digest  # it was rewritten, and the replay still read the world it hashed
    assert result.world_sha256 == digest
    outcomes = {p.name: p for p in result.properties}
    assert (outcomes["positive"].outcome, outcomes["positive"].first_failure) == ("fail", 7)


def test_files_the_child_planted_in_the_output_folder_are_not_evidence(tmp_path: Path) -> None:
    world = sandbox(tmp_path, POSITIVE, """
        import pathlib
        planted = pathlib.Path("../out/observations")
        planted.mkdir(parents=True, exist_ok=True)
        (planted / "positive-000000000000000000000000.json").write_text("{}")
        (planted.parent / "extra.txt").write_text("planted")
        def amount(record):
            return record["amount"]
        """)
    assert replayed(world, prop("positive"))["positive"].outcome == "fail"
    out = tmp_path / "out"
    assert not (out / "extra.txt").exists()
    assert not (out / "observations" / "positive-000000000000000000000000.json").exists()
