"""The report: `report.json` (schema-versioned, see report.schema.json), a Markdown twin, console lines."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional, Sequence

from epoch_gate.changes import ChangedPath, ProtectedSet
from epoch_gate.decision import Identities, Verdict
from epoch_gate.hashing import canonical_json
from epoch_gate.observations import Observation
from epoch_gate.oracle import OracleChange
from epoch_gate.replay import ReplayResult
from epoch_gate.text import json_safe, printable

SCHEMA_VERSION = 1

# `trusted`: CI judged the change with the trusted base's gate code and configuration. `local`: the gate
# ran from the working tree under review, whose code and configuration can program the judge.
Mode = Literal["trusted", "local"]
MODES: tuple[Mode, ...] = ("trusted", "local")
ADVISORY = ("judged from this working tree, whose code can program the judge; "
            "only CI's trusted mode gives the verdict that counts")


@dataclass(frozen=True)
class Report:
    verdict: Verdict
    identities: Identities
    base: Optional[str]
    changed: Optional[tuple[ChangedPath, ...]]
    protected: ProtectedSet
    replay: Optional[ReplayResult]
    observations: tuple[Observation, ...]
    oracle_changes: tuple[OracleChange, ...] = ()
    mode: Mode = "local"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")

    def witness_digests(self) -> list[tuple[str, str]]:
        return sorted((o.id, o.witness_sha256) for o in self.observations if o.source == "replay")

    def to_json(self) -> dict[str, object]:
        return json_safe({
            "schema_version": SCHEMA_VERSION,
            "mode": self.mode,
            "verdict": self.verdict.label.value,
            "exit_code": self.verdict.label.exit_code,
            "identities": {**self.identities.to_json(),
                           "witnesses": [{"observation_id": i, "witness_sha256": d}
                                         for i, d in self.witness_digests()]},
            "reasons": [r.to_json() for r in self.verdict.reasons],
            "properties": [p.to_json() for p in self.replay.properties] if self.replay else [],
            "observations": [{**o.to_json(), "source": o.source}
                             for o in sorted(self.observations, key=lambda o: (o.source, o.id))],
            "base": self.base,
            "changed": None if self.changed is None else [{"path": c.path, "status": c.status}
                                                          for c in self.changed],
            "protected": self.protected.sorted_entries(),
            "oracle_changes": [c.to_json() for c in self.oracle_changes],
        })

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


def console_lines(report: Report) -> list[str]:
    lines = identity_lines(report.identities, report.witness_digests())
    if report.replay:
        for prop in report.replay.properties:
            lines.append(f"property  {prop.summary()}")
    for reason in report.verdict.reasons:
        lines.append(f"{reason.code.severity.value:<6}    [{reason.code.value}] {reason.path}: {reason.message}")
        if reason.expected or reason.found:
            lines.append(f"            expected {reason.expected or '-'}; found {reason.found or '-'}")
    for change in report.oracle_changes:
        lines.append(f"oracle    {change.kind} {change.subject}: {change.before or '-'} -> {change.after or '-'}"
                     f" ({change.note})")
    lines.append(f"verdict   {report.verdict.label.value}")
    if report.mode == "local":
        lines.append(f"advisory  local mode: {ADVISORY}")
    # Paths, messages, names are the change's own text: each line stays one visible line, so none can
    # start a line of its own (a CI runner reads `::` at the start of a stdout line as a command).
    return [printable(line) for line in lines]


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


def markdown(report: Report) -> str:
    label = report.verdict.label.value
    out = [f"## epoch_gate: **{label}**", ""]
    if report.mode == "local":
        out += [f"> **Advisory (local mode)**: {ADVISORY}.", ""]
    out += ["| identity | value |", "|---|---|"]
    ids = report.identities
    out.append(f"| epoch | {_code(ids.epoch_id)} (generator {_code(ids.generator_sha256)}) |")
    out.append(f"| manifest | {_code(ids.manifest_sha256)} |")
    if ids.isolation:
        out.append(f"| isolation | {_cell(ids.isolation)} |")
    for oid, digest in report.witness_digests():
        out.append(f"| witness {_code(oid)} | {_code(digest)} |")
    out.append("")
    if report.verdict.reasons:
        out += ["| severity | code | path | expected | found | message |", "|---|---|---|---|---|---|"]
        for r in report.verdict.reasons:
            out.append(f"| {r.code.severity.value} | `{r.code.value}` | {_code(r.path)} | {_cell(r.expected)} "
                       f"| {_cell(r.found)} | {_cell(r.message)} |")
    else:
        out.append("No reasons: the three identities agree and every sampled property held.")
    if report.oracle_changes:
        out += ["", "### What this change does to the oracle", "",
                "Read this before approving an oracle change by hand.", "",
                "| change | subject | before | after | note |", "|---|---|---|---|---|"]
        out += [f"| {_code(c.kind)} | {_code(c.subject)} | {_cell(c.before)} | {_cell(c.after)} | {_cell(c.note)} |"
                for c in report.oracle_changes]
    if report.replay:
        out += ["", "| property | outcome | records |", "|---|---|---|"]
        out += [f"| {_code(p.name)} | {_cell(p.outcome)} | {p.records} {_cell(p.bound)} |"
                for p in report.replay.properties]
    return "\n".join(out) + "\n"


def output_files(report: Report, witnesses: dict[str, bytes]) -> dict[str, bytes]:
    """Everything the gate materializes under its output folder, by relative path."""
    files = {"report.json": report.to_bytes(), "report.md": markdown(report).encode("utf-8")}
    for observation in report.observations:
        if observation.source == "replay" and observation.id in witnesses:
            files[f"observations/{observation.id}.bin"] = witnesses[observation.id]
            files[f"observations/{observation.id}.json"] = canonical_json(json_safe(observation.to_json())) + b"\n"
    return files
