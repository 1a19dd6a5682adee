"""The import closure of a suite in the candidate: which of its files the replay can reach, read as data.

In trusted mode the candidate's BUILD files are not loaded, so the build graph cannot say what the
suite depends on. The imports can: every `import` and `from ... import` statement, found by the
tokenizer (iterative, so a hostile file cannot exhaust the deciding process's stack the way a deep
syntax tree can). Conditional imports count too; a dynamic import (`importlib.import_module(name)`)
is not seen, and then the replay cannot find the module and the property errors: closed, not open.
"""

from __future__ import annotations

import io
import tokenize
from typing import Callable, Iterator, Mapping, Sequence


def _statements(source: bytes) -> Iterator[list[tokenize.TokenInfo]]:
    """The significant tokens of each logical line (a tokenizer error ends the scan: what was read counts)."""
    line: list[tokenize.TokenInfo] = []
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    try:
        for token in tokenize.tokenize(io.BytesIO(source).readline):
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or token.string == ";":
                if line:
                    yield line
                line = []
            elif token.type not in skip:
                line.append(token)
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        pass
    if line:
        yield line


def _dotted(tokens: list[tokenize.TokenInfo], at: int) -> tuple[str, int]:
    parts = []
    while at < len(tokens) and tokens[at].string not in ("import", "as") and (
            tokens[at].type == tokenize.NAME or set(tokens[at].string) == {"."}):
        parts.append(tokens[at].string)
        at += 1
    return "".join(parts), at


def _absolute(name: str, module: str, is_package: bool) -> str | None:
    dots = len(name) - len(name.lstrip("."))
    if not dots:
        return name
    package = module.split(".") if is_package else module.split(".")[:-1]
    if dots - 1 >= len(package):
        return None
    base = package[: len(package) - (dots - 1)]
    rest = name[dots:]
    return ".".join([*base, rest] if rest else base) or None


def imported(source: bytes, module: str, is_package: bool) -> set[str]:
    """Every module name `source` (the module `module`) may import: `import a.b` gives `a.b`; `from a
    import b` gives `a` and `a.b` (b may be a submodule); relative imports are made absolute."""
    names: set[str] = set()
    for tokens in _statements(source):
        # `import` or `from` may follow a compound statement's colon on the same line (`if x: import y`).
        starts = [i for i, t in enumerate(tokens) if t.string in ("import", "from") and t.type == tokenize.NAME
                  and (i == 0 or tokens[i - 1].string == ":")]
        for start in starts:
            if tokens[start].string == "import":
                at = start + 1
                while at < len(tokens):
                    name, at = _dotted(tokens, at)
                    if name:
                        names.add(name)
                    while at < len(tokens) and tokens[at].string not in (",",):
                        at += 1
                    at += 1
                continue
            name, at = _dotted(tokens, start + 1)
            base = _absolute(name, module, is_package)
            if base is None or at >= len(tokens) or tokens[at].string != "import":
                continue
            names.add(base)
            for token in tokens[at + 1:]:
                if token.type == tokenize.NAME and token.string != "as":
                    names.add(f"{base}.{token.string}")
    return {n for n in names if n and not n.startswith(".")}


def closure(roots: set[str], modules: Mapping[str, Sequence[str]],
            read: Callable[[list[str]], Mapping[str, bytes]]) -> set[str]:
    """The files reachable from the module names `roots` through imports, with every enclosing package's
    `__init__`. `modules` maps a module name to the files providing it (two providers are both reached, so
    the sandbox's shadowing check refuses them); `read` gives files' bytes."""
    name_of = {path: name for name, paths in modules.items() for path in paths}
    reached: set[str] = set()
    pending, seen = set(roots), set(roots)
    while pending:
        wanted = []
        for name in sorted(pending):
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
                for path in modules.get(".".join(parts[:depth]), ()):
                    if path not in reached:
                        reached.add(path)
                        wanted.append(path)
        pending = set()
        for path, source in read(wanted).items():
            found = imported(source, name_of[path], path.endswith("__init__.py"))
            pending |= found - seen
        seen |= pending
    return reached
