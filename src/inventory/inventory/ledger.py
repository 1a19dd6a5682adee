"""The stock ledger: every accepted movement in order, so replaying it from the opening stock gives the balance."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import reduce
from typing import Any, Callable, Iterable, Mapping

from inventory.stock import Stock, StockError, opening, receive, release, reserve, ship

OPERATIONS: Mapping[str, Callable[[Stock, int], Stock]] = {
    "receive": receive, "reserve": reserve, "release": release, "ship": ship}
ENTRY_FIELDS = frozenset({"op", "quantity"})


class InvalidEntryError(ValueError):
    """A movement that is not one of the ledger's operations: bad data, not a refusal by the stock."""


@dataclass(frozen=True, slots=True)
class Entry:
    op: str
    quantity: int


@dataclass(frozen=True, slots=True)
class Refusal:
    index: int
    entry: Entry
    error: str  # the refusing StockError's class name


@dataclass(frozen=True, slots=True)
class Ledger:
    """`balance` is kept as movements are posted, so posting never replays the whole ledger."""

    opening: Stock
    balance: Stock
    entries: tuple[Entry, ...] = ()
    refusals: tuple[Refusal, ...] = ()


def apply(stock: Stock, entry: Entry) -> Stock:
    operation = OPERATIONS.get(entry.op)
    if operation is None:
        raise InvalidEntryError(f"unknown op {entry.op!r} ({', '.join(sorted(OPERATIONS))})")
    return operation(stock, entry.quantity)


def replay(start: Stock, entries: Iterable[Entry]) -> Stock:
    return reduce(apply, entries, start)


def start(stock: Stock) -> Ledger:
    return Ledger(stock, stock)


def post(ledger: Ledger, entry: Entry, index: int) -> Ledger:
    """Appends `entry` when the stock accepts it; a refused one is recorded and moves nothing."""
    try:
        balance = apply(ledger.balance, entry)
    except StockError as error:
        return replace(ledger, refusals=ledger.refusals + (Refusal(index, entry, type(error).__name__),))
    return replace(ledger, balance=balance, entries=ledger.entries + (entry,))


def entry_from_json(raw: Any, index: int) -> Entry:
    if not isinstance(raw, Mapping) or set(raw) != ENTRY_FIELDS:
        raise InvalidEntryError(f"operation {index} must be an object with exactly op and quantity")
    return Entry(raw["op"], raw["quantity"])


def ledger_from_record(record: Mapping[str, Any]) -> Ledger:
    """The ledger of an item record (sku, opening_on_hand, operations), posted in order."""
    for key in ("sku", "opening_on_hand", "operations"):
        if key not in record:
            raise InvalidEntryError(f"an item record needs {key}")
    ledger = start(opening(record["sku"], record["opening_on_hand"]))
    for index, raw in enumerate(record["operations"]):
        ledger = post(ledger, entry_from_json(raw, index), index)
    return ledger
