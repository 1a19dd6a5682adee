"""Rule tests of the inferred `fixture` / `manifest` edges: what `dependencies`, `dependents` and
`--changed-dependents` see, and that a string naming no target of the right type adds no edge."""

from __future__ import annotations

import re

import pytest
from pants.backend.project_info.dependents import Dependents, DependentsRequest
from pants.backend.python.dependency_inference import module_mapper
from pants.backend.python.target_types import PythonSourcesGeneratorTarget, PythonSourceTarget
from pants.backend.python.target_types_rules import rules as python_target_types_rules
from pants.backend.project_info.dependents import rules as dependents_rules
from pants.build_graph.address import Address
from pants.core import register as core_backend
from pants.engine.addresses import Addresses
from pants.engine.internals.graph import Owners, OwnersRequest
from pants.engine.internals.scheduler import ExecutionError
from pants.engine.rules import QueryRule
from pants.engine.target import DependenciesRequest, TransitiveTargets, TransitiveTargetsRequest
from pants.testutil.rule_runner import RuleRunner

from epoch_gate_pants import edges
from epoch_gate_pants.target_types import SampledPropertiesDependenciesField, target_types

FIXTURE = Address("fixtures", target_name="epoch")
MANIFEST = Address("checks", target_name="manifest")
SUITE = Address("checks", target_name="props")


@pytest.fixture
def rule_runner() -> RuleRunner:
    return RuleRunner(
        rules=[
            *edges.rules(),
            *dependents_rules(),
            *module_mapper.rules(),
            *python_target_types_rules(),
            QueryRule(Addresses, [DependenciesRequest]),
            QueryRule(TransitiveTargets, [TransitiveTargetsRequest]),
            QueryRule(Dependents, [DependentsRequest]),
            QueryRule(Owners, [OwnersRequest]),
        ],
        target_types=[*target_types(), *core_backend.target_types(), PythonSourcesGeneratorTarget, PythonSourceTarget],
    )


def write_repo(runner: RuleRunner, fixture: str = "fixtures:epoch", manifest: str = ":manifest") -> None:
    runner.write_files(
        {
            "fixtures/BUILD": 'epoch_fixture(name="epoch", generator="gen.py")\nresource(name="gen", source="gen.py")',
            "fixtures/gen.py": "",
            "fixtures/EPOCH": "{}",
            "checks/BUILD": (
                'property_manifest(name="manifest")\nresource(name="catalog", source="catalog.yaml")\n'
                f'sampled_properties(name="props", fixture="{fixture}", manifest="{manifest}", '
                'dependencies=[":catalog"])'
            ),
            "checks/catalog.yaml": "",
            "checks/manifest.json": "{}",
        }
    )


def dependencies(runner: RuleRunner) -> set[Address]:
    target = runner.get_target(SUITE)
    return set(runner.request(Addresses, [DependenciesRequest(target[SampledPropertiesDependenciesField])]))


def test_fixture_and_manifest_are_dependencies(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner)
    assert dependencies(rule_runner) == {FIXTURE, MANIFEST, Address("checks", target_name="catalog")}
    closure = rule_runner.request(TransitiveTargets, [TransitiveTargetsRequest([SUITE])]).closure
    assert {FIXTURE, MANIFEST} <= {t.address for t in closure}


@pytest.mark.parametrize(
    "path, owner",
    [
        ("fixtures/EPOCH", FIXTURE),
        ("fixtures/gen.py", FIXTURE),
        ("checks/manifest.json", MANIFEST),
        ("checks/catalog.yaml", MANIFEST),
    ],
)
def test_a_changed_oracle_file_reaches_the_suite(rule_runner: RuleRunner, path: str, owner: Address) -> None:
    # What `--changed-since --changed-dependents` does: the file's owners, then their dependents.
    write_repo(rule_runner)
    assert owner in rule_runner.request(Owners, [OwnersRequest((path,))])
    found = rule_runner.request(Dependents, [DependentsRequest([owner], transitive=True, include_roots=False)])
    assert list(found) == [SUITE]


@pytest.mark.parametrize(
    "fixture, manifest",
    [
        ("fixtures:missing", ":manifest"),  # no such target
        ("nowhere:epoch", ":manifest"),  # no such folder
        ("a:b:c", ":manifest"),  # not an address
        ("fixtures:gen", ":manifest"),  # a target of another type
        ("fixtures:epoch", "fixtures:epoch"),
    ],
)
def test_an_unresolvable_string_adds_no_edge(rule_runner: RuleRunner, fixture: str, manifest: str) -> None:
    # The gate reports it as a reason: the build graph stays loadable so that it can.
    write_repo(rule_runner, fixture=fixture, manifest=manifest)
    expected = {Address("checks", target_name="catalog")}
    expected |= {FIXTURE} if fixture == "fixtures:epoch" else {MANIFEST}
    assert dependencies(rule_runner) == expected


def test_the_product_the_predicates_call_is_a_dependency(rule_runner: RuleRunner) -> None:
    """The predicates never import the product: each `product.<module>...` name they spell is an edge to
    the owner of its longest module prefix; a name the graph does not own (the standard library's) is none."""
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "checks/props_properties.py": (
                "def p(record, product):\n    pay = product.shop.pay\n"
                "    return pay.refund(product.shop.money.Money.zero('EUR')) and "
                "product.fractions.Fraction(1) is not None\n"
            ),
            "shop/BUILD": "python_sources()",
            "shop/__init__.py": "",
            "shop/pay.py": "",
            "shop/money.py": "",
            "shop/unused.py": "",
        }
    )
    assert dependencies(rule_runner) == {
        FIXTURE,
        MANIFEST,
        Address("checks", target_name="catalog"),
        Address("shop", relative_file_path="pay.py"),
        Address("shop", relative_file_path="money.py"),
    }


def test_the_products_set_up_is_a_dependency_even_without_a_manifest(rule_runner: RuleRunner) -> None:
    write_repo(rule_runner, manifest="checks:missing")
    rule_runner.write_files(
        {
            "checks/BUILD": rule_runner.read_file("checks/BUILD").replace(
                'dependencies=[":catalog"])', 'dependencies=[":catalog"], product_setup="shop.replay:set_up")'
            ),
            "shop/BUILD": "python_sources()",
            "shop/__init__.py": "",
            "shop/replay.py": "",
            "shop/unused.py": "",
        }
    )
    assert dependencies(rule_runner) == {
        FIXTURE,
        Address("checks", target_name="catalog"),
        Address("shop", relative_file_path="replay.py"),
    }


@pytest.mark.parametrize("setup", ["shop.replay", "shop.replay:", "shop/replay.py:set_up", "shop..replay:set_up"])
def test_a_product_set_up_that_is_not_module_function_is_refused_naming_the_field(
    rule_runner: RuleRunner, setup: str
) -> None:
    write_repo(rule_runner)
    rule_runner.write_files(
        {
            "checks/BUILD": rule_runner.read_file("checks/BUILD").replace(
                'dependencies=[":catalog"])', f'dependencies=[":catalog"], product_setup="{setup}")'
            )
        }
    )
    with pytest.raises(ExecutionError, match=f"The 'product_setup' field of checks:props is '{re.escape(setup)}'"):
        rule_runner.get_target(SUITE)
