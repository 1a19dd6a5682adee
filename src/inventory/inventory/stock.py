"""Stock of one SKU: units on hand, some of them reserved for orders not yet shipped."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


class StockError(ValueError):
    """An operation the stock's state does not allow."""


class InvalidQuantityError(StockError):
    pass


class InsufficientStockError(StockError):
    pass


class OverReleaseError(StockError):
    pass


class OverShipError(StockError):
    pass


@dataclass(frozen=True, slots=True)
class Stock:
    """Immutable: `0 <= reserved <= on_hand` holds for every state the operations below return."""

    sku: str
    on_hand: int
    reserved: int = 0

    @property
    def available(self) -> int:
        return self.on_hand - self.reserved


def require_quantity(value: Any, what: str) -> int:
    """A whole unit count: a bool or a float is refused rather than silently counted."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidQuantityError(f"{what} must be an integer, got {type(value).__name__}")
    return value


def positive_quantity(quantity: Any, what: str) -> int:
    if require_quantity(quantity, what) <= 0:
        raise InvalidQuantityError(f"{what} must be positive, got {quantity}")
    return quantity


def opening(sku: str, on_hand: Any, reserved: Any = 0) -> Stock:
    """A stock as counted: refused unless `0 <= reserved <= on_hand`."""
    if not 0 <= require_quantity(reserved, "reserved") <= require_quantity(on_hand, "on_hand"):
        raise InvalidQuantityError(f"a stock needs 0 <= reserved <= on_hand, got {reserved} of {on_hand}")
    return Stock(sku, on_hand, reserved)


def receive(stock: Stock, quantity: int) -> Stock:
    return replace(stock, on_hand=stock.on_hand + positive_quantity(quantity, "receipt"))


def reserve(stock: Stock, quantity: int) -> Stock:
    """Holds units for an order: never more than are available (on hand and not yet reserved)."""
    if positive_quantity(quantity, "reservation") > stock.available:
        raise InsufficientStockError(f"reserving {quantity} of {stock.sku} exceeds the {stock.available} available")
    return replace(stock, reserved=stock.reserved + quantity)


def release(stock: Stock, quantity: int) -> Stock:
    """Returns reserved units to the available pool: never more than are reserved."""
    if positive_quantity(quantity, "release") > stock.reserved:
        raise OverReleaseError(f"releasing {quantity} of {stock.sku} exceeds the {stock.reserved} reserved")
    return replace(stock, reserved=stock.reserved - quantity)


def ship(stock: Stock, quantity: int) -> Stock:
    """Fulfils reserved units: they leave both the reservation and the shelf."""
    if positive_quantity(quantity, "shipment") > stock.reserved:
        raise OverShipError(f"shipping {quantity} of {stock.sku} exceeds the {stock.reserved} reserved")
    return replace(stock, on_hand=stock.on_hand - quantity, reserved=stock.reserved - quantity)
