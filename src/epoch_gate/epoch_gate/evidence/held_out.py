"""Held-out draws: a second world per suite, and properties of its catalog beyond the manifest, that the
change could not see before review.

The trusted judge derives a seed from a key that only CI holds and from what is judged: the merged
tree's id, the suite's address and its epoch id. The suite's generator runs again with that seed, and
every sampled property is evaluated over that world too. A second seed, on its own label, draws further
properties from the catalog outside the manifest (`draw_properties`), judged over both worlds: the
manifest is committed, so a change can see which properties judge it, and not these. Without the key, the same candidate gets the
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
from typing import Mapping, Optional, Union

from epoch_gate.evidence.catalog import Catalog, Property
from epoch_gate.evidence.manifest import Manifest
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


def property_seed(tree_key: str, suite: str, epoch_id: str) -> str:
    """A suite's seed for its held-out properties (64 hex digits): another label than the world's, so that
    neither seed tells anything of the other."""
    message = DOMAIN + b"\0properties\0" + suite.encode("utf-8") + b"\0" + epoch_id.encode("utf-8")
    return hmac.new(bytes.fromhex(tree_key), message, hashlib.sha256).hexdigest()


# Ranks each property outside the manifest by SHA-256 of (algorithm, seed, name) and keeps the lowest, as
# the manifest's draw does (`manifest.ALGORITHM`): the same on every interpreter and machine.
PROPERTIES_ALGORITHM = "sha256-rank-held-out-v1"
ALL = "all"


def draw_properties(catalog: Catalog, manifest: Manifest, seed: str, count: Union[int, str]) -> tuple[Property, ...]:
    """The `count` properties (`ALL`: every one) of the catalog outside the manifest that `seed` selects,
    in name order."""
    sampled = {p.name for p in manifest.properties}
    outside = [p for p in catalog.properties if p.name not in sampled]
    ranked = sorted(
        outside,
        key=lambda p: (hashlib.sha256(f"{PROPERTIES_ALGORITHM}\0{seed}\0{p.name}".encode("utf-8")).hexdigest(), p.name),
    )
    return tuple(sorted(ranked if count == ALL else ranked[: int(count)], key=lambda p: p.name))


@dataclass(frozen=True)
class PropertyDraw:
    """What a suite's report says of its held-out properties: drawn (the seed's digest and the names,
    maybe none when the catalog has no property outside the manifest), or not, and why."""

    drawn: bool
    why: str = ""
    seed_sha256: Optional[str] = None
    names: tuple[str, ...] = ()
    count: str = ""  # as the suite asks: a number, or `all`

    def to_json(self) -> dict[str, object]:
        if not self.drawn:
            return {"drawn": False, "why": self.why}
        return {"drawn": True, "seed_sha256": self.seed_sha256, "count": self.count, "properties": list(self.names)}

    def line(self) -> str:
        if not self.drawn:
            return f"held-out properties not drawn: {self.why}"
        drawn = ", ".join(self.names) or "none (the catalog has no property outside the manifest)"
        return f"held-out properties from seed {str(self.seed_sha256)[:12]} ({self.count}): {drawn}"


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
LOCAL_PROPERTIES = "local mode: only CI's trusted mode, with the key, draws held-out properties; the manifest only"


def no_key_properties(env: str) -> str:
    return f"no key (${env} is unset): the manifest only"
