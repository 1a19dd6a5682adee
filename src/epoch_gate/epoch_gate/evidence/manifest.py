"""The property manifest: k properties drawn from the catalog by a seed, with a digest of the draw."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from epoch_gate.evidence import strictjson
from epoch_gate.evidence.atomic import replace_file
from epoch_gate.evidence.catalog import Catalog, Property, property_from_json
from epoch_gate.evidence.hashing import canonical_json, canonical_sha256
from epoch_gate.reasons import Code, Reason, fail

SCHEMA = 1
# Ranks each property by SHA-256 of (algorithm, seed, name) and keeps the k lowest. Unlike
# random.Random, it gives the same draw on every interpreter, version and machine.
ALGORITHM = "sha256-rank-v1"
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Manifest:
    seed: int
    k: int
    algorithm: str
    properties: tuple[Property, ...]
    manifest_sha256: str

    def body(self) -> dict[str, object]:
        return manifest_body(self.seed, self.properties)

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "algorithm": self.algorithm,
            "k": self.k,
            **self.body(),
            "manifest_sha256": self.manifest_sha256,
        }

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json()) + b"\n"


def manifest_body(seed: int, properties: tuple[Property, ...]) -> dict[str, object]:
    """What manifest_sha256 is taken over (docs/contract.md, The manifest): the seed and the properties, nothing else."""
    return {"seed": seed, "properties": [p.to_json() for p in properties]}


def _rank(seed: int, name: str) -> str:
    return hashlib.sha256(f"{ALGORITHM}\0{seed}\0{name}".encode("utf-8")).hexdigest()


def draw(catalog: Catalog, seed: int, k: int) -> tuple[Property, ...]:
    """The k properties the seed selects, in name order."""
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, {MAX_SEED}]")
    if not 1 <= k <= len(catalog.properties):
        raise ValueError(f"k must be in [1, {len(catalog.properties)}] for this catalog")
    ranked = sorted(catalog.properties, key=lambda p: (_rank(seed, p.name), p.name))
    return tuple(sorted(ranked[:k], key=lambda p: p.name))


def sample(catalog: Catalog, seed: int, k: int) -> Manifest:
    properties = draw(catalog, seed, k)
    return Manifest(seed, k, ALGORITHM, properties, canonical_sha256(manifest_body(seed, properties)))


def parse_manifest(data: bytes, path: str) -> Manifest:
    raw = strictjson.require_object(
        strictjson.loads(data, path),
        path,
        {"schema": int, "algorithm": str, "k": int, "seed": int, "properties": list, "manifest_sha256": str},
    )
    if raw["schema"] != SCHEMA:
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "unsupported manifest schema", expected=str(SCHEMA), found=str(raw["schema"])
        )
    if raw["algorithm"] != ALGORITHM:
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "unknown sampling algorithm", expected=ALGORITHM, found=raw["algorithm"][:80]
        )
    if not 0 <= raw["seed"] <= MAX_SEED:
        raise fail(
            Code.ARTIFACT_MALFORMED, path, "seed out of range", expected=f"0..{MAX_SEED}", found=str(raw["seed"])[:80]
        )
    if not raw["properties"]:
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "manifest samples no property: it would judge nothing",
            expected="at least one property",
            found="none",
        )
    properties = tuple(property_from_json(item, f"{path}#properties[{i}]") for i, item in enumerate(raw["properties"]))
    if raw["k"] != len(properties):
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "k does not match the number of properties",
            expected=str(len(properties)),
            found=str(raw["k"]),
        )
    if len({p.name for p in properties}) != len(properties):
        raise fail(
            Code.ARTIFACT_MALFORMED,
            path,
            "a property is sampled twice",
            expected="unique names",
            found=", ".join(p.name for p in properties),
        )
    return Manifest(raw["seed"], raw["k"], raw["algorithm"], properties, raw["manifest_sha256"])


def load_manifest(path: Path, display: str) -> Manifest:
    return parse_manifest(strictjson.read_bytes(path, display), display)


def verify_manifest(manifest: Manifest, catalog: Catalog, path: str) -> list[Reason]:
    """Checks the digest, then that each property is the catalog's, then that this is the seed's draw."""
    reasons: list[Reason] = []
    digest = canonical_sha256(manifest.body())
    if digest != manifest.manifest_sha256:
        reasons.append(
            Reason(
                Code.MANIFEST_DIGEST_MISMATCH,
                path,
                expected=digest,
                found=manifest.manifest_sha256,
                message="manifest_sha256 is not the digest of {seed, properties}",
            )
        )
    known = catalog.by_name()
    for prop in manifest.properties:
        if prop.name not in known:
            reasons.append(
                Reason(
                    Code.PROPERTY_NOT_IN_CATALOG,
                    path,
                    expected="a catalog property",
                    found=prop.name,
                    message=f"sampled property {prop.name} is not in the catalog",
                )
            )
        elif known[prop.name] != prop:
            differs = [
                f for f in ("bound", "predicate", "description") if getattr(prop, f) != getattr(known[prop.name], f)
            ]
            reasons.append(
                Reason(
                    Code.PROPERTY_DIFFERS_FROM_CATALOG,
                    path,
                    expected="; ".join(f"{f}={getattr(known[prop.name], f)}" for f in differs),
                    found="; ".join(f"{f}={getattr(prop, f)}" for f in differs),
                    message=f"sampled property {prop.name} differs from the catalog",
                )
            )
    if 1 <= manifest.k <= len(catalog.properties):
        expected = tuple(p.name for p in draw(catalog, manifest.seed, manifest.k))
        found = tuple(p.name for p in manifest.properties)
        if expected != found:
            reasons.append(
                Reason(
                    Code.MANIFEST_NOT_DRAW,
                    path,
                    expected=",".join(expected),
                    found=",".join(found),
                    message=f"these are not the {manifest.k} properties seed {manifest.seed} "
                    f"draws from the catalog ({ALGORITHM})",
                )
            )
    else:
        reasons.append(
            Reason(
                Code.MANIFEST_NOT_DRAW,
                path,
                expected=f"k in 1..{len(catalog.properties)}",
                found=str(manifest.k),
                message="k cannot be drawn from this catalog",
            )
        )
    return reasons


def write_manifest(manifest: Manifest, path: Path) -> None:
    replace_file(path, manifest.to_bytes())


def properties_bytes(properties: tuple[Property, ...]) -> bytes:
    """Properties drawn beyond the manifest (`held_out.draw_properties`), as the replay's runner reads them
    (`load_properties`): judged after the manifest's, under the manifest's identity."""
    return canonical_json({"held_out_properties": [p.to_json() for p in properties]}) + b"\n"


def load_properties(path: Path, display: str) -> tuple[Property, ...]:
    raw = strictjson.require_object(
        strictjson.loads(strictjson.read_bytes(path, display), display), display, {"held_out_properties": list}
    )
    return tuple(
        property_from_json(item, f"{display}#held_out_properties[{i}]")
        for i, item in enumerate(raw["held_out_properties"])
    )
