"""The statement in a DSSE envelope, signed with Ed25519 (https://github.com/secure-systems-lab/dsse).

The signature is over the spec's pre-authentication encoding of the payload type and the payload's bytes,
so neither can be swapped for another. Keys are Ed25519: a private key as PKCS#8 PEM (what `openssl genpkey
-algorithm ed25519` writes) or its 32-byte seed in hex; a public key as SubjectPublicKeyInfo PEM (`openssl
pkey -pubout`) or its 32 bytes in hex. `cryptography` (the Python Cryptographic Authority's, on OpenSSL)
does the primitive: a maintained library, already a wheel on every platform Pants runs on; in-toto's and
securesystemslib's signers add key formats and a dependency tree the gate does not need.
"""

from __future__ import annotations

import base64
import functools
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_FILE = "statement.intoto.dsse.json"
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024
MAX_SIGNATURES = 8  # each is checked over the whole payload: a verifier's time stays bounded


class KeyUnusable(ValueError):
    """A key that cannot be read, saying why (never the key's bytes)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSEv1's pre-authentication encoding: what is signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _hex_key(text: bytes) -> Optional[bytes]:
    stripped = text.strip()
    if len(stripped) != 64:
        return None
    try:
        return binascii.unhexlify(stripped)
    except (binascii.Error, ValueError):
        return None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object hook: a key given twice is refused (two readers could keep different ones)."""
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a key given twice")
    return found


def load_private_key(data: bytes) -> Ed25519PrivateKey:
    from_pem = functools.partial(load_pem_private_key, password=None)
    key = _load(data, Ed25519PrivateKey.from_private_bytes, from_pem, "an unencrypted PKCS#8 PEM key")
    return _ed25519(key, Ed25519PrivateKey)  # type: ignore[no-any-return]


def load_public_key(data: bytes) -> Ed25519PublicKey:
    key = _load(data, Ed25519PublicKey.from_public_bytes, load_pem_public_key, "a PEM public key")
    return _ed25519(key, Ed25519PublicKey)  # type: ignore[no-any-return]


def _load(data: bytes, from_raw: Callable[[bytes], Any], from_pem: Callable[[bytes], Any], pem: str) -> Any:
    """The key in `data`: 64 hex digits (its raw bytes), else `pem`; else KeyUnusable, naming what it is not."""
    raw = _hex_key(data)
    try:
        return from_raw(raw) if raw is not None else from_pem(data.strip())
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        if raw is not None:
            raise KeyUnusable("64 hex digits that are no Ed25519 key") from None
        raise KeyUnusable(f"not {pem} or 64 hex digits ({type(error).__name__})") from None


def _ed25519(key: Any, kind: type) -> Any:
    if not isinstance(key, kind):
        raise KeyUnusable(f"a {type(key).__name__.lstrip('_')}, not an Ed25519 key")
    return key


def key_id(public: Ed25519PublicKey) -> str:
    """The sha256 of the public key's raw bytes: names the key, and says nothing of the private one."""
    return hashlib.sha256(public.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()


def sign(payload: bytes, key: Ed25519PrivateKey, payload_type: str = PAYLOAD_TYPE) -> bytes:
    """The envelope's bytes: the payload, its type and one signature over their encoding."""
    envelope = {
        "payload": base64.b64encode(payload).decode("ascii"),
        "payloadType": payload_type,
        "signatures": [
            {"keyid": key_id(key.public_key()), "sig": base64.b64encode(key.sign(pae(payload_type, payload))).decode()}
        ],
    }
    return json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode("ascii") + b"\n"


@dataclass(frozen=True)
class Opened:
    payload: bytes
    keyid: str


def open_envelope(data: bytes, public: Ed25519PublicKey) -> Union[Opened, str]:
    """The payload, when a signature of `public` holds over it; else why not."""
    if len(data) > MAX_ENVELOPE_BYTES:
        return f"an envelope of over {MAX_ENVELOPE_BYTES} bytes"
    try:
        envelope: Any = json.loads(data, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError):
        return "not JSON with each key once"
    if not (
        isinstance(envelope, dict)
        and isinstance(envelope.get("payload"), str)
        and isinstance(envelope.get("payloadType"), str)
        and isinstance(envelope.get("signatures"), list)
    ):
        return "not a DSSE envelope (payload, payloadType, signatures)"
    if envelope["payloadType"] != PAYLOAD_TYPE:
        return f"the payload type is {envelope['payloadType'][:80]!r}, not {PAYLOAD_TYPE}"
    try:
        payload = base64.b64decode(envelope["payload"], validate=True)
    except (binascii.Error, ValueError):
        return "the payload is not base64"
    if len(envelope["signatures"]) > MAX_SIGNATURES:
        return f"over {MAX_SIGNATURES} signatures"
    encoded, wanted = pae(envelope["payloadType"], payload), key_id(public)
    for signature in envelope["signatures"]:
        if not isinstance(signature, dict) or not isinstance(signature.get("sig"), str):
            continue
        if signature.get("keyid", wanted) not in ("", wanted):  # DSSE's keyid is a hint: another key's
            continue
        try:
            public.verify(base64.b64decode(signature["sig"], validate=True), encoded)
        except (InvalidSignature, binascii.Error, ValueError):
            continue
        return Opened(payload, key_id(public))
    return f"no signature of the key {key_id(public)[:16]} holds over the payload"


def signing_key(env: str, file: Optional[str], environ: Mapping[str, str]) -> tuple[Optional[Ed25519PrivateKey], str]:
    """The statement's signing key from the file, or else the variable (`[gate].statement_key_file`,
    `[gate].statement_key_env`): the key, or None and why none (empty: none is configured)."""
    source = file or f"${env}"
    try:
        data = Path(file).read_bytes() if file else os.fsencode(environ.get(env, ""))
    except OSError as error:
        return None, f"{source} cannot be read ({type(error).__name__})"
    if not data.strip():
        return None, f"{source} is empty" if file else ""
    try:
        return load_private_key(data), ""
    except KeyUnusable as error:
        return None, f"{source} holds {error}"
