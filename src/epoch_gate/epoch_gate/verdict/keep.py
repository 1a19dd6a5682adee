"""The reviewer's act: keep a failure's witness from a gate's report as a regression record of the suite's
fixture (`epoch-gate keep-witness`), so that every later judgement replays it under every property.

The report must be trusted mode's (CI's gate, run from reviewed code: a local report is written by the
working tree's code); it names the failure (its suite, property, bound and witness digest) and where the
gate saved its bytes. The bytes are kept only when their digest is the report's, the observation id
derives from them and they are a world record (a JSON object on one line). The record goes to the file the
report names for the suite's fixture, inside the repository, written atomically.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.atomic import replace_file
from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.evidence.observations import OBSERVATION_ID, observation_id
from epoch_gate.evidence.regressions import Regression, Regressions, parse_regressions, record_problem
from epoch_gate.reasons import Code, fail
from epoch_gate.verdict.report import SCHEMA_VERSION, suite_folder


@dataclass(frozen=True)
class Kept:
    """Where the record went, the record, and whether it was there already."""

    file: str
    regression: Regression
    already: bool


def _refused(path: str, message: str, expected: str, found: str) -> Exception:
    return fail(Code.ARTIFACT_MALFORMED, path, message, expected=expected, found=found[:120])


def _read(value: object, path: str, fields: dict[str, type]) -> dict:
    """The named fields of an object of the report (which has more), each of its type."""
    chosen = {k: v for k, v in value.items() if k in fields} if isinstance(value, dict) else value
    return strictjson.require_object(chosen, path, fields)


def _failure(report: dict[str, object], wanted: str, path: str) -> tuple[dict, dict]:
    """The suite and the observation of the report that `wanted` names, this run's own."""
    for index, suite in enumerate(report["suites"]):  # type: ignore[attr-defined]
        suite = _read(suite, f"{path}#suites[{index}]", {"address": str, "observations": list, "regressions": dict})
        for item in suite["observations"]:
            if isinstance(item, dict) and item.get("id") == wanted:
                return suite, _read(
                    item,
                    f"{path}#{wanted}",
                    {"suite": str, "property": str, "status": str, "witness_sha256": str, "bound": str, "source": str},
                )
    raise fail(
        Code.OBSERVATION_WITNESS_MISSING,
        path,
        "the report names no such observation",
        expected="an observation id the report lists",
        found=wanted[:80],
    )


def _destination(suite: dict, path: str, root: Path) -> tuple[str, Path]:
    """The suite's fixture's file of regression records, as the report names it, and where it is: a
    relative path whose folder exists inside the repository, through no symlink."""
    file = _read(suite["regressions"], f"{path}#regressions", {"file": str})["file"]
    normal = posixpath.normpath(file) if file else ""
    plain = file.isprintable() and "\\" not in file
    if not file or not plain or normal != file or file.startswith(("/", "../")) or file == "..":
        raise _refused(path, "the suite's regression file is not a path inside the repository", "a/b/REGRESSIONS", file)
    target = root / file
    folder = root.resolve() / posixpath.dirname(file)
    if target.parent.resolve() != folder or not folder.is_dir():
        raise fail(
            Code.PATH_NOT_REGULAR,
            file,
            "the regression file's folder is not a folder of the repository (a symlink, or missing)",
            expected="the fixture's folder",
            found=str(target.parent.resolve())[:120],
        )
    return file, target


def keep_witness(out: Path, wanted: str, root: Path) -> Kept:
    """Keeps the failure `wanted` of the report in `out` (a gate's output folder) as a regression record
    under `root`; EvidenceError when the report, the bytes or the file refuse it."""
    report_path = str(out / "report.json")
    report = strictjson.loads(strictjson.read_bytes(out / "report.json", report_path), report_path)
    raw = _read(report, report_path, {"schema_version": int, "suites": list})
    if raw["schema_version"] != SCHEMA_VERSION:
        raise _refused(report_path, "the report has another schema", str(SCHEMA_VERSION), str(raw["schema_version"]))
    if report.get("mode") != "trusted":
        raise _refused(
            report_path,
            "only a trusted-mode report's failure can be kept: a local one was written by the working tree's code",
            "trusted",
            str(report.get("mode"))[:40],
        )
    if not OBSERVATION_ID.match(wanted):
        raise _refused(report_path, "not an observation id", "<property>-<24 hex>", wanted)
    suite, observation = _failure(raw, wanted, report_path)
    if observation["source"] != "replay" or observation["status"] != "fail" or observation["suite"] != suite["address"]:
        raise _refused(
            report_path,
            "only a failure this run's replay found can be kept (a flake would close every later judgement)",
            "a replay's fail of the suite",
            f"{observation['source']} {observation['status']}",
        )
    witness_path = out / suite_folder(suite["address"]) / "observations" / f"{wanted}.bin"
    witness = strictjson.read_bytes(witness_path, str(witness_path))
    if sha256_bytes(witness) != observation["witness_sha256"]:
        raise fail(
            Code.OBSERVATION_WITNESS_MISMATCH,
            str(witness_path),
            "the witness bytes are not the ones the report names",
            expected=observation["witness_sha256"][:80],
            found=sha256_bytes(witness),
        )
    if observation_id(suite["address"], observation["property"], witness) != wanted:
        raise fail(
            Code.OBSERVATION_ID_MISMATCH,
            str(witness_path),
            "the observation id is not derived from its suite, property and bytes",
            expected=wanted,
            found=observation_id(suite["address"], observation["property"], witness),
        )
    problem = record_problem(observation["bound"], witness)
    if problem is not None:
        raise _refused(str(witness_path), problem, "a world record", observation["bound"])
    file, target = _destination(suite, report_path, root)
    # read_bytes refuses a symlink or anything but a regular file
    existing = (
        parse_regressions(strictjson.read_bytes(target, file), file) if os.path.lexists(target) else Regressions()
    )
    added = Regression(observation["bound"], witness, suite["address"], observation["property"], wanted)
    kept = existing.kept(added)
    if kept is not existing:
        data = kept.to_bytes()
        parse_regressions(data, file)  # what every judgement will read: within its size cap, say
        try:
            replace_file(target, data)
        except OSError as error:
            raise fail(
                Code.ARTIFACT_MALFORMED,
                file,
                "the regression file cannot be written",
                expected="written",
                found=error.strerror or "OSError",
            ) from None
    return Kept(file, added, kept is existing)
