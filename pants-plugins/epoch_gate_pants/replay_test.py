"""Rule tests of `replay.py`: what a suite's replay ships, refuses and reports."""

from __future__ import annotations

import json

import pytest
from pants.build_graph.address import Address
from pants.engine.fs import CreateDigest, Digest, DigestContents
from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate.reasons import Code
from epoch_gate.text import last_line
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints

from epoch_gate_pants import candidate, fixture, isolation, replay, runner, suite
from epoch_gate_pants.fixture import FixtureWorld, FixtureWorldRequest
from epoch_gate_pants.gate_harness import GENERATOR, configure
from epoch_gate_pants.isolation import Jail
from epoch_gate_pants.replay import ReplayRequest, ReplayRun
from epoch_gate_pants.rule_harness import CATALOG, PREDICATES, candidate_files, write_repo

MODULES = (candidate, fixture, isolation, replay, runner, suite)
QUERIES = (
    QueryRule(ReplayRun, [ReplayRequest]),
    QueryRule(Jail, [InterpreterConstraints]),
    QueryRule(FixtureWorld, [FixtureWorldRequest]),
    QueryRule(DigestContents, [Digest]),
    QueryRule(Digest, [CreateDigest]),
)


@pytest.mark.parametrize("mode", ["auto", "required"])
def test_no_interpreter_for_the_constraints_is_a_reason_not_a_traceback(rule_runner: RuleRunner, mode: str) -> None:
    # The search runs beside the jail's tools and its failure is an answer, in the jail and in each process.
    write_repo(rule_runner)
    configure(
        rule_runner, f"--gate-isolation={mode}", "--python-interpreter-constraints=['CPython==2.1.*']", jailed=True
    )
    assert rule_runner.request(Jail, [InterpreterConstraints(["CPython==2.1.*"])]).isolation.description.startswith(
        "none (no interpreter for CPython==2.1.*"
    )
    world = rule_runner.request(FixtureWorld, [FixtureWorldRequest(Address("fixtures", target_name="epoch"))])
    assert world.failure is not None and world.failure.code is Code.GENERATOR_FAILED, world.failure
    assert world.failure.expected == "an interpreter for CPython==2.1.*"
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is None and run.epoch.world.failure == world.failure


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


def test_a_replay_that_never_ends_is_stopped(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"src/payments_lib.py": "while True:\n    pass\n"})  # holds CI hostage
    configure(rule_runner, "--property-replay-timeout=3")
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is not None and run.result.exit_code != 0
    said = run.result.stdout + run.result.stderr
    assert b"Exceeded timeout of 3" in said, said[-2000:]  # Pants stopped it, not a crash


def test_in_the_jail_the_clock_stops_for_the_product_and_not_for_its_judge(rule_runner: RuleRunner) -> None:
    """The product's child reads the stopped clock; the runner that judges it keeps the host's (it never
    forks under libfaketime), and a predicate is oracle code: it reads the host's too."""
    configure(rule_runner, jailed=True)
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "src/payments_lib.py": "import time\n\ndef refundable(captured, refunded):\n    return time.time()\n",
            "checks/props.py": (
                "import time\n\ndef refund_le_captured(record, product):\n"
                "    return product.payments_lib.refundable(0, 0) == 946684800.0 and time.time() > 1.7e9\n"
            ),
        }
    )
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    summary = _summary(rule_runner, run)
    assert b'"outcome":"pass"' in summary, json.loads(summary)["properties"]


def _summary(runner: RuleRunner, run: ReplayRun) -> bytes:
    contents = runner.request(DigestContents, [run.output])
    return next((c.content for c in contents if c.path == "replay.json"), b"")


def test_the_replay_runs_on_the_interpreter_its_targets_constrain_it_to(rule_runner: RuleRunner) -> None:
    """A product on a newer CPython than [python].interpreter_constraints (it imports `tomllib`, 3.11's)
    is judged on the interpreter its targets name, in its jail; the suite's targets decide it all at once,
    as for Pants' own goals, so a predicate on another CPython leaves no interpreter to judge on."""
    configure(rule_runner, jailed=True)
    write_repo(rule_runner)
    newer = '["CPython==3.11.*"]'
    rule_runner.write_files(
        {
            "src/BUILD": f'python_sources(name="lib", interpreter_constraints={newer})',
            "src/payments_lib.py": (
                "import sys, tomllib\n\ndef refundable(captured, refunded):\n"
                "    return sys.version_info[:2] == (3, 11) and refunded <= captured\n"
            ),
            "checks/props.py": PREDICATES + "\nassert __import__('sys').version_info[:2] == (3, 11)\n",
            "checks/BUILD": rule_runner.read_file("checks/BUILD").replace(
                'sources=["props.py"])', f'sources=["props.py"], interpreter_constraints={newer})'
            ),
        }
    )
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    summary = _summary(rule_runner, run)
    assert b'"outcome":"pass"' in summary, json.loads(summary)["properties"]

    rule_runner.write_files(
        {"checks/BUILD": rule_runner.read_file("checks/BUILD").replace(f", interpreter_constraints={newer}", "")}
    )
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    (reason,) = run.reasons
    assert (reason.code, reason.expected) == (
        Code.REPLAY_FAILED,
        "an interpreter for CPython==3.11.*,==3.9.*",
    ), reason

    # Constraints on two implementations do not merge at all: a reason too, never a traceback
    rule_runner.write_files({"src/BUILD": 'python_sources(name="lib", interpreter_constraints=["PyPy>=3.9"])'})
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    (reason,) = run.reasons
    assert (reason.code, reason.expected) == (
        Code.REPLAY_FAILED,
        "interpreter constraints the suite's targets agree on",
    )


@pytest.mark.parametrize(
    "merged, shortest",
    [
        (["CPython<3.12,==3.9.*,>=3.9"], ["CPython==3.9.*"]),  # the core's range with a service's series
        (["CPython==3.9.*,!=3.9.5"], ["CPython!=3.9.5,==3.9.*"]),  # a release left out: as it was
        (["CPython==3.9.*,<3.9.10"], ["CPython<3.9.10,==3.9.*"]),
        (["CPython>=3.9,<3.12"], ["CPython<3.12,>=3.9"]),  # no one series: as it was
        (["CPython==3.11.*,==3.9.*"], ["CPython==3.11.*,==3.9.*"]),  # none: still none
    ],
)
def test_a_suites_constraints_are_written_the_shortest_way_for_the_same_interpreters(
    merged: list[str], shortest: list[str]
) -> None:
    assert [str(r) for r in replay._shortest(InterpreterConstraints(merged))] == shortest


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


SET_UP_PRODUCT = """SET_UP = []


def set_up():
    SET_UP.append(True)


def set_up_badly():
    print("refused [nothing] by the product: " + "x" * 400, end="", flush=True)  # the reason's line stays the runner's
    raise LookupError("no settings")


def refundable(captured: int, refunded: int) -> bool:
    if not SET_UP:
        raise LookupError("the app is not set up")
    return refunded <= captured
"""


def test_the_suites_product_set_up_is_called_before_its_properties(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    rule_runner.write_files({"src/payments_lib.py": SET_UP_PRODUCT})
    suite = rule_runner.read_file("checks/BUILD")

    def replayed(setup: str) -> tuple[int, bytes, str]:
        with_setup = f'"src:lib"], product_setup="{setup}")' if setup else '"src:lib"])'
        rule_runner.write_files({"checks/BUILD": suite.replace('"src:lib"])', with_setup)})
        run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
        assert run.result is not None
        contents = {c.path: c.content for c in rule_runner.request(DigestContents, [run.output])}
        return run.result.exit_code, contents.get("replay.json", b""), run.result.stderr.decode()

    exit_code, summary, _ = replayed("")
    assert exit_code == 0 and b'"outcome":"fail"' in summary  # the product raised on every record
    exit_code, summary, _ = replayed("payments_lib:set_up")
    assert exit_code == 0 and b'"outcome":"pass"' in summary, summary
    exit_code, summary, stderr = replayed("payments_lib:set_up_badly")
    assert exit_code == 1 and summary == b"", stderr
    assert last_line(stderr.encode()).startswith(  # what the gate's reason shows
        "refused [replay-failed] checks:props: the product's set-up payments_lib:set_up_badly raised LookupError: "
        "no settings"
    ), stderr


@pytest.mark.parametrize("children", [1, 2])
def test_the_replay_starts_as_many_children_as_configured(rule_runner: RuleRunner, children: int) -> None:
    """`[property-replay].children` children, whatever the load (so the answers of a product that keeps
    state across records do not depend on it): the product's set-up runs once in each, and says so."""
    write_repo(rule_runner)
    set_up = 'def set_up():\n    import os\n    print("set up in", os.getpid())\n'
    rule_runner.write_files(
        {
            "src/payments_lib.py": rule_runner.read_file("src/payments_lib.py") + set_up,
            "checks/BUILD": rule_runner.read_file("checks/BUILD").replace(
                '"src:lib"])', '"src:lib"], product_setup="payments_lib:set_up")'
            ),
        }
    )
    configure(rule_runner, f"--property-replay-children={children}")
    run = rule_runner.request(ReplayRun, [ReplayRequest(Address("checks", target_name="props"))])
    assert run.result is not None and run.result.exit_code == 0, run.result
    started = {line for line in run.result.stderr.decode().splitlines() if line.startswith("set up in ")}
    assert len(started) == children, run.result.stderr.decode()[-2000:]


def test_a_module_whose_name_the_runner_cannot_list_is_refused() -> None:
    """The runner's list of the product's top-level names is comma-separated: a name with a comma would
    reach the child as two others, and an import of it would fail where production's finds it."""
    from pants.engine.fs import EMPTY_DIGEST

    from epoch_gate_pants.candidate import CandidateClosure

    closure = CandidateClosure((), EMPTY_DIGEST, stand_ins=("x,y/__init__.py", "fine.py"))
    reasons = replay._unlisted({"src/a,b.py": "a,b.py", "src/ok.py": "ok.py"}, closure)
    assert [(r.code, r.path, r.found) for r in reasons] == [
        (Code.MODULE_SHADOWED, "(stand-in) x,y/__init__.py", "x,y"),
        (Code.MODULE_SHADOWED, "src/a,b.py", "a,b"),
    ]


def test_held_out_properties_are_drawn_outside_the_manifest_and_judged_in_the_replay(rule_runner: RuleRunner) -> None:
    from epoch_gate.evidence import held_out

    extra = (
        "  - name: refund_is_boolean\n    bound: payments\n    predicate: checks.props:refund_is_boolean\n"
        "    description: The product answers with a boolean.\n"
    )
    write_repo(rule_runner)
    predicates = PREDICATES + (
        "\n\ndef refund_is_boolean(record, product) -> bool:\n"
        "    return isinstance(product.payments_lib.refundable(1, 0), bool)\n"
    )
    rule_runner.write_files({"checks/catalog.yaml": CATALOG + extra, "checks/props.py": predicates})
    address, tree_key = Address("checks", target_name="props"), held_out.draw_key(b"k" * 32, "0" * 40)
    run = rule_runner.request(ReplayRun, [ReplayRequest(address, property_key=tree_key)])
    assert run.draw is not None and run.draw.names == ("refund_is_boolean",) and run.draw.count == "4"
    seed = held_out.property_seed(tree_key, "checks:props", "e1")
    assert run.draw.seed_sha256 == held_out.seed_sha256(seed) and tree_key not in repr(run.draw)
    assert run.result is not None and run.result.exit_code == 0, run.result.stderr
    replayed = json.loads(
        next(c.content for c in rule_runner.request(DigestContents, [run.output]) if c.path == "replay.json")
    )
    assert [p["name"] for p in replayed["properties"]] == ["refund_le_captured", "refund_is_boolean"]
    # None asked for: said so, nothing drawn
    build = (
        'python_sources(name="preds", sources=["props.py"])\n'
        'property_manifest(name="manifest", predicates=["props.py"])\n'
        'sampled_properties(name="props", fixture="fixtures:epoch", manifest=":manifest", held_out_properties=0, '
        'dependencies=[":preds", "src:lib"])'
    )
    rule_runner.write_files({"checks/BUILD": build})
    none = rule_runner.request(ReplayRun, [ReplayRequest(address, property_key=tree_key)])
    assert none.draw == held_out.PropertyDraw(False, "held_out_properties is 0") and none.drawn == ()
    # A catalog property over a bound the world lacks: whatever a draw picks, the suite says so and closes
    rule_runner.write_files({"checks/catalog.yaml": CATALOG + extra.replace("bound: payments", "bound: orders")})
    unbound = rule_runner.request(ReplayRun, [ReplayRequest(address, property_key=tree_key)])
    assert unbound.result is None and [(r.code, r.path, r.found) for r in unbound.refusals] == [
        (Code.BOUND_MISSING, "checks/catalog.yaml", "refund_is_boolean (over orders)")
    ]
