"""orders: the example orders/payments service (money, currencies, order totals, payments, retries).

Money is always an integer count of a currency's minor units; nothing here ever touches a float.
"""

from __future__ import annotations

__version__ = "0.1.0"
