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
from typing import Callable

import pytest

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.manifest import sample
from epoch_gate.evidence.replay_result import PropertyOutcome
from epoch_gate.runner.judge import parent as replay
from epoch_gate.runner.judge import predicates
from epoch_gate.runner.product.child import LOADED_FROM, Server
from epoch_gate.evidence.world import world_sha256

ORACLE = "split_checks"  # the predicates' module: unique, so the parent's import cache never mixes tests


def sandbox(tmp_path: Path, predicates: str, product: str = "", records: int = 20) -> Path:
    """A sandbox (the predicates, the product `split_app`) beside a world of `records` payments, record 7
    negative."""
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / f"{ORACLE}.py").write_text(textwrap.dedent(predicates))
    (tmp_path / "sandbox" / "split_app.py").write_text(textwrap.dedent(product))
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_text(
        "".join(json.dumps({"id": i, "amount": -5 if i == 7 else i}) + "\n" for i in range(1, records + 1))
    )
    sys.modules.pop(ORACLE, None)
    return world


def replayed(world: Path, *props: Property) -> dict[str, PropertyOutcome]:
    child = replay.Child(world.parent / "sandbox", ("split_app",), oracle_names=(ORACLE,), children=2)
    result = replay.run(
        sample(Catalog(props), 1, len(props)), world, world.parent / "out", suite="suite", epoch_id="e1", child=child
    )
    return {p.name: p for p in result.properties}


def prop(name: str, predicate: str = "positive") -> Property:
    return Property(name, "payments", f"{ORACLE}:{predicate}", f"{name}.")


POSITIVE = """
def positive(record, product):
    return product.split_app.amount(record) >= 0
"""


def test_an_honest_run_passes_and_fails_while_the_product_prints_to_stdout(tmp_path: Path) -> None:
    world = sandbox(
        tmp_path,
        POSITIVE + "\ndef small(record, product):\n    return record['amount'] < 100\n",
        """
        print("product imported")
        def amount(record):
            print("evaluating", record)
            return record["amount"]
    """,
    )
    outcomes = replayed(world, prop("positive"), prop("small", "small"))
    assert (outcomes["positive"].outcome, outcomes["positive"].failures) == ("fail", 1)
    assert outcomes["positive"].first_failure == 7
    assert (
        outcomes["positive"].summary() == "fail  positive (first failed at record 7 of 20 payments records; 1 failed)"
    )
    assert (outcomes["small"].outcome, outcomes["small"].records) == ("pass", 20)


def test_the_child_ending_early_is_an_error(tmp_path: Path) -> None:
    world = sandbox(
        tmp_path,
        POSITIVE,
        """
        import os
        def amount(record):
            if record["id"] == 12:
                os._exit(0)
            return record["amount"]
    """,
    )
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
# A well-formed frame of eight answers, each "holds": one frame too many, whenever it lands.
FORGED = (
    "import struct\nanswers = b'[' + b','.join([b'[\"v\",-1,\"bool\",true,{}]'] * 8) + b']'\n"
    "channel_write(struct.pack('>cI', b'A', len(answers)) + answers)\n"
)


@pytest.mark.parametrize("when", ["channel_write(b'1')\n", FORGED])  # amid the answers: a broken frame
def test_extra_bytes_on_the_protocol_channel_are_an_error(tmp_path: Path, when: str) -> None:
    world = sandbox(
        tmp_path, POSITIVE + "\ndef small(record, product):\n    return True\n", WRITE_TO_CHANNEL + when, records=16
    )
    outcomes = replayed(world, prop("positive"), prop("small", "small"))
    assert {(o.outcome, o.error_code) for o in outcomes.values()} == {("error", "runner-protocol")}


# Every way a product value could decide for the predicate: whatever its methods say, only its data
# crosses, and the predicate compares that. Each product below has the bug on record 7 (a negative amount).
CHEATS = {
    "an int whose comparisons always hold": """
        class Amount(int):
            __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = lambda self, other: True
            __hash__ = int.__hash__
            __bool__ = lambda self: True
        def amount(record):
            return Amount(record["amount"])
    """,
    "a float whose conversions lie": """
        class Amount(float):
            __float__ = __index__ = __int__ = lambda self: 1
            __ge__ = lambda self, other: True
        def amount(record):
            return Amount(record["amount"])
    """,
    "an object whose dunders lie": """
        class Amount:
            def __init__(self, value):
                self.value = value
            __eq__ = __lt__ = __ge__ = lambda self, other: True
            __hash__ = lambda self: 0
            __bool__ = lambda self: True
            __iter__ = lambda self: iter([1])
            __index__ = __float__ = __int__ = lambda self: 1
        def amount(record):
            return Amount(record["amount"]).value
    """,
    "a dict whose items lie": """
        class Row(dict):
            def items(self):
                return [("value", 1)]
            def __getitem__(self, key):
                return 1
        def amount(record):
            return Row(value=record["amount"])["value"] if False else record["amount"]
    """,
}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_product_value_never_decides(tmp_path: Path, cheat: str) -> None:
    world = sandbox(tmp_path, POSITIVE, CHEATS[cheat])
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.failures, outcome.first_failure) == ("fail", 1, 7), outcome.detail


def test_an_object_crosses_as_its_fields_and_passes_back_as_a_handle(tmp_path: Path) -> None:
    world = sandbox(
        tmp_path,
        """
        def positive(record, product):
            money = product.split_app.Money(record["amount"], "EUR")
            doubled = money + money  # a call: the child adds the two objects it holds
            return (money.minor >= 0 and doubled.minor == 2 * money.minor and money.currency == "EUR"
                    and money.cents == 100 * money.minor and money.negated().minor == -money.minor)
    """,
        """
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class Money:
            minor: int
            currency: str
            @property
            def cents(self):
                return 100 * self.minor
            def negated(self):
                return Money(-self.minor, self.currency)
            def __add__(self, other):
                return Money(self.minor + other.minor, self.currency)
    """,
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.failures, outcome.first_failure) == ("fail", 1, 7), outcome.detail


def test_a_property_is_read_only_when_a_predicate_reads_it(tmp_path: Path) -> None:
    """Reading a property is product code: the child runs it when, and as often as, a predicate reads it.
    Each child counts the properties it computed in a file of its own (its pid)."""
    world = sandbox(
        tmp_path,
        """
        def positive(record, product):
            t = product.split_app.Totals(record["amount"])
            if record["id"] == 36:
                return t.cents == 100 * t.minor
            return t.minor >= 0
    """,
        """
        import os
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class Totals:
            minor: int
            @property
            def cents(self):
                with open(f"../cents-{os.getpid()}", "a") as counted:
                    counted.write("x")
                return 100 * self.minor
    """,
        records=40,
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.records, outcome.failures, outcome.first_failure) == ("fail", 40, 1, 7)
    computed = sum(len(path.read_text()) for path in tmp_path.glob("cents-*"))
    assert computed == 1, computed  # record 36's read, and no other


BOX = """
class Box:
    def __init__(self, amount):
        self.amount = amount
def wrap(record):
    return Box(record["amount"])
"""


@pytest.mark.parametrize(
    "use, says",
    [
        ("m == m", "used in a comparison (==, !=)"),
        ("m < m", "used in an ordering"),
        ("bool(m)", "used as a truth value"),
        ("{m: 1}", "used as a hash key"),
        ("iter(m)", "used as an iterable"),
        ("int(m)", "used as an int"),
        ("float(m)", "used as a number"),
        ("len(m)", "used as a sized collection"),
    ],
)
def test_a_product_value_used_as_data_is_the_oracles_error(tmp_path: Path, use: str, says: str) -> None:
    world = sandbox(
        tmp_path,
        f"""
        def positive(record, product):
            m = product.split_app.wrap(record)
            return bool({use})
    """,
        BOX,
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "handle-misused")
    assert outcome.detail.startswith(f"record 1: <product Box> {says}"), outcome.detail


def test_answers_that_are_not_the_data_read_fail_the_record(tmp_path: Path) -> None:
    world = sandbox(
        tmp_path,
        """
        def missing_field(record, product):
            return product.split_app.shaped(record).amount >= 0
        def not_data(record, product):
            return product.split_app.opaque(record).amount >= 0
    """,
        """
        class Paid:
            def __init__(self, amount):
                self.amount = amount
        def shaped(record):
            return Paid(record["amount"]) if record["id"] != 3 else {"amount": 1}
        def opaque(record):
            return (lambda: None) if record["id"] == 5 else Paid(1)
    """,
    )
    outcomes = replayed(world, prop("missing_field", "missing_field"), prop("not_data", "not_data"))
    assert (outcomes["missing_field"].outcome, outcomes["missing_field"].failures) == ("fail", 2)
    assert outcomes["missing_field"].first_failure == 3
    # A dict read as an object: the product answered another shape
    assert outcomes["missing_field"].detail == "the product's answer a dict, not an object with a field amount"
    assert (outcomes["not_data"].outcome, outcomes["not_data"].first_failure) == ("fail", 5)
    assert outcomes["not_data"].detail == (
        "the product raised AttributeError: 'function' object has no attribute 'amount'"
    )


@pytest.mark.parametrize(
    "predicate, says",
    [
        (
            "return product.split_app.amount({1, 2}) > 0",
            "an argument of split_app.amount is not data: a set is not data",
        ),
        ("return product.split_app.absent(record) > 0", "does not resolve in the product: split_app has no absent"),
        (
            "return product.nowhere.amount(record) > 0",
            "does not resolve in the product: no product module named nowhere",
        ),
    ],
)
def test_the_predicates_own_mistakes_are_errors(tmp_path: Path, predicate: str, says: str) -> None:
    world = sandbox(
        tmp_path,
        f"def positive(record, product):\n    {predicate}\n",
        "def amount(record):\n    return record['amount']\n",
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-error")
    assert says in outcome.detail, outcome.detail


def test_a_product_that_rewrites_the_childs_answers_still_answers_only_data(tmp_path: Path) -> None:
    """The product takes over the child's serving loop and answers every call itself: it can say anything,
    but only data, and the predicate judges it. Saying the old "held" breaks the protocol."""
    world = sandbox(
        tmp_path,
        POSITIVE + "\ndef exact(record, product):\n"
        "    return product.split_app.amount(record) == abs(record['amount'])\n",
        """
        from epoch_gate.runner.product import child
        child.Server.answer = lambda self, scope, line: '["v","int",5]'
        def amount(record):
            return record["amount"]
    """,
    )
    outcomes = replayed(world, prop("positive"), prop("exact", "exact"))
    assert (outcomes["positive"].outcome, outcomes["positive"].records) == ("pass", 20)  # the lie, judged
    # `exact` is sampled first. The children take the records in turn (odd, even), and each one's first
    # call (records 1 and 2) imported the product, so it answered that one honestly. Every later answer is
    # 5, which is right only for records 5 and 7 (abs(-5)).
    assert (outcomes["exact"].outcome, outcomes["exact"].failures) == ("fail", 16)


def test_a_judge_that_imports_product_code_does_not_load(tmp_path: Path) -> None:
    world = sandbox(tmp_path, "import split_app\n" + POSITIVE, "def amount(record):\n    return 1\n")
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-error")
    assert outcome.detail.startswith(
        "cannot load predicate split_checks:positive: it imports split_app, which is "
        "not the oracle's. A predicate runs outside the product: take `product`"
    )


def test_a_one_parameter_predicate_says_how_to_migrate(tmp_path: Path) -> None:
    world = sandbox(tmp_path, "def positive(record):\n    return True\n", "")
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-error")
    assert "takes 1 parameter, not (record, product)" in outcome.detail


BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from epoch_gate.runner.main import main; sys.exit(main(sys.argv[2:]))"
)
# As the plugin starts the parent: the runner in the sandbox (writable by the child), the cwd relative.
PLUGIN_BOOT = (
    "import sys; sys.path.insert(0, '__epoch_gate'); from epoch_gate.runner.main import main; sys.exit(main())"
)


# The replay the sandbox tests run: the world, the manifest and the output beside the sandbox (the cwd).
REPLAY_ARGS = (
    *("replay", "--manifest", "../manifest.json", "--world", "../world", "--suite", "suite"),
    *("--epoch-id", "e1", "--out", "../out", "--sandbox-names", "split_app", "--oracle-names", ORACLE),
)


def test_the_isolated_parent_replays_with_the_product_in_the_child_only(tmp_path: Path) -> None:
    """As the plugin runs it: -I -S, the runner alone on the path, the sandbox as the cwd."""
    world = sandbox(tmp_path, POSITIVE, "def amount(record):\n    return record['amount']\n")
    manifest = sample(Catalog((prop("positive"),)), 1, 1)
    (tmp_path / "manifest.json").write_bytes(manifest.to_bytes())
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-B",
            "-S",
            "-c",
            BOOT,
            LOADED_FROM,
            *REPLAY_ARGS,
        ],
        cwd=world.parent / "sandbox",
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("fail  positive (first failed at record 7 of 20 payments records; 1 failed)")
    summary = json.loads((tmp_path / "out" / "replay.json").read_text())
    assert summary["properties"][0]["outcome"] == "fail"


def test_a_child_whose_jail_cannot_start_is_refused_with_a_reason(tmp_path: Path) -> None:
    world = sandbox(tmp_path, POSITIVE, "def amount(record):\n    return record['amount']\n")
    (tmp_path / "manifest.json").write_bytes(sample(Catalog((prop("positive"),)), 1, 1).to_bytes())
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-B",
            "-S",
            "-c",
            BOOT,
            LOADED_FROM,
            *REPLAY_ARGS,
            "--child-jail",
            str(tmp_path / "no-bwrap"),
        ],
        cwd=world.parent / "sandbox",
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(
        "refused [replay-failed] suite: the replay's child could not start: [Errno 2]"
    ), done.stderr
    assert not (tmp_path / "out").exists()


def test_child_path_folders_come_after_the_sandbox_is_checked(tmp_path: Path) -> None:
    """A third-party folder serves the product; a predicate module served from one does not load."""
    world = sandbox(
        tmp_path, POSITIVE, "import split_vendor\ndef amount(record):\n    return split_vendor.amount(record)\n"
    )
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "split_vendor.py").write_text("def amount(record):\n    return abs(record['amount'])\n")
    (vendor / "split_elsewhere.py").write_text("def positive(record, product):\n    return True\n")
    props = (prop("positive"), Property("zz_elsewhere", "payments", "split_elsewhere:positive", "e."))
    child = replay.Child(world.parent / "sandbox", ("split_app",), (str(vendor),), (ORACLE,))
    result = replay.run(
        sample(Catalog(props), 1, 2), world, tmp_path / "out", suite="suite", epoch_id="e1", child=child
    )
    outcomes = {p.name: p for p in result.properties}
    assert (outcomes["positive"].outcome, outcomes["positive"].records) == ("pass", 20)
    assert (outcomes["zz_elsewhere"].outcome, outcomes["zz_elsewhere"].error_code) == ("error", "predicate-error")


LAZY_JUDGE = """
def mean_matches(record, product):
    import statistics  # lazily: the first call comes after the child started
    return product.split_app.probe(record) == statistics.mean([record["amount"]])
"""


def test_the_child_cannot_plant_modules_the_parent_imports_nor_rewrite_its_judges(tmp_path: Path) -> None:
    """The product, at import in the child, plants `statistics` in the runner's folder (the parent's
    sys.path[0] in the jail) and rewrites the judge's file: the parent still judges with its own."""
    world = sandbox(
        tmp_path,
        LAZY_JUDGE,
        """
        import pathlib
        pathlib.Path("__epoch_gate/statistics.py").write_text("def mean(values):\\n    return 'planted'\\n")
        pathlib.Path("split_checks.py").write_text("def mean_matches(record, product):\\n    return True\\n")
        def probe(record):
            return "planted"
    """,
    )
    shutil.copytree(Path(LOADED_FROM) / "epoch_gate", tmp_path / "sandbox" / "__epoch_gate" / "epoch_gate")
    manifest = sample(Catalog((prop("p", "mean_matches"),)), 1, 1)
    (tmp_path / "manifest.json").write_bytes(manifest.to_bytes())
    subprocess.run(
        [
            sys.executable,
            "-I",
            "-B",
            "-S",
            "-c",
            PLUGIN_BOOT,
            *REPLAY_ARGS,
        ],
        cwd=world.parent / "sandbox",
        capture_output=True,
        text=True,
        check=True,
    )
    assert (tmp_path / "sandbox" / "__epoch_gate" / "statistics.py").exists()  # planted, and never imported
    (summary,) = json.loads((tmp_path / "out" / "replay.json").read_text())["properties"]
    assert (summary["outcome"], summary["failures"], summary["first_failure"]) == ("fail", 20, 1)


def test_close_imports_leaves_nothing_of_the_sandbox_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runner" / "split_pkg").mkdir(parents=True)
    (tmp_path / "runner" / "split_pkg" / "__init__.py").write_text("")
    (tmp_path / "runner" / "split_pkg" / "late.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["runner", str(tmp_path / "runner"), "", *sys.path])
    importlib.import_module("split_pkg")  # a package of the sandbox, imported before the child starts
    try:
        predicates.close_imports(tmp_path)
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


# At import in the child: a grandchild that leaves the child's session (so no kill of its process group
# reaches it), waits for the parent's summary, stops the parent, rewrites every outcome and resumes it.
DETACHED = """
import json, os, pathlib, signal, time
parent = os.getppid()
if os.fork() == 0:
    os.setsid()
    os.closerange(0, 1024)
    out = pathlib.Path("../out/replay.json")
    for _ in range(20000):
        if out.exists():
            os.kill(parent, signal.SIGSTOP)
            data = json.loads(out.read_text())
            for p in data["properties"]:
                p.update(outcome="pass", observations=[], detail="", failures=0, first_failure=0)
            out.write_text(json.dumps(data))
            pathlib.Path("../rewrote").write_text("")
            os.kill(parent, signal.SIGCONT)
            break
        time.sleep(0.001)
    os._exit(0)
def amount(record):
    return record["amount"]
"""


@pytest.mark.parametrize("product", [LINGERING, DETACHED], ids=["in-the-group", "setsid"])
def test_a_grandchild_is_dead_before_any_output_is_written(tmp_path: Path, product: str) -> None:
    world = sandbox(tmp_path, POSITIVE, product)
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.failures) == ("fail", 1)
    time.sleep(1)  # long enough for a surviving grandchild to have done it
    assert not (tmp_path / "rewrote").exists()
    assert json.loads((tmp_path / "out" / "replay.json").read_text())["properties"][0]["outcome"] == "fail"
    assert all(path.read_bytes() != b"forged" for path in (tmp_path / "out" / "observations").iterdir())


def test_the_child_cannot_rewrite_the_world_the_parent_streams(tmp_path: Path) -> None:
    """The product, at import, rewrites the world (same lines, record 7 now positive) before the second
    property's records are read: the parent streams the bytes it hashed before the child started."""
    world = sandbox(
        tmp_path,
        POSITIVE + "\ndef small(record, product):\n    return True\n",
        """
        import json, pathlib
        pathlib.Path("../world/payments.jsonl").write_text("".join(
            json.dumps({"id": i, "amount": i}) + "\\n" for i in range(1, 21)))
        def amount(record):
            return record["amount"]
    """,
    )
    digest = world_sha256(world)
    result = replay.run(
        sample(Catalog((prop("a_small", "small"), prop("positive"))), 1, 2),
        world,
        tmp_path / "out",
        suite="suite",
        epoch_id="e1",
        child=replay.Child(tmp_path / "sandbox", ("split_app",), oracle_names=(ORACLE,)),
    )
    assert world_sha256(world) != digest  # it was rewritten, and the replay still read the world it hashed
    assert result.world_sha256 == digest
    outcomes = {p.name: p for p in result.properties}
    assert (outcomes["positive"].outcome, outcomes["positive"].first_failure) == ("fail", 7)


def test_files_the_child_planted_in_the_output_folder_are_not_evidence(tmp_path: Path) -> None:
    world = sandbox(
        tmp_path,
        POSITIVE,
        """
        import pathlib
        planted = pathlib.Path("../out/observations")
        planted.mkdir(parents=True, exist_ok=True)
        (planted / "positive-000000000000000000000000.json").write_text("{}")
        (planted.parent / "extra.txt").write_text("planted")
        def amount(record):
            return record["amount"]
        """,
    )
    assert replayed(world, prop("positive"))["positive"].outcome == "fail"
    out = tmp_path / "out"
    assert not (out / "extra.txt").exists()
    assert not (out / "observations" / "positive-000000000000000000000000.json").exists()


def test_a_field_that_is_not_data_is_left_out_and_the_rest_of_the_answer_crosses(tmp_path: Path) -> None:
    """An answer's field that is not data (a cycle here) is left out of it, and one that reads only the rest
    is judged on it; a predicate that reads the field left out (or a property) reads it from the product's
    object, as production does: the cycle's `me` is the answer itself, and a property that raises is the
    product's failure."""
    world = sandbox(
        tmp_path,
        """
        def exact(record, product):
            found = product.split_app.amount(record)
            if record["id"] == 15:
                return found.me.value == 15
            return found.value == record["amount"] and found.double == 2 * record["amount"]
    """,
        """
        class Amount:
            def __init__(self, value):
                self.value = value
                if value % 3 == 0:
                    self.me = self  # a cycle
            @property
            def double(self):
                if self.value == 4:
                    raise ArithmeticError("four")
                return 2 * self.value
        def amount(record):
            return Amount(record["amount"])
    """,
        records=40,
    )
    outcome = replayed(world, prop("exact", "exact"))["exact"]
    # Record 4's property raises; record 15 reads the field that closes a cycle, which holds; the other
    # records that hold one (3, 6, 9, ...) hold; record 7 (negative) too.
    assert (outcome.outcome, outcome.failures, outcome.first_failure) == ("fail", 1, 4), outcome
    assert outcome.detail == "the product raised ArithmeticError: four"


def test_each_answer_is_the_value_as_its_call_returned_it(tmp_path: Path) -> None:
    """A product that hands back one object and changes it on the next call is read as it was when its
    call returned, not as the batch left it."""
    world = sandbox(
        tmp_path,
        """
        def echoed(record, product):
            return product.split_app.latest(record).id == record["id"]
    """,
        """
        class Latest:
            id = None
        _LATEST = Latest()
        def latest(record):
            _LATEST.id = record["id"]
            return _LATEST
    """,
    )
    outcome = replayed(world, prop("echoed", "echoed"))["echoed"]
    assert (outcome.outcome, outcome.records) == ("pass", 20), outcome


def test_an_answer_of_an_unknown_kind_is_the_childs_broken_protocol(tmp_path: Path) -> None:
    """A kind that is an object (which the parent's parser makes a product value) is refused by its type,
    never compared: the property is `runner-protocol`, and the runner still writes its summary."""
    world = sandbox(
        tmp_path,
        POSITIVE,
        """
        from epoch_gate.runner.product import child
        child.Server.answer = lambda self, scope, line: "[{}]"
        def amount(record):
            return record["amount"]
    """,
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "runner-protocol"), outcome.detail
    assert outcome.detail == "the child broke the protocol: an answer of an unknown kind"


def test_a_deeply_nested_answer_is_read_without_recursion(tmp_path: Path) -> None:
    world = sandbox(
        tmp_path,
        """
        def positive(record, product):
            deep = product.split_app.deep(record)
            for _ in range(380):
                (deep,) = deep
            return deep == [] and product.split_app.amount(record) >= 0
    """,
        """
        def deep(record):
            value = []
            for _ in range(380):
                value = [value]
            return value
        def amount(record):
            return record["amount"]
    """,
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.failures, outcome.first_failure) == ("fail", 1, 7), outcome.detail


def test_a_property_that_raises_never_changes_what_the_answer_is(tmp_path: Path) -> None:
    """Whether a batch's answers carry their own properties (the first batches do, later ones only those
    read) must not change a verdict: a property that raises, or is not data, simply does not cross."""
    world = sandbox(
        tmp_path,
        """
        def positive(record, product):
            t = product.split_app.Totals(record["amount"])
            if record["id"] == 30:
                return product.split_app.refused(t.broken)
            return t.minor >= 0
    """,
        """
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class Totals:
            minor: int
            @property
            def broken(self):
                raise LookupError("never")
            @property
            def stamp(self):
                return object()
        def refused(value):
            return False
    """,
        records=40,
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.failures, outcome.first_failure) == ("fail", 2, 7), outcome.detail


def test_a_predicate_whose_message_holds_a_product_value_is_the_oracles_error(tmp_path: Path) -> None:
    world = sandbox(
        tmp_path,
        """
        def positive(record, product):
            t = product.split_app.wrap(record)
            assert t.amount < 0, t
            return True
    """,
        BOX,
    )
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-error")
    assert outcome.detail.startswith(
        "record 1: the predicate raised AssertionError: (its message could not be shown: HandleMisused)"
    ), outcome.detail


@pytest.mark.parametrize("opens", [True, False], ids=["opening", "not-opening"])
@pytest.mark.parametrize(
    "first",
    [lambda line: b"\xef\xbb\xbf" + line, lambda line: line.decode().encode("utf-16-le")],
    ids=["byte-order-mark", "utf-16"],
)
def test_a_record_json_loads_reads_but_the_child_would_not_is_encoded_for_it(
    tmp_path: Path, opens: bool, first: Callable[[bytes], bytes]
) -> None:
    """json.loads reads a record with a byte order mark, or in UTF-16; the child, which parses its calls as
    UTF-8, would not: such a record crosses encoded, whatever the predicate's shape."""
    call = "product.split_app.amount(record)" if opens else "product.split_app.amount(dict(record))"
    world = sandbox(
        tmp_path,
        f"def positive(record, product):\n    return {call} >= 0\n",
        "def amount(record):\n    return abs(record['amount'])\n",
    )
    lines = [json.dumps({"id": i, "amount": i}).encode() for i in range(1, 21)]
    (world / "payments.jsonl").write_bytes(b"\n".join([first(lines[0]), *lines[1:]]) + b"\n")
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.records) == ("pass", 20), outcome.detail


def test_a_record_holding_the_protocols_reference_key_is_refused_in_every_batch(tmp_path: Path) -> None:
    """The child reads an object whose only key is "\\u0000ref" as a product value it holds: a record holding
    one would mean another answer, depending on its batch. The call is refused, naming the key."""
    world = sandbox(
        tmp_path,
        "def echoed(record, product):\n    return product.split_app.echo(record) == record.get('x')\n",
        "def echo(record):\n    return record.get('x')\n",
    )
    lines = [json.dumps({"id": i, "amount": i}) for i in range(1, 21)]
    lines[16] = json.dumps({"id": 17, "x": {"\u0000ref": [1, 0, []]}})  # a later batch of the same child
    (world / "payments.jsonl").write_text("\n".join(lines) + "\n")
    outcome = replayed(world, prop("echoed", "echoed"))["echoed"]
    assert (outcome.outcome, outcome.error_code) == ("error", "predicate-error")
    assert outcome.detail == (
        'record 17: an argument of split_app.echo is not data: it holds the key "\\u0000ref", which the '
        "protocol keeps for a product value"
    )


def test_each_property_of_an_answer_is_read_once(tmp_path: Path) -> None:
    """A property with a side effect beside one that raises: each is read once whether the answer carries
    its properties or a record asks for them, so identical records (lines 3 and 50) get one verdict."""
    world = sandbox(
        tmp_path,
        """
        def positive(record, product):
            t = product.split_app.ticket(record)
            return t.serial == 1 if record["amount"] == 1000 else True
    """,
        """
        from dataclasses import dataclass
        @dataclass
        class Ticket:
            minor: int
            _issued: int = 0
            @property
            def serial(self):
                self._issued += 1
                return self._issued
            @property
            def broken(self):
                raise LookupError("never")
        def ticket(record):
            return Ticket(record["amount"])
    """,
        records=56,
    )
    lines = [json.dumps({"id": i, "amount": i}) for i in range(1, 57)]
    lines[2] = lines[49] = json.dumps({"id": 0, "amount": 1000})
    (world / "payments.jsonl").write_text("\n".join(lines) + "\n")
    outcome = replayed(world, prop("positive"))["positive"]
    assert (outcome.outcome, outcome.records) == ("pass", 56), outcome.detail


@pytest.mark.parametrize(
    "call, says",
    [
        (b'[{"m":"json.dumps"},[1],{}', "a call that is not JSON"),
        (b'[{"m":"json.dumps"},[1]]', "a malformed call"),
        (b'[{"h":[1,0]},[],{}]', "no value 0 in scope 1"),
        (b'[{"a":[1,0]},[],{}]', "a malformed target"),
        (b'[{"a":[1,0,"x"]},[1],{}]', "no value 0 in scope 1"),
        (b'[{"z":1},[],{}]', "an unknown target 'z'"),
        (b'[{"m":"json.dumps"},[{"\\u0000ref":[0,0]}],{}]', "no value 0 in scope 0"),
    ],
)
def test_a_call_the_child_cannot_read_is_the_oracles_not_the_products(call: bytes, says: str) -> None:
    assert json.loads(Server().answer(1, call)) == ["u", says]


def test_the_child_drops_every_value_of_a_scope_once_the_next_begins() -> None:
    server = Server()
    made = b'[{"m":"types.SimpleNamespace"},[],{"a":1}]'
    assert json.loads(server.answer(1, made)) == ["v", "SimpleNamespace", {"\u0000h": 0, "a": 1}]
    assert json.loads(server.answer(1, b'[{"a":[1,0,"a"]},[],{}]')) == ["v", "int", 1]
    assert json.loads(server.answer(2, b'[{"a":[1,0,"a"]},[],{}]')) == [
        "u",
        "no value 0 in scope 1",
    ]


WATCHED = """
class Watching:  # an attribute lookup of its own: reading a field of it may run product code
    def __init__(self):
        self.a = 1

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)
"""


def test_a_field_is_read_again_by_name_and_only_a_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`{"r": [scope, handle, name]}` reads one field of a value the child keeps, by attribute access; a
    name its fields do not hold (a method, a property) is not such a read. A read that may run product code
    (a class with an attribute lookup of its own) is answered "w": the judge holds nothing else as it was."""
    (tmp_path / "watched_app.py").write_text(WATCHED)
    monkeypatch.syspath_prepend(str(tmp_path))
    server = Server()
    plain = b'[{"m":"argparse.Namespace"},[],{"a":1}]'
    assert json.loads(server.answer(1, plain)) == ["v", "Namespace", {"\u0000h": 0, "a": 1}]
    assert json.loads(server.answer(1, b'[{"r":[1,0,"a"]},[],{}]')) == ["v", "int", 1]
    assert json.loads(server.answer(1, b'[{"r":[1,0,"__class__"]},[],{}]')) == [
        "u",
        "__class__ is not a field of the Namespace",
    ]
    watched = b'[{"m":"watched_app.Watching"},[],{}]'
    assert json.loads(server.answer(1, watched)) == ["v", "Watching", {"\u0000h": 1, "a": 1}]
    assert json.loads(server.answer(1, b'[{"r":[1,1,"a"]},[],{}]')) == ["w", "int", 1]
    assert json.loads(server.answer(1, b'[{"r":[1,1]},[],{}]')) == ["w", "Watching", {"\u0000h": 2, "a": 1}]
