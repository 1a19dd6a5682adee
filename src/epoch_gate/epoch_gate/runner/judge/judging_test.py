from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

from decimal import Decimal
from fractions import Fraction

from epoch_gate.runner.judge import judging
from epoch_gate.runner import protocol
from epoch_gate.runner.protocol import DECIMAL, FRACTION, HANDLE, SET, TUPLE


class Scripted:
    """A child that answers each call with the next of `answers` (JSON texts), and keeps what it was sent."""

    def __init__(self, *answers: object) -> None:
        self.answers = [json.dumps(a).encode() for a in answers]
        self.calls: list[tuple[int, object]] = []

    def ask(self, scope: int, call: bytes) -> bytes:
        self.calls.append((scope, json.loads(call)))
        return self.answers.pop(0)

    def broke(self, why: str) -> BaseException:
        return RuntimeError(f"broke: {why}")


def judged(predicate: Callable[[Any, Any], object], *answers: object, raw: bytes = b"{}") -> judging.Judgement:
    return judging.judge(predicate, raw, Scripted(*answers), 1)


def obj(handle: int, **fields: object) -> dict[str, object]:
    """A product object as the child writes it: its handle first."""
    return {HANDLE: handle, **fields}


def answer_of(data: object) -> Any:
    """What a predicate gets for one answer `["v", "Totals", data]`."""
    got: list[object] = []
    judged(lambda record, product: got.append(product.app.f()) or True, ["v", "Totals", data])
    return got[0]


def test_a_product_value_reads_as_data_whatever_its_fields_are_named() -> None:
    """Fields are the value's own attributes; none of them, whatever its name, can stand in for a method
    or a slot of the value, so the value still refuses to decide anything."""
    value = answer_of(
        obj(
            4,
            total=5,
            __eq__=True,
            __hash__=0,
            __class__="int",
            __bool__=True,
            __dict__={},
            _at=[9, 9, "Evil", "", None],
            __deepcopy__={},
            lines=[obj(2, gross=2)],
            owner=obj(3, name="x"),
        )
    )
    assert value.total == 5
    assert type(value) is judging.Remote and judging._at(value)[:3] == (1, 4, "Totals")
    for use in (lambda: value == 5, lambda: hash(value), lambda: bool(value), lambda: value < 1, lambda: str(value)):
        with pytest.raises(judging.HandleMisused):
            use()
    (line,) = value.lines
    assert isinstance(line, judging.Remote) and line.gross == 2 and judging._at(line)[1] == 2
    assert isinstance(value.owner, judging.Remote) and value.owner.name == "x"
    assert judging.plain(value)["_at"] == [9, 9, "Evil", "", None]
    assert copy.deepcopy(value) is value  # the field `__deepcopy__` does not stand in for the runner's


def test_data_reads_as_the_parents_own_values_of_the_same_types() -> None:
    value = answer_of(
        {
            "list": [1, [2]],
            "tuple": {TUPLE: [1, {TUPLE: []}]},
            "set": {SET: ["a", 1]},
            "price": {DECIMAL: "0.00"},
            "share": {FRACTION: "1/3"},
            "dict": {"k": obj(0, v=1)},
        }
    )
    assert type(value) is judging.Entries
    assert value["list"] == [1, [2]] and value["tuple"] == (1, ()) and value["set"] == {"a", 1}
    assert value["price"] == Decimal("0.00") and str(value["price"]) == "0.00" and value["share"] == Fraction(1, 3)
    # `!=` reads as production's would: an empty list is not unequal to []
    assert not (value["list"] != [1, [2]]) and value["tuple"] != [1, []]
    assert value["dict"]["k"].v == 1
    assert judging.plain(value) == {
        "list": [1, [2]],
        "tuple": [1, []],
        "set": frozenset({"a", 1}),
        "price": Decimal("0.00"),
        "share": Fraction(1, 3),
        "dict": {"k": {"v": 1}},
    }


def calls(*lines: str) -> str:
    """A violated record's transcript as the detail shows it, after its first line."""
    named = f"its {len(lines)} call{'s' if len(lines) > 1 else ''} and the product's answers:"
    return f"\n{named}" + "".join(f"\n  {line}" for line in lines)


def test_a_violated_record_shows_the_calls_it_made_and_what_the_product_answered() -> None:
    """What the predicate read, as it crossed: every argument and answer written as Python writes it,
    a product object as its class and fields, the product's text never on a line of its own."""

    def predicate(record: Any, product: Any) -> bool:
        quote = product.shop.quote(record["cents"], Decimal("0.1"), kind=("a",))
        return product.shop.total(quote) == quote.cents and product.shop.name() == "x"

    found = judged(
        predicate,
        ["v", "shop.Quote", obj(0, cents=100, lines={protocol.TUPLE: [1, {protocol.DECIMAL: "1.50"}]})],
        ["v", "int", 100],
        ["v", "int", 100],  # a field read after a later call is read again, as production would read it
        ["v", "str", "two\nlines"],
        raw=b'{"cents": 100}',
    )
    assert found == judging.Judgement(
        False,
        "predicate returned False"
        + calls(
            "shop.quote(100, Decimal('0.1'), kind=['a']) -> Quote(cents=100, lines=(1, Decimal('1.50')))",
            "shop.total(<product value>) -> 100",
            "<product value>.cents read again -> 100",
            "shop.name() -> 'two\\nlines'",
        ),
    )
    # The product names its classes and words its exceptions: no line of its own, whatever it writes
    forged = judged(
        lambda record, product: product.app.f() == 0,
        ["x", ["app.E\nX"], "no\u2028::error::x", ""],
    )
    lines = forged.detail.split("\n")
    shown = lines[lines.index("its 1 call and the product's answers:") + 1 :]
    assert shown == ["  app.f() -> raised E\\nX: no\\u2028::error::x"]
    forged = judged(
        lambda record, product: judging.plain(product.app.f()) == 0,
        ["o", 1, "T\nits 1 call and the product's answers:", "x\r\x1b[2J"],
    )
    assert len(forged.detail.split("\n")) == 3 and "\x1b" not in forged.detail and "\r" not in forged.detail
    many = judged(lambda record, product: [product.app.f() for _ in range(9)] == [], *[["v", "int", 1]] * 9)
    assert many.detail.splitlines()[1] == "the first 8 of its 9 calls and the product's answers:"
    assert judged(lambda record, product: False) == judging.Judgement(False, "predicate returned False")


@pytest.mark.parametrize(
    "read, says",
    [
        (lambda d: d.amount, "the product's answer a dict, not an object with a field amount"),
        (lambda d: d["missing"], "the product's answer a dict without the item 'missing'"),
    ],
)
def test_a_dict_read_as_another_shape_is_the_products_failure(read: Callable[[Any], Any], says: str) -> None:
    found = judged(lambda record, product: read(product.app.f()) == 0, ["v", "dict", {"amount": 0}])
    assert found == judging.Judgement(False, says + calls("app.f() -> {'amount': 0}"))


def test_a_product_value_is_read_only() -> None:
    value = answer_of(obj(1, total=5, lines=[obj(0, gross=2)]))
    for change in (
        lambda: setattr(value, "total", 6),
        lambda: delattr(value, "total"),
        lambda: setattr(value.lines[0], "gross", 3),
        lambda: setattr(value, "_at", None),
    ):
        with pytest.raises(judging.HandleMisused):
            change()
    for view in (vars(value), value.__dict__, vars(value.lines[0])):
        with pytest.raises(TypeError):
            view["total"] = 6
    assert {"total", "lines"} <= set(dir(value))
    assert copy.copy(value) is value and copy.deepcopy(value.lines[0]) is value.lines[0]


def test_an_attribute_that_is_not_a_field_is_read_from_the_product_when_the_predicate_reads_it() -> None:
    """`t.status_code` (a class attribute, a property) is read in the child, once per read the predicate
    wrote; `total.to_text(2)` reads the method, then calls it."""

    def predicate(record: Any, product: Any) -> bool:
        t = product.app.f(record)
        total = t.total  # a field: no call
        return t.status_code == 200 and total.to_text(2) == "5.00" and t.receipt is None

    child = Scripted(
        ["v", "Response", obj(1, total=obj(0, minor=5))],
        ["v", "int", 200],
        ["o", 2, "method", "a method"],
        ["v", "str", "5.00"],
        ["v", "NoneType", None],
    )
    assert judging.judge(predicate, b'{"id":1}', child, 3) == judging.HOLDS
    assert child.calls == [
        (3, [{"m": "app.f"}, [{"id": 1}], {}]),
        (3, [{"a": [3, 1, "status_code"]}, [], {}]),
        (3, [{"a": [3, 0, "to_text"]}, [], {}]),
        (3, [{"h": [3, 2]}, [2], {}]),
        (3, [{"a": [3, 1, "receipt"]}, [], {}]),
    ]


def test_a_field_read_after_another_call_is_read_from_the_object_as_it_is_then() -> None:
    """An account answered with balance 10, then withdrawn from: its balance is read again (-90), as
    production code would read it, never the snapshot of the first answer. Each field is read again once,
    on its first read after the call, and holds until the next call; a name that is no field of it is read
    from the product at each read."""

    def predicate(record: Any, product: Any) -> bool:
        account = product.app.Account(10)
        before = account.balance
        account.withdraw(100)
        after = account.balance, account.owner, account.balance, account.label, account.label
        product.app.touch()
        return before == 10 and after == (-90, "ann", -90, "A", "B") and account.owner == "bob"

    child = Scripted(
        ["v", "Account", obj(0, balance=10, owner="ann")],
        ["o", 1, "method", "a method"],
        ["v", "NoneType", None],
        ["v", "int", -90],
        ["v", "str", "ann"],
        ["v", "str", "A"],
        ["v", "str", "B"],
        ["v", "NoneType", None],
        ["v", "str", "bob"],
    )
    assert judging.judge(predicate, b"{}", child, 1) == judging.HOLDS
    assert [call for _, call in child.calls][1:] == [
        [{"a": [1, 0, "withdraw"]}, [], {}],
        [{"h": [1, 1]}, [100], {}],
        [{"r": [1, 0, "balance"]}, [], {}],
        [{"r": [1, 0, "owner"]}, [], {}],
        [{"a": [1, 0, "label"]}, [], {}],
        [{"a": [1, 0, "label"]}, [], {}],
        [{"m": "app.touch"}, [], {}],
        [{"r": [1, 0, "owner"]}, [], {}],
    ]


def test_a_field_the_object_lost_reads_as_production_reads_it() -> None:
    """A stale field the product deleted: read again, the product's AttributeError is the predicate's
    (`hasattr` is False), as in production."""
    missing = ["x", ["builtins.AttributeError", "builtins.Exception", "builtins.BaseException"], "gone", ""]

    def predicate(record: Any, product: Any) -> bool:
        account = product.app.Account()
        product.app.touch()
        return not hasattr(account, "balance")

    child = Scripted(["v", "Account", obj(0, balance=10)], ["v", "NoneType", None], missing)
    assert judging.judge(predicate, b"{}", child, 1) == judging.HOLDS
    assert [call for _, call in child.calls][2:] == [[{"r": [1, 0, "balance"]}, [], {}]]


def test_plain_of_a_value_answered_before_the_last_call_reads_it_again_once() -> None:
    def predicate(record: Any, product: Any) -> bool:
        t = product.app.f()
        product.app.touch()
        return judging.plain(t) == {"n": 2, "part": {"m": 3}}

    child = Scripted(
        ["v", "T", obj(1, n=1, part=obj(0, m=1))], ["v", "NoneType", None], ["v", "T", obj(3, n=2, part=obj(2, m=3))]
    )
    assert judging.judge(predicate, b"{}", child, 1) == judging.HOLDS
    assert [call for _, call in child.calls][2] == [{"r": [1, 1]}, [], {}]


def test_a_missing_attribute_reads_as_production_reads_it() -> None:
    """The product's AttributeError: `hasattr` is False and `getattr` gives its default, as in production;
    read without either, it fails the record."""
    missing = ["x", ["builtins.AttributeError", "builtins.Exception", "builtins.BaseException"], "no receipt", ""]

    def predicate(record: Any, product: Any) -> bool:
        t = product.app.f()
        return not hasattr(t, "receipt") and getattr(t, "receipt", 7) == 7 and t.receipt is None

    found = judged(predicate, ["v", "T", obj(0)], missing, missing, missing)
    read = "<product value>.receipt -> raised AttributeError: no receipt"
    assert found == judging.Judgement(
        False, "the product raised AttributeError: no receipt" + calls("app.f() -> T()", read, read, read)
    )


def test_an_attribute_that_is_not_data_fails_the_record_when_used_as_data() -> None:
    def predicate(record: Any, product: Any) -> bool:
        return judging.plain(product.app.f().handler) == 1

    found = judged(predicate, ["v", "T", obj(0)], ["o", 1, "function", "a function"])
    assert found == judging.Judgement(
        False,
        "the product's answer function is not data (a function)"
        + calls("app.f() -> T()", "<product value>.handler -> <function: not data (a function)>"),
    )


def test_a_value_from_an_earlier_record_is_the_predicates_mistake() -> None:
    kept: list[Any] = []

    def predicate(record: Any, product: Any) -> bool:
        if kept:
            return product.app.g(kept[0]) == 1  # type: ignore[no-any-return]
        kept.append(product.app.f())
        return True

    assert judged(predicate, ["v", "T", obj(0, a=1)]) == judging.HOLDS
    found = judging.judge(predicate, b"{}", Scripted(), 2)
    assert found.error == "predicate-error" and "outside the run of the record" in found.detail


@pytest.mark.parametrize(
    "answer, expected",
    [
        (
            ["x", ["builtins.ValueError", "builtins.Exception"], "bad", "  File x"],
            "the product raised ValueError: bad" + calls("app.f() -> raised ValueError: bad") + "\n  File x",
        ),
        (
            ["v", "dict", {"total": 1}],
            "the product's answer a dict without the item 'missing'" + calls("app.f() -> {'total': 1}"),
        ),
    ],
)
def test_the_products_failure_violates_the_record(answer: object, expected: str) -> None:
    def predicate(record: Any, product: Any) -> bool:
        return product.app.f()["missing"] == 1  # type: ignore[no-any-return]

    assert judged(predicate, answer) == judging.Judgement(False, expected)


def test_refused_names_the_products_exception_by_class_or_base_and_never_mistakes_a_builtin() -> None:
    def predicate(record: Any, product: Any) -> bool:
        return (
            judging.refused(lambda: product.app.f(), "LookupError")
            and judging.refused(lambda: product.app.f(), "app.errors.Missing")
            and judging.refused(lambda: product.app.f(), "Missing")
            and not judging.refused(lambda: product.app.f(), "TypeError")
            and not judging.refused(lambda: product.app.g(), "ValueError")  # the product's own ValueError
            and judging.refused(lambda: product.app.g(), "app.ValueError")
        )

    raised = ["x", ["app.errors.Missing", "builtins.LookupError", "builtins.Exception"], "k", ""]
    own = ["x", ["app.ValueError", "builtins.Exception"], "v", ""]
    assert judged(predicate, raised, raised, raised, raised, own, own) == judging.HOLDS


@pytest.mark.parametrize(
    "body, code, says",
    [
        ("return 1", "predicate-error", "the predicate returned a int, not a bool"),
        ("return product.app.f() == 1", "handle-misused", "used in a comparison"),
        ("raise KeyError('k')", "predicate-error", "the predicate raised KeyError: 'k'"),
        ("return product.app.f(object()) == 1", "predicate-error", "an argument of app.f is not data"),
        ("return product.app.f(product.app.g) == 1", "predicate-error", "passed as an argument"),
    ],
)
def test_the_predicates_own_mistakes_are_the_oracles_errors(body: str, code: str, says: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def p(record, product):\n    {body}\n", namespace)
    found = judged(namespace["p"], ["v", "T", obj(0)])
    assert found.error == code and says in found.detail, found


class _Raw(Scripted):
    def __init__(self, payload: bytes) -> None:
        super().__init__()
        self.payload = payload

    def ask(self, scope: int, call: bytes) -> bytes:
        return self.payload


@pytest.mark.parametrize(
    "payload, says",
    [
        (b'["v","T",{"a":1,"a":2}]', "an object with a key twice"),
        (b'["v","T",{"a":1,"b":{"a\\\\":1,"a\\\\":2}}]', "an object with a key twice"),
        ('["v","str","\u00e9"]'.encode(), "an answer that is not ASCII JSON"),
        ('["v","str","AB"]'.encode("utf-16-be"), "an answer that is not JSON (JSONDecodeError)"),
        (b'["v","F",{"\\u0000f":"1e999999999"}]', "a malformed tagged value ('\\x00f')"),
        (b'["v","F",{"\\u0000f":"1/0"}]', "a malformed tagged value ('\\x00f')"),
        (b'["v","S",{"\\u0000s":[{"\\u0000h":0}]}]', "a malformed tagged value ('\\x00s')"),
        (b'["v","T",{"\\u0000h":-1}]', "a malformed product object"),
        (b'["v","int",' + b"9" * 4301 + b"]", "an answer that is not JSON (ValueError)"),
        (b'[{}]', "an answer of an unknown kind"),
    ],
)
def test_an_answer_that_is_not_plain_json_of_the_protocol_is_the_childs_broken_protocol(
    payload: bytes, says: str
) -> None:
    with pytest.raises(RuntimeError) as raised:
        judging.judge(lambda record, product: product.app.f() is None, b"{}", _Raw(payload), 1)
    assert str(raised.value) == f"broke: {says}"


def test_a_child_that_fails_mid_record_fails_the_replay_whatever_the_predicate_swallows() -> None:
    class Failing(Scripted):
        def ask(self, scope: int, call: bytes) -> bytes:
            raise RuntimeError("the child ended early")

    def predicate(record: Any, product: Any) -> bool:
        try:
            product.app.f()
        except:  # noqa: E722 - a bare except, as a careless predicate has
            pass
        return True

    with pytest.raises(RuntimeError, match="the child ended early"):
        judging.judge(predicate, b"{}", Failing(), 1)


def test_an_oracle_error_whose_message_holds_a_product_value_is_shown_as_such() -> None:
    def predicate(record: Any, product: Any) -> bool:
        raise judging.OracleError(product.app.f())

    found = judged(predicate, ["v", "T", obj(0, total=5)])
    assert found == judging.Judgement(False, "(its message could not be shown: HandleMisused)", "predicate-error")


def test_plain_reads_an_answer_as_deep_as_it_was_parsed() -> None:
    deep: dict[str, object] = obj(0, leaf=1)
    for n in range(700):
        deep = obj(n + 1, next=deep, tags=[1])
    value = judging.plain(answer_of(deep))
    for _ in range(700):
        assert value["tags"] == [1]
        value = value["next"]
    assert value == {"leaf": 1}


@pytest.mark.parametrize(
    "argument, refused",
    [
        (["\u0000ref"], False),  # text, not a key
        ({"name": "\u0000ref"}, False),
        ({"\u0000ref": 1, "other": 2}, False),  # the child reads a reference only from the key alone
        ({"\u0000ref": [1, 0]}, True),
        ([{"x": {"\u0000ref": 1}}], True),
    ],
)
def test_only_data_the_child_would_read_as_a_reference_is_refused(argument: object, refused: bool) -> None:
    def predicate(record: Any, product: Any) -> bool:
        return product.app.f(argument) == 1  # type: ignore[no-any-return]

    found = judged(predicate, ["v", "int", 1])
    if refused:
        assert found == judging.Judgement(
            False,
            'an argument of app.f is not data: it holds the key "\\u0000ref", which the protocol keeps for a '
            "product value",
            "predicate-error",
        )
    else:
        assert found == judging.HOLDS


def test_a_value_passed_back_crosses_as_a_reference() -> None:
    def predicate(record: Any, product: Any) -> bool:
        t = product.app.f()
        return product.app.g(t.lines[1], key=t) == 1  # type: ignore[no-any-return]

    child = Scripted(["v", "T", obj(6, lines=[obj(4, a=1), obj(5, b=2)])], ["v", "int", 1])
    assert judging.judge(predicate, b"{}", child, 9) == judging.HOLDS
    assert child.calls[1] == (9, [{"m": "app.g"}, [{"\u0000ref": [9, 5]}], {"key": {"\u0000ref": [9, 6]}}])


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16-le", "utf-32"])
@pytest.mark.parametrize("depth, malformed", [(256, False), (257, True), (990, True)])
def test_a_record_nested_too_deep_is_malformed_before_any_parse(depth: int, malformed: bool, encoding: str) -> None:
    raw = ("[" * depth + '"]\\"]]{[["' + "]" * depth).encode(encoding)
    found = judged(lambda record, product: True, raw=raw)
    if malformed:
        assert found == judging.Judgement(False, "the record is nested deeper than 256", "artifact-malformed")
    else:
        assert found == judging.HOLDS


def test_the_depth_of_a_malformed_line_is_counted_in_one_pass() -> None:
    """An unclosed string runs to the end of the line: a scan that looked for its end from every escaped
    quote took minutes on a line of 160 KB."""
    unclosed = '"' + '\\"' * 1000
    found = protocol.STRING.match(unclosed)
    assert found is not None and found.end() == len(unclosed)
    assert judging.too_deep(("[" * 300 + unclosed).encode())


def test_plain_of_a_value_that_is_no_longer_data_is_the_products_failure() -> None:
    """Read again after a call, an object the product turned into something that is not data (its class
    reassigned) is not an empty object: the record is violated, naming it."""

    def predicate(record: Any, product: Any) -> bool:
        order = product.app.order()
        product.app.touch()
        return judging.plain(order) == {}

    child = Scripted(["v", "Order", obj(0, id=1)], ["v", "NoneType", None], ["o", 1, "Weird", "a Weird without fields"])
    found = judging.judge(predicate, b"{}", child, 1)
    assert found == judging.Judgement(
        False,
        "the product's answer Order read again is no product object with fields now (a Weird without fields)"
        + calls(
            "app.order() -> Order(id=1)",
            "app.touch() -> None",
            "<product value> read again -> <Weird: not data (a Weird without fields)>",
        ),
    )


def test_a_field_read_again_that_ran_product_code_leaves_nothing_else_as_it_was() -> None:
    """Answered "w" (the read ran a getter of the product's, which may change any object), every other
    value's fields are read again too; answered "v", they hold."""

    def predicate(record: Any, product: Any) -> bool:
        a, b = product.app.pair()
        product.app.touch()
        before = b.n  # read again, answered "v": it holds...
        first = a.n  # ...until a read again answered "w"
        return (before, first, b.n, b.n) == (5, 1, 7, 7)

    child = Scripted(
        ["v", "tuple", {protocol.TUPLE: [obj(0, n=0), obj(1, n=5)]}],
        ["v", "NoneType", None],
        ["v", "int", 5],
        ["w", "int", 1],
        ["v", "int", 7],
    )
    assert judging.judge(predicate, b"{}", child, 1) == judging.HOLDS
    assert [call for _, call in child.calls][2:] == [
        [{"r": [1, 1, "n"]}, [], {}],
        [{"r": [1, 0, "n"]}, [], {}],
        [{"r": [1, 1, "n"]}, [], {}],
    ]
