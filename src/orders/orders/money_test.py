from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from orders.currency import UnknownCurrencyError
from orders.money import CurrencyMismatchError, InvalidAmountError, Money, round_half_even


@pytest.mark.parametrize("value, expected", [
    (Fraction(1, 2), 0), (Fraction(3, 2), 2), (Fraction(5, 2), 2), (Fraction(7, 2), 4),
    (Fraction(-1, 2), 0), (Fraction(-3, 2), -2), (Fraction(-5, 2), -2),
    (Fraction(1, 3), 0), (Fraction(2, 3), 1), (Fraction(-2, 3), -1), (Fraction(-1, 3), 0),
    (Fraction(10), 10), (Fraction(0), 0), (Fraction(2**80 + 1, 2), 2**79), (Fraction(2**80 + 3, 2), 2**79 + 2),
])
def test_round_half_even(value: Fraction, expected: int) -> None:
    assert round_half_even(value) == expected
    assert round_half_even(value) == round(value)  # Python's own half-even, as a cross-check


@pytest.mark.parametrize("a, b, total, difference", [
    (100, 250, 350, -150), (0, 0, 0, 0), (-5, 5, 0, -10), (10**22, 10**22, 2 * 10**22, 0),
])
def test_add_sub(a: int, b: int, total: int, difference: int) -> None:
    assert Money(a, "USD") + Money(b, "USD") == Money(total, "USD")
    assert Money(a, "USD") - Money(b, "USD") == Money(difference, "USD")
    assert -Money(a, "USD") == Money(-a, "USD")


@pytest.mark.parametrize("op", ["add", "sub"])
def test_mixing_currencies_is_refused(op: str) -> None:
    usd, eur = Money(100, "USD"), Money(100, "EUR")
    with pytest.raises(CurrencyMismatchError, match="USD with EUR"):
        usd + eur if op == "add" else usd - eur


@pytest.mark.parametrize("minor, factor, expected", [
    (101, Fraction(1, 2), 50),        # 50.5 -> 50 (even)
    (103, Fraction(1, 2), 52),        # 51.5 -> 52 (even)
    (-101, Fraction(1, 2), -50),
    (1000, Fraction(1, 3), 333),
    (1000, Fraction(2, 3), 667),
    (250, 3, 750),
    (12345, Decimal("0.1"), 1234),    # 1234.5 -> 1234: Decimal is exact, unlike 0.1 as a float
    (12355, Decimal("0.1"), 1236),
    (7, 0, 0),
])
def test_multiply_rounds_half_even(minor: int, factor: object, expected: int) -> None:
    assert Money(minor, "EUR").multiply(factor) == Money(expected, "EUR")  # type: ignore[arg-type]
    assert Money(minor, "EUR") * factor == Money(expected, "EUR")


@pytest.mark.parametrize("factor", [0.5, True, "2", Decimal("NaN"), Decimal("Infinity"), None])
def test_multiply_refuses_inexact_factors(factor: object) -> None:
    with pytest.raises(InvalidAmountError):
        Money(100, "USD").multiply(factor)  # type: ignore[arg-type]


@pytest.mark.parametrize("minor", [1.0, True, "100", None, Decimal("1")])
def test_minor_must_be_an_int(minor: object) -> None:
    with pytest.raises(InvalidAmountError, match="must be an integer"):
        Money(minor, "USD")  # type: ignore[arg-type]


def test_unknown_currency_is_refused() -> None:
    with pytest.raises(UnknownCurrencyError):
        Money(1, "XYZ")


@pytest.mark.parametrize("minor, weights, parts", [
    (100, [1, 1, 1], [34, 33, 33]),
    (100, [1, 2], [33, 67]),
    (5, [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]),
    (0, [3, 4], [0, 0]),
    (1, [0, 5, 0], [0, 1, 0]),
    (-100, [1, 1, 1], [-34, -33, -33]),
    (10, [7], [10]),
    (7, [2, 2, 3], [2, 2, 3]),
    (2**70 + 1, [1, 1], [2**69 + 1, 2**69]),
])
def test_allocate_conserves_total(minor: int, weights: list[int], parts: list[int]) -> None:
    result = Money(minor, "JPY").allocate(weights)
    assert [p.minor for p in result] == parts
    assert sum(p.minor for p in result) == minor


@pytest.mark.parametrize("weights, message", [
    ([], "at least one weight"), ([0, 0], "positive weight"), ([1, -1], "negative"), ([1, 0.5], "integer"),
])
def test_allocate_refuses_bad_weights(weights: list[object], message: str) -> None:
    with pytest.raises(InvalidAmountError, match=message):
        Money(10, "USD").allocate(weights)  # type: ignore[arg-type]


@pytest.mark.parametrize("minor, code, text", [
    (12345, "USD", "123.45"), (5, "USD", "0.05"), (-5, "EUR", "-0.05"), (1050, "KWD", "1.050"),
    (-1050, "KWD", "-1.050"), (1234, "JPY", "1234"), (0, "JPY", "0"), (0, "KWD", "0.000"),
])
def test_to_decimal_string_uses_the_currency_scale(minor: int, code: str, text: str) -> None:
    money = Money(minor, code)
    assert money.to_decimal_string() == text
    assert str(money) == f"{text} {code}"
