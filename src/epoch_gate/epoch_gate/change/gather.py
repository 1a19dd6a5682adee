"""The change as both front-ends gather it for `judge` (`pants gate`, `epoch-gate check`): the working
tree's changed set against a base that must be reviewed history, or in trusted mode git's merge of the
candidate into the checkout's commit; and the tree a statement would name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from epoch_gate.change.candidate import Candidate, open_candidate
from epoch_gate.change.changed import ChangedPath, changed_paths, check_trusted, default_base
from epoch_gate.evidence.folders import read_file
from epoch_gate.change.git import read_at
from epoch_gate.change.oracle import Reader
from epoch_gate.reasons import EvidenceError, Reason
from epoch_gate.change.tree import ReviewedTree, reviewed_tree


@dataclass(frozen=True)
class Change:
    """What is judged: the changed set and its base (None: unavailable, and `findings` say why), the
    candidate in trusted mode, and the reasons gathering them gave."""

    base: Optional[str]
    changed: Optional[tuple[ChangedPath, ...]]
    candidate: Optional[Candidate]
    findings: tuple[Reason, ...]

    def reader(self, root: Path) -> Reader:
        """How the judge reads a path in what is judged: the merged tree's blob, or the working tree's file."""
        candidate = self.candidate
        if candidate is not None:
            return lambda path: read_at(root, candidate.tree, path)
        return lambda path: read_file(root, path)


def local_change(root: Path, base: Optional[str], trusted_refs: Sequence[str], *, check_base: bool = True) -> Change:
    """The working tree against `base` (by default the merge base with the first trusted ref the clone
    holds). A base that is not reviewed history still gives the changed set, so the report shows what
    the change touched."""
    try:
        merge_base, changed = changed_paths(root, base or default_base(root, trusted_refs))
    except EvidenceError as error:
        return Change(None, None, None, (error.reason,))
    try:
        check_trusted(root, merge_base, trusted_refs if check_base else ())
    except EvidenceError as error:
        return Change(merge_base, changed, None, (error.reason,))
    return Change(merge_base, changed, None, ())


def candidate_change(root: Path, revision: str, trusted_refs: Sequence[str]) -> Change:
    """Trusted mode: git's merge of `revision` into this checkout's commit, against that commit."""
    try:
        candidate = open_candidate(root, revision, trusted_refs)
    except EvidenceError as error:
        return Change(None, None, None, (error.reason,))
    return Change(candidate.base, candidate.changed, candidate, ())


def reviewed(root: Path, change: Change) -> tuple[Optional[ReviewedTree], list[Reason]]:
    """The tree a statement names: the merged tree in trusted mode, else the working tree's as git hashes
    it (a tree git cannot name is not a tree to pass)."""
    if change.candidate is not None:
        return change.candidate.reviewed_tree(), []
    if not change.base:  # without the changed set the gate is closed already, and git said why
        return None, []
    try:
        return reviewed_tree(root), []
    except EvidenceError as error:
        return None, [error.reason]
