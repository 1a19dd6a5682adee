"""A predicate judged in this process, for the oracle's own unit tests: the product is imported here (from
the test's import path, monkeypatches and all) and served exactly as the replay's child serves it, and
every answer crosses as the same JSON. Never used by the gate: the replay keeps the product in its child.

    from epoch_gate.local_product import holds
    assert holds(orders_properties.tax_is_half_even_rounded, record)
"""

from __future__ import annotations

import json
from typing import Callable, Mapping

from epoch_gate.runner import judging, protocol
from epoch_gate.runner.child import Server

Predicate = Callable[[object, judging.Product], object]
MAX_CALLS = 10_000


class OracleFailed(AssertionError):
    """The predicate itself failed (predicate-error or handle-misused in a replay)."""


def verdict(predicate: Predicate, record: Mapping[str, object]) -> judging.Verdict:
    """The record's verdict as the replay would give it, running the product in this process."""
    raw = json.dumps(record, separators=(",", ":")).encode()
    server, session, scope = Server(), judging.Session(), 1
    for _ in range(MAX_CALLS):
        found = judging.run(predicate, raw, session)
        if found is not None:
            return found
        assert session.pending is not None
        answer = server.answers(scope, server.read_calls([session.pending]), [None]).encode()
        (decoded,) = protocol.parse_answers(answer, 1, judging.part, judging.Remote)
        session.log.append((session.pending, judging.decode(scope, decoded)))
    raise OracleFailed(f"the predicate made more than {MAX_CALLS} calls on one record")


def holds(predicate: Predicate, record: Mapping[str, object]) -> bool:
    """Whether the record holds; a failure of the predicate's own is raised, never read as False."""
    found = verdict(predicate, record)
    if found.error:
        raise OracleFailed(f"[{found.error}] {found.detail}")
    return found.held
