"""What a predicate author imports: `from epoch_gate.runner.api import Product, plain, refused`.

A predicate is `predicate(record, product: Product) -> bool`. It runs once per record, outside the
product, and calls the product through `product` (`product.orders.totals.totals_from_record(record)`);
what comes back is data to read (`docs/contract.md`, "The replay and its observations").
"""

from epoch_gate.runner.judge.judging import NotData, Product, ProductRaised, Remote, plain, refused

__all__ = ["NotData", "Product", "ProductRaised", "Remote", "plain", "refused"]
