"""Rule tests of `codeowners.py`: the `gate-codeowners` goal."""

from __future__ import annotations

from pants.engine.rules import QueryRule
from pants.testutil.rule_runner import RuleRunner

from epoch_gate_pants import codeowners, fixture, isolation, protected, suite
from epoch_gate_pants.codeowners import GateCodeowners
from epoch_gate_pants.protected import ProtectedPaths
from epoch_gate_pants.rule_harness import write_repo

MODULES = (codeowners, fixture, isolation, protected, suite)
QUERIES = (QueryRule(ProtectedPaths, []),)


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
