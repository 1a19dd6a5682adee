from __future__ import annotations

from typing import Optional

import pytest

from epoch_gate.change.buildfiles import build_file_problems
from epoch_gate.reasons import Code

DECLARATIONS = b'''# The orders product.
python_sources(
    name="lib",
    sources=["*.py", "!*_test.py"],
    dependencies=["3rdparty/python:attrs"],
    overrides={"money.py": {"tags": ["core"]}},
    resolve=parametrize("python-default", "other"),
)
python_tests(name="tests", timeout=-1, skip_black=True, extra_env_vars=None)
'''


def test_declarations_with_literal_arguments_pass() -> None:
    assert build_file_problems({"src/orders/BUILD": DECLARATIONS}) == []


@pytest.mark.parametrize(
    "source",
    [
        b'_import = __builtins__["__im" + "port__"]\n',  # the attack trusted mode must not let land
        b'python_sources(name=__builtins__)\n',
        b'exec("import os")\n',
        b'python_sources(name="a" + "b")\n',
        b'python_sources(**{"name": "x"})\n',
        b'python_sources(sources=[f for f in ["a.py"]])\n',
        b'python_sources(name=getattr)\n',
        b'x = 1\n',
        b'def f():\n    pass\n',
        b'python_sources(\n',
        b'python_sources(overrides={"a.py": {"resolve": "b"}, "a.py": {}})\n',
        b'python_sources(overrides={"a.py": {"resolve": "b"}, **{"a.py": {}}})\n',
        b'python_sources(name=' + b'[' * 100_000 + b'\n',
    ],
)
def test_code_in_a_build_file_is_refused(source: bytes) -> None:
    (reason,) = build_file_problems({"src/orders/BUILD": source})
    assert reason.code is Code.BUILD_FILE_CODE and reason.path == "src/orders/BUILD" and reason.found


def test_a_build_file_declaring_an_oracle_target_is_an_oracle_change() -> None:
    suite = b'sampled_properties(name="props", fixture="f:e", manifest=":m")\npython_sources()\n'
    oracle = ("epoch_fixture", "property_manifest", "sampled_properties")
    (reason,) = build_file_problems({"services/new/BUILD": suite}, oracle)
    assert reason.code is Code.PROTECTED_PATH_CHANGED and reason.found == "declares sampled_properties"
    assert build_file_problems({"src/orders/BUILD": DECLARATIONS}, oracle) == []


def test_a_coding_line_cannot_hide_code_from_the_check() -> None:
    # Under UTF-7 `+ACIAIgAi-` is `"""`: a parser of the bytes would see one string where Pants, which
    # decodes BUILD files as UTF-8, sees a suite declaration and an import.
    hidden = (
        b'# coding: utf-7\npython_sources(name="a", description="+ACIAIgAi-")\n'
        b'sampled_properties(name="evil", fixture="x", manifest="y")\n__import__("os").getcwd()\n'
        b'# +ACIAIgAi-)\n'
    )
    codes = {r.code for r in build_file_problems({"src/BUILD": hidden}, ("sampled_properties",))}
    assert codes == {Code.BUILD_FILE_CODE}
    (reason,) = build_file_problems({"src/BUILD": b"python_sources(name='\xff')\n"})
    assert reason.found == "not UTF-8 text"


BASE = (
    b'python_sources(name="lib", resolve="python-default")\n'
    b'python_sources(name="tools", resolve=parametrize("a", "b"), sources=["t.py"])\n'
    b'python_tests(name="tests")\n'
)
LIB = "target lib: resolve python-default"
TOOLS = "target tools: resolve a, b; sources ['t.py']"


def moves(changed: bytes, base: Optional[bytes] = BASE) -> list[tuple[str, str]]:
    reasons = build_file_problems({"src/orders/BUILD": changed}, (), {"src/orders/BUILD": base}, "python-default")
    assert {r.code for r in reasons} <= {Code.REQUIREMENTS_CHANGED}, reasons
    return [(r.expected, r.found) for r in reasons]


def test_targets_that_keep_how_they_are_installed_are_product_code() -> None:
    kept = BASE.replace(b'name="tests")', b'name="tests", timeout=60)')
    assert moves(kept + b'python_sources(name="new")\npython_sources(name="newer", resolve="python-default")\n') == []
    new = b'python_sources(name="a")\npython_sources(name="b", resolve="python-default", sources=["b.py"])\n'
    assert moves(new, None) == []
    assert build_file_problems({"src/new/BUILD": b'python_sources(resolve="other")\n'}) == []  # one resolve


@pytest.mark.parametrize(
    "changed, found",
    [
        # Moved: renamed, another resolve, none named, widened, narrowed, its sources, by an override
        (BASE.replace(b'"lib"', b'"lib2"'), [(LIB, "removed")]),
        (BASE.replace(b'name="lib", resolve="python-default"', b"name=\"lib\""), [(LIB, "nothing named")]),
        (BASE.replace(b'"python-default")', b'"other")'), [(LIB, "resolve other")]),
        (BASE.replace(b'("a", "b")', b'("a", "b", "c")'), [(TOOLS, "resolve a, b, c; sources ['t.py']")]),
        (BASE.replace(b'["t.py"]', b'["t.py", "u.py"]'), [(TOOLS, "resolve a, b; sources ['t.py', 'u.py']")]),
        (
            BASE.replace(b'name="tests")', b'name="tests", overrides={"x.py": {"resolve": "other"}})'),
            [("target tests: nothing", "override 'x.py': resolve other")],
        ),
        (
            BASE.replace(b'name="tests")', b'name="tests", interpreter_constraints=["==3.12.*"])'),
            [("target tests: nothing", "interpreter_constraints ==3.12.*")],
        ),
        (
            BASE + b'python_sources(name="new", resolve="other")\n',
            [("new target new: python-default or nothing", "resolve other")],
        ),
        (b"", [(LIB, "removed"), (TOOLS, "removed")]),  # deleted
    ],
)
def test_a_target_whose_code_may_install_otherwise_is_a_requirement_change(
    changed: bytes, found: list[tuple[str, str]]
) -> None:
    assert moves(changed) == found


def test_overrides_are_compared_key_by_key() -> None:
    base = b'python_sources(name="pay", resolve="a", overrides={"legacy.py": {"resolve": "b"}})\n'
    swapped = b'python_sources(name="pay", resolve="b", overrides={"legacy.py": {"resolve": "a"}})\n'
    moved = b'python_sources(name="pay", resolve="a", overrides={"pay.py": {"resolve": "b"}})\n'
    was = "target pay: resolve a; override 'legacy.py': resolve b"
    assert moves(swapped, base) == [(was, "resolve b; override 'legacy.py': resolve a")]
    assert moves(moved, base) == [(was, "resolve a; override 'pay.py': resolve b")]
    # A new target's resolve read structurally: text that looks like another field is a resolve's name
    odd = b'python_sources(name="n", resolve="python-default; sources ", overrides={"x.py": {"resolve": "t"}})\n'
    assert len(moves(odd, None)) == 1


def test_a_base_build_file_that_is_not_plain_declarations_cannot_be_compared() -> None:
    base = b'__defaults__(all=dict(resolve="ml"))\npython_sources()\n'
    assert moves(b"python_sources()\n", base) == [
        ("a base BUILD file of plain declarations", "line 1: the name '__defaults__'")
    ]
