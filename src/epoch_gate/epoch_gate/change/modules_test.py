from __future__ import annotations

from epoch_gate.change.modules import module_name, shadowing
from epoch_gate.reasons import Code

RESERVED = ("epoch_gate", "__world")


def test_module_names() -> None:
    assert module_name("checks/orders_properties.py") == "checks.orders_properties"
    assert module_name("checks/orders_properties/__init__.py") == "checks.orders_properties"
    assert module_name("checks/catalog.yaml") is None


def test_a_package_shadowing_a_module_from_another_root_is_closed() -> None:
    files = {
        "checks/orders_properties.py": "checks/orders_properties.py",
        "src/orders/checks/orders_properties/__init__.py": "checks/orders_properties/__init__.py",
        "src/orders/orders/money.py": "orders/money.py",
    }
    (reason,) = shadowing(files, RESERVED)
    assert reason.code is Code.MODULE_SHADOWED
    assert "checks/orders_properties.py" in reason.found and "src/orders/checks" in reason.found


def test_the_same_module_path_under_two_roots_is_closed() -> None:
    files = {"a/orders/money.py": "orders/money.py", "b/orders/money.py": "orders/money.py"}
    assert [r.code for r in shadowing(files, RESERVED)] == [Code.MODULE_SHADOWED]


def test_nothing_but_the_runner_provides_its_package_or_reserved_folders() -> None:
    for stripped in ("epoch_gate/__init__.py", "epoch_gate.py", "epoch_gate/replay.py", "__world/orders.jsonl"):
        reasons = shadowing({f"src/x/{stripped}": stripped}, RESERVED)
        assert [r.code for r in reasons] == [Code.MODULE_SHADOWED], stripped


def test_distinct_modules_pass() -> None:
    files = {
        "checks/__init__.py": "checks/__init__.py",
        "checks/p.py": "checks/p.py",
        "src/orders/orders/__init__.py": "orders/__init__.py",
        "src/orders/orders/m.py": "orders/m.py",
    }
    assert shadowing(files, RESERVED) == []


def test_a_catalog_predicate_outside_the_manifests_files_is_closed() -> None:
    from epoch_gate.evidence.catalog import Catalog, Property
    from epoch_gate.change.modules import unowned_predicates

    catalog = Catalog(
        (Property("a", "orders", "checks.orders_properties:a", "."), Property("b", "orders", "orders.helpers:b", "."))
    )
    (reason,) = unowned_predicates(catalog, ["checks/orders_properties.py"], "checks/catalog.yaml")
    assert reason.code is Code.PREDICATE_UNPROTECTED and reason.found == "orders.helpers"
    assert unowned_predicates(catalog, ["checks/orders_properties.py", "orders/helpers.py"], "c") == []


def test_extension_and_bytecode_modules_count_as_providers() -> None:
    assert module_name("checks/orders_properties.cpython-39-x86_64-linux-gnu.so") == "checks.orders_properties"
    assert module_name("checks/__init__.cpython-39-x86_64-linux-gnu.so") == "checks"
    assert module_name("checks/p.pyc") == "checks.p"
    files = {
        "checks/orders_properties.py": "checks/orders_properties.py",
        "src/orders/checks/orders_properties.cpython-39-x86_64-linux-gnu.so": "checks/orders_properties.cpython-39-x86_64-linux-gnu.so",
    }
    assert Code.MODULE_SHADOWED in {r.code for r in shadowing(files, RESERVED)}


def test_only_the_oracle_package_provides_its_top_level_name() -> None:
    oracle = {"checks": "checks/"}
    files = {
        "checks/orders_properties.py": "checks/orders_properties.py",
        "src/orders/checks/extra.py": "checks/extra.py",
        "src/orders/checks/data.bin": "checks/data.bin",
        "src/orders/orders/m.py": "orders/m.py",
    }
    reasons = shadowing(files, RESERVED, oracle)
    assert sorted(r.path for r in reasons) == ["src/orders/checks/data.bin", "src/orders/checks/extra.py"]
    assert shadowing({"m_properties.py": "m_properties.py"}, RESERVED, {"m_properties": "m_properties.py"}) == []


def test_any_path_placed_twice_is_refused() -> None:
    files = {"a/data/x.json": "data/x.json", "b/data/x.json": "data/x.json"}
    (reason,) = shadowing(files, RESERVED)
    assert "a/data/x.json" in reason.found and "b/data/x.json" in reason.found
