from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.verify import check_replay
from epoch_gate.evidence.manifest import sample
from epoch_gate.evidence.observations import load_observations, observation_id
from epoch_gate.evidence.replay_result import ReplayResult
from epoch_gate.reasons import Code
from epoch_gate.runner import main
from epoch_gate.runner.judge.channel import FAULT, ChildFailed
from epoch_gate.runner.judge import parent as replay
from epoch_gate.evidence.world import load_world, world_sha256

PREDICATES = '''
def positive(record, product):
    return product.replay_app.amount(record) >= 0

def flaky(record, product):
    return product.replay_app.flaky_amount(record) >= 0

def product_raises(record, product):
    return product.replay_app.boom(record)

def oracle_raises(record, product):
    raise KeyError("boom")

def not_bool(record, product):
    return None

def configured(record, product):
    return product.replay_app.configured_amount(record) == record["amount"]

def vanishes(record, product):
    return product.replay_app.vanish(record)

def is_killed(record, product):
    return product.replay_app.killed(record)
'''

PRODUCT = '''
SEEN = set()

def amount(record):
    return record["amount"]

def flaky_amount(record):
    # Wrong the first time it sees a record, right when asked again: a flake.
    if record["id"] in SEEN:
        return abs(record["amount"])
    SEEN.add(record["id"])
    return record["amount"]

def boom(record):
    if record["amount"] < 0:
        raise KeyError("boom")
    return True

SET_UP = []

def set_up():  # as a framework's: Django's settings, django.setup() and its tables
    SET_UP.append(True)

def configured_amount(record):
    if SET_UP != [True]:
        raise LookupError(f"the app is set up {len(SET_UP)} times")
    return record["amount"]

def set_up_badly():
    raise LookupError("no settings module")

def set_up_and_exit():
    raise SystemExit(3)

def set_up_and_vanish():
    import os
    os._exit(0)

def vanish(record):
    import os
    os._exit(0)

def killed(record):  # as a signal from outside would: the host's OOM killer, an operator
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)
'''


@pytest.fixture
def world(tmp_path: Path) -> Path:
    (tmp_path / "preds").mkdir()
    (tmp_path / "preds" / "replay_preds.py").write_text(PREDICATES)
    (tmp_path / "preds" / "replay_app.py").write_text(PRODUCT)
    world = tmp_path / "world"
    world.mkdir()
    lines = [json.dumps({"id": i, "amount": -5 if i == 3 else i}, separators=(",", ":")) for i in range(10)]
    (world / "payments.jsonl").write_text("\n".join(lines) + "\n")
    return world


def run(world: Path, out: Path, *names: str, product_setup: str = "") -> ReplayResult:
    props = tuple(Property(n, "payments", f"replay_preds:{n}", f"{n}.") for n in names)
    manifest = sample(Catalog(props), 1, len(props))
    return replay.run(
        manifest, world, out, suite="suite", epoch_id="e1", child=child(world), product_setup=product_setup
    )


def child(world: Path) -> replay.Child:
    """The sandbox beside the world: the predicates (the oracle) and the product, `replay_app`."""
    return replay.Child(
        world.parent / "preds", ("replay_app",), oracle_names=("replay_preds", "mask_preds"), children=2
    )


def test_pass_fail_flake_error(world: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(world, out, "positive", "flaky", "product_raises", "oracle_raises", "not_bool")
    outcomes = {p.name: (p.outcome, p.error_code) for p in result.properties}
    assert outcomes == {
        "positive": ("fail", ""),
        "flaky": ("flake", ""),
        "product_raises": ("fail", ""),
        "oracle_raises": ("error", "predicate-error"),
        "not_bool": ("error", "predicate-error"),
    }
    observations, reasons = load_observations(out / "observations", "obs", "replay")
    assert reasons == []
    by_prop = {o.property: o for o in observations}
    witness = (out / "observations" / f"{by_prop['positive'].id}.bin").read_bytes()
    assert json.loads(witness) == {"id": 3, "amount": -5}  # exactly the offending record
    assert by_prop["positive"].id == observation_id("suite", "positive", witness)
    assert by_prop["flaky"].status == "flake" and by_prop["flaky"].rerun_passed
    # The product's failure is the record's, with the product's own frames; the oracle's is an error.
    assert by_prop["product_raises"].detail.startswith("the product raised KeyError: 'boom'\n")
    assert 'replay_app.py", line 16, in boom' in by_prop["product_raises"].detail
    assert set(by_prop) == {"positive", "flaky", "product_raises"}
    errors = {p.name: p.detail for p in result.properties if p.outcome == "error"}
    assert errors == {
        "oracle_raises": "record 1: the predicate raised KeyError: 'boom' (at replay_preds.py:12)",
        "not_bool": "record 1: the predicate returned a NoneType, not a bool",
    }


def test_summary_round_trips_through_check_replay(world: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(world, out, "positive")
    files = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    evidence = check_replay(files, "replay")
    assert evidence.reasons == () and evidence.result is not None
    assert [o.property for o in evidence.observations] == ["positive"]


def test_missing_bound_and_missing_predicate_are_errors(world: Path, tmp_path: Path) -> None:
    props = (
        Property("a", "orders", "replay_preds:positive", "a."),
        Property("b", "payments", "replay_preds:absent", "b."),
    )
    result = replay.run(
        sample(Catalog(props), 1, 2), world, tmp_path / "o", suite="suite", epoch_id="e1", child=child(world)
    )
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
        "def masked(record, product):\n" "    return product.replay_app.masked(record)\n"
    )
    (tmp_path / "preds" / "replay_app.py").write_text(
        "SEEN = set()\n"
        "def masked(record):\n"
        "    if record['id'] == 1 and record['id'] not in SEEN:\n"
        "        SEEN.add(record['id'])\n"
        "        return False\n"
        "    return record['id'] not in (5, 8)\n"
    )
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_text("".join(f'{{"id":{i}}}\n' for i in range(10)))
    props = (Property("masked", "payments", "mask_preds:masked", "m."),)
    result = replay.run(
        sample(Catalog(props), 1, 1),
        world,
        tmp_path / "out",
        suite="suite",
        epoch_id="e1",
        child=child(world),
        max_witnesses=1,
    )
    (outcome,) = result.properties
    assert (outcome.outcome, outcome.records, outcome.failures) == ("fail", 10, 2)
    observations, _ = load_observations(tmp_path / "out" / "observations", "obs", "replay")
    assert sorted((o.status, o.line) for o in observations) == [("fail", 6), ("flake", 2)]
    assert set(outcome.observation_ids) == {o.id for o in observations}
    assert result.world_sha256 == world_sha256(world)


def test_a_record_that_is_not_json_is_the_oracles_malformed_artifact(tmp_path: Path) -> None:
    world = tmp_path / "world"
    world.mkdir()
    (world / "payments.jsonl").write_bytes(b'{"id":1,"amount":1}\n {"id":2,"amount":2} \n[1\n')
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / "replay_checks.py").write_text(PREDICATES)
    (tmp_path / "sandbox" / "replay_app.py").write_text(PRODUCT)
    child = replay.Child(tmp_path / "sandbox", ("replay_app",), oracle_names=("replay_checks",))
    manifest = sample(Catalog((Property("positive", "payments", "replay_checks:positive", "p."),)), 1, 1)
    (outcome,) = replay.run(manifest, world, tmp_path / "out", suite="s", epoch_id="e", child=child).properties
    assert (outcome.outcome, outcome.error_code) == ("error", "artifact-malformed")
    assert outcome.detail.startswith("record 3: the record is not JSON: Expecting ',' delimiter"), outcome.detail


def test_the_products_set_up_runs_once_in_the_child_before_any_property(world: Path, tmp_path: Path) -> None:
    (unset,) = run(world, tmp_path / "unset", "configured").properties
    assert (unset.outcome, unset.failures) == ("fail", 10)  # the product raised on every record: its failure
    (set_up,) = run(world, tmp_path / "set", "configured", product_setup="replay_app:set_up").properties
    assert (set_up.outcome, set_up.failures, set_up.detail) == ("pass", 0, "")


@pytest.mark.parametrize(
    "setup, code, found",
    [
        (
            "replay_app:set_up_badly",
            Code.REPLAY_FAILED,
            "the product's set-up replay_app:set_up_badly raised LookupError: no settings module\n",
        ),
        (
            "replay_app:set_up_and_exit",
            Code.REPLAY_FAILED,
            "the product's set-up replay_app:set_up_and_exit raised SystemExit: 3\n",
        ),
        (
            "replay_app:missing",
            Code.REPLAY_FAILED,
            "the product's set-up replay_app:missing does not resolve: replay_app has no missing",
        ),
        (  # the oracle's names are not importable in the child: its code never runs there
            "replay_preds:configured",
            Code.REPLAY_FAILED,
            "the product's set-up replay_preds:configured does not resolve: no product module named replay_preds",
        ),
        ("replay_app:set_up_and_vanish", Code.RUNNER_PROTOCOL, "the child ended early (exit 0)"),
    ],
)
def test_a_set_up_that_fails_fails_the_replay_naming_it(
    world: Path, tmp_path: Path, setup: str, code: Code, found: str
) -> None:
    with pytest.raises(ChildFailed) as failed:
        run(world, tmp_path / "out", "configured", product_setup=setup)
    assert failed.value.code is code and failed.value.detail.startswith(found), failed.value.detail
    assert not (tmp_path / "out").exists()  # nothing judged, nothing written


@pytest.mark.parametrize("setup", ["shop.replay", "shop.replay:", ":set_up", "shop/replay:set_up", ""])
def test_the_runner_refuses_a_set_up_that_is_not_module_function(setup: str, capsys: pytest.CaptureFixture) -> None:
    required = ["replay", "--manifest=m", "--world=w", "--suite=s", "--epoch-id=e", "--out=o"]
    with pytest.raises(SystemExit) as ended:
        main.main([*required, f"--product-setup={setup}"])
    assert ended.value.code == main.EX_USAGE
    assert f"argument --product-setup: {setup!r} is not module:function" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "status"), [("positive", 0), ("product_raises", 0), ("vanishes", 0), ("is_killed", 3)]
)
def test_a_replay_whose_child_was_killed_for_no_named_cause_exits_3_so_that_it_is_never_cached(
    world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, status: int
) -> None:
    """A verdict (pass, fail, the product's own exit) exits 0 and Pants may cache it; a child killed by a
    signal no limit explains (the host's OOM killer, an operator) is a fault of the run, written as
    evidence all the same and said so, but never cached."""
    manifest = sample(Catalog((Property(name, "payments", f"replay_preds:{name}", "p."),)), 1, 1)
    (tmp_path / "manifest.json").write_bytes(manifest.to_bytes())
    out = tmp_path / "out"
    monkeypatch.chdir(world.parent / "preds")
    argv = ["replay", f"--manifest={tmp_path / 'manifest.json'}", f"--world={world}", "--suite=s", "--epoch-id=e1"]
    argv += [f"--out={out}", "--sandbox-names=replay_app,replay_preds", "--oracle-names=replay_preds"]
    assert main.main(argv) == status == main.EXIT_FAULT * (name == "is_killed")
    result = check_replay({p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}, "s").result
    assert result is not None and result.properties[0].detail.endswith(FAULT) == (name == "is_killed")


class _Ending:
    """A child whose replay ended: the first to fail says why, after a while; the other meets the end at
    once, in the words every later question gets."""

    def __init__(self, first: ChildFailed, raised: ChildFailed, delay: float) -> None:
        self.first, self.raised, self.delay, self.cpu, self.scopes = first, raised, delay, None, 0

    def check(self) -> None:
        pass

    def cause(self) -> ChildFailed:
        return self.first

    def take_scope(self) -> int:
        self.scopes += 1
        return self.scopes

    def ask(self, scope: int, call: bytes) -> bytes:
        time.sleep(self.delay)
        raise self.raised


def test_a_failed_child_is_named_as_it_failed_whichever_childs_thread_reports_first(tmp_path: Path) -> None:
    """Two children: the one that broke the protocol reports last, the other (which met the end it caused)
    first; the property's error says what happened, not what the other child was told after it."""
    first = ChildFailed(Code.RUNNER_PROTOCOL, "the child broke the protocol: an answer of an unknown kind")
    later = ChildFailed(Code.RUNNER_PROTOCOL, f"not evaluated: the replay's child failed earlier: {first.detail}")
    (tmp_path / "orders.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(4)))
    prop = Property("positive", "orders", "replay_checks:positive", "positive.")
    channels = [_Ending(first, first, 0.2), _Ending(first, later, 0.0)]
    outcome, observed = replay.replay_property(
        channels, prop, lambda record, product: product.a.b(record), load_world(tmp_path), "s", "e", 1  # type: ignore[arg-type]
    )
    assert (outcome.outcome, outcome.error_code, outcome.detail, observed) == (
        "error",
        "runner-protocol",
        first.detail,
        [],
    )
