"""The product names a predicate module calls through its `product` parameter, read as data.

`product.orders.totals.totals_from_record(record)` names `orders.totals.totals_from_record`; the build
graph maps each name's longest module prefix to the target that owns it, so a suite depends on exactly
the product code its predicates drive, without an import (the predicates never import the product).
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Iterator

PARAMETER = "product"
MAX_NAMES = 10_000


def product_names(source: bytes) -> set[str]:
    """Every dotted name `product.a.b...` spells in the module (a name after a `.` is never the start)."""
    try:
        tokens = [
            t for t in tokenize.tokenize(io.BytesIO(source).readline) if t.type not in (tokenize.NL, tokenize.COMMENT)
        ]
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        return set()
    names: set[str] = set()
    for index, token in enumerate(tokens):
        after_dot = index and tokens[index - 1].string == "."
        if token.type != tokenize.NAME or token.string != PARAMETER or after_dot:
            continue
        parts = []
        cursor = index + 1
        while cursor + 1 < len(tokens) and tokens[cursor].string == "." and tokens[cursor + 1].type == tokenize.NAME:
            parts.append(tokens[cursor + 1].string)
            cursor += 2
        if parts:
            names.add(".".join(parts))
        if len(names) >= MAX_NAMES:
            break
    return names


def module_candidates(name: str) -> Iterator[str]:
    """`a.b.C.f` -> `a.b.C.f`, `a.b.C`, `a.b`, `a`: the module is the longest prefix something owns."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        yield ".".join(parts[:cut])


def old_shape_predicates(source: bytes) -> list[str]:
    """Public top-level functions taking a record alone: predicates written to run beside the product."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and not node.name.startswith("_")
        and [a.arg for a in node.args.args] == ["record"]
    ]
