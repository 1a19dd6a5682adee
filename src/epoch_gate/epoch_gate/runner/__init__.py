"""The replay runner: everything of epoch_gate's that enters the replay's jail is this package and the
short list of core modules below, which it imports (`shipped_test` checks that list against its imports).

- `main`: the entry point (`python -I -B -S -c BOOT replay ...`).
- `parent`: reads the world, runs the predicates (oracle code), one thread a child, and writes the evidence.
- `judging`: a record's judgement (`judge`), and what a predicate holds of the product: names to call,
  answers as data, refusals. `api` is what predicate authors import from it.
- `channel` and `protocol`: the parent's pipe to the child (one call, one answer), and the frames on it.
- `child` and `data`: the only process that runs product code, answering every call with data.
- `confine`: the child's own jail, its resource limits, and the watch over its process tree.
- `finder`: imports from the sandbox under declared names only.
- `isolation`: the bubblewrap arguments of every jail (the gate's own, for generators and replays, too).
- `requirements`: the replay's third-party wheels, unpacked onto the child's import path.
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
ENTRY_POINTS = ("epoch_gate.runner.main", "epoch_gate.runner.child", "epoch_gate.runner.api")
