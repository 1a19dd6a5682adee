"""Whether the repository's own formatters and fixers would rewrite oracle files.

The pin records the generator and its inputs by sha256, and the predicates are protected: a formatter
that rewrites them after `pin-epoch` or `sample-properties` moves the epoch or edits the oracle. So the
reviewer's goals ask every formatter and fixer the repository enables (`pants fmt`, `pants fix`), over
the files they are about to record, before they write anything.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pants.core.goals.fix import AbstractFixRequest, FixFilesRequest, FixResult, FixTargetsRequest, Partitions
from pants.engine.addresses import Addresses
from pants.engine.fs import PathGlobs, Snapshot, SnapshotDiff
from pants.engine.internals.graph import Owners, OwnersRequest
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import Targets
from pants.engine.unions import UnionMembership
from pants.util.logging import LogLevel

from epoch_gate.text import printable
from epoch_gate_pants.failures import failure_line


@dataclass(frozen=True)
class FormattingRequest:
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Rewrite:
    tool: str
    is_formatter: bool
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Formatting:
    """The tools that would rewrite some of the requested files, and which files; empty when none would.
    `failure` says why the tools could not be asked (a formatter that fails on a file, say)."""

    rewrites: tuple[Rewrite, ...]
    paths_asked: tuple[str, ...] = ()
    failure: str = ""

    @property
    def refuses(self) -> bool:
        return bool(self.rewrites or self.failure)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(sorted({p for r in self.rewrites for p in r.paths}))

    def command(self) -> str:
        """The one command that brings the files to what the tools write (`fix` also runs formatters), as
        a shell reads it whatever the files are named."""
        goal = "fmt" if all(r.is_formatter for r in self.rewrites) else "fix"
        return printable(shlex.join(["pants", goal, *(self.paths or self.paths_asked)]))

    def refusal(self, goal: str, records: str) -> list[str]:
        if self.failure:
            return [
                f"{goal}: refused: the repository's formatters could not be asked about files that {records}: "
                f"{self.failure}",
                f"  Run `{printable(shlex.join(['pants', 'fmt', *self.paths_asked]))}` to see why, fix it, and run "
                f"{goal} again.",
            ]
        tools = ", ".join(f"{r.tool} ({', '.join(r.paths)})" for r in self.rewrites)
        return [
            printable(f"{goal}: refused: the repository's formatters would rewrite files that {records}: {tools}."),
            "  A formatter run after this goal would move the epoch or edit the oracle.",
            f"  Run `{self.command()}`, review the change, and run {goal} again.",
        ]


def _field_sets(request_type: type[FixTargetsRequest], targets: Targets) -> tuple:
    field_set_type = request_type.field_set_type
    return tuple(field_set_type.create(t) for t in targets if field_set_type.is_applicable(t))


async def _ask(request: FormattingRequest, request_types: list) -> Formatting:
    owners = await Get(Owners, OwnersRequest(request.paths))
    targets = await Get(Targets, Addresses(owners))
    # The Gets are written in this coroutine, defined before the rule that awaits it: Pants finds a rule's
    # Gets there, never in a plain function that builds and returns one.
    all_partitions = await MultiGet(
        (
            Get(Partitions, FixTargetsRequest.PartitionRequest, t.PartitionRequest(_field_sets(t, targets)))
            if issubclass(t, FixTargetsRequest)
            else Get(Partitions, FixFilesRequest.PartitionRequest, t.PartitionRequest(request.paths))
        )
        for t in request_types
    )
    wanted = set(request.paths)
    batches = [
        (request_type, tuple(sorted(wanted.intersection(p.elements))), p.metadata)
        for request_type, partitions in zip(request_types, all_partitions)
        for p in partitions
    ]
    batches = [b for b in batches if b[1]]
    snapshots = await MultiGet(Get(Snapshot, PathGlobs(files)) for _, files, _ in batches)
    results = await MultiGet(
        Get(FixResult, AbstractFixRequest.Batch, t.Batch(t.tool_name, files, metadata, snapshot))
        for (t, files, metadata), snapshot in zip(batches, snapshots)
    )
    rewrites: dict[tuple[str, bool], set[str]] = {}
    for (request_type, _, _), result in zip(batches, results):
        if result.did_change:
            diff = SnapshotDiff.from_snapshots(result.input, result.output)
            changed = {*diff.changed_files, *diff.our_unique_files, *diff.their_unique_files}
            rewrites.setdefault((result.tool_name, request_type.is_formatter), set()).update(changed)
    found = tuple(Rewrite(tool, fmt, tuple(sorted(p))) for (tool, fmt), p in sorted(rewrites.items()))
    return Formatting(found, request.paths)


@rule(desc="Ask the formatters about the oracle's files", level=LogLevel.DEBUG)
async def oracle_formatting(request: FormattingRequest, union_membership: UnionMembership) -> Formatting:
    # Every fixer and formatter Pants registers, derived from the union rather than a list of tools.
    request_types = [
        t for t in union_membership.get(AbstractFixRequest) if issubclass(t, (FixTargetsRequest, FixFilesRequest))
    ]
    if not request_types or not request.paths:
        return Formatting(())
    try:
        return await _ask(request, request_types)
    except Exception as error:  # noqa: BLE001 - a formatter that fails (on a syntax error, say) refuses, clearly
        return Formatting((), request.paths, failure_line(error))


def rules() -> list:
    return [*collect_rules()]
