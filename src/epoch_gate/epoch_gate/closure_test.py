from __future__ import annotations

from epoch_gate.closure import closure, imported


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


def test_closure_follows_imports_and_packages() -> None:
    files = {
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
    reads: list[list[str]] = []

    def read(paths: list[str]) -> dict[str, bytes]:
        reads.append(paths)
        return {p: files[p] for p in paths}

    assert closure({"orders.totals", "decimal"}, modules, read) == {
        "orders/__init__.py", "orders/totals.py", "orders/money.py", "orders/currency.py"}
    assert all(len(set(batch)) == len(batch) for batch in reads)


def test_two_providers_of_a_module_are_both_reached() -> None:
    modules = {"m": ["a/m.py", "b/m.py"]}
    assert closure({"m"}, modules, lambda paths: {p: b"" for p in paths}) == {"a/m.py", "b/m.py"}
