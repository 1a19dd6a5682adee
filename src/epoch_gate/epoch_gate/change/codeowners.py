"""CODEOWNERS lines for the protected set, so branch protection asks the oracle's owners exactly where the
gate refuses a change.

Every pattern is anchored (`/path`): the gate's globs match from the repository root, while an unanchored
CODEOWNERS pattern matches at any depth. CODEOWNERS applies the last matching line, so the block goes at
the end of the file; `check` insists on that.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Code, fail

BEGIN = "# BEGIN epoch_gate: the oracle's protected set (`pants gate-codeowners`). Keep last: the last match wins."
END = "# END epoch_gate"


def _pattern(entry: str) -> str:
    if any(c.isspace() for c in entry) or entry.startswith("!") or "[" in entry:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            entry,
            "CODEOWNERS cannot name this path; rename it or protect its folder",
            expected="a path CODEOWNERS can express",
            found="whitespace, a leading ! or [",
        )
    # The gate reads `**` inside a segment (`a/**.py`) as crossing folders; gitignore rules, as a plain `*`.
    if any("**" in part and part != "**" for part in entry.strip("/").split("/")):
        raise fail(
            Code.ARTIFACT_MALFORMED,
            entry,
            "CODEOWNERS reads this `**` differently from the gate; " "write it as its own segment (`a/**/*.py`)",
            expected="`**` as a whole path segment",
            found=entry,
        )
    return "/" + entry.lstrip("/")


@dataclass(frozen=True)
class SuiteOwners:
    """A suite's own oracle reviewers and the protected files of its oracle (pin, generator, inputs,
    manifest, catalog, predicates, the BUILD files declaring them)."""

    address: str
    owners: tuple[str, ...]
    paths: tuple[str, ...]


def _who(owners: Sequence[str]) -> str:
    # Pants reads an option value starting with `@` as a file name, so `org/team` and `user` are accepted too.
    return " ".join(owner if "@" in owner else f"@{owner}" for owner in owners)


def block(protected: ProtectedSet, owners: Sequence[str], suites: Sequence[SuiteOwners] = ()) -> list[str]:
    """The protected set for `owners`; then, per suite with owners of its own, the files of its oracle that
    no other suite uses, for both (the later line wins in CODEOWNERS, so it names the repository's owners
    too). `suites` are every suite of the repository: a file two suites share (a BUILD file, a fixture)
    stays with the repository's owners alone, so neither team approves the other's oracle."""
    if not owners:
        raise fail(
            Code.ARTIFACT_MISSING,
            "pants.toml",
            "name the owners, e.g. --gate-codeowners-owners=@org/oracle-reviewers",
            expected="[gate-codeowners].owners: who reviews the oracle",
            found="none",
        )
    lines = [BEGIN, *(f"{_pattern(entry)} {_who(owners)}" for entry in protected.sorted_entries())]
    users = Counter(path for suite in suites for path in set(suite.paths))
    for suite in sorted(suites, key=lambda s: s.address):
        alone = sorted(path for path in set(suite.paths) if users[path] == 1)
        if suite.owners and alone:
            both = _who([*owners, *(o for o in suite.owners if o not in owners)])
            lines += [f"# suite {suite.address}", *(f"{_pattern(path)} {both}" for path in alone)]
    return [*lines, END]


def check(text: str, expected: Sequence[str], path: str) -> None:
    """The file must end with exactly this block (nothing after it can re-assign a protected path)."""
    lines = text.rstrip("\n").split("\n")
    tail = lines[-len(expected) :] if len(lines) >= len(expected) else lines
    if tail != list(expected):
        found = "the block differs" if BEGIN in lines else "no epoch_gate block"
        if BEGIN in lines and END in lines and lines.index(END) != len(lines) - 1:
            found = "lines after the block"
        code = Code.ARTIFACT_MALFORMED if BEGIN in lines else Code.ARTIFACT_MISSING
        raise fail(
            code,
            path,
            "CODEOWNERS does not cover the gate's protected set; regenerate it with "
            "`pants gate-codeowners` and put the block at the end",
            expected="the protected set's block, last in the file",
            found=found,
        )
