"""epoch_gate: a patch is merge-eligible only when the fixture epoch pin, the property-manifest digest
and the witness digest of every flake freeze agree.

This package knows nothing of Pants: the plugin, Bazel or any CI feed it facts and get the same verdict.
"""

__version__ = "0.1.0"
