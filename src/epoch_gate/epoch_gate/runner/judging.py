"""The judges' side of the boundary: what a property's predicate holds when it drives the product.

A predicate is `predicate(record, product) -> bool` and runs in the parent, which never imports product
code. `product` names the product's callables: `product.orders.totals.totals_from_record(record)` asks
the child to call `orders.totals.totals_from_record` on the record and answers with data. A number or
text comes back as it is, a list as a tuple of its parts, and anything else as a `Remote`: its fields
(and properties) read as the parent's own plain values (`t.subtotal.minor` is an `int` parsed here), its
methods and operators are further calls (`a.allocate([1, 2])`, `a + b`), and it can be passed back as
an argument. A `Remote` itself is never compared, hashed, iterated, converted, truth-tested or turned
into text: each of those raises `HandleMisused`, so no method of the product's ever decides anything
(compare its fields, or `plain(value)`).

The product's failures are the record's: an exception it raises surfaces in the predicate as
`ProductRaised` (test an expected refusal with `refused`), and an uncaught one, or an answer that is not
the data the predicate reads, makes the record fail. The predicate's own errors are the oracle's
(`predicate-error`).

Calls are batched across records without threads: a predicate runs until its first call the child has
not answered yet (`_NeedAnswer`), the batch's calls go to the child together, and each predicate is run
again from the start with its earlier answers replayed, until it returns. A predicate is therefore run
once more than it makes calls, and must be deterministic given its record and its answers (a call that
differs on a rerun is a `predicate-error`).
"""

from __future__ import annotations

import dis
import inspect
import json
import operator
import sys
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
import traceback
from dataclasses import dataclass
from types import CodeType, FunctionType, MappingProxyType
from typing import Any, Callable, Optional, Sequence, Union

from epoch_gate.runner import protocol
from epoch_gate.runner.protocol import REF
from epoch_gate.text import from_os

MAX_DETAIL = 2000


class ProductFailure(Exception):
    """The product failed on the record: the record violates the property."""


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
    """The predicate's own mistake: an argument that is not data, a call that names nothing, a rerun
    that calls something else."""


class HandleMisused(OracleError):
    """A product value was compared, hashed, iterated, converted or truth-tested as if it were data."""


class _NeedAnswer(BaseException):
    """The predicate made a call the child has not answered yet. A BaseException, so `except Exception`
    in a predicate does not swallow it (a bare `except:` that does is noticed: `Session.pending`)."""


class _Unanswered(BaseException):
    """The predicate read what its answers, which crossed with only the names its property reads, may not
    hold: a name they were not asked for, or a whole value. The record then runs again on whole answers
    (`run`; a bare `except:` that swallows this is noticed: `Session.missed`)."""


WHOLE = protocol.WHOLE  # what `Session.missed` holds after a read of a whole value (no field is named so)


def _unanswered(name: str) -> None:
    """Before a read the answers answer as whole ones would only if they hold `name` (WHOLE: everything)."""
    session = Session.current
    if session is not None and session.projection is not None and name not in session.projection:
        session.missed = name
        raise _Unanswered


def _misuse(what: str) -> Callable[..., Any]:
    def refuse(self: Union[Remote, Name], *_: object) -> Any:
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
    """Where a Remote keeps its fields and its location: slots no field can shadow, and a field dict that
    only this module reaches (`fields_of`); `vars()` and `__dict__` give a read-only view of it."""

    __slots__ = ("_at", "__dict__")


class Remote(_Held):
    """A value the product returned, or a part of it: data to read, a handle to pass back.

    Every JSON object of an answer becomes one as the answer is parsed (`part`), its fields as its own
    attributes: a field read is Python's own attribute lookup, with no call of ours. `_at` (a slot, which
    no field can shadow) says where the value is: (scope, handle, class name, why it is not data, its own
    properties or None when they did not cross, its data when that is not its fields: FIELDS) for an
    answer, unset for a part of one (`_where`), which is found in its record's answers when it is passed
    back (`_ref`). It refuses assignment: every run of a predicate reads what the product answered."""

    __slots__ = ()

    @property
    def __dict__(self) -> MappingProxyType[str, object]:  # type: ignore[override]
        _unanswered(WHOLE)
        return MappingProxyType(fields_of(self))

    def __repr__(self) -> str:
        return f"<product {_type(self)}>"

    def __getattr__(self, name: str) -> Any:  # only for a name that is not a field
        _unanswered(name)  # a field's name may start with "__" too (a dict's key)
        if name.startswith("__"):
            raise AttributeError(name)
        return Method(self, name)

    def __getitem__(self, key: str) -> Any:
        fields = fields_of(self)
        if type(key) is not str or key not in fields:
            if type(key) is str:
                _unanswered(key)
            at = _where(self)
            why = at[3] if at is not None else ""
            raise NotData(f"{_type(self)} has no item {key!r}" + (f" ({why})" if why else ""))
        return fields[key]

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _call({"h": _ref(self)}, args, kwargs)

    def __copy__(self) -> Remote:  # looked up on the class: no field can stand in for it
        return self  # read-only: a copy would be the same value

    # copy.deepcopy looks it up on the value itself, where a field would win over a method, not a property
    __deepcopy__ = property(lambda self: lambda memo: self)

    def __dir__(self) -> list[str]:
        _unanswered(WHOLE)
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


# A field named like an attribute of the class (`__module__`, `__doc__`, an operator) reads as that field
# when it crosses and as the class's attribute when it does not, with no miss to notice: it always crosses.
SHADOWED = frozenset(dir(Remote))

_new = object.__new__
_set_fields = _Held.__dict__["__dict__"].__set__
_get_fields = _Held.__dict__["__dict__"].__get__
_set_at = _Held.__dict__["_at"].__set__
_get_at = _Held.__dict__["_at"].__get__


def fields_of(value: Remote) -> dict[str, object]:
    """The value's own field dict (the parent's parse of the answer): to read, never to change."""
    return _get_fields(value, _Held)  # type: ignore[no-any-return]


def _where(value: Remote) -> Optional[tuple[Any, ...]]:
    """An answer's `_at`, or None for a part (whose slot is never set: one assignment less per object)."""
    try:
        return _get_at(value, _Held)  # type: ignore[no-any-return]
    except AttributeError:
        return None


def part(fields: dict[str, object]) -> Remote:
    """json.loads' object_hook for the child's answers: an object becomes a Remote whose attributes are
    its fields, a list among them a tuple of its parts (set through the slots' own descriptors: a Remote
    refuses assignment)."""
    for item in fields.values():
        if type(item) is list:
            for key, found in fields.items():
                if type(found) is list:
                    fields[key] = _tuple(found)
            break
    value = _new(Remote)
    _set_fields(value, fields)  # its `_at` unset: a part (`_where`)
    return value


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


FIELDS = object()  # an answer's data is its fields, not a value of its own


def _answer(
    scope: int, handle: int, type_name: str, fields: Optional[Remote], why: str, own: Optional[Remote], data: object
) -> Remote:
    value = fields if fields is not None else _new(Remote)
    _set_at(value, (scope, handle, type_name, why, own, data))
    return value


def _locate(value: Remote) -> Optional[tuple[Home, list[Union[str, int]]]]:
    """Where the child holds a part of an answer of the current run: that answer's home and the path to
    the part (found by identity, through the answer's fields and its own properties)."""
    session = Session.current
    found = session.held().get(id(value)) if session is not None else None
    if found is None or found[0] is not value:
        return None
    home, path = found[1], []
    while found[2] is not None:  # up to the answer, by the step from each part's holder
        path.append(found[3])
        found = found[2]
    return home, path[::-1]


def _hold(held: dict[int, Held], node: object, home: Home) -> None:
    """Adds each Remote under `node` to `held`, unless an earlier answer holds it: a walk by identity,
    without recursion, each object once, so that even a cycle made through `fields_of` ends."""
    pending: list[Held] = [(node, home, None, None)]
    seen: set[int] = set()
    while pending:
        entry = pending.pop()
        current = entry[0]
        if id(current) in seen:
            continue
        seen.add(id(current))
        if type(current) is Remote:
            held.setdefault(id(current), entry)
            items: Any = fields_of(current).items()
        elif type(current) is tuple:
            items = enumerate(current)  # type: ignore[arg-type]
        else:
            continue
        pending += [(item, home, entry, step) for step, item in items if type(item) is Remote or type(item) is tuple]


def _ref(value: Remote) -> list[object]:
    """Where the child holds the value: [scope, handle, path from the answer]."""
    at = _where(value)
    if at is not None:
        return [at[0], at[1], []]
    found = _locate(value)
    if found is None:
        raise OracleError("a product value used outside the run of the record it was answered for")
    (scope, handle, _), path = found
    return [scope, handle, path]


def _type(value: Remote) -> str:
    """What this value is, for messages: the answer's class and the path to this part of it."""
    at = _where(value)
    if at is not None:
        return at[2]  # type: ignore[no-any-return]
    found = _locate(value)
    if found is None:
        return "product value"
    (_, _, type_name), path = found
    return type_name + "".join(f"[{step}]" if type(step) is int else f".{step}" for step in path)


class Method(_Refusing):
    """`value.name` where the value's fields have no `name`: a method of the product's when called, and
    otherwise a property, read from the child the first time the predicate uses it as a value (all of
    the object's properties at once, once per run of the predicate)."""

    __slots__ = ("_of", "_name")

    def __init__(self, of: Remote, name: str) -> None:
        self._of, self._name = of, name

    def __repr__(self) -> str:
        return f"<product {_type(self._of)}.{self._name}>"

    def __call__(self, *args: object, **kwargs: object) -> Any:
        scope, handle, path = _ref(self._of)
        return _call({"h": [scope, handle, [*path, self._name]]}, args, kwargs)  # type: ignore[misc]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._value(), name)

    def __getitem__(self, key: object) -> Any:
        return self._value()[key]

    def _value(self) -> Any:
        of, at = self._of, _where(self._of)
        if at is not None and (at[3] or at[1] == -1):
            raise self._missing()
        session = Session.current
        own = at[4] if at is not None else None
        if own is None:  # a part's properties, asked for when first read
            ref = _ref(of)
            key = repr(ref)
            found = session.properties.get(key) if session is not None else None
            if found is None:
                found = _call({"p": ref}, (), {})
                if session is not None:
                    session.properties[key] = found
            own = found if type(found) is Remote else None
        if own is None or self._name not in fields_of(own):
            _unanswered(self._name)
            raise self._missing()
        return fields_of(own)[self._name]

    def _missing(self) -> NotData:
        at = _where(self._of)
        why = f" ({at[3]})" if at is not None and at[3] else ""
        return NotData(f"{_type(self._of)} has no field {self._name}{why}")


def _through(name: str) -> Callable[..., Any]:
    def apply(self: Method, *args: object) -> Any:
        return getattr(operator, name)(self._value(), *args)

    return apply


def _reflected(name: str) -> Callable[..., Any]:
    def apply(self: Method, other: object) -> Any:
        return getattr(operator, name)(other, self._value())

    return apply


# A property used as a value is that value: read it, then do what was asked of it (which a product
# value refuses in its turn). One the product does not have is the product's failure.
for _dunder in (
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "contains",
):
    setattr(Method, f"__{_dunder}__", _through(_dunder))
for _dunder in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(Method, f"__r{_dunder}__", _reflected(_dunder))
Method.__neg__ = lambda self: -self._value()  # type: ignore[assignment]
Method.__pos__ = lambda self: +self._value()  # type: ignore[assignment]
Method.__abs__ = lambda self: abs(self._value())  # type: ignore[assignment]
Method.__bool__ = lambda self: bool(self._value())  # type: ignore[assignment]
Method.__hash__ = lambda self: hash(self._value())  # type: ignore[assignment]
Method.__iter__ = lambda self: iter(self._value())  # type: ignore[assignment]
Method.__len__ = lambda self: len(self._value())  # type: ignore[assignment]
Method.__int__ = lambda self: int(self._value())  # type: ignore[assignment]
Method.__index__ = lambda self: operator.index(self._value())  # type: ignore[assignment]
Method.__float__ = lambda self: float(self._value())  # type: ignore[assignment]
Method.__round__ = lambda self, *n: round(self._value(), *n)  # type: ignore[assignment]
Method.__reversed__ = lambda self: reversed(self._value())  # type: ignore[assignment]
Method.__str__ = lambda self: str(self._value())  # type: ignore[assignment]
Method.__format__ = lambda self, spec: format(self._value(), spec)  # type: ignore[assignment]


class Name(_Refusing):
    """`product.pkg.module.function`: a name the child imports, called like the function."""

    __slots__ = ("_name", "__dict__")

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<product {self._name}>"

    def __getattr__(self, name: str) -> Name:
        return _named(self, f"{self._name}.{name}", name)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _call({"m": self._name}, args, kwargs)


class Product:
    """The `product` a predicate is given: `product.<top-level name>...` names a product callable."""

    __slots__ = ("__dict__",)

    def __getattr__(self, name: str) -> Name:
        return _named(self, name, name)

    def __repr__(self) -> str:
        return "<product>"


_NAMES_KEPT = [0]  # how many names are kept as attributes, across all of them: a bounded number


def _named(owner: Union[Name, Product], full: str, name: str) -> Name:
    """The Name `full`, kept as `owner`'s attribute so that the next `product.pkg.function` of every
    record is read without a Python call (names a predicate builds from data: up to a bound)."""
    if name.startswith("__"):
        raise AttributeError(name)
    found = Name(full)
    if _NAMES_KEPT[0] < 4096:
        _NAMES_KEPT[0] += 1
        owner.__dict__[name] = found
    return found


PRODUCT = Product()


def plain(value: Any) -> Any:
    """A product value's data as the parent's own plain values, to compare whole (without recursion: as
    deep as the answer)."""
    if isinstance(value, Method):
        return plain(value._value())
    made: dict[int, object] = {}
    whole_read = False  # a whole value read (`_unanswered`), told once
    walking: set[int] = set()
    pending: list[tuple[object, bool]] = [(value, False)]
    while pending:
        node, walked = pending.pop()
        if type(node) is not Remote and type(node) is not list and type(node) is not tuple:
            continue
        if type(node) is Remote and not whole_read:
            _unanswered(WHOLE)
            whole_read = True
        key = id(node)
        if walked:
            walking.discard(key)
            made[key] = _plain_one(node, made)
        elif key not in made:
            if key in walking:
                raise OracleError("plain() of a product value that holds itself (a cycle the predicate made)")
            walking.add(key)
            pending.append((node, True))
            items = fields_of(node).values() if type(node) is Remote else node  # type: ignore[arg-type]
            pending += [(item, False) for item in items]
    return made.get(id(value), value) if type(value) in (Remote, list, tuple) else value


def _plain_one(node: Union[Remote, list[object], tuple[object, ...]], made: dict[int, object]) -> object:
    """One object, list or tuple as plain data (a list of its own), the parts below it already made."""

    def plain_part(item: object) -> object:
        if type(item) in (Remote, list, tuple):
            return made[id(item)]
        return plain(item) if isinstance(item, Method) else item

    if type(node) is not Remote:
        return [plain_part(item) for item in node]
    at = _where(node)  # type: ignore[arg-type]
    if at is not None and at[3]:
        raise NotData(f"{_type(node)} is not data ({at[3]})")  # type: ignore[arg-type]
    if at is not None and at[5] is not FIELDS:
        return at[5]
    return {key: plain_part(item) for key, item in fields_of(node).items()}  # type: ignore[arg-type]


def refused(call: Callable[[], object], *names: str) -> bool:
    """True when the product call raises an exception of one of the classes `names` (by name, bases
    included; any exception when none is named). Returning, or raising another one, is False."""
    try:
        call()
    except ProductRaised as exc:
        return not names or any(name in exc.types for name in names)
    return False


_REF_KEY = json.dumps(REF).encode()  # how a reference's key reads in an encoded call
_REFS_MADE = [0]  # references `_encode_ref` has made: any other "\u0000ref" in a call is data that would read as one


def _encode_ref(value: object) -> object:
    if isinstance(value, Remote):
        _REFS_MADE[0] += 1
        return {REF: _ref(value)}
    if isinstance(value, Method):
        found = value._value()
        if isinstance(found, Remote):
            _REFS_MADE[0] += 1
            return {REF: _ref(found)}
        return found
    if isinstance(value, Name):
        raise OracleError(f"{value!r} passed as an argument: pass what it returns")
    raise TypeError(f"a {type(value).__name__} is not data")


_TARGETS: dict[str, bytes] = {}  # a module name's encoded target, made once


# json.dumps with `_encode_ref` as its default, no NaN, no spaces, UTF-8 as it is: the C encoder made once
# and called directly (JSONEncoder.encode makes one per call), without looking for cycles (a dict entry per
# container): a cyclic argument is nested too deeply (RecursionError), and the encoder keeps no state.
_chunks: Callable[[object, int], Sequence[str]] = (
    c_make_encoder(None, _encode_ref, encode_basestring, None, ":", ",", False, False, False)
    if c_make_encoder is not None
    else lambda value, _: [
        json.JSONEncoder(
            default=_encode_ref, allow_nan=False, check_circular=False, separators=(",", ":"), ensure_ascii=False
        ).encode(value)
    ]
)


def _dump(value: object) -> bytes:
    return "".join(_chunks(value, 0)).encode()


def _head(target: dict[str, object]) -> bytes:
    """The call's target as JSON bytes (a callable's name: encoded once)."""
    name = target.get("m")
    if type(name) is not str:
        return _dump(target)
    head = _TARGETS.get(name)
    if head is None:
        head = _dump(target)
        if len(_TARGETS) < 4096:
            _TARGETS[name] = head
    return head


def _encode_call(target: dict[str, object], args: tuple[object, ...], kwargs: dict[str, object]) -> bytes:
    """The call as JSON bytes, each argument as it is now (a record the predicate changed crosses changed)."""
    made = _REFS_MADE[0]
    encoded = (
        b"["
        + _head(target)
        + b",["
        + b",".join(map(_dump, args))
        + b"],{"
        + b",".join(_dump(key) + b":" + _dump(value) for key, value in kwargs.items())
        + b"}]"
    )
    made = _REFS_MADE[0] - made
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


Opening = tuple[CodeType, int]  # a predicate's code, and the offset of its opening call in it


def opening(predicate: object) -> Optional[Opening]:
    """Where the predicate makes its opening call, when the first thing its code does is call the product
    on its record (`product.pkg.function(record)`): (its code, the call's offset). Nothing of the
    predicate's own has run by then, so the record is still exactly what it was given. None for any other
    shape, or a Python whose bytecode reads otherwise."""
    if type(predicate) is not FunctionType:  # a wrapper's __code__ need not be what its call runs first
        return None
    code = predicate.__code__
    if code.co_argcount < 2 or code.co_flags & _NOT_PLAIN:
        return None
    record_name, product_name = code.co_varnames[:2]
    steps = [(i.opname, i.argval, i.offset) for i in dis.get_instructions(code)]
    if len(steps) < 4 or steps[0][:2] != ("LOAD_FAST", product_name):
        return None
    at = 1
    while at < len(steps) and steps[at][0] == "LOAD_ATTR":
        at += 1
    if at + 2 >= len(steps) or steps[at][0] != "LOAD_METHOD":  # CPython's `a.b(x)`
        return None
    if steps[at + 1][:2] != ("LOAD_FAST", record_name) or steps[at + 2][:2] != ("CALL_METHOD", 1):
        return None
    return code, steps[at + 2][2]


# A generator's or a coroutine's code runs later than its call
_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _call(target: dict[str, object], args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
    session = Session.current
    if session is None:
        raise OracleError("a product call outside a predicate's run")
    at = session.opening
    if (
        at is not None
        and session.position == 0
        and len(args) == 1
        and args[0] is session.record
        and not kwargs
        and (frame := sys._getframe(2)).f_code is at[0]  # _call <- Name.__call__ <- the predicate
        and frame.f_lasti == at[1]
    ):
        # The opening call on the record as given: it crosses as the world's own bytes, exactly those the
        # call sent ahead holds, without encoding the record again.
        return session.call(b"[" + _head(target) + b",[" + session.raw + b"],{}]")
    try:
        encoded = _encode_call(target, args, kwargs)
    except (TypeError, ValueError, RecursionError) as exc:
        raise OracleError(f"an argument of {_describe(target)} is not data: {exc}") from None
    return session.call(encoded)


def _describe(target: dict[str, object]) -> str:
    ((kind, value),) = target.items()
    if kind == "m":
        return str(value)
    if kind == "op":
        return f"the operator {value}"
    if kind == "p":
        return "a product value's properties"
    return "a product value's method" if value[2] else "a product value"  # type: ignore[index]


Home = tuple[int, int, str]  # where the child holds an answer: scope, handle, its class name
# ("value", the decoded value, its home: None for a number or text) or ("raised" / "unresolved", its
# arguments, None)
Answer = tuple[str, object, Optional[Home]]
# A part of an answer, as `Session.held` finds it: (the part, its answer's home, its holder's, the step from it)
Held = tuple[object, Home, Optional[tuple[Any, ...]], Union[str, int, None]]


def decode(scope: int, answer: list[object]) -> Answer:
    """One answer (parsed with `part` as its object hook, its shape checked by protocol.parse_answers) as
    the predicate will get it: a number or text as it is (handle -1), a list as a tuple of its parts, an
    object (or a value that crossed as text, such as a Fraction) as a Remote."""
    kind = answer[0]
    if kind == "v":
        _, handle, type_name, data, own = answer
        if handle == -1:
            return "value", data, None
        home = (scope, handle, type_name)
        if type(data) is list:
            return "value", _tuple(data), home  # type: ignore[arg-type]
        fields = data if type(data) is Remote else None
        data = FIELDS if fields is not None else data
        return "value", _answer(scope, handle, type_name, fields, "", own, data), home  # type: ignore[arg-type]
    if kind == "o":
        _, handle, type_name, why = answer
        home = (scope, handle, type_name)
        return "value", _answer(scope, handle, type_name, None, str(why), None, None), home  # type: ignore[arg-type]
    if kind == "x":
        return "raised", (tuple(answer[1]), answer[2], answer[3]), None  # type: ignore[arg-type]
    return "unresolved", answer[1], None


class Session:
    """One record's run of a predicate: its calls so far with their answers, replayed in order. The first
    entry may be speculative (the call the property's predicate made first on every record so far, sent
    before the predicate ran): if the predicate makes another call, that answer is dropped, not an error."""

    current: Optional[Session] = None
    __slots__ = (
        "log",
        "position",
        "pending",
        "speculative",
        "properties",
        "record",
        "raw",
        "opening",
        "projection",
        "missed",
        "_held",
        "_held_upto",
    )

    def __init__(self) -> None:
        self.log: list[tuple[bytes, Answer]] = []
        self.position = 0
        self.pending: Optional[bytes] = None
        self.speculative = False
        self.properties: dict[str, object] = {}  # this run's: each object's properties, asked for once
        # The names its answers cross with (None: whole answers), and the first name a run read that they
        # may not hold (WHOLE: a whole value), after which its answers are whole
        self.projection: Optional[frozenset[str]] = None
        self.missed: Optional[str] = None
        # This run's record (the object the predicate was given, and its bytes) and the predicate's opening
        self.record: object = None
        self.raw = b""
        self.opening: Optional[Opening] = None
        # The parts of its answers by id, and the last entry of the log they were taken from (`held`)
        self._held: dict[int, Held] = {}
        self._held_upto: Optional[tuple[bytes, Answer]] = None

    def held(self) -> dict[int, Held]:
        """Each part of this run's answers that the child holds, by id, with the way to it from its answer
        (`_locate`). Each answer is walked once, as it comes: a predicate that passes back each of an
        answer's N parts walked the answer for each, on each of its N runs."""
        log, upto = self.log, self._held_upto
        done = next((n for n in range(len(log), 0, -1) if log[n - 1] is upto), 0)
        if done == 0:  # none taken yet, or the log was cleared since (`upto` is held here: no new entry is it)
            self._held = {}
        for _, (_, answer, home) in log[done:]:
            if home is not None:
                _hold(self._held, answer, home)
                at = _where(answer) if type(answer) is Remote else None
                if at is not None:
                    _hold(self._held, at[4], home)  # a property's value: the child reads it by name too
        self._held_upto = log[-1] if log else None
        return self._held

    def replay(self) -> Any:
        """The answer to the call at this position, as the product gave it."""
        sent, (kind, value, _) = self.log[self.position]
        self.position += 1
        if kind == "value":
            return value
        if kind == "raised":
            raise ProductRaised(*value)  # type: ignore[misc]
        raise OracleError(f"the call {sent[:200]!r} does not resolve in the product: {value}")

    def call(self, encoded: bytes) -> Any:
        if self.position == len(self.log):
            self.pending = encoded
            raise _NeedAnswer
        sent = self.log[self.position][0]
        if sent != encoded:
            if self.speculative and self.position == 0:  # the guess was wrong: ask for this call instead
                self.log.clear()
                self.speculative = False
                self.pending = encoded
                raise _NeedAnswer
            raise OracleError(
                "the predicate is not deterministic: on a rerun with the same answers it made "
                f"another call ({encoded[:120]!r}, not {sent[:120]!r})"
            )
        return self.replay()


MAX_NAMES = 256  # names a property's predicate may read of its answers before they cross whole


def reads(
    predicate: Callable[[object, Product], object],
    raw: bytes,
    done: Session,
    verdict: Optional[Verdict],
    at: Optional[Opening],
    known: frozenset[str] = frozenset(),
) -> Optional[frozenset[str]]:
    """The names the predicate reads of its answers on a record it has judged on whole answers (`done`,
    to `verdict`), with those `known` already (WHOLE among them once it reads a whole value): it runs
    again here, on copies of those answers that hold only the names found so far, until a run reads
    nothing they lack. No call reaches the child. None when that run's verdict is not `verdict` (it read
    them some way the runner does not see), or it makes a call the whole run did not, or reads more than
    MAX_NAMES."""
    if done.projection is not None or verdict is None:
        return None
    names = set(known)
    while len(names) <= MAX_NAMES:
        trial = Session()
        trial.projection = frozenset(names) | SHADOWED  # as the child will send them
        try:
            trial.log = [(sent, _projected(answer, trial.projection)) for sent, answer in done.log]
        except RecursionError:
            return None
        found = _judge(predicate, raw, trial, UNPARSED, at)
        if trial.missed is None:
            return frozenset(names) if found == verdict else None
        names.add(trial.missed)
    return None


def _projected(answer: Answer, names: frozenset[str]) -> Answer:
    """The answer as the child sends it projected to `names`: each object with only the fields those
    name, at every depth (all of them when WHOLE is among them), and an answer with only the properties
    they name."""
    kind, value, home = answer
    if kind != "value" or (type(value) is not Remote and type(value) is not tuple):
        return answer
    fields = names if WHOLE not in names else None
    copy = _project(value, fields)
    at = _where(value) if type(value) is Remote else None
    if at is not None:
        own = None
        if at[4] is not None:
            own = _new(Remote)
            _set_fields(own, {key: _project(item, fields) for key, item in fields_of(at[4]).items() if key in names})
        _set_at(copy, (*at[:4], own, at[5]))
    return kind, copy, home


def _project(value: object, names: Optional[frozenset[str]]) -> Any:
    """A copy of a part of an answer with only the fields `names` names (all: None; RecursionError as
    deep as the parse went: the caller reads whole answers then)."""
    if type(value) is tuple:
        return tuple([_project(item, names) for item in value])
    if type(value) is not Remote:
        return value
    copy = _new(Remote)
    fields = fields_of(value).items()
    _set_fields(copy, {key: _project(item, names) for key, item in fields if names is None or key in names})
    return copy


@dataclass(frozen=True)
class Verdict:
    """One record's verdict: held, violated (with why), or the oracle's error (its code and why)."""

    held: bool
    detail: str = ""
    error: str = ""  # a reasons.Code value: the property cannot be judged


HELD = Verdict(True)
UNPARSED = object()
PREDICATE_ERROR, HANDLE_MISUSED, ARTIFACT_MALFORMED = "predicate-error", "handle-misused", "artifact-malformed"


MAX_DEPTH = 256  # a record's nesting: far enough below Python's recursion limit for every parse of it


def too_deep(raw: bytes) -> bool:
    """Whether the record's arrays and objects nest deeper than MAX_DEPTH (its strings aside), read in
    the encoding json.loads would read it in."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # the bytes of a bracket are the same in UTF-16/32
        return False
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
    except (UnicodeDecodeError, LookupError):
        return False  # not text: json.loads says so
    return text_too_deep(text)


def text_too_deep(text: str) -> bool:
    """`too_deep` of a record's text."""
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


def run(
    predicate: Callable[[object, Product], object],
    raw: bytes,
    session: Session,
    record: object = UNPARSED,
    at: Optional[Opening] = None,
) -> Optional[Verdict]:
    """The predicate's run on one record: its verdict, or None when it waits for an answer (`pending`).
    `record`: the record already parsed (with its batch), used once: a predicate may mutate its record,
    so every later run parses it afresh. `at`: the predicate's `opening`. A run that reads what its
    answers may not hold (`_Unanswered`) starts again at once on whole answers, from its first call."""
    if too_deep(raw):
        # refused before any parse: how deep the parser can go depends on the stack it is called from,
        # which differs between a first run and a rerun
        return Verdict(False, f"the record is nested deeper than {MAX_DEPTH}", ARTIFACT_MALFORMED)
    verdict = _judge(predicate, raw, session, record, at)
    if session.missed is not None and session.projection is not None:
        session.projection = None
        session.log.clear()
        session.speculative = False
        verdict = _judge(predicate, raw, session, UNPARSED, at)
    return verdict


def _judge(
    predicate: Callable[[object, Product], object],
    raw: bytes,
    session: Session,
    record: object,
    at: Optional[Opening],
) -> Optional[Verdict]:
    if record is UNPARSED:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return Verdict(False, f"the record is not JSON: {exc}"[:MAX_DETAIL], ARTIFACT_MALFORMED)
    session.position, session.pending, session.record, session.raw = 0, None, record, raw
    session.opening = at
    session.properties.clear()
    Session.current = session
    try:
        verdict = predicate(record, PRODUCT)
    except (_NeedAnswer, _Unanswered):
        return None
    except ProductFailure as exc:
        Session.current = None
        if session.pending is not None:
            return None
        return Verdict(False, from_os(_message(exc, exc.describe))[:MAX_DETAIL])  # type: ignore[attr-defined]
    except HandleMisused as exc:
        Session.current = None
        return (
            None if session.pending is not None else Verdict(False, from_os(_message(exc))[:MAX_DETAIL], HANDLE_MISUSED)
        )
    except OracleError as exc:
        Session.current = None
        return (
            None
            if session.pending is not None
            else Verdict(False, from_os(_message(exc))[:MAX_DETAIL], PREDICATE_ERROR)
        )
    except Exception as exc:  # noqa: BLE001 - the predicate's own failure: the oracle's, reported
        Session.current = None  # its message may hold a product value: shown without asking the child
        if session.pending is not None:
            return None
        return Verdict(
            False,
            from_os(f"the predicate raised {type(exc).__name__}: {_message(exc)}{_own_frame(exc)}")[:MAX_DETAIL],
            PREDICATE_ERROR,
        )
    finally:
        Session.current = None
    if session.pending is not None:  # it swallowed _NeedAnswer (a bare except): its answer is still owed
        return None
    if verdict is True:
        return HELD
    if verdict is False:
        return Verdict(False, "predicate returned False")
    return Verdict(False, f"the predicate returned a {type(verdict).__name__}, not a bool", PREDICATE_ERROR)
