from __future__ import annotations

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


BASE = b'python_sources(name="lib", resolve="python-default")\npython_sources(name="tools", resolve=parametrize("a", "b"))\npython_tests(name="tests")\n'


@pytest.mark.parametrize(
    "changed, found",
    [
        # Kept as they were, and a new target in the default resolve or naming none: judged as product code
        (BASE + b'python_sources(name="new")\npython_sources(name="newer", resolve="python-default")\n', []),
        (b'python_sources(name="lib", resolve="python-default", dependencies=["x"])\n', []),
        # Moved: named, unnamed, widened, narrowed, by an override, a new target elsewhere
        (b'python_sources(name="lib", resolve="other")\n', [("target lib: resolve python-default", "resolve other")]),
        (b'python_sources(name="lib")\n', [("target lib: resolve python-default", "no resolve named")]),
        (b'python_tests(name="tests", resolve="other")\n', [("target tests: no resolve named", "resolve other")]),
        (
            b'python_sources(name="lib", resolve=parametrize("python-default", "other"))\n',
            [("target lib: resolve python-default", "resolve other, python-default")],
        ),
        (b'python_sources(name="tools", resolve="a")\n', [("target tools: resolve a, b", "resolve a")]),
        (
            b'python_sources(name="lib", resolve="python-default", overrides={"x.py": {"resolve": "other"}})\n',
            [("target lib: resolve python-default", "resolve other, python-default")],
        ),
        (
            b'python_sources(resolve="other")\n',
            [("target (the folder default): python-default or no resolve named", "resolve other")],
        ),
    ],
)
def test_a_target_put_in_a_resolve_it_was_not_in_is_a_requirement_change(
    changed: bytes, found: list[tuple[str, str]]
) -> None:
    reasons = build_file_problems({"src/orders/BUILD": changed}, (), {"src/orders/BUILD": BASE}, "python-default")
    assert [(r.code, r.path, r.expected, r.found) for r in reasons] == [
        (Code.REQUIREMENTS_CHANGED, "src/orders/BUILD", expected, was) for expected, was in found
    ]


def test_a_new_build_file_may_name_only_the_default_resolve() -> None:
    new = b'python_sources(name="a")\npython_sources(name="b", resolve="other")\n'
    (reason,) = build_file_problems({"src/new/BUILD": new}, (), {"src/new/BUILD": None}, "python-default")
    assert (reason.code, reason.expected, reason.found) == (
        Code.REQUIREMENTS_CHANGED,
        "target b: python-default or no resolve named",
        "resolve other",
    )
    assert build_file_problems({"src/new/BUILD": new}) == []  # one resolve declared: nothing to move to
