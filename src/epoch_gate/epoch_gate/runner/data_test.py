from __future__ import annotations

import asyncio
import enum
import json
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import attr
import pytest

from epoch_gate.runner import data


def encode(value: object) -> str:
    return data.encode(value, [])


@dataclass(frozen=True)
class Line:
    sku: str
    gross: int


@dataclass(frozen=True)
class Totals:
    lines: tuple[Line, ...]
    total: int

    @property
    def count(self) -> int:
        return len(self.lines)


def test_an_object_crosses_as_its_fields_and_each_object_is_kept_in_the_order_it_closes() -> None:
    first, second = Line("a", 2), Line("b", 3)
    totals = Totals((first, second), 5)
    kept: list[object] = ["earlier"]
    assert data.encode(totals, kept) == '{"lines":[{"sku":"a","gross":2},{"sku":"b","gross":3}],"total":5}'
    # json's object_hook order: the parent numbers the objects it parses the same way
    assert kept == ["earlier", first, second, totals]
    assert [id(v) for v in kept[1:]] == [id(first), id(second), id(totals)]


def test_only_the_declared_fields_cross_and_never_a_property() -> None:
    line = Line("a", 2)
    object.__setattr__(line, "extra", "not declared")
    assert encode(line) == '{"sku":"a","gross":2}'
    assert encode(Totals((), 0)) == '{"lines":[],"total":0}'  # `count` is read only when a predicate reads it


@attr.s(auto_attribs=True, frozen=True)
class Booked:
    id: int
    state: str


class Slotted:
    __slots__ = ("amount", "currency", "_secret")

    def __init__(self) -> None:
        self.amount, self.currency, self._secret = -5, "EUR", "x"


class Plain:
    status = "class attribute"  # not a field: the predicate reads it from the product when it wants it

    def __init__(self) -> None:
        self.b, self._private = 2, 3


@pytest.mark.parametrize(
    "value, text",
    [
        (Booked(1, "new"), '{"id":1,"state":"new"}'),
        (Slotted(), '{"amount":-5,"currency":"EUR"}'),
        (Plain(), '{"b":2}'),
        (Decimal("1.50"), '"1.50"'),
        (frozenset({3, 1, 2}), "[1,2,3]"),
        ((1, [2, (3,)]), "[1,[2,[3]]]"),
        ("é\ud800", '"\\u00e9\\ud800"'),  # ASCII on the channel, a lone surrogate escaped
    ],
)
def test_values_cross_as_production_reads_them(value: object, text: str) -> None:
    assert encode(value) == text


def test_what_is_not_data_says_why_and_keeps_nothing() -> None:
    kept: list[object] = []
    for value, says in [
        ([float("nan")], "nan is not a finite number"),
        (lambda: None, "a function"),
        ({1, "a"}, "reading it raised TypeError"),
        (10**5000, "an int of over 4300 digits"),
        ([Line("a", 1), print], "a builtin_function_or_method"),
    ]:
        with pytest.raises(data.NotData, match=says):
            data.encode(value, kept)
        assert kept == []


@dataclass
class Node:
    name: str
    amount: object
    parent: object = None


class Raising:
    def __init__(self) -> None:
        self.kept = 1

    @property
    def broken(self) -> int:
        raise LookupError("never")

    def __getattribute__(self, name: str) -> Any:
        if name == "kept_too":
            raise LookupError("never")
        return object.__getattribute__(self, name)


@pytest.mark.parametrize(
    "value, text",
    [
        # a field that is not data is left out of its object, at any depth, and the rest crosses
        (Node("a", float("nan")), '{"name":"a","parent":null}'),
        (Node("a", 1, Node("b", lambda: None)), '{"name":"a","amount":1,"parent":{"name":"b","parent":null}}'),
        # a list with an item that is not data is not data: the field holding it is left out
        (Node("a", [1, float("inf")]), '{"name":"a","parent":null}'),
        # a dict's entry that is not data, or whose key is not exactly a str, is left out
        ({"a": 1, "b": float("nan"), (1, 2): 3, 4: 5}, '{"a":1}'),
    ],
)
def test_a_field_that_is_not_data_is_left_out_of_its_object(value: object, text: str) -> None:
    assert encode(value) == text


def test_what_a_field_left_out_kept_is_dropped_so_the_numbering_matches_the_text() -> None:
    inner = Line("x", 1)
    value = Node("a", [inner, lambda: None], Node("b", 2))
    kept: list[object] = []
    text = data.encode(value, kept)
    assert text == '{"name":"a","parent":{"name":"b","amount":2,"parent":null}}'
    objects: list[object] = []
    json.loads(text, object_hook=lambda o: objects.append(o) or o)
    assert len(kept) == len(objects) == 2 and kept[1] is value and inner not in kept


def test_a_cycle_is_left_out_where_it_closes() -> None:
    node = Node("a", 1)
    node.parent = node
    assert encode(node) == '{"name":"a","amount":1}'
    cyclic: dict[str, object] = {"v": 1}
    cyclic["me"] = cyclic
    assert encode(cyclic) == '{"v":1}'


class Cancelling:
    """A plain object whose field `gone` is a property in front of its `__dict__` entry, which raises what
    `except Exception` does not catch."""

    def __init__(self) -> None:
        self.__dict__.update(kept=1, gone=2)

    @property
    def gone(self) -> int:
        raise asyncio.CancelledError()


def test_a_field_that_raises_anything_is_left_out() -> None:
    assert encode(Node("a", Cancelling())) == '{"name":"a","amount":{"kept":1},"parent":null}'
    raising = Raising()
    raising.__dict__["kept_too"] = 2
    assert encode(raising) == '{"kept":1}'


def test_a_text_too_long_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "MAX_DATA", 8)
    assert encode(Node("a" * 5, "b" * 9, Node("c" * 5, 1))) == (
        '{"name":"aaaaa","parent":{"name":"ccccc","amount":1,"parent":null}}'
    )


def test_a_value_nested_too_deep_is_left_out_where_it_goes_too_deep() -> None:
    chain: object = 0
    for _ in range(data.MAX_NESTING + 50):
        chain = {"next": chain, "v": 1}
    text = encode(chain)
    assert text.count("{") == data.MAX_NESTING and text.startswith('{"next":{"next":')


class Doubling(list):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([2 * item for item in list.__iter__(self)])


class NotPairs(dict):  # type: ignore[type-arg]
    def items(self):  # type: ignore[no-untyped-def]
        return [("a", 1, "extra")]


def test_a_subclass_is_read_through_its_own_iteration() -> None:
    assert encode(Node("a", Doubling([1, 2]), NotPairs(x=1))) == '{"name":"a","amount":[2,4]}'


def _deep(levels: int, inner: object) -> object:
    for _ in range(levels):
        inner = [inner]
    return inner


def test_an_enum_or_a_decimal_adds_no_level_and_the_walk_reaches_max_nesting_whatever_the_limit() -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)  # as a product may set it
    try:
        text = encode(Node("a", _deep(data.MAX_NESTING - 1, Decimal("1"))))
    finally:
        sys.setrecursionlimit(limit)
    assert text.count("[") == data.MAX_NESTING - 1


def test_a_graph_with_cycles_is_read_within_a_bound() -> None:
    @dataclass
    class Ring:
        id: int
        next: object = None
        skip: object = None

    nodes = [Ring(i) for i in range(40)]
    for i, node in enumerate(nodes):
        node.next, node.skip = nodes[(i + 1) % 40], nodes[(i + 2) % 40]
    with pytest.raises(data.NotData, match="over 100000 objects, lists and dicts to read"):
        encode(nodes[0])


@dataclass(frozen=True)
class Size:
    size: str
    legs: int


class Bug(Size, enum.Enum):
    BEETLE = ("small", 6)


def test_an_enum_crosses_as_its_value_as_this_interpreter_reads_it() -> None:
    """An Enum with a dataclass mixin: its `value` is the tuple on 3.9-3.11 and the dataclass from 3.12;
    either way it crosses as production reads `Bug.BEETLE.value`."""
    assert encode(Bug.BEETLE) == encode(Bug.BEETLE.value)
    assert encode(Node("a", Bug.BEETLE)) == '{"name":"a","amount":%s,"parent":null}' % encode(Bug.BEETLE.value)


class Named(str):
    """A str subclass that prints as a real field's name but is another key (issue 43's first
    data-crossing trick: JSON would hold the name twice, and a parser keeps the last)."""

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return other is self


class Forged:
    def __init__(self) -> None:
        self.amount = -1  # the product's bug, which production reads
        self.__dict__[Named("amount")] = 100  # a second key that prints as the same name


class TwoFaced:
    """Answers a read of its `__dict__` with the right values, while every ordinary attribute read (what
    production code does) sees the bug (issue 43's second trick)."""

    def __init__(self) -> None:
        object.__setattr__(self, "amount", -1)

    def __getattribute__(self, name: str) -> Any:
        if name == "__dict__":
            return {"amount": 100}
        return object.__getattribute__(self, name)


def test_a_value_crosses_as_production_reads_it_never_as_its_dict_says() -> None:
    assert json.loads(encode(Forged())) == {"amount": -1}
    assert encode(Forged()).count("amount") == 1
    assert encode(TwoFaced()) == '{"amount":-1}'
    assert encode({"amount": -1, Named("amount"): 100}) == '{"amount":-1}'
