from __future__ import annotations

import dataclasses
import datetime
import importlib.resources
import json
import re

import pytest

from epoch_gate.verdict import report
from epoch_gate.change.changed import ChangedPath
from epoch_gate.verdict.suite import Identities
from epoch_gate.evidence.observations import make_observation
from epoch_gate.change.oracle import OracleChange
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Code, Reason
from epoch_gate.evidence.replay_result import PropertyOutcome, ReplayResult
from epoch_gate.testutil import Evidence, one_suite

FLAKE = make_observation(
    suite="suite",
    epoch_id="e1",
    prop="retry_applies_once",
    status="flake",
    rerun_passed=True,
    witness=b'{"id":1}',
    bound="retries",
    line=2,
    detail="predicate returned False",
)


def sample_report() -> report.Report:
    ids = Identities("e1", "a" * 64, "b" * 64, "c" * 64)
    replay = ReplayResult(
        "suite",
        "e1",
        "b" * 64,
        "c" * 64,
        (PropertyOutcome("retry_applies_once", "retries", 9, "flake", (FLAKE.id,), "x"),),
    )
    protected = ProtectedSet(frozenset({"fixtures/EPOCH"}), ("freezes/",))
    changed = (ChangedPath("fixtures/EPOCH", "modified"),)
    evidence = Evidence(
        ids,
        changed,
        protected,
        replay,
        (FLAKE,),
        (),
        datetime.date(2026, 12, 2),
        (Reason(Code.GENERATOR_MISMATCH, "g|py", "a", "b", "pipes | in text"),),
    )
    return one_suite(evidence, "f" * 40)


def _check(value: object, schema: dict, root: dict) -> None:
    """A small validator for the subset of JSON Schema the report schema uses."""
    kinds = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict, "null": type(None)}
    if "const" in schema:
        assert value == schema["const"]
    if "enum" in schema:
        assert value in schema["enum"], (value, schema["enum"])
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert any(isinstance(value, kinds[t]) and not (t == "integer" and isinstance(value, bool)) for t in types)
    if "pattern" in schema:
        assert re.match(schema["pattern"], str(value))
    if isinstance(value, dict) and "properties" in schema:
        assert set(schema.get("required", [])) <= set(value)
        if schema.get("additionalProperties") is False:
            assert set(value) <= set(schema["properties"]), set(value) - set(schema["properties"])
        for key, item in value.items():
            _check(item, schema["properties"][key], root)
    if isinstance(value, list) and "items" in schema:
        for item in value:
            _check(item, schema["items"], root)


def test_report_json_validates_against_the_published_schema() -> None:
    schema = json.loads(importlib.resources.read_text("epoch_gate.verdict", "report.schema.json"))
    body = json.loads(sample_report().to_bytes())
    _check(body, schema, schema)
    assert body["verdict"] == "closed" and body["exit_code"] == 1
    assert set(schema["properties"]["reasons"]["items"]["properties"]["code"]["enum"]) == {c.value for c in Code}


def test_console_prints_the_three_identities_and_every_reason() -> None:
    lines = "\n".join(report.console_lines(sample_report()))
    assert "epoch     e1 (generator sha256 " + "a" * 64 in lines
    assert "manifest  sha256 " + "b" * 64 in lines
    assert f"witness   {FLAKE.id} sha256 {FLAKE.witness_sha256}" in lines
    for code in ("generator-mismatch", "protected-path-changed", "flake-unfrozen"):
        assert f"[{code}]" in lines
    assert lines.endswith("verdict   closed\nadvisory  local mode: " + report.ADVISORY)


def test_local_mode_is_advisory_and_trusted_mode_says_whether_its_statement_is_signed() -> None:
    local = sample_report()
    trusted = dataclasses.replace(local, mode="trusted", statement=report.Signing(True, "9" * 64))
    assert json.loads(local.to_bytes())["mode"] == "local" and json.loads(trusted.to_bytes())["mode"] == "trusted"
    assert json.loads(trusted.to_bytes())["statement"] == {"signed": True, "keyid": "9" * 64}
    assert json.loads(local.to_bytes())["statement"] == {"signed": False, "why": "local mode writes no statement"}
    assert report.markdown(local).startswith("## epoch_gate: **closed**\n\n> **Advisory (local mode)**: judged ")
    assert "Advisory" not in report.markdown(trusted)
    assert f"Statement: signed with the key {'9' * 64}." in report.markdown(trusted)
    assert report.console_lines(trusted)[-2:] == ["verdict   closed", f"statement signed with the key {'9' * 64}"]
    with pytest.raises(ValueError):
        dataclasses.replace(local, mode="ci")


def test_markdown_escapes_table_cells() -> None:
    text = report.markdown(sample_report())
    assert "## epoch_gate: **closed**" in text
    assert "pipes \\| in text" in text and "`g\\|py`" in text


def test_output_files_hold_the_witness_bytes() -> None:
    files = report.output_files(sample_report(), {FLAKE.id: b'{"id":1}'})
    folder = report.suite_folder("suite")
    assert files[f"{folder}/observations/{FLAKE.id}.bin"] == b'{"id":1}'
    assert set(files) == {
        "report.json",
        "report.md",
        f"{folder}/observations/{FLAKE.id}.bin",
        f"{folder}/observations/{FLAKE.id}.json",
    }


def test_suite_folders_are_one_segment_and_distinct() -> None:
    folders = {report.suite_folder(a) for a in ("a/b:c", "a:b/c", "a/b/c", "//:x", "../..:x")}
    assert len(folders) == 5
    assert all(f.count("/") == 1 and ".." not in f for f in folders)


def test_console_lines_keep_the_changes_own_text_on_one_line() -> None:
    ids = Identities("e1", "a" * 64, "b" * 64)
    evil = Reason(Code.PROTECTED_PATH_CHANGED, "x\n::error::forged", "unchanged", "modified", "m\r\nn")
    evidence = Evidence(ids, (), ProtectedSet(frozenset(), ()), None, (), (), datetime.date(2026, 12, 2), (evil,))
    lines = report.console_lines(one_suite(evidence, None))
    assert not any(line.startswith("::") for line in lines)
    assert any("x\\n::error::forged" in line for line in lines)


# A changed path that would inject a workflow command, erase the line, break it (U+2028) and reverse it.
EVIL = "freezes/a`b|c\n::stop-commands::x\x1b[2K\u2028::error::y\u202e"
EVIL_SHOWN = "freezes/a`b|c\\n::stop-commands::x\\x1b[2K\\u2028::error::y\\u202e"
RAW_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def evil_report() -> report.Report:
    ids = Identities("e1", "a" * 64, "b" * 64)
    protected = ProtectedSet(frozenset(), ("freezes/",))
    changed = (ChangedPath(EVIL, "added"),)
    evidence = Evidence(ids, changed, protected, None, (), (), datetime.date(2026, 12, 2))
    oracle = (OracleChange("freeze-added", EVIL, "", "added", "a note|`x`<img src=y>\n::warning::z"),)
    return one_suite(evidence, "f" * 40, oracle)


def test_console_lines_show_controls_separators_and_bidi_controls_as_escapes() -> None:
    lines = report.console_lines(evil_report())
    assert len("\n".join(lines).splitlines()) == len(lines)  # no line break of its own, U+2028 included
    assert not any(RAW_CONTROLS.search(line) or line.startswith("::") for line in lines)
    assert any(line.startswith("oracle    freeze-added " + EVIL_SHOWN) for line in lines)
    assert any(line.startswith("closed    [protected-path-changed] " + EVIL_SHOWN) for line in lines)


def test_markdown_keeps_the_changes_text_inside_its_cell() -> None:
    text = report.markdown(evil_report())
    assert not RAW_CONTROLS.search(text.replace("\n", "")) and len(text.splitlines()) == text.count("\n")
    code_span = "``" + EVIL_SHOWN.replace("|", "\\|") + "``"  # a fence longer than the path's backtick run
    assert f"| `protected-path-changed` | {code_span} |" in text
    assert f"| `freeze-added` | {code_span} |" in text
    assert "a note\\|\\`x\\`\\<img src=y\\>\\\\n::warning::z |" in text
    report.output_files(evil_report(), {})["report.json"].decode("utf-8")


def test_what_to_do_follows_each_run_of_reasons_of_one_code() -> None:
    base = sample_report()
    two = (ChangedPath("fixtures/EPOCH", "modified"), ChangedPath("freezes/a.json", "added"))
    evidence = Evidence(
        base.suites[0].identities,
        two,
        ProtectedSet(frozenset({"fixtures/EPOCH"}), ("freezes/",)),
        None,
        (),
        (),
        datetime.date(2026, 12, 2),
    )
    lines = report.console_lines(one_suite(evidence, "f" * 40))
    start = lines.index("  verdict   closed") + 1
    assert lines[start : start + 5] == [
        "closed    [protected-path-changed] fixtures/EPOCH: a protected path is modified in this change",
        "            expected unchanged (protected); found modified",
        "closed    [protected-path-changed] freezes/a.json: a protected path is added in this change",
        "            expected unchanged (protected); found added",
        "            to do: " + Code.PROTECTED_PATH_CHANGED.advice,
    ]
    table = report.markdown(one_suite(evidence, "f" * 40))
    assert "| message | to do |" in table and table.count(_md(Code.PROTECTED_PATH_CHANGED.advice)) == 2


def _md(text: str) -> str:
    return text.replace("`", "\\`").replace("<", "\\<").replace(">", "\\>")
