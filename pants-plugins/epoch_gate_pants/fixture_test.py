"""Rule tests of `fixture.py`: loading an epoch fixture, generating its world, checking its pin."""

from __future__ import annotations

from pathlib import Path

from pants.build_graph.address import Address
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.evidence.hashing import sha256_bytes
from epoch_gate.reasons import Code
from epoch_gate_pants import fixture, isolation
from epoch_gate_pants.fixture import EpochCheck, EpochCheckRequest, FixtureWorld, FixtureWorldRequest
from epoch_gate_pants.gate_harness import GENERATOR
from epoch_gate_pants.rule_harness import new_rule_runner, write_repo

MODULES = (fixture, isolation)
QUERIES = (QueryRule(EpochCheck, [EpochCheckRequest]), QueryRule(FixtureWorld, [FixtureWorldRequest]))


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


def test_world_is_the_same_digest_on_a_rerun(tmp_path: Path, named_caches: Path) -> None:
    # Asked twice of one engine, the world is memoized (and then process-cached): that is no rerun. Each
    # run here is a new RuleRunner over its own store, so the generator really runs once in each.
    def worlds(store: str) -> tuple[FixtureWorld, FixtureWorld]:
        runner = new_rule_runner(tmp_path / store, named_caches, MODULES, QUERIES)  # named caches hold no results
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
