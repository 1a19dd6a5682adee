"""Properties of the orders service: one predicate per law over one saved fixture record (True = it holds).

Each predicate takes a record of its bound (orders, payments, retries, money) and `product`, through which
it drives the product's code: `product.orders.totals.totals_from_record(record)` runs in the replay's
child and answers with data, which the predicate judges here, outside the product's process. Where a law
can be recomputed without the product (Fraction, Python's half-even round(), hashlib), it is, so a
predicate does not merely restate the code it checks. Refusals are probed too: "never refunds more than
captured" is checked by asking for one unit more and expecting a refusal.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, Mapping

from epoch_gate.runner.api import Product, plain, refused

Record = Mapping[str, Any]
KEY = re.compile(r"^idem_[0-9a-f]{64}$")  # the documented key format, kept here rather than read from the product


# --- orders -----------------------------------------------------------------------------------------------


def order_total_non_negative(record: Record, product: Product) -> bool:
    t = product.orders.totals.totals_from_record(record)
    parts = (t.gross, t.subtotal, t.order_discount, t.taxable, t.tax, t.total)
    lines_ok = all(min(line.gross.minor, line.discount.minor, line.net.minor) >= 0 for line in t.lines)
    return lines_ok and all(p.minor >= 0 for p in parts) and t.total.minor >= t.taxable.minor


def currency_scale_matches_catalog(record: Record, product: Product) -> bool:
    t = product.orders.totals.totals_from_record(record)
    scale = product.orders.currency.scale_of(record["currency"])
    # Parsed back through Decimal's digit tuple: exact, unlike arithmetic bounded by a context's precision.
    sign, digits, exponent = Decimal(t.total.to_decimal_string()).as_tuple()
    parsed = (-1 if sign else 1) * int("".join(map(str, digits)))
    return (scale == record["currency_scale"] == t.scale and t.total.currency == record["currency"]
            and exponent == -scale and parsed == t.total.minor)


def discount_never_exceeds_subtotal(record: Record, product: Product) -> bool:
    t = product.orders.totals.totals_from_record(record)
    return (t.order_discount.minor <= t.subtotal.minor
            and all(line.discount.minor <= line.gross.minor for line in t.lines)
            and 0 <= t.discount_total.minor <= t.gross.minor)


def tax_is_half_even_rounded(record: Record, product: Product) -> bool:
    t = product.orders.totals.totals_from_record(record)
    exact = Fraction(t.taxable.minor * record["tax_bp"], 10_000)
    expected = round(exact)  # Fraction.__round__ rounds ties to even: independent of orders.money
    tie_is_even = exact.denominator != 2 or expected % 2 == 0
    return t.tax.minor == expected and tie_is_even and t.total.minor == t.taxable.minor + t.tax.minor


def line_sum_matches_subtotal(record: Record, product: Product) -> bool:
    t = product.orders.totals.totals_from_record(record)
    raw = record["lines"]
    if len(t.lines) != len(raw):
        return False
    for line, src in zip(t.lines, raw):
        gross = src["unit_price_minor"] * src["quantity"]
        if line.gross.minor != gross or line.net.minor != gross - line.discount.minor:
            return False
    return (sum(line.net.minor for line in t.lines) == t.subtotal.minor
            and sum(line.gross.minor for line in t.lines) == t.gross.minor)


def full_discount_zeroes_total(record: Record, product: Product) -> bool:
    """A 100% order discount, or a fixed one at least the subtotal, leaves nothing to tax or pay."""
    t = product.orders.totals.totals_from_record(record)
    fully = (record["order_discount_bp"] == 10_000 or record["order_discount_minor"] >= t.subtotal.minor
             or all(line.get("discount_bp") == 10_000 for line in record["lines"]))
    return (not fully) or (t.taxable.minor == 0 and t.tax.minor == 0 and t.total.minor == 0)


# --- payments ---------------------------------------------------------------------------------------------


def capture_le_authorized(record: Record, product: Product) -> bool:
    payments, money = product.orders.payments, product.orders.money
    p = payments.payment_from_record(record)
    fresh = payments.authorize(p.authorized)
    over = money.Money(p.authorized.minor + 1, p.currency)
    return (0 <= p.captured.minor <= p.authorized.minor
            and refused(lambda: payments.capture(fresh, over), "OverCaptureError"))


def refund_le_captured(record: Record, product: Product) -> bool:
    payments = product.orders.payments
    p = payments.payment_from_record(record)
    if not (p.refunded.minor <= p.captured.minor
            and sum(r.minor for r in p.refunds) == p.refunded.minor
            and p.refundable.minor == p.captured.minor - p.refunded.minor):
        return False
    if p.captured.minor == 0:
        return not p.refunds
    one_more = product.orders.money.Money(p.refundable.minor + 1, p.currency)
    return refused(lambda: payments.refund(p, one_more), "OverRefundError")


def refunds_never_negative(record: Record, product: Product) -> bool:
    payments, money = product.orders.payments, product.orders.money
    p = payments.payment_from_record(record)
    if any(r.minor <= 0 for r in p.refunds) or p.refunded.minor < 0 or p.refundable.minor < 0:
        return False
    target = p if p.captured.minor else payments.capture(p, p.authorized)
    return all(refused(lambda: payments.refund(target, money.Money(bad, p.currency)), "PaymentError")
               for bad in (0, -1, -target.captured.minor))


def refund_before_capture_refused(record: Record, product: Product) -> bool:
    payments, money = product.orders.payments, product.orders.money
    fresh = payments.authorize(money.Money(record["authorized_minor"], record["currency"]))
    return refused(lambda: payments.refund(fresh, money.Money(1, fresh.currency)), "NotCapturedError")


def payment_status_consistent(record: Record, product: Product) -> bool:
    p = product.orders.payments.payment_from_record(record)
    ops = record["operations"]
    captured = sum(op["amount_minor"] for op in ops if op["op"] == "capture")
    refunded = sum(op["amount_minor"] for op in ops if op["op"] == "refund")
    if captured == 0:
        expected = "authorized"
    elif refunded == 0:
        expected = "captured"
    elif refunded == captured:
        expected = "refunded"
    else:
        expected = "partially_refunded"
    return (p.status == expected and p.captured.minor == captured and p.refunded.minor == refunded
            and p.authorized.minor == record["authorized_minor"])


# --- retries ----------------------------------------------------------------------------------------------


def idempotency_key_stable(record: Record, product: Product) -> bool:
    retries, money = product.orders.retries, product.orders.money
    amount = money.Money(record["amount_minor"], record["currency"])
    merchant, order, currency = record["merchant_id"], record["order_id"], record["currency"]
    key = retries.idempotency_key(merchant, order, amount)
    other_currency = next(c for c in product.orders.currency.codes() if c != currency)
    variants = {
        retries.idempotency_key(merchant, order, money.Money(record["amount_minor"] + 1, currency)),
        retries.idempotency_key(merchant, order + "x", amount),
        retries.idempotency_key(merchant + "x", order, amount),
        retries.idempotency_key(merchant, order, money.Money(record["amount_minor"], other_currency)),
    }
    return (type(key) is str and KEY.match(key) is not None
            and key == retries.idempotency_key(merchant, order, amount) and key not in variants and len(variants) == 4)


def retry_applies_once(record: Record, product: Product) -> bool:
    # How the key is derived is idempotency_key_stable's concern; here only "once, same answer" counts.
    run = product.orders.retries.retries_from_record(record)
    results = plain(run.results)
    first = results[0]
    return (run.applications == 1 and len(results) == record["attempts"]
            and all(result == first for result in results)
            and first["amount"]["minor"] == record["amount_minor"]
            and first["amount"]["currency"] == record["currency"] and first["sequence"] == 1)


def backoff_monotonic_and_capped(record: Record, product: Product) -> bool:
    retries = product.orders.retries
    raw = record["backoff"]
    base, factor, cap = raw["base_ms"], raw["multiplier"], raw["cap_ms"]
    delays = list(retries.backoff_schedule(retries.policy_from_record(record), record["attempts"]))
    if len(delays) != record["attempts"] - 1:
        return False
    expected = [min(cap, base * factor ** n) for n in range(len(delays))]  # the closed form, recomputed
    return (delays == expected and all(a <= b for a, b in zip(delays, delays[1:]))
            and all(0 < d <= cap for d in delays))


# --- money ------------------------------------------------------------------------------------------------


def _pair(record: Record, product: Product) -> tuple[Any, Any]:
    money = product.orders.money
    return money.Money(record["a_minor"], record["currency"]), money.Money(record["b_minor"], record["currency"])


def _same(a: Any, b: Any) -> bool:
    """Two amounts are equal when their data is: the product's own `==` is never asked."""
    return bool(plain(a) == plain(b))


def money_add_commutative(record: Record, product: Product) -> bool:
    a, b = _pair(record, product)
    zero = product.orders.money.Money.zero(a.currency)
    return (_same(a + b, b + a) and (a + b).minor == record["a_minor"] + record["b_minor"] and _same(a + zero, a))


def money_sub_inverts_add(record: Record, product: Product) -> bool:
    a, b = _pair(record, product)
    return (_same((a + b) - b, a) and _same(a - b, -(b - a))
            and _same(a - a, product.orders.money.Money.zero(a.currency)))


def money_allocate_conserves_total(record: Record, product: Product) -> bool:
    a, _ = _pair(record, product)
    weights = record["weights"]
    parts = a.allocate(weights)
    total_weight = sum(weights)
    exact = [Fraction(a.minor * w, total_weight) for w in weights]
    return (len(parts) == len(weights) and sum(p.minor for p in parts) == a.minor
            and all(p.currency == a.currency for p in parts)
            and all(abs(p.minor - share) < 1 for p, share in zip(parts, exact)))


def money_rounding_half_even(record: Record, product: Product) -> bool:
    a, _ = _pair(record, product)
    factor = record["factor"]
    exact = a.minor * Fraction(factor["num"], factor["den"])
    # Fractions cross as data: "num/den" is the exact text the child's Fraction reads back.
    fraction = product.fractions.Fraction
    scaled = a.multiply(fraction(f"{factor['num']}/{factor['den']}"))
    rounded = product.orders.money.round_half_even(fraction(f"{exact.numerator}/{exact.denominator}"))
    expected = round(exact)  # Python rounds a Fraction's ties to even
    tie_is_even = exact.denominator != 2 or scaled.minor % 2 == 0
    return (scaled.minor == expected == rounded and tie_is_even
            and abs(scaled.minor - exact) <= Fraction(1, 2) and scaled.currency == a.currency)


def money_refuses_mixed_currencies(record: Record, product: Product) -> bool:
    a, _ = _pair(record, product)
    alien = product.orders.money.Money(record["b_minor"], record["other_currency"])
    return (record["other_currency"] != record["currency"]
            and refused(lambda: a + alien, "CurrencyMismatchError")
            and refused(lambda: a - alien, "CurrencyMismatchError"))
