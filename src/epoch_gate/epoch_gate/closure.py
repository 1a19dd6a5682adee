"""The import closure of a suite in the candidate: which of its files the replay can reach, read as data.

In trusted mode the candidate's BUILD files are not loaded, so the build graph cannot say what the
suite depends on. The imports can: every `import` and `from ... import` statement, found by the
tokenizer (iterative, so a hostile file cannot exhaust the deciding process's stack the way a deep
syntax tree can). Conditional imports count too, and so does a string literal that names an existing
module (`importlib.import_module("pkg.plugins.fast")`). A name built at run time is not seen: the module
ships only when it sits in a package folder the suite reaches; elsewhere the replay cannot find it and the
property errors (closed), unless the code falls back to something else, as it would in local mode, where
Pants' own dependency inference does not see it either.
"""

from __future__ import annotations

import io
import posixpath
import re
import tokenize
from typing import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from epoch_gate.modules import module_name

_DOTTED_STRING = re.compile(r"[rRuU]?(['\"])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\1")


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


def dotted_strings(source: bytes) -> set[str]:
    """String literals that spell a dotted module name (`importlib.import_module("pkg.plugins.fast")`), as
    Pants' `[python-infer].string_imports` reads them: an edge only where such a module exists."""
    names = set()
    for tokens in _statements(source):
        for token in tokens:
            if token.type == tokenize.STRING:
                found = _DOTTED_STRING.fullmatch(token.string)
                if found:
                    names.add(found.group(2))
    return names


def closure(roots: Iterable[str], providers: Callable[[str], Sequence[str]],
            imports: Callable[[str], Iterable[str]], unit: Callable[[str], Iterable[str]] = lambda path: (path,)
            ) -> set[str]:
    """The files reachable from the module names `roots` through imports, with every enclosing package's
    `__init__`. `providers` gives the files providing a module (two providers are both reached, so the
    sandbox's shadowing check refuses them); `imports` the module names a file imports; `unit` the files
    that ship with a reached file (itself, or its whole package folder)."""
    reached: set[str] = set()
    pending, seen = set(roots), set(roots)
    while pending:
        found = []
        for name in sorted(pending):
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
                for path in providers(".".join(parts[:depth])):
                    for member in unit(path):
                        if member not in reached:
                            reached.add(member)
                            found.append(member)
        pending = set()
        for path in found:
            pending.update(imports(path))
        pending -= seen
        seen |= pending
    return reached


class ImportGraph:
    """A tree's files by sandbox path, read once and shared by every suite's closure (the imports of a file
    are worked out the first time a suite reaches it). The unit that ships is a package folder: every file
    directly in the folder of a reached module (its data files, and siblings it may import by a name the
    tokenizer cannot see), not its subfolders; a top-level module ships alone."""

    def __init__(self, places: Mapping[str, str], sources: Mapping[str, bytes]) -> None:
        """`places`: each file's sandbox path; `sources`: the bytes of the regular ones (a file without
        bytes is never read, and reaching it is for the caller to refuse)."""
        self._places, self._sources = places, sources
        self._modules: dict[str, list[str]] = {}
        self._folders: dict[str, list[str]] = {}
        for path, place in sorted(places.items()):
            folder = posixpath.dirname(place)
            self._folders.setdefault(folder, []).append(path)
            name = module_name(place)
            if name is not None and place.endswith(".py"):
                self._modules.setdefault(name, []).append(path)
        self._imports: dict[str, frozenset[str]] = {}

    def imports(self, path: str) -> frozenset[str]:
        found = self._imports.get(path)
        if found is None:
            source, place = self._sources.get(path), self._places[path]
            name = module_name(place) if place.endswith(".py") else None
            if source is None or name is None:
                found = frozenset()
            else:
                strings = {n for n in dotted_strings(source) if n in self._modules}
                found = frozenset(imported(source, name, place.endswith("__init__.py")) | strings)
            self._imports[path] = found
        return found

    def _unit(self, path: str) -> Sequence[str]:
        folder = posixpath.dirname(self._places[path])
        return self._folders[folder] if folder else (path,)

    def reach(self, roots: Iterable[str], excluded: Collection[str] = ()) -> set[str]:
        """The files that ship for a suite whose own code imports `roots`; modules under the top-level names
        `excluded` (the oracle's packages, which come from elsewhere) are not the tree's to provide."""
        def providers(name: str) -> Sequence[str]:
            return () if name.split(".", 1)[0] in excluded else self._modules.get(name, ())

        return closure(roots, providers, self.imports, self._unit)
