"""Signed statements with a real Ed25519 key pair: sign, then every way verification refuses."""

from __future__ import annotations

import base64
import datetime
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from epoch_gate.cli.main import main
from epoch_gate.verdict import dsse
from epoch_gate.verdict.verify_statement import Expected, verify

COMMIT, TREE = "c" * 40, "7" * 40
REPOSITORY = "https://example.invalid/repo"
NOW = datetime.datetime(2026, 12, 7, 20, 0, tzinfo=datetime.timezone.utc)
KEY = Ed25519PrivateKey.generate()


def statement(**predicate: Any) -> dict[str, Any]:
    """A statement as trusted mode writes it for a candidate merged into the trusted ref."""
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": "git-worktree", "digest": {"gitTree": TREE}},
            {"name": "report.json", "digest": {"sha256": "r" * 64}},
        ],
        "predicateType": "https://slsa.dev/verification_summary/v1",
        "predicate": {
            "verifier": {"id": "pkg:generic/epoch-gate", "version": {"epoch_gate": "0.1.0"}},
            "timeVerified": "2026-12-07T19:00:00Z",
            "resourceUri": f"git+https://example.invalid/repo@{COMMIT}",
            "policy": {"name": "epoch_gate oracle", "uri": "git+https://example.invalid/repo@" + "o" * 40},
            "verificationResult": "PASSED",
            "verifiedLevels": ["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED"],
            **predicate,
        },
    }


def signed(value: Any, key: Ed25519PrivateKey = KEY) -> bytes:
    return dsse.sign(json.dumps(value).encode(), key)


def expect(**given: Any) -> Expected:
    return Expected(**{"repository": REPOSITORY, "commit": COMMIT, "now": NOW, "tree": TREE, **given})


def refused(envelope: bytes, **expected: Any) -> list[str]:
    refusals, _ = verify(envelope, KEY.public_key(), expect(**expected))
    return [r.check for r in refusals]


def test_a_signed_passing_statement_verifies() -> None:
    envelope = signed(statement())
    refusals, keyid = verify(envelope, KEY.public_key(), expect())
    assert refusals == [] and keyid == dsse.key_id(KEY.public_key())
    opened = dsse.open_envelope(envelope, KEY.public_key())
    assert isinstance(opened, dsse.Opened) and json.loads(opened.payload) == statement()
    assert json.loads(envelope)["payloadType"] == "application/vnd.in-toto+json"


def test_the_pre_authentication_encoding_is_dssev1s() -> None:
    assert dsse.pae("a/b", b"xyz") == b"DSSEv1 3 a/b 3 xyz"
    assert dsse.pae("t", b"") == b"DSSEv1 1 t 0 "


def _flip(envelope: bytes, field: str, at: int = 10) -> bytes:
    raw = json.loads(envelope)
    holder = raw["signatures"][0] if field == "sig" else raw
    data = bytearray(base64.b64decode(holder[field]))
    data[at] ^= 1
    holder[field] = base64.b64encode(bytes(data)).decode()
    return json.dumps(raw).encode()


@pytest.mark.parametrize(
    "make, checks",
    [
        (lambda: _flip(signed(statement()), "payload"), ["signature"]),
        (lambda: _flip(signed(statement()), "sig"), ["signature"]),
        (lambda: signed(statement(), Ed25519PrivateKey.generate()), ["signature"]),
        (lambda: signed(statement(verificationResult="FAILED", verifiedLevels=["FAILED"])), ["result", "levels"]),
        (lambda: signed(statement(verifiedLevels=["EPOCH_GATE_ELIGIBLE"])), ["levels"]),
        (lambda: signed(statement(verifiedLevels=["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED", "FAILED"])), ["levels"]),
        (lambda: signed(statement(verifiedLevels=["EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED", 1])), ["levels"]),
        (lambda: signed(statement(resourceUri=f"git+https://elsewhere.invalid/repo@{COMMIT}")), ["commit"]),
        (
            lambda: signed(statement(policy={"name": "epoch_gate oracle", "uri": "git+https://elsewhere.invalid/r@o"})),
            ["policy"],
        ),
        (
            lambda: dsse.sign(json.dumps(statement()).replace('"_type"', '"_type": "x", "_type"', 1).encode(), KEY),
            ["statement"],
        ),
        (lambda: signed(statement(timeVerified="2026-12-01T19:00:00Z")), ["age"]),
        (lambda: signed(statement(timeVerified="2026-12-08T19:00:00Z")), ["age"]),
        (lambda: signed(statement(timeVerified="yesterday")), ["age"]),
        (lambda: signed(statement(resourceUri="git+https://example.invalid/repo@" + "d" * 40)), ["commit"]),
        (lambda: signed(statement(verifier={"id": "pkg:generic/other"})), ["verifier"]),
        (lambda: signed(statement(policy={"name": "another", "uri": "x"})), ["policy"]),
        (lambda: signed({**statement(), "_type": "other"}), ["statement"]),
        (lambda: signed([1, 2]), ["statement"]),
        (lambda: dsse.sign(b"not json", KEY), ["statement"]),
        (lambda: signed({**statement(), "subject": []}), ["subject"]),
    ],
)
def test_each_way_a_statement_fails_is_refused_by_its_check(make: Callable[[], bytes], checks: list[str]) -> None:
    assert refused(make(), levels=("EPOCH_GATE_ELIGIBLE", "EPOCH_GATE_JAILED")) == checks


def test_a_subject_of_another_commit_or_tree_is_refused() -> None:
    merged_from_head = statement()
    merged_from_head["subject"][0]["digest"] = {"gitCommit": "d" * 40, "gitTree": TREE}
    assert refused(signed(merged_from_head)) == ["commit"]
    assert refused(signed(statement()), tree="8" * 40) == ["tree"]
    assert refused(signed(statement()), policy_uri="git+https://example.invalid/repo@" + "p" * 40) == ["policy"]
    # A statement about a merge says which tree only: the consumer names it, or the oracle it expects
    assert refused(signed(statement()), tree=None) == ["tree"]
    assert refused(signed(statement()), tree=None, policy_uri="git+https://example.invalid/repo@" + "o" * 40) == []
    head = statement()
    head["subject"][0]["digest"] = {"gitCommit": COMMIT, "gitTree": TREE}
    assert refused(signed(head), tree=None) == []


def test_an_envelope_of_many_signatures_or_another_keys_is_refused() -> None:
    raw = json.loads(signed(statement()))
    raw["signatures"] = raw["signatures"] * (dsse.MAX_SIGNATURES + 1)
    assert refused(json.dumps(raw).encode()) == ["signature"]
    raw = json.loads(signed(statement()))
    raw["signatures"][0]["keyid"] = "0" * 64  # a hint naming another key: not this key's signature
    assert refused(json.dumps(raw).encode()) == ["signature"]
    raw["signatures"][0].pop("keyid")  # no hint: tried
    assert refused(json.dumps(raw).encode()) == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=200).map(str.encode))
def test_no_envelope_ends_in_a_traceback(data: bytes) -> None:
    refusals, _ = verify(data, KEY.public_key(), expect())
    assert refusals and refusals[0].check == "signature"


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=8), c),
        max_leaves=20,
    )
)
def test_no_signed_payload_ends_in_a_traceback(value: Any) -> None:
    assert refused(signed(value))


def test_keys_load_from_pem_and_hex_and_refuse_others() -> None:
    pem = KEY.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    seed = KEY.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()).hex().encode()
    for data in (pem, seed):
        assert dsse.key_id(dsse.load_private_key(data).public_key()) == dsse.key_id(KEY.public_key())
    public_pem = KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    assert dsse.key_id(dsse.load_public_key(public_pem)) == dsse.key_id(KEY.public_key())
    for bad in (b"", b"zz" * 32, b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"):
        with pytest.raises(dsse.KeyUnusable):
            dsse.load_private_key(bad)
    key, why = dsse.signing_key("UNSET_FOR_THE_TEST", None, {})
    assert (key, why) == (None, "")
    key, why = dsse.signing_key("K", None, {"K": "not a key"})
    assert key is None and why.startswith("$K holds not an unencrypted PKCS#8 PEM key") and "not a key" not in why


def test_the_command_verifies_and_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    public = tmp_path / "key.pub"
    public.write_bytes(KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    envelope = tmp_path / "statement.intoto.dsse.json"
    fresh = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    envelope.write_bytes(signed(statement(timeVerified=fresh)))
    args = ["verify-statement", str(envelope), "--public-key", str(public), "--repository", REPOSITORY]
    args += ["--tree", TREE, "--commit", COMMIT]
    assert main(args) == 0
    assert capsys.readouterr().out.startswith(
        f"verified  PASSED for {COMMIT} at EPOCH_GATE_ELIGIBLE, EPOCH_GATE_JAILED, signed by"
    )
    assert main([*args, "--require-level", "EPOCH_GATE_HELD_OUT"]) == 1
    assert capsys.readouterr().err.startswith("refused   levels: expected EPOCH_GATE_HELD_OUT; found [")
    assert main([*args[:-1], "d" * 40]) == 1
    assert f"refused   commit: expected git+{REPOSITORY}@{'d' * 40}; found " in capsys.readouterr().err
    public.write_text("not a key")
    assert main(args) == 1
    assert capsys.readouterr().err.startswith("refused   key: expected an Ed25519 public key")
