from __future__ import annotations

from epoch_gate.change.product_calls import module_candidates, old_shape_predicates, product_names

SOURCE = b'''
from epoch_gate.runner.api import Product

def capture_le_authorized(record, product: Product) -> bool:
    payments, money = product.orders.payments, product.orders.money
    fresh = payments.authorize(product.orders.money.Money.zero("EUR"))
    other.product.not_this(1)  # a product attribute of something else
    return product.fractions.Fraction("1/2") is not None  # product.in_a_comment
'''


def test_every_dotted_name_spelled_after_product() -> None:
    assert product_names(SOURCE) == {"orders.payments", "orders.money", "orders.money.Money.zero", "fractions.Fraction"}


def test_a_module_that_does_not_tokenize_names_nothing() -> None:
    assert product_names(b"def f(record, product):\n    return product.a.b(\n") == set()


def test_candidates_run_from_the_whole_name_to_its_top_level() -> None:
    assert list(module_candidates("a.b.C.f")) == ["a.b.C.f", "a.b.C", "a.b", "a"]


def test_predicates_of_the_old_shape_are_named() -> None:
    source = b"def old(record):\n    pass\ndef new(record, product):\n    pass\ndef _helper(record):\n    pass\n"
    assert old_shape_predicates(source) == ["old"]
    assert old_shape_predicates(b"def (:\n") == []
