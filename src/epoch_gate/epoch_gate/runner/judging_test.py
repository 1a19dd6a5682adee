from __future__ import annotations

import copy
import dis
import json
import tracemalloc

import pytest

from epoch_gate.runner import judging, protocol


def _answer(data: object) -> object:
    """An answer as the parent reads it off the channel: parsed with `part` as the object hook."""
    payload = json.dumps([["v", 0, "Totals", data, {}]]).encode()
    (answer,) = protocol.parse_answers(payload, 1, judging.part, judging.Remote)
    kind, value, home = judging.decode(1, answer)
    assert (kind, home) == ("value", (1, 0, "Totals"))
    return value


def test_a_product_value_reads_as_data_whatever_its_fields_are_named() -> None:
    """Fields are the value's own attributes; none of them, whatever its name, can stand in for a method
    or a slot of the value, so the value still refuses to decide anything."""
    value = _answer(
        {
            "total": 5,
            "__eq__": True,
            "__hash__": 0,
            "__class__": "int",
            "__bool__": True,
            "__dict__": {},
            "_at": [9, 9, "Evil", "", None, None],
            "__deepcopy__": {},
            "lines": [{"gross": 2}],
            "owner": {"name": "x"},
        }
    )
    assert value.total == 5  # type: ignore[attr-defined]
    assert type(value) is judging.Remote and judging._ref(value) == [1, 0, []]
    for use in (lambda: value == 5, lambda: hash(value), lambda: bool(value), lambda: value < 1, lambda: str(value)):
        with pytest.raises(judging.HandleMisused):
            use()
    (line,) = value.lines  # type: ignore[attr-defined]
    assert isinstance(line, judging.Remote) and line.gross == 2  # type: ignore[attr-defined]
    assert isinstance(value.owner, judging.Remote) and value.owner.name == "x"  # type: ignore[attr-defined]
    assert judging.plain(value)["_at"] == [9, 9, "Evil", "", None, None]
    assert copy.deepcopy(value) is value  # the field `__deepcopy__` does not stand in for the runner's


def test_a_list_reads_as_a_tuple_at_every_depth() -> None:
    value = _answer({"grid": [[1, 2], [{"x": [3]}]]})
    assert value.grid[0] == (1, 2) and value.grid[1][0].x == (3,)  # type: ignore[attr-defined]
    assert judging.plain(value) == {"grid": [[1, 2], [{"x": [3]}]]}


def test_a_product_value_is_read_only() -> None:
    """What a predicate reads is what the product answered, in every run of it: no run can change it for
    the next (how many runs a record gets depends on its batch), nor move a part it passes back."""
    value = _answer({"total": 5, "lines": [{"gross": 2}]})
    for change in (
        lambda: setattr(value, "total", 6),
        lambda: delattr(value, "total"),
        lambda: setattr(value.lines[0], "gross", 3),  # type: ignore[attr-defined]
        lambda: setattr(value, "_at", None),
    ):
        with pytest.raises(judging.HandleMisused):
            change()
    with pytest.raises(AttributeError):
        value.lines.sort()  # type: ignore[attr-defined]
    for view in (vars(value), value.__dict__, vars(value.lines[0])):  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            view.pop("total")  # type: ignore[attr-defined]
        with pytest.raises(TypeError):
            view["total"] = 6  # type: ignore[index]
    assert {"total", "lines"} <= set(dir(value))
    assert copy.copy(value) is value and copy.deepcopy(value.lines[0]) is value.lines[0]  # type: ignore[attr-defined]
    assert judging.plain(value) == {"total": 5, "lines": [{"gross": 2}]}


def test_a_part_passed_back_is_found_where_the_child_holds_it() -> None:
    """A part knows nothing of where it is until it is passed back: it is found among the run's answers."""
    session = judging.Session()
    session.log.append((b"call", ("value", _answer({"lines": [{"gross": 2}, {"gross": 3}]}), (1, 0, "Totals"))))
    (kind, root, home) = session.log[0][1]
    judging.Session.current = session
    try:
        assert judging._ref(root.lines[1]) == [1, 0, ["lines", 1]]  # type: ignore[attr-defined]
        assert repr(root.lines[1]) == "<product Totals.lines[1]>"  # type: ignore[attr-defined]
        stray = _answer({"a": {"b": 1}}).a  # type: ignore[attr-defined]
        with pytest.raises(judging.OracleError, match="outside the run of the record"):
            judging._ref(stray)
    finally:
        judging.Session.current = None


def test_each_answer_is_walked_once_however_many_of_its_parts_are_passed_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walked: list[object] = []
    hold = judging._hold
    monkeypatch.setattr(judging, "_hold", lambda held, node, home: walked.append(node) or hold(held, node, home))
    session = judging.Session()
    first = _answer({"lines": [{"gross": n} for n in range(50)]})
    session.log.append((b"first", ("value", first, (1, 0, "Totals"))))
    session.log.append((b"a number", ("value", 7, None)))
    judging.Session.current = session
    try:
        for n in range(50):
            assert judging._ref(first.lines[n]) == [1, 0, ["lines", n]]  # type: ignore[attr-defined]
        own = judging._where(first)[4]  # type: ignore[index]
        assert list(map(id, walked)) == [id(first), id(own)]  # its fields, and its own properties
        # A later answer is walked when it comes, and only it.
        second = _answer({"lines": [{"gross": 9}]})
        session.log.append((b"second", ("value", second, (1, 1, "Totals"))))
        assert judging._ref(second.lines[0]) == [1, 1, ["lines", 0]]  # type: ignore[attr-defined]
        assert judging._ref(first.lines[3]) == [1, 0, ["lines", 3]]  # type: ignore[attr-defined]
        assert list(map(id, walked)) == [id(first), id(own), id(second), id(judging._where(second)[4])]  # type: ignore[index]
        # The log cleared (a run again on whole answers): a part of the run before is no part of this one,
        # even once the log is as long as it was.
        session.log.clear()
        third = _answer({"lines": [{"gross": 1}]})
        session.log += [(b"third", ("value", third, (2, 0, "Totals"))), (b"a number", ("value", 7, None))]
        with pytest.raises(judging.OracleError, match="outside the run of the record"):
            judging._ref(first.lines[3])  # type: ignore[attr-defined]
        assert judging._ref(third.lines[0]) == [2, 0, ["lines", 0]]  # type: ignore[attr-defined]
    finally:
        judging.Session.current = None


def test_a_cycle_the_predicate_made_is_walked_once() -> None:
    session = judging.Session()
    root = _answer({"lines": [{"gross": 2}]})
    session.log.append((b"call", ("value", root, (1, 0, "Totals"))))
    judging.fields_of(root)["me"] = root  # a Remote refuses change: only the runner's own access makes a cycle
    judging.Session.current = session
    try:
        assert judging._ref(root.lines[0]) == [1, 0, ["lines", 0]]  # type: ignore[attr-defined]
        with pytest.raises(judging.OracleError, match="holds itself"):
            judging.plain(root)
    finally:
        judging.Session.current = None


def test_plain_reads_an_answer_as_deep_as_it_was_parsed() -> None:
    deep: dict[str, object] = {"leaf": 1}
    for _ in range(700):
        deep = {"next": deep, "tags": [1]}
    value = judging.plain(_answer(deep))
    for _ in range(700):
        assert value["tags"] == [1]  # type: ignore[index]
        value = value["next"]  # type: ignore[index]
    assert value == {"leaf": 1}


def test_an_oracle_error_whose_message_holds_a_product_value_is_shown_as_such() -> None:
    root = _answer({"total": 5})

    def predicate(record: object, product: object) -> bool:
        raise judging.OracleError(root)

    verdict = judging.run(predicate, b"{}", judging.Session())
    assert verdict is not None and verdict.error == "predicate-error"
    assert verdict.detail == "(its message could not be shown: HandleMisused)"


OPENS = (
    "def p(record, product):\n    return product.app.f(record) > 0",
    "def p(record, product):\n    t = product.app.sub.f(record)\n    return t.x == 1",
    "def p(order, store):\n    return store.f(order).total >= 0",
    "p = lambda record, product: product.app.f(record) == 1",
)
DOES_NOT_OPEN = (
    "def p(record, product):\n    record['x'] = 1\n    return product.app.f(record) > 0",
    "def p(record, product):\n    return product.app.f(dict(record)) > 0",
    "def p(record, product):\n    return product.app.f(record, 1) > 0",
    "def p(record, product):\n    return product.app.f(record=record) > 0",
    "def p(record, product):\n    return product(record)",
    "def p(record, product):\n    yield product.app.f(record)",
    "def p(record, product):\n    g = lambda: record\n    return product.app.f(record) > 0",  # a cell
    "def p(product, record):\n    return product.app.f(record) > 0",  # the other way round
    "def p(record, product):\n    return helpers.f(record)",
)


@pytest.mark.parametrize("source", [*OPENS, *DOES_NOT_OPEN])
def test_the_opening_call_is_found_only_when_nothing_of_the_predicate_runs_before_it(source: str) -> None:
    namespace: dict[str, object] = {}
    exec(source, namespace)
    predicate = namespace["p"]
    found = judging.opening(predicate)
    if source in OPENS:
        assert found is not None and found[0] is predicate.__code__  # type: ignore[attr-defined]
        (call,) = [i for i in dis.get_instructions(found[0]) if i.offset == found[1]]
        assert (call.opname, call.argval) == ("CALL_METHOD", 1)
    else:
        assert found is None


def test_a_wrapper_that_shows_its_functions_code_has_no_opening() -> None:
    """A decorator object that forwards attributes to the function it wraps (as wrapt's do) shows that
    function's code, but its call runs its own first (here: it changes the record)."""

    def wrapped(record: dict[str, object], product: judging.Product) -> bool:
        return product.app.f(record) is True  # type: ignore[attr-defined,no-any-return]

    class Defaults:
        def __getattr__(self, name: str) -> object:
            return getattr(wrapped, name)

        def __call__(self, record: dict[str, object], product: judging.Product) -> bool:
            return wrapped({**record, "currency": "EUR"}, product)

    assert judging.opening(wrapped) is not None and judging.opening(Defaults()) is None


@pytest.mark.parametrize(
    "argument, refused",
    [
        (["\u0000ref"], False),  # text, not a key
        ({"name": "\u0000ref"}, False),
        ({"\u0000ref": 1, "other": 2}, False),  # the child reads a reference only from the key alone
        ({"\u0000ref": [1, 0, []]}, True),
        ([{"x": {"\u0000ref": 1}}], True),
    ],
)
def test_only_data_the_child_would_read_as_a_reference_is_refused(argument: object, refused: bool) -> None:
    def predicate(record: object, product: judging.Product) -> bool:
        return product.app.f(argument) == 1  # type: ignore[attr-defined,no-any-return]

    session = judging.Session()
    verdict = judging.run(predicate, b"{}", session)
    if refused:
        assert verdict is not None and verdict.error == "predicate-error"
        assert verdict.detail == (
            'an argument of app.f is not data: it holds the key "\\u0000ref", which the protocol keeps for a '
            "product value"
        )
    else:
        assert verdict is None and session.pending is not None  # the call is sent


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16-le", "utf-32"])
@pytest.mark.parametrize("depth, malformed", [(256, False), (257, True), (990, True)])
def test_a_record_nested_too_deep_is_malformed_before_any_parse(depth: int, malformed: bool, encoding: str) -> None:
    """However deep the stack a run starts from (a first run, a rerun), the same record gets the same
    verdict: the depth is counted, strings aside, in the encoding json.loads reads, before the parser
    could run out of stack."""
    raw = ("[" * depth + '"]\\"]]{[["' + "]" * depth).encode(encoding)

    def predicate(record: object, product: judging.Product) -> bool:
        return True

    verdict = judging.run(predicate, raw, judging.Session())
    if malformed:
        assert verdict == judging.Verdict(False, "the record is nested deeper than 256", "artifact-malformed")
    else:
        assert verdict == judging.HELD


def test_the_depth_of_a_malformed_line_is_counted_in_one_pass() -> None:
    """An unclosed string runs to the end of the line: a scan that looked for its end from every escaped
    quote took minutes on a line of 160 KB."""
    unclosed = '"' + '\\"' * 1000
    found = protocol.STRING.match(unclosed)
    assert found is not None and found.end() == len(unclosed)
    assert judging.too_deep(("[" * 300 + unclosed).encode())


def _judged(predicate: object, data: object, own: object = None) -> tuple[judging.Session, judging.Verdict]:
    """A record's session judged on a whole answer to its one call (`app.f(record)`), as the parent ends
    it, and its verdict."""
    payload = json.dumps([["v", 0, "Totals", data, own or {}]]).encode()
    (answer,) = protocol.parse_answers(payload, 1, judging.part, judging.Remote)
    done = judging.Session()
    raw = b'{"id": 1}'
    assert judging.run(predicate, raw, done) is None  # type: ignore[arg-type]
    assert done.pending is not None
    done.log.append((done.pending, judging.decode(1, answer)))
    verdict = judging.run(predicate, raw, done)  # type: ignore[arg-type]
    assert verdict is not None
    return done, verdict


WHOLE_ANSWER = {"total": {"minor": 5, "currency": "EUR"}, "lines": [{"gross": {"minor": 2}, "sku": "a"}], "note": "x"}


@pytest.mark.parametrize(
    "body, names",
    [
        ("return t.total.minor == 5", {"total", "minor"}),
        ("return t.lines[0].gross.minor == 2 and t.total.minor == 5", {"lines", "gross", "minor", "total"}),
        ("return t.count == 1", {"count"}),  # an own property
        ('return t["total"]["minor"] == 5', {"total", "minor"}),
        ('return hasattr(t, "absent")', {"absent"}),
        ("return t.lines[0].sku.upper() == 'A'", {"lines", "sku"}),
        # a whole value: every field crosses, and the properties read
        ("return judging.plain(t.total)['minor'] == 5", {"total", judging.WHOLE}),
        ("return len(vars(t)) == 3 and t.count == 1", {judging.WHOLE, "count"}),
        ('return "total" in dir(t)', {judging.WHOLE}),
        # read past the runner (an attribute lookup of its own): the names do not judge it as whole
        # answers did, so the answers cross whole
        ('return object.__getattribute__(t, "note") == "x"', None),
        ('return judging.fields_of(t).get("note") == "x"', None),
    ],
)
def test_the_names_a_predicate_reads_are_learned_from_its_whole_answers(body: str, names: object) -> None:
    source = f"def predicate(record, product):\n    t = product.app.f(record)\n    {body}\n"
    scope: dict[str, object] = {"judging": judging}
    exec(compile(source, "<predicate>", "exec"), scope)
    done, verdict = _judged(scope["predicate"], WHOLE_ANSWER, {"count": 1})
    assert verdict == judging.HELD
    found = judging.reads(scope["predicate"], b'{"id": 1}', done, verdict, None)  # type: ignore[arg-type]
    assert found == (None if names is None else frozenset(names))
    if found is not None:  # learned from what is known already, the same
        again = judging.reads(scope["predicate"], b'{"id": 1}', done, verdict, None, frozenset({"x"}))  # type: ignore[arg-type]
        assert again == found | {"x"}


def test_a_run_that_reads_a_name_its_answers_lack_runs_again_on_whole_answers() -> None:
    def predicate(record: object, product: judging.Product) -> bool:
        t = product.app.f(record)  # type: ignore[attr-defined]
        try:
            return t.note == "x"  # type: ignore[no-any-return]
        except:  # noqa: E722 - swallows what the runner raises too: noticed all the same
            return False

    session = judging.Session()
    session.projection = frozenset({"total"})
    raw = b'{"id": 1}'
    assert judging.run(predicate, raw, session) is None
    payload = json.dumps([["v", 0, "Totals", {"total": 5}, {}]]).encode()
    (answer,) = protocol.parse_answers(payload, 1, judging.part, judging.Remote)
    session.log.append((session.pending, judging.decode(1, answer)))  # type: ignore[arg-type]
    # It read `note`, which its projected answer was not asked for: its first call again, for a whole answer
    assert judging.run(predicate, raw, session) is None
    assert (session.missed, session.projection, session.log, session.speculative) == ("note", None, [], False)
    assert session.pending == b'[{"m":"app.f"},[{"id":1}],{}]'


def test_a_field_whose_name_starts_with_two_underscores_is_learned_too() -> None:
    """A dict's key may read as such a field: a predicate that probes for it is run again on whole answers
    when its projected answer lacks it, as for any other name."""

    def predicate(record: object, product: judging.Product) -> bool:
        t = product.app.f(record)  # type: ignore[attr-defined]
        return getattr(t, "__typename", "Order") == "Order"

    done, verdict = _judged(predicate, {"__typename": "Order", "total": 1})
    assert judging.reads(predicate, b'{"id": 1}', done, verdict, None) == frozenset({"__typename"})


@pytest.mark.parametrize(
    "data",
    [
        [{}] * 20_000,
        [[]] * 20_000,
        [[1]] * 20_000,
        [[[[[]]]]] * 5_000,
        [100_000 + n for n in range(20_000)],
        [1.5] * 20_000,
        ["ab"] * 20_000,
        [{"sku": "s1", "qty": 1000 + n, "price": {"minor": n, "currency": "EUR"}} for n in range(5_000)],
        [{f"k{n}": n for n in range(50)}] * 500,
        ["a" * 1000 + "\U0001f600"] * 200,  # one character beyond the BMP: 4 bytes for each of its string's
        ["\u00e9t\u00e9"] * 20_000,
    ],
    ids=[
        *("objects", "lists", "one_item_lists", "nested_lists", "ints", "floats", "texts", "records", "wide_objects"),
        *("a_text_beyond_the_bmp", "latin_texts"),
    ],
)
def test_the_estimate_of_what_parsed_answers_hold_errs_high(data: object) -> None:
    """What a batch's answers take once parsed, at the parse's peak, is never more than `parsed_cost` says."""
    payload = json.dumps([["v", 0, "T", data, {}]], separators=(",", ":")).encode()
    tracemalloc.start()
    try:
        (answer,) = protocol.parse_answers(payload, 1, judging.part, judging.Remote)
        judging.decode(1, answer)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= protocol.parsed_cost(payload)


def test_a_field_named_like_an_attribute_of_every_answers_class_is_not_learned_but_always_crosses() -> None:
    def predicate(record: object, product: judging.Product) -> bool:
        t = product.app.f(record)  # type: ignore[attr-defined]
        return t.__module__ == "the label" and t.total == 1  # type: ignore[no-any-return]

    done, verdict = _judged(predicate, {"__module__": "the label", "total": 1})
    assert verdict == judging.HELD
    # Its trial reads the field as the child sends it: projection stays on, with only `total` learned.
    assert judging.reads(predicate, b'{"id": 1}', done, verdict, None) == frozenset({"total"})
    assert "__module__" in judging.SHADOWED
