"""The jail the generator and the replays run in: bubblewrap and libfaketime as pinned external tools,
probed once per Pants run; the verdict names what was used (`epoch_gate.runner.jail.isolation` has the how)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Union

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex_cli import PexCli
from pants.backend.python.util_rules.pex_environment import PythonExecutable
from pants.base.build_root import BuildRoot
from pants.core.util_rules.external_tool import (
    DownloadedExternalTool,
    ExternalToolRequest,
    TemplatedExternalTool,
)
from pants.engine.fs import EMPTY_DIGEST, CreateDigest, Digest, DigestEntries, FileEntry, MergeDigests
from pants.engine.platform import Platform
from pants.core.util_rules.system_binaries import (
    BashBinary,
    BinaryPathRequest,
    BinaryPaths,
    BinaryPathTest,
    CpBinary,
    MkdirBinary,
)
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.option.option_types import StrListOption
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.strutil import help_text

from epoch_gate.runner.jail import isolation
from epoch_gate.runner.jail.isolation import Isolation, Mode
from epoch_gate.runner.jail.seccomp import child_filter
from epoch_gate.reasons import Code, Reason
from epoch_gate.runner.jail.confine import Limits
from epoch_gate_pants.failures import failure_line
from epoch_gate_pants.subsystems import GateSubsystem


class Bubblewrap(TemplatedExternalTool):
    options_scope = "bwrap"
    name = "bubblewrap"
    help = help_text(
        """
        bubblewrap (`bwrap`), the unprivileged sandboxing tool from Debian's `bubblewrap` package: it
        jails the fixture generator and the property replays in fresh namespaces with no view of the
        working tree and no network (see `[gate].isolation`). The default is Debian 12's build at
        `/usr/bin/bwrap`; this repository's `./pants` launcher provisions the same bytes from Debian's
        archive when it can. A file whose digest is not in `known_versions` is refused.
        """
    )
    default_version = "0.8.0"
    default_known_versions = [
        "0.8.0|linux_x86_64|85580dd52ed366ece8844e90fa75ac7c4de8802963071344e123221fb9f6f11e|72080",
    ]
    default_url_template = "file:///usr/bin/bwrap"

    system_search_path = StrListOption(
        default=["/usr/bin", "/bin", "/usr/local/bin"],
        advanced=True,
        help=help_text(
            f"""
            Where to look for the distribution's own `bwrap` when the pinned one (`url_template` and
            `known_versions`) is not available: Ubuntu's, Fedora's or a newer Debian's bubblewrap has
            other bytes than the pinned Debian 12 build. The first one found is used if it reports
            version {".".join(map(str, isolation.MIN_BWRAP))} or later; the report names its version.
            An empty list uses the pinned one only.
            """
        ),
    )


class Libfaketime(TemplatedExternalTool):
    options_scope = "libfaketime"
    name = "libfaketime"
    help = help_text(
        f"""
        libfaketime, from Debian's `libfaketime` package: preloaded into the jail, it stops the wall
        clock at {isolation.FIXED_CLOCK_ISO}, so a generator or property that reads the time sees the
        same instant on every machine. Without it the jail still hides the working tree and the network,
        and the report says the clock was the host's. A file whose digest is not in `known_versions` is
        refused.
        """
    )
    default_version = "0.9.10"
    default_known_versions = [
        "0.9.10|linux_x86_64|45c4822a7516e9c41ec1b5498b0f08665ba4877330e9e9573c1213d16d6629a0|55824",
    ]
    default_url_template = "file:///usr/lib/{platform}/faketime/libfaketime.so.1"
    default_url_platform_mapping = {"linux_x86_64": "x86_64-linux-gnu", "linux_arm64": "aarch64-linux-gnu"}


# Pants writes a sandbox's copy of bubblewrap just before it runs it. A process forked meanwhile outside
# Pants' spawn lock (the goal's `git`, a plugin's subprocess) holds that file open for writing until it
# execs, and an exec of it then fails with ETXTBSY, which Pants 2.17 retries once and then fails the run
# on (seen in CI). So the host's interpreter execs bubblewrap, and waits out a busy file for up to 4 s.
EXEC_RETRYING = """
import errno, os, sys, time
for wait in (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, None):
    try:
        os.execve(sys.argv[1], sys.argv[1:], {})  # not even the interpreter's LC_CTYPE (PEP 538)
    except OSError as error:
        if error.errno != errno.ETXTBSY or wait is None:
            sys.stderr.write("cannot run %s: %s\\n" % (sys.argv[1], error.strerror))
            sys.exit(126)
        time.sleep(wait)
"""


def exec_retrying(python: str, argv: list[str]) -> list[str]:
    """`argv`, whose program Pants wrote into the sandbox, run by `python` so a busy file is waited out."""
    return [python, "-I", "-S", "-c", EXEC_RETRYING, *argv]


# The kernel's ceiling on a fixture generator's jail (and the probe's): a generator is not product code
# under `[property-replay]`'s limits, and may run a pool of workers with threads each; bounded all the same,
# so that a loop of forks cannot take the host's PID table.
GENERATOR_TASKS = isolation.RESERVED_PIDS + 4096


@dataclass(frozen=True)
class Jail:
    """How the generator and the replays run. `wrap` turns a sandbox process's argv and environment
    into the jailed one; unjailed, it returns them unchanged."""

    isolation: Isolation
    mode: Mode
    tools: Digest
    prefixes: tuple[str, ...]
    build_root: str
    python: str = ""  # the host's interpreter, which starts bubblewrap (`exec_retrying`)
    trusted: bool = False  # trusted mode (`--gate-candidate`): the jail is required
    unsafe_unjailed: bool = False  # [gate].unsafe_allow_unjailed_verdict
    bwrap: str = isolation.BWRAP  # where the jail's bubblewrap is, in the sandbox

    def child_arguments(self, limits: Limits) -> list[str]:
        """The runner's options for its child: its own jail inside this one when jailed, and its limits."""
        jail = [f"--child-jail={self.bwrap}"] if self.isolation.jailed else []
        return [*jail, *(f"--child-{name.replace('_', '-')}={value}" for name, value in vars(limits).items())]

    def wrap(
        self, argv: list[str], env: dict[str, str], tasks: int, clock_for_child: bool = False
    ) -> tuple[list[str], FrozenDict[str, str]]:
        """Jailed: `argv` with exactly `env` and at most `tasks` processes and threads (`Limits.tasks`,
        GENERATOR_TASKS); the clock stopped for the process, or with `clock_for_child` (the replay's
        runner) for its child alone, which runs the product."""
        if not self.isolation.jailed:
            return argv, FrozenDict(env)
        jailed = isolation.jailed_argv(
            argv,
            env,
            self.prefixes,
            self.build_root,
            self.isolation.fixed_clock,
            self.python,
            tasks,
            clock_for_child=clock_for_child,
        )
        return exec_retrying(self.python, jailed), FrozenDict()

    @property
    def required(self) -> bool:
        return self.mode is Mode.REQUIRED or (self.trusted and not self.unsafe_unjailed)

    @property
    def description(self) -> str:
        """What the report, the console and the statement say of the isolation a verdict was reached in."""
        if self.trusted and self.unsafe_unjailed and not self.isolation.jailed:
            return f"UNJAILED ([gate].unsafe_allow_unjailed_verdict): {self.isolation.description}"
        return self.isolation.description

    @property
    def refusal(self) -> Reason | None:
        """Why nothing may run, when the jail is required and does not give all it promises."""
        # Trusted mode needs the jail; `required` also the stopped clock (a distribution's libfaketime
        # other than the pinned one leaves the host clock, which can break a build but not pass one).
        clock = self.mode is Mode.REQUIRED
        if not self.required or (self.isolation.jailed and (self.isolation.fixed_clock or not clock)):
            return None
        wanted = (
            "a bubblewrap jail with a stopped clock and the product in a jail of its own "
            "([gate].isolation = required)"
            if clock
            else "a bubblewrap jail with the product in a jail of its own (trusted mode (--gate-candidate) "
            "requires it)"
        )
        return Reason(
            Code.ISOLATION_UNAVAILABLE,
            "pants.toml",
            wanted,
            self.isolation.description,
            "the generator and the replays may not run outside the jail: "
            f"{self.isolation.failure or 'the wall clock did not stop'}. Install bubblewrap "
            "(`apt-get install bubblewrap`; `pants help bwrap`) and libfaketime, or accept an "
            "unjailed verdict with [gate].unsafe_allow_unjailed_verdict"
            + ("" if self.trusted else " or [gate].isolation = auto"),
        )


@dataclass(frozen=True)
class ToolFileRequest:
    """One pinned external tool, placed at `path` in an otherwise empty digest; `download` is None when
    the tool's options give no download for this platform, and `unknown` then says why."""

    name: str
    download: ExternalToolRequest | None
    path: str
    unknown: str | None = None

    @classmethod
    def of(cls, tool: TemplatedExternalTool, platform: Platform, path: str) -> ToolFileRequest:
        try:
            return cls(tool.name, tool.get_request(platform), path)
        except Exception as error:  # noqa: BLE001 - no known version for this platform, say: an answer
            return cls(tool.name, None, path, failure_line(error))


@dataclass(frozen=True)
class ToolFile:
    digest: Digest
    missing: str | None  # why the tool is not available; `digest` is then empty


@rule(desc="Fetch an external tool", level=LogLevel.DEBUG)
async def fetch_tool_file(request: ToolFileRequest) -> ToolFile:
    if request.download is None:
        return ToolFile(EMPTY_DIGEST, f"{request.name} unavailable: {request.unknown}")
    try:
        downloaded = await Get(DownloadedExternalTool, ExternalToolRequest, request.download)
    except Exception as error:  # noqa: BLE001 - a missing or mismatched tool is an answer, not a crash
        return ToolFile(EMPTY_DIGEST, f"{request.name} unavailable: {failure_line(error)}")
    entries = [e for e in await Get(DigestEntries, Digest, downloaded.digest) if isinstance(e, FileEntry)]
    if len(entries) != 1:
        return ToolFile(EMPTY_DIGEST, f"{request.name} download held {len(entries)} files, expected 1")
    file = FileEntry(request.path, entries[0].file_digest, is_executable=True)
    return ToolFile(await Get(Digest, CreateDigest([file])), None)


@dataclass(frozen=True)
class JailTools:
    """bubblewrap and libfaketime, each at its place in the jail or missing; and pex, which every
    interpreter search and requirements PEX runs."""

    bwrap: ToolFile
    clock: ToolFile
    pex: ToolFile


@dataclass(frozen=True)
class SystemBubblewrapRequest:
    search_path: tuple[str, ...]


@rule(desc="Fetch the jail's tools", level=LogLevel.DEBUG)
async def fetch_jail_tools(
    gate: GateSubsystem, bwrap: Bubblewrap, faketime: Libfaketime, pex_cli: PexCli, platform: Platform
) -> JailTools:
    # Pants 2.17 reads a `file://` download 4 KB at a time through its blocking thread pool, where each
    # read waits behind every file read of the build graph's work: in an empty store, pex took 6-7 s. So
    # the gate fetches these first, alone (`run_gate`). pex's download here is the very node Pants' own
    # rules ask for; an https URL is not slowed by the pool, only fetched before the graph's work.
    off = ToolFile(EMPTY_DIGEST, "not fetched: [gate].isolation = off")
    wanted = [ToolFileRequest.of(pex_cli, platform, "pex")]
    if gate.isolation is not Mode.OFF:
        wanted += [
            ToolFileRequest.of(bwrap, platform, isolation.BWRAP),
            ToolFileRequest.of(faketime, platform, isolation.FAKETIME),
        ]
    pex, *jail = await MultiGet(Get(ToolFile, ToolFileRequest, request) for request in wanted)
    bwrap_file, clock_file = jail or (off, off)
    if bwrap_file.missing and gate.isolation is not Mode.OFF:
        system = await Get(ToolFile, SystemBubblewrapRequest(tuple(bwrap.system_search_path)))
        bwrap_file = (
            system if system.missing is None else ToolFile(EMPTY_DIGEST, f"{bwrap_file.missing}; and {system.missing}")
        )
    return JailTools(bwrap_file, clock_file, pex)


@rule(desc="Find the system's bubblewrap", level=LogLevel.DEBUG)
async def system_bubblewrap(
    request: SystemBubblewrapRequest, bash: BashBinary, mkdir: MkdirBinary, cp: CpBinary
) -> ToolFile:
    """The distribution's `bwrap`, version-checked and copied to its place in the jail's tools (so its
    bytes are part of every jailed process's inputs, as the pinned one's are)."""
    where = ", ".join(request.search_path) or "nowhere ([bwrap].system_search_path is empty)"
    found = await Get(
        BinaryPaths,
        BinaryPathRequest(
            binary_name="bwrap",
            search_path=request.search_path,
            test=BinaryPathTest(["--version"], fingerprint_stdout=False),
        ),
    )
    if found.first_path is None:
        return ToolFile(EMPTY_DIGEST, f"no system bubblewrap in {where}: install the `bubblewrap` package")
    path = found.first_path
    copied = await Get(
        FallibleProcessResult,
        Process(
            argv=[
                bash.path,
                "-c",
                f'"$1" -p {isolation.TOOLS_DIR} && "$2" "$3" {isolation.BWRAP} && "$3" --version',
                "bash",
                mkdir.path,
                cp.path,
                path.path,
            ],
            env={"BWRAP_SHA256": path.fingerprint},
            output_files=(isolation.BWRAP,),
            level=LogLevel.DEBUG,
            description=f"Copy the system's bubblewrap ({path.path})",
            cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
        ),
    )
    said = copied.stdout.decode("utf-8", "replace").strip()
    version = isolation.bwrap_version(said)
    if copied.exit_code != 0 or version is None or version < isolation.MIN_BWRAP:
        return ToolFile(
            EMPTY_DIGEST,
            f"the system's {path.path} ({said or f'exit {copied.exit_code}'}) is not "
            f"bubblewrap {'.'.join(map(str, isolation.MIN_BWRAP))} or later",
        )
    return ToolFile(copied.output_digest, None)


@dataclass(frozen=True)
class Interpreter:
    """The interpreter the generator or a replay runs on, in the jail or not; or why none satisfies its
    constraints (`python` is then None)."""

    python: PythonExecutable | None
    missing: str | None

    def reason(self, code: Code, path: str, constraints: InterpreterConstraints) -> Reason:
        return Reason(
            code,
            path,
            f"an interpreter for {constraints}",
            self.missing or "none found",
            "no interpreter satisfies the interpreter constraints (the targets' `interpreter_constraints`, "
            "else [python].interpreter_constraints): install one where [python-bootstrap].search_path looks",
        )


@rule(desc="Find the interpreter for the generator and the replays", level=LogLevel.DEBUG)
async def find_interpreter(constraints: InterpreterConstraints) -> Interpreter:
    try:
        return Interpreter(await Get(PythonExecutable, InterpreterConstraints, constraints), None)
    except Exception as error:  # noqa: BLE001 - a search that finds nothing is a reason, not a traceback
        return Interpreter(None, failure_line(error))


def _probe(argv: list[str], digest: Digest, env: FrozenDict[str, str], description: str) -> Process:
    # Once per Pants run: the answer depends on the host (namespaces, installed files), not on inputs.
    return Process(
        argv=argv,
        input_digest=digest,
        env=env,
        description=description,
        level=LogLevel.DEBUG,
        cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL,
    )


async def _host(python: str, tools: Digest) -> tuple[str, Union[tuple[str, ...], str]]:
    """The bubblewrap's name and version, and the interpreter's folders (or why they are unknown)."""
    version, prefixes_run = await MultiGet(
        Get(
            FallibleProcessResult,
            Process,
            _probe(
                exec_retrying(python, [isolation.BWRAP, "--version"]),
                tools,
                FrozenDict(),
                "Read the bubblewrap version",
            ),
        ),
        Get(
            FallibleProcessResult,
            Process,
            _probe(
                [python, "-S", "-s", "-c", isolation.PREFIXES], EMPTY_DIGEST, FrozenDict(), "Locate the interpreter"
            ),
        ),
    )
    name = version.stdout.decode("utf-8", "replace").strip() or "bubblewrap"
    try:
        return name, tuple(isolation.read_prefixes(prefixes_run.stdout))
    except ValueError as error:
        return name, f"the interpreter's folders are unknown: {error}"


@rule(desc="Probe the isolation jail", level=LogLevel.DEBUG)
async def probe_jail(constraints: InterpreterConstraints, gate: GateSubsystem, build_root: BuildRoot) -> Jail:
    """The jail for processes on the interpreter `constraints` choose: it maps that interpreter's folders,
    so each interpreter the gate runs on is probed on its own."""
    mode, root = gate.isolation, build_root.path
    policy = {"trusted": gate.candidate is not None, "unsafe_unjailed": gate.unsafe_allow_unjailed_verdict}
    if mode is Mode.OFF:
        return Jail(Isolation.none("[gate].isolation = off"), mode, EMPTY_DIGEST, (), root, **policy)
    # The interpreter search (a pex process, seconds in a cold run) runs beside the tools' fetch; it never
    # raises, so bubblewrap's absence is still the answer it was.
    jail_tools, interpreter = await MultiGet(Get(JailTools), Get(Interpreter, InterpreterConstraints, constraints))
    missing = jail_tools.bwrap.missing or jail_tools.pex.missing
    if missing or interpreter.python is None:
        why = missing or f"no interpreter for {constraints}: {interpreter.missing}"
        return Jail(Isolation.none(why), mode, EMPTY_DIGEST, (), root, **policy)
    python = interpreter.python
    tools = await Get(Digest, MergeDigests([jail_tools.bwrap.digest, jail_tools.clock.digest]))
    name, prefixes_or_why = await _host(python.path, tools)
    if isinstance(prefixes_or_why, str):
        return Jail(Isolation.none(prefixes_or_why), mode, EMPTY_DIGEST, (), root, **policy)
    prefixes = prefixes_or_why
    fixed_clock = jail_tools.clock.missing is None
    child = isolation.child_probe_argv(python.path, prefixes, "/")
    argv = isolation.jailed_argv(
        [python.path, "-S", "-s", "-c", isolation.PROBE, root, json.dumps(child), (child_filter() or b"").hex()],
        {},
        prefixes,
        root,
        fixed_clock,
        python.path,
        GENERATOR_TASKS,
    )
    probe = await Get(
        FallibleProcessResult, Process, _probe(exec_retrying(python.path, argv), tools, FrozenDict(), "Probe the jail")
    )
    judged = isolation.judge_probe(
        name, probe.exit_code, probe.stdout, probe.stderr, fixed_clock, isolation.host_restriction()
    )
    return Jail(judged, mode, tools if judged.jailed else EMPTY_DIGEST, prefixes, root, python.path, **policy)


def rules() -> list:
    return [*collect_rules()]
