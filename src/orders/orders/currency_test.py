from __future__ import annotations

import pytest

from orders.currency import CATALOG, CurrencyError, UnknownCurrencyError, codes, currency, scale_of


@pytest.mark.parametrize("code, scale", [("USD", 2), ("EUR", 2), ("CHF", 2), ("GBP", 2), ("JPY", 0), ("KWD", 3)])
def test_scale_of_known_currencies(code: str, scale: int) -> None:
    assert scale_of(code) == scale
    assert currency(code).minor_per_major == 10 ** scale


@pytest.mark.parametrize("code", ["XXX", "BTC", "ZZZ"])
def test_unknown_currency_raises(code: str) -> None:
    with pytest.raises(UnknownCurrencyError, match="unknown currency"):
        scale_of(code)


@pytest.mark.parametrize("code", ["usd", "US", "USDT", "", " USD", None, 840, b"USD"])
def test_malformed_code_raises_value_error(code: object) -> None:
    with pytest.raises(CurrencyError, match="three upper-case letters"):
        currency(code)
    assert issubclass(CurrencyError, ValueError)


def test_catalog_is_read_only_and_sorted() -> None:
    with pytest.raises(TypeError):
        CATALOG["USD"] = 3  # type: ignore[index]
    assert codes() == tuple(sorted(CATALOG))
