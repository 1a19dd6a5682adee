from __future__ import annotations

from typing import Any

import pytest

from orders.currency import UnknownCurrencyError
from orders.money import Money
from orders.totals import LineItem, Order, OrderError, compute_totals, order_total, totals_from_record


def _record(lines: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"id": "order_t", "currency": fields.pop("currency", "USD"), "lines": lines, **fields}


@pytest.mark.parametrize("lines, fields, subtotal, order_discount, tax, total", [
    # plain: 2 x 10.00 + 1 x 5.00, 10% tax
    ([{"sku": "a", "unit_price_minor": 1000, "quantity": 2}, {"sku": "b", "unit_price_minor": 500, "quantity": 1}],
     {"tax_bp": 1000}, 2500, 0, 250, 2750),
    # line percentage: 15% of 333 = 49.95 -> 50
    ([{"sku": "a", "unit_price_minor": 333, "quantity": 1, "discount_bp": 1500}], {}, 283, 0, 0, 283),
    # 100% line discount on one line
    ([{"sku": "a", "unit_price_minor": 999, "quantity": 3, "discount_bp": 10000},
      {"sku": "b", "unit_price_minor": 100, "quantity": 1}], {"tax_bp": 2000}, 100, 0, 20, 120),
    # 100% order discount
    ([{"sku": "a", "unit_price_minor": 999, "quantity": 3}], {"order_discount_bp": 10000, "tax_bp": 2000},
     2997, 2997, 0, 0),
    # fixed order discount larger than the subtotal stops at zero
    ([{"sku": "a", "unit_price_minor": 500, "quantity": 1}], {"order_discount_minor": 10**9, "tax_bp": 800},
     500, 500, 0, 0),
    # fixed line discount larger than the line stops at zero
    ([{"sku": "a", "unit_price_minor": 500, "quantity": 2, "discount_minor": 5000},
      {"sku": "b", "unit_price_minor": 300, "quantity": 1}], {}, 300, 0, 0, 300),
    # percentage then fixed, both at the order level: 10% of 1000 = 100, + 50
    ([{"sku": "a", "unit_price_minor": 1000, "quantity": 1}], {"order_discount_bp": 1000, "order_discount_minor": 50},
     1000, 150, 0, 850),
    # tax ties: 50% of 5 = 2.5 -> 2, 50% of 7 = 3.5 -> 4
    ([{"sku": "a", "unit_price_minor": 5, "quantity": 1}], {"tax_bp": 5000}, 5, 0, 2, 7),
    ([{"sku": "a", "unit_price_minor": 7, "quantity": 1}], {"tax_bp": 5000}, 7, 0, 4, 11),
    # tax is rounded once at the order level: 3 lines of 5 at 10% is 1.5 -> 2, not 3 x 0.5 -> 0
    ([{"sku": s, "unit_price_minor": 5, "quantity": 1} for s in "abc"], {"tax_bp": 1000}, 15, 0, 2, 17),
    # free items
    ([{"sku": "a", "unit_price_minor": 0, "quantity": 4}], {"tax_bp": 1000}, 0, 0, 0, 0),
    # beyond 2**53: exact
    ([{"sku": "a", "unit_price_minor": 10**15 + 1, "quantity": 10**6}], {"tax_bp": 1}, 10**21 + 10**6, 0,
     10**17 + 100, 10**21 + 10**17 + 10**6 + 100),
])
def test_totals(lines: list[dict[str, Any]], fields: dict[str, int], subtotal: int, order_discount: int, tax: int,
                total: int) -> None:
    t = totals_from_record(_record(lines, **fields))
    assert (t.subtotal.minor, t.order_discount.minor, t.tax.minor, t.total.minor) == (
        subtotal, order_discount, tax, total)
    assert t.total == t.taxable + t.tax
    assert sum(line.net.minor for line in t.lines) == t.subtotal.minor


@pytest.mark.parametrize("code, scale", [("JPY", 0), ("KWD", 3), ("CHF", 2)])
def test_totals_carry_the_currency_scale(code: str, scale: int) -> None:
    t = totals_from_record(_record([{"sku": "a", "unit_price_minor": 1234, "quantity": 1}], currency=code))
    assert t.scale == scale and t.total == Money(1234, code)


@pytest.mark.parametrize("line, message", [
    ({"sku": "a", "unit_price_minor": 100, "quantity": 0}, "quantity must be >= 1"),
    ({"sku": "a", "unit_price_minor": 100, "quantity": -1}, "quantity must be >= 1"),
    ({"sku": "a", "unit_price_minor": -1, "quantity": 1}, "unit_price_minor must be >= 0"),
    ({"sku": "a", "unit_price_minor": 1.5, "quantity": 1}, "must be an integer"),
    ({"sku": "a", "unit_price_minor": 100, "quantity": True}, "must be an integer"),
    ({"sku": "", "unit_price_minor": 100, "quantity": 1}, "sku"),
    ({"sku": "a", "unit_price_minor": 100, "quantity": 1, "discount_bp": 10001}, "discount_bp"),
    ({"sku": "a", "unit_price_minor": 100, "quantity": 1, "discount_bp": -1}, "discount_bp"),
    ({"sku": "a", "unit_price_minor": 100, "quantity": 1, "discount_minor": -1}, "discount_minor"),
    ({"sku": "a", "unit_price_minor": 100, "quantity": 1, "discount_pb": 10}, "unknown field"),
    ({"sku": "a", "quantity": 1}, "missing unit_price_minor"),
])
def test_invalid_lines_are_refused(line: dict[str, Any], message: str) -> None:
    with pytest.raises(OrderError, match=message):
        totals_from_record(_record([line]))


@pytest.mark.parametrize("fields, error", [
    ({"lines": []}, OrderError),
    ({"tax_bp": 10001}, OrderError),
    ({"order_discount_bp": -5}, OrderError),
    ({"order_discount_minor": -5}, OrderError),
    ({"currency": "XYZ"}, UnknownCurrencyError),
])
def test_invalid_orders_are_refused(fields: dict[str, Any], error: type[Exception]) -> None:
    record = {**_record([{"sku": "a", "unit_price_minor": 1, "quantity": 1}]), **fields}
    with pytest.raises(error):
        totals_from_record(record)
    assert issubclass(error, ValueError)


def test_order_total_shorthand_matches_compute_totals() -> None:
    lines = (LineItem("a", 1999, 3, discount_bp=1000), LineItem("b", 1, 1))
    assert order_total(lines, "EUR", tax_bp=1900) == compute_totals(Order("EUR", lines, tax_bp=1900)).total
