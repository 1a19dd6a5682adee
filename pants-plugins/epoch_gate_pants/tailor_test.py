"""Rule tests of `tailor.py`: the oracle targets `pants tailor` proposes."""

from __future__ import annotations

from pants.core.goals.tailor import TailorGoal
from pants.testutil.rule_runner import RuleRunner

from epoch_gate_pants import tailor
from epoch_gate_pants.gate_harness import GENERATOR
from epoch_gate_pants.rule_harness import CATALOG, PREDICATES, write_repo

MODULES = (tailor,)
QUERIES = ()


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
