from __future__ import annotations

import ast
import importlib.util

import pytest

from epoch_gate.change.closure import MAX_NAME, MAX_NAMES, ImportGraph, ImportsTooLarge, closure, imported, scan


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
    assert {
        "os",
        "a.b",
        "c",
        "c.d",
        "c.e",
        "pkg.sub.sibling",
        "pkg.sub.sibling.g",
        "pkg",
        "pkg.h",
        "guarded",
        "lazy",
        "lazy.m",
        "lazy.n",
        "inner",
        "second",
    } <= found
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
    modules = {
        "orders": ["orders/__init__.py"],
        "orders.totals": ["orders/totals.py"],
        "orders.money": ["orders/money.py"],
        "orders.currency": ["orders/currency.py"],
        "orders.unused": ["orders/unused.py"],
        "other": ["other/__init__.py"],
    }
    name_of = {path: name for name, (path,) in modules.items()}
    reads: list[str] = []

    def imports(path: str) -> set[str]:
        reads.append(path)
        return imported(sources[path], name_of[path], path.endswith("__init__.py"))

    assert closure({"orders.totals", "decimal"}, lambda name: modules.get(name, ()), imports) == {
        "orders/__init__.py",
        "orders/totals.py",
        "orders/money.py",
        "orders/currency.py",
    }
    assert sorted(reads) == sorted(set(reads))  # each file read once


def test_two_providers_of_a_module_are_both_reached() -> None:
    modules = {"m": ["a/m.py", "b/m.py"]}
    assert closure({"m"}, lambda name: modules.get(name, ()), lambda path: ()) == {"a/m.py", "b/m.py"}


def test_string_literals_name_modules_but_nothing_else() -> None:
    source = b"""
import importlib
fast = importlib.import_module("pkg.plugins.fast")
slow = importlib.import_module(f"pkg.plugins.{name}")
plain_f = importlib.import_module(f"pkg.plugins.plain")
escaped = importlib.import_module("pkg.plugins.f\\x61st2")
joined = importlib.import_module("pkg.plugins." "joined")
url = "example.com/a.b"
raw = r'pkg.raw'
data = b"pkg.bytes"
"""
    assert scan(source, "m", is_package=False)[1] == {
        "pkg.plugins.fast",
        "pkg.plugins.plain",
        "pkg.plugins.fast2",
        "pkg.plugins.joined",
        "pkg.raw",
    }


def test_an_f_string_is_one_literal_on_every_version() -> None:
    # 3.12+ tokenize an f-string in parts (PEP 701); the scan joins them back into the one token 3.9 reads.
    source = b'''
a = importlib.import_module("pkg." f"joined.f")
b = f"{f'{x}'}" "pkg.nested"
c = f"pkg.{{braces}}"
d = f"""{
    x
}"""; import after
'''
    assert scan(source, "m", is_package=False) == ({"after"}, {"pkg.joined.f"})


def test_bare_carriage_returns_end_lines_as_they_do_for_the_import_system() -> None:
    source = b"try:\r    from pkg.sub import fast\rexcept ImportError:\r    from pkg import slow\r"
    assert {"pkg.sub.fast", "pkg.slow"} <= imported(source, "prod.impl", is_package=False)


@pytest.mark.parametrize(
    "source",
    [
        # A newline spelled in the declared codec: Python decodes the file whole, then splits its lines.
        b"# coding: utf-7\nx = 1  # +AAo-try: from fastpath import discount+AAo-except ImportError: pass\n",
        b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\nimport fastpath\n",
        b"\xef\xbb\xbf# a BOM\nimport fastpath\n",
        b"import importlib\nimportlib.import_module('fastpath')\n",
        b"__import__('fastpath')\n",
    ],
)
def test_an_import_is_found_as_python_reads_the_source(source: bytes) -> None:
    names, strings = scan(source, "m", is_package=False)
    assert "fastpath" in names | strings
    compile(source, "m.py", "exec")  # and Python reads it too


def test_a_carriage_return_spelled_in_the_codec_ends_a_line_as_python_decodes_the_source() -> None:
    # Python's decoding of a module's text (importlib.util.decode_source: the cookie, then universal newlines)
    # makes +AA0- a line break, so `import fastpath` is a statement of the text it gives, and the scan reads
    # that text. The import system's tokenizer reads the bytes otherwise, and by version: 3.9-3.11 keep the
    # decoded CR inside the comment, 3.12+ end the comment there and refuse the rest of the line
    # (SyntaxError). Neither runs an import the scan misses.
    source = b"# coding: utf-7\nx = 1  # +AA0-import fastpath\n"
    assert "fastpath" in imported(source, "m", is_package=False)
    tree = ast.parse(importlib.util.decode_source(source), "m.py")  # and Python reads it so
    assert [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names] == ["fastpath"]


def test_a_cookie_python_refuses_hides_nothing_python_would_run() -> None:
    source = b"# coding: utf-16\nimport fastpath\n"
    with pytest.raises(SyntaxError):
        compile(source, "m.py", "exec")
    assert scan(source, "m", is_package=False) == (set(), set())


def test_a_codec_python_cannot_read_source_with_keeps_what_was_read() -> None:
    for codec in (b"hex", b"rot13", b"punycode", b"no-such-codec"):
        assert imported(b"# coding: " + codec + b"\nimport a\n", "m", is_package=False) == set()


def test_a_file_naming_too_many_or_too_long_modules_is_refused_not_scanned_forever() -> None:
    long_name = b".".join([b"a"] * (MAX_NAME // 2 + 1))
    with pytest.raises(ImportsTooLarge):
        imported(b"import " + long_name + b"\n", "m", is_package=False)
    many = b"from a import (" + b", ".join(b"n%d" % i for i in range(MAX_NAMES + 1)) + b")\n"
    with pytest.raises(ImportsTooLarge):
        imported(many, "m", is_package=False)


GRAPH = {  # sandbox path -> bytes (None: a file git stores as something else, a symlink say)
    "app/__init__.py": b"",
    "app/rules.py": b"from app.tables import RATES\n",
    "app/tables.py": b"RATES = {}\n",
    "app/rates.json": b"{}",
    "app/fast.py": b"import lib.engine\n",  # not imported by name, but it ships with its package
    "app/data/rates.csv": b"",  # data in a subfolder of the package
    "app/plugins/__init__.py": b"",
    "app/plugins/loaded.py": b"",
    "lib/__init__.py": b"",
    "lib/engine.py": b"",
    "lib/other/__init__.py": b"",
    "tools/__init__.py": b"",
    "tools/export.py": b"import importlib\nPLUGIN = importlib.import_module('plugins.loaded')\n",
    "plugins/__init__.py": b"",
    "plugins/loaded.py": b"",
    "plugins/unused.py": b"",
    "company/__init__.py": b"",
    "company/payments/api.py": b"",
    "company/inventory/stock.py": b"",
    "other/__init__.py": b"",
    "other/link.py": None,
    "checks/props.py": b"import app.rules\n",  # a candidate's copy of the oracle: never followed
    "helper.py": b"",
    "lonely.py": b"",
    "m.py": b"X = 1\n",
    "m/__init__.pyc": None,  # Python imports the package folder, compiled, before m.py
    "ext.py": b"",
    "ext.cpython-39-x86_64-linux-gnu.so": None,  # an extension module is tried before source
    "cached/__init__.py": b"",
    "cached/__pycache__/__init__.cpython-39.pyc": None,  # read in place of the source, even under -B
    "__pycache__/helper.cpython-39.pyc": None,  # a top-level module's bytecode
}


def graph() -> ImportGraph:
    return ImportGraph({path: path for path in GRAPH}, {p: b for p, b in GRAPH.items() if b is not None})


def test_an_imported_module_ships_its_whole_package_and_what_that_imports() -> None:
    reached = graph().reach({"app.rules", "helper"}, excluded={"checks"})
    assert reached == {
        "app/__init__.py",
        "app/rules.py",
        "app/tables.py",
        "app/rates.json",
        "app/fast.py",
        "app/data/rates.csv",
        "app/plugins/__init__.py",
        "app/plugins/loaded.py",
        "lib/__init__.py",
        "lib/engine.py",
        "lib/other/__init__.py",
        "helper.py",
        "__pycache__/helper.cpython-39.pyc",
    }
    assert "lonely.py" not in reached  # a top-level module ships alone, not with the source root's others


def test_an_enclosing_package_ships_only_its_init() -> None:
    assert graph().reach({"company.payments.api"}) == {"company/__init__.py", "company/payments/api.py"}


def test_a_string_naming_a_module_reaches_it() -> None:
    assert graph().reach({"tools.export"}) == {
        "tools/__init__.py",
        "tools/export.py",
        "plugins/__init__.py",
        "plugins/loaded.py",
        "plugins/unused.py",
    }


def test_a_one_word_string_naming_a_top_level_module_reaches_it() -> None:
    files = {
        "app/__init__.py": b"",
        "app/impl.py": b"try:\n    fast = __import__('fastpath')\nexcept ImportError:\n" b"    fast = None\n",
        "fastpath.py": b"",
        "unrelated.py": b"",
    }
    assert ImportGraph({p: p for p in files}, files).reach({"app.impl"}) == {
        "app/__init__.py",
        "app/impl.py",
        "fastpath.py",
    }


def test_a_package_no_suite_reaches_does_not_ship() -> None:
    assert graph().reach({"lonely"}) == {"lonely.py"}
    assert graph().reach({"other"}) == {"other/__init__.py", "other/link.py"}  # the caller refuses the link


def test_compiled_files_that_python_would_load_are_reached_for_the_caller_to_refuse() -> None:
    assert graph().reach({"m"}) == {"m.py", "m/__init__.pyc"}
    assert graph().reach({"ext"}) == {"ext.py", "ext.cpython-39-x86_64-linux-gnu.so"}
    assert "cached/__pycache__/__init__.cpython-39.pyc" in graph().reach({"cached"})
    assert graph().reach({"helper"}) == {"helper.py", "__pycache__/helper.cpython-39.pyc"}


def test_the_oracles_names_are_not_the_trees_to_provide() -> None:
    assert graph().reach({"checks.props"}, excluded={"checks"}) == set()


def test_a_file_is_tokenized_once_however_many_suites_reach_it() -> None:
    shared = graph()
    first = shared.reach({"app.rules"})
    assert shared.reach({"app.tables"}) == first and shared.imports("app/fast.py") is shared.imports("app/fast.py")


def test_a_module_importing_too_much_is_named_for_the_caller_to_refuse() -> None:
    places = {"big.py": "big.py"}
    shared = ImportGraph(places, {"big.py": b"import " + b".".join([b"a"] * MAX_NAME) + b"\n"})
    assert shared.reach({"big"}) == {"big.py"} and "big.py" in shared.unreadable


def test_a_deeply_nested_package_does_not_recurse() -> None:
    deep = "/".join(["d"] * 3000)
    places = {"d/__init__.py": "d/__init__.py", f"{deep}/x.txt": f"{deep}/x.txt"}
    assert f"{deep}/x.txt" in ImportGraph(places, {"d/__init__.py": b""}).reach({"d"})
