"""Held-out draws: a second world per suite that the change could not see before review.

The trusted judge derives a seed from a key that only CI holds and from what is judged: the merged
tree's id, the suite's address and its epoch id. The suite's generator runs again with that seed, and
every sampled property is evaluated over that world too. Without the key, the same candidate gets the
same seed (and so a cache hit); another candidate, another world. The key stays in the gate's own
process: what reaches the build engine is the tree's draw key (an HMAC of the key, good for that tree
only), and what reaches a process is the suite's seed (an HMAC of the draw key). The report names the
seed by its sha256 only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from epoch_gate.reasons import Code, Reason

DOMAIN = b"epoch-gate-held-out-v1"
MIN_KEY_BYTES = 16


@dataclass(frozen=True)
class Key:
    """Where the key comes from (never the key itself, which `load_key` returns separately)."""

    env: str  # the environment variable that holds it
    file: Optional[str] = None  # or a file that does, when set

    def source(self) -> str:
        return (
            f"the file {self.file} ([gate].held_out_key_file)"
            if self.file
            else f"${self.env} ([gate].held_out_key_env)"
        )


def load_key(key: Key, environ: Mapping[str, str]) -> tuple[Optional[bytes], Optional[Reason]]:
    """The key's bytes (surrounding whitespace stripped), None when none is configured, or why it is
    unusable: too short, or a file that cannot be read. An unset or empty variable is no key."""
    if key.file:
        try:
            data = Path(key.file).read_bytes().strip()
        except OSError as error:
            return None, Reason(
                Code.HELD_OUT_UNAVAILABLE,
                key.file,
                "a readable key file",
                type(error).__name__,
                "the held-out key file named by [gate].held_out_key_file cannot be read",
                "Make the key file readable to the gate, or fix `[gate].held_out_key_file`.",
            )
    else:
        data = os.fsencode(environ.get(key.env, "")).strip()
        if not data:
            return None, None
    if len(data) < MIN_KEY_BYTES:
        return None, Reason(
            Code.HELD_OUT_UNAVAILABLE,
            key.file or f"${key.env}",
            f"at least {MIN_KEY_BYTES} bytes",
            f"{len(data)} bytes",
            "the held-out key is too short to keep its draws unpredictable: "
            "use 32 random bytes (`openssl rand -hex 32`)",
            "Replace the key with 32 random bytes (`openssl rand -hex 32`).",
        )
    return data, None


def draw_key(key: bytes, tree: str) -> str:
    """The key for one merged tree's draws (hex): reveals nothing of the key, nor of another tree's draws."""
    return hmac.new(key, DOMAIN + b"\0tree\0" + tree.encode("ascii"), hashlib.sha256).hexdigest()


def seed(tree_key: str, suite: str, epoch_id: str) -> str:
    """A suite's held-out seed (64 hex digits) for the tree whose draw key is `tree_key`."""
    message = DOMAIN + b"\0seed\0" + suite.encode("utf-8") + b"\0" + epoch_id.encode("utf-8")
    return hmac.new(bytes.fromhex(tree_key), message, hashlib.sha256).hexdigest()


def seed_sha256(value: str) -> str:
    """How reports and statements name a seed: its digest, which says which seed without giving it."""
    return hashlib.sha256(value.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class HeldOut:
    """What a suite's report says of held-out draws: drawn (the seed's digest, the world's digest and
    its record counts), or not, and why."""

    drawn: bool
    why: str = ""
    seed_sha256: Optional[str] = None
    world_sha256: Optional[str] = None
    records: tuple[tuple[str, int], ...] = ()  # (bound, count), sorted
    cached: Optional[bool] = None  # whether its replay came from a cache (the same candidate judged again)

    def to_json(self) -> dict[str, object]:
        if not self.drawn:
            return {"drawn": False, "why": self.why}
        return {
            "drawn": True,
            "seed_sha256": self.seed_sha256,
            "world_sha256": self.world_sha256,
            "records": dict(self.records),
            "cached": self.cached,
        }

    def line(self) -> str:
        if not self.drawn:
            return f"held-out draws did not run: {self.why}"
        counts = ", ".join(f"{n} {bound}" for bound, n in self.records)
        return f"held-out world {str(self.world_sha256)[:12]} from seed {str(self.seed_sha256)[:12]}" + (
            f" ({counts})" if counts else ""
        )


def no_key(env: str) -> str:
    return f"no key (${env} is unset): the pinned world only"


LOCAL = "local mode: only CI's trusted mode, with the key, draws held-out worlds"
