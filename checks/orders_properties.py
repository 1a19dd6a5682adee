"""Properties of the orders service: predicates over one saved fixture record each (True = the law holds).

Each predicate takes a record of its bound (orders, payments, retries, money), runs the product code on it
and returns a real bool. Where a law can be recomputed without the product code (Fraction, Python's
half-even round()), it is, so a predicate does not merely restate the code it checks. Refusals are probed
too: "never refunds more than captured" is checked by asking for one unit more and expecting a refusal.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Mapping

from orders import currency, money, payments, retries, totals
from orders.money import Money

Record = Mapping[str, Any]


def _refuses(call: Callable[[], object], error: type[Exception]) -> bool:
    """True when `call` raises `error`; any other outcome (success, another error) is a violation."""
    try:
        call()
    except error:
        return True
    return False


# --- orders -----------------------------------------------------------------------------------------------


def order_total_non_negative(record: Record) -> bool:
    t = totals.totals_from_record(record)
    parts = (t.gross, t.subtotal, t.order_discount, t.taxable, t.tax, t.total)
    lines_ok = all(min(line.gross.minor, line.discount.minor, line.net.minor) >= 0 for line in t.lines)
    return lines_ok and all(p.minor >= 0 for p in parts) and t.total.minor >= t.taxable.minor


def currency_scale_matches_catalog(record: Record) -> bool:
    t = totals.totals_from_record(record)
    scale = currency.scale_of(record["currency"])
    # Parsed back through Decimal's digit tuple: exact, unlike arithmetic bounded by a context's precision.
    sign, digits, exponent = Decimal(t.total.to_decimal_string()).as_tuple()
    parsed = (-1 if sign else 1) * int("".join(map(str, digits)))
    return (scale == record["currency_scale"] == t.scale and t.total.currency == record["currency"]
            and exponent == -scale and parsed == t.total.minor)


def discount_never_exceeds_subtotal(record: Record) -> bool:
    t = totals.totals_from_record(record)
    return (t.order_discount.minor <= t.subtotal.minor
            and all(line.discount.minor <= line.gross.minor for line in t.lines)
            and 0 <= t.discount_total.minor <= t.gross.minor)


def tax_is_half_even_rounded(record: Record) -> bool:
    t = totals.totals_from_record(record)
    exact = Fraction(t.taxable.minor * record["tax_bp"], 10_000)
    expected = round(exact)  # Fraction.__round__ rounds ties to even: independent of orders.money
    tie_is_even = exact.denominator != 2 or expected % 2 == 0
    return t.tax.minor == expected and tie_is_even and t.total.minor == t.taxable.minor + t.tax.minor


def line_sum_matches_subtotal(record: Record) -> bool:
    t = totals.totals_from_record(record)
    raw = record["lines"]
    if len(t.lines) != len(raw):
        return False
    for line, src in zip(t.lines, raw):
        gross = src["unit_price_minor"] * src["quantity"]
        if line.gross.minor != gross or line.net.minor != gross - line.discount.minor:
            return False
    return (sum(line.net.minor for line in t.lines) == t.subtotal.minor
            and sum(line.gross.minor for line in t.lines) == t.gross.minor)


def full_discount_zeroes_total(record: Record) -> bool:
    """A 100% order discount, or a fixed one at least the subtotal, leaves nothing to tax or pay."""
    t = totals.totals_from_record(record)
    fully = (record["order_discount_bp"] == 10_000 or record["order_discount_minor"] >= t.subtotal.minor
             or all(line.get("discount_bp") == 10_000 for line in record["lines"]))
    return (not fully) or (t.taxable.minor == 0 and t.tax.minor == 0 and t.total.minor == 0)


# --- payments ---------------------------------------------------------------------------------------------


def capture_le_authorized(record: Record) -> bool:
    p = payments.payment_from_record(record)
    fresh = payments.authorize(p.authorized)
    over = Money(p.authorized.minor + 1, p.currency)
    return (0 <= p.captured.minor <= p.authorized.minor
            and _refuses(lambda: payments.capture(fresh, over), payments.OverCaptureError))


def refund_le_captured(record: Record) -> bool:
    p = payments.payment_from_record(record)
    if not (p.refunded.minor <= p.captured.minor
            and sum(r.minor for r in p.refunds) == p.refunded.minor
            and p.refundable.minor == p.captured.minor - p.refunded.minor):
        return False
    if p.captured.minor == 0:
        return not p.refunds
    one_more = Money(p.refundable.minor + 1, p.currency)
    return _refuses(lambda: payments.refund(p, one_more), payments.OverRefundError)


def refunds_never_negative(record: Record) -> bool:
    p = payments.payment_from_record(record)
    if any(r.minor <= 0 for r in p.refunds) or p.refunded.minor < 0 or p.refundable.minor < 0:
        return False
    target = p if p.captured.minor else payments.capture(p, p.authorized)
    return all(_refuses(lambda: payments.refund(target, Money(bad, p.currency)), payments.PaymentError)
               for bad in (0, -1, -target.captured.minor))


def refund_before_capture_refused(record: Record) -> bool:
    fresh = payments.authorize(Money(record["authorized_minor"], record["currency"]))
    return _refuses(lambda: payments.refund(fresh, Money(1, fresh.currency)), payments.NotCapturedError)


def payment_status_consistent(record: Record) -> bool:
    p = payments.payment_from_record(record)
    ops = record["operations"]
    captured = sum(op["amount_minor"] for op in ops if op["op"] == "capture")
    refunded = sum(op["amount_minor"] for op in ops if op["op"] == "refund")
    if captured == 0:
        expected = payments.Status.AUTHORIZED
    elif refunded == 0:
        expected = payments.Status.CAPTURED
    elif refunded == captured:
        expected = payments.Status.REFUNDED
    else:
        expected = payments.Status.PARTIALLY_REFUNDED
    return (p.status is expected and p.captured.minor == captured and p.refunded.minor == refunded
            and p.authorized.minor == record["authorized_minor"])


# --- retries ----------------------------------------------------------------------------------------------


def idempotency_key_stable(record: Record) -> bool:
    amount = Money(record["amount_minor"], record["currency"])
    merchant, order = record["merchant_id"], record["order_id"]
    key = retries.idempotency_key(merchant, order, amount)
    other_currency = next(c for c in currency.codes() if c != amount.currency)
    variants = {
        retries.idempotency_key(merchant, order, Money(amount.minor + 1, amount.currency)),
        retries.idempotency_key(merchant, order + "x", amount),
        retries.idempotency_key(merchant + "x", order, amount),
        retries.idempotency_key(merchant, order, Money(amount.minor, other_currency)),
    }
    return (retries.KEY.match(key) is not None and key == retries.idempotency_key(merchant, order, amount)
            and key not in variants and len(variants) == 4)


def retry_applies_once(record: Record) -> bool:
    # How the key is derived is idempotency_key_stable's concern; here only "once, same answer" counts.
    run = retries.retries_from_record(record)
    first = run.results[0]
    return (run.applications == 1 and len(run.results) == record["attempts"]
            and all(result == first for result in run.results)
            and first.amount == Money(record["amount_minor"], record["currency"]) and first.sequence == 1)


def backoff_monotonic_and_capped(record: Record) -> bool:
    raw = record["backoff"]
    base, factor, cap = raw["base_ms"], raw["multiplier"], raw["cap_ms"]
    delays = retries.backoff_schedule(retries.policy_from_record(record), record["attempts"])
    if len(delays) != record["attempts"] - 1:
        return False
    expected = [min(cap, base * factor ** n) for n in range(len(delays))]  # the closed form, recomputed
    return (list(delays) == expected and all(a <= b for a, b in zip(delays, delays[1:]))
            and all(0 < d <= cap for d in delays))


# --- money ------------------------------------------------------------------------------------------------


def _pair(record: Record) -> tuple[Money, Money]:
    return Money(record["a_minor"], record["currency"]), Money(record["b_minor"], record["currency"])


def money_add_commutative(record: Record) -> bool:
    a, b = _pair(record)
    zero = Money.zero(a.currency)
    return a + b == b + a and (a + b).minor == record["a_minor"] + record["b_minor"] and a + zero == a


def money_sub_inverts_add(record: Record) -> bool:
    a, b = _pair(record)
    return (a + b) - b == a and a - b == -(b - a) and a - a == Money.zero(a.currency)


def money_allocate_conserves_total(record: Record) -> bool:
    a, _ = _pair(record)
    weights = record["weights"]
    parts = a.allocate(weights)
    total_weight = sum(weights)
    exact = [Fraction(a.minor * w, total_weight) for w in weights]
    return (len(parts) == len(weights) and sum(p.minor for p in parts) == a.minor
            and all(p.currency == a.currency for p in parts)
            and all(abs(p.minor - share) < 1 for p, share in zip(parts, exact)))


def money_rounding_half_even(record: Record) -> bool:
    a, _ = _pair(record)
    factor = Fraction(record["factor"]["num"], record["factor"]["den"])
    exact = a.minor * factor
    scaled = a.multiply(factor)
    expected = round(exact)  # Python rounds a Fraction's ties to even
    tie_is_even = exact.denominator != 2 or scaled.minor % 2 == 0
    return (scaled.minor == expected == money.round_half_even(exact) and tie_is_even
            and abs(scaled.minor - exact) <= Fraction(1, 2) and scaled.currency == a.currency)


def money_refuses_mixed_currencies(record: Record) -> bool:
    a, _ = _pair(record)
    alien = Money(record["b_minor"], record["other_currency"])
    return (record["other_currency"] != record["currency"]
            and _refuses(lambda: a + alien, money.CurrencyMismatchError)
            and _refuses(lambda: a - alien, money.CurrencyMismatchError))
