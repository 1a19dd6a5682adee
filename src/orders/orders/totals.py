"""Order totals from line items: line discounts, an order discount, then tax, all in exact minor units.

The order of operations is the contract:
  line gross     = unit_price_minor * quantity
  line discount  = half_even(gross * discount_bp / 10000) + discount_minor, capped at the gross
  subtotal       = sum of (gross - line discount)
  order discount = half_even(subtotal * order_discount_bp / 10000) + order_discount_minor, capped at the subtotal
  tax            = half_even((subtotal - order discount) * tax_bp / 10000), once, at the order level
  total          = subtotal - order discount + tax
Caps make a discount stop at zero rather than turn into a payout.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping, Sequence

from orders.currency import currency as lookup_currency
from orders.money import Money, require_int, round_half_even

BASIS_POINTS = 10_000
MAX_TAX_BP = BASIS_POINTS  # a rate above 100% is a data-entry error in this service, not a tax
LINE_FIELDS = frozenset({"sku", "unit_price_minor", "quantity", "discount_bp", "discount_minor"})


class OrderError(ValueError):
    """An order or line item that cannot be totalled."""


@dataclass(frozen=True)
class LineItem:
    sku: str
    unit_price_minor: int
    quantity: int
    discount_bp: int = 0
    discount_minor: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.sku, str) or not self.sku.strip():
            raise OrderError(f"line sku must be a non-empty string, got {self.sku!r}")
        if _int(self.unit_price_minor, f"{self.sku}: unit_price_minor") < 0:
            raise OrderError(f"{self.sku}: unit_price_minor must be >= 0, got {self.unit_price_minor}")
        if _int(self.quantity, f"{self.sku}: quantity") < 1:
            raise OrderError(f"{self.sku}: quantity must be >= 1, got {self.quantity} (drop the line instead)")
        _basis_points(self.discount_bp, f"{self.sku}: discount_bp", BASIS_POINTS)
        if _int(self.discount_minor, f"{self.sku}: discount_minor") < 0:
            raise OrderError(f"{self.sku}: discount_minor must be >= 0, got {self.discount_minor}")


@dataclass(frozen=True)
class Order:
    currency: str
    lines: tuple[LineItem, ...]
    order_discount_bp: int = 0
    order_discount_minor: int = 0
    tax_bp: int = 0

    def __post_init__(self) -> None:
        lookup_currency(self.currency)
        if not self.lines:
            raise OrderError("an order needs at least one line")
        _basis_points(self.order_discount_bp, "order_discount_bp", BASIS_POINTS)
        if _int(self.order_discount_minor, "order_discount_minor") < 0:
            raise OrderError(f"order_discount_minor must be >= 0, got {self.order_discount_minor}")
        _basis_points(self.tax_bp, "tax_bp", MAX_TAX_BP)


@dataclass(frozen=True)
class LineTotal:
    sku: str
    gross: Money
    discount: Money
    net: Money


@dataclass(frozen=True)
class Totals:
    currency: str
    lines: tuple[LineTotal, ...]
    gross: Money           # before any discount
    subtotal: Money        # after line discounts
    order_discount: Money
    taxable: Money         # subtotal - order discount
    tax: Money
    total: Money

    @property
    def scale(self) -> int:
        return self.total.scale

    @property
    def discount_total(self) -> Money:
        return self.gross - self.taxable


def _int(value: object, what: str) -> int:
    try:
        return require_int(value, what)
    except ValueError as exc:
        raise OrderError(str(exc)) from None


def _basis_points(value: object, what: str, upper: int) -> int:
    bp = _int(value, what)
    if not 0 <= bp <= upper:
        raise OrderError(f"{what} must be within [0, {upper}] basis points, got {bp}")
    return bp


def _percent_of(amount: int, bp: int) -> int:
    return round_half_even(Fraction(amount * bp, BASIS_POINTS))


def _discount(amount: int, bp: int, fixed: int) -> int:
    return min(amount, _percent_of(amount, bp) + fixed)


def compute_totals(order: Order) -> Totals:
    cur = order.currency
    lines = []
    for line in order.lines:
        gross = line.unit_price_minor * line.quantity
        discount = _discount(gross, line.discount_bp, line.discount_minor)
        lines.append(LineTotal(line.sku, Money(gross, cur), Money(discount, cur), Money(gross - discount, cur)))
    gross_total = sum(line.gross.minor for line in lines)
    subtotal = sum(line.net.minor for line in lines)
    order_discount = _discount(subtotal, order.order_discount_bp, order.order_discount_minor)
    taxable = subtotal - order_discount
    tax = _percent_of(taxable, order.tax_bp)
    return Totals(cur, tuple(lines), Money(gross_total, cur), Money(subtotal, cur), Money(order_discount, cur),
                  Money(taxable, cur), Money(tax, cur), Money(taxable + tax, cur))


def line_from_json(raw: object, index: int) -> LineItem:
    if not isinstance(raw, Mapping):
        raise OrderError(f"line {index} must be an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - LINE_FIELDS)
    if unknown:  # a misspelt discount would otherwise silently be no discount
        raise OrderError(f"line {index} has unknown field(s) {', '.join(map(str, unknown))}")
    missing = sorted({"sku", "unit_price_minor", "quantity"} - set(raw))
    if missing:
        raise OrderError(f"line {index} is missing {', '.join(missing)}")
    return LineItem(raw["sku"], raw["unit_price_minor"], raw["quantity"], raw.get("discount_bp", 0),
                    raw.get("discount_minor", 0))


def order_from_record(record: Mapping[str, Any]) -> Order:
    """An Order from a JSON object; keys other than the order's own (id, labels) are ignored."""
    if "currency" not in record or "lines" not in record:
        raise OrderError("an order record needs currency and lines")
    raw_lines = record["lines"]
    if not isinstance(raw_lines, Sequence) or isinstance(raw_lines, (str, bytes)):
        raise OrderError(f"lines must be a list, got {type(raw_lines).__name__}")
    # Order and LineItem validate every value's type, so Any is checked, not trusted.
    return Order(
        currency=record["currency"],
        lines=tuple(line_from_json(raw, i) for i, raw in enumerate(raw_lines)),
        order_discount_bp=record.get("order_discount_bp", 0),
        order_discount_minor=record.get("order_discount_minor", 0),
        tax_bp=record.get("tax_bp", 0),
    )


def totals_from_record(record: Mapping[str, Any]) -> Totals:
    return compute_totals(order_from_record(record))


def order_total(lines: Sequence[LineItem], currency: str, *, order_discount_bp: int = 0,
                order_discount_minor: int = 0, tax_bp: int = 0) -> Money:
    """Shorthand for the total alone."""
    return compute_totals(Order(currency, tuple(lines), order_discount_bp, order_discount_minor, tax_bp)).total
