from __future__ import annotations

from typing import Any

import pytest

from orders.money import Money
from orders.payments import (AlreadyCapturedError, InvalidOperationError, InvalidPaymentAmountError,
                             NotCapturedError, OverCaptureError, OverRefundError, PaymentError, Status,
                             apply_operations, authorize, capture, payment_from_record, refund)


def _ops(*pairs: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"op": op, "amount_minor": amount} for op, amount in pairs]


@pytest.mark.parametrize("operations, captured, refunded, status", [
    ([], 0, 0, Status.AUTHORIZED),
    (_ops(("capture", 1000)), 1000, 0, Status.CAPTURED),
    (_ops(("capture", 400)), 400, 0, Status.CAPTURED),
    (_ops(("capture", 1000), ("refund", 1000)), 1000, 1000, Status.REFUNDED),
    (_ops(("capture", 1000), ("refund", 300), ("refund", 200)), 1000, 500, Status.PARTIALLY_REFUNDED),
    (_ops(("capture", 1000), ("refund", 300), ("refund", 700)), 1000, 1000, Status.REFUNDED),
    (_ops(("capture", 400), ("refund", 400)), 400, 400, Status.REFUNDED),
])
def test_valid_sequences(operations: list[dict[str, Any]], captured: int, refunded: int, status: Status) -> None:
    p = payment_from_record({"id": "p", "currency": "USD", "authorized_minor": 1000, "operations": operations})
    assert (p.captured.minor, p.refunded.minor, p.status) == (captured, refunded, status)
    assert p.refundable.minor == captured - refunded


@pytest.mark.parametrize("operations, error", [
    (_ops(("capture", 1001)), OverCaptureError),
    (_ops(("capture", 500), ("capture", 500)), AlreadyCapturedError),
    (_ops(("refund", 1)), NotCapturedError),
    (_ops(("capture", 500), ("refund", 501)), OverRefundError),
    (_ops(("capture", 500), ("refund", 300), ("refund", 201)), OverRefundError),
    (_ops(("capture", 0)), InvalidPaymentAmountError),
    (_ops(("capture", 500), ("refund", 0)), InvalidPaymentAmountError),
    (_ops(("capture", 500), ("refund", -5)), InvalidPaymentAmountError),
    (_ops(("void", 5)), InvalidOperationError),
    ([{"op": "capture"}], InvalidOperationError),
    ([{"op": "capture", "amount_minor": 5, "extra": 1}], InvalidOperationError),
    ("capture", InvalidOperationError),
])
def test_invalid_sequences_are_refused(operations: Any, error: type[PaymentError]) -> None:
    with pytest.raises(error):
        apply_operations(Money(1000, "USD"), operations)
    assert issubclass(error, ValueError)


@pytest.mark.parametrize("authorized", [0, -1])
def test_authorization_must_be_positive(authorized: int) -> None:
    with pytest.raises(InvalidPaymentAmountError):
        authorize(Money(authorized, "EUR"))


def test_currency_of_an_operation_must_match() -> None:
    captured = capture(authorize(Money(100, "EUR")), Money(100, "EUR"))
    with pytest.raises(InvalidPaymentAmountError, match="USD"):
        refund(captured, Money(10, "USD"))


def test_a_refused_operation_leaves_the_state_unchanged() -> None:
    p = capture(authorize(Money(100, "JPY")), Money(60, "JPY"))
    with pytest.raises(OverRefundError):
        refund(p, Money(61, "JPY"))
    assert p.refunds == () and refund(p, Money(60, "JPY")).status is Status.REFUNDED
