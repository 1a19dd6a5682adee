from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

from epoch_gate.runner import judging, protocol


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


def answer_of(data: object, first: int = 0) -> Any:
    """What a predicate gets for one answer `["v", first, "Totals", data]`."""
    got: list[object] = []
    judged(lambda record, product: got.append(product.app.f()) or True, ["v", first, "Totals", data])
    return got[0]


def test_a_product_value_reads_as_data_whatever_its_fields_are_named() -> None:
    """Fields are the value's own attributes; none of them, whatever its name, can stand in for a method
    or a slot of the value, so the value still refuses to decide anything."""
    value = answer_of(
        {
            "total": 5,
            "__eq__": True,
            "__hash__": 0,
            "__class__": "int",
            "__bool__": True,
            "__dict__": {},
            "_at": [9, 9, "Evil", "", None],
            "__deepcopy__": {},
            "lines": [{"gross": 2}],
            "owner": {"name": "x"},
        }
    )
    assert value.total == 5
    assert type(value) is judging.Remote and judging._at(value)[:3] == (1, 4, "Totals")
    for use in (lambda: value == 5, lambda: hash(value), lambda: bool(value), lambda: value < 1, lambda: str(value)):
        with pytest.raises(judging.HandleMisused):
            use()
    (line,) = value.lines
    assert isinstance(line, judging.Remote) and line.gross == 2
    assert isinstance(value.owner, judging.Remote) and value.owner.name == "x"
    assert judging.plain(value)["_at"] == [9, 9, "Evil", "", None]
    assert copy.deepcopy(value) is value  # the field `__deepcopy__` does not stand in for the runner's


def test_each_object_is_numbered_as_the_child_kept_it() -> None:
    """In the order its object closes, from the answer's first handle: the child's `kept` order."""
    value = answer_of({"a": {"x": 1}, "b": [{"y": 2}, {"z": {"w": 3}}]}, first=7)
    handles = [judging._at(v)[1] for v in (value.a, value.b[0], value.b[1].z, value.b[1], value)]
    assert handles == [7, 8, 9, 10, 11]


def test_a_list_reads_as_a_tuple_at_every_depth() -> None:
    value = answer_of({"grid": [[1, 2], [{"x": [3]}]]})
    assert value.grid[0] == (1, 2) and value.grid[1][0].x == (3,)
    assert judging.plain(value) == {"grid": [[1, 2], [{"x": [3]}]]}


def test_a_product_value_is_read_only() -> None:
    value = answer_of({"total": 5, "lines": [{"gross": 2}]})
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


def test_an_attribute_that_is_not_a_field_is_the_products_read_or_called_in_the_child() -> None:
    """`t.status_code` (a class attribute, a property) is read in the child when the predicate uses it,
    once per read the predicate wrote; `t.total.to_text()` is one call, of the part's method."""

    def predicate(record: Any, product: Any) -> bool:
        t = product.app.f(record)
        return t.status_code == 200 and t.total.to_text(2) == "5.00" and t.status_code + 1 == 201

    child = Scripted(
        ["v", 0, "Response", {"total": {"minor": 5}}],
        ["v", 2, "int", 200],
        ["v", 2, "str", "5.00"],
        ["v", 2, "int", 200],
    )
    assert judging.judge(predicate, b'{"id":1}', child, 3) == judging.HOLDS
    assert child.calls == [
        (3, [{"m": "app.f"}, [{"id": 1}], {}]),
        (3, [{"a": [3, 1, "status_code"]}, [], {}]),
        (3, [{"h": [3, 0, "to_text"]}, [2], {}]),
        (3, [{"a": [3, 1, "status_code"]}, [], {}]),
    ]


def test_an_attribute_that_is_not_data_fails_the_record_when_used_as_a_value() -> None:
    def predicate(record: Any, product: Any) -> bool:
        return product.app.f().handler == 1  # type: ignore[no-any-return]

    found = judged(predicate, ["v", 0, "T", {}], ["o", 1, "function", "a function"])
    assert found == judging.Judgement(False, "the product's answer T.handler is not data (a function)")


def test_a_value_from_an_earlier_record_is_the_predicates_mistake() -> None:
    kept: list[Any] = []

    def predicate(record: Any, product: Any) -> bool:
        if kept:
            return product.app.g(kept[0]) == 1  # type: ignore[no-any-return]
        kept.append(product.app.f())
        return True

    assert judged(predicate, ["v", 0, "T", {"a": 1}]) == judging.HOLDS
    found = judging.judge(predicate, b"{}", Scripted(), 2)
    assert found.error == "predicate-error" and "outside the run of the record" in found.detail


@pytest.mark.parametrize(
    "answer, expected",
    [
        (["x", ["ValueError", "Exception"], "bad", "  File x"], "the product raised ValueError: bad\n  File x"),
        (["v", 0, "T", {"total": 1}], "the product's answer T has no item 'missing'"),
    ],
)
def test_the_products_failure_violates_the_record(answer: object, expected: str) -> None:
    def predicate(record: Any, product: Any) -> bool:
        return product.app.f()["missing"] == 1  # type: ignore[no-any-return]

    assert judged(predicate, answer) == judging.Judgement(False, expected)


def test_refused_names_the_products_exception_by_class_or_base() -> None:
    def predicate(record: Any, product: Any) -> bool:
        return judging.refused(lambda: product.app.f(), "LookupError") and not judging.refused(
            lambda: product.app.f(), "TypeError"
        )

    raised = ["x", ["KeyError", "LookupError", "Exception", "BaseException"], "k", ""]
    assert judged(predicate, raised, raised) == judging.HOLDS


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
    found = judged(namespace["p"], ["v", 0, "T", {}])
    assert found.error == code and says in found.detail, found


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
    with pytest.raises(RuntimeError, match="broke: an object with a key twice"):
        judging.judge(predicate, b"{}", _Raw(b'["v",0,"T",{"a":1,"a":2}]'), 1)


class _Raw(Scripted):
    def __init__(self, payload: bytes) -> None:
        super().__init__()
        self.payload = payload

    def ask(self, scope: int, call: bytes) -> bytes:
        return self.payload


def test_an_oracle_error_whose_message_holds_a_product_value_is_shown_as_such() -> None:
    def predicate(record: Any, product: Any) -> bool:
        raise judging.OracleError(product.app.f())

    found = judged(predicate, ["v", 0, "T", {"total": 5}])
    assert found == judging.Judgement(False, "(its message could not be shown: HandleMisused)", "predicate-error")


def test_plain_reads_an_answer_as_deep_as_it_was_parsed() -> None:
    deep: dict[str, object] = {"leaf": 1}
    for _ in range(700):
        deep = {"next": deep, "tags": [1]}
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

    found = judged(predicate, ["v", 0, "int", 1])
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

    child = Scripted(["v", 4, "T", {"lines": [{"a": 1}, {"b": 2}]}], ["v", 7, "int", 1])
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
