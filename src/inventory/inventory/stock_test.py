from __future__ import annotations

from typing import Any, Callable

import pytest

from inventory.stock import (InsufficientStockError, InvalidQuantityError, OverReleaseError, OverShipError, Stock,
                             StockError, opening, receive, release, reserve, ship)


def test_reserve_release_ship() -> None:
    stock = reserve(receive(opening("SKU-1", 5), 3), 6)
    assert (stock.on_hand, stock.reserved, stock.available) == (8, 6, 2)
    stock = release(stock, 2)
    assert (stock.on_hand, stock.reserved, stock.available) == (8, 4, 4)
    stock = ship(stock, 4)
    assert (stock.on_hand, stock.reserved, stock.available) == (4, 0, 4)


def test_everything_available_can_be_reserved_and_no_more() -> None:
    stock = reserve(Stock("SKU-1", 10, 4), 6)
    assert stock.available == 0
    with pytest.raises(InsufficientStockError):
        reserve(stock, 1)


@pytest.mark.parametrize("operation, quantity, error", [
    (reserve, 8, InsufficientStockError),  # only 7 available
    (release, 4, OverReleaseError),
    (ship, 4, OverShipError),
    (receive, 0, InvalidQuantityError),
    (reserve, -1, InvalidQuantityError),
    (release, 1.0, InvalidQuantityError),
    (ship, True, InvalidQuantityError),
])
def test_refusals_leave_the_stock_unchanged(operation: Callable[[Stock, Any], Stock], quantity: Any,
                                           error: type[StockError]) -> None:
    stock = Stock("SKU-1", 10, 3)
    with pytest.raises(error):
        operation(stock, quantity)
    assert stock == Stock("SKU-1", 10, 3)
    assert issubclass(error, ValueError)


@pytest.mark.parametrize("on_hand, reserved", [(-1, 0), (3, 4), (3, -1), (2.5, 0)])
def test_opening_refuses_an_impossible_count(on_hand: Any, reserved: Any) -> None:
    with pytest.raises(InvalidQuantityError):
        opening("SKU-1", on_hand, reserved)
