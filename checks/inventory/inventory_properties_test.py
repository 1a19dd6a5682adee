from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from checks.inventory import inventory_properties as props
from epoch_gate.local_product import holds
from inventory import ledger, stock, transfer

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "fixtures" / "inventory" / "generate_inventory.py"
BASE = ROOT / "fixtures" / "inventory" / "base.json"
CATALOG = ROOT / "checks" / "inventory" / "catalog.yaml"
BOUNDS = ("items", "transfers")
ENTRY = re.compile(r"^  - name: (?P<name>.+)\n    bound: (?P<bound>.+)\n    predicate: (?P<predicate>.+)\n"
                   r"    description: (?P<description>.+)\n", re.M)
Record = dict[str, Any]


def generate(out: Path, base: Path = BASE.relative_to(ROOT)) -> subprocess.CompletedProcess[bytes]:
    # A relative --input from the repo root, as the gate runs it; nothing host-specific may leak out.
    return subprocess.run([sys.executable, str(GENERATOR.relative_to(ROOT)), "--input", str(base), "--out", str(out)],
                          cwd=ROOT, capture_output=True)


def catalog_entries() -> list[dict[str, str]]:
    """The catalog in its fixed shape, read without PyYAML (the test must run on the stdlib alone)."""
    text = CATALOG.read_text("utf-8")
    entries = [m.groupdict() for m in ENTRY.finditer(text)]
    assert text.startswith("properties:\n") and text.count("  - ") == len(entries), "catalog shape drifted"
    return entries


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("world")
    assert generate(out).returncode == 0
    return out


@pytest.fixture(scope="module")
def records(world: Path) -> dict[str, list[Record]]:
    return {b: [json.loads(line) for line in (world / f"{b}.jsonl").read_text("utf-8").splitlines()] for b in BOUNDS}


def test_catalog_entries_are_well_formed() -> None:
    entries = catalog_entries()
    names = [e["name"] for e in entries]
    assert len(set(names)) == len(names) and {e["bound"] for e in entries} == set(BOUNDS)
    for entry in entries:
        assert entry["predicate"] == f"checks.inventory.inventory_properties:{entry['name']}"
        assert entry["description"].endswith(".") and ": " not in entry["description"]
    public = {n for n, f in vars(props).items() if callable(f) and not n.startswith("_")
              and getattr(f, "__module__", "") == props.__name__}
    assert public == set(names), "every predicate is catalogued and every entry has a predicate"


@pytest.mark.parametrize("entry", catalog_entries(), ids=lambda e: e["name"])
def test_property_holds_on_every_record(entry: dict[str, str], records: dict[str, list[Record]]) -> None:
    predicate = getattr(props, entry["name"])
    verdicts = {record["id"]: holds(predicate, json.loads(json.dumps(record))) for record in records[entry["bound"]]}
    assert all(type(v) is bool for v in verdicts.values())
    assert all(verdicts.values()), [i for i, v in verdicts.items() if not v][:5]


def test_generator_is_deterministic_and_host_free(world: Path, tmp_path: Path) -> None:
    other = tmp_path / "again"
    assert generate(other).returncode == 0
    assert sorted(p.name for p in world.iterdir()) == sorted(f"{b}.jsonl" for b in BOUNDS)
    for bound in BOUNDS:
        data = (world / f"{bound}.jsonl").read_bytes()
        assert data == (other / f"{bound}.jsonl").read_bytes()
        assert str(ROOT).encode() not in data and str(tmp_path).encode() not in data and b"." not in data


def test_world_covers_the_edge_cases(records: dict[str, list[Record]]) -> None:
    refusals = {r.error for record in records["items"] for r in ledger.ledger_from_record(record).refusals}
    assert refusals == {"InsufficientStockError", "OverReleaseError", "OverShipError", "InvalidQuantityError"}
    assert {r["case"] for r in records["items"]} == {"steady", "boundaries", "over_reserve", "over_release",
                                                      "invalid_quantities", "empty_shelf", "random"}
    assert {r["case"] for r in records["transfers"]} == {"within_available", "exact_available", "beyond_available",
                                                          "reserved_blocks", "sku_mismatch", "invalid_quantity"}


def test_generator_refuses_a_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "base.json"
    bad.write_text(json.dumps({**json.loads(BASE.read_text()), "skus": 0}))
    done = generate(tmp_path / "out", bad)
    assert done.returncode == 1 and b"skus must be an integer" in done.stderr


# --- each predicate can fail: broken product functions, monkeypatched in --------------------------------


def _fails(name: str, records: dict[str, list[Record]]) -> bool:
    predicate = getattr(props, name)
    bound = next(e["bound"] for e in catalog_entries() if e["name"] == name)
    return not all(holds(predicate, record) for record in records[bound])


def test_item_predicates_catch_loose_guards(monkeypatch: pytest.MonkeyPatch, records: dict[str, list[Record]]) -> None:
    real_reserve = stock.reserve

    def loose_reserve(s: stock.Stock, quantity: int) -> stock.Stock:  # one unit past what is available
        if 0 < quantity <= s.available + 1:
            return replace(s, reserved=s.reserved + quantity)
        return real_reserve(s, quantity)

    monkeypatch.setitem(ledger.OPERATIONS, "reserve", loose_reserve)
    monkeypatch.setattr(stock, "reserve", loose_reserve)
    assert _fails("reserve_never_exceeds_available", records)
    assert _fails("ledger_accepts_exactly_the_valid_operations", records)
    monkeypatch.undo()

    monkeypatch.setattr(stock, "release", lambda s, quantity: replace(s, reserved=max(0, s.reserved - quantity)))
    assert _fails("release_never_exceeds_reserved", records)
    monkeypatch.undo()

    monkeypatch.setattr(stock, "positive_quantity", lambda quantity, what: quantity)
    assert _fails("invalid_quantities_refused", records)


def test_ledger_predicates_catch_a_wrong_balance(monkeypatch: pytest.MonkeyPatch,
                                                 records: dict[str, list[Record]]) -> None:
    monkeypatch.setitem(ledger.OPERATIONS, "ship", lambda s, quantity: stock.release(s, quantity))  # nothing leaves
    assert _fails("ledger_replays_to_balance", records)
    assert _fails("ledger_accepts_exactly_the_valid_operations", records)
    monkeypatch.undo()

    real_post = ledger.post

    def stale_release(book: ledger.Ledger, entry: ledger.Entry, index: int) -> ledger.Ledger:  # entry, no movement
        posted = real_post(book, entry, index)
        return replace(posted, balance=book.balance) if entry.op == "release" else posted

    monkeypatch.setattr(ledger, "post", stale_release)
    assert _fails("ledger_replays_to_balance", records)


def test_transfer_predicates_catch_broken_transfers(monkeypatch: pytest.MonkeyPatch,
                                                    records: dict[str, list[Record]]) -> None:
    real = transfer.transfer
    Pair = tuple[stock.Stock, stock.Stock]

    def from_reserved(source: stock.Stock, destination: stock.Stock, quantity: int) -> Pair:  # moves held units
        moved, arrived = real(replace(source, reserved=0), destination, quantity)
        return replace(moved, reserved=source.reserved), arrived

    def leaky(source: stock.Stock, destination: stock.Stock, quantity: int) -> Pair:  # loses a unit on the way
        moved, arrived = real(source, destination, quantity)
        return moved, replace(arrived, on_hand=arrived.on_hand - 1)

    monkeypatch.setattr(transfer, "transfer", from_reserved)
    assert _fails("transfer_moves_only_available", records)
    monkeypatch.setattr(transfer, "transfer", leaky)
    assert _fails("transfer_conserves_stock", records)
