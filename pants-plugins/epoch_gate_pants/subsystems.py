"""Options: `[gate]` (the verdict) and `[property-replay]` (the `pants test` replays)."""

from __future__ import annotations

from pants.engine.goal import GoalSubsystem
from pants.option.option_types import BoolOption, EnumOption, IntOption, SkipOption, StrListOption, StrOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import help_text

from epoch_gate.verdict.annotations import Style
from epoch_gate.change.changed import DEFAULT_TRUSTED_REFS
from epoch_gate.runner.jail.isolation import FIXED_CLOCK_ISO, Mode
from epoch_gate.runner.jail.confine import MAX_CHILDREN, Limits

_LIMITS = Limits()


class GateSubsystem(GoalSubsystem):
    name = "gate"
    help = help_text(
        """
        Decide whether the change is merge-eligible: `eligible` (exit 0) only when the fixture epoch
        pin, the property-manifest digest and the witness digest of every flake freeze agree; `closed`
        (exit 1) when anything does not; `hold` (exit 2) when every remaining flake is covered by a
        valid freeze. Writes `report.json`, `report.md` and the witnesses under `dist/gate/`, and in
        trusted mode (`--gate-candidate`) an unsigned in-toto Statement of the verdict
        (`statement.intoto.json`); a local verdict is advisory and attests nothing.
        """
    )

    base = StrOption(
        default=None,
        help=help_text(
            """
            The git revision the changed set is computed against (its merge base with HEAD), when
            `--changed-since` is not given. The changed set is every path that differs from it:
            committed, staged, unstaged and untracked. A base that does not resolve closes the gate.
            Unset (the default), the base is the merge base of HEAD with the first of
            `[gate].trusted_refs` the clone holds, so a feature branch is judged on everything it
            changed since it left reviewed history, as CI judges its pull request; when none of them
            exists the gate is `closed` (`base-untrusted`) and says to fetch one or pass `--base`.
            """
        ),
    )
    candidate = StrOption(
        default=None,
        help=help_text(
            """
            Trusted mode, the one CI uses: the git revision to judge (a commit id, or a ref fetched from
            the pull request), with Pants, this plugin, `pants.toml` and every BUILD file taken from the
            checkout it runs in, which must be a clean checkout of a trusted ref (a detached worktree of
            `origin/main`; `docs/ci/gate.sh` makes one). The candidate is read from git objects as data,
            and what is judged is what would land: git's merge of it into the checkout's commit (no
            checkout; a conflict closes). Its changed set is that merge against the checkout's commit;
            the packages its suites import ship to the jailed replay, the only place its code runs; a
            BUILD file it adds or changes must be declarations with literal arguments. The oracle is the
            checkout's, so a candidate branched from an older main is judged by today's. Only trusted
            mode writes the attestation; without this option the gate judges the working tree and its
            verdict is advisory.
            """
        ),
    )
    trusted_refs = StrListOption(
        default=list(DEFAULT_TRUSTED_REFS),
        help=help_text(
            """
            Refs whose history counts as reviewed. The base the changed set is taken against
            (`--changed-since` or `[gate].base`, through its merge base with HEAD) must be reachable
            from one of them; otherwise the gate is `closed` (`base-untrusted`), since a base inside
            the change under review would hide the change's own earlier edits to the oracle. A shallow
            clone that cannot prove it is `closed` with `base-unprovable`. Give full ref names
            (`refs/remotes/origin/main`, not `origin/main`): a short name resolves through
            `refs/tags/` first, so a pushed tag could stand in for the branch; a short name is refused.
            Name remote-tracking refs that CI fetches from the server, not local branches a change could
            move. An empty list turns the check off, which is unsafe: any base is then reviewed history.
            """
        ),
    )
    isolation = EnumOption(
        default=Mode.AUTO,
        help=help_text(
            f"""
            How the fixture generator and the property replays are jailed. A Pants sandbox is a working
            directory, not a jail: a process in it can still open the working tree by absolute path or
            reach the network. With bubblewrap (`[bwrap]`) they run with no view of the working tree and
            no network, and with libfaketime (`[libfaketime]`) the wall clock stopped at
            {FIXED_CLOCK_ISO}; a probe checks all three before each Pants run relies on them, and the
            report names what was used. Inside it, the replay's product code runs in a jail of its own
            (its own PID namespace, the product's files read-only, nothing of the runner's). `auto` jails
            whenever the probe succeeds and otherwise runs in the plain sandbox; `required` closes the
            gate (`isolation-unavailable`) unless the jail, the product's own jail and the stopped clock
            all hold; `off` never jails. Trusted mode (`--gate-candidate`) always requires them, unless
            `[gate].unsafe_allow_unjailed_verdict`.
            """
        ),
    )
    unsafe_allow_unjailed_verdict = BoolOption(
        default=False,
        advanced=True,
        help=help_text(
            """
            Let trusted mode (`--gate-candidate`) reach a verdict without the jail. Unjailed, the
            candidate's code runs as the runner's own user beside it and can reach the working tree and
            the network: the verdict rests on its good behaviour. Off (the default), trusted mode without
            a jail is `closed` (`isolation-unavailable`); on, the report, the console and the statement
            say the verdict is unjailed, and a verifier that requires the jailed level refuses it.
            """
        ),
    )
    held_out_key_env = StrOption(
        default="EPOCH_GATE_HELD_OUT_KEY",
        help=help_text(
            """
            The environment variable that holds the held-out key (at least 16 bytes; `openssl rand -hex
            32` makes one). In trusted mode with the key, the gate derives from it, per suite, a seed
            that the candidate cannot predict (an HMAC over the merged tree, the suite and its epoch),
            runs the suite's generator again with that seed (`epoch_fixture(held_out=...)`) and judges
            every sampled property over that held-out world too. The key stays in the gate's own
            process, which takes it out of its environment once read: no jail, process it starts, log,
            cache or report sees it, only the seed's digest. Unset, the suites are judged over the
            pinned world only and the report says so (`[gate].held_out_required` closes instead). CI
            passes it as a secret; never write the key itself in configuration.
            """
        ),
    )
    held_out_required = BoolOption(
        default=False,
        help=help_text(
            """
            Close trusted mode (`held-out-unavailable`) when the held-out key is not set, instead of
            judging the pinned worlds only: for CI that always passes the key, so that a job that lost
            its secret cannot pass a change on the pinned worlds alone.
            """
        ),
    )
    held_out_key_file = StrOption(
        default=None,
        advanced=True,
        help=help_text(
            """
            A file that holds the held-out key, read instead of `[gate].held_out_key_env` when set (a
            path outside the repository: a secret mounted by CI, say).
            """
        ),
    )
    statement_key_env = StrOption(
        default="EPOCH_GATE_STATEMENT_KEY",
        help=help_text(
            """
            The environment variable that holds the Ed25519 key trusted mode signs its statement with
            (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519` writes it, or its 32-byte seed in
            hex). With it the gate also writes `statement.intoto.dsse.json`, the statement in a DSSE
            envelope, which `epoch-gate verify-statement` checks against the public key. The key stays
            in the gate's own process, which takes it out of its environment once read (no process,
            log, cache or report sees it: the report names the public key's sha256). Unset, the
            statement is written unsigned and the report says so. CI passes it as a secret; never
            write the key itself in configuration.
            """
        ),
    )
    statement_key_file = StrOption(
        default=None,
        advanced=True,
        help=help_text(
            """
            A file that holds the statement's signing key, read instead of `[gate].statement_key_env`
            when set (a path outside the repository: a secret mounted by CI, say).
            """
        ),
    )
    protected = StrListOption(
        default=[],
        help=help_text(
            """
            Extra protected globs (`*`, `?`, `**`; a trailing `/` means a whole folder and its own
            path), added to the set derived from the build graph and the options: every file of the
            `epoch_fixture`, `property_manifest` and `sampled_properties` targets, each predicate's
            top-level package, BUILD files in oracle folders and their ancestors, `.gitignore` and
            `.gitattributes` there, every Pants configuration file and `pythonpath` folder in the
            repository, the gate's own code, and the observations and freezes folders.
            """
        ),
    )
    observations_dir = StrOption(
        default="observations",
        help="The in-tree archive of observations (`<id>.json` and `<id>.bin`), relative to the build root.",
    )
    freezes_dir = StrOption(
        default="freezes",
        help="The folder of reviewers' freezes (`<name>.json`), relative to the build root.",
    )
    today = StrOption(
        default=None,
        help="The ISO date freezes expire against (default: today in UTC). Set it only to replay a past "
        "verdict: a date in the past is unsafe, since it revives expired freezes.",
    )
    annotations = EnumOption(
        default=Style.NONE,
        help=help_text(
            """
            Also print one CI annotation per reason, on the file concerned: `github` prints GitHub
            Actions workflow commands (set `PANTS_GATE_ANNOTATIONS=github` in the workflow), `plain`
            prints `path: severity [code] message` lines. The core's `epoch-gate annotations
            dist/gate/report.json` prints the same from a report.
            """
        ),
    )
    tailor = BoolOption(
        default=True,
        help=help_text(
            """
            Let `pants tailor` propose `epoch_fixture` targets (beside an `EPOCH` pin, or a
            `generate_*.py` generator before the first pin), `property_manifest` targets (beside a
            `catalog.yaml`) and, when there is one of each, the `sampled_properties` suite.
            """
        ),
    )
    output_dir = StrOption(
        default="gate",
        help="Where the report and witnesses go, relative to `[GLOBAL].pants_distdir`.",
    )


class SampledPropertiesSubsystem(Subsystem):
    options_scope = "property-replay"
    name = "sampled properties"
    help = "Options for replaying sampled properties over a fixture world (`pants test` and `pants gate`)."

    skip = SkipOption("test")
    timeout = IntOption(
        default=1800,
        help=help_text(
            """
            Seconds a suite's replay may run before Pants stops it. The replay runs the change's code,
            which could loop forever to hold CI hostage: a stopped replay is `replay-failed`, closed.
            """
        ),
    )
    children = IntOption(
        default=2,
        help=help_text(
            """
            Children that run the product's code side by side in a replay, each in a jail of its own, while
            the judges run in the replay's own process: record n of a bound goes to child n mod children,
            each child gets its records in world order, one at a time, and a violated record is judged
            again by the child that answered it. The count is fixed, not Pants'
            share of the cores (which the load would change), so a replay is one process to Pants'
            scheduler. The limits below bound each child (memory and processes: all of them together). A
            product whose answers
            depend on state kept across records (a cache that flakes once per process, say) may answer
            otherwise with another count, so the count is part of the replay's cache key; 1 runs the
            product in one child; at most 8 serve a replay.
            """
        ),
    )
    child_memory_bytes = IntOption(
        default=_LIMITS.memory,
        advanced=True,
        help=help_text(
            """
            Bytes of memory the replay's product code may use: the address space of each of its
            processes and the size of any file it writes; the resident memory, open memfds and jails'
            `/tmp` (each sized so, with bubblewrap 0.7 and later) of all of them together. Going over it is
            `replay-failed` naming the limit. The answers the replay's judge holds at once may take no
            more, by an estimate from their text that errs high.
            """
        ),
    )
    child_processes = IntOption(
        default=_LIMITS.processes,
        advanced=True,
        help="Processes and threads the replay's product code may have alive at once (a fork bomb ends "
        "here): `replay-failed` beyond it. Watched every 50 ms; jailed, the kernel also refuses any fork "
        "in the replay's jail past 300 + twice this + 16 + 8 per child (Linux 6.14 and later, or from "
        "5.14 an unprivileged uid).",
    )
    child_open_files = IntOption(
        default=_LIMITS.open_files,
        advanced=True,
        help="Open files each process of the replay's product code may hold.",
    )
    child_output_bytes = IntOption(
        default=_LIMITS.output,
        advanced=True,
        help="Bytes the replay's product code may print on stdout and stderr, all processes together: "
        "`replay-failed` beyond it.",
    )
    child_cpu_seconds = IntOption(
        default=_LIMITS.cpu_seconds,
        advanced=True,
        help="CPU seconds each process of the replay's product code may use: `replay-failed` beyond it.",
    )

    host_memory_reserve_bytes = IntOption(
        default=_LIMITS.host_reserve,
        advanced=True,
        help=help_text(
            """
            Bytes of the host's memory (its MemAvailable) every replay leaves, whatever runs at once: the
            memory a gate's jails hold in all (each replay's `child_memory_bytes`, its jails' `/tmp`
            included) never takes the host under it. A replay that sees less stops, and its properties
            are `replay-failed`, a fault of the run: never cached, judged afresh the next time.
            """
        ),
    )

    @property
    def replay_children(self) -> int:
        """`children`, within what a replay takes (1 to `confine.MAX_CHILDREN`)."""
        return min(max(1, self.children), MAX_CHILDREN)

    @property
    def child_limits(self) -> Limits:
        return Limits(
            memory=self.child_memory_bytes,
            processes=self.child_processes,
            open_files=self.child_open_files,
            output=self.child_output_bytes,
            cpu_seconds=self.child_cpu_seconds,
            host_reserve=self.host_memory_reserve_bytes,
        )

    remote_cache_speculation_delay = IntOption(
        default=1000,
        advanced=True,
        help=help_text(
            """
            Milliseconds a fixture generator or a replay waits on the remote cache before it also starts
            locally. With `[GLOBAL].remote_cache_read`, Pants races each lookup against running the
            process, and a hit throws the local run away: on a laptop reading a warm cache, those runs take
            the cores the build graph needs. A lookup that misses starts the process at once, whatever
            this delay. 0 (or less) races from the start.
            """
        ),
    )

    @property
    def speculation_delay_millis(self) -> int:
        return min(max(0, self.remote_cache_speculation_delay), 2**31 - 1)  # Pants reads a 32-bit int
