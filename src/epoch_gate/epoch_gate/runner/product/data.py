"""Inside the replay's child: a product value as data, and a product exception as text.

`encode` reads a value as production code reads it and writes it as plain JSON (`protocol`). A number, a
text, `None` and a bool are themselves (a subclass of `int`, `float` or `str` crosses as the built-in
value, read without calling any method of the subclass); a list is a JSON array and a tuple, a set (of
numbers and texts), a Decimal and a Fraction are tagged as such, so that the parent rebuilds each as its
own value of the same type (a subclass's items as its own iteration gives them); a dict is a JSON object
of its entries whose key is exactly a `str`; an Enum is its `value`. Any other object with fields is a
product object: a JSON object of its handle (the child keeps it, to call or pass back) and its fields,
whose names come from the class's declaration (dataclass or attrs fields, public `__slots__`) or, for a
plain class, from the instance's own public keys that are exactly a `str`, each read by ordinary
attribute access, as production code reads it (never from `__dict__`'s values). Anything else (a
function, a generator, a module, a NaN) is not data: as an answer the parent gets a handle it can call
or pass back. A field or entry that is not data, or that raises when read, is left out of its object (a
list holding one is not data), so what a predicate reads never depends on what it does not.

Whatever this module writes is only the product's word: the parent parses it as strict JSON and judges
the values itself.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import json
import sys
import traceback
import types
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Optional

from epoch_gate.runner.protocol import DECIMAL, FRACTION, HANDLE, MAX_DIGITS, SET, TUPLE

MAX_DATA = 16 * 1024 * 1024  # characters of one text: a longer one is not data
MAX_NESTING = 400  # how deep arrays and objects nest: deeper ones are not data
MAX_WALKED = 100_000  # objects, lists and dicts read in one value before it is not data (a graph of cycles)
WALK_FRAMES = 2 * MAX_NESTING + 1000  # the recursion limit while a value is read: two frames a level
MAX_TRACEBACK = 1500
_TOO_LARGE_INT = 10**MAX_DIGITS


class NotData(Exception):
    """A product value that cannot cross as data."""


class _Budget(Exception):
    """MAX_WALKED parts read: the whole value is not data."""


# Per class: the names of the fields it declares, or None for a class read per instance
_DECLARED: dict[type, Optional[tuple[str, ...]]] = {}


def _declared(cls: type) -> Optional[tuple[str, ...]]:
    if cls in _DECLARED:
        return _DECLARED[cls]
    if dataclasses.is_dataclass(cls):
        names = tuple(field.name for field in dataclasses.fields(cls))
    elif isinstance(getattr(cls, "__attrs_attrs__", None), tuple):
        names = tuple(a.name for a in cls.__attrs_attrs__)  # type: ignore[attr-defined]
    elif not any("__dict__" in vars(c) for c in cls.__mro__) and any("__slots__" in vars(c) for c in cls.__mro__):
        names = _slots(cls)
    else:
        _DECLARED[cls] = None
        return None
    found = _DECLARED[cls] = tuple(name for name in names if type(name) is str and not name.startswith("\0"))
    return found


_CLASS_DICT = type.__dict__["__dict__"].__get__  # a class's own dict, whatever its metaclass says
_MRO = type.__dict__["__mro__"].__get__


def reads_plainly(value: object, name: str) -> bool:
    """Whether reading the attribute `name` of `value` runs none of the product's code, decided on the
    classes' own dicts (no lookup a metaclass could answer): the classes read attributes as `object` does
    and have no `__getattr__` or `__dict__` of their own, and the name is a slot, or an entry of the
    instance's own dict (its keys all exactly `str`) with no data descriptor (a property) of that name."""
    mro = _MRO(type(value))
    dicts = [_CLASS_DICT(klass) for klass in mro]
    lookup = next((found["__getattribute__"] for found in dicts if "__getattribute__" in found), None)
    if lookup is not object.__getattribute__ or any("__getattr__" in found for found in dicts):
        return False
    if any("__dict__" in found and type(found["__dict__"]) is not types.GetSetDescriptorType for found in dicts):
        return False
    declared = next((found[name] for found in dicts if name in found), None)
    if type(declared) is types.MemberDescriptorType:
        return True
    if declared is not None and any(
        "__set__" in found or "__delete__" in found for found in map(_CLASS_DICT, _MRO(type(declared)))
    ):
        return False
    try:
        own = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return False
    return type(own) is dict and all(type(key) is str for key in own) and name in own


def field_names(value: object) -> tuple[str, ...]:
    """The names `encode` reads as the value's fields: its class's declaration, or its own public keys."""
    return _declared(type(value)) or _own_names(value) or ()


def _slots(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for klass in reversed(cls.__mro__[:-1]):
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if type(name) is str and not name.startswith(("_", "\0")) and name not in names:
                names.append(name)
    return tuple(names)


def _own_names(value: object) -> Optional[tuple[str, ...]]:
    """A plain object's public keys that are exactly a `str`, or None for a value without an instance dict."""
    try:
        own = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return None
    if type(own) is not dict:
        return None
    return tuple([name for name in own if type(name) is str and not name.startswith(("_", "\0"))])


# Per class, what its values cross as: found once, from its MRO (no `isinstance`, which asks `__class__`)
_KINDS: dict[type, str] = {}
_BY_BASE = (
    (enum.Enum, "enum"),
    (bool, "int"),
    (str, "str"),
    (int, "int"),
    (float, "float"),
    (Decimal, "decimal"),
    (Fraction, "fraction"),
    (tuple, "tuple"),
    (list, "list"),
    (set, "set"),
    (frozenset, "set"),
    (dict, "dict"),
    (types.ModuleType, "other"),
    (type, "other"),
)


def _kind(cls: type) -> str:
    mro = type.__dict__["__mro__"].__get__(cls)
    kind = next((kind for base, kind in _BY_BASE if base in mro), None)
    if kind is None:
        kind = "other" if any("__call__" in vars(klass) for klass in mro[:-1]) else "object"
    _KINDS[cls] = kind
    return kind


class _Walk:
    """One value's reading: the objects written so far (`kept`), the parts on the current path (a cycle
    closes on one) and what is left of the budget."""

    def __init__(self, kept: list[object], judge_reads: bool = False) -> None:
        self.kept, self.path, self.left = kept, set(), MAX_WALKED
        # Whether each field read is judged (a read again only: an answer to a call needs no such word),
        # and whether nothing it read ran product code (`reads_plainly`, `product`)
        self.judge_reads, self.plainly = judge_reads, True

    def part(self, value: Any, depth: int) -> Any:
        """The value as plain JSON data; NotData when it is not data."""
        cls = type(value)  # never `__class__`, which an object can make claim anything
        if cls is str:
            if len(value) > MAX_DATA:
                raise NotData(f"a text of over {MAX_DATA} characters")
            return value
        if cls is int:
            if -_TOO_LARGE_INT < value < _TOO_LARGE_INT:
                return value
            raise NotData(f"an int of over {MAX_DIGITS} digits")
        if value is None or cls is bool:
            return value
        if cls is float:
            if value - value == 0.0:
                return value
            raise NotData(f"{value!r} is not a finite number")
        kind = _KINDS.get(cls) or _kind(cls)
        if kind == "object":
            return self.nested(value, kind, depth)
        if kind == "enum":
            return self.part(self.product(lambda: value.value), depth)  # no level of its own
        if kind == "str":
            return self.part(str.__str__(value), depth)
        if kind == "int":
            return self.part(int.__int__(value), depth)
        if kind == "float":
            return self.part(float.__float__(value), depth)
        if kind == "decimal":
            return {DECIMAL: Decimal.__str__(value)}
        if kind == "fraction":
            self.plainly = self.plainly and cls is Fraction  # a subclass's numerator may be its own code
            return {FRACTION: f"{int.__repr__(value.numerator)}/{int.__repr__(value.denominator)}"}
        if kind == "other":
            raise NotData(f"a {cls.__name__}")
        return self.nested(value, kind, depth)

    def nested(self, value: Any, kind: str, depth: int) -> Any:
        """A list, a tuple, a set, a dict or a product object: a level of its own, on the path."""
        cls = type(value)
        if depth > MAX_NESTING:
            raise NotData(f"nested deeper than {MAX_NESTING}")
        if id(value) in self.path:
            raise NotData("a cycle back to a value holding it")
        self.left -= 1
        if self.left < 0:
            raise _Budget
        self.path.add(id(value))
        try:
            if kind == "list" or kind == "tuple":
                items = value if cls is list or cls is tuple else self.product(lambda: list(value))
                made = self.items(items, depth)
                return {TUPLE: made} if kind == "tuple" else made
            if kind == "set":
                members = self.items(self.product(lambda: list(value)), depth)
                if not all(type(item) in (str, int, float, bool) for item in members):
                    raise NotData(f"a {cls.__name__} of other than numbers and texts")
                return {SET: sorted(members, key=lambda item: (type(item).__name__, item))}
            if kind == "dict":
                pairs = dict.items(value) if cls is dict else self.product(lambda: [(k, v) for k, v in value.items()])
                return self.entries([(k, v) for k, v in pairs if type(k) is str and not k.startswith("\0")], depth)
            return self.object(value, depth)
        finally:
            self.path.discard(id(value))

    def items(self, items: Any, depth: int) -> list[object]:
        """A list's items as data (a number or text as it is, without a call of its own)."""
        made = []
        for item in items:
            cls = type(item)
            if (cls is int and -_TOO_LARGE_INT < item < _TOO_LARGE_INT) or item is None or cls is bool:
                made.append(item)
            elif cls is str and len(item) <= MAX_DATA:
                made.append(item)
            else:
                made.append(self.part(item, depth + 1))
        return made

    def product(self, read: Callable[[], Any]) -> Any:
        """What the product's own code gives (an iterator, an Enum's value, a sort by its items' order);
        NotData when it raises."""
        self.plainly = False
        try:
            return read()
        except (RecursionError, MemoryError):
            raise
        except BaseException as exc:  # noqa: BLE001 - the product's code raised: not data
            raise NotData(f"reading it raised {type(exc).__name__}") from None

    def object(self, value: Any, depth: int) -> dict[str, object]:
        """A product object: its handle, then each field that reads without raising (by ordinary attribute
        access) and is data; the value is kept once its fields are read."""
        self.plainly = self.plainly and type(value) in _DECLARED  # finding a new class's fields asks the class
        names = _declared(type(value))
        if names is None:
            names = _own_names(value)
            if names is None:
                raise NotData(f"a {type(value).__name__} without fields")
        made: dict[str, object] = {HANDLE: -1}  # the handle first: the protocol's tag
        for name in names:
            if self.judge_reads:
                self.plainly = self.plainly and reads_plainly(value, name)
            try:
                item = getattr(value, name)
            except (RecursionError, MemoryError):
                raise
            except BaseException:  # noqa: BLE001 - the product's field raised: it is left out
                continue
            cls = type(item)  # a number or text as it is, without a call of its own (as `entry`)
            if (cls is int and -_TOO_LARGE_INT < item < _TOO_LARGE_INT) or (cls is str and len(item) <= MAX_DATA):
                made[name] = item
            else:
                self.entry(made, name, item, depth)
        made[HANDLE] = len(self.kept)
        self.kept.append(value)
        return made

    def entries(self, pairs: list[tuple[str, Any]], depth: int) -> dict[str, object]:
        """A JSON object of a dict's entries that are data."""
        made: dict[str, object] = {}
        for name, item in pairs:
            self.entry(made, name, item, depth)
        return made

    def entry(self, made: dict[str, object], name: str, item: Any, depth: int) -> None:
        """`item` as `made[name]` when it is data; left out (with what it kept) when it is not. A name met
        twice (a dict subclass's items()) keeps its last read."""
        cls = type(item)  # a number or text as it is, without a call of its own
        if (cls is int and -_TOO_LARGE_INT < item < _TOO_LARGE_INT) or item is None or cls is bool:
            made[name] = item
            return
        if cls is str and len(item) <= MAX_DATA:
            made[name] = item
            return
        mark = len(self.kept)
        try:
            made[name] = self.part(item, depth + 1)
        except (NotData, RecursionError):
            made.pop(name, None)
            del self.kept[mark:]  # what it kept is in no object the parent will see


_dumps = json.JSONEncoder(ensure_ascii=True, allow_nan=False, check_circular=False, separators=(",", ":")).encode


def encode(value: object, kept: list[object], plainly: Optional[list[bool]] = None) -> str:
    """The value as ASCII JSON; each object written is appended to `kept` as its object closes. NotData
    (saying why) when the value itself is not data; `kept` is then as it was. `plainly`, when given, gets
    whether no field read ran product code."""
    mark = len(kept)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, WALK_FRAMES))  # MAX_NESTING is reached whatever the product set
    walk = _Walk(kept, judge_reads=plainly is not None)
    try:
        text = _dumps(walk.part(value, 1))
        if plainly is not None:
            plainly.append(walk.plainly)
        return text
    except NotData:
        del kept[mark:]
        raise
    except _Budget:
        del kept[mark:]
        raise NotData(f"over {MAX_WALKED} objects, lists and dicts to read") from None
    except RecursionError:
        del kept[mark:]
        raise NotData("nested too deeply") from None
    finally:
        sys.setrecursionlimit(limit)


def type_name(value: object) -> str:
    """The value's class name."""
    return type(value).__name__


def type_names(exc: BaseException) -> list[str]:
    """The exception's class and its bases, most derived first (up to BaseException), each as
    `module.qualname`: `builtins.Name` only for Python's own class of that name, so that a product's
    `class ValueError(Exception)` is never taken for the built-in one."""
    names = []
    for cls in type(exc).__mro__:
        if cls is object:
            continue
        name = type.__dict__["__name__"].__get__(cls)
        if vars(builtins).get(name) is cls:
            names.append(f"builtins.{name}")
        else:
            module = type.__dict__["__module__"].__get__(cls)
            qualname = type.__dict__["__qualname__"].__get__(cls)
            names.append(f"{module if type(module) is str else '?'}.{qualname}")
    return names


def message(exc: BaseException) -> str:
    try:
        return str(exc)[:500]
    except Exception:  # noqa: BLE001 - a product's __str__ that raises still leaves its class name
        return "(its message could not be read)"


def product_traceback(exc: BaseException, runner_root: str) -> str:
    """The traceback's frames outside the runner (the product's own), innermost last, bounded."""
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(runner_root)]
        text = "".join(traceback.format_list(frames))
    except Exception:  # noqa: BLE001 - a traceback that cannot be formatted is left out, not fatal
        return ""
    return text[-MAX_TRACEBACK:]
