"""The reviewer's keep-witness: a report's failure kept as a regression record, and every way it refuses."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.evidence.observations import observation_id
from epoch_gate.evidence.regressions import RegressionStatus, Regressions, parse_regressions
from epoch_gate.reasons import Code, EvidenceError
from epoch_gate.verdict.judge import RegressionFacts
from epoch_gate.verdict.judge_test import facts, judged, observed, suite
from epoch_gate.verdict.keep import keep_witness
from epoch_gate.verdict.report import output_files

RECORD = b'{"id":1}'  # the witness judge_test's suite() writes for each of its observations
FILE = "fixtures/payments/REGRESSIONS"


def gate_output(tmp_path: Path, status: str = "fail") -> tuple[Path, str]:
    """A gate's output folder whose one suite failed `p` on RECORD, and that observation's id."""
    failure = observed("payments:props", status, witness=RECORD)
    facts_of = dataclasses.replace(
        suite("payments:props", failure), regressions=RegressionFacts(RegressionStatus(FILE))
    )
    j = judged(dataclasses.replace(facts(), mode="trusted"), facts_of)
    out = tmp_path / "dist" / "gate"
    for name, data in output_files(j.report, j.witnesses).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return out, failure.id


def refusal(out: Path, wanted: str, root: Path) -> tuple[Code, str]:
    with pytest.raises(EvidenceError) as raised:
        keep_witness(out, wanted, root)
    return raised.value.reason.code, raised.value.reason.message


def fixture_folder(root: Path) -> None:
    (root / FILE).parent.mkdir(parents=True, exist_ok=True)


def test_a_failure_is_kept_once_as_a_record_its_digest_names(tmp_path: Path) -> None:
    out, wanted = gate_output(tmp_path)
    fixture_folder(tmp_path)
    kept = keep_witness(out, wanted, tmp_path)
    assert (kept.file, kept.already) == (FILE, False)
    written = (tmp_path / FILE).read_bytes()
    (record,) = parse_regressions(written, FILE).records
    assert (record.bound, record.record, record.property, record.suite, record.observation_id) == (
        "b",
        RECORD,
        "p",
        "payments:props",
        wanted,
    )
    assert json.loads(written)["records"][0]["record_sha256"] == record.sha256
    again = keep_witness(out, wanted, tmp_path)
    assert again.already and (tmp_path / FILE).read_bytes() == written


def test_bytes_other_than_the_reports_are_refused(tmp_path: Path) -> None:
    out, wanted = gate_output(tmp_path)
    fixture_folder(tmp_path)
    (witness,) = out.glob(f"suites/*/observations/{wanted}.bin")
    witness.write_bytes(b'{"id":2}')
    assert refusal(out, wanted, tmp_path)[0] is Code.OBSERVATION_WITNESS_MISMATCH
    assert not (tmp_path / FILE).exists()


def test_a_report_that_names_other_bytes_is_refused_by_the_id(tmp_path: Path) -> None:
    """Bytes and digest edited together in the report still do not derive the observation's id."""
    out, wanted = gate_output(tmp_path)
    (witness,) = out.glob(f"suites/*/observations/{wanted}.bin")
    witness.write_bytes(b'{"id":2}')
    report = json.loads((out / "report.json").read_text())
    report["suites"][0]["observations"][0]["witness_sha256"] = sha256_bytes(b'{"id":2}')
    (out / "report.json").write_text(json.dumps(report))
    assert refusal(out, wanted, tmp_path)[0] is Code.OBSERVATION_ID_MISMATCH


def test_a_local_reports_failure_is_refused(tmp_path: Path) -> None:
    out, wanted = gate_output(tmp_path)
    report = json.loads((out / "report.json").read_text())
    report["mode"] = "local"
    (out / "report.json").write_text(json.dumps(report))
    assert refusal(out, wanted, tmp_path)[1].startswith("only a trusted-mode report's failure can be kept")


def test_a_flake_an_unknown_id_and_a_path_outside_the_repository_are_refused(tmp_path: Path) -> None:
    out, wanted = gate_output(tmp_path, status="flake")
    assert refusal(out, wanted, tmp_path)[1].startswith("only a failure this run's replay found can be kept")
    out, wanted = gate_output(tmp_path)
    assert refusal(out, "p-" + "0" * 24, tmp_path)[0] is Code.OBSERVATION_WITNESS_MISSING
    assert refusal(out, "../x", tmp_path)[1] == "not an observation id"
    for elsewhere in ("../outside", "/etc/x", "a/../../b", "", "a\0b", "a\\b"):
        report = json.loads((out / "report.json").read_text())
        report["suites"][0]["regressions"]["file"] = elsewhere
        (out / "report.json").write_text(json.dumps(report))
        assert refusal(out, wanted, tmp_path)[1] == "the suite's regression file is not a path inside the repository"


def test_a_folder_reached_through_a_symlink_or_missing_is_refused(tmp_path: Path) -> None:
    out, wanted = gate_output(tmp_path)
    assert refusal(out, wanted, tmp_path)[0] is Code.PATH_NOT_REGULAR  # fixtures/payments does not exist
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "fixtures").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "payments").mkdir()
    assert refusal(out, wanted, tmp_path)[0] is Code.PATH_NOT_REGULAR
    assert not (tmp_path / "elsewhere" / "payments" / "REGRESSIONS").exists()


def test_bytes_that_are_not_a_world_record_are_refused(tmp_path: Path) -> None:
    """A report from a run whose product answered with any line still keeps only a JSON object."""
    out, wanted = gate_output(tmp_path)
    report = json.loads((out / "report.json").read_text())
    (witness,) = out.glob(f"suites/*/observations/{wanted}.bin")
    for line in (b"not json", b"[1]", b'{"a":NaN}'):
        witness.write_bytes(line)
        oid = observation_id("payments:props", "p", line)
        witness = witness.rename(witness.with_name(f"{oid}.bin"))
        report["suites"][0]["observations"][0].update(id=oid, witness_sha256=sha256_bytes(line))
        (out / "report.json").write_text(json.dumps(report))
        assert refusal(out, oid, tmp_path)[1] == "a record is a JSON object in UTF-8"


def test_a_regression_file_edited_by_hand_or_a_symlink_is_refused(tmp_path: Path) -> None:
    out, wanted = gate_output(tmp_path)
    target = tmp_path / FILE
    fixture_folder(tmp_path)
    kept = json.loads(Regressions().to_bytes())
    kept["records"] = [
        {
            "bound": "b",
            "record_sha256": "0" * 64,
            "record": "{}",
            "suite": "payments:props",
            "property": "p",
            "observation_id": wanted,
        }
    ]
    target.write_text(json.dumps(kept))
    code, message = refusal(out, wanted, tmp_path)
    assert code is Code.ARTIFACT_MALFORMED and message.startswith("the observation id is not derived from")
    target.unlink()
    target.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_bytes(Regressions().to_bytes())
    assert refusal(out, wanted, tmp_path)[1] == "path is a symlink"
