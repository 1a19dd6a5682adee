"""Trusted mode: a BUILD file the candidate adds or changes must be declarations, not code.

Trusted mode never loads the candidate's BUILD files, but once merged they are the trusted ref's, and
every later judge executes them with full builtins: a candidate with no bug could land a BUILD file that
rebinds the gate. So a changed BUILD file is judged as data: only calls of target types (and helpers such
as `parametrize`) with literal arguments. Anything else closes: `build-file-code`.

CPython's parser recurses, so a hostile file is parsed in a child process, as the predicate modules are.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Mapping, Sequence

from epoch_gate.reasons import Code, Reason

PARSE_TIMEOUT = 30
_CHECK = r"""
import ast, builtins, json, sys
def problem(source):
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return f"does not parse ({type(error).__name__})"
    for statement in tree.body:
        if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
            return f"line {statement.lineno}: a {type(statement).__name__} statement, not a target declaration"
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    plain = (ast.Module, ast.Expr, ast.Call, ast.keyword, ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set,
             ast.Load, ast.UnaryOp, ast.USub, ast.Name)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if not isinstance(node, plain):
            return f"line {line}: {type(node).__name__} is code, not a literal"
        if isinstance(node, ast.Name) and (id(node) not in called or node.id.startswith("_")
                                           or hasattr(builtins, node.id)):
            return f"line {line}: the name {node.id!r}"
        if isinstance(node, ast.keyword) and node.arg is None:
            return f"line {line}: ** arguments"
    return ""
try:  # as Pants reads it: UTF-8 text, so a coding line cannot make this parse see other code than Pants runs
    source = sys.stdin.buffer.read().decode("utf-8")
except UnicodeDecodeError:
    print(json.dumps({"problem": "not UTF-8 text", "calls": []}))
    raise SystemExit(0)
found = problem(source)
calls = [] if found else sorted({node.func.id for node in ast.walk(ast.parse(source))
                                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)})
print(json.dumps({"problem": found, "calls": calls}))
"""


def _checked(source: bytes) -> tuple[str, tuple[str, ...]]:
    """(why the file is not plain declarations, or ""; the names it calls)."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _CHECK],
            input=source,
            capture_output=True,
            timeout=PARSE_TIMEOUT,
            close_fds=False,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"could not be checked ({type(error).__name__})", ()
    try:
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        found = None
    if not (
        isinstance(found, dict)
        and isinstance(found.get("problem"), str)
        and all(isinstance(c, str) for c in found.get("calls", ()))
    ):
        return f"could not be checked (the checker ended with {done.returncode})", ()
    return found["problem"], tuple(found["calls"])


def build_file_problems(files: Mapping[str, bytes], oracle_types: Sequence[str] = ()) -> list[Reason]:
    """A closing reason per changed BUILD file that is more than literal target declarations, or that
    declares one of `oracle_types`: the judge's graph does not hold the candidate's targets, so a suite,
    fixture or manifest the change adds or moves would otherwise land with nobody reviewing its oracle."""
    reasons = []
    for path, source in sorted(files.items()):
        found, calls = _checked(source)
        if found:
            reasons.append(
                Reason(
                    Code.BUILD_FILE_CODE,
                    path,
                    "target declarations with literal arguments",
                    found,
                    "a BUILD file of this change holds code: once merged, every judge would "
                    "execute it, so it is reviewed as an oracle change, not passed",
                )
            )
        declared = sorted(set(calls) & set(oracle_types))
        if declared:
            reasons.append(
                Reason(
                    Code.PROTECTED_PATH_CHANGED,
                    path,
                    "unchanged (protected)",
                    "declares " + ", ".join(declared),
                    "a BUILD file of this change declares oracle targets: a suite, fixture or "
                    "manifest it adds or moves is an oracle change, reviewed by hand",
                )
            )
    return reasons
