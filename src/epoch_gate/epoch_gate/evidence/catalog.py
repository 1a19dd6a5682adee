"""The property catalog: every property a manifest may draw (name, bound, predicate, description)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from epoch_gate.reasons import Code, fail

NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
BOUND = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# `module.path:function`: a catalog's predicate, and a suite's product set-up.
MODULE_FUNCTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
MAX_BYTES = 1024 * 1024
# PyYAML composes and constructs recursively, a few Python frames per level of nesting. Inside Pants the
# recursion limit is 10,000 and rules run on 2 MiB threads: ~2,700 nested `[` overflow the C stack
# (SIGSEGV, the whole run dies) long before any RecursionError. A catalog nests 3 deep.
MAX_DEPTH = 64


@dataclass(frozen=True)
class Property:
    """A predicate over one saved record of a bound (a record kind of the fixture world)."""

    name: str
    bound: str
    predicate: str
    description: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "bound": self.bound, "predicate": self.predicate, "description": self.description}


@dataclass(frozen=True)
class Catalog:
    properties: tuple[Property, ...]

    def by_name(self) -> dict[str, Property]:
        return {p.name: p for p in self.properties}


def property_from_json(raw: object, path: str) -> Property:
    if not isinstance(raw, dict):
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "a property must be a mapping", expected="mapping", found=type(raw).__name__
        )
    fields = {"name", "bound", "predicate", "description"}
    if "probe" in raw:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            (
                f"property {str(raw.get('name'))[:64]} has a probe: a predicate now drives the product itself, "
                "`predicate(record, product)` calling `product.<module>.<function>(...)`; fold the probe's calls "
                "into the predicate and delete the field (docs/adopting.md)"
            ),
            expected=", ".join(sorted(fields)),
            found="probe",
        )
    if set(raw) != fields:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "a property has exactly name, bound, predicate, description",
            expected=", ".join(sorted(fields)),
            found=", ".join(sorted(map(str, raw))),
        )
    for key in sorted(set(raw)):
        if not isinstance(raw[key], str):
            raise fail(
                Code.ARTIFACT_MALFORMED,
                path,
                f"property field {key!r} must be a string",
                expected="string",
                found=type(raw[key]).__name__,
            )
    for key, pattern in (("name", NAME), ("bound", BOUND), ("predicate", MODULE_FUNCTION)):
        if not pattern.fullmatch(raw[key]):  # `$` would let a trailing newline through
            raise fail(
                Code.ARTIFACT_MALFORMED,
                path,
                f"property {key} is not valid",
                expected=pattern.pattern,
                found=raw[key][:80],
            )
    if not raw["description"].strip():
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            f"property {raw['name']} has an empty description",
            expected="a description",
            found="empty",
        )
    return Property(raw["name"], raw["bound"], raw["predicate"], raw["description"])


def _load_yaml(data: bytes, path: str) -> object:
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: object, index: object) -> Optional[yaml.Node]:
            # The parser below is a state machine; only composing recurses, so bounding it here bounds all
            # recursion on the input's depth before it gets deep. Aliases nest without nesting in the
            # text (`b: &b [*a]`, `c: &c [*b]`, ...) and the constructor would recurse through them: a
            # catalog is plain data and needs none.
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise fail(
                    Code.ARTIFACT_MALFORMED,
                    path,
                    f"catalog uses a YAML alias (*{event.anchor}, line {event.start_mark.line + 1}): "
                    "a catalog is plain data",
                    expected="no aliases",
                    found=f"*{event.anchor}"[:80],
                )
            if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
                return super().compose_node(parent, index)
            if self.depth >= MAX_DEPTH:
                # The first collection too deep: measuring the rest of a hostile file only costs time.
                mark = self.peek_event().start_mark
                raise fail(
                    Code.ARTIFACT_MALFORMED,
                    path,
                    f"catalog nests collections deeper than {MAX_DEPTH} levels "
                    f"(line {mark.line + 1}, column {mark.column + 1})",
                    expected=f"nesting depth <= {MAX_DEPTH}",
                    found=f"depth > {MAX_DEPTH}",
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
        result: dict[object, object] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node)
            if key in result:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            result[key] = loader.construct_object(value_node, deep=True)
        return result

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "catalog is not UTF-8", expected="UTF-8", found="invalid bytes"
        ) from None
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            f"catalog is not valid YAML: {exc}".splitlines()[0],
            expected="YAML",
            found=type(exc).__name__,
        ) from None


def parse_catalog(data: bytes, path: str) -> Catalog:
    if len(data) > MAX_BYTES:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "catalog is larger than the size cap",
            expected=f"<= {MAX_BYTES} bytes",
            found=f"{len(data)} bytes",
        )
    raw = _load_yaml(data, path)
    if not isinstance(raw, dict) or set(raw) != {"properties"} or not isinstance(raw["properties"], list):
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "catalog must be a mapping with one key, properties (a list)",
            expected="{properties: [...]}",
            found=type(raw).__name__,
        )
    if not raw["properties"]:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "catalog is empty: it can judge nothing",
            expected="at least one property",
            found="none",
        )
    properties = tuple(property_from_json(item, f"{path}#properties[{i}]") for i, item in enumerate(raw["properties"]))
    seen: set[str] = set()
    for prop in properties:
        if prop.name in seen:
            raise fail(
                Code.CATALOG_DUPLICATE,
                path,
                f"property {prop.name} is declared twice",
                expected="unique names",
                found=prop.name,
            )
        seen.add(prop.name)
    return Catalog(properties)
