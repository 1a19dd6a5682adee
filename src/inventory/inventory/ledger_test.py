from __future__ import annotations

import pytest

from inventory.ledger import Entry, InvalidEntryError, Refusal, ledger_from_record, replay
from inventory.stock import Stock


def _record(*operations: tuple[str, int], on_hand: int = 5) -> dict:
    return {"id": "item_1", "sku": "SKU-1", "opening_on_hand": on_hand,
            "operations": [{"op": op, "quantity": quantity} for op, quantity in operations]}


def test_accepted_entries_replay_to_the_balance() -> None:
    ledger = ledger_from_record(_record(("reserve", 4), ("receive", 2), ("ship", 3), ("release", 1)))
    assert ledger.balance == Stock("SKU-1", 4, 0)
    assert replay(ledger.opening, ledger.entries) == ledger.balance
    assert ledger.refusals == ()


def test_refused_entries_are_recorded_and_move_nothing() -> None:
    ledger = ledger_from_record(_record(("reserve", 6), ("reserve", 5), ("release", 6), ("ship", 0), ("ship", 5)))
    assert ledger.entries == (Entry("reserve", 5), Entry("ship", 5))
    assert ledger.refusals == (Refusal(0, Entry("reserve", 6), "InsufficientStockError"),
                               Refusal(2, Entry("release", 6), "OverReleaseError"),
                               Refusal(3, Entry("ship", 0), "InvalidQuantityError"))
    assert ledger.balance == Stock("SKU-1", 0, 0)


@pytest.mark.parametrize("record", [
    _record(("restock", 1)),
    {"sku": "SKU-1", "opening_on_hand": 1, "operations": [{"op": "receive"}]},
    {"sku": "SKU-1", "operations": []},
])
def test_malformed_records_are_refused(record: dict) -> None:
    with pytest.raises(InvalidEntryError):
        ledger_from_record(record)
