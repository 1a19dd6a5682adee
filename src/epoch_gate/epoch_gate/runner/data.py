"""Inside the replay's child: a product value as data, and a product exception as text.

`encode` is `json.dumps` with a `default` for the product's objects. The C encoder writes the value of
an `int`, `float` or `str` subclass as the built-in type would (it never calls the subclass's methods),
so an amount whose `==` always holds crosses as the number it is. Objects cross as JSON objects of their
public fields (dataclasses, attrs classes, plain classes), an Enum as its value, a
Decimal or Fraction as its exact text. Anything else (a function, a generator, a NaN) is not data: the
parent then gets a handle it can pass back, but nothing to read. An answer's own properties cross
with it, read as it is answered: all of them, or those its property's predicate reads (`encode`'s
`names`); those of the objects inside it when a predicate first reads one (`properties`): computing
them all would be product code no predicate asked for. A property that raises or is not data never
crosses, so it never changes what the answer is. Whatever this module writes is only the product's
word: the parent parses it as JSON and judges the values itself.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import sys
import traceback
import types
from decimal import Decimal
from fractions import Fraction
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Callable, Iterator, Optional, Sequence

from epoch_gate.runner import protocol

MAX_DATA = 16 * 1024 * 1024  # characters of one text: a longer one is not data
# How deep an answer's arrays and objects nest: deeper ones are not data, whichever way it is read (the
# C encoder's text is checked; `_walk` stops there).
MAX_NESTING = 400
MAX_TRACEBACK = 1500
_FIELDS: dict[type, tuple[str, ...]] = {}
# A class's fields as a set: an instance whose __dict__ holds exactly those crosses as that dict, which the
# encoder reads in C (no Python call per field).
_DICT_FIELDS: dict[type, frozenset[str]] = {}
_TYPE_NAMES: dict[type, str] = {}  # a class's name as JSON text
_OWN: dict[type, tuple[str, ...]] = {}  # the properties an answer of a class crosses with
_PROPERTIES: dict[type, tuple[str, ...]] = {}
_KEYS: dict[str, str] = {}  # a property's name as JSON text
_JSON_NATIVE = (int, float, str, list, tuple, dict, type(None))  # subclasses too: the encoder writes their values


class NotData(Exception):
    """A product value that cannot cross as data."""


class _Raised(Exception):
    """What a product's property raised while its object was read, carried through json.dumps."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__()
        self.raised = raised


def _properties(cls: type) -> tuple[str, ...]:
    """A class's public properties, by name, found once per class (`dir` is slow)."""
    names = _PROPERTIES.get(cls)
    if names is None:
        names = _PROPERTIES[cls] = tuple(
            name
            for name in dir(cls)
            if not name.startswith("_") and isinstance(inspect.getattr_static(cls, name), property)
        )
    return names


def _fields(value: object) -> Optional[tuple[str, ...]]:
    """The public names an object crosses with, per class: its fields (its properties only on request:
    reading them runs product code, which a predicate may not need)."""
    cls = type(value)
    names = _FIELDS.get(cls)
    if names is not None:
        return names
    if dataclasses.is_dataclass(cls):
        own = [f.name for f in dataclasses.fields(cls)]
    elif hasattr(cls, "__attrs_attrs__"):
        own = [a.name for a in cls.__attrs_attrs__]  # type: ignore[attr-defined]
    elif isinstance(getattr(value, "__dict__", None), dict):
        # per instance: not cached; a name that is a str subclass would hash and compare with product code
        return tuple(name for name in vars(value) if type(name) is str and not name.startswith("_"))
    else:
        return None
    names = _FIELDS[cls] = tuple(own)
    _DICT_FIELDS[cls] = frozenset(own)
    return names


def properties(value: object) -> dict[str, object]:
    """An object's public properties, by name: what a predicate reads of it beyond its fields. One that
    raises or is not data is left out (reading it fails the record, as a missing field does), so one bad
    property never changes what the answer itself is."""
    return dict(_read_properties(value, _properties(type(value))))  # the answer's encoding leaves out what is not data


def _read_properties(value: object, names: tuple[str, ...]) -> Iterator[tuple[str, object]]:
    """(name, value) of each of the properties `names` of `value` that reads without raising."""
    for name in names:
        try:
            item = getattr(value, name)
        except MemoryError:
            raise
        except BaseException:  # noqa: BLE001 - the product's property failed: it does not cross
            continue
        yield name, item


def to_data(value: Any) -> object:
    """json.dumps' `default`: called only for what is not already JSON."""
    cls = type(value)
    fields = _DICT_FIELDS.get(cls)
    if fields is not None:  # the hot path: a class already seen (`_exact_dict`, inline)
        try:
            own = value.__dict__
        except AttributeError:  # a class with slots
            own = None
        if type(own) is dict and own.keys() == fields:
            return own
        return _read(value, _FIELDS[cls])
    names = _object_names(value)
    if names is None:
        return _value_data(value)
    own = _exact_dict(value)  # the first object of its class, read as every later one is
    return own if own is not None else _read(value, names)


def _exact_dict(value: object) -> Optional[dict[str, object]]:
    """The object's `__dict__` when it holds exactly its class's fields (a dataclass's or an attrs
    class's without slots): its fields as they are, read without a call each."""
    fields = _DICT_FIELDS.get(type(value))
    if fields is None:
        return None
    try:
        own = value.__dict__
    except AttributeError:  # a class with slots
        return None
    return own if type(own) is dict and own.keys() == fields else None


def _object_names(value: object) -> Optional[tuple[str, ...]]:
    """The fields of a value that crosses as an object of them, or None for one that does not (an Enum,
    a number, a set, a function: `_value_data`)."""
    if type(value) in _FIELDS:
        return _FIELDS[type(value)]
    if isinstance(value, (enum.Enum, Decimal, Fraction, set, frozenset)):
        return None
    return None if callable(value) or isinstance(value, types.ModuleType) else _fields(value)


def _value_data(value: object) -> object:
    """The data of a value that is not an object of fields; NotData for one that has none."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (Decimal, Fraction)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        try:
            return sorted(value)
        except TypeError:
            raise NotData(f"a {type(value).__name__} of unorderable items") from None
    raise NotData(f"a {type(value).__name__}")


# The names the answer being encoded crosses with (None: all of them), and for each dataclass or attrs
# class seen under them the fields its objects cross with
_NAMES: list[Optional[frozenset[str]]] = [None]
_WANTED: dict[type, tuple[str, ...]] = {}
_WANTED_BY_NAMES: dict[frozenset[str], dict[type, tuple[str, ...]]] = {}


def _project_to(names: Optional[frozenset[str]]) -> None:
    """The fields the next answer crosses with: those `names` names, or all (None, or names holding
    protocol.WHOLE: a predicate that reads whole values; its properties still only those named)."""
    global _WANTED
    if names is not None and protocol.WHOLE in names:
        names = None
    _NAMES[0] = names
    if names is not None:
        found = _WANTED_BY_NAMES.get(names)
        if found is None:
            if len(_WANTED_BY_NAMES) >= 16:
                _WANTED_BY_NAMES.clear()
            found = _WANTED_BY_NAMES[names] = {}
        _WANTED = found


def _to_projected(value: Any) -> object:
    """`to_data` with only the fields `_NAMES` names."""
    cls = type(value)
    wanted = _WANTED.get(cls)
    if wanted is None:
        fields = _object_names(value)
        if fields is None:
            return _value_data(value)
        names = _NAMES[0]
        assert names is not None
        wanted = tuple([name for name in fields if name in names])
        if cls in _DICT_FIELDS:  # the same for every instance
            _WANTED[cls] = wanted
    fields = _DICT_FIELDS.get(cls)  # as `to_data` reads it (`_exact_dict`, inline)
    if fields is not None:
        try:
            own = value.__dict__
        except AttributeError:  # a class with slots
            own = None
        if type(own) is dict and own.keys() == fields:
            return {name: own[name] for name in wanted}
    return _read(value, wanted)


def _read(value: object, names: tuple[str, ...]) -> dict[str, object]:
    """The object's fields by name, as read through the product's own attributes."""
    try:
        return {name: getattr(value, name) for name in names}
    except (RecursionError, MemoryError):
        raise  # a cycle, most likely: not data
    except BaseException as exc:  # noqa: BLE001 - the product's field raised (CancelledError too)
        raise _Raised(exc) from None


# json.dumps(value) as chunks, with `to_data` as its default, no NaN and no spaces. ASCII: a lone surrogate
# (os.fsdecode's) crosses escaped, and the frame always encodes. The C encoder is made once and called
# directly (JSONEncoder.encode makes one per call). It does not look for cycles (that costs a dict entry
# per container): a cyclic value is nested too deeply, which the encoder notices without keeping any
# state past the call, so it stays as good as new after it raised.
def _encoder(default: Callable[[Any], object]) -> Callable[[object, int], Sequence[str]]:
    if c_make_encoder is not None:
        return c_make_encoder(None, default, encode_basestring_ascii, None, ":", ",", False, False, False)  # type: ignore[no-any-return]
    python = json.JSONEncoder(default=default, allow_nan=False, check_circular=False, separators=(",", ":"))
    return lambda value, _: [python.encode(value)]


_chunks, _projected_chunks = _encoder(to_data), _encoder(_to_projected)


def _own_names(value: object) -> tuple[str, ...]:
    """The properties an answer of this value's class crosses with."""
    cls = type(value)
    names = _OWN.get(cls)
    if names is None:
        names = (
            ()
            # not `_fields`: an Enum that is a dataclass is read by its value
            if isinstance(value, _JSON_NATIVE) or _object_names(value) is None
            else _properties(cls)
        )
        if cls in _FIELDS:  # a dataclass or an attrs class: the same for every instance
            _OWN[cls] = names
    return names


def encode(value: object, names: Optional[frozenset[str]] = None) -> tuple[str, str]:
    """An answer as JSON text: its value as data, and its own properties (the objects inside it cross
    with their fields only: their properties when a predicate reads one). With `names`, only the fields
    and properties it names cross, at every depth. Whichever way, a field that is not data is left out
    of its object (`_walk`), so what a predicate reads never depends on what it does not. Raises NotData
    when the value itself is not data."""
    _project_to(names)
    text = _data(value)
    found = _OWN.get(type(value))
    if found == ():  # the common case: a class seen before, without properties
        return text, "{}"
    found = found or _own_names(value)
    if names is not None:
        found = tuple([name for name in found if name in names])
    own = []
    for name, item in _read_properties(value, found):  # each read once, and on its own
        try:
            own.append(_key(name) + _data(item))
        except NotData:
            continue
    return text, "{" + ",".join(own) + "}"


def _data(value: object) -> str:
    """The value as data: the C encoder's text when it is all data, else `_walk`'s. NotData (saying why)
    when the value itself is not data."""
    why: Optional[BaseException] = None
    try:
        text = "".join((_chunks if _NAMES[0] is None else _projected_chunks)(value, 0))
    except MemoryError:
        raise
    except _Raised as raised:
        why = raised.raised
    except RecursionError:
        why = NotData("nested too deeply, or a cycle")
    except (ValueError, TypeError, NotData) as exc:  # NaN, Infinity; a key that is not a scalar
        why = exc if isinstance(exc, NotData) else NotData(str(exc))
    except BaseException as exc:  # noqa: BLE001 - the product's code raised while its value was read
        why = exc
    else:
        if len(text) <= MAX_DATA and not protocol.nested_deeper(text, MAX_NESTING):
            return text
        why = NotData(f"nested deeper than {MAX_NESTING}, or a text of over {MAX_DATA} characters")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, WALK_FRAMES))  # the walk reaches MAX_NESTING whatever the product set
    try:
        walked = _walk_part(value, 1, set(), [MAX_WALKED])
    except _TooLarge:
        raise NotData(f"over {MAX_WALKED} objects, lists and dicts to read") from None
    finally:
        sys.setrecursionlimit(limit)
    if walked is not None:
        return walked
    raise why if isinstance(why, NotData) else NotData(f"reading it raised {type(why).__name__}")


MAX_WALKED = 100_000  # objects, lists and dicts `_walk` reads in one value before it is not data
WALK_FRAMES = 3 * MAX_NESTING + 1000  # the recursion limit while `_walk` runs: three frames a level


class _TooLarge(Exception):
    """`_walk` read MAX_WALKED parts of one value (a graph whose cycles make paths without end)."""


def _walk(value: object, depth: int, path: set[int], budget: list[int]) -> Optional[str]:
    """The value as data, read as the C encoder reads it, in Python: each field of its objects (and each
    entry of its dicts) that is not data, or that raises anything when read, left out. None when the
    value itself is not data: a NaN, a text over MAX_DATA, a function, a list with an item that is not
    data, a list, dict or object nested deeper than MAX_NESTING or already on `path` (a cycle). Raises
    _TooLarge past `budget`."""
    cls = type(value)
    if value is None or issubclass(cls, (str, int, float)):
        if issubclass(cls, str) and str.__len__(value) > MAX_DATA:  # type: ignore[arg-type]
            return None
        try:
            return "".join(_chunks(value, 0))
        except ValueError:  # NaN, Infinity
            return None
    if id(value) in path:
        return None
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooLarge
    path.add(id(value))
    try:
        if issubclass(cls, (list, tuple)):
            return _walk_items(value, depth, path, budget)
        if issubclass(cls, dict):
            return _walk_dict(value, depth, path, budget)  # type: ignore[arg-type]
        try:
            names = _object_names(value)
            found = _value_data(value) if names is None else None
            own = _exact_dict(value) if names is not None else None
        except BaseException:  # noqa: BLE001 - not data, or its class asked the product, which raised
            return None
        if names is None:
            return _walk(found, depth, path, budget)  # an Enum's value, a set's items: no level of their own
        if depth > MAX_NESTING:
            return None
        if _NAMES[0] is not None:
            names = tuple([name for name in names if name in _NAMES[0]])
        kept = []
        for name in names:
            try:
                item = own[name] if own is not None else getattr(value, name)
            except MemoryError:
                raise
            except BaseException:  # noqa: BLE001 - the product's field raised: it is left out
                continue
            text = _walk_part(item, depth + 1, path, budget)
            if text is not None:
                kept.append(_key(name) + text)
        return "{" + ",".join(kept) + "}"
    finally:
        path.discard(id(value))


def _walk_part(value: object, depth: int, path: set[int], budget: list[int]) -> Optional[str]:
    """`_walk` of a field, an item or an entry: one too deep for the stack is not data, on its own."""
    try:
        return _walk(value, depth, path, budget)
    except RecursionError:
        return None


def _walk_items(value: Any, depth: int, path: set[int], budget: list[int]) -> Optional[str]:
    """A list or a tuple, as the C encoder reads it: its items as they are, or those a subclass's
    iterator gives."""
    if depth > MAX_NESTING:
        return None
    if type(value) is not list and type(value) is not tuple:
        try:
            value = list(value)
        except MemoryError:
            raise
        except BaseException:  # noqa: BLE001 - the product's iterator raised: not data
            return None
    items = []
    for item in value:
        text = _walk_part(item, depth + 1, path, budget)
        if text is None:
            return None
        items.append(text)
    return "[" + ",".join(items) + "]"


def _walk_dict(value: dict[object, object], depth: int, path: set[int], budget: list[int]) -> Optional[str]:
    """A dict, as the C encoder reads it: `{}` when it holds nothing, else its items (a subclass's own
    `items()`), each a pair; an entry whose key JSON has not (a tuple, a NaN), or whose value is not
    data, is left out."""
    if depth > MAX_NESTING:
        return None
    if dict.__len__(value) == 0:
        return "{}"
    try:
        pairs = list(dict.items(value) if type(value) is dict else value.items())
    except MemoryError:
        raise
    except BaseException:  # noqa: BLE001 - the product's items() raised: not data
        return None
    kept = []
    for pair in pairs:
        if not issubclass(type(pair), tuple) or tuple.__len__(pair) != 2:  # type: ignore[arg-type]
            return None
        key = _key_text(tuple.__getitem__(pair, 0))  # type: ignore[arg-type]
        text = None if key is None else _walk_part(tuple.__getitem__(pair, 1), depth + 1, path, budget)  # type: ignore[arg-type]
        if text is not None:
            kept.append(key + text)  # type: ignore[operator]
    return "{" + ",".join(kept) + "}"


def _key(name: str) -> str:
    """A property's name as a JSON object's key, with its colon."""
    key = _KEYS.get(name)
    if key is None:
        key = json.dumps(name) + ":"
        if len(_KEYS) < 4096:
            _KEYS[name] = key
    return key


def type_name(value: object) -> str:
    """The value's class name, as JSON text."""
    cls = type(value)
    name = _TYPE_NAMES.get(cls)
    if name is None:
        name = json.dumps(cls.__name__)
        if len(_TYPE_NAMES) < 4096:
            _TYPE_NAMES[cls] = name
    return name


def _key_text(key: object) -> Optional[str]:
    """A dict's key as JSON text with its colon, as the C encoder writes it (an int key as its digits;
    no method of the key's is called), or None for a key JSON has not (a tuple, a NaN)."""
    cls = type(key)
    if cls is str:
        return _key(key)  # type: ignore[arg-type]
    if issubclass(cls, str):
        return encode_basestring_ascii(key) + ":"  # type: ignore[no-any-return]
    if issubclass(cls, float):
        text = float.__repr__(key)  # type: ignore[arg-type]
        return None if text in ("nan", "inf", "-inf") else encode_basestring_ascii(text) + ":"  # type: ignore[no-any-return]
    if key is True or key is False or key is None:
        return {True: '"true":', False: '"false":', None: '"null":'}[key]  # type: ignore[index]
    if issubclass(cls, int):
        try:
            return encode_basestring_ascii(int.__repr__(key)) + ":"  # type: ignore[arg-type, no-any-return]
        except ValueError:  # more digits than Python writes (sys.get_int_max_str_digits)
            return None
    return None


def type_names(exc: BaseException) -> list[str]:
    """The exception's class and its bases by name, most derived first (up to BaseException)."""
    return [cls.__name__ for cls in type(exc).__mro__ if cls is not object]


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
