"""Transfers of one SKU between two locations: only available (unreserved) units move, none are made or lost."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from inventory.stock import InsufficientStockError, Stock, StockError, opening, positive_quantity


class SkuMismatchError(StockError):
    pass


def transfer(source: Stock, destination: Stock, quantity: int) -> tuple[Stock, Stock]:
    if source.sku != destination.sku:
        raise SkuMismatchError(f"cannot move {source.sku} into the stock of {destination.sku}")
    if positive_quantity(quantity, "transfer") > source.available:
        raise InsufficientStockError(f"moving {quantity} of {source.sku} exceeds the {source.available} available")
    return (replace(source, on_hand=source.on_hand - quantity),
            replace(destination, on_hand=destination.on_hand + quantity))


@dataclass(frozen=True, slots=True)
class TransferRun:
    source: Stock
    destination: Stock
    moved: tuple[int, ...]
    refused: tuple[tuple[int, str], ...]  # (index, the refusing StockError's class name)


def _location(raw: Any, what: str) -> Stock:
    if not isinstance(raw, Mapping) or set(raw) != {"sku", "on_hand", "reserved"}:
        raise ValueError(f"{what} must be an object with exactly sku, on_hand and reserved")
    return opening(raw["sku"], raw["on_hand"], raw["reserved"])


def run_from_record(record: Mapping[str, Any]) -> TransferRun:
    """The stocks after a transfer record's quantities are moved from its source to its destination in order."""
    source, destination = _location(record["source"], "source"), _location(record["destination"], "destination")
    moved: list[int] = []
    refused: list[tuple[int, str]] = []
    for index, quantity in enumerate(record["quantities"]):
        try:
            source, destination = transfer(source, destination, quantity)
        except StockError as error:
            refused.append((index, type(error).__name__))
        else:
            moved.append(quantity)
    return TransferRun(source, destination, tuple(moved), tuple(refused))
