"""The import closure of a suite in the candidate: which of its files the replay can reach, read as data.

In trusted mode the candidate's BUILD files are not loaded, so the build graph cannot say what the
suite depends on. The imports can: every `import` and `from ... import` statement, found by the
tokenizer (iterative, so a hostile file cannot exhaust the deciding process's stack the way a deep
syntax tree can), after decoding it as Python does. Conditional imports count too, and so does a string
literal that names an existing module (`importlib.import_module("pkg.plugins.fast")`, `"fastpath"`). A
name built at run time is not seen: the module ships only when it sits in a package the suite reaches;
elsewhere the replay ships a stand-in of it that ends the replay when imported (the plugin's
`candidate._stand_ins`), so code cannot fall back from a module the replay left behind.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import posixpath
import re
import tokenize
from typing import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from epoch_gate.change.modules import module_name

# A module's name as a string spells it: one word or several (`import_module("fastpath")`).
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# Beyond these an import is not followed but refused: a hostile file could make the scan quadratic.
MAX_NAME = 1000  # characters of one dotted module name
MAX_NAMES = 10_000  # module names one file may import


class ImportsTooLarge(ValueError):
    """A file names more, or longer, modules than the scan follows."""


# 3.12+ tokenize an f-string as FSTRING_START, its literal parts (FSTRING_MIDDLE), its replacement fields'
# own tokens and FSTRING_END (PEP 701; 3.14 a t-string the same way), where 3.9-3.11 give one STRING. Read
# only as STRING tokens, `f"pkg.plugins.plain"` named no module on 3.12+.
_STRING_STARTS = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)}
_STRING_ENDS = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}


def _whole_strings(tokens: Iterable[tokenize.TokenInfo]) -> Iterator[tokenize.TokenInfo]:
    """`tokens`, each f-string (with any nested in it) joined back into the one STRING token 3.9 gives, so
    that every version scans the same tokens. A replacement field's `{` stays in the joined text, so
    `_literal` refuses it there as it does on 3.9; an escaped `{{` (one `{` in FSTRING_MIDDLE) too."""
    parts: list[tokenize.TokenInfo] = []
    depth = 0
    for token in tokens:
        if token.type in _STRING_STARTS:
            depth += 1
        if not depth:
            yield token
            continue
        parts.append(token)
        if token.type in _STRING_ENDS:
            depth -= 1
            if not depth:
                text = "".join(part.string for part in parts)
                yield tokenize.TokenInfo(tokenize.STRING, text, parts[0].start, token.end, parts[0].line)
                parts = []
    yield from parts  # an f-string the tokenizer never closed (it raises first): hide none of its tokens


def _statements(source: bytes) -> Iterator[list[tokenize.TokenInfo]]:
    """The significant tokens of each logical line (a tokenizer error ends the scan: what was read counts).

    The source is decoded whole, as Python decodes a module before it splits it into lines: by its
    declared encoding (a `# coding:` cookie or a BOM), with universal newlines. Tokenizing the bytes line
    by line would split them before decoding, so a newline spelled in the declared codec (`+AAo-` in
    UTF-7) would hide the import after it."""
    line: list[tokenize.TokenInfo] = []
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    try:
        text = importlib.util.decode_source(source)
    except (SyntaxError, LookupError, UnicodeError):  # a codec or a cookie Python cannot import by either
        return
    try:
        for token in _whole_strings(tokenize.generate_tokens(io.StringIO(text).readline)):
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or token.string == ";":
                if line:
                    yield line
                line = []
            elif token.type not in skip:
                line.append(token)
    except (tokenize.TokenError, SyntaxError, LookupError, UnicodeError):  # a codec Python cannot import by
        pass
    if line:
        yield line


def _dotted(tokens: list[tokenize.TokenInfo], at: int) -> tuple[str, int]:
    parts = []
    while (
        at < len(tokens)
        and tokens[at].string not in ("import", "as")
        and (tokens[at].type == tokenize.NAME or set(tokens[at].string) == {"."})
    ):
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


def _add(names: set[str], name: str) -> None:
    if len(name) > MAX_NAME or len(names) >= MAX_NAMES:
        raise ImportsTooLarge(
            f"more than {MAX_NAMES} module names"
            if len(names) >= MAX_NAMES
            else f"a module name of {len(name)} characters"
        )
    names.add(name)


def _line_imports(tokens: list[tokenize.TokenInfo], module: str, is_package: bool, names: set[str]) -> None:
    # `import` or `from` may follow a compound statement's colon on the same line (`if x: import y`).
    starts = [
        i
        for i, t in enumerate(tokens)
        if t.string in ("import", "from") and t.type == tokenize.NAME and (i == 0 or tokens[i - 1].string == ":")
    ]
    for start in starts:
        if tokens[start].string == "import":
            at = start + 1
            while at < len(tokens):
                name, at = _dotted(tokens, at)
                if name:
                    _add(names, name)
                while at < len(tokens) and tokens[at].string not in (",",):
                    at += 1
                at += 1
            continue
        name, at = _dotted(tokens, start + 1)
        base = _absolute(name, module, is_package)
        if base is None or at >= len(tokens) or tokens[at].string != "import":
            continue
        _add(names, base)
        for token in tokens[at + 1 :]:
            if token.type == tokenize.NAME and token.string != "as":
                _add(names, f"{base}.{token.string}")


def _literal(token: str) -> str | None:
    """A str literal's value, escapes decoded, without evaluating code (an f-string only when it has no
    replacement field); None for bytes and anything else."""
    prefix = token[: len(token) - len(token.lstrip("rRuUbBfF"))]
    if "b" in prefix.lower() or ("f" in prefix.lower() and "{" in token):
        return None
    try:
        value = ast.literal_eval(prefix.replace("f", "").replace("F", "") + token[len(prefix) :])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _line_strings(tokens: list[tokenize.TokenInfo], names: set[str]) -> None:
    run: list[str] = []
    for token in (*tokens, None):
        if token is not None and token.type == tokenize.STRING:
            value = _literal(token.string)
            run.append(value if value is not None else "\0")
            continue
        joined = "".join(run)
        if run and len(joined) <= MAX_NAME and _MODULE_NAME.fullmatch(joined):
            names.add(joined)
        run = []


def scan(source: bytes, module: str, is_package: bool) -> tuple[set[str], set[str]]:
    """One tokenization of `source` (the module `module`): the module names it may import (`import a.b`
    gives `a.b`; `from a import b` gives `a` and `a.b`, b may be a submodule; relative imports are made
    absolute), and its string literals that spell a module name (`importlib.import_module(
    "pkg.plugins.fast")` or `__import__("fastpath")`, adjacent literals joined), which are an edge only
    where such a module exists (unlike Pants' `[python-infer].string_imports`, one word counts too)."""
    names: set[str] = set()
    strings: set[str] = set()
    for tokens in _statements(source):
        _line_imports(tokens, module, is_package, names)
        _line_strings(tokens, strings)
    return {n for n in names if n and not n.startswith(".")}, strings


def imported(source: bytes, module: str, is_package: bool) -> set[str]:
    """The module names `source` may import (see `scan`)."""
    return scan(source, module, is_package)[0]


def closure(
    roots: Iterable[str],
    providers: Callable[[str], Sequence[str]],
    imports: Callable[[str], Iterable[str]],
    unit: Callable[[str], Iterable[str]] = lambda path: (path,),
) -> set[str]:
    """The files reachable from the module names `roots` through imports, with every enclosing package's
    `__init__`. `providers` gives the files providing a module (two providers are both reached, so the
    sandbox's shadowing check refuses them); `imports` the module names a file imports; `unit` the files
    that ship with a file providing an imported module (an enclosing `__init__` ships alone)."""
    reached: set[str] = set()
    pending, seen = set(roots), set(roots)
    while pending:
        found = []
        for name in sorted(pending):
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
                for path in providers(".".join(parts[:depth])):
                    for member in unit(path) if depth == len(parts) else (path,):
                        if member not in reached:
                            reached.add(member)
                            found.append(member)
        pending = set()
        for path in found:
            pending.update(imports(path))
        pending -= seen
        seen |= pending
    return reached


def _provided(place: str) -> str | None:
    """The module a file provides: its own, or for `a/__pycache__/b.<tag>.pyc` that of `a/b.py`, whose
    bytecode the import system reads in its place (even under -B)."""
    folder, _, name = place.rpartition("/")
    if posixpath.basename(folder) != "__pycache__":
        return None if "__pycache__" in folder.split("/") else module_name(place)
    return module_name(posixpath.join(posixpath.dirname(folder), name.split(".", 1)[0] + ".pyc"))


class ImportGraph:
    """A tree's files by sandbox path, read once and shared by every suite's closure (the imports of a file
    are worked out the first time a suite reaches it).

    What ships for an imported module is the package that holds it, whole: every file in the folder of the
    file providing it and in that folder's subfolders (its data, its subpackages, and so whatever it may
    import by a name the tokenizer cannot see). An enclosing package's `__init__` ships alone, and so does
    a top-level module. Compiled files (`.pyc`, extension modules, `__pycache__`) are providers too, so a
    reached one is shipped, and the caller refuses it."""

    def __init__(self, places: Mapping[str, str], sources: Mapping[str, bytes]) -> None:
        """`places`: each file's sandbox path; `sources`: the bytes of the regular ones (a file without
        bytes is never read, and reaching it is for the caller to refuse)."""
        self.places, self._sources = places, sources
        self._modules: dict[str, list[str]] = {}
        self._files: dict[str, list[str]] = {}  # folder -> the files directly in it
        self._subfolders: dict[str, set[str]] = {}
        for path, place in sorted(places.items()):
            folder = posixpath.dirname(place)
            self._files.setdefault(folder, []).append(path)
            while folder:
                parent = posixpath.dirname(folder)
                self._subfolders.setdefault(parent, set()).add(folder)
                folder = parent
            name = _provided(place)
            if name is not None:
                self._modules.setdefault(name, []).append(path)
        self._imports: dict[str, frozenset[str]] = {}
        self._packages: dict[str, tuple[str, ...]] = {}
        self.unreadable: dict[str, str] = {}  # path -> why its imports could not be followed

    def imports(self, path: str) -> frozenset[str]:
        found = self._imports.get(path)
        if found is None:
            source, place = self._sources.get(path), self.places[path]
            name = module_name(place) if place.endswith(".py") else None
            found = frozenset()
            if source is not None and name is not None:
                try:
                    names, strings = scan(source, name, place.endswith("__init__.py"))
                    found = frozenset(names | {n for n in strings if n in self._modules})
                except ImportsTooLarge as error:
                    self.unreadable[path] = str(error)
            self._imports[path] = found
        return found

    def _package(self, folder: str) -> tuple[str, ...]:
        """Every file in `folder` and below."""
        found = self._packages.get(folder)
        if found is None:
            files, stack = [], [folder]  # iterative: a hostile tree may nest folders thousands deep
            while stack:
                current = stack.pop()
                files.extend(self._files.get(current, ()))
                stack.extend(self._subfolders.get(current, ()))
            found = self._packages[folder] = tuple(sorted(files))
        return found

    def _unit(self, path: str) -> Sequence[str]:
        folder = posixpath.dirname(self.places[path])
        return self._package(folder) if folder else (path,)

    def reach(self, roots: Iterable[str], excluded: Collection[str] = ()) -> set[str]:
        """The files that ship for a suite whose own code imports `roots`; modules under the top-level names
        `excluded` (the oracle's packages, which come from elsewhere) are not the tree's to provide."""

        def providers(name: str) -> Sequence[str]:
            return () if name.split(".", 1)[0] in excluded else self._modules.get(name, ())

        return closure(roots, providers, self.imports, self._unit)
