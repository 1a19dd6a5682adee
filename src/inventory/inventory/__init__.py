"""inventory: the example stock service (stock levels, reservations and releases, a replayable ledger, transfers).

Quantities are integer unit counts; every operation returns a new state, so a refused one changes nothing.
"""

from __future__ import annotations

__version__ = "0.1.0"
