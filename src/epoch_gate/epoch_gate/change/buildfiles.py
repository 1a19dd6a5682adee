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
from typing import Mapping, Optional, Sequence

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
        if isinstance(node, ast.Dict):  # Python keeps the last of a key given twice: what a reader may miss
            if any(key is None for key in node.keys):
                return f"line {line}: ** in a dict"
            keys = [ast.dump(key) for key in node.keys]
            if len(set(keys)) != len(keys):
                return f"line {line}: a key given twice"
    return ""
try:  # as Pants reads it: UTF-8 text, so a coding line cannot make this parse see other code than Pants runs
    source = sys.stdin.buffer.read().decode("utf-8")
except UnicodeDecodeError:
    print(json.dumps({"problem": "not UTF-8 text", "calls": [], "targets": []}))
    raise SystemExit(0)
INSTALL = ("resolve", "interpreter_constraints", "environment")
def strings(value):
    return sorted({n.value for n in ast.walk(value) if isinstance(n, ast.Constant) and isinstance(n.value, str)})
def fields(pairs):
    return {field: strings(value) for field, value in pairs if field in INSTALL}
def installed(call):
    # What decides how the target's code is installed, read structurally: its own resolve,
    # interpreter_constraints and environment arguments, each override's (by its key), and with any of them
    # its sources; None when it names none. Such a field anywhere else is kept as found.
    own = fields((k.arg, k.value) for k in call.keywords)
    overrides, placed = {}, {id(k.value) for k in call.keywords if k.arg in INSTALL}
    for k in call.keywords:
        if k.arg == "overrides" and isinstance(k.value, ast.Dict):
            for key, value in zip(k.value.keys, k.value.values):
                if isinstance(value, ast.Dict):
                    pairs = [(f.value, v) for f, v in zip(value.keys, value.values) if isinstance(f, ast.Constant)]
                    found = fields(pairs)
                    placed |= {id(v) for f, v in pairs if f in INSTALL}
                    if found:
                        overrides[ast.unparse(key)] = found
    anywhere = [k.value for n in ast.walk(call) if isinstance(n, ast.Call) for k in n.keywords if k.arg in INSTALL]
    anywhere += [v for n in ast.walk(call) if isinstance(n, ast.Dict) for f, v in zip(n.keys, n.values)
                 if isinstance(f, ast.Constant) and f.value in INSTALL]
    elsewhere = sorted(ast.unparse(value) for value in anywhere if id(value) not in placed)
    if not (own or overrides or elsewhere):
        return None
    sources = [ast.unparse(k.value) for k in call.keywords if k.arg in ("source", "sources")]
    return json.dumps({"fields": own, "overrides": overrides, "elsewhere": elsewhere, "sources": sources},
                      sort_keys=True)
def name(call):
    found = [k.value.value for k in call.keywords if k.arg == "name" and isinstance(k.value, ast.Constant)]
    return str(found[0]) if found else ""
found = problem(source)
tree = None if found else ast.parse(source)
calls = [] if found else sorted({node.func.id for node in ast.walk(tree)
                                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)})
targets = [] if found else [[name(s.value), installed(s.value)] for s in tree.body]
print(json.dumps({"problem": found, "calls": calls, "targets": targets}))
"""


# A target's name in its BUILD file ("" for the folder's default) -> what decides how its code is installed
# (`_CHECK`'s `installed`, as JSON: its resolves, interpreter constraints and environments, its overrides',
# and with them its sources), or None for nothing
Targets = dict[str, Optional[str]]


def _checked(source: bytes) -> tuple[str, tuple[str, ...], Targets]:
    """(why the file is not plain declarations, or ""; the names it calls; its targets' resolves)."""
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
        return f"could not be checked ({type(error).__name__})", (), {}
    try:
        found = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        found = None
    if not (
        isinstance(found, dict)
        and isinstance(found.get("problem"), str)
        and all(isinstance(c, str) for c in found.get("calls", ()))
    ):
        return f"could not be checked (the checker ended with {done.returncode})", (), {}
    try:
        pairs = [(str(name), None if named is None else str(named)) for name, named in found["targets"]]
    except (KeyError, TypeError, ValueError):
        return "could not be checked (the checker's report is malformed)", (), {}
    names = [name for name, _ in pairs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        return f"the target name {twice[0] or '(the folder default)'!r} is declared twice", (), {}
    return found["problem"], tuple(found["calls"]), dict(pairs)


def build_file_problems(
    files: Mapping[str, bytes],
    oracle_types: Sequence[str] = (),
    base: Optional[Mapping[str, Optional[bytes]]] = None,
    default_resolve: str = "",
) -> list[Reason]:
    """A closing reason per changed BUILD file that is more than literal target declarations, or that
    declares one of `oracle_types`: the judge's graph does not hold the candidate's targets, so a suite,
    fixture or manifest the change adds or moves would otherwise land with nobody reviewing its oracle.
    With the `base`'s BUILD files (None: not asked), one per target whose code it would have installed
    otherwise (`_moves`)."""
    reasons = []
    for path, source in sorted(files.items()):
        found, calls, targets = _checked(source)
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
        if base is not None and not found:
            reasons += _moves(path, targets, base.get(path), default_resolve)
    return reasons


def _moves(path: str, targets: Targets, before_source: Optional[bytes], default_resolve: str) -> list[Reason]:
    """A `requirements-changed` reason per target whose code this change may install otherwise: the replay
    installs the suite's resolve, and production would install that code with another. Each target of the
    base that names how it is installed (a resolve, interpreter constraints or an environment, its own or
    an override's) stays, named so, with the same sources; a new target names nothing of it but
    `default_resolve`. A base file that is not plain declarations (a
    `__defaults__`, say) cannot be compared: any change to it is one."""

    def moved(expected: str, found: str, why: str) -> Reason:
        message = f"a BUILD file of this change {why}: the replay judges the product with the suite's resolve"
        return Reason(Code.REQUIREMENTS_CHANGED, path, expected, found, message)

    if before_source is None:
        before: Targets = {}
    else:
        problem, _, before = _checked(before_source)
        if problem:
            return [moved("a base BUILD file of plain declarations", problem, "changes one that decides installs")]

    def default_only(installed: str) -> bool:
        found = json.loads(installed)
        return found["fields"] in ({}, {"resolve": [default_resolve]}) and not (
            found["overrides"] or found["elsewhere"]
        )

    reasons = [
        moved(
            f"target {name or '(the folder default)'}: {_readable(was)}",
            _readable(targets[name]) if name in targets else "removed",
            "moves code",
        )
        for name, was in sorted(before.items())
        if was is not None and targets.get(name, "removed") != was
    ]
    reasons += [
        moved(
            f"new target {name or '(the folder default)'}: {default_resolve} or nothing", _readable(now), "moves code"
        )
        for name, now in sorted(targets.items())
        if name not in before and now is not None and not default_only(now)
    ]
    reasons += [
        moved(f"target {name or '(the folder default)'}: nothing", _readable(now), "moves code")
        for name, now in sorted(targets.items())
        if name in before and before[name] is None and now is not None
    ]
    return reasons


def _readable(installed: Optional[str]) -> str:
    """`installed` as a reason says it: `resolve a, b; override 'x.py': resolve c; sources ['x.py']`."""
    if installed is None:
        return "nothing named"
    found = json.loads(installed)

    def said(fields: dict[str, list[str]]) -> str:
        return "; ".join(f"{field} {', '.join(values)}" for field, values in sorted(fields.items()))

    parts = [said(found["fields"])] if found["fields"] else []
    parts += [f"override {key}: {said(fields)}" for key, fields in sorted(found["overrides"].items())]
    parts += [f"elsewhere {value}" for value in found["elsewhere"]]
    parts += [f"sources {value}" for value in found["sources"]]
    return "; ".join(parts)
