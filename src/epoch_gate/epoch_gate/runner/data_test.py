from __future__ import annotations

import asyncio
import enum
import sys
from dataclasses import dataclass
from decimal import Decimal

import pytest

from epoch_gate.runner import data


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


def test_an_object_crosses_with_its_fields_and_an_answer_with_its_own_properties() -> None:
    totals = Totals((Line("a", 2), Line("b", 3)), 5)
    assert data.encode(totals) == ('{"lines":[{"sku":"a","gross":2},{"sku":"b","gross":3}],"total":5}', '{"count":2}')


def test_only_the_fields_cross_when_the_instance_holds_more() -> None:
    line = Line("a", 2)
    object.__setattr__(line, "_cache", "private")  # beside the fields in __dict__: not a field
    assert data.encode(line) == ('{"sku":"a","gross":2}', "{}")


def test_the_encoder_is_as_good_as_new_after_a_value_it_refused() -> None:
    """A cycle is not data; the encoder keeps nothing of the value it refused, so a later answer holding a
    part of it crosses."""
    held = {"v": 1}
    value: dict[str, object] = {"held": held}
    itself: list[object] = [value]
    itself.append(itself)
    with pytest.raises(data.NotData, match="nested too deeply, or a cycle"):
        data.encode(itself)
    assert data.encode(value) == ('{"held":{"v":1}}', "{}")
    assert data.encode([value, value]) == ('[{"held":{"v":1}},{"held":{"v":1}}]', "{}")


def test_what_is_not_data_says_why() -> None:
    with pytest.raises(data.NotData, match="Out of range float values are not JSON compliant"):
        data.encode([float("nan")])
    with pytest.raises(data.NotData, match="a function"):
        data.encode(lambda: None)
    with pytest.raises(data.NotData, match="a set of unorderable items"):
        data.encode({1, "a"})


@dataclass
class Node:
    name: str
    amount: object
    parent: object = None

    @property
    def label(self) -> object:
        return self.amount


class Raising:
    def __init__(self) -> None:
        self.kept = 1

    @property
    def broken(self) -> int:
        raise LookupError("never")


@pytest.mark.parametrize(
    "value, text",
    [
        # a field that is not data is left out of its object, at any depth, and the rest crosses
        (Node("a", float("nan")), '{"name":"a","parent":null}'),
        (Node("a", 1, Node("b", lambda: None)), '{"name":"a","amount":1,"parent":{"name":"b","parent":null}}'),
        # a list with an item that is not data is not data: the field holding it is left out
        (Node("a", [1, float("inf")]), '{"name":"a","parent":null}'),
        # a dict's entry that is not data, or whose key is not JSON's, is left out
        ({"a": 1, "b": float("nan"), (1, 2): 3, 4: 5}, '{"a":1,"4":5}'),
    ],
)
def test_a_field_that_is_not_data_is_left_out_of_its_object(value: object, text: str) -> None:
    assert data.encode(value)[0] == text


def test_a_cycle_is_left_out_where_it_closes() -> None:
    node = Node("a", 1)
    node.parent = node
    assert data.encode(node) == ('{"name":"a","amount":1}', '{"label":1}')
    cyclic: dict[str, object] = {"v": 1}
    cyclic["me"] = cyclic
    assert data.encode(cyclic) == ('{"v":1}', "{}")


def test_a_tree_with_back_references_crosses_without_them() -> None:
    """Each back-reference closes a cycle where it is met: left out there, and the tree crosses. Projected
    to names without it, the same tree crosses, read by the C encoder alone."""
    root = Node("root", 0)
    root.amount = [Node("c", 1, root), Node("d", float("nan"), root)]
    assert data.encode(root)[0] == '{"name":"root","amount":[{"name":"c","amount":1},{"name":"d"}],"parent":null}'
    assert data.encode(root, frozenset({"name", "amount"}))[0] == (
        '{"name":"root","amount":[{"name":"c","amount":1},{"name":"d"}]}'
    )


def test_a_field_that_raises_is_left_out() -> None:
    holder = Node("a", Raising())
    assert data.encode(holder)[0] == '{"name":"a","amount":{"kept":1},"parent":null}'


NAMES = frozenset({"amount", "name", "label"})


@pytest.mark.parametrize(
    "value, whole, projected",
    [
        (
            Node("a", Node("b", 2, Node("c", 3))),
            (
                '{"name":"a","amount":{"name":"b","amount":2,"parent":{"name":"c","amount":3,"parent":null}},"parent":null}',
                '{"label":{"name":"b","amount":2,"parent":{"name":"c","amount":3,"parent":null}}}',
            ),
            ('{"name":"a","amount":{"name":"b","amount":2}}', '{"label":{"name":"b","amount":2}}'),
        ),
        # what is left out is not read: whether it is data changes nothing of what crosses
        (
            Node("a", 1, Node("b", float("nan"))),
            ('{"name":"a","amount":1,"parent":{"name":"b","parent":null}}', '{"label":1}'),
            ('{"name":"a","amount":1}', '{"label":1}'),
        ),
        # a dict crosses whole, its objects projected
        (
            {"x": Node("b", 2, Node("c", 3))},
            ('{"x":{"name":"b","amount":2,"parent":{"name":"c","amount":3,"parent":null}}}', "{}"),
            ('{"x":{"name":"b","amount":2}}', "{}"),
        ),
    ],
)
def test_an_answer_crosses_with_the_names_asked_for_at_every_depth(
    value: object, whole: tuple[str, str], projected: tuple[str, str]
) -> None:
    assert data.encode(value) == whole
    assert data.encode(value, NAMES) == projected
    assert data.encode(value) == whole  # the projection is the call's alone


def test_a_text_too_long_is_left_out_whatever_else_crosses(monkeypatch: pytest.MonkeyPatch) -> None:
    """What is over MAX_DATA is a text, never a whole answer or field: a limit on those would count what
    a predicate does not read."""
    monkeypatch.setattr(data, "MAX_DATA", 8)
    value = Node("a" * 5, "b" * 9, Node("c" * 5, 1))
    assert data.encode(value) == ('{"name":"aaaaa","parent":{"name":"ccccc","amount":1,"parent":null}}', "{}")
    assert data.encode(value, frozenset({"name"})) == ('{"name":"aaaaa"}', "{}")


class Cancelling:
    """A plain object whose field `gone` is a property in front of its `__dict__` entry, which raises what
    `except Exception` does not catch."""

    def __init__(self) -> None:
        self.__dict__.update(kept=1, gone=2)

    @property
    def gone(self) -> int:
        raise asyncio.CancelledError()


def test_a_field_raising_what_except_exception_misses_is_left_out() -> None:
    assert data.encode(Node("a", Cancelling()))[0] == '{"name":"a","amount":{"kept":1},"parent":null}'


def test_a_value_nested_too_deep_is_left_out_where_it_goes_too_deep() -> None:
    chain: object = 0
    for _ in range(data.MAX_NESTING + 50):
        chain = {"next": chain, "v": 1}
    text, _ = data.encode(chain)
    assert text.count("{") == data.MAX_NESTING and text.startswith('{"next":{"next":')


@dataclass
class Slotted:
    __slots__ = ("amount", "currency")
    amount: int
    currency: str


class Doubling(list):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([2 * item for item in list.__iter__(self)])


class NotPairs(dict):  # type: ignore[type-arg]
    def items(self):  # type: ignore[no-untyped-def]
        return [("a", 1, "extra")]


class Unhashable(str):
    def __hash__(self) -> int:
        raise KeyboardInterrupt


class UnhashableKey(dict):  # type: ignore[type-arg]
    def items(self):  # type: ignore[no-untyped-def]
        return [(Unhashable("k"), 1)]


def _deep(levels: int, inner: object) -> object:
    for _ in range(levels):
        inner = [inner]
    return inner


@pytest.mark.parametrize(
    "value, names, whole, projected",
    [
        # a slotted object's fields, beside a field that is not data: read through its slots either way
        (
            Node("a", Slotted(-5, "EUR"), lambda: None),
            {"amount"},
            '{"name":"a","amount":{"amount":-5,"currency":"EUR"}}',
            '{"amount":{"amount":-5}}',
        ),
        # a list subclass is read through its own iterator, as the C encoder reads it
        (Node("a", Doubling([1, 2]), float("nan")), {"amount"}, '{"name":"a","amount":[2,4]}', '{"amount":[2,4]}'),
        # a dict whose items() are not pairs is not data; a key is never hashed (its __hash__ is product code)
        (
            Node("a", NotPairs(x=1), UnhashableKey(z=0)),
            {"amount", "parent"},
            '{"name":"a","parent":{"k":1}}',
            '{"parent":{"k":1}}',
        ),
        # an Enum's or a Decimal's value adds no level: nested right at MAX_NESTING, it is data either way
        (
            Node("a", _deep(data.MAX_NESTING - 1, Decimal("1")), float("nan")),
            {"amount"},
            '{"name":"a","amount":' + "[" * (data.MAX_NESTING - 1) + '"1"' + "]" * (data.MAX_NESTING - 1) + "}",
            '{"amount":' + "[" * (data.MAX_NESTING - 1) + '"1"' + "]" * (data.MAX_NESTING - 1) + "}",
        ),
    ],
)
def test_whole_and_projected_answers_read_every_value_alike(
    value: object, names: set[str], whole: str, projected: str
) -> None:
    """A whole answer with a part that is not data is read in Python (`_walk`), a projected one without it
    by the C encoder: both read what a predicate reads the same way."""
    assert data.encode(value)[0] == whole
    assert data.encode(value, frozenset(names))[0] == projected


class Shadowing:
    """A descriptor in front of a dataclass's field: reads its value negated."""

    def __get__(self, held: object, owner: type) -> object:
        return self if held is None else -held.__dict__["amount"]  # type: ignore[attr-defined]

    def __set__(self, held: object, value: object) -> None:
        held.__dict__["amount"] = value  # type: ignore[attr-defined]


@dataclass
class Shadowed:
    amount: int


def test_every_object_of_a_class_is_read_alike_the_first_too() -> None:
    """A dataclass's fields are read from its `__dict__` when that holds exactly them, for its first
    object as for every later one, projected or not."""
    Shadowed.amount = Shadowing()  # type: ignore[assignment]
    try:
        for names in (None, frozenset({"amount"}), frozenset({"amount", "other"})):
            assert [data.encode(Shadowed(5), names)[0] for _ in range(2)] == ['{"amount":5}'] * 2
    finally:
        del Shadowed.amount


def test_a_graph_with_cycles_is_read_within_a_bound() -> None:
    """Each node of a ring linked to the next and the one after: paths without end that avoid a cycle. The
    walk stops after MAX_WALKED parts: the answer is not data, never an hour of reading."""

    @dataclass
    class Ring:
        id: int
        next: object = None
        skip: object = None

    nodes = [Ring(i) for i in range(40)]
    for i, node in enumerate(nodes):
        node.next, node.skip = nodes[(i + 1) % 40], nodes[(i + 2) % 40]
    with pytest.raises(data.NotData, match="over 100000 objects, lists and dicts to read"):
        data.encode(nodes[0])
    assert data.encode(nodes[0], frozenset({"id"}))[0] == '{"id":0}'


def test_the_walk_reaches_max_nesting_whatever_the_recursion_limit() -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)  # as a product may set it
    try:
        text = data.encode(Node("a", _deep(data.MAX_NESTING - 2, 1), float("nan")))[0]
    finally:
        sys.setrecursionlimit(limit)
    assert text.count("[") == data.MAX_NESTING - 2


@dataclass(frozen=True)
class Size:
    size: str
    legs: int


class Bug(Size, enum.Enum):
    BEETLE = ("small", 6)


class Hashless(str):
    armed = False

    def __hash__(self) -> int:
        if Hashless.armed:
            raise RuntimeError("product code")
        return str.__hash__(self)


def test_an_enum_that_is_a_dataclass_crosses_as_its_value_whatever_came_before() -> None:
    before = data.encode(Node("a", Bug.BEETLE))[0]
    assert data.encode(Bug.BEETLE)[0] == '["small",6]'  # as an answer, where its properties are looked for
    assert data.encode(Node("a", Bug.BEETLE))[0] == before == '{"name":"a","amount":["small",6],"parent":null}'


def test_a_key_or_a_field_name_is_never_product_code() -> None:
    holder = Node("a", {10**5000: 1, "kept": 2})  # an int Python will not write as digits: that entry is left out
    assert data.encode(holder)[0] == '{"name":"a","amount":{"kept":2},"parent":null}'
    plain = Slotless()
    plain.__dict__[Hashless("odd")] = 1  # a field named by a str subclass: not a field
    Hashless.armed = True
    try:
        assert data.encode(plain)[0] == '{"b":2}'
        assert data.encode(plain, frozenset({"b"}))[0] == '{"b":2}'
    finally:
        Hashless.armed = False


class Slotless:
    def __init__(self) -> None:
        self.b = 2
