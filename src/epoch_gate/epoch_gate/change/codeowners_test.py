from __future__ import annotations

import pytest

from epoch_gate.change import codeowners
from epoch_gate.change.protection import ProtectedSet
from epoch_gate.reasons import Code, EvidenceError

PROTECTED = ProtectedSet(
    frozenset({"fixtures/EPOCH", "pants.toml", "checks/BUILD"}),
    ("checks/*_properties.py", "observations/", "/ops/gate/"),
)


def test_every_protected_entry_is_anchored_and_owned() -> None:
    lines = codeowners.block(PROTECTED, ["org/oracle", "ana@example.com"])
    assert lines == [
        codeowners.BEGIN,
        "/checks/BUILD @org/oracle ana@example.com",
        "/fixtures/EPOCH @org/oracle ana@example.com",
        "/pants.toml @org/oracle ana@example.com",
        "/ops/gate/ @org/oracle ana@example.com",
        "/checks/*_properties.py @org/oracle ana@example.com",
        "/observations/ @org/oracle ana@example.com",
        codeowners.END,
    ]


def test_no_owners_or_an_inexpressible_path_is_refused() -> None:
    with pytest.raises(EvidenceError) as caught:
        codeowners.block(PROTECTED, [])
    assert caught.value.reason.code is Code.ARTIFACT_MISSING
    for entry in ("has space.txt", "checks/**.py"):
        with pytest.raises(EvidenceError):
            codeowners.block(ProtectedSet(frozenset(), (entry,)), ["@o"])


def test_a_leading_slash_protects_what_codeowners_says_it_does() -> None:
    assert PROTECTED.matches("ops/gate/run.sh") and "/ops/gate/ @o" in codeowners.block(PROTECTED, ["@o"])
    assert codeowners.block(ProtectedSet(frozenset(), ("a/**/*.py",)), ["@o"])[1] == "/a/**/*.py @o"


def test_check_wants_the_block_last() -> None:
    lines = codeowners.block(PROTECTED, ["@o"])
    codeowners.check("* @everyone\n" + "\n".join(lines) + "\n\n", lines, "CODEOWNERS")
    for text, code in [
        ("* @everyone\n", Code.ARTIFACT_MISSING),
        ("\n".join(lines) + "\n/fixtures/ @someone-else\n", Code.ARTIFACT_MALFORMED),
        ("\n".join(lines[:-2] + lines[-1:]), Code.ARTIFACT_MALFORMED),
    ]:
        with pytest.raises(EvidenceError) as caught:
            codeowners.check(text, lines, "CODEOWNERS")
        assert caught.value.reason.code is code


def test_a_suites_owners_review_its_oracle_with_the_repositorys() -> None:
    payments = codeowners.SuiteOwners(
        "payments:props", ("org/payments",), ("payments/EPOCH", "payments/BUILD", "shared/BUILD")
    )
    silent = codeowners.SuiteOwners("inventory:props", (), ("inventory/EPOCH", "shared/BUILD"))
    lines = codeowners.block(PROTECTED, ["org/oracle"], [silent, payments])
    start = lines.index("# suite payments:props")
    # The BUILD file both suites use stays with the repository's owners: payments cannot approve it.
    assert lines[start + 1 : -1] == [
        "/payments/BUILD @org/oracle @org/payments",
        "/payments/EPOCH @org/oracle @org/payments",
    ]
    assert "# suite inventory:props" not in lines and lines[-1] == codeowners.END
