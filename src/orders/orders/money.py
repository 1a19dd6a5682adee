"""Money: an exact integer count of minor units in one currency, with half-even rounding made explicit."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any, Sequence, Union

import attrs

from orders.currency import currency as lookup_currency

Factor = Union[int, Fraction, Decimal]


class MoneyError(ValueError):
    """Invalid money arithmetic or an invalid amount."""


class CurrencyMismatchError(MoneyError):
    pass


class InvalidAmountError(MoneyError):
    pass


def require_int(value: object, what: str) -> int:
    """An int that is not a bool (JSON true must never pass as 1) and never a float."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidAmountError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    return value


def round_half_even(value: Fraction) -> int:
    """The integer nearest `value`; an exact .5 goes to the even neighbour (banker's rounding)."""
    floor, remainder = divmod(value.numerator, value.denominator)  # floor division, remainder >= 0
    twice = 2 * remainder
    if twice > value.denominator or (twice == value.denominator and floor % 2 == 1):
        return floor + 1
    return floor


def as_fraction(factor: object) -> Fraction:
    """Exact factors only: a float already carries binary rounding error, so it is refused."""
    if isinstance(factor, bool) or isinstance(factor, float):
        raise InvalidAmountError(f"factor must be an int, Fraction or Decimal, got {type(factor).__name__}")
    if isinstance(factor, (int, Fraction)):
        return Fraction(factor)
    if isinstance(factor, Decimal):
        if not factor.is_finite():
            raise InvalidAmountError(f"factor must be finite, got {factor}")
        return Fraction(factor)  # exact: a finite Decimal is a ratio of integers
    raise InvalidAmountError(f"factor must be an int, Fraction or Decimal, got {type(factor).__name__}")


def _valid_minor(_instance: Any, _attribute: Any, value: object) -> None:
    require_int(value, "amount in minor units")


def _valid_currency(_instance: Any, _attribute: Any, value: object) -> None:
    lookup_currency(value)  # raises on an unknown code


# A value: attrs checks the fields in order (amount, then currency) on construction and gives equality,
# hashing, the repr and immutability (FrozenInstanceError, an AttributeError); slots=False keeps __dict__.
@attrs.frozen(slots=False)
class Money:
    minor: int = attrs.field(validator=_valid_minor)
    currency: str = attrs.field(validator=_valid_currency)

    @classmethod
    def zero(cls, currency: str) -> Money:
        return cls(0, currency)

    @property
    def scale(self) -> int:
        return lookup_currency(self.currency).scale

    def _same(self, other: Money) -> None:
        if self.currency != other.currency:
            raise CurrencyMismatchError(f"cannot combine {self.currency} with {other.currency}")

    def __add__(self, other: object) -> Money:
        if not isinstance(other, Money):
            return NotImplemented
        self._same(other)
        return Money(self.minor + other.minor, self.currency)

    def __sub__(self, other: object) -> Money:
        if not isinstance(other, Money):
            return NotImplemented
        self._same(other)
        return Money(self.minor - other.minor, self.currency)

    def __neg__(self) -> Money:
        return Money(-self.minor, self.currency)

    def multiply(self, factor: Factor) -> Money:
        """self * factor, rounded half-even to a whole minor unit."""
        return Money(round_half_even(self.minor * as_fraction(factor)), self.currency)

    def __mul__(self, factor: object) -> Money:
        if isinstance(factor, Money):
            return NotImplemented
        return self.multiply(factor)  # type: ignore[arg-type] - as_fraction refuses anything inexact

    __rmul__ = __mul__

    def allocate(self, weights: Sequence[int]) -> list[Money]:
        """Splits into parts proportional to `weights` that sum exactly to self (largest remainder).

        Leftover minor units go to the largest fractional shares; ties go to the earlier weight, so the
        split is deterministic. A negative amount is split like its absolute value, then negated.
        """
        if not weights:
            raise InvalidAmountError("allocate needs at least one weight")
        for index, weight in enumerate(weights):
            if require_int(weight, f"weight {index}") < 0:
                raise InvalidAmountError(f"weight {index} is negative ({weight})")
        total_weight = sum(weights)
        if total_weight == 0:
            raise InvalidAmountError("allocate needs at least one positive weight")
        sign = -1 if self.minor < 0 else 1
        amount = abs(self.minor)
        floors = [amount * w // total_weight for w in weights]
        remainders = [amount * w % total_weight for w in weights]
        leftover = amount - sum(floors)  # < len(weights), since each floor loses less than one unit
        order = sorted(range(len(weights)), key=lambda i: (-remainders[i], i))
        for i in order[:leftover]:
            floors[i] += 1
        return [Money(sign * part, self.currency) for part in floors]

    def to_decimal_string(self) -> str:
        """The amount in major units with exactly `scale` decimals, e.g. "-1.050" for -1050 KWD fils."""
        scale = self.scale
        sign = "-" if self.minor < 0 else ""
        major, minor = divmod(abs(self.minor), 10 ** scale)
        return f"{sign}{major}.{minor:0{scale}d}" if scale else f"{sign}{major}"

    def __str__(self) -> str:
        return f"{self.to_decimal_string()} {self.currency}"
