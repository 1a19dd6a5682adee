"""The currency catalog: ISO 4217 code -> minor-unit scale (how many decimal digits the minor unit has)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

CODE = re.compile(r"^[A-Z]{3}$")

# Read-only so no caller can change a scale under everyone else's money at run time.
CATALOG: Mapping[str, int] = MappingProxyType({
    "CHF": 2,
    "EUR": 2,
    "GBP": 2,
    "JPY": 0,
    "KWD": 3,
    "USD": 2,
})


class CurrencyError(ValueError):
    """A currency code that is malformed or not in the catalog."""


class UnknownCurrencyError(CurrencyError):
    pass


@dataclass(frozen=True)
class Currency:
    code: str
    scale: int

    @property
    def minor_per_major(self) -> int:
        return 10 ** self.scale


def currency(code: object) -> Currency:
    """The catalog entry for `code`; raises rather than guessing a scale (a wrong scale is a 100x bug)."""
    if not isinstance(code, str) or not CODE.match(code):
        raise CurrencyError(f"currency code must be three upper-case letters, got {code!r}")
    scale = CATALOG.get(code)
    if scale is None:
        raise UnknownCurrencyError(f"unknown currency {code!r}; known: {', '.join(sorted(CATALOG))}")
    return Currency(code, scale)


def scale_of(code: object) -> int:
    return currency(code).scale


def codes() -> tuple[str, ...]:
    return tuple(sorted(CATALOG))
