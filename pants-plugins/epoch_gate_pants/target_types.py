"""Target types: `epoch_fixture` (the pin, the generator, its inputs), `property_manifest` (the manifest,
its catalog, the predicates) and `sampled_properties` (the replay that `pants test` runs)."""

from __future__ import annotations

from typing import Optional, Union

from pants.engine.addresses import Address
from pants.engine.fs import GlobMatchErrorBehavior
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    BoolField,
    Dependencies,
    Field,
    IntField,
    InvalidFieldException,
    MultipleSourcesField,
    SecondaryOwnerMixin,
    SingleSourceField,
    StringField,
    StringSequenceField,
    Target,
)
from pants.util.strutil import help_text

from epoch_gate.evidence.catalog import MODULE_FUNCTION
from epoch_gate.evidence.held_out import ALL

# What a suite judges of its catalog beyond its manifest in trusted mode: about half the example's manifest
# of 8, which keeps a trusted judgement within some 1.5 times its replay time (docs/benchmarks.md)
DEFAULT_HELD_OUT_PROPERTIES = 4


class _WarnWhenMissing:
    # A missing generator, input or catalog is warned about here and closes the gate with its own
    # reason (a Pants error would end the run without a report).
    default_glob_match_error_behavior = GlobMatchErrorBehavior.warn


class _MayBeMinted:
    # The pin and the manifest are written by `pin-epoch` / `sample-properties`: absent before that.
    # Each is also a secondary owner (mixed in last, after the field's `filespec`): Pants' owner lookup reads
    # only one `SourcesField` per target, so without it a changed pin or manifest maps to no oracle target,
    # and `--changed-dependents` never reaches the suite.
    default_glob_match_error_behavior = GlobMatchErrorBehavior.ignore
    expected_num_files = range(0, 2)


# -- epoch_fixture -----------------------------------------------------------------------------


class EpochFixturePinField(_MayBeMinted, SingleSourceField, SecondaryOwnerMixin):
    alias = "pin"
    required = False
    default = "EPOCH"
    help = help_text(
        """
        The epoch pin, relative to this BUILD file: JSON naming the `epoch_id`, the generator's path
        and sha256, each input's path and sha256, and (once minted with `pants pin-epoch`) the sha256
        of the fixture world the generator produced. Write it with `pants pin-epoch`, never by hand.
        """
    )


class EpochFixtureGeneratorField(_WarnWhenMissing, SingleSourceField, SecondaryOwnerMixin):
    expected_num_files = range(0, 2)  # absent: a reason of the gate, not a crash
    alias = "generator"
    required = True
    value: str
    expected_file_extensions = (".py",)
    help = help_text(
        """
        The fixture generator, a self-contained Python script run as
        `python GENERATOR --out DIR --input FILE...` inside a Pants sandbox that holds only the
        generator and its inputs. It must be deterministic: its output is the epoch's content identity.
        Its bytes, as Pants loads them, must match the pin's `generator_sha256`.
        """
    )


class EpochFixtureInputsField(_WarnWhenMissing, MultipleSourcesField, SecondaryOwnerMixin):
    alias = "inputs"
    default = ()
    help = help_text(
        """
        Files the generator reads (globs relative to this BUILD file), passed as `--input` in order.
        Each one's sha256 must match the pin; an input that is not pinned closes the gate.
        """
    )


class EpochFixtureHeldOutField(BoolField):
    alias = "held_out"
    default = True
    help = help_text(
        """
        Whether the generator takes `--seed HEX` (64 hex digits) and then draws a world other than the
        pinned one, as deterministic as the pinned one. In trusted mode with the held-out key
        (`[gate].held_out_key_env` or `[gate].held_out_key_file`), the gate runs it with a seed the
        candidate cannot predict and judges every sampled property over that world too. A generator
        that refuses `--seed`, or ignores it, closes the gate (`held-out-unavailable`). `False` opts
        this fixture out: its suites are judged over the pinned world only, and the report says so.
        """
    )


class EpochFixtureRegressionsField(_MayBeMinted, SingleSourceField, SecondaryOwnerMixin):
    alias = "regressions"
    required = False
    default = "REGRESSIONS"
    help = help_text(
        """
        The fixture's regression records, relative to this BUILD file: world records a candidate's
        product once failed, each kept by its sha256. Every judgement of every suite over this fixture
        replays them under every property of the suite's catalog over their bound, whatever its
        manifest samples. A protected path, written only by a reviewer's
        `epoch-gate keep-witness OBSERVATION_ID` from a gate's report; absent, no record is kept.
        """
    )


class EpochFixtureTarget(Target):
    alias = "epoch_fixture"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        EpochFixturePinField,
        EpochFixtureGeneratorField,
        EpochFixtureInputsField,
        EpochFixtureHeldOutField,
        EpochFixtureRegressionsField,
    )
    help = help_text(
        """
        A pinned fixture epoch: the pin, the generator and its inputs, and the regression records
        reviewers kept.

        `pants gate` hashes the generator and inputs from the snapshot Pants loads and compares them
        with the pin, runs the generator hermetically to produce the fixture world, and fails closed
        when any of these files is in the changed set.

        Example BUILD file:

            epoch_fixture(
                name="orders_epoch",
                pin="EPOCH",
                generator="generate_orders.py",
                inputs=["orders/base.json"],
            )
        """
    )


# -- property_manifest -------------------------------------------------------------------------


class PropertyManifestSourceField(_MayBeMinted, SingleSourceField, SecondaryOwnerMixin):
    alias = "manifest"
    required = False
    default = "manifest.json"
    help = help_text(
        """
        The property manifest, relative to this BUILD file: the `seed`, the sampling `algorithm`, `k`,
        the sampled `properties` and `manifest_sha256`. Draw it with `pants sample-properties`.
        """
    )


class PropertyManifestCatalogField(_WarnWhenMissing, SingleSourceField, SecondaryOwnerMixin):
    expected_num_files = range(0, 2)  # absent: a reason of the gate, not a crash
    alias = "catalog"
    required = False
    default = "catalog.yaml"
    expected_file_extensions = (".yaml", ".yml")
    help = help_text(
        """
        The property catalog the manifest was drawn from: a YAML mapping with one key, `properties`,
        a list of `{name, bound, predicate, description}` (`predicate` is `module:function`).
        """
    )


class PropertyManifestPredicatesField(_WarnWhenMissing, MultipleSourcesField, SecondaryOwnerMixin):
    alias = "predicates"
    default = ("*_properties.py",)
    expected_file_extensions = (".py",)
    help = help_text(
        """
        The Python files that define the catalog's predicates (globs relative to this BUILD file).
        They are protected: loosening a predicate is an oracle change.
        """
    )


class PropertyManifestTarget(Target):
    alias = "property_manifest"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        PropertyManifestSourceField,
        PropertyManifestCatalogField,
        PropertyManifestPredicatesField,
    )
    help = help_text(
        """
        A property manifest: the sampled draw, the catalog it was drawn from, and the predicate code.

        `pants gate` checks `manifest_sha256` and recomputes the draw from the catalog, the seed and `k`.

        Example BUILD file:

            property_manifest(
                name="manifest",
                manifest="manifest.json",
                catalog="catalog.yaml",
                predicates=["orders_properties.py"],
            )
        """
    )


# -- sampled_properties ------------------------------------------------------------------------


class SampledPropertiesFixtureField(StringField):
    alias = "fixture"
    required = True
    value: str
    help = help_text(
        """
        The address of the `epoch_fixture` whose fixture world the properties are replayed over. It is
        a dependency edge (inferred): `dependencies`, `dependents` and `--changed-dependents` follow it
        to the pin, the generator and its inputs. A string naming no `epoch_fixture` adds no edge and
        closes the gate.
        """
    )


class SampledPropertiesManifestField(StringField):
    alias = "manifest"
    required = True
    value: str
    help = help_text(
        """
        The address of the `property_manifest` that names the sampled properties. It is a dependency
        edge (inferred): `dependencies`, `dependents` and `--changed-dependents` follow it to the
        manifest, the catalog and the predicates. A string naming no `property_manifest` adds no edge
        and closes the gate.
        """
    )


class SampledPropertiesDependenciesField(Dependencies):
    help = help_text(
        """
        The predicates' Python sources (list the `python_sources` that hold them here) and any
        product code they drive that is not inferred. Inferred: the `fixture` and `manifest` targets,
        and the owner of every product module the predicates call as `product.<module>...`.
        """
    )


class SampledPropertiesMaxWitnessesField(IntField):
    alias = "max_witnesses"
    default = 1
    value: int
    help = help_text(
        """
        How many failing records to save as witnesses per property. The scan never stops early: every
        record is evaluated, every flake is saved, and every failure is counted.
        """
    )


class SampledPropertiesHeldOutPropertiesField(Field):
    alias = "held_out_properties"
    default = DEFAULT_HELD_OUT_PROPERTIES
    value: Union[int, str]
    help = help_text(
        f"""
        How many properties of the manifest's catalog, outside the manifest, trusted mode judges besides
        the manifest's, or `"{ALL}"` for every one. They are drawn per merged tree by a seed derived from
        the held-out key (`[gate].held_out_key_env`), so the change that is judged cannot know them, and
        judged over the pinned world and the held-out one like the manifest's: a failure is
        `property-failed`, marked held-out. More catch more and cost more: each is a property replayed over
        every record of its bound, twice. Without the key (local mode, a laptop) only the manifest is
        judged, and the report says so.
        """
    )

    @classmethod
    def compute_value(cls, raw_value: Optional[object], address: Address) -> Union[int, str]:
        value = super().compute_value(raw_value, address)
        if value == ALL or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            return value  # type: ignore[return-value]
        raise InvalidFieldException(
            f"The `{cls.alias}` field of {address} must be a whole number of properties or " f'"{ALL}", not {value!r}.'
        )


class SampledPropertiesProductSetupField(StringField):
    alias = "product_setup"
    help = help_text(
        """
        A function of the product, `module:function`, that the replay calls once before any property,
        with no arguments: a framework's set-up, such as Django's settings, `django.setup()` and the
        tables of an in-memory database. It runs in the replay's child, beside the product, as product
        code (its module is an inferred dependency and, in trusted mode, comes from the candidate). If it
        raises, the replay fails naming it, and no property is judged.
        """
    )

    @classmethod
    def compute_value(cls, raw_value: Optional[str], address: Address) -> Optional[str]:
        value = super().compute_value(raw_value, address)
        if value is not None and not MODULE_FUNCTION.fullmatch(value):
            raise InvalidFieldException(
                f"The {repr(cls.alias)} field of {address} is {value!r}: expected module:function, "
                "for example shop.replay:set_up"
            )
        return value


class SampledPropertiesOracleOwnersField(StringSequenceField):
    alias = "oracle_owners"
    default = ()
    help = help_text(
        """
        Who reviews this suite's oracle besides `[gate-codeowners].owners`: CODEOWNERS owners
        (`org/team`, `user` or an email). `pants gate-codeowners` gives them the suite's pin,
        generator, inputs, manifest, catalog, predicates and the BUILD files declaring them.
        """
    )


class SampledPropertiesTarget(Target):
    alias = "sampled_properties"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        SampledPropertiesFixtureField,
        SampledPropertiesManifestField,
        SampledPropertiesDependenciesField,
        SampledPropertiesMaxWitnessesField,
        SampledPropertiesHeldOutPropertiesField,
        SampledPropertiesProductSetupField,
        SampledPropertiesOracleOwnersField,
    )
    help = help_text(
        """
        The sampled properties of a manifest, replayed over an epoch's fixture world by `pants test`.

        The replay runs in a sandbox with exactly the fixture world, the manifest, the predicates, the
        code under test and the runner; it is cached on those, so an unrelated change replays nothing
        and a new epoch replays everything. A failure or flake found once is found on every cache hit.

        Example BUILD file:

            sampled_properties(
                name="orders_properties",
                fixture="fixtures:orders_epoch",
                manifest="checks:manifest",
                dependencies=["checks:predicates"],
            )
        """
    )


def target_types() -> list[type[Target]]:
    return [EpochFixtureTarget, PropertyManifestTarget, SampledPropertiesTarget]
