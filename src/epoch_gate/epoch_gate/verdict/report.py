"""The report: `report.json` (schema-versioned, see report.schema.json), a Markdown twin, console lines."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Mapping, Optional, Sequence

from epoch_gate.change.changed import ChangedPath
from epoch_gate.verdict.suite import Identities, Label, Verdict, label_of
from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.evidence.held_out import HeldOut, PropertyDraw
from epoch_gate.evidence.observations import Observation
from epoch_gate.evidence.regressions import RegressionStatus
from epoch_gate.change.oracle import OracleChange
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Reason
from epoch_gate.evidence.replay_result import PropertyOutcome, ReplayResult
from epoch_gate.text import json_safe, printable

SCHEMA_VERSION = 5

# `trusted`: CI judged the change with the trusted base's gate code and configuration. `local`: the gate
# ran from the working tree under review, whose code and configuration can program the judge.
Mode = Literal["trusted", "local"]
MODES: tuple[Mode, ...] = ("trusted", "local")
ADVISORY = (
    "judged from this working tree, whose code can program the judge; "
    "only CI's trusted mode gives the verdict that counts"
)


def suite_folder(address: str) -> str:
    """Where a suite's witnesses go under the output folder: readable, one path segment, and distinct for
    distinct addresses (`a/b:c` and `a:b/c` differ in the digest)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", address).strip("._-")[:80] or "suite"
    return f"suites/{readable}-{sha256_bytes(address.encode('utf-8'))[:8]}"


@dataclass(frozen=True)
class Signing:
    """Whether trusted mode signs the statement (a DSSE envelope beside it), by which key, or why not."""

    signed: bool
    keyid: str = ""  # the sha256 of the public key
    why: str = ""

    def to_json(self) -> dict[str, object]:
        return {"signed": True, "keyid": self.keyid} if self.signed else {"signed": False, "why": self.why}

    def line(self) -> str:
        return f"signed with the key {self.keyid}" if self.signed else f"unsigned: {self.why}"


LOCAL_SIGNING = Signing(False, why="local mode writes no statement")


@dataclass(frozen=True)
class SuiteReport:
    address: str
    verdict: Verdict
    identities: Identities
    replay: Optional[ReplayResult]
    observations: tuple[Observation, ...]  # this suite's: its replays' and the archive's
    cached: Optional[bool] = None  # whether the replay came from a cache; None: not replayed, or unknown
    held_out: HeldOut = HeldOut(False, "not judged")
    held_out_replay: Optional[ReplayResult] = None  # the replay over the held-out world, when drawn
    property_draw: PropertyDraw = PropertyDraw(False, "not judged")  # properties drawn outside the manifest
    regressions: RegressionStatus = RegressionStatus()
    regressions_replay: Optional[ReplayResult] = None  # the replay of the regression records, when any are kept

    @property
    def folder(self) -> str:
        return suite_folder(self.address)

    def witness_digests(self) -> list[tuple[str, str]]:
        return sorted((o.id, o.witness_sha256) for o in self.observations if o.source == "replay")

    def _property(self, outcome: PropertyOutcome) -> dict[str, object]:
        return {**outcome.to_json(), "held_out": outcome.name in self.property_draw.names}

    def to_json(self) -> dict[str, object]:
        return {
            "address": self.address,
            "verdict": self.verdict.label.value,
            "folder": self.folder,
            "cached": self.cached,
            "identities": {
                **self.identities.to_json(),
                "witnesses": [{"observation_id": i, "witness_sha256": d} for i, d in self.witness_digests()],
            },
            "held_out": {
                **self.held_out.to_json(),
                **(
                    {
                        "properties": [self._property(p) for p in self.held_out_replay.properties]
                        if self.held_out_replay
                        else []
                    }
                    if self.held_out.drawn
                    else {}
                ),
            },
            "held_out_properties": self.property_draw.to_json(),
            "regressions": {
                **self.regressions.to_json(),
                "properties": [self._property(p) for p in self.regressions_replay.properties]
                if self.regressions_replay
                else [],
            },
            "properties": [self._property(p) for p in self.replay.properties] if self.replay else [],
            "observations": [
                {**o.to_json(), "source": o.source} for o in sorted(self.observations, key=lambda o: (o.source, o.id))
            ],
            "reasons": [r.to_json() for r in self.verdict.reasons],
        }


@dataclass(frozen=True)
class Report:
    """`verdict` is the repository's: its label the worst over the global reasons and every suite, its
    reasons the global ones (the changed set, the gate's own findings); each suite carries its own."""

    verdict: Verdict
    suites: tuple[SuiteReport, ...]
    base: Optional[str]
    changed: Optional[tuple[ChangedPath, ...]]
    protected: ProtectedSet
    oracle_changes: tuple[OracleChange, ...] = ()
    mode: Mode = "local"
    statement: Signing = LOCAL_SIGNING

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")

    def all_reasons(self) -> list[tuple[str, Reason]]:
        """Every reason with the suite it belongs to ("" for the repository's)."""
        return [("", r) for r in self.verdict.reasons] + [
            (s.address, r) for s in self.suites for r in s.verdict.reasons
        ]

    def counts(self) -> dict[str, int]:
        return {label.value: sum(s.verdict.label is label for s in self.suites) for label in Label}

    def to_json(self) -> dict[str, object]:
        return json_safe(
            {
                "schema_version": SCHEMA_VERSION,
                "mode": self.mode,
                "verdict": self.verdict.label.value,
                "exit_code": self.verdict.label.exit_code,
                "summary": {"suites": len(self.suites), **self.counts()},
                "reasons": [r.to_json() for r in self.verdict.reasons],
                "suites": [s.to_json() for s in self.suites],
                "base": self.base,
                "changed": None
                if self.changed is None
                else [{"path": c.path, "status": c.status} for c in self.changed],
                "protected": self.protected.sorted_entries(),
                "oracle_changes": [c.to_json() for c in self.oracle_changes],
                "statement": self.statement.to_json(),
            }
        )

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json()) + b"\n"


def identity_lines(identities: Identities, witnesses: Sequence[tuple[str, str]]) -> list[str]:
    lines = [
        f"epoch     {identities.epoch_id or '?'} (generator sha256 {identities.generator_sha256 or '?'})",
        f"manifest  sha256 {identities.manifest_sha256 or '?'}",
    ]
    if identities.world_sha256:
        lines.append(f"world     sha256 {identities.world_sha256}")
    if identities.isolation:
        lines.append(f"isolation {identities.isolation}")
    if witnesses:
        lines.extend(f"witness   {oid} sha256 {digest}" for oid, digest in witnesses)
    else:
        lines.append("witness   none (no property failed or flaked)")
    return lines


def reason_lines(reasons: Sequence[Reason], indent: str) -> list[str]:
    """Each reason and its comparison; what to do once after a run of reasons with the same advice."""
    lines = []
    for i, reason in enumerate(reasons):
        lines.append(f"{indent}{reason.code.severity.value:<6}    {reason.line()}")
        if reason.expected or reason.found:
            lines.append(f"{indent}            {reason.comparison()}")
        if i + 1 == len(reasons) or reasons[i + 1].advice != reason.advice:
            lines.append(f"{indent}            to do: {reason.advice}")
    return lines


def _transition(before: str, after: str) -> str:
    """`before -> after`, or the one value when nothing moved (an arrow would read as a change)."""
    return f"{before or '-'} -> {after or '-'}" if before != after else f"{before or '-'} (unchanged)"


CHANGE_ROW = "(the change)"


def summary_rows(report: Report) -> list[tuple[str, str, str, str]]:
    """One row per suite: address, verdict, epoch, manifest (short); first, when the change itself has
    reasons (the protected set, the base), a row for it, so that no table of eligible suites hides why the
    verdict is closed. Where a replay came from is only in report.json: what is printed depends on the
    evidence alone, never on the state of a cache."""
    change = [(CHANGE_ROW, label_of(report.verdict.reasons).value, "-", "-")] if report.verdict.reasons else []
    return [
        *change,
        *(
            (s.address, s.verdict.label.value, s.identities.epoch_id or "?", (s.identities.manifest_sha256 or "?")[:12])
            for s in report.suites
        ),
    ]


def _marked(suite: SuiteReport, prop: PropertyOutcome) -> str:
    return " (held-out property)" if prop.name in suite.property_draw.names else ""


def regressions_line(status: RegressionStatus) -> str:
    """What the report says of a suite's regression records, in one line."""
    if not status.file:
        return "regression records not judged"
    if not status.kept:
        return f"no regression record kept ({status.file})"
    bounds = ", ".join(f"{count} {bound}" for bound, count in status.records)
    cached = " (from the cache)" if status.cached else ""
    return f"{status.kept} regression records replayed under every catalog property ({bounds}; {status.file}){cached}"


def console_lines(report: Report) -> list[str]:
    lines: list[str] = []
    for suite in report.suites:
        lines.append(f"suite     {suite.address}")
        lines += ["  " + line for line in identity_lines(suite.identities, suite.witness_digests())]
        if suite.replay:
            lines += [f"  property  {prop.summary()}{_marked(suite, prop)}" for prop in suite.replay.properties]
        lines.append(f"  held-out  {suite.held_out.line()}")
        lines.append(f"  held-out  {suite.property_draw.line()}")
        if suite.held_out_replay:
            lines += [
                f"  held-out  {prop.summary()}{_marked(suite, prop)}" for prop in suite.held_out_replay.properties
            ]
        lines.append(f"  kept      {regressions_line(suite.regressions)}")
        if suite.regressions_replay:
            lines += [f"  kept      {prop.summary()}" for prop in suite.regressions_replay.properties]
        lines += reason_lines(suite.verdict.reasons, "  ")
        lines.append(f"  verdict   {suite.verdict.label.value}")
    lines += reason_lines(report.verdict.reasons, "")
    for change in report.oracle_changes:
        lines.append(
            f"oracle    {change.kind} {change.subject}: {_transition(change.before, change.after)}" f" ({change.note})"
        )
    counts = report.counts()
    lines.append(f"suites    {len(report.suites)}: " + ", ".join(f"{n} {label}" for label, n in counts.items()))
    rows = summary_rows(report)
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(SUMMARY_HEADER)]
    for row in (SUMMARY_HEADER, *rows):
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    lines.append(f"verdict   {report.verdict.label.value}")
    if report.mode == "trusted":
        lines.append(f"statement {report.statement.line()}")
    if report.mode == "local":
        lines.append(f"advisory  local mode: {ADVISORY}")
    # Paths, messages, names are the change's own text: each line stays one visible line, so none can
    # start a line of its own (a CI runner reads `::` at the start of a stdout line as a command).
    return [printable(line) for line in lines]


SUMMARY_HEADER = ("suite", "verdict", "epoch", "manifest")


# What Markdown would read as markup (emphasis, links, images, HTML, entities, headings, table cells).
_MARKUP = re.compile(r"([\\`*_\[\]<>!&#~|])")


def _cell(text: object) -> str:
    """A table cell of the change's own text: one line, and no markup of its own."""
    return _MARKUP.sub(r"\\\1", printable(str(text)))


def _code(text: object) -> str:
    """A code span in a table cell: `|` escaped (GFM reads it first), a fence longer than any backtick run."""
    body = printable(str(text)).replace("|", "\\|")
    if not body:
        return ""
    fence = "`" * (max((len(run) for run in re.findall("`+", body)), default=0) + 1)
    pad = " " if body.startswith(("`", " ")) or body.endswith(("`", " ")) else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def _reason_table(reasons: Sequence[Reason]) -> list[str]:
    out = [
        "| severity | code | path | expected | found | message | to do |",
        "|---|---|---|---|---|---|---|",
    ]
    return out + [
        f"| {r.code.severity.value} | `{r.code.value}` | {_code(r.path)} | {_cell(r.expected)} "
        f"| {_cell(r.found)} | {_cell(r.message)} | {_cell(r.advice)} |"
        for r in reasons
    ]


def _suite_markdown(suite: SuiteReport) -> list[str]:
    ids = suite.identities
    out = [
        f"### {_cell(suite.address)}: **{suite.verdict.label.value}**",
        "",
        "| identity | value |",
        "|---|---|",
        f"| epoch | {_code(ids.epoch_id)} (generator {_code(ids.generator_sha256)}) |",
        f"| manifest | {_code(ids.manifest_sha256)} |",
        f"| world | {_code(ids.world_sha256)} |",
    ]
    if ids.isolation:
        out.append(f"| isolation | {_cell(ids.isolation)} |")
    out.append(f"| held-out | {_cell(suite.held_out.line())} |")
    out.append(f"| held-out properties | {_cell(suite.property_draw.line())} |")
    out.append(f"| regression records | {_cell(regressions_line(suite.regressions))} |")
    out += [f"| witness {_code(oid)} | {_code(digest)} |" for oid, digest in suite.witness_digests()]
    out.append("")
    if suite.verdict.reasons:
        out += [*_reason_table(suite.verdict.reasons), ""]
    if suite.replay:
        out += ["| property | outcome | records |", "|---|---|---|"]
        out += [
            f"| {_code(p.name)}{_marked(suite, p)} | {_cell(p.outcome)} | {p.records} {_cell(p.bound)} |"
            for p in suite.replay.properties
        ]
        out += [
            f"| {_code(p.name)}{_marked(suite, p)} (held-out world) | {_cell(p.outcome)} | {p.records} {_cell(p.bound)} |"
            for p in (suite.held_out_replay.properties if suite.held_out_replay else ())
        ]
        out += [
            f"| {_code(p.name)} (regression records) | {_cell(p.outcome)} | {p.records} {_cell(p.bound)} |"
            for p in (suite.regressions_replay.properties if suite.regressions_replay else ())
        ]
        out.append("")
    return out


def markdown(report: Report) -> str:
    label = report.verdict.label.value
    out = [f"## epoch_gate: **{label}**", ""]
    if report.mode == "local":
        out += [f"> **Advisory (local mode)**: {ADVISORY}.", ""]
    else:
        out += [f"Statement: {_cell(report.statement.line())}.", ""]
    out += ["| " + " | ".join(SUMMARY_HEADER) + " |", "|---" * len(SUMMARY_HEADER) + "|"]
    out += [f"| {_cell(a)} | **{v}** | {_code(e)} | {_code(m)} |" for a, v, e, m in summary_rows(report)]
    out.append("")
    if report.verdict.reasons:
        out += ["### The change", "", *_reason_table(report.verdict.reasons), ""]
    elif not any(s.verdict.reasons for s in report.suites) and report.suites:
        out += ["No reasons: in every suite the three identities agree and every sampled property held.", ""]
    if report.oracle_changes:
        out += [
            "### What this change does to the oracle",
            "",
            "Read this before approving an oracle change by hand.",
            "",
            "| change | subject | before | after | note |",
            "|---|---|---|---|---|",
        ]
        out += [
            f"| {_code(c.kind)} | {_code(c.subject)} | {_cell(c.before)} | "
            f"{_cell(c.after) if c.after != c.before else '(unchanged)'} | {_cell(c.note)} |"
            for c in report.oracle_changes
        ]
        out.append("")
    for suite in report.suites:
        out += _suite_markdown(suite)
    return "\n".join(out).rstrip("\n") + "\n"


def output_files(report: Report, witnesses: Mapping[str, bytes]) -> dict[str, bytes]:
    """Everything the gate materializes under its output folder, by relative path: the report, and each
    suite's witnesses under its own folder."""
    files = {"report.json": report.to_bytes(), "report.md": markdown(report).encode("utf-8")}
    for suite in report.suites:
        for observation in suite.observations:
            if observation.source == "replay" and observation.id in witnesses:
                stem = f"{suite.folder}/observations/{observation.id}"
                files[f"{stem}.bin"] = witnesses[observation.id]
                files[f"{stem}.json"] = canonical_json(json_safe(observation.to_json())) + b"\n"
    return files
