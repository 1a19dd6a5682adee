"""`epoch-gate verify-statement`: whether a signed statement says what its consumer (a merge bot, a release
job) must know before it trusts a verdict: signed by the key it trusts, about the commit (and tree) it is
about to merge, by the verifier and under the policy it expects, PASSED, at the levels it requires, and
recent. Every check runs; each that fails is one refusal naming it, expected versus found."""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from epoch_gate.verdict.attestation import (
    ELIGIBLE_LEVEL,
    JAILED_LEVEL,
    POLICY_NAME,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    SUBJECT_NAME,
    VERIFIER_ID,
)
from epoch_gate.verdict.dsse import unique_keys, open_envelope

CLOCK_SKEW = datetime.timedelta(minutes=5)  # a statement a little in the future is another clock's, not forged
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")


@dataclass(frozen=True)
class Expected:
    """What the consumer requires of the statement."""

    repository: str  # as the statement's URIs name it (`git+<repository>@...`): a key may sign for several
    commit: str
    now: datetime.datetime
    tree: Optional[str] = None
    verifier_id: str = VERIFIER_ID
    policy_uri: Optional[str] = None  # `git+<repository>@<oracle commit>`: the oracle that judged, when required
    levels: tuple[str, ...] = (ELIGIBLE_LEVEL, JAILED_LEVEL)
    max_age: datetime.timedelta = datetime.timedelta(hours=24)


@dataclass(frozen=True)
class Refusal:
    check: str
    expected: str
    found: str

    def line(self) -> str:
        return f"refused   {self.check}: expected {self.expected}; found {self.found}"


def _text(value: object) -> str:
    return json.dumps(value)[:200] if not isinstance(value, str) else value[:200]


def _at(value: Any, *path: str) -> Any:
    """value[path[0]][path[1]]..., or None where a step is not an object holding it."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _subject(statement: Any, expected: Expected) -> list[Refusal]:
    """The commit judged: the resourceUri's (always the candidate's), and the subject's gitCommit when it has
    one; the tree, when required, the subject's gitTree."""
    subjects = statement.get("subject")
    found = [s for s in subjects if _at(s, "name") == SUBJECT_NAME] if isinstance(subjects, list) else []
    digest = _at(found[0], "digest") if len(found) == 1 else None
    if not isinstance(digest, dict):
        return [Refusal("subject", f"one subject named {SUBJECT_NAME} with a digest", _text(subjects))]
    refusals = []
    uri, wanted = _at(statement, "predicate", "resourceUri"), f"git+{expected.repository}@{expected.commit}"
    if uri != wanted or digest.get("gitCommit", expected.commit) != expected.commit:
        refusals.append(Refusal("commit", wanted, f"{_text(uri)} (gitCommit {digest.get('gitCommit')})"))
    if expected.tree is not None and digest.get("gitTree") != expected.tree:
        refusals.append(Refusal("tree", expected.tree, _text(digest.get("gitTree"))))
    elif expected.tree is None and expected.policy_uri is None and "gitCommit" not in digest:
        # The commit merged into the trusted ref: which tree, under which oracle, only these can say
        refusals.append(
            Refusal("tree", "--tree or --policy-uri for a statement about a merge", _text(digest.get("gitTree")))
        )
    return refusals


def _age(predicate: Any, expected: Expected) -> list[Refusal]:
    when = _at(predicate, "timeVerified")
    if not isinstance(when, str) or not _TIME.match(when):
        return [Refusal("age", "timeVerified as YYYY-MM-DDTHH:MM:SSZ", _text(when))]
    try:
        verified = datetime.datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return [Refusal("age", "timeVerified a real time", when)]
    if verified > expected.now + CLOCK_SKEW:
        return [Refusal("age", f"verified by now ({expected.now:%Y-%m-%dT%H:%M:%SZ})", when)]
    if expected.now - verified > expected.max_age:
        return [Refusal("age", f"verified within {expected.max_age} of {expected.now:%Y-%m-%dT%H:%M:%SZ}", when)]
    return []


def verify(envelope: bytes, public: Ed25519PublicKey, expected: Expected) -> tuple[list[Refusal], str]:
    """Every refusal (none: verified), and the signing key's id when a signature held."""
    opened = open_envelope(envelope, public)
    if isinstance(opened, str):
        return [Refusal("signature", "a DSSE envelope signed by the given key", opened)], ""
    try:
        statement = json.loads(opened.payload, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError):
        return [Refusal("statement", "an in-toto Statement (JSON)", "a payload that is not JSON")], opened.keyid
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        return [Refusal("statement", STATEMENT_TYPE, _text(_at(statement, "_type")))], opened.keyid
    refusals = []
    if statement.get("predicateType") != PREDICATE_TYPE:
        refusals.append(Refusal("predicate", PREDICATE_TYPE, _text(statement.get("predicateType"))))
    predicate = statement.get("predicate")
    refusals += _subject(statement, expected)
    if _at(predicate, "verifier", "id") != expected.verifier_id:
        refusals.append(Refusal("verifier", expected.verifier_id, _text(_at(predicate, "verifier", "id"))))
    policy = (_at(predicate, "policy", "name"), _at(predicate, "policy", "uri"))
    ours = isinstance(policy[1], str) and policy[1].startswith(f"git+{expected.repository}@")
    if policy[0] != POLICY_NAME or not ours or (expected.policy_uri is not None and policy[1] != expected.policy_uri):
        wanted = f"{POLICY_NAME} at {expected.policy_uri or f'git+{expected.repository}@<commit>'}"
        refusals.append(Refusal("policy", wanted, f"{_text(policy[0])} at {_text(policy[1])}"))
    if _at(predicate, "verificationResult") != "PASSED":
        refusals.append(Refusal("result", "PASSED", _text(_at(predicate, "verificationResult"))))
    levels = _at(predicate, "verifiedLevels")
    plain = isinstance(levels, list) and all(isinstance(level, str) for level in levels) and "FAILED" not in levels
    if not plain or any(level not in levels for level in expected.levels):
        refusals.append(Refusal("levels", ", ".join(expected.levels), _text(levels)))
    refusals += _age(predicate, expected)
    return refusals, opened.keyid
