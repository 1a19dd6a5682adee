"""Payments: authorize an amount, capture at most that once, then refund at most what was captured."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from orders.money import Money, require_int

OPERATION_FIELDS = frozenset({"op", "amount_minor"})


class PaymentError(ValueError):
    """An operation the payment's state does not allow."""


class InvalidPaymentAmountError(PaymentError):
    pass


class OverCaptureError(PaymentError):
    pass


class AlreadyCapturedError(PaymentError):
    pass


class NotCapturedError(PaymentError):
    pass


class OverRefundError(PaymentError):
    pass


class InvalidOperationError(PaymentError):
    pass


class Status(str, enum.Enum):
    AUTHORIZED = "authorized"
    CAPTURED = "captured"
    PARTIALLY_REFUNDED = "partially_refunded"
    REFUNDED = "refunded"


@dataclass(frozen=True)
class Payment:
    """Immutable: every operation returns a new state, so a refused one leaves the old state intact."""

    authorized: Money
    captured: Money
    refunds: tuple[Money, ...] = ()

    @property
    def currency(self) -> str:
        return self.authorized.currency

    @property
    def refunded(self) -> Money:
        return sum(self.refunds, Money.zero(self.currency))

    @property
    def refundable(self) -> Money:
        return self.captured - self.refunded

    @property
    def status(self) -> Status:
        if self.captured.minor == 0:
            return Status.AUTHORIZED
        if not self.refunds:
            return Status.CAPTURED
        return Status.REFUNDED if self.refundable.minor == 0 else Status.PARTIALLY_REFUNDED


def _positive(amount: Money, payment_currency: str, what: str) -> int:
    if amount.currency != payment_currency:
        raise InvalidPaymentAmountError(f"{what} in {amount.currency} on a {payment_currency} payment")
    if amount.minor <= 0:
        raise InvalidPaymentAmountError(f"{what} must be positive, got {amount.minor} minor units")
    return amount.minor


def authorize(amount: Money) -> Payment:
    _positive(amount, amount.currency, "authorization")
    return Payment(amount, Money.zero(amount.currency))


def capture(payment: Payment, amount: Money) -> Payment:
    """One capture per authorization (as card schemes settle it); the rest of the hold is released."""
    minor = _positive(amount, payment.currency, "capture")
    if payment.captured.minor:
        raise AlreadyCapturedError(f"payment already captured {payment.captured}")
    if minor > payment.authorized.minor:
        raise OverCaptureError(f"capture of {amount} exceeds the authorized {payment.authorized}")
    return replace(payment, captured=amount)


def refund(payment: Payment, amount: Money) -> Payment:
    minor = _positive(amount, payment.currency, "refund")
    if payment.captured.minor == 0:
        raise NotCapturedError("cannot refund a payment that has not been captured")
    already = payment.refunded.minor
    if already + minor > payment.captured.minor:
        raise OverRefundError(f"refund of {amount} exceeds the {payment.refundable} still refundable")
    return replace(payment, refunds=payment.refunds + (amount,))


def apply_operation(payment: Payment, operation: Mapping[str, Any], index: int = 0) -> Payment:
    if not isinstance(operation, Mapping) or set(operation) != OPERATION_FIELDS:
        raise InvalidOperationError(f"operation {index} must be an object with exactly op and amount_minor")
    amount = Money(require_int(operation["amount_minor"], f"operation {index} amount_minor"), payment.currency)
    if operation["op"] == "capture":
        return capture(payment, amount)
    if operation["op"] == "refund":
        return refund(payment, amount)
    raise InvalidOperationError(f"operation {index}: unknown op {operation['op']!r} (capture or refund)")


def apply_operations(authorized: Money, operations: Sequence[Mapping[str, Any]]) -> Payment:
    """The state after authorizing `authorized` and applying `operations` in order; raises on the first refusal."""
    if isinstance(operations, (str, bytes)) or not isinstance(operations, Sequence):
        raise InvalidOperationError(f"operations must be a list, got {type(operations).__name__}")
    payment = authorize(authorized)
    for index, operation in enumerate(operations):
        payment = apply_operation(payment, operation, index)
    return payment


def payment_from_record(record: Mapping[str, Any]) -> Payment:
    """A payment-scenario record (currency, authorized_minor, operations); other keys (id, labels) are ignored."""
    for key in ("currency", "authorized_minor", "operations"):
        if key not in record:
            raise InvalidOperationError(f"a payment record needs {key}")
    authorized = Money(require_int(record["authorized_minor"], "authorized_minor"), record["currency"])
    return apply_operations(authorized, record["operations"])
