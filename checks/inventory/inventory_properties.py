"""Properties of the inventory service: predicates over one saved fixture record each (True = the law holds).

Each predicate is `predicate(record, product) -> bool`: it takes a record of its bound (items, transfers),
drives the product through `product` (`product.inventory.ledger.ledger_from_record(record)`), which runs the
product code in another process and answers with data, and returns a real bool. This module imports no
product code: it reads the answers' fields, or compares their whole data with `plain`, and never compares
or truth-tests a product value itself (`epoch_gate.runner.api`). Where a law can be recomputed without
the product code, it is: a small independent model of the stock walks the record's requests and decides
what must be accepted, so a predicate does not merely restate the code it checks. Refusals are probed too:
"never reserves more than is available" is checked by asking for one unit more than the final balance
allows and expecting a refusal (`refused`, by the exception's class name).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from epoch_gate.runner.api import Product, plain, refused

Record = Mapping[str, Any]
# The ledger's operations by name (inventory.ledger.OPERATIONS maps each to inventory.stock's function of
# the same name); the predicates ask the ledger's own mapping for each one.
OPERATIONS = ("receive", "reserve", "release", "ship")
REFUSED_BY = {"reserve": "InsufficientStockError", "release": "OverReleaseError", "ship": "OverShipError"}


def _expected_refusal(op: str, quantity: int, on_hand: int, reserved: int) -> Optional[str]:
    """The model: which error refuses this request, or None when the stock must accept it."""
    if quantity <= 0:
        return "InvalidQuantityError"
    limit = {"reserve": on_hand - reserved, "release": reserved, "ship": reserved}.get(op)
    return REFUSED_BY[op] if limit is not None and quantity > limit else None


def _model_walk(record: Record) -> tuple[list[int], list[tuple[int, str]], int, int]:
    """(accepted indexes, refused (index, error) pairs, on_hand, reserved) of the record, by the model."""
    on_hand, reserved = record["opening_on_hand"], 0
    accepted: list[int] = []
    refusals: list[tuple[int, str]] = []
    for index, operation in enumerate(record["operations"]):
        op, quantity = operation["op"], operation["quantity"]
        error = _expected_refusal(op, quantity, on_hand, reserved)
        if error:
            refusals.append((index, error))
            continue
        accepted.append(index)
        on_hand += {"receive": quantity, "ship": -quantity}.get(op, 0)
        reserved += {"reserve": quantity, "release": -quantity, "ship": -quantity}.get(op, 0)
    return accepted, refusals, on_hand, reserved


# --- items ------------------------------------------------------------------------------------------------


def reserve_never_exceeds_available(record: Record, product: Product) -> bool:
    book = product.inventory.ledger.ledger_from_record(record)
    on_hand, reserved = book.opening.on_hand, 0
    for entry in book.entries:
        if entry.op == "reserve" and entry.quantity > on_hand - reserved:
            return False
        on_hand += {"receive": entry.quantity, "ship": -entry.quantity}.get(entry.op, 0)
        reserved += {"reserve": entry.quantity, "release": -entry.quantity, "ship": -entry.quantity}.get(entry.op, 0)
        if not 0 <= reserved <= on_hand:
            return False
    final = book.balance
    everything = product.inventory.stock.reserve(final, final.available) if final.available else final  # all of it
    return everything.available == 0 and refused(lambda: product.inventory.stock.reserve(final, final.available + 1),
                                                 "InsufficientStockError")


def release_never_exceeds_reserved(record: Record, product: Product) -> bool:
    book = product.inventory.ledger.ledger_from_record(record)
    reserved = 0
    for entry in book.entries:
        if entry.op in ("release", "ship") and entry.quantity > reserved:
            return False
        reserved += {"reserve": entry.quantity, "release": -entry.quantity, "ship": -entry.quantity}.get(entry.op, 0)
    final = book.balance
    return (refused(lambda: product.inventory.stock.release(final, final.reserved + 1), "OverReleaseError")
            and refused(lambda: product.inventory.stock.ship(final, final.reserved + 1), "OverShipError"))


def ledger_replays_to_balance(record: Record, product: Product) -> bool:
    book = product.inventory.ledger.ledger_from_record(record)
    totals = {op: sum(e.quantity for e in book.entries if e.op == op) for op in OPERATIONS}
    closed_form = product.inventory.stock.Stock(record["sku"],
                                                record["opening_on_hand"] + totals["receive"] - totals["ship"],
                                                totals["reserve"] - totals["release"] - totals["ship"])
    replayed = product.inventory.ledger.replay(book.opening, book.entries)
    return plain(replayed) == plain(book.balance) == plain(closed_form)


def ledger_accepts_exactly_the_valid_operations(record: Record, product: Product) -> bool:
    book = product.inventory.ledger.ledger_from_record(record)
    accepted, refusals, on_hand, reserved = _model_walk(record)
    operations = record["operations"]
    return ([(e.op, e.quantity) for e in book.entries] == [(operations[i]["op"], operations[i]["quantity"])
                                                           for i in accepted]
            and [(r.index, r.error) for r in book.refusals] == refusals
            and (book.balance.on_hand, book.balance.reserved) == (on_hand, reserved))


def invalid_quantities_refused(record: Record, product: Product) -> bool:
    book = product.inventory.ledger.ledger_from_record(record)
    non_positive = [i for i, op in enumerate(record["operations"]) if op["quantity"] <= 0]
    refused_invalid = [r.index for r in book.refusals if r.error == "InvalidQuantityError"]
    final = book.balance
    operations = [product.inventory.ledger.OPERATIONS.get(name) for name in OPERATIONS]  # the ledger's own
    if any(operation is None for operation in operations):
        return False
    probes = all(refused(lambda: operation(final, quantity), "InvalidQuantityError")
                 for operation in operations for quantity in (0, -1, True))
    return refused_invalid == non_positive and probes


# --- transfers --------------------------------------------------------------------------------------------


def transfer_conserves_stock(record: Record, product: Product) -> bool:
    run = product.inventory.transfer.run_from_record(record)
    source, destination = record["source"], record["destination"]
    moved = sum(run.moved)
    return (all(q > 0 for q in run.moved)
            and run.source.on_hand == source["on_hand"] - moved
            and run.destination.on_hand == destination["on_hand"] + moved
            and run.source.on_hand + run.destination.on_hand == source["on_hand"] + destination["on_hand"]
            and (run.source.reserved, run.destination.reserved) == (source["reserved"], destination["reserved"])
            and (run.source.sku, run.destination.sku) == (source["sku"], destination["sku"]))


def transfer_moves_only_available(record: Record, product: Product) -> bool:
    run = product.inventory.transfer.run_from_record(record)
    source, destination = record["source"], record["destination"]
    available = source["on_hand"] - source["reserved"]
    moved: list[int] = []
    refusals: list[int] = []
    for index, quantity in enumerate(record["quantities"]):
        if source["sku"] == destination["sku"] and 0 < quantity <= available:
            moved.append(quantity)
            available -= quantity
        else:
            refusals.append(index)
    error = "InsufficientStockError" if source["sku"] == destination["sku"] else "SkuMismatchError"
    over = refused(lambda: product.inventory.transfer.transfer(run.source, run.destination, run.source.available + 1),
                   error)
    return (list(run.moved) == moved and [i for i, _ in run.refused] == refusals
            and run.source.available == available >= 0 and over)
