"""The judges' side of the boundary: a record's judgement, and what a predicate holds of the product.

A predicate is `predicate(record, product) -> bool` and runs in the parent, which never imports product
code, once per record, as ordinary Python. `product` names the product's callables:
`product.orders.totals.totals_from_record(record)` asks the child to make that call, and the predicate
waits for the answer (one call, one answer, in turn: `protocol`). Data comes back as the parent's own
values of the same types (a number, a text, a list, a tuple, a dict, a Decimal...), and a product object
as a `Remote`: its fields read as the parent's own values (`t.subtotal.minor` is an `int` parsed here),
as the product's object held them when it was answered; once the predicate has made another call, the
first read of a field reads it again from the child, as production code would read it then, and it holds
until the next call. Any other attribute (a
property, a class attribute, a method) is read from the product when the predicate reads it, operators
(`a + b`) and methods are calls, and a Remote can be passed back as an argument. A `Remote` itself is
never compared, hashed, iterated, converted, truth-tested or turned into text: each of those raises
`HandleMisused`, so no method of the product's ever decides anything (compare its fields, or `plain`).

The product's failures are the record's: an exception it raises surfaces in the predicate as
`ProductRaised` (test an expected refusal with `refused`), and an uncaught one, or an answer that is not
the data the predicate reads, violates the record. The predicate's own errors are the oracle's.
"""

from __future__ import annotations

import builtins
import json
import threading
import traceback
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from types import MappingProxyType
from typing import Any, Callable, Optional, Protocol, Sequence

from epoch_gate.runner import protocol
from epoch_gate.runner.judge.shown import SHOWN_BYTES, SHOWN_CALLS, one_line, transcript
from epoch_gate.runner.protocol import REF
from epoch_gate.text import from_os

MAX_DETAIL = 2000
MAX_DEPTH = 256  # a record's nesting: far enough below Python's recursion limit for every parse of it


class ProductFailure(Exception):
    """The product failed on the record: the record violates the property."""

    def describe(self) -> str:
        return str(self)


class ProductRaised(ProductFailure):
    """A product call raised. `types`: its exception's classes, most derived first, each `module.qualname`
    (a built-in one `builtins.Name`)."""

    def __init__(self, types: tuple[str, ...], message: str, product_traceback: str) -> None:
        # One line, whatever the product wrote: the detail's lines after it are the runner's and its traceback
        said = f"{types[0].rpartition('.')[2] if types else 'an exception'}: {message}"
        super().__init__(one_line(said[:MAX_DETAIL]))  # `message` keeps the product's own words
        self.types, self.message, self.product_traceback = types, message, product_traceback

    def describe(self) -> str:
        return f"the product raised {self}\n{self.product_traceback}".rstrip()

    def is_a(self, name: str) -> bool:
        """Whether the exception is of the class `name`, bases included: `module.qualname`, or a bare name,
        which is Python's own class of that name when there is one (a product's `class ValueError` is not
        `ValueError`), else any of the product's classes of that name."""
        if "." in name:
            return name in self.types
        if hasattr(builtins, name):
            return f"builtins.{name}" in self.types
        return any(found.rpartition(".")[2] == name for found in self.types)


class ProductAttributeError(ProductRaised, AttributeError):
    """The product raised AttributeError reading an attribute: `hasattr` and `getattr(value, name, default)`
    in a predicate read it as production code does."""


class NotData(ProductFailure):
    """The product's answer is not the data the predicate reads: not data at all, or without that field.
    Its message, which can name the product's classes, is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message[:MAX_DETAIL]))

    def describe(self) -> str:
        return f"the product's answer {self}"


class OracleError(Exception):
    """The predicate's own mistake: an argument that is not data, a call that names nothing."""


class HandleMisused(OracleError):
    """A product value was compared, hashed, iterated, converted or truth-tested as if it were data."""


class Child(Protocol):
    """Where a record's calls go: one call, one answer (`channel.Channel`)."""

    def ask(self, scope: int, call: bytes) -> bytes:
        ...

    def broke(self, why: str) -> BaseException:
        """Ends the child, which broke the protocol: the failure to raise."""


class _Stopped(BaseException):
    """The child failed during a call: the record's run stops (a BaseException, so that a predicate's
    `except Exception` cannot carry on with it; one that swallows it anyway is noticed: `Run.failed`)."""


class Run:
    """One record's run of a predicate: the child its calls go to, the scope its answers live in there,
    the product objects answered since its last call (whose fields are still as the child holds them),
    the references the run has made (`_encode_ref`) and the child's failure, if any."""

    __slots__ = ("child", "scope", "fresh", "references", "failed", "calls", "made")

    def __init__(self, child: Child, scope: int) -> None:
        self.child, self.scope, self.references, self.made = child, scope, 0, 0
        self.fresh: list[Remote] = []
        self.failed: Optional[BaseException] = None
        self.calls: list[tuple[bytes, bytes]] = []  # the first SHOWN_CALLS (call, answer), as they crossed


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


class _Slots(_Refusing):
    """Where a Remote keeps its fields and where the child holds it: slots no field can shadow, and a
    field dict that only this module reaches (`fields_of`); `vars()` and `__dict__` give a read-only view."""

    __slots__ = ("_at", "__dict__")


# Where the child holds a product value: scope, handle, its class name, why it is not data ("" for data),
# and, once a call has been made since its fields were read (stale), the names of those fields (None while
# they are as the child holds the object: `Run.fresh`); a stale field read again is in its fields until
# the next call
At = tuple[int, int, str, str, Optional[frozenset]]


class Remote(_Slots):
    """A product object the product returned, or one inside an answer: data to read, a handle to pass back
    or call.

    Its fields are its own attributes while it is fresh (a field read is Python's own attribute lookup,
    with no call of ours); once the predicate has made another call, the first read of a field reads it
    from the child again (`"r"`), as production code would read it then, and it holds until the next call.
    Any other attribute is read from the product (`"a"`) at each read. It refuses assignment."""

    __slots__ = ()

    @property
    def __dict__(self) -> MappingProxyType[str, object]:  # type: ignore[override]
        return MappingProxyType(fields_of(_fresh(self)))

    def __repr__(self) -> str:
        return f"<product {_at(self)[2]}>"

    def __getattr__(self, name: str) -> Any:  # a name that is not a field, or a field of a stale value
        if name.startswith("__"):
            raise AttributeError(name)
        stale = _at(self)[4]
        if stale is not None and name in stale:  # a field read after a later call: read again, kept till the next
            value = fields_of(self)[name] = _call({"r": [*_ref(self), name]}, (), {})
            _current().fresh.append(self)
            return value
        return _call({"a": [*_ref(self), name]}, (), {})

    def __getitem__(self, key: object) -> Any:
        return _call({"op": "getitem"}, (self, key), {})

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _call({"h": _ref(self)}, args, kwargs)

    def __copy__(self) -> Remote:  # looked up on the class: no field can stand in for it
        return self

    # copy.deepcopy looks it up on the value itself, where a field would win over a method, not a property
    __deepcopy__ = property(lambda self: lambda memo: self)

    def __dir__(self) -> list[str]:
        return sorted({*fields_of(_fresh(self)), *dir(type(self))})

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
_set_fields = _Slots.__dict__["__dict__"].__set__
_get_fields = _Slots.__dict__["__dict__"].__get__
_set_at = _Slots.__dict__["_at"].__set__
_get_at = _Slots.__dict__["_at"].__get__


def fields_of(value: Remote) -> dict[str, object]:
    """The value's own field dict (the parent's parse of the answer): to read, never to change."""
    return _get_fields(value, _Slots)  # type: ignore[no-any-return]


def _at(value: Remote) -> At:
    return _get_at(value, _Slots)  # type: ignore[no-any-return]


def _ref(value: Remote) -> list[int]:
    """[scope, handle] of a value of the current run (one of an earlier record's is the predicate's
    mistake: the child no longer holds it)."""
    scope, handle = _at(value)[:2]
    if scope != _current().scope:
        raise OracleError("a product value used outside the run of the record it was answered for")
    return [scope, handle]


def _fresh(value: Remote) -> Remote:
    """The value with its fields as the child holds the object now: itself while fresh, else read again
    (and kept as its fields, fresh until the next call: a second look reads the same parts)."""
    at = _at(value)
    if at[4] is None or at[3]:  # fresh, or not data (a handle has no fields)
        return value
    again = _call({"r": _ref(value)}, (), {})
    if type(again) is not Remote or _at(again)[3]:  # the product made it something else since
        raise NotData(
            f"{at[2]} read again is no product object with fields now ({_at(again)[3] if type(again) is Remote else type(again).__name__})"
        )
    _set_fields(value, fields_of(again))
    _set_at(value, (*at[:4], None))
    _current().fresh.append(value)
    return value


def _stale(run: Run) -> None:
    """Before a call (product code, which may change any object the child holds): the fields of the
    objects answered so far are no longer what the child holds; the first read of one reads it again."""
    for value in run.fresh:
        scope, handle, type_name, why, stale = _at(value)
        _set_at(value, (scope, handle, type_name, why, frozenset(fields_of(value)).union(stale or ())))
        _set_fields(value, {})
    run.fresh = []


class Entries(dict):  # type: ignore[type-arg]
    """A dict the product returned: the parent's own, with its entries. Reading an attribute it has not,
    or an entry it lacks, is the product's failure (it answered another shape), not the predicate's."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotData(f"a dict, not an object with a field {name}")

    def __missing__(self, key: object) -> Any:
        raise NotData(f"a dict without the item {key!r}")


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
    """A value's data as plain values (dicts, lists, numbers, texts), a product object as a dict of its
    fields as the child holds it now, to compare whole or serialize (without recursion)."""
    nodes = (Remote, Entries, dict, list, tuple)
    if type(value) not in nodes:
        return value
    made: dict[int, object] = {}
    walking: set[int] = set()
    pending: list[tuple[Any, bool]] = [(value, False)]
    while pending:
        node, walked = pending.pop()
        if type(node) not in nodes:
            continue
        key = id(node)
        if walked:
            walking.discard(key)
            parts = _contents(node)
            plain_part = lambda item: made[id(item)] if type(item) in nodes else item  # noqa: E731
            if isinstance(parts, dict):
                made[key] = {name: plain_part(item) for name, item in parts.items()}
            else:
                made[key] = [plain_part(item) for item in parts]
        elif key not in made:
            if key in walking:
                raise OracleError("plain() of a value that holds itself (a cycle the predicate made)")
            walking.add(key)
            pending.append((node, True))
            parts = _contents(node)
            pending += [(item, False) for item in (parts.values() if isinstance(parts, dict) else parts)]
    return made[id(value)]


def _contents(node: Any) -> Any:
    """What `plain` reads of a node: a list or a dict itself, a product object's fields as the child holds
    them now (a stale object is read again once: `_fresh` answers the same fresh value after)."""
    if type(node) is not Remote:
        return node
    why = _at(node)[3]
    if why:
        raise NotData(f"{_at(node)[2]} is not data ({why})")
    return fields_of(_fresh(node))


def refused(call: Callable[[], object], *names: str) -> bool:
    """True when the product call raises an exception of one of the classes `names` (`module.qualname`, or
    a bare name: Python's own class when it has one, else a product class of that name; bases included;
    any exception when none is named). Returning, or raising another one, is False."""
    try:
        call()
    except ProductRaised as exc:
        return not names or any(exc.is_a(name) for name in names)
    return False


# --- calls and answers -------------------------------------------------------------------------------------

_REF_KEY = json.dumps(REF).encode()  # how a reference's key reads in an encoded call


def _encode_ref(value: object) -> object:
    if isinstance(value, Remote):
        _current().references += 1
        return {REF: _ref(value)}
    if isinstance(value, Decimal):
        return {protocol.DECIMAL: str(value)}
    if isinstance(value, Fraction):
        return {protocol.FRACTION: f"{value.numerator}/{value.denominator}"}
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
    return "a product value's attribute" if kind == "a" else "a product value"


def _call(target: dict[str, object], args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
    """One product call: sent to the child of the current run, answered before the predicate goes on."""
    run = _current()
    try:
        encoded = encode_call(target, args, kwargs)
    except (TypeError, ValueError, RecursionError) as exc:
        raise OracleError(f"an argument of {_describe(target)} is not data: {exc}") from None
    if "r" not in target:  # a read of a value again reads its fields only, as its answer did
        _stale(run)
    try:
        payload = run.child.ask(run.scope, encoded)
    except Exception as failed:  # noqa: BLE001 - the child failed (channel.ChildFailed): the run stops
        run.failed = failed
        raise _Stopped from None
    run.made += 1
    if len(run.calls) < SHOWN_CALLS:  # the bytes only: a violated record's are read again (`transcript`)
        run.calls.append((encoded[:SHOWN_BYTES], payload[:SHOWN_BYTES]))
    try:
        return decode(run, payload, read_again="r" in target)
    except protocol.ProtocolError as exc:
        run.failed = run.child.broke(str(exc))
        raise _Stopped from None


_parsing = threading.local()  # `.run`: the run whose answer this thread is parsing


def _object(handle: int, fields: dict[str, object]) -> Remote:
    """A product object of an answer, as it is parsed: a Remote whose attributes are its fields (set
    through the slots' own descriptors: a Remote refuses assignment)."""
    run: Run = _parsing.run
    value = _new(Remote)
    _set_fields(value, fields)
    _set_at(value, (run.scope, handle, "product value", "", None))
    run.fresh.append(value)
    return value


def decode(run: Run, payload: bytes, read_again: bool = False) -> Any:
    """One answer as the predicate gets it: data as the parent's own values (a product object as a Remote,
    a dict as Entries); the product's exception raised as ProductRaised. A read again that ran product code
    (answered "w", raising, or no longer data) leaves no other value's fields as they were."""
    _parsing.run = run
    held = len(run.fresh)
    answer = protocol.parse_answer(payload, _object, Entries)
    kind = answer[0]
    if read_again and kind in ("w", "x", "o"):  # "o": no longer data, whatever ran to make it so
        answered, run.fresh = run.fresh[held:], run.fresh[:held]
        _stale(run)
        run.fresh = answered
    if kind in ("v", "w"):
        _, type_name, data = answer
        if type(data) is Remote:
            scope, handle, _, why, stale = _at(data)
            _set_at(data, (scope, handle, type_name, why, stale))
        return data
    if kind == "o":
        _, handle, type_name, why = answer
        value = _new(Remote)
        _set_fields(value, {})
        _set_at(value, (run.scope, handle, type_name, why or "not data", None))
        return value
    if kind == "x":
        types = tuple(answer[1])
        raised = ProductAttributeError if "builtins.AttributeError" in types else ProductRaised
        raise raised(types, answer[2], answer[3])
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
        said, _, traceback_lines = _message(exc, exc.describe).partition("\n")
        return Judgement(
            False, _detail(f"{said}{transcript(_current().calls, _current().made)}\n{traceback_lines}".rstrip())
        )
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
        return Judgement(False, _detail(f"predicate returned False{transcript(_current().calls, _current().made)}"))
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
