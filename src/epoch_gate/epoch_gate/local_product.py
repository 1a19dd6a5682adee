"""A predicate judged in this process, for the oracle's own unit tests: the product is imported here (from
the test's import path, monkeypatches and all) and served exactly as the replay's child serves it, and
every answer crosses as the same JSON. Never used by the gate: the replay keeps the product in its child.

    from epoch_gate.local_product import holds
    assert holds(orders_properties.tax_is_half_even_rounded, record)
"""

from __future__ import annotations

import itertools
import json
from typing import Callable, Mapping, Optional

from epoch_gate.runner.judge import judging
from epoch_gate.runner.product.child import Server

Predicate = Callable[[object, judging.Product], object]


class OracleFailed(AssertionError):
    """The predicate itself failed (predicate-error or handle-misused in a replay)."""


class LocalChild:
    """The child's server in this process: each call answered as the replay's child answers it."""

    def __init__(self) -> None:
        self.server = Server()
        self.scopes = itertools.count(1)

    def ask(self, scope: int, call: bytes) -> bytes:
        return self.server.answer(scope, call).encode()

    def broke(self, why: str) -> BaseException:
        return OracleFailed(f"the local child broke the protocol: {why}")


def verdict(
    predicate: Predicate, record: Mapping[str, object], child: Optional[LocalChild] = None
) -> judging.Judgement:
    """The record's judgement as the replay would give it, running the product in this process (`child`:
    one that keeps the product's state across records, as a replay's child does)."""
    child = child or LocalChild()
    raw = json.dumps(record, separators=(",", ":")).encode()
    return judging.judge(predicate, raw, child, next(child.scopes))


def holds(predicate: Predicate, record: Mapping[str, object]) -> bool:
    """Whether the record holds; a failure of the predicate's own is raised, never read as False."""
    found = verdict(predicate, record)
    if found.error:
        raise OracleFailed(f"[{found.error}] {found.detail}")
    return found.holds
