from __future__ import annotations

from epoch_gate.closure import ImportGraph, closure, dotted_strings, imported


def test_import_forms() -> None:
    source = b"""
import os, a.b as ab
from c import d, e as f
from .sibling import g
from .. import h
from ...deep import x
if True: import guarded
try:
    from lazy import (m,
        n)
except ImportError:
    pass
text = "import not_an_import"
# import commented
def f():
    import inner; import second
"""
    found = imported(source, "pkg.sub.mod", is_package=False)
    assert {"os", "a.b", "c", "c.d", "c.e", "pkg.sub.sibling", "pkg.sub.sibling.g", "pkg", "pkg.h",
            "guarded", "lazy", "lazy.m", "lazy.n", "inner", "second"} <= found
    assert "not_an_import" not in found and "commented" not in found
    assert not any(name.startswith("deep") for name in found)  # beyond the top: not resolvable


def test_relative_import_in_a_package_init() -> None:
    assert imported(b"from . import money\n", "orders", is_package=True) == {"orders", "orders.money"}


def test_a_file_that_does_not_tokenize_keeps_what_was_read() -> None:
    assert "a" in imported(b"import a\nx = '''unterminated\n", "m", is_package=False)


def test_deep_nesting_does_not_recurse() -> None:
    assert imported(b"import a\nx = " + b"(" * 100_000 + b"\n", "m", is_package=False) == {"a"}


def test_closure_follows_imports_and_enclosing_packages() -> None:
    sources = {
        "orders/__init__.py": b"",
        "orders/totals.py": b"from orders.money import Money\nimport yaml\n",
        "orders/money.py": b"from . import currency\n",
        "orders/currency.py": b"",
        "orders/unused.py": b"import orders.totals\n",
        "other/__init__.py": b"",
    }
    modules = {"orders": ["orders/__init__.py"], "orders.totals": ["orders/totals.py"],
               "orders.money": ["orders/money.py"], "orders.currency": ["orders/currency.py"],
               "orders.unused": ["orders/unused.py"], "other": ["other/__init__.py"]}
    name_of = {path: name for name, (path,) in modules.items()}
    reads: list[str] = []

    def imports(path: str) -> set[str]:
        reads.append(path)
        return imported(sources[path], name_of[path], path.endswith("__init__.py"))

    assert closure({"orders.totals", "decimal"}, lambda name: modules.get(name, ()), imports) == {
        "orders/__init__.py", "orders/totals.py", "orders/money.py", "orders/currency.py"}
    assert sorted(reads) == sorted(set(reads))  # each file read once


def test_two_providers_of_a_module_are_both_reached() -> None:
    modules = {"m": ["a/m.py", "b/m.py"]}
    assert closure({"m"}, lambda name: modules.get(name, ()), lambda path: ()) == {"a/m.py", "b/m.py"}


def test_dotted_strings_name_modules_but_nothing_else() -> None:
    source = b"""
import importlib
fast = importlib.import_module("pkg.plugins.fast")
slow = importlib.import_module(f"pkg.plugins.{name}")
url = "example.com/a.b"
raw = r'pkg.raw'
"""
    assert dotted_strings(source) == {"pkg.plugins.fast", "pkg.raw"}


GRAPH = {  # sandbox path -> bytes (None: a file git stores as something else, a symlink say)
    "app/__init__.py": b"",
    "app/rules.py": b"from app.tables import RATES\n",
    "app/tables.py": b"RATES = {}\n",
    "app/rates.json": b"{}",
    "app/fast.py": b"import app.deep.engine\n",  # not imported by name, but it ships with its folder
    "app/deep/__init__.py": b"",
    "app/deep/engine.py": b"",
    "app/plugins/__init__.py": b"",
    "app/plugins/loaded.py": b"",
    "app/plugins/unused.py": b"",
    "app/loader.py": b"import importlib\nPLUGIN = importlib.import_module('app.plugins.loaded')\n",
    "other/__init__.py": b"",
    "other/link.py": None,
    "checks/props.py": b"import app.rules\n",  # a candidate's copy of the oracle: never followed
    "helper.py": b"",
    "lonely.py": b"",
}


def graph() -> ImportGraph:
    return ImportGraph({path: path for path in GRAPH}, {p: b for p, b in GRAPH.items() if b is not None})


def test_a_reached_module_ships_its_whole_package_folder_and_what_that_imports() -> None:
    reached = graph().reach({"app.rules", "helper"}, excluded={"checks"})
    assert reached == {"app/__init__.py", "app/rules.py", "app/tables.py", "app/rates.json", "app/fast.py",
                       "app/loader.py", "app/deep/__init__.py", "app/deep/engine.py",
                       "app/plugins/__init__.py", "app/plugins/loaded.py", "app/plugins/unused.py", "helper.py"}
    assert "lonely.py" not in reached  # a top-level module ships alone, not with the source root's others


def test_a_folder_no_suite_reaches_does_not_ship() -> None:
    assert graph().reach({"helper"}) == {"helper.py"}
    assert graph().reach({"other"}) == {"other/__init__.py", "other/link.py"}  # the caller refuses the link


def test_the_oracles_names_are_not_the_trees_to_provide() -> None:
    assert graph().reach({"checks.props"}, excluded={"checks"}) == set()


def test_a_file_is_tokenized_once_however_many_suites_reach_it() -> None:
    shared = graph()
    first = shared.reach({"app.rules"})
    assert shared.reach({"app.tables"}) == first and shared.imports("app/loader.py") is shared.imports("app/loader.py")
