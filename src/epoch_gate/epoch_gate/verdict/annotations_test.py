from __future__ import annotations

from pathlib import Path

import pytest

from epoch_gate.reasons import Code, Reason
from epoch_gate.verdict.annotations import Style, github_line, lines
from epoch_gate.cli.main import main
from epoch_gate.verdict.report_test import EVIL_SHOWN, RAW_CONTROLS, evil_report, sample_report

SEVERAL = {
    "reasons": [
        {
            "code": "protected-path-changed",
            "severity": "closed",
            "path": "checks/catalog.yaml",
            "expected": "unchanged (protected)",
            "found": "modified",
            "message": "a protected path is modified",
        },
        {
            "code": "base-untrusted",
            "severity": "closed",
            "path": ".",
            "expected": "an ancestor of origin/main",
            "found": "abc",
            "message": "the base is not reviewed history",
        },
        {
            "code": "replay-failed",
            "severity": "closed",
            "path": "checks:orders_properties",
            "expected": "exit 0",
            "found": "exit 1",
            "message": "the replay did not evaluate: 50% done,\nthen: boom",
        },
        {
            "code": "flake-frozen",
            "severity": "hold",
            "path": "freezes/retry.json",
            "expected": "",
            "found": "",
            "message": "covered by a freeze",
        },
    ]
}


def test_one_github_annotation_per_reason_on_the_file_concerned() -> None:
    out = lines(SEVERAL, Style.GITHUB)
    assert out == [
        "::error file=checks/catalog.yaml,title=epoch_gate protected-path-changed::a protected path is modified"
        " (expected unchanged (protected); found modified)",
        "::error title=epoch_gate base-untrusted::the base is not reviewed history"
        " (expected an ancestor of origin/main; found abc)",
        "::error title=epoch_gate replay-failed::the replay did not evaluate: 50%25 done,\\nthen: boom"
        " (expected exit 0; found exit 1)",
        "::warning file=freezes/retry.json,title=epoch_gate flake-frozen::covered by a freeze",
    ]


def test_workflow_command_properties_are_escaped() -> None:
    line = github_line({"code": "x", "severity": "closed", "path": "a,b.txt", "message": "m"})
    assert line.startswith("::error file=a%2Cb.txt,title=epoch_gate x::")


def test_plain_lines_lead_with_the_path() -> None:
    out = lines(SEVERAL, Style.PLAIN)
    assert out[0] == (
        "checks/catalog.yaml: closed [protected-path-changed] a protected path is modified"
        " (expected unchanged (protected); found modified)"
    )
    assert out[1].startswith(".: closed [base-untrusted]") and "\n" not in out[2]
    assert lines(SEVERAL, Style.NONE) == [] and lines({"reasons": []}, Style.GITHUB) == []


def test_the_cli_annotates_a_real_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = sample_report()
    path = tmp_path / "report.json"
    path.write_bytes(report.to_bytes())
    assert main(["annotations", str(path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(report.all_reasons()) >= 2
    assert all(line.startswith("::error ") for line in printed)
    assert any(line.startswith("::error file=fixtures/EPOCH,") for line in printed)


@pytest.mark.parametrize("content", [b"", b"[]", b'{"reasons": 3}', b"\xff"])
def test_the_cli_refuses_a_report_it_cannot_read(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(content)
    assert main(["annotations", str(path), "--format", "plain"]) == 1
    assert "refused [artifact-malformed]" in capsys.readouterr().err
    assert main(["annotations", str(tmp_path / "missing.json")]) == 1


def test_annotations_show_the_changes_control_characters_as_escapes() -> None:
    body = evil_report().to_json()
    github, plain = lines(body, Style.GITHUB), lines(body, Style.PLAIN)
    for out in (github, plain):
        assert len("\n".join(out).splitlines()) == len(out) == len(evil_report().all_reasons())
        assert not any(RAW_CONTROLS.search(line) for line in out)
    assert all(line.startswith(("::error ", "::warning ")) for line in github)
    assert not any(line.startswith("::") for line in plain)
    assert any(line.startswith(f"{EVIL_SHOWN}: closed [protected-path-changed]") for line in plain)
    line = github_line(
        {"code": "x", "severity": "closed", "path": "a,b%\n\x1b\u2028\u202e.json", "message": "m\r\n::stop-commands::t"}
    )
    assert line == "::error file=a%2Cb%25\\n\\x1b\\u2028\\u202e.json,title=epoch_gate x::m\\r\\n::stop-commands::t"


def test_a_property_is_no_file_and_what_to_do_follows_the_message() -> None:
    reason = Reason(Code.PROPERTY_FAILED, "payments#refund_le_captured", "holds", "line 6", "the record fails it")
    assert github_line(reason.to_json()) == (
        "::error title=epoch_gate property-failed::the record fails it (expected holds; found line 6)"
        " To do: " + Code.PROPERTY_FAILED.advice.replace("%", "%25")
    )
