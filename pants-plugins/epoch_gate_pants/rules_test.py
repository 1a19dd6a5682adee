"""Rule tests: each rule of the backend in a RuleRunner, over small in-memory repositories."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pants.backend.python import register as python_backend
from pants.build_graph.address import Address
from pants.core import register as core_backend
from pants.core.goals.tailor import TailorGoal
from pants.core.goals.test import TestResult
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.evidence.hashing import canonical_json, sha256_bytes
from epoch_gate.reasons import Code
from epoch_gate.runner.child import unshipped_stub
from epoch_gate_pants import register
from epoch_gate_pants.candidate import CandidateClosure, CandidateClosureRequest, CandidateFiles
from epoch_gate_pants.codeowners import GateCodeowners
from epoch_gate_pants.fixture import EpochCheck, EpochCheckRequest, FixtureWorld, FixtureWorldRequest
from epoch_gate_pants.gate_harness import BWRAP_SHA, GENERATOR, bootstrapped, configure
from epoch_gate_pants.isolation import Jail
from epoch_gate_pants.protected import ProtectedPaths
from epoch_gate_pants.replay import ReplayRequest, ReplayRun
from epoch_gate_pants.sampled_tests import SampledPropertiesFieldSet, SampledPropertiesTestRequest
from epoch_gate_pants.suite import ManifestFiles, ManifestFilesRequest

PREDICATES = """
def refund_le_captured(record, product) -> bool:
    return product.payments_lib.refundable(record["captured"], record["refunded"]) is True
"""

CATALOG = """properties:
  - name: refund_le_captured
    bound: payments
    predicate: checks.props:refund_le_captured
    description: A refund never exceeds the captured amount.
"""


def new_rule_runner(store: Path, named_caches: Path) -> RuleRunner:
    """A RuleRunner with its own scheduler (so its own memo) over the store given (so that process cache)."""
    runner = RuleRunner(
        rules=[
            *register.rules(),
            *python_backend.rules(),
            *core_backend.rules(),
            QueryRule(EpochCheck, [EpochCheckRequest]),
            QueryRule(FixtureWorld, [FixtureWorldRequest]),
            QueryRule(ManifestFiles, [ManifestFilesRequest]),
            QueryRule(ProtectedPaths, []),
            QueryRule(ReplayRun, [ReplayRequest]),
            QueryRule(Jail, []),
            QueryRule(Digest, [CreateDigest]),
            QueryRule(CandidateClosure, [CandidateClosureRequest]),
            QueryRule(DigestContents, [Digest]),
            QueryRule(TestResult, [SampledPropertiesTestRequest.Batch]),
        ],
        target_types=[*register.target_types(), *python_backend.target_types(), *core_backend.target_types()],
        bootstrap_args=[f"--local-store-dir={store}", f"--named-caches-dir={named_caches}"],
    )
    configure(runner)
    return runner


@pytest.fixture(scope="module")
def named_caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pex's and pip's caches, shared by the module's tests: each downloads the requirements' wheels once.
    (Not the store: LMDB must not be opened twice in one process, and each test's scheduler would.)"""
    return tmp_path_factory.mktemp("named")


@pytest.fixture
def rule_runner(tmp_path: Path, named_caches: Path) -> RuleRunner:
    return new_rule_runner(tmp_path / "store", named_caches)


def write_repo(
    runner: RuleRunner, *, pinned_generator: str = GENERATOR, refund_ok: str = "refunded <= captured", seed: int = 3
) -> None:
    from epoch_gate.evidence.catalog import parse_catalog
    from epoch_gate.evidence.manifest import sample

    base = b'{"count": 50}\n'
    pin = {
        "schema": 1,
        "epoch_id": "e1",
        "generator": "fixtures/gen.py",
        "generator_sha256": sha256_bytes(pinned_generator.encode()),
        "inputs": [{"path": "fixtures/base.json", "sha256": sha256_bytes(base)}],
    }
    manifest = sample(parse_catalog(CATALOG.encode(), "c"), seed, 1)
    runner.write_files(
        {
            "fixtures/BUILD": 'epoch_fixture(name="epoch", generator="gen.py", inputs=["base.json"])',
            "fixtures/gen.py": GENERATOR,
            "fixtures/base.json": base.decode(),
            "fixtures/EPOCH": canonical_json(pin).decode(),
            "checks/BUILD": (
                'python_sources(name="preds", sources=["props.py"])\n'
                'property_manifest(name="manifest", predicates=["props.py"])\n'
                'sampled_properties(name="props", fixture="fixtures:epoch", manifest=":manifest", '
                'dependencies=[":preds", "src:lib"])'
            ),
            "checks/props.py": PREDICATES,
            "checks/catalog.yaml": CATALOG,
            "checks/manifest.json": manifest.to_bytes().decode(),
            "src/BUILD": 'python_sources(name="lib")',
            "src/payments_lib.py": f"def refundable(captured: int, refunded: int) -> bool:\n    return {refund_ok}\n",
        }
    )


def test_epoch_check_agrees_and_runs_the_generator_hermetically(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    check = rule_runner.request(EpochCheck, [EpochCheckRequest(Address("fixtures", target_name="epoch"))])
    assert check.pin.reasons == ()
    assert check.pin.pin is not None and check.pin.pin.epoch_id == "e1"
    assert check.world.failure is None and check.world.world_sha256


def test_epoch_check_hashes_the_loaded_generator_bytes(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner, pinned_generator=GENERATOR + "# the pinned version\n")
    check = rule_runner.request(EpochCheck, [EpochCheckRequest(Address("fixtures", target_name="epoch"))])
    assert [r.code for r in check.pin.reasons] == [Code.GENERATOR_MISMATCH]
    assert check.pin.reasons[0].found == sha256_bytes(GENERATOR.encode())


# Iterates a set of strings: its order follows the hash seed, which the sandbox's environment pins.
HASH_ORDERED_GENERATOR = (
    GENERATOR
    + """
with open(os.path.join(args.out, "keys.txt"), "w") as out:
    out.write(" ".join({f"key{i}" for i in range(64)}))
"""
)
NONDETERMINISTIC_GENERATOR = (
    GENERATOR
    + """
with open(os.path.join(args.out, "nonce"), "w") as out:
    out.write(os.urandom(16).hex())
"""
)


def test_world_is_the_same_digest_on_a_rerun(tmp_path: Path) -> None:
    # Asked twice of one engine, the world is memoized (and then process-cached): that is no rerun. Each
    # run here is a new RuleRunner over its own store, so the generator really runs once in each.
    def worlds(store: str) -> tuple[FixtureWorld, FixtureWorld]:
        runner = new_rule_runner(tmp_path / store, tmp_path / "named")  # named caches hold no results
        write_repo(runner, pinned_generator=HASH_ORDERED_GENERATOR)
        runner.write_files({"fixtures/gen.py": HASH_ORDERED_GENERATOR})
        request = FixtureWorldRequest(Address("fixtures", target_name="epoch"))
        world = runner.request(FixtureWorld, [request])
        runner.write_files({"fixtures/gen.py": NONDETERMINISTIC_GENERATOR})
        return world, runner.request(FixtureWorld, [request])

    (first, first_control), (rerun, rerun_control) = worlds("store-1"), worlds("store-2")
    assert first.failure is None and first.world_sha256 is not None, first.failure
    assert rerun == first
    # The same two runs see a generator that differs per run: the comparison above could have failed.
    assert first_control.failure is None and rerun_control.failure is None
    assert first_control.world_sha256 != rerun_control.world_sha256
    assert first_control.digest != rerun_control.digest


def test_generator_failure_is_a_reason(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"fixtures/gen.py": "raise SystemExit('no world today')\n"})
    world = rule_runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    assert world.failure is not None and world.failure.code is Code.GENERATOR_FAILED


# Reads a working-tree file by absolute path, which a plain sandbox allows.
PEEKING_GENERATOR = """
import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--out")
parser.add_argument("--input", action="append")
args = parser.parse_args()
os.makedirs(args.out)
with open(os.path.join(args.out, "world.txt"), "w") as out:
    out.write(open("{root}/src/payments_lib.py").read())
"""


def peeking_world(runner: RuleRunner) -> tuple[FixtureWorld, bytes]:
    write_repo(runner)
    runner.write_files({"fixtures/gen.py": PEEKING_GENERATOR.replace("{root}", runner.build_root)})
    world = runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    contents = runner.request(DigestContents, [world.digest])
    return world, b"".join(c.content for c in contents)


def test_a_jailed_generator_cannot_read_the_working_tree(rule_runner: RuleRunner) -> None:
    configure(rule_runner, jailed=True)
    jail = rule_runner.request(Jail, [])
    assert jail.isolation.jailed and jail.isolation.fixed_clock, jail.isolation
    world, _ = peeking_world(rule_runner)
    assert world.failure is not None and world.failure.code is Code.GENERATOR_FAILED
    assert "No such file or directory" in world.failure.message

    # The same generator, unjailed, reads the working tree: the jail is what stopped it.
    configure(rule_runner, "--gate-isolation=off", jailed=True)
    world, data = peeking_world(rule_runner)
    assert world.failure is None and b"def refundable" in data


def test_the_jail_stops_the_clock(rule_runner: RuleRunner) -> None:
    configure(rule_runner, jailed=True)
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "fixtures/gen.py": GENERATOR.replace(
                'os.makedirs(args.out)',
                'os.makedirs(args.out)\nimport time\n'
                'open(os.path.join(args.out, "clock"), "w").write(str(time.time()))',
            )
        }
    )
    world = rule_runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    contents = {c.path: c.content for c in rule_runner.request(DigestContents, [world.digest])}
    assert contents["__world/clock"] == b"946684800.0"


def test_required_isolation_without_bubblewrap_runs_nothing(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    request = FixtureWorldRequest(Address("fixtures", target_name="epoch"))
    # auto: no bubblewrap, so the plain sandbox, and the report says so.
    assert rule_runner.request(Jail, []).isolation.description.startswith("none (bubblewrap unavailable")
    assert rule_runner.request(FixtureWorld, [request]).failure is None
    configure(rule_runner, "--gate-isolation=required")
    world = rule_runner.request(FixtureWorld, [request])
    assert world.failure is not None and world.failure.code is Code.ISOLATION_UNAVAILABLE
    assert "bubblewrap unavailable" in world.failure.found


def test_without_the_pinned_bubblewrap_the_systems_is_used_when_recent_enough(
    rule_runner: RuleRunner, tmp_path: Path
) -> None:
    write_repo(rule_runner)
    system = tmp_path / "system"
    system.mkdir()
    shutil.copy(bootstrapped("isolation/bwrap", BWRAP_SHA), system / "bwrap")
    configure(rule_runner, f"--bwrap-system-search-path=['{system}']")  # the pinned one is not there
    jail = rule_runner.request(Jail, [])
    assert jail.isolation.jailed and jail.isolation.description.startswith("bubblewrap 0.8.0: no working tree")
    assert jail.isolation.description.endswith("the product in a jail of its own, host clock (libfaketime unavailable)")

    old = tmp_path / "old"  # another folder: the engine keeps a probe's answer while its options are the same
    old.mkdir()
    (old / "bwrap").write_text("#!/bin/sh\necho bubblewrap 0.4.1\n")
    (old / "bwrap").chmod(0o755)
    configure(rule_runner, f"--bwrap-system-search-path=['{old}']")
    jail = rule_runner.request(Jail, [])
    assert not jail.isolation.jailed
    assert jail.isolation.description.endswith(
        f"and the system's {old}/bwrap (bubblewrap 0.4.1) is not bubblewrap 0.5.0 or later)"
    ), jail.isolation


@pytest.mark.parametrize("mode", ["auto", "required"])
def test_no_interpreter_for_the_constraints_is_a_reason_not_a_traceback(rule_runner: RuleRunner, mode: str) -> None:
    # The search runs beside the jail's tools and its failure is an answer, in the jail and in each process.
    write_repo(rule_runner)
    configure(
        rule_runner, f"--gate-isolation={mode}", "--python-interpreter-constraints=['CPython==2.1.*']", jailed=True
    )
    assert rule_runner.request(Jail, []).isolation.description.startswith("none (no interpreter for CPython==2.1.*")
    world = rule_runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    assert world.failure is not None and world.failure.code is Code.GENERATOR_FAILED, world.failure
    assert world.failure.expected == "an interpreter for CPython==2.1.*"
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is None and run.epoch.world.failure == world.failure


def test_manifest_check_catches_a_resealed_manifest(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "checks/manifest.json": rule_runner.read_file("checks/manifest.json").replace(
                "A refund never exceeds", "A refund rarely exceeds"
            )
        }
    )
    files = rule_runner.request(ManifestFiles, [ManifestFilesRequest(Address("checks", target_name="manifest"))])
    assert {r.code for r in files.check.reasons} == {Code.MANIFEST_DIGEST_MISMATCH, Code.PROPERTY_DIFFERS_FROM_CATALOG}


def test_missing_manifest_is_a_reason_not_a_crash(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    os.unlink(os.path.join(rule_runner.build_root, "checks/manifest.json"))
    files = rule_runner.request(ManifestFiles, [ManifestFilesRequest(Address("checks", target_name="manifest"))])
    assert [r.code for r in files.check.reasons] == [Code.ARTIFACT_MISSING]


def test_protected_set_comes_from_the_build_graph(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    protected = rule_runner.request(ProtectedPaths, [])
    assert {
        "fixtures/EPOCH",
        "fixtures/gen.py",
        "fixtures/base.json",
        "checks/manifest.json",
        "checks/catalog.yaml",
    } <= set(protected.paths)
    assert "src/payments_lib.py" not in protected.paths  # the code under test is not the oracle
    assert {"observations/", "freezes/"} <= set(protected.globs)
    assert not set(protected.globs) & set(protected.paths)
    guarded = protected.as_set()
    # What shapes how the oracle is read: the predicates' package (its __init__.py, helper modules), the
    # BUILD files whose __defaults__ reach an oracle target, git's ignore and attribute files above and
    # inside oracle folders, every configuration file Pants reads from the repository.
    for path in (
        "fixtures/BUILD",
        "checks/__init__.py",
        "checks/helpers.py",
        "checks/props.py",
        "checks/BUILD",
        "BUILD",
        "fixtures/.gitattributes",
        ".gitignore",
        "checks/deep/.gitignore",
        "pants.toml",
        ".pants.rc",
        "pants.ci.toml",
        ".env",
        ".pants.bootstrap",
        "freezes",
        "observations",
    ):
        assert guarded.matches(path), path
    for path in ("src/payments_lib.py", "src/BUILD", "docs/notes.md"):
        assert not guarded.matches(path), path


def test_a_pants_config_file_named_by_the_options_is_protected(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"ci/extra.toml": "", "ci/gate.rc": ""})
    configure(
        rule_runner,
        f"--pants-config-files=['{rule_runner.build_root}/ci/extra.toml']",
        "--pantsrc-files=['ci/gate.rc']",
    )
    guarded = rule_runner.request(ProtectedPaths, []).as_set()
    assert guarded.matches("ci/extra.toml") and guarded.matches("ci/gate.rc")


def test_a_package_shadowing_the_predicates_is_refused_before_the_replay(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    # A product package under another source root that becomes `checks.props` once roots are stripped.
    rule_runner.write_files(
        {
            "src/checks/props/__init__.py": "def refund_le_captured(record):\n    return True\n",
            "src/checks/props/BUILD": "python_sources()",
            "src/BUILD": 'python_sources(name="lib", dependencies=["src/checks/props"])',
        }
    )
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is None
    found = [r.found for r in run.reasons if r.code is Code.MODULE_SHADOWED]
    assert any("checks/props.py" in f and "src/checks/props/__init__.py" in f for f in found), found


def test_a_product_package_named_like_the_runner_is_refused(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "src/epoch_gate/__init__.py": "",
            "src/epoch_gate/replay.py": "def run(*a, **k):\n    pass\n",
            "src/epoch_gate/BUILD": "python_sources()",
            "src/BUILD": 'python_sources(name="lib", dependencies=["src/epoch_gate"])',
        }
    )
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is None and {r.path for r in run.reasons if r.code is Code.MODULE_SHADOWED} >= {
        "src/epoch_gate/__init__.py",
        "src/epoch_gate/replay.py",
    }


def test_a_catalog_predicate_outside_the_manifests_predicates_is_refused(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"checks/catalog.yaml": CATALOG.replace("checks.props:", "payments_lib:")})
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert Code.PREDICATE_UNPROTECTED in {r.code for r in run.reasons}


def test_replay_passes_and_is_reported_by_pants_test(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    target = rule_runner.get_target(Address("checks", target_name="props"))
    result = rule_runner.request(
        TestResult, [SampledPropertiesTestRequest.Batch("", (SampledPropertiesFieldSet.create(target),), None)]
    )
    assert result.exit_code == 0, result.stdout
    assert "pass  refund_le_captured (all 50 payments records)" in result.stdout


def test_a_replay_that_never_ends_is_stopped(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"src/payments_lib.py": "while True:\n    pass\n"})  # holds CI hostage
    configure(rule_runner, "--property-replay-timeout=3")
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is not None and run.result.exit_code != 0


def test_a_product_bug_fails_the_replay_with_a_witness(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner, refund_ok="refunded < 50")
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is not None and run.result.exit_code == 0  # evaluated: cached whatever it found
    target = rule_runner.get_target(Address("checks", target_name="props"))
    result = rule_runner.request(
        TestResult, [SampledPropertiesTestRequest.Batch("", (SampledPropertiesFieldSet.create(target),), None)]
    )
    assert result.exit_code == 1 and "fail  refund_le_captured" in result.stdout
    assert "\n[property-failed] refund_le_captured-" in result.stdout, result.stdout  # by id: no witness folder


def candidate_files(
    runner: RuleRunner, files: dict[str, str], irregular: tuple[tuple[str, str], ...] = ()
) -> CandidateFiles:
    """A candidate's files as trusted mode reads them from git: data, with no BUILD file loaded."""
    digest = runner.request(Digest, [CreateDigest([FileContent(p, t.encode()) for p, t in files.items()])])
    return CandidateFiles(digest, irregular)


def test_the_candidate_closure_is_what_the_suites_product_modules_import(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    candidate = candidate_files(
        rule_runner,
        {
            "src/payments_lib.py": "from pkg import rules\nimport helper\n",
            "src/helper.py": "",
            "src/pkg/__init__.py": "",
            "src/pkg/rules.py": "from . import tables\n",
            "src/pkg/tables.py": "",
            "src/pkg/rates.json": "{}",
            "src/pkg/fast.py": "",  # imported only by a name built at run time: ships with its package all the same
            "src/pkg/sub/__init__.py": "",  # a subpackage: ships with its package too
            "src/pkg/sub/engine.py": "",
            "src/other/__init__.py": "import helper\n",  # a package nothing imports: it does not ship
            "src/unrelated.py": "import helper\n",
            "src/epoch_gate/__init__.py": "",  # the runner's package: the trusted plugin's copy runs, never this
            "src/epoch_gate/runner/__init__.py": "",
            "src/epoch_gate/runner/judging.py": "def refused(*a):\n    return True\n",
            "checks/props.py": "def refund_le_captured(record, product):\n    return True\n",  # the candidate's oracle copy
        },
        irregular=(("src/pkg/link.py", "a symlink"), ("src/elsewhere/link.py", "a symlink")),
    )
    # The predicates import the runner's API and call the product by name: the closure starts from the
    # product modules the suite depends on in the trusted graph.
    predicates = "from epoch_gate.runner.judging import refused\n" + PREDICATES
    oracle = rule_runner.request(Digest, [CreateDigest([FileContent("checks/props.py", predicates.encode())])])
    closure = rule_runner.request(
        CandidateClosure,
        [CandidateClosureRequest(candidate, oracle, (("checks/props.py", "checks/props.py"),), ("payments_lib",))],
    )
    assert dict(closure.places) == {
        "src/payments_lib.py": "payments_lib.py",
        "src/helper.py": "helper.py",
        "src/pkg/__init__.py": "pkg/__init__.py",
        "src/pkg/rules.py": "pkg/rules.py",
        "src/pkg/tables.py": "pkg/tables.py",
        "src/pkg/rates.json": "pkg/rates.json",
        "src/pkg/fast.py": "pkg/fast.py",
        "src/pkg/sub/__init__.py": "pkg/sub/__init__.py",
        "src/pkg/sub/engine.py": "pkg/sub/engine.py",
    }
    assert [(r.code, r.path) for r in closure.refusals] == [(Code.PATH_NOT_REGULAR, "src/pkg/link.py")]
    # What the suite's imports do not reach stands in by its name: imported by a name built at run time, it
    # ends the replay instead of being missing (which code could fall back from).
    assert closure.stand_ins == ("elsewhere/__init__.py", "other/__init__.py", "unrelated.py")
    shipped = {c.path: c.content for c in rule_runner.request(DigestContents, [closure.stripped])}
    assert shipped["unrelated.py"] == unshipped_stub("unrelated") and shipped["other/__init__.py"] == unshipped_stub(
        "other"
    )


def test_trusted_mode_replays_the_candidates_code_not_the_working_trees(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)  # the working tree's product is right; the candidate's has the bug
    candidate = candidate_files(
        rule_runner,
        {
            "src/payments_lib.py": "def refundable(captured: int, refunded: int) -> bool:\n    return refunded < 50\n",
            "src/BUILD": "raise SystemExit('a BUILD file of the candidate is never loaded')\n",
        },
    )
    address = Address("checks", target_name="props")
    local = rule_runner.request(ReplayRun, [ReplayRequest(address)])
    trusted = rule_runner.request(ReplayRun, [ReplayRequest(address, candidate=candidate)])
    outcomes = [rule_runner.request(DigestContents, [run.output]) for run in (local, trusted)]
    summaries = [next(c.content for c in contents if c.path == "replay.json") for contents in outcomes]
    assert b'"outcome":"pass"' in summaries[0] and b'"outcome":"fail"' in summaries[1], summaries


def test_tailor_proposes_the_oracle_targets_from_a_generator_and_a_catalog(rule_runner: RuleRunner) -> None:
    rule_runner.write_files(
        {
            "fixtures/generate_orders.py": GENERATOR,
            "fixtures/orders/base.json": '{"count": 5}\n',
            "checks/orders_properties.py": PREDICATES,
            "checks/catalog.yaml": CATALOG,
        }
    )
    result = rule_runner.run_goal_rule(TailorGoal, args=["::"])
    assert result.exit_code == 0, result.stderr
    fixtures, checks = rule_runner.read_file("fixtures/BUILD"), rule_runner.read_file("checks/BUILD")
    assert (
        'epoch_fixture(\n    name="orders_epoch",\n    generator="generate_orders.py",\n'
        '    inputs=[\n        "orders/base.json",\n    ],\n)' in fixtures
    )
    assert 'property_manifest(\n    name="manifest",\n)' in checks
    assert (
        'sampled_properties(\n    name="properties",\n    fixture="fixtures:orders_epoch",\n'
        '    manifest="checks:manifest",\n    dependencies=[\n        "checks/orders_properties.py",\n'
        '    ],\n)'
    ) in checks

    # Declared now: a second run proposes none of them again.
    result = rule_runner.run_goal_rule(TailorGoal, args=["--check", "::"])
    assert "epoch_fixture" not in result.stdout + result.stderr
    assert "sampled_properties" not in result.stdout + result.stderr


def test_tailor_reads_an_existing_pin(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"fixtures/BUILD": "", "fixtures/gen.py": GENERATOR})
    result = rule_runner.run_goal_rule(TailorGoal, args=["fixtures::"])
    assert result.exit_code == 0, result.stderr
    proposed = rule_runner.read_file("fixtures/BUILD")
    assert "# From the pin of epoch e1." in proposed
    assert (
        'epoch_fixture(\n    name="gen_epoch",\n    generator="gen.py",\n    inputs=[\n        "base.json",\n'
        '    ],\n)' in proposed
    ), proposed
    rule_runner.write_files({"fixtures/BUILD": ""})
    rule_runner.run_goal_rule(TailorGoal, args=["--gate-tailor=false", "fixtures::"])
    assert "epoch_fixture" not in rule_runner.read_file("fixtures/BUILD")


def test_codeowners_cover_the_protected_set_and_check_the_file(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    refused = rule_runner.run_goal_rule(GateCodeowners, args=[])
    assert refused.exit_code == 1 and "refused [artifact-missing]" in refused.stderr
    result = rule_runner.run_goal_rule(GateCodeowners, args=["--gate-codeowners-owners=['@org/oracle']"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    protected = rule_runner.request(ProtectedPaths, [])
    assert lines[1:-1] == [f"/{entry} @org/oracle" for entry in protected.as_set().sorted_entries()]
    assert "/fixtures/EPOCH @org/oracle" in lines and "/observations/ @org/oracle" in lines

    rule_runner.write_files({".github/CODEOWNERS": "* @everyone\n" + result.stdout})
    check = ["--gate-codeowners-owners=['@org/oracle']", "--gate-codeowners-check=.github/CODEOWNERS"]
    assert rule_runner.run_goal_rule(GateCodeowners, args=check).exit_code == 0
    rule_runner.write_files(
        {
            "checks/extra_properties.py": "",
            "checks/BUILD": rule_runner.read_file("checks/BUILD").replace(
                'predicates=["props.py"]', 'predicates=["props.py", "extra_properties.py"]'
            ),
        }
    )
    stale = rule_runner.run_goal_rule(GateCodeowners, args=check)
    assert stale.exit_code == 1 and "refused [artifact-malformed] .github/CODEOWNERS" in stale.stderr


def test_codeowners_group_a_suites_oracle_under_its_own_owners(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "checks/BUILD": rule_runner.read_file("checks/BUILD").replace(
                'dependencies=[":preds", "src:lib"])',
                'dependencies=[":preds", "src:lib"], oracle_owners=["org/payments"])',
            )
        }
    )
    result = rule_runner.run_goal_rule(GateCodeowners, args=["--gate-codeowners-owners=['@org/oracle']"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    group = lines[lines.index("# suite checks:props") + 1 : -1]
    assert group == [
        f"/{path} @org/oracle @org/payments"
        for path in sorted(
            [
                "checks/BUILD",
                "checks/catalog.yaml",
                "checks/manifest.json",
                "checks/props.py",
                "fixtures/BUILD",
                "fixtures/EPOCH",
                "fixtures/base.json",
                "fixtures/gen.py",
            ]
        )
    ]


def test_tailor_proposes_one_suite_per_named_pair_in_a_monorepo(rule_runner: RuleRunner) -> None:
    rule_runner.write_files(
        {
            "fixtures/payments/generate_payments.py": GENERATOR,
            "fixtures/payments/base.json": '{"count": 5}\n',
            "fixtures/inventory/generate_inventory.py": GENERATOR,
            "fixtures/inventory/base.json": '{"count": 5}\n',
            "checks/payments/catalog.yaml": CATALOG,
            "checks/inventory/catalog.yaml": CATALOG,
        }
    )
    result = rule_runner.run_goal_rule(TailorGoal, args=["::"])
    assert result.exit_code == 0, result.stderr
    for name in ("payments", "inventory"):
        build = rule_runner.read_file(f"checks/{name}/BUILD")
        assert (
            f'sampled_properties(\n    name="properties",\n    fixture="fixtures/{name}:{name}_epoch",\n'
            f'    manifest="checks/{name}:manifest",\n)'
        ) in build, build


SEEDED = GENERATOR.replace(
    'parser.add_argument("--out")', 'parser.add_argument("--out")\nparser.add_argument("--seed")'
).replace('"refunded": i % 7 * 10}', '"refunded": (i + (int(args.seed[:4], 16) if args.seed else 0)) % 7 * 10}')


def test_a_held_out_replay_draws_its_world_from_its_suites_seed_or_says_why_not(rule_runner: RuleRunner) -> None:
    from epoch_gate.evidence import held_out

    write_repo(rule_runner)  # its generator takes no --seed
    address, tree_key = Address("checks", target_name="props"), held_out.draw_key(b"k" * 32, "0" * 40)
    seed = held_out.seed(tree_key, "checks:props", "e1")
    run = rule_runner.request(ReplayRun, [ReplayRequest(address, held_out_key=tree_key)])
    assert run.result is None and run.held_out is not None and run.held_out.seed_sha256 == held_out.seed_sha256(seed)
    assert [(r.code, r.path, r.expected, r.found) for r in run.refusals] == [
        (Code.HELD_OUT_UNAVAILABLE, "fixtures/gen.py", "a held-out world from --seed", "exit 2")
    ]

    write_repo(rule_runner, pinned_generator=SEEDED)
    rule_runner.write_files({"fixtures/gen.py": SEEDED})
    pinned = rule_runner.request(ReplayRun, [ReplayRequest(address)])
    drawn = rule_runner.request(ReplayRun, [ReplayRequest(address, held_out_key=tree_key)])
    assert pinned.result is not None and drawn.result is not None and drawn.result.exit_code == 0, drawn.refusals
    assert drawn.held_out is not None and dict(drawn.held_out.world.records) == {"payments": 50}
    assert drawn.held_out.world.world_sha256 not in (None, pinned.epoch.world.world_sha256)
    # The seed is the process's argument; the key, and the tree's draw key, are in nothing it was given.
    world = rule_runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"), seed)])
    assert world == drawn.held_out.world
    assert tree_key not in repr(ReplayRequest(address, held_out_key=tree_key))
    assert seed not in repr(FixtureWorldRequest(Address("fixtures", target_name="epoch"), seed))
