"""The judges' side of the boundary: a record's judgement, and what a predicate holds of the product.

A predicate is `predicate(record, product) -> bool` and runs in the parent, which never imports product
code, once per record, as ordinary Python. `product` names the product's callables:
`product.orders.totals.totals_from_record(record)` asks the child to make that call, and the predicate
waits for the answer (one call, one answer, in turn: `protocol`). A number or text comes back as it is,
a list as a tuple of its parts, and an object as a `Remote`: its fields read as the parent's own plain
values (`t.subtotal.minor` is an `int` parsed here); any other attribute is the product's, read or called
in the child when the predicate uses it (`t.discount_total`, `m.allocate([1, 2])`), as are operators
(`a + b`); and it can be passed back as an argument. A `Remote` itself is never compared, hashed,
iterated, converted, truth-tested or turned into text: each of those raises `HandleMisused`, so no method
of the product's ever decides anything (compare its fields, or `plain(value)`).

The product's failures are the record's: an exception it raises surfaces in the predicate as
`ProductRaised` (test an expected refusal with `refused`), and an uncaught one, or an answer that is not
the data the predicate reads, violates the record. The predicate's own errors are the oracle's.
"""

from __future__ import annotations

import json
import operator
import threading
import traceback
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from types import MappingProxyType
from typing import Any, Callable, Optional, Protocol, Sequence, Union

from epoch_gate.runner import protocol
from epoch_gate.runner.protocol import REF
from epoch_gate.text import from_os

MAX_DETAIL = 2000
MAX_DEPTH = 256  # a record's nesting: far enough below Python's recursion limit for every parse of it


class ProductFailure(Exception):
    """The product failed on the record: the record violates the property."""

    def describe(self) -> str:
        return str(self)


class ProductRaised(ProductFailure):
    """A product call raised. `types`: its exception's class names, most derived first."""

    def __init__(self, types: tuple[str, ...], message: str, product_traceback: str) -> None:
        super().__init__(f"{types[0] if types else 'an exception'}: {message}")
        self.types, self.message, self.product_traceback = types, message, product_traceback

    def describe(self) -> str:
        return f"the product raised {self}\n{self.product_traceback}".rstrip()


class NotData(ProductFailure):
    """The product's answer is not the data the predicate reads: not data at all, or without that field."""

    def describe(self) -> str:
        return f"the product's answer {self}"


class OracleError(Exception):
    """The predicate's own mistake: an argument that is not data, a call that names nothing."""


class HandleMisused(OracleError):
    """A product value was compared, hashed, iterated, converted or truth-tested as if it were data."""


class Child(Protocol):
    """Where a record's calls go: one call, one answer (`channel.Channel`)."""

    def ask(self, scope: int, call: bytes) -> bytes: ...

    def broke(self, why: str) -> BaseException:
        """Ends the child, which broke the protocol: the failure to raise."""


class _Stopped(BaseException):
    """The child failed during a call: the record's run stops (a BaseException, so that a predicate's
    `except Exception` cannot carry on with it; one that swallows it anyway is noticed: `Run.failed`)."""


class Run:
    """One record's run of a predicate: the child its calls go to, the scope its answers live in there,
    the references the run has made (`_encode_ref`) and the child's failure, if any."""

    __slots__ = ("child", "scope", "references", "failed")

    def __init__(self, child: Child, scope: int) -> None:
        self.child, self.scope, self.references = child, scope, 0
        self.failed: Optional[BaseException] = None


_running = threading.local()  # `.run`: the Run of this thread's predicate (each child has a thread of its own)


def _current() -> Run:
    run: Optional[Run] = getattr(_running, "run", None)
    if run is None:
        raise OracleError("a product call outside a predicate's run")
    return run


def _misuse(what: str) -> Callable[..., Any]:
    def refuse(self: object, *_: object) -> Any:
        raise HandleMisused(
            f"{self!r} used {what}: a product value is never compared, hashed, iterated, "
            "converted or truth-tested; read its fields, or plain(value)"
        )

    return refuse


def _operator(name: str, reflected: bool = False) -> Callable[..., Any]:
    def apply(self: Remote, *other: object) -> Any:
        args = (*other, self) if reflected else (self, *other)
        return _call({"op": name}, args, {})

    return apply


class _Refusing:
    """Every way Python could ask an object for a value or a decision, refused."""

    __slots__ = ()
    __eq__ = __ne__ = _misuse("in a comparison (==, !=)")
    __lt__ = __le__ = __gt__ = __ge__ = _misuse("in an ordering (<, <=, >, >=)")
    __hash__ = _misuse("as a hash key (a set, a dict key)")  # type: ignore[assignment]
    __bool__ = _misuse("as a truth value (if, and, or, not)")
    __iter__ = _misuse("as an iterable")
    __len__ = _misuse("as a sized collection")
    __contains__ = _misuse("with `in`")
    __int__ = __index__ = _misuse("as an int")
    __float__ = __complex__ = __round__ = _misuse("as a number")
    __reversed__ = _misuse("as a sequence")
    __str__ = __format__ = _misuse("as text (str, format, an f-string)")


class _Held(_Refusing):
    """Where a Remote keeps its fields and where the child holds it: slots no field can shadow, and a
    field dict that only this module reaches (`fields_of`); `vars()` and `__dict__` give a read-only view."""

    __slots__ = ("_at", "__dict__")


# Where the child holds a value: scope, handle, its class name, why it is not data ("" for data), and its
# data when that is not its fields (FIELDS): a Decimal's text, an Enum's value
At = tuple[int, int, str, str, object]
FIELDS = object()


class Remote(_Held):
    """A value the product returned, or an object inside one: data to read, a handle to pass back or call.

    Its fields are its own attributes (a field read is Python's own attribute lookup, with no call of
    ours); any other public attribute is an `Attribute`, the product's to read or call. `_at` (a slot,
    which no field can shadow) says where the child holds it. It refuses assignment: a predicate reads
    what the product answered."""

    __slots__ = ()

    @property
    def __dict__(self) -> MappingProxyType[str, object]:  # type: ignore[override]
        return MappingProxyType(fields_of(self))

    def __repr__(self) -> str:
        return f"<product {_at(self)[2]}>"

    def __getattr__(self, name: str) -> Any:  # only for a name that is not a field
        if name.startswith("__"):
            raise AttributeError(name)
        return Attribute(self, name)

    def __getitem__(self, key: str) -> Any:
        fields = fields_of(self)
        if type(key) is not str or key not in fields:
            why = _at(self)[3]
            raise NotData(f"{_at(self)[2]} has no item {key!r}" + (f" ({why})" if why else ""))
        return fields[key]

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _call({"h": _ref(self)}, args, kwargs)

    def __copy__(self) -> Remote:  # looked up on the class: no field can stand in for it
        return self  # read-only: a copy would be the same value

    # copy.deepcopy looks it up on the value itself, where a field would win over a method, not a property
    __deepcopy__ = property(lambda self: lambda memo: self)

    def __dir__(self) -> list[str]:
        return sorted({*fields_of(self), *dir(type(self))})

    def __setattr__(self, name: str, value: object) -> None:
        raise HandleMisused(f"{self!r} changed (.{name} =): a product value is read as it was answered")

    def __delattr__(self, name: str) -> None:
        raise HandleMisused(f"{self!r} changed (del .{name}): a product value is read as it was answered")

    __add__, __radd__ = _operator("add"), _operator("add", reflected=True)
    __sub__, __rsub__ = _operator("sub"), _operator("sub", reflected=True)
    __mul__, __rmul__ = _operator("mul"), _operator("mul", reflected=True)
    __truediv__, __rtruediv__ = _operator("truediv"), _operator("truediv", reflected=True)
    __floordiv__, __rfloordiv__ = _operator("floordiv"), _operator("floordiv", reflected=True)
    __mod__, __rmod__ = _operator("mod"), _operator("mod", reflected=True)
    __pow__, __rpow__ = _operator("pow"), _operator("pow", reflected=True)
    __neg__, __pos__, __abs__ = _operator("neg"), _operator("pos"), _operator("abs")


_new = object.__new__
_set_fields = _Held.__dict__["__dict__"].__set__
_get_fields = _Held.__dict__["__dict__"].__get__
_set_at = _Held.__dict__["_at"].__set__
_get_at = _Held.__dict__["_at"].__get__


def fields_of(value: Remote) -> dict[str, object]:
    """The value's own field dict (the parent's parse of the answer): to read, never to change."""
    return _get_fields(value, _Held)  # type: ignore[no-any-return]


def _at(value: Remote) -> At:
    return _get_at(value, _Held)  # type: ignore[no-any-return]


def _ref(value: Remote) -> list[int]:
    """[scope, handle] of a value of the current run (one of an earlier record's is the predicate's
    mistake: the child no longer holds it)."""
    scope, handle = _at(value)[:2]
    if scope != _current().scope:
        raise OracleError("a product value used outside the run of the record it was answered for")
    return [scope, handle]


class Attribute(_Refusing):
    """`value.name` where the value's fields have no `name`: the product's attribute, called in the child
    when the predicate calls it, or read there the first time the predicate uses it as a value (a
    property, a class attribute, a method's result)."""

    __slots__ = ("_of", "_name", "_read")

    def __init__(self, of: Remote, name: str) -> None:
        self._of, self._name = of, name

    def __repr__(self) -> str:
        return f"<product {_at(self._of)[2]}.{self._name}>"

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _call({"h": [*_ref(self._of), self._name]}, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._got(), name)

    def __getitem__(self, key: object) -> Any:
        return self._value()[key]

    def _got(self) -> Any:
        """The attribute as the product reads it (once per `value.name` the predicate wrote)."""
        try:
            return object.__getattribute__(self, "_read")
        except AttributeError:
            read = _call({"a": [*_ref(self._of), self._name]}, (), {})
            object.__setattr__(self, "_read", read)
            return read

    def _value(self) -> Any:
        """The attribute used as a value: the product's failure when it is not data."""
        found = self._got()
        if type(found) is Remote and _at(found)[3]:
            raise NotData(f"{_at(self._of)[2]}.{self._name} is not data ({_at(found)[3]})")
        return found


def _through(name: str) -> Callable[..., Any]:
    def apply(self: Attribute, *args: object) -> Any:
        return getattr(operator, name)(self._value(), *args)

    return apply


def _reflected(name: str) -> Callable[..., Any]:
    def apply(self: Attribute, other: object) -> Any:
        return getattr(operator, name)(other, self._value())

    return apply


# An attribute used as a value is that value: read it, then do what was asked of it (which a product
# value refuses in its turn).
for _dunder in ("eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(Attribute, f"__{_dunder}__", _through(_dunder))
for _dunder in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(Attribute, f"__r{_dunder}__", _reflected(_dunder))
Attribute.__contains__ = lambda self, item: item in self._value()  # type: ignore[assignment]
Attribute.__neg__ = lambda self: -self._value()  # type: ignore[assignment]
Attribute.__pos__ = lambda self: +self._value()  # type: ignore[assignment]
Attribute.__abs__ = lambda self: abs(self._value())  # type: ignore[assignment]
Attribute.__bool__ = lambda self: bool(self._value())  # type: ignore[assignment]
Attribute.__hash__ = lambda self: hash(self._value())  # type: ignore[assignment]
Attribute.__iter__ = lambda self: iter(self._value())  # type: ignore[assignment]
Attribute.__len__ = lambda self: len(self._value())  # type: ignore[assignment]
Attribute.__int__ = lambda self: int(self._value())  # type: ignore[assignment]
Attribute.__index__ = lambda self: operator.index(self._value())  # type: ignore[assignment]
Attribute.__float__ = lambda self: float(self._value())  # type: ignore[assignment]
Attribute.__round__ = lambda self, *n: round(self._value(), *n)  # type: ignore[assignment]
Attribute.__reversed__ = lambda self: reversed(self._value())  # type: ignore[assignment]
Attribute.__str__ = lambda self: str(self._value())  # type: ignore[assignment]
Attribute.__format__ = lambda self, spec: format(self._value(), spec)  # type: ignore[assignment]


class Name(_Refusing):
    """`product.pkg.module.function`: a name the child imports, called like the function."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<product {self._name}>"

    def __getattr__(self, name: str) -> Name:
        if name.startswith("__"):
            raise AttributeError(name)
        return Name(f"{self._name}.{name}")

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _call({"m": self._name}, args, kwargs)


class Product:
    """The `product` a predicate is given: `product.<top-level name>...` names a product callable."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Name:
        if name.startswith("__"):
            raise AttributeError(name)
        return Name(name)

    def __repr__(self) -> str:
        return "<product>"


PRODUCT = Product()


def plain(value: Any) -> Any:
    """A product value's data as the parent's own plain values (dicts and lists), to compare whole
    (without recursion: as deep as the answer)."""
    if isinstance(value, Attribute):
        value = value._value()
    if type(value) not in (Remote, list, tuple):
        return value
    made: dict[int, object] = {}
    walking: set[int] = set()
    pending: list[tuple[object, bool]] = [(value, False)]
    while pending:
        node, walked = pending.pop()
        if type(node) is not Remote and type(node) is not list and type(node) is not tuple:
            continue
        key = id(node)
        if walked:
            walking.discard(key)
            made[key] = _plain_one(node, made)  # type: ignore[arg-type]
        elif key not in made:
            if key in walking:
                raise OracleError("plain() of a product value that holds itself (a cycle the predicate made)")
            walking.add(key)
            pending.append((node, True))
            items = _parts(node)  # type: ignore[arg-type]
            pending += [(item, False) for item in items]  # type: ignore[union-attr]
    return made[id(value)]


def _plain_one(node: Union[Remote, list[object], tuple[object, ...]], made: dict[int, object]) -> object:
    """One object, list or tuple as plain data (a list of its own), the parts below it already made."""

    def plain_part(item: object) -> object:
        if type(item) in (Remote, list, tuple):
            return made[id(item)]
        return plain(item) if isinstance(item, Attribute) else item

    if type(node) is not Remote:
        return [plain_part(item) for item in node]
    why = _at(node)[3]  # type: ignore[arg-type]
    if why:
        raise NotData(f"{_at(node)[2]} is not data ({why})")  # type: ignore[arg-type]
    data = _at(node)[4]  # type: ignore[arg-type]
    if data is not FIELDS:
        return plain_part(data)
    return {key: plain_part(item) for key, item in fields_of(node).items()}  # type: ignore[arg-type]


def _parts(node: Union[Remote, list[object], tuple[object, ...]]) -> Any:
    """What `plain` reads below a node: a list's items, an object's fields, or a value's data."""
    if type(node) is not Remote:
        return node
    data = _at(node)[4]  # type: ignore[arg-type]
    return fields_of(node).values() if data is FIELDS else (data,)  # type: ignore[arg-type]


def refused(call: Callable[[], object], *names: str) -> bool:
    """True when the product call raises an exception of one of the classes `names` (by name, bases
    included; any exception when none is named). Returning, or raising another one, is False."""
    try:
        call()
    except ProductRaised as exc:
        return not names or any(name in exc.types for name in names)
    return False


# --- calls and answers -------------------------------------------------------------------------------------

_REF_KEY = json.dumps(REF).encode()  # how a reference's key reads in an encoded call


def _encode_ref(value: object) -> object:
    if isinstance(value, Attribute):
        value = value._value()
        if type(value) is not Remote:
            return value
    if isinstance(value, Remote):
        _current().references += 1
        return {REF: _ref(value)}
    if isinstance(value, Name):
        raise OracleError(f"{value!r} passed as an argument: pass what it returns")
    raise TypeError(f"a {type(value).__name__} is not data")


# json.dumps with `_encode_ref` as its default, no NaN, no spaces, ASCII: the C encoder made once and called
# directly, without looking for cycles (a cyclic argument is nested too deeply: RecursionError).
_chunks: Callable[[object, int], Sequence[str]] = (
    c_make_encoder(None, _encode_ref, encode_basestring_ascii, None, ":", ",", False, False, False)
    if c_make_encoder is not None
    else lambda value, _: [
        json.JSONEncoder(default=_encode_ref, allow_nan=False, check_circular=False, separators=(",", ":")).encode(
            value
        )
    ]
)


def _dump(value: object) -> bytes:
    return "".join(_chunks(value, 0)).encode()


def encode_call(target: dict[str, object], args: tuple[object, ...], kwargs: dict[str, object]) -> bytes:
    """The call as JSON bytes, each argument as it is now (a record the predicate changed crosses changed).
    Data that the child would read as a reference (an object whose only key is the protocol's) is not data."""
    run = _current()
    made = run.references
    encoded = _dump([target, list(args), kwargs])
    made = run.references - made
    if encoded.count(_REF_KEY) != made and _references(encoded) != made:  # parsed only when the text shows one
        raise ValueError(f"it holds the key {_REF_KEY.decode()}, which the protocol keeps for a product value")
    return encoded


def _references(encoded: bytes) -> int:
    """How many objects of the encoded call the child reads as references: those whose only key is REF."""
    found = [0]

    def count(fields: dict[str, object]) -> dict[str, object]:
        found[0] += len(fields) == 1 and REF in fields
        return fields

    json.loads(encoded, object_hook=count)
    return found[0]


def _describe(target: dict[str, object]) -> str:
    ((kind, value),) = target.items()
    if kind == "m":
        return str(value)
    if kind == "op":
        return f"the operator {value}"
    return "a product value's attribute" if len(value) == 3 else "a product value"  # type: ignore[arg-type]


def _call(target: dict[str, object], args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
    """One product call: sent to the child of the current run, answered before the predicate goes on."""
    run = _current()
    try:
        encoded = encode_call(target, args, kwargs)
    except (TypeError, ValueError, RecursionError) as exc:
        raise OracleError(f"an argument of {_describe(target)} is not data: {exc}") from None
    try:
        payload = run.child.ask(run.scope, encoded)
    except Exception as failed:  # noqa: BLE001 - the child failed (channel.ChildFailed): the run stops
        run.failed = failed
        raise _Stopped from None
    try:
        return decode(run.scope, payload)
    except protocol.ProtocolError as exc:
        run.failed = run.child.broke(str(exc))
        raise _Stopped from None


def _part(fields: dict[str, object]) -> Remote:
    """An object of an answer, as it is parsed: a Remote whose attributes are its fields, a list among them
    a tuple of its parts (set through the slots' own descriptors: a Remote refuses assignment)."""
    for key, item in fields.items():
        if type(item) is list:
            fields[key] = _tuple(item)
    value = _new(Remote)
    _set_fields(value, fields)
    _parsed.objects.append(value)
    return value


_parsed = threading.local()  # `.objects`: the Remotes of the answer being parsed, in the order they closed


def _tuple(top: list[object]) -> tuple[object, ...]:
    """The list as a tuple, and every list in it (without recursion: as deep as the parser went)."""
    if list not in map(type, top):
        return tuple(top)
    order, pending = [], [top]
    while pending:  # every list below, each after the list holding it (parsed JSON shares no list)
        items = pending.pop()
        order.append(items)
        pending += [item for item in items if type(item) is list]
    made: dict[int, tuple[object, ...]] = {}
    for items in reversed(order):
        made[id(items)] = tuple([made[id(item)] if type(item) is list else item for item in items])
    return made[id(top)]


def decode(scope: int, payload: bytes) -> Any:
    """One answer as the predicate gets it: a number or text as it is, a list as a tuple of its parts, an
    object as a Remote (each object inside it too, numbered from the answer's first handle in the order it
    closed, as the child kept them); the product's exception raised as ProductRaised."""
    _parsed.objects = []
    answer = protocol.parse_answer(payload, _part)
    kind = answer[0]
    if kind == "v":
        _, first, type_name, data = answer
        objects = _parsed.objects
        for handle, value in enumerate(objects, first):
            _set_at(value, (scope, handle, "product value", "", FIELDS))
        if type(data) is Remote:
            _set_at(data, (scope, first + len(objects) - 1, type_name, "", FIELDS))
        return _tuple(data) if type(data) is list else data
    if kind == "d":
        _, handle, type_name, data = answer
        value = _new(Remote)
        _set_fields(value, {})
        _set_at(value, (scope, handle, type_name, "", _tuple(data) if type(data) is list else data))
        return value
    if kind == "o":
        _, handle, type_name, why = answer
        value = _new(Remote)
        _set_fields(value, {})
        _set_at(value, (scope, handle, type_name, why or "not data", FIELDS))
        return value
    if kind == "x":
        raise ProductRaised(tuple(answer[1]), answer[2], answer[3])
    raise OracleError(f"the call does not resolve in the product: {answer[1]}")


# --- a record's judgement ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """One record's judgement: it holds, it is violated (with why), or the oracle failed (its code, why)."""

    holds: bool
    detail: str = ""
    error: str = ""  # a reasons.Code value: the property cannot be judged


HOLDS = Judgement(True)
PREDICATE_ERROR, HANDLE_MISUSED, ARTIFACT_MALFORMED = "predicate-error", "handle-misused", "artifact-malformed"


def judge(predicate: Callable[[object, Product], object], raw: bytes, child: Child, scope: int) -> Judgement:
    """The record's judgement, top to bottom:

    1. a record nested deeper than MAX_DEPTH, or that is not JSON, is malformed (the oracle's artifact);
    2. the predicate runs once on the parsed record, as ordinary Python; each product call it makes goes to
       `child` in `scope` and is answered before it goes on;
    3. a child that failed meanwhile fails the replay (`failed` is raised), whatever the predicate did;
    4. True holds and False violates; the product's failure (it raised, or answered other than the data
       the predicate read) violates; any other failure is the predicate's own, the oracle's error.
    """
    if too_deep(raw):  # before any parse: how deep the parser goes depends on the stack it runs on
        return Judgement(False, f"the record is nested deeper than {MAX_DEPTH}", ARTIFACT_MALFORMED)
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return Judgement(False, f"the record is not JSON: {exc}"[:MAX_DETAIL], ARTIFACT_MALFORMED)
    run = _running.run = Run(child, scope)
    try:
        judged = _run(predicate, record)
    finally:
        _running.run = None
    if run.failed is not None:
        raise run.failed
    return judged


def _run(predicate: Callable[[object, Product], object], record: object) -> Judgement:
    try:
        returned = predicate(record, PRODUCT)
    except _Stopped:
        return HOLDS  # never used: the child's failure is raised instead
    except ProductFailure as exc:
        return Judgement(False, _detail(_message(exc, exc.describe)))
    except HandleMisused as exc:
        return Judgement(False, _detail(_message(exc)), HANDLE_MISUSED)
    except OracleError as exc:
        return Judgement(False, _detail(_message(exc)), PREDICATE_ERROR)
    except Exception as exc:  # noqa: BLE001 - the predicate's own failure: the oracle's, reported
        said = f"the predicate raised {type(exc).__name__}: {_message(exc)}{_own_frame(exc)}"
        return Judgement(False, _detail(said), PREDICATE_ERROR)
    if returned is True:
        return HOLDS
    if returned is False:
        return Judgement(False, "predicate returned False")
    return Judgement(False, f"the predicate returned a {type(returned).__name__}, not a bool", PREDICATE_ERROR)


def _detail(text: str) -> str:
    return from_os(text)[:MAX_DETAIL]


def too_deep(raw: bytes) -> bool:
    """Whether the record's arrays and objects nest deeper than MAX_DEPTH (its strings aside), read in
    the encoding json.loads would read it in."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # the bytes of a bracket are the same in UTF-16/32
        return False
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
    except (UnicodeDecodeError, LookupError):
        return False  # not text: json.loads says so
    return protocol.nested_deeper(text, MAX_DEPTH)


def _message(exc: BaseException, describe: Optional[Callable[[], str]] = None) -> str:
    """The exception's message (or `describe()`), or why it cannot be shown (`assert t.ok, t` holds a
    product value, which refuses to become text)."""
    try:
        return describe() if describe is not None else str(exc)
    except BaseException as failed:  # noqa: BLE001 - a message that cannot be made is named, never raised
        return f"(its message could not be shown: {type(failed).__name__})"


def _own_frame(exc: BaseException) -> str:
    # No source lines: reading them would open the sandbox's files, which the child may have replaced.
    frames = traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), lookup_lines=False)
    return f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
