"""The replay runner: everything of epoch_gate's that enters the replay's jail is this package and the
short list of core modules below, which it imports (`shipped_test` checks that list against its imports).
Its packages say which side of the trust boundary each module is on:

- `judge` (trusted, never runs product code): `parent` reads the world, runs the predicates (oracle code),
  one thread a child, and writes the evidence; `judging` is a record's judgement (`judge`) and what a
  predicate holds of the product; `channel` is the judge's side of each child (start it, ask it, end it).
- `product` (untrusted, the only process that runs product code): `child` serves the product's callables
  and `data` answers every call with data.
- `jail`: `isolation`, the bubblewrap arguments of every jail (the gate's own, for generators and replays,
  too); `confine`, the child's own jail, its resource limits and the watch over its process tree.
- Shared: `main`, the entry point (`python -I -B -S -c BOOT replay ...`); `protocol`, the frames between
  judge and child (one call, one answer); `api`, what predicate authors import; `finder`, imports from the
  sandbox under declared names only; `requirements`, the replay's wheels on the child's import path.
"""

# Stdlib-only core modules the runner imports: the artifacts it reads and writes, and their checks.
SHIPPED_CORE = (
    "epoch_gate",
    "epoch_gate.reasons",
    "epoch_gate.text",
    "epoch_gate.evidence",
    *(
        f"epoch_gate.evidence.{name}"
        for name in (
            "atomic",
            "catalog",
            "folders",
            "hashing",
            "manifest",
            "observations",
            "replay_result",
            "strictjson",
            "world",
        )
    ),
)
# What runs in the replay's sandbox: the runner's two processes, and the API the predicates import
ENTRY_POINTS = ("epoch_gate.runner.main", "epoch_gate.runner.product.child", "epoch_gate.runner.api")
