"""The engine's semantics, end to end through real children: a record's verdict is a function of the
record, the predicate and the answers to its calls, never of how the replay was scheduled.

The reference is the in-process judgement (`local_product`): each record judged once, in world order, by
a server in this process that keeps the product's state, record n served by server n mod children, and a
violated record judged again by its own server after the scan."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.manifest import sample
from epoch_gate.evidence.replay_result import PropertyOutcome
from epoch_gate.local_product import LocalChild
from epoch_gate.runner.judge import judging
from epoch_gate.runner.judge import parent as replay

BOOKINGS = """
from dataclasses import dataclass

BOOKED = set()


@dataclass(frozen=True)
class Booking:
    id: int
    status: str
    nights: int


def book(record):
    # an idempotency store: the second booking of an id is refused as a duplicate, as a database row is
    if record["id"] in BOOKED:
        return Booking(record["id"], "duplicate", 0)
    BOOKED.add(record["id"])
    return Booking(record["id"], "booked", record["nights"])
"""

BOOKED_ONCE = """
def booked_once(record, product):
    booking = product.bookings_app.book(record)
    # reads one more field only for records after the first 1,200
    return booking.status == "booked" and (record["n"] <= 1200 or booking.nights == record["nights"])
"""


def _sandbox(tmp_path: Path, product: str, predicates: str, oracle: str, app: str, lines: list[bytes]) -> Path:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir(exist_ok=True)
    (sandbox / f"{oracle}.py").write_text(textwrap.dedent(predicates))
    (sandbox / f"{app}.py").write_text(textwrap.dedent(product))
    world = tmp_path / "world"
    world.mkdir(exist_ok=True)
    (world / "records.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    sys.modules.pop(oracle, None)
    return world


def _replayed(world: Path, oracle: str, app: str, names: list[str], children: int, out: str) -> list[PropertyOutcome]:
    props = tuple(Property(name, "records", f"{oracle}:{name}", f"{name}.") for name in names)
    child = replay.Child(world.parent / "sandbox", (app,), oracle_names=(oracle,), children=children)
    manifest = sample(Catalog(props), 1, len(props))
    result = replay.run(manifest, world, world.parent / out, suite="s", epoch_id="e", child=child)
    return list(result.properties)


@pytest.mark.parametrize("children", [1, 2, 3])
def test_an_honest_product_that_books_each_id_once_passes_with_any_number_of_children(
    tmp_path: Path, children: int
) -> None:
    """Issue 43's booking product: with calls sent ahead or records run twice it was `fail`, by batch."""
    lines = [json.dumps({"id": n, "n": n, "nights": n % 7 + 1}).encode() for n in range(1, 3001)]
    world = _sandbox(tmp_path, BOOKINGS, BOOKED_ONCE, "bookings_checks", "bookings_app", lines)
    (outcome,) = _replayed(world, "bookings_checks", "bookings_app", ["booked_once"], children, "out")
    assert (outcome.outcome, outcome.records, outcome.failures) == ("pass", 3000, 0), outcome.detail


# --- the equivalence property -------------------------------------------------------------------------------

PRODUCT = """
from dataclasses import dataclass
from decimal import Decimal

SEEN = {}
COUNT = [0]


@dataclass(frozen=True)
class Line:
    sku: str
    qty: int

    def doubled(self):
        return Line(self.sku, 2 * self.qty)


@dataclass(frozen=True)
class Answer:
    id: int
    total: int
    lines: tuple
    note: object

    @property
    def label(self):
        return f"#{self.id}"


def answer(record):
    COUNT[0] += 1
    SEEN[record["id"]] = SEEN.get(record["id"], 0) + 1
    total = record["v"] + {STATE}
    if total % {BUG} == 0:
        raise ValueError("unlucky")
    lines = tuple(Line(f"s{i}", i * record["v"]) for i in range(record["v"] % 3))
    return Answer(record["id"], total, lines, {NOTE})


def price(record):
    return Decimal(record["v"]) / 4


def echo(value):
    return value
"""
STATES = {
    "none": "0",
    "per-id": "(SEEN[record['id']] - 1)",  # the same id a second time answers otherwise
    "per-process": "(1 if COUNT[0] % 5 == 0 else 0)",  # a flake once in five calls of a process
}
NOTES = ("None", "float('nan')", "{'k': [1, 2]}", "print")

PREDICATES = """
from epoch_gate.runner.api import plain, refused


def field(record, product):
    return product.equiv_app.answer(record).total >= record["v"]


def conditional(record, product):
    a = product.equiv_app.answer(record)
    return a.total == record["v"] if record["v"] % 2 else len(a.lines) == record["v"] % 3


def deep(record, product):
    a = product.equiv_app.answer(record)
    return all(line.doubled().qty == 2 * line.qty for line in a.lines)


def whole(record, product):
    a = product.equiv_app.answer(record)
    return plain(a)["id"] == record["id"] and a.label == f"#{record['id']}"


def note(record, product):
    return product.equiv_app.answer(record).note is None


def several(record, product):
    a = product.equiv_app.answer(record)
    b = product.equiv_app.answer(record)
    p = product.equiv_app.price(record)
    return a.total <= b.total + 1 and plain(product.equiv_app.echo(p)) == plain(p)


def refusal(record, product):
    return not refused(lambda: product.equiv_app.answer(record), "ValueError") or record["v"] % 2 == 0
"""
NAMES = ("field", "conditional", "deep", "whole", "note", "several", "refusal")


class _Reference:
    """The replay in this process: one server (and product module) a child, record n judged by server n mod
    children, each child's records in world order, its share stopping at the predicate's first error; then
    each violated record judged again by its own server. The servers keep the product's state across
    properties, as the children do."""

    def __init__(self, product: str, children: int) -> None:
        self.servers = []
        for _ in range(children):
            module = sys.modules["equiv_app"] = type(sys)("equiv_app")
            exec(compile(product, "equiv_app.py", "exec"), module.__dict__)
            self.servers.append((LocalChild(), module))
        self.scope = 0

    def _judge(self, predicate: Any, raw: bytes, index: int) -> judging.Judgement:
        child, module = self.servers[index % len(self.servers)]
        sys.modules["equiv_app"] = module  # what the server imports is its own child's module
        self.scope += 1
        return judging.judge(predicate, raw, child, self.scope)

    def outcome(self, predicate: Any, lines: list[bytes]) -> tuple[str, int, int]:
        """(outcome, failures, first failure)."""
        violated, errors = [], []
        for lane in range(len(self.servers)):
            for index in range(lane, len(lines), len(self.servers)):
                found = self._judge(predicate, lines[index], index)
                if found.error:
                    errors.append(index)
                    break
                if not found.holds:
                    violated.append(index)
        if errors:
            return "error", 0, 0
        failures = [i + 1 for i in sorted(violated) if not self._judge(predicate, lines[i], i).holds]
        return ("fail" if failures else "flake" if violated else "pass"), len(failures), min(failures, default=0)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    values=st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=12),
    repeat_ids=st.booleans(),
    state=st.sampled_from(sorted(STATES)),
    bug=st.integers(min_value=5, max_value=60),
    note=st.sampled_from(NOTES),
)
def test_verdicts_equal_the_in_process_reference_whatever_the_children(
    tmp_path_factory: pytest.TempPathFactory, values: list[int], repeat_ids: bool, state: str, bug: int, note: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("equiv")
    product = PRODUCT.replace("{STATE}", STATES[state]).replace("{BUG}", str(bug)).replace("{NOTE}", note)
    lines = [
        json.dumps({"id": n % 3 if repeat_ids else n, "v": v, "n": n}, separators=(",", ":")).encode()
        for n, v in enumerate(values)
    ]
    world = _sandbox(tmp_path, product, PREDICATES, "equiv_checks", "equiv_app", lines)
    by_children = {}
    for children in (1, 2):
        outcomes = _replayed(world, "equiv_checks", "equiv_app", list(NAMES), children, f"out{children}")
        by_children[children] = [(o.name, o.outcome, o.failures, o.first_failure) for o in outcomes]
    sys.path.insert(0, str(tmp_path / "sandbox"))
    try:
        sys.modules.pop("equiv_checks", None)
        predicates = importlib.import_module("equiv_checks")
        for children, found in by_children.items():
            reference = _Reference(product, children)
            expected = [(name, *reference.outcome(getattr(predicates, name), lines)) for name, *_ in found]
            assert found == expected, (children, state)
    finally:
        sys.path.remove(str(tmp_path / "sandbox"))
        for name in ("equiv_checks", "equiv_app"):
            sys.modules.pop(name, None)
    if state == "none" or (state == "per-id" and not repeat_ids):  # no state that another split would change
        assert by_children[1] == by_children[2]
