from __future__ import annotations

import dataclasses
import json

import pytest

from epoch_gate.evidence.catalog import Catalog, Property, parse_catalog
from epoch_gate.evidence.hashing import canonical_json, canonical_sha256
from epoch_gate.evidence.manifest import Manifest, draw, manifest_body, parse_manifest, sample, verify_manifest
from epoch_gate.reasons import Code, EvidenceError

CATALOG_YAML = "properties:\n" + "".join(
    f"  - name: p{i:02d}\n    bound: b{i % 3}\n    predicate: checks.mod:p{i:02d}\n    description: Property {i}.\n"
    for i in range(12)
)


def catalog() -> Catalog:
    return parse_catalog(CATALOG_YAML.encode(), "catalog.yaml")


def test_draw_is_pinned_across_interpreters() -> None:
    # Recorded once (the same on CPython 3.9 to 3.13); changing the algorithm must change ALGORITHM.
    assert [p.name for p in draw(catalog(), 20261202, 4)] == ["p02", "p05", "p06", "p11"]
    assert [p.name for p in draw(catalog(), 7, 5)] == ["p00", "p04", "p05", "p07", "p09"]


def test_draw_refuses_impossible_requests() -> None:
    for seed, k in ((-1, 1), (1, 0), (1, 13)):
        with pytest.raises(ValueError):
            draw(catalog(), seed, k)


def test_sample_round_trips_and_verifies() -> None:
    manifest = sample(catalog(), 42, 4)
    parsed = parse_manifest(manifest.to_bytes(), "manifest.json")
    assert parsed == manifest
    assert manifest.manifest_sha256 == canonical_sha256(
        {"seed": 42, "properties": [p.to_json() for p in manifest.properties]}
    )
    assert verify_manifest(parsed, catalog(), "manifest.json") == []


def _resealed(manifest: Manifest, properties: tuple[Property, ...]) -> Manifest:
    """What an agent would do: edit the draw and recompute the digest so it matches its own body."""
    digest = canonical_sha256(manifest_body(manifest.seed, properties))
    return dataclasses.replace(manifest, properties=properties, k=len(properties), manifest_sha256=digest)


def test_a_self_consistent_manifest_that_is_not_the_draw_is_caught() -> None:
    manifest = sample(catalog(), 42, 4)
    others = [p for p in catalog().properties if p not in manifest.properties]
    swapped = _resealed(manifest, tuple(sorted((*manifest.properties[:3], others[0]), key=lambda p: p.name)))
    assert [r.code for r in verify_manifest(swapped, catalog(), "m")] == [Code.MANIFEST_NOT_DRAW]


def test_a_dropped_property_is_caught() -> None:
    manifest = sample(catalog(), 42, 4)
    dropped = _resealed(manifest, manifest.properties[1:])
    assert Code.MANIFEST_NOT_DRAW in [r.code for r in verify_manifest(dropped, catalog(), "m")]


def test_a_loosened_property_is_caught() -> None:
    manifest = sample(catalog(), 42, 4)
    loose = dataclasses.replace(manifest.properties[0], predicate="checks.mod:always_true")
    edited = _resealed(manifest, (loose, *manifest.properties[1:]))
    reasons = verify_manifest(edited, catalog(), "m")
    assert [r.code for r in reasons] == [Code.PROPERTY_DIFFERS_FROM_CATALOG]
    assert "always_true" in reasons[0].found


def test_a_property_missing_from_the_catalog_is_caught() -> None:
    manifest = sample(catalog(), 42, 4)
    ghost = Property("ghost", "b0", "checks.mod:ghost", "Not in the catalog.")
    edited = _resealed(manifest, (*manifest.properties[:3], ghost))
    codes = [r.code for r in verify_manifest(edited, catalog(), "m")]
    assert Code.PROPERTY_NOT_IN_CATALOG in codes and Code.MANIFEST_NOT_DRAW in codes


def test_a_wrong_digest_is_caught() -> None:
    manifest = dataclasses.replace(sample(catalog(), 42, 4), manifest_sha256="0" * 64)
    assert [r.code for r in verify_manifest(manifest, catalog(), "m")] == [Code.MANIFEST_DIGEST_MISMATCH]


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda b: b.update(algorithm="random.Random"), "algorithm"),
        (lambda b: b.update(k=3), "k does not match"),
        (lambda b: b.update(properties=[]), "samples no property"),
        (lambda b: b.update(seed=-1), "seed"),
        (lambda b: b.update(seed=True), "wrong type"),
        (lambda b: b["properties"].append(dict(b["properties"][0])) or b.update(k=5), "sampled twice"),
        # The earlier shape: a manifest entry with a probe says how to migrate, as a catalog entry does.
        (lambda b: b["properties"][0].update(probe="app.api:total"), "has a probe: a predicate now drives"),
    ],
)
def test_parse_refuses_malformed(mutate: object, fragment: str) -> None:
    body = json.loads(sample(catalog(), 42, 4).to_bytes())
    mutate(body)  # type: ignore[operator]
    with pytest.raises(EvidenceError) as caught:
        parse_manifest(canonical_json(body), "manifest.json")
    assert fragment in caught.value.reason.message


@pytest.mark.parametrize(
    "text, code, fragment",
    [
        ("properties: []\n", Code.ARTIFACT_MALFORMED, "empty"),
        ("[]\n", Code.ARTIFACT_MALFORMED, "mapping"),
        (CATALOG_YAML + CATALOG_YAML.split("\n", 1)[1].split("  - name: p01")[0], Code.CATALOG_DUPLICATE, "twice"),
        ("properties:\n  - name: x\n    name: y\n", Code.ARTIFACT_MALFORMED, "duplicate key"),
        (
            "properties:\n  - name: X\n    bound: b\n    predicate: m:f\n    description: d\n",
            Code.ARTIFACT_MALFORMED,
            "name",
        ),
        (
            "properties:\n  - name: x\n    bound: b\n    predicate: not-a-spec\n    description: d\n",
            Code.ARTIFACT_MALFORMED,
            "predicate",
        ),
        ("properties: [\n", Code.ARTIFACT_MALFORMED, "YAML"),
        ("properties:\n  - !!python/object:os.system {}\n", Code.ARTIFACT_MALFORMED, "YAML"),
    ],
)
def test_catalog_refuses(text: str, code: Code, fragment: str) -> None:
    with pytest.raises(EvidenceError) as caught:
        parse_catalog(text.encode(), "catalog.yaml")
    assert caught.value.reason.code is code
    assert fragment in caught.value.reason.message
