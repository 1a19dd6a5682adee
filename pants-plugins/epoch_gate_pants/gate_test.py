"""The scenario table of tests/e2e/scenarios_test.py as goal tests: each change an agent might make,
committed on top of a small landed example, judged by `pants --changed-since=<base> gate` in a RuleRunner;
also the attacks of tests/e2e/holes_test.py and trusted mode's refusals from tests/e2e/trusted_test.py.

One RuleRunner serves the module (its memo and process cache make a judged-before replay free); each test
starts from the example as landed (`GateRepo.reset`)."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any

import pytest

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from epoch_gate.evidence.hashing import canonical_json, canonical_sha256
from epoch_gate.change.tree import repository_url
from epoch_gate.verdict import dsse
from epoch_gate.verdict.verify_statement import Expected, verify
from epoch_gate.reasons import EvidenceError
from epoch_gate.verdict.keep import keep_witness
from epoch_gate_pants.gate_harness import (
    EPOCH_ID,
    FLAKY_PRODUCT,
    GateRepo,
    GateRun,
    codes,
    identities,
    observations,
    oracle_changes,
    reasons,
    suites,
)

REFUND_BUG = ("src/payments_lib.py", "refunded <= captured", "refunded < 50")


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory, named_caches: Path) -> GateRepo:
    return GateRepo.create(tmp_path_factory.mktemp("gate"), named_caches)


@pytest.fixture
def repo(example: GateRepo) -> GateRepo:
    example.reset()
    return example


def judged(repo: GateRepo, base: str) -> GateRun:
    return repo.gate(f"--changed-since={base}")


def oracle_kinds(run: GateRun) -> set[tuple[str, str]]:
    return {(c["kind"], c["subject"]) for c in oracle_changes(run.report)}


def protected_paths(run: GateRun) -> list[str]:
    return [r["path"] for r in reasons(run.report, "protected-path-changed")]


def assert_closed_with(run: GateRun, *expected: str) -> None:
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert codes(run.report) == set(expected), (expected, codes(run.report))


def test_unrelated_change_is_eligible(repo: GateRepo) -> None:
    base = repo.head()
    repo.write("docs/notes.md", "An unrelated note.\n")
    repo.commit("docs")
    run = judged(repo, base)
    assert run.verdict == "eligible" and run.exit_code == 0, run.stdout
    assert codes(run.report) == set() and oracle_changes(run.report) == []
    assert [i["epoch_id"] for i in identities(run.report)] == [EPOCH_ID]
    assert f"epoch     {EPOCH_ID} " in run.stdout and "manifest  sha256 " in run.stdout
    assert "verdict   eligible" in run.stdout


def test_edited_generator(repo: GateRepo) -> None:
    base = repo.head()
    repo.edit("fixtures/gen.py", "import argparse, json, os\n", "import argparse, json, os  # tuned by the agent\n")
    repo.commit("tweak generator")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed", "generator-mismatch")
    # What the reviewer reads: the generator moved under the same epoch id.
    assert oracle_kinds(run) == {("generator-changed", "fixtures/gen.py"), ("new-epoch-id-required", "fixtures/EPOCH")}
    assert "What this change does to the oracle" in repo.read("dist/gate/report.md")


def test_regenerated_fixture_input(repo: GateRepo) -> None:
    base = repo.head()
    repo.write("fixtures/base.json", '{"count": 51}\n')
    repo.commit("regenerate fixtures")
    assert_closed_with(judged(repo, base), "protected-path-changed", "input-mismatch", "world-mismatch")


def test_loosened_predicate(repo: GateRepo) -> None:
    base = repo.head()
    repo.write(
        "checks/props.py",
        repo.read("checks/props.py") + "\n\ndef always_true(record: dict) -> bool:\n" "    return True\n",
    )
    repo.commit("loosen")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed")
    assert protected_paths(run) == ["checks/props.py"]


def test_dropped_property_with_recomputed_digest(repo: GateRepo) -> None:
    base = repo.head()
    manifest = json.loads(repo.read("checks/manifest.json"))
    manifest["properties"] = [p for p in manifest["properties"] if p["name"] != "refund_le_captured"]
    manifest["k"] = len(manifest["properties"])
    manifest["manifest_sha256"] = canonical_sha256({"seed": manifest["seed"], "properties": manifest["properties"]})
    repo.write("checks/manifest.json", canonical_json(manifest) + b"\n")
    repo.commit("drop a property")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed", "manifest-not-draw")
    assert oracle_kinds(run) == {("k-lowered", "checks/manifest.json"), ("property-dropped", "refund_le_captured")}


def test_edited_catalog_entry(repo: GateRepo) -> None:
    base = repo.head()
    repo.edit(
        "checks/catalog.yaml",
        "predicate: checks.props:refund_le_captured",
        "predicate: checks.props:refunds_never_negative",
    )
    repo.commit("point a property elsewhere")
    assert_closed_with(judged(repo, base), "protected-path-changed", "property-differs-from-catalog")


def test_edited_build_file_declaring_a_protected_target(repo: GateRepo) -> None:
    base = repo.head()
    repo.edit("fixtures/BUILD", 'inputs=["base.json"])', 'inputs=["base.json"])  # same')
    repo.commit("touch BUILD")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed")
    assert "fixtures/BUILD" in protected_paths(run)


def test_refund_bug_fails_a_sampled_property_and_writes_the_witness(repo: GateRepo) -> None:
    base = repo.head()
    repo.edit(*REFUND_BUG)
    repo.commit("refund against a fixed ceiling")
    run = judged(repo, base)
    assert_closed_with(run, "property-failed")
    assert codes(run.report) == {"property-failed"}
    (reason,) = reasons(run.report, "property-failed")
    (observation,) = [o for o in observations(run.report) if o["property"] == "refund_le_captured"]
    saved = f"dist/gate/{suites(run.report)[0]['folder']}/observations/{observation['id']}.bin"
    witness = (repo.root / saved).read_bytes()
    captured = json.loads(witness)["captured"]
    assert (reason["path"], reason["message"]) == (  # what the predicate read: the product's answer
        "checks:props#refund_le_captured",
        f"the payments record at line {observation['line']} (saved as {saved}) fails it: predicate returned False; "
        f"its 1 call and the product's answers: payments_lib.refundable({captured}, 50) -> False",
    )
    assert observation["status"] == "fail" and observation["rerun_passed"] is False
    lines = repo.world["payments.jsonl"].splitlines()
    assert witness == lines[observation["line"] - 1]  # exactly the offending record: the first refund of 50
    assert json.loads(witness)["refunded"] == 50
    assert observation["witness_sha256"] in run.stdout


def test_a_kept_failure_is_replayed_by_every_later_judgement(repo: GateRepo) -> None:
    """The reviewer keeps the refund bug's witness from CI's report as a regression record and lands it;
    every later judgement replays it under every catalog property over its bound, and closes the bug on it
    too. A local report's failure is not kept: the working tree's code wrote it."""
    bug = repo.candidate("refund-bug", {REFUND_BUG[0]: buggy_product(repo)})
    run = repo.gate(f"--gate-candidate={bug}")
    (suite,) = suites(run.report)
    assert suite["regressions"] == {
        "file": "fixtures/REGRESSIONS",
        "records": {},
        "world_sha256": None,
        "cached": None,
        "properties": [],
    }
    (failure,) = [o for o in observations(run.report) if o["property"] == "refund_le_captured"]
    kept = keep_witness(repo.root / "dist/gate", failure["id"], repo.root)
    assert kept.regression.record == repo.world["payments.jsonl"].splitlines()[failure["line"] - 1]
    landed = repo.land("keep the refund bug's failure")

    notes = repo.candidate("honest", {"src/notes.py": "NOTES = 1\n"})
    honest = repo.gate(f"--gate-candidate={notes}")
    assert honest.verdict == "eligible", honest.stdout
    (suite,) = suites(honest.report)
    assert suite["regressions"]["records"] == {"payments": 1}
    assert [(p["name"], p["records"], p["outcome"]) for p in suite["regressions"]["properties"]] == [
        ("refund_le_captured", 1, "pass"),
        ("refunds_never_negative", 1, "pass"),
    ]
    bug_again = repo.candidate("refund-bug-again", {REFUND_BUG[0]: buggy_product(repo)})
    again = repo.gate(f"--gate-candidate={bug_again}")
    assert codes(again.report) == {"property-failed"}
    assert [
        (r["path"], r["message"].startswith("regression record: the payments record at line 1 "))
        for r in reasons(again.report, "property-failed")
    ] == [("checks:props#refund_le_captured", False), ("checks:props#refund_le_captured", True)], again.stdout

    repo.edit(*REFUND_BUG)
    repo.commit("the refund bug, judged locally")
    local = judged(repo, landed)
    (failure,) = [o for o in observations(local.report) if o["property"] == "refund_le_captured"]
    with pytest.raises(EvidenceError, match="only a trusted-mode report's failure can be kept"):
        keep_witness(repo.root / "dist/gate", failure["id"], repo.root)


def test_uncommitted_byte_in_the_generator(repo: GateRepo) -> None:
    base = repo.head()
    repo.write("fixtures/gen.py", repo.read("fixtures/gen.py") + "\n")
    assert_closed_with(judged(repo, base), "protected-path-changed", "generator-mismatch")


@pytest.mark.parametrize("option", ["--gate-base", "--changed-since"])
def test_base_that_does_not_resolve(repo: GateRepo, option: str) -> None:
    # The real Pants resolves --changed-since before any goal runs (tests/e2e keeps that half); here the
    # gate's own resolution of either option is what closes.
    assert_closed_with(repo.gate(f"{option}={'0' * 40}"), "changed-set-unavailable")


def test_base_inside_the_change_is_untrusted(repo: GateRepo) -> None:
    repo.edit("checks/catalog.yaml", "No refund is negative.", "Roughly, no refund is negative.")
    repo.commit("loosen the catalog first")
    base = repo.commit("then an innocent-looking commit")
    # Against its own earlier commit the change looks clean; the base is not reviewed history.
    run = judged(repo, base)
    # The loosened catalog no longer says what the manifest drew: a finding wherever the base is.
    assert_closed_with(run, "base-untrusted", "property-differs-from-catalog")
    (reason,) = reasons(run.report, "base-untrusted")
    assert "origin/main" in reason["expected"] and reason["found"] == base
    assert "protected-path-changed" not in codes(run.report)
    # Judged against the trusted ref, the catalog edit is seen.
    assert_closed_with(judged(repo, "origin/main"), "protected-path-changed", "property-differs-from-catalog")


def test_missing_manifest_on_the_base(repo: GateRepo) -> None:
    (repo.root / "checks/manifest.json").unlink()
    base = repo.land("a base without a manifest")
    assert_closed_with(judged(repo, base), "artifact-missing", "replay-failed")  # no manifest: nothing to replay


# -- tests/e2e/holes_test.py: attacks on what the oracle is read through ----------------------------------

# Rebinds every predicate to "holds" before any of them is imported.
RIGGED_INIT = """import importlib
_rigged = importlib.import_module(__name__ + ".props")
for _name in dir(_rigged):
    if not _name.startswith("_") and callable(getattr(_rigged, _name)):
        setattr(_rigged, _name, lambda record: True)
"""


def test_attacks_on_what_the_oracle_is_read_through(repo: GateRepo) -> None:
    base = repo.head()
    repo.edit(*REFUND_BUG)
    # 1. The predicates' package, and a helper module beside them.
    repo.write("checks/__init__.py", RIGGED_INIT)
    repo.write("checks/helpers.py", "HOLDS = True\n")
    # 2. A product package that becomes `checks.props` in the merged sandbox.
    repo.write("src/checks/props/__init__.py", "def refund_le_captured(record):\n    return True\n")
    repo.write("src/checks/props/BUILD", "python_sources()\n")
    repo.write("src/BUILD", 'python_sources(name="lib", dependencies=["src/checks/props"])\n')
    # 3. Configuration outside pants.toml (protected by name: a RuleRunner reads none), git's view of an
    # oracle folder.
    repo.write(".pants.rc", "[gate]\ntrusted_refs = []\n")
    repo.write("checks/.gitattributes", "catalog.yaml -diff\n")
    # 4. An evidence folder through a symlink.
    repo.write("docs/notes/forged.json", "{}\n")
    (repo.root / "freezes").symlink_to("docs/notes")
    # A path no UTF-8 decoder takes, and one that would inject a workflow command if printed raw.
    repo.write(os.fsdecode(b"docs/caf\xe9.md"), "latin-1 name\n")
    repo.write("docs/a\n::stop-commands::x.md", "control characters in a name\n")
    repo.commit("an agent's fix, with help")

    run = judged(repo, base)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert {"checks/__init__.py", "checks/helpers.py", ".pants.rc", "checks/.gitattributes", "freezes"} <= set(
        protected_paths(run)
    ), protected_paths(run)
    shadowed = " ".join(r["found"] for r in reasons(run.report, "module-shadowed"))
    assert "src/checks/props/__init__.py" in shadowed  # refused in the replay's sandbox
    assert "freezes" in [r["path"] for r in reasons(run.report, "path-not-regular")]
    assert "docs/caf\\xe9.md" in {c["path"] for c in run.report["changed"]}
    assert not any(line.startswith("::") for line in run.stdout.splitlines())


def test_renaming_the_generator_names_the_old_path(repo: GateRepo) -> None:
    base = repo.head()
    repo.git("mv", "fixtures/gen.py", "fixtures/generate.py")
    repo.edit("fixtures/BUILD", 'generator="gen.py"', 'generator="generate.py"')
    repo.commit("rename the generator")
    run = judged(repo, base)
    assert run.verdict == "closed", run.stdout
    assert {"fixtures/gen.py", "fixtures/BUILD"} <= set(protected_paths(run))


def test_a_suite_naming_a_missing_fixture_is_a_closed_report(repo: GateRepo) -> None:
    base = repo.head()
    repo.edit("checks/BUILD", 'fixture="fixtures:epoch"', 'fixture="fixtures:no_such_epoch"')
    repo.commit("point the suite elsewhere")
    run = judged(repo, base)
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    assert "checks:props" in [r["path"] for r in reasons(run.report, "artifact-malformed")]


def test_a_suite_whose_dependency_does_not_resolve_is_a_closed_report(repo: GateRepo) -> None:
    # The build graph's part of a replay runs beside the fixture world's: its failure is a reason too.
    base = repo.head()
    repo.edit("checks/BUILD", '"src:lib"', '"src:no_such_lib"')
    repo.commit("depend on a target that does not exist")
    run = judged(repo, base)
    # checks/BUILD is the suite's oracle, so its edit is protected too; without its graph nothing replays.
    assert_closed_with(run, "artifact-malformed", "protected-path-changed", "replay-failed")
    [reason] = [r for r in reasons(run.report, "artifact-malformed") if r["path"] == "checks:props"]
    assert "no_such_lib" in reason["found"], reason


# -- flakes and freezes -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def flaky_base(example: GateRepo) -> tuple[str, dict[str, Any]]:
    """A landed commit where the flaky product landed with its observation archived; and that flake."""
    example.reset()
    example.write("src/payments_lib.py", FLAKY_PRODUCT)
    example.land("flaky refund check lands")
    run = example.gate()
    (flake,) = [o for o in observations(run.report) if o["status"] == "flake"]
    (folder,) = [s["folder"] for s in run.report["suites"] if s["address"] == flake["suite"]]
    for suffix in ("json", "bin"):
        saved = (example.root / f"dist/gate/{folder}/observations/{flake['id']}.{suffix}").read_bytes()
        example.write(f"observations/{flake['id']}.{suffix}", saved)
    return example.land("archive the flake"), flake


@pytest.fixture
def flaky(flaky_base: tuple[str, dict[str, Any]], example: GateRepo) -> tuple[GateRepo, dict[str, Any]]:
    commit, flake = flaky_base
    example.reset(commit)
    return example, flake


def freeze(flake: dict[str, Any], **overrides: str) -> str:
    body = {
        "observation_id": flake["id"],
        "suite": flake["suite"],
        "epoch_id": flake["epoch_id"],
        "expires_on": "2099-01-01",
        "reason": "the refund check's first call in a process is wrong; ticket PAY-17",
    }
    body.update(overrides)
    return json.dumps(body, indent=2) + "\n"


def test_unfrozen_flake_is_closed(repo: GateRepo) -> None:
    base = repo.head()
    repo.write("src/payments_lib.py", FLAKY_PRODUCT)
    repo.commit("flaky refund check")
    run = judged(repo, base)
    assert_closed_with(run, "flake-unfrozen")
    (flake,) = [o for o in observations(run.report) if o["status"] == "flake"]
    assert flake["rerun_passed"] is True and flake["line"] == 1


def test_flake_covered_by_a_freeze_on_the_base_is_hold(flaky: tuple[GateRepo, dict[str, Any]]) -> None:
    repo, flake = flaky
    repo.write("freezes/refund-flake.json", freeze(flake))
    base = repo.land("reviewer freezes the flake")
    repo.write("docs/notes.md", "An unrelated note.\n")
    repo.commit("unrelated")
    run = judged(repo, base)
    assert run.verdict == "hold" and run.exit_code == 2, run.stdout
    assert codes(run.report) == {"flake-frozen"}
    assert flake["witness_sha256"] in run.stdout


def test_expired_freeze_is_closed(flaky: tuple[GateRepo, dict[str, Any]]) -> None:
    repo, flake = flaky
    repo.write("freezes/refund-flake.json", freeze(flake, expires_on="2026-01-01"))
    base = repo.land("a freeze that has since expired")
    assert_closed_with(
        repo.gate(f"--changed-since={base}", "--gate-today=2026-01-01"), "freeze-expired", "flake-unfrozen"
    )


def test_freeze_naming_a_test_is_closed(flaky: tuple[GateRepo, dict[str, Any]]) -> None:
    repo, flake = flaky
    repo.write("freezes/refund-flake.json", freeze(flake, observation_id="src/payments_lib_test.py::test_refund"))
    base = repo.land("a freeze by test name")
    assert_closed_with(judged(repo, base), "freeze-cites-test", "flake-unfrozen")


def test_archived_observation_without_matching_bytes_is_closed(flaky: tuple[GateRepo, dict[str, Any]]) -> None:
    repo, flake = flaky
    repo.write(f"observations/{flake['id']}.bin", b'{"id":"edited"}')
    repo.write("freezes/refund-flake.json", freeze(flake))
    base = repo.land("tampered archive")
    # The replay's own observation of the flake has the right bytes, so the freeze still covers it; the
    # tampered archive closes the gate all the same.
    assert_closed_with(judged(repo, base), "observation-witness-mismatch", "flake-frozen")


def test_freeze_from_another_epoch_is_closed(flaky: tuple[GateRepo, dict[str, Any]]) -> None:
    repo, flake = flaky
    repo.write("freezes/refund-flake.json", freeze(flake, epoch_id="payments-e0"))
    base = repo.land("a freeze for an older epoch")
    assert_closed_with(judged(repo, base), "freeze-wrong-epoch", "flake-unfrozen")


@pytest.mark.parametrize(
    "path, content, also",
    [
        ("fixtures/EPOCH", None, ()),  # the agent re-pins the epoch
        # Both files below are malformed as well (a freeze without its suite, an empty observation).
        (
            "freezes/quiet.json",
            json.dumps(
                {
                    "observation_id": f"refund_le_captured-{'0' * 24}",
                    "epoch_id": EPOCH_ID,
                    "expires_on": "2099-01-01",
                    "reason": "quiet",
                }
            )
            + "\n",
            ("artifact-malformed",),
        ),
        ("observations/note.json", "{}\n", ("artifact-malformed",)),
        # The fixture's regression records, protected before the file exists (and malformed as well)
        ("fixtures/REGRESSIONS", "{}\n", ("artifact-malformed", "replay-failed")),
        ("pants.toml", "[GLOBAL]\n", ()),  # a RuleRunner reads none: protected as configuration by name
    ],
)
def test_every_other_kind_of_protected_file(
    repo: GateRepo, path: str, content: str | None, also: tuple[str, ...]
) -> None:
    base = repo.head()
    repo.write(path, repo.read(path) + "\n" if content is None else content)
    repo.commit(f"touch {path}")
    run = judged(repo, base)
    assert_closed_with(run, "protected-path-changed", *also)
    assert path in protected_paths(run)


def test_hostile_names_and_a_committed_dist_file_end_in_a_report(repo: GateRepo) -> None:
    base = repo.head()
    repo.write("dist", "a regular file: the `/dist/` ignore pattern matches only a folder\n")
    (repo.root / "freezes").mkdir()
    with open(bytes(repo.root / "freezes") + b"/\xff.json", "wb") as handle:  # a name that is not UTF-8
        handle.write(b"{}\n")
    repo.write("freezes/a\n::stop-commands::x.json", "{}\n")
    repo.commit("hostile names")
    run = repo.gate(
        f"--changed-since={base}", "--gate-annotations=github", report_at=".pants.d/epoch_gate/gate/report.json"
    )
    assert ".pants.d/epoch_gate/gate/report.json" in run.stderr, run.stderr
    assert run.verdict == "closed" and run.exit_code == 1
    paths = {(r["code"], r["path"]) for r in reasons(run.report)}
    assert {
        ("output-folder-unsafe", "dist"),
        ("protected-path-changed", "freezes/\\xff.json"),
        ("protected-path-changed", "freezes/a\n::stop-commands::x.json"),
    } <= paths, paths
    assert not [
        line
        for line in run.stdout.splitlines()
        if line.startswith("::") and not line.startswith(("::error ", "::warning "))
    ], run.stdout
    assert (repo.root / "dist").is_file()


# -- trusted mode: the judge is the landed checkout; the candidate, a commit it reads as data ----------

# Pants executes BUILD files with the full builtins; its ban on `import` is a check of the tokens.
GATE_PATCH = """
_import = __builtins__["__im" + "port__"]
_decision = _import("epoch_gate.verdict.suite", fromlist=["Label"])
_judge = _import("epoch_gate.verdict.judge", fromlist=["label_of"])
_decision.label_of = _judge.label_of = lambda reasons: _decision.Label.ELIGIBLE
"""
# Product code, run when the predicates import it: swaps the predicates' module for one where everything
# holds, and rebinds whatever of the runner it finds loaded beside it.
# Product code that, imported in the child, takes over its serving loop and answers "holds" to every
# call; and failing that, rebinds whatever of the runner it can reach.
RIGGED_PRODUCT = """
import sys as _sys


def _holds(*args, **kwargs):
    return '["v","bool",true]'


for _name, _module in list(_sys.modules.items()):
    if _name.startswith("epoch_gate"):
        for _attr in list(vars(_module)):
            _value = getattr(_module, _attr)
            if isinstance(_value, type) and hasattr(_value, "answer"):
                _value.answer = lambda self, *args: _holds()
"""


def buggy_product(repo: GateRepo) -> str:
    return repo.read(REFUND_BUG[0]).replace(REFUND_BUG[1], REFUND_BUG[2])


def test_trusted_mode_passes_an_honest_candidate_and_attests_it(repo: GateRepo) -> None:
    commit = repo.candidate("honest", {"src/notes.py": '"""Notes."""\n'})
    run = repo.gate(f"--gate-candidate={commit}")
    assert run.verdict == "eligible" and run.exit_code == 0, run.stdout
    assert run.report["mode"] == "trusted"
    assert [c["path"] for c in run.report["changed"]] == ["src/notes.py"]
    statement = json.loads(repo.read("dist/gate/statement.intoto.json"))
    assert statement["subject"][0]["digest"]["gitCommit"] == commit
    assert statement["predicate"]["verifiedLevels"] == ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED"]
    (isolation,) = {s["identities"]["isolation"] for s in suites(run.report)}
    assert "the product in a jail of its own" in isolation


def test_trusted_mode_signs_its_statement_with_the_key(repo: GateRepo) -> None:
    """With `[gate].statement_key_env` set, the statement is also written in a DSSE envelope that verifies
    against the public key for the candidate's commit; a bug's FAILED statement is refused; without a key
    the statement is unsigned and the report says so; a key that is no key closes the gate."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    signing = {"EPOCH_GATE_STATEMENT_KEY": pem}
    now = datetime.datetime.now(datetime.timezone.utc)
    commit = repo.candidate("honest", {"src/notes.py": '"""Notes."""\n'})
    run = repo.gate("--no-pantsd", f"--gate-candidate={commit}", env=signing)
    assert run.verdict == "eligible", run.stdout
    assert run.report["statement"] == {"signed": True, "keyid": dsse.key_id(key.public_key())}
    assert f"statement signed with the key {dsse.key_id(key.public_key())}" in run.stdout
    envelope = (repo.root / "dist/gate/statement.intoto.dsse.json").read_bytes()
    opened = dsse.open_envelope(envelope, key.public_key())
    assert (
        isinstance(opened, dsse.Opened)
        and opened.payload == repo.root.joinpath("dist/gate/statement.intoto.json").read_bytes()
    )
    assert verify(envelope, key.public_key(), Expected(repository_url(repo.root), commit, now))[0] == []
    assert pem.splitlines()[1] not in run.stdout + run.stderr + json.dumps(run.report)

    bug = repo.candidate("refund-bug", {REFUND_BUG[0]: buggy_product(repo)})
    failed = repo.gate("--no-pantsd", f"--gate-candidate={bug}", env=signing)
    assert failed.verdict == "closed"
    envelope = (repo.root / "dist/gate/statement.intoto.dsse.json").read_bytes()
    assert [r.check for r in verify(envelope, key.public_key(), Expected(repository_url(repo.root), bug, now))[0]] == [
        "result",
        "levels",
    ]

    unsigned = repo.gate(f"--gate-candidate={commit}")
    assert unsigned.report["statement"] == {
        "signed": False,
        "why": "no key ($EPOCH_GATE_STATEMENT_KEY is unset): the statement is unsigned",
    }
    assert not (repo.root / "dist/gate/statement.intoto.dsse.json").exists()
    assert (repo.root / "dist/gate/statement.intoto.json").exists()
    unusable = repo.gate("--no-pantsd", f"--gate-candidate={commit}", env={"EPOCH_GATE_STATEMENT_KEY": "not a key"})
    assert [
        (r["code"], r["found"]) for r in repo.gate(f"--gate-candidate={commit}", env=signing).report["reasons"]
    ] == [("statement-key-unusable", "pantsd")]
    assert [(r["code"], r["path"]) for r in unusable.report["reasons"]] == [
        ("statement-key-unusable", "$EPOCH_GATE_STATEMENT_KEY")
    ], unusable.stdout


def test_held_out_draws_need_the_key_without_pantsd_and_say_why_they_did_not_run(repo: GateRepo) -> None:
    """Without the key, the pinned world and the manifest only, said so; CI that always passes the key
    (`--gate-held-out-required`) is closed without it; the key under pantsd (a daemon would keep it for
    later runs) is refused and nothing is drawn. (The draws themselves: tests/e2e/held_out_test.py.)"""
    commit = repo.candidate("honest", {"src/notes.py": '"""Notes."""\n'})
    unkeyed = repo.gate(f"--gate-candidate={commit}")
    assert unkeyed.verdict == "eligible", unkeyed.stdout
    (suite,) = suites(unkeyed.report)
    assert (suite["held_out"], suite["held_out_properties"]) == (
        {"drawn": False, "why": "no key ($EPOCH_GATE_HELD_OUT_KEY is unset): the pinned world only"},
        {"drawn": False, "why": "no key ($EPOCH_GATE_HELD_OUT_KEY is unset): the manifest only"},
    )
    required = repo.gate("--gate-held-out-required", f"--gate-candidate={commit}")
    assert required.verdict == "closed", required.stdout
    assert [r["path"] for r in reasons(required.report, "held-out-unavailable")] == ["$EPOCH_GATE_HELD_OUT_KEY"]
    under = repo.gate(f"--gate-candidate={commit}", env={"EPOCH_GATE_HELD_OUT_KEY": "ab" * 32})
    assert under.verdict == "closed", under.stdout
    assert [(r["path"], r["found"]) for r in reasons(under.report, "held-out-unavailable")] == [
        ("$EPOCH_GATE_HELD_OUT_KEY", "pantsd")
    ]
    assert suites(under.report)[0]["held_out"]["drawn"] is False


def test_trusted_mode_without_a_jail_is_closed_unless_an_unjailed_verdict_is_accepted(repo: GateRepo) -> None:
    commit = repo.candidate("honest-unjailed", {"src/notes.py": '"""Notes."""\n'})
    run = repo.gate(f"--gate-candidate={commit}", jailed=False)
    # Nothing ran: the replay's own reason says so beside the cause.
    assert run.verdict == "closed" and codes(run.report) == {"isolation-unavailable", "replay-failed"}, run.stdout
    (refused,) = reasons(run.report, "isolation-unavailable")
    assert "trusted mode (--gate-candidate) requires it" in refused["expected"]
    assert "unsafe_allow_unjailed_verdict" in refused["message"] and "apt-get install bubblewrap" in refused["message"]

    run = repo.gate(f"--gate-candidate={commit}", "--gate-unsafe-allow-unjailed-verdict", jailed=False)
    assert run.verdict == "eligible", run.stdout
    (isolation,) = {s["identities"]["isolation"] for s in suites(run.report)}
    assert isolation.startswith("UNJAILED ([gate].unsafe_allow_unjailed_verdict): none (bubblewrap unavailable")
    assert "isolation UNJAILED" in run.stdout
    statement = json.loads(repo.read("dist/gate/statement.intoto.json"))
    assert statement["predicate"]["verifiedLevels"] == ["EPOCH_GATE_ELIGIBLE"]
    assert statement["predicate"]["policy"]["annotations"]["checks:props.isolation"] == isolation
    # A signing key given to an unjailed run was within the candidate's reach: never used, and it closes
    key = Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    exposed = repo.gate(
        "--no-pantsd",
        f"--gate-candidate={commit}",
        "--gate-unsafe-allow-unjailed-verdict",
        jailed=False,
        env={"EPOCH_GATE_STATEMENT_KEY": key},
    )
    assert [(r["code"], r["found"]) for r in exposed.report["reasons"]] == [("statement-key-unusable", "unjailed")]
    assert exposed.report["statement"]["signed"] is False
    assert not (repo.root / "dist/gate/statement.intoto.dsse.json").exists()


def test_trusted_mode_never_loads_a_candidates_build_file(repo: GateRepo) -> None:
    commit = repo.candidate(
        "build-patch", {REFUND_BUG[0]: buggy_product(repo), "src/BUILD": repo.read("src/BUILD") + GATE_PATCH}
    )
    run = repo.gate(f"--gate-candidate={commit}")
    assert_closed_with(run, "property-failed", "build-file-code")
    assert [r["path"] for r in reasons(run.report, "build-file-code")] == ["src/BUILD"]


def test_trusted_mode_refuses_a_build_file_committed_as_a_symlink(repo: GateRepo) -> None:
    """Pants would read the file the link points to (which no BUILD pattern names, so nothing checks it);
    the gate reads only git's link text."""
    repo.git("checkout", "-q", "-B", "linked-build", "main")
    (repo.root / "src/declarations").write_text(repo.read("src/BUILD"))
    (repo.root / "src/BUILD").unlink()
    os.symlink("declarations", repo.root / "src/BUILD")
    commit = repo.commit("a BUILD file as a symlink")
    repo.git("checkout", "-q", "main")
    run = repo.gate(f"--gate-candidate={commit}")
    assert run.verdict == "closed", run.stdout
    assert [(r["path"], r["found"]) for r in reasons(run.report, "path-not-regular")] == [
        ("src/BUILD", "git mode 120000")
    ]


def test_trusted_mode_catches_product_code_rigging_the_predicates(repo: GateRepo) -> None:
    commit = repo.candidate("rigged", {REFUND_BUG[0]: buggy_product(repo) + RIGGED_PRODUCT})
    run = repo.gate(f"--gate-candidate={commit}")
    assert run.verdict == "closed" and run.exit_code == 1, run.stdout
    # The child now answers "true" to every call after the first: the predicate judges that data, and the
    # bug's records (whose answers the first call's honest child gave, or the lie) still fail.
    assert codes(run.report) == {"property-failed"}, run.stdout


def test_a_replay_that_runs_again_is_reported_as_run_not_cached(repo: GateRepo) -> None:
    # One scheduler across runs, as pantsd: the replay re-runs on an edit with the same output, and the
    # report must say it ran (the memoized `_Runs` once handed back the earlier run's metadata).
    repo.gate()
    repo.write("src/payments_lib.py", repo.read("src/payments_lib.py") + "\n# edited, not committed\n")
    assert [s["cached"] for s in suites(repo.gate().report)] == [False]
    assert [s["cached"] for s in suites(repo.gate().report)] == [True]


def test_a_replay_ended_by_a_fault_is_judged_again_never_read_from_the_cache(repo: GateRepo, tmp_path: Path) -> None:
    """A child killed from outside (here by itself, as the host's OOM killer or a stuck fork's end would)
    is a fault of the run: `closed`, said so, and run again by the next gate (in one engine, as pantsd's),
    where a verdict is read from the cache. The product, unjailed, counts its runs in a file outside."""
    runs = tmp_path / "runs"
    repo.write(
        "src/payments_lib.py",
        "import os, signal\n\ndef refundable(captured, refunded):\n"
        f"    with open({str(runs)!r}, 'a') as counted:\n        counted.write('ran\\n')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n",
    )
    counts = []
    for _ in range(2):
        run = repo.gate()
        assert_closed_with(run, "runner-protocol")
        said = [r["message"] for r in reasons(run.report, "runner-protocol")]
        assert said and all(
            s.endswith("(a fault of the run, not a verdict: the next judgement replays it)") for s in said
        )
        assert [s["cached"] for s in suites(run.report)] == [False]
        counts.append(runs.read_text().count("ran"))
    assert counts[1] > counts[0] > 0, counts  # run again, not read from the engine's memory


def test_trusted_mode_replays_a_suite_only_when_the_change_reaches_its_folders(repo: GateRepo) -> None:
    def replayed(files: dict[str, str]) -> bool:
        run = repo.gate(f"--gate-candidate={repo.candidate('reach', files)}")
        assert run.verdict == "eligible", run.stdout
        return not suites(run.report)[0]["cached"]

    repo.gate(f"--gate-candidate={repo.landed}")  # the trusted replay of main itself, now cached
    # A new package the predicates never import, even through the product: only its stand-in ships (an
    # import of it by a name built at run time must end the replay), so its name is a new sandbox...
    tools = {"src/tools/__init__.py": "", "src/tools/export.py": "import payments_lib\n"}
    assert replayed(tools)
    # ...and its code is not: an edit of it replays nothing.
    assert not replayed({**tools, "src/tools/export.py": "import payments_lib\n# edited\n"})
    # The product module they import: a new sandbox, so a new replay.
    assert replayed({"src/payments_lib.py": repo.read("src/payments_lib.py") + "\n# reviewed\n"})


@pytest.mark.parametrize(
    "compiled",
    [
        "src/payments_lib/__init__.pyc",
        "src/payments_lib.cpython-39-x86_64-linux-gnu.so",
        "src/__pycache__/payments_lib.cpython-39.pyc",
    ],
)
def test_trusted_mode_refuses_compiled_code_python_would_load_instead_of_the_source(
    repo: GateRepo, compiled: str
) -> None:
    repo.git("checkout", "-q", "-B", "compiled", "main")
    repo.write(compiled, "bytecode that returns True\n")
    repo.git("add", "--force", compiled)  # committed even where a .gitignore would have kept it out
    commit = repo.commit("compiled")
    repo.git("checkout", "-q", "main")
    run = repo.gate(f"--gate-candidate={commit}")
    assert run.verdict == "closed", run.stdout
    assert [r["path"] for r in reasons(run.report, "path-not-regular")] == [compiled], run.stdout
