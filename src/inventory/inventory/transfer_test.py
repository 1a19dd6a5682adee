from __future__ import annotations

import pytest

from inventory.stock import InsufficientStockError, InvalidQuantityError, Stock
from inventory.transfer import SkuMismatchError, run_from_record, transfer


def test_only_available_units_move() -> None:
    source, destination = transfer(Stock("SKU-1", 10, 4), Stock("SKU-1", 1, 1), 6)
    assert (source, destination) == (Stock("SKU-1", 4, 4), Stock("SKU-1", 7, 1))
    with pytest.raises(InsufficientStockError):
        transfer(source, destination, 1)


@pytest.mark.parametrize("destination, quantity, error", [
    (Stock("SKU-2", 0), 1, SkuMismatchError),
    (Stock("SKU-1", 0), 0, InvalidQuantityError),
    (Stock("SKU-1", 0), 7, InsufficientStockError),
])
def test_refused_transfers(destination: Stock, quantity: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        transfer(Stock("SKU-1", 10, 4), destination, quantity)


def test_a_record_runs_in_order() -> None:
    run = run_from_record({"source": {"sku": "SKU-1", "on_hand": 5, "reserved": 1},
                           "destination": {"sku": "SKU-1", "on_hand": 0, "reserved": 0}, "quantities": [3, 2, 1]})
    assert run.moved == (3, 1) and run.refused == ((1, "InsufficientStockError"),)
    assert (run.source, run.destination) == (Stock("SKU-1", 1, 1), Stock("SKU-1", 4, 0))
