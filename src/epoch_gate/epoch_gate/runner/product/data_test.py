from __future__ import annotations

import asyncio
import enum
import sys
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attr
import pytest

from epoch_gate.runner.product import data
from epoch_gate.runner import protocol


def encode(value: object) -> str:
    return data.encode(value, [])


def read(value: object) -> object:
    """The value as the parent reads it: each product object as its fields (its handle aside), each tagged
    value as the parent's own."""
    return protocol.parse_answer(b'["v","T",%s]' % encode(value).encode(), lambda handle, fields: fields, dict)[2]


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
    assert data.encode(totals, kept) == (
        '{"\\u0000h":3,"lines":{"\\u0000t":[{"\\u0000h":1,"sku":"a","gross":2},{"\\u0000h":2,"sku":"b","gross":3}]},'
        '"total":5}'
    )
    assert [id(v) for v in kept] == [id("earlier"), id(first), id(second), id(totals)]


def test_only_the_declared_fields_cross_and_never_a_property() -> None:
    line = Line("a", 2)
    object.__setattr__(line, "extra", "not declared")
    assert read(line) == {"sku": "a", "gross": 2}
    assert read(Totals((), 0)) == {"lines": (), "total": 0}  # `count` is read only when a predicate reads it


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
    "value, found",
    [
        (Booked(1, "new"), {"id": 1, "state": "new"}),
        (Slotted(), {"amount": -5, "currency": "EUR"}),
        (Plain(), {"b": 2}),
        (Decimal("1.50"), Decimal("1.50")),
        (Fraction(-2, 6), Fraction(-1, 3)),
        (frozenset({3, 1, 2}), frozenset({1, 2, 3})),
        ((1, [2, (3,)]), (1, [2, (3,)])),
        ({"k": (1,), "\0h": 2, 3: 4}, {"k": (1,)}),  # a key the protocol keeps, or that is no str: left out
        ("é\ud800", "é\ud800"),
    ],
)
def test_values_cross_as_production_reads_them(value: object, found: object) -> None:
    assert read(value) == found and type(read(value)) is type(found)
    assert encode(value).isascii()


def test_what_is_not_data_says_why_and_keeps_nothing() -> None:
    kept: list[object] = []
    for value, says in [
        ([float("nan")], "nan is not a finite number"),
        (lambda: None, "a function"),
        ({1, (2,)}, "a set of other than numbers and texts"),
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
    "value, found",
    [
        # a field that is not data is left out of its object, at any depth, and the rest crosses
        (Node("a", float("nan")), {"name": "a", "parent": None}),
        (Node("a", 1, Node("b", lambda: None)), {"name": "a", "amount": 1, "parent": {"name": "b", "parent": None}}),
        # a list with an item that is not data is not data: the field holding it is left out
        (Node("a", [1, float("inf")]), {"name": "a", "parent": None}),
        # a dict's entry that is not data, or whose key is not exactly a str, is left out
        ({"a": 1, "b": float("nan"), (1, 2): 3, 4: 5}, {"a": 1}),
    ],
)
def test_a_field_that_is_not_data_is_left_out_of_its_object(value: object, found: object) -> None:
    assert read(value) == found


def test_each_handle_names_the_object_the_child_keeps_whatever_was_left_out() -> None:
    inner, parent = Line("x", 1), Node("b", 2)
    value = Node("a", [inner, lambda: None], parent)
    kept: list[object] = []
    handles: dict[int, dict[str, object]] = {}
    protocol.parse_answer(
        b'["v","T",%s]' % data.encode(value, kept).encode(), lambda h, fields: handles.setdefault(h, fields), dict
    )
    assert kept == [parent, value] and sorted(handles) == [0, 1] and handles[0]["name"] == "b"


class Twice(dict):  # type: ignore[type-arg]
    def items(self):  # type: ignore[no-untyped-def]
        return [("k", Line("a", 1)), ("k", Line("b", 2))]


def test_an_entry_read_twice_keeps_one_value_and_every_handle_its_object() -> None:
    kept: list[object] = []
    handles: dict[int, dict[str, object]] = {}
    answer = protocol.parse_answer(
        b'["v","T",%s]' % data.encode(Twice(), kept).encode(), lambda h, fields: handles.setdefault(h, fields), dict
    )
    assert answer[2] == {"k": {"sku": "b", "gross": 2}} and kept[1].sku == "b" and handles[1]["sku"] == "b"


def test_a_cycle_is_left_out_where_it_closes() -> None:
    node = Node("a", 1)
    node.parent = node
    assert read(node) == {"name": "a", "amount": 1}
    cyclic: dict[str, object] = {"v": 1}
    cyclic["me"] = cyclic
    assert read(cyclic) == {"v": 1}


class Cancelling:
    """A plain object whose field `gone` is a property in front of its `__dict__` entry, which raises what
    `except Exception` does not catch."""

    def __init__(self) -> None:
        self.__dict__.update(kept=1, gone=2)

    @property
    def gone(self) -> int:
        raise asyncio.CancelledError()


def test_a_field_that_raises_anything_is_left_out() -> None:
    assert read(Node("a", Cancelling())) == {"name": "a", "amount": {"kept": 1}, "parent": None}
    raising = Raising()
    raising.__dict__["kept_too"] = 2
    assert read(raising) == {"kept": 1}


def test_a_text_too_long_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "MAX_DATA", 8)
    assert read(Node("a" * 5, "b" * 9, Node("c" * 5, 1))) == {
        "name": "aaaaa",
        "parent": {"name": "ccccc", "amount": 1, "parent": None},
    }


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
    assert read(Node("a", Doubling([1, 2]), NotPairs(x=1))) == {"name": "a", "amount": [2, 4]}


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
    assert text.count("[") == data.MAX_NESTING - 1 and '"\\u0000d":"1"' in text


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
    assert read(Bug.BEETLE) == read(Bug.BEETLE.value)
    assert read(Node("a", Bug.BEETLE)) == {"name": "a", "amount": read(Bug.BEETLE.value), "parent": None}


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
    assert read(Forged()) == {"amount": -1}
    assert encode(Forged()).count("amount") == 1
    assert read(TwoFaced()) == {"amount": -1}
    assert read({"amount": -1, Named("amount"): 100}) == {"amount": -1}


def test_a_field_reads_plainly_only_when_no_code_of_the_products_can_run() -> None:
    @dataclass
    class Plain:
        n: int = 0

    class Slotted:
        __slots__ = ("n",)

        def __init__(self) -> None:
            self.n = 1

    class Computed:
        def __init__(self) -> None:
            self.__dict__["n"] = 1

        @property
        def n(self) -> int:  # a property wins over the instance's own entry
            return 2

    class Watching:
        def __init__(self) -> None:
            self.n = 1

        def __getattribute__(self, name: str) -> object:
            return object.__getattribute__(self, name)

    class Missing:
        def __getattr__(self, name: str) -> object:
            return 3

    class Lazy:  # a slot unset since, which falls through to the product's __getattr__
        __slots__ = ("n",)

        def __getattr__(self, name: str) -> object:
            return 4

    class Key(str):
        def __eq__(self, other: object) -> bool:  # run by a dict lookup of a colliding name
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    keyed = Plain()
    keyed.__dict__[Key("m")] = 1

    assert data.reads_plainly(Plain(), "n") and data.reads_plainly(Slotted(), "n")
    assert not any(data.reads_plainly(value, "n") for value in (Computed(), Watching(), Missing(), Lazy(), keyed))
