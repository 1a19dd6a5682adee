"""The jail the generator and the replays run in: bubblewrap and libfaketime as pinned external tools,
probed once per Pants run; the verdict names what was used (`epoch_gate.isolation` has the how)."""

from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.subsystems.setup import PythonSetup
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
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel
from pants.util.strutil import help_text

from epoch_gate import isolation
from epoch_gate.isolation import Isolation, Mode
from epoch_gate.reasons import Code, Reason
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


@dataclass(frozen=True)
class Jail:
    """How the generator and the replays run. `wrap` turns a sandbox process's argv and environment
    into the jailed one; unjailed, it returns them unchanged."""

    isolation: Isolation
    mode: Mode
    tools: Digest
    prefixes: tuple[str, ...]
    build_root: str

    def wrap(self, argv: list[str], env: dict[str, str]) -> tuple[list[str], FrozenDict[str, str]]:
        if not self.isolation.jailed:
            return argv, FrozenDict(env)
        return (isolation.jailed_argv(argv, env, self.prefixes, self.build_root, self.isolation.fixed_clock),
                FrozenDict())

    @property
    def refusal(self) -> Reason | None:
        """Why nothing may run, when isolation is required and the jail does not give all it promises."""
        if self.mode is not Mode.REQUIRED or (self.isolation.jailed and self.isolation.fixed_clock):
            return None
        return Reason(Code.ISOLATION_UNAVAILABLE, "pants.toml",
                      "a bubblewrap jail with a stopped clock ([gate].isolation = required)",
                      self.isolation.description,
                      "the generator and the replays may not run outside the jail; provision bubblewrap "
                      "and libfaketime (`pants help bwrap`, `pants help libfaketime`) or set "
                      "[gate].isolation = auto")


@dataclass(frozen=True)
class ToolFileRequest:
    """One pinned external tool, placed at `path` in an otherwise empty digest."""

    name: str
    download: ExternalToolRequest
    path: str


@dataclass(frozen=True)
class ToolFile:
    digest: Digest
    missing: str | None  # why the tool is not available; `digest` is then empty


@rule(desc="Fetch a jail tool", level=LogLevel.DEBUG)
async def fetch_tool_file(request: ToolFileRequest) -> ToolFile:
    try:
        downloaded = await Get(DownloadedExternalTool, ExternalToolRequest, request.download)
    except Exception as error:  # noqa: BLE001 - a missing or mismatched tool is an answer, not a crash
        return ToolFile(EMPTY_DIGEST, f"{request.name} unavailable: {_last_line(error)}")
    entries = [e for e in await Get(DigestEntries, Digest, downloaded.digest) if isinstance(e, FileEntry)]
    if len(entries) != 1:
        return ToolFile(EMPTY_DIGEST, f"{request.name} download held {len(entries)} files, expected 1")
    file = FileEntry(request.path, entries[0].file_digest, is_executable=True)
    return ToolFile(await Get(Digest, CreateDigest([file])), None)


@dataclass(frozen=True)
class JailTools:
    """bubblewrap and libfaketime, each at its place in the jail or missing, once pex is fetched too."""

    bwrap: ToolFile
    clock: ToolFile


@rule(desc="Fetch the jail's tools", level=LogLevel.DEBUG)
async def fetch_jail_tools(bwrap: Bubblewrap, faketime: Libfaketime, pex_cli: PexCli,
                           platform: Platform) -> JailTools:
    # pex comes too: the interpreter search runs it, and so does every requirements pex. Pants 2.17 reads
    # a `file://` download 4 KB at a time through its blocking thread pool, where each read waits behind
    # the build graph's file reads, so these fetches must precede the graph's work (see `gate`). A pex
    # that cannot be fetched fails where pex is run.
    bwrap_file, clock_file, _ = await MultiGet(
        Get(ToolFile, ToolFileRequest(bwrap.name, bwrap.get_request(platform), isolation.BWRAP)),
        Get(ToolFile, ToolFileRequest(faketime.name, faketime.get_request(platform), isolation.FAKETIME)),
        Get(ToolFile, ToolFileRequest(pex_cli.name, pex_cli.get_request(platform), "pex")),
    )
    return JailTools(bwrap_file, clock_file)


@dataclass(frozen=True)
class JailInterpreter:
    python: PythonExecutable | None
    missing: str | None  # why no interpreter satisfies the constraints; `python` is then None


@rule(desc="Find the jail's interpreter", level=LogLevel.DEBUG)
async def find_jail_interpreter(constraints: InterpreterConstraints) -> JailInterpreter:
    try:
        return JailInterpreter(await Get(PythonExecutable, InterpreterConstraints, constraints), None)
    except Exception as error:  # noqa: BLE001 - asked for beside the tools, it must not crash their answer
        return JailInterpreter(None, f"no interpreter for {constraints}: {_last_line(error)}")


def _last_line(error: Exception) -> str:
    return (str(error).strip().splitlines()[-1:] or [type(error).__name__])[0][:200]


def _probe(argv: list[str], digest: Digest, env: FrozenDict[str, str], description: str) -> Process:
    # Once per Pants run: the answer depends on the host (namespaces, installed files), not on inputs.
    return Process(argv=argv, input_digest=digest, env=env, description=description, level=LogLevel.DEBUG,
                   cache_scope=ProcessCacheScope.PER_RESTART_SUCCESSFUL)


@rule(desc="Probe the isolation jail", level=LogLevel.DEBUG)
async def probe_jail(gate: GateSubsystem, python_setup: PythonSetup, build_root: BuildRoot) -> Jail:
    mode = gate.isolation
    root = build_root.path
    if mode is Mode.OFF:
        return Jail(Isolation.none("[gate].isolation = off"), mode, EMPTY_DIGEST, (), root)
    jail_tools, interpreter = await MultiGet(
        Get(JailTools), Get(JailInterpreter, InterpreterConstraints(python_setup.interpreter_constraints)))
    if jail_tools.bwrap.missing:
        return Jail(Isolation.none(jail_tools.bwrap.missing), mode, EMPTY_DIGEST, (), root)
    if interpreter.python is None:
        return Jail(Isolation.none(str(interpreter.missing)), mode, EMPTY_DIGEST, (), root)
    python = interpreter.python
    tools = await Get(Digest, MergeDigests([jail_tools.bwrap.digest, jail_tools.clock.digest]))
    version, prefixes_run = await MultiGet(
        Get(FallibleProcessResult, Process, _probe([isolation.BWRAP, "--version"], tools, FrozenDict(),
                                                   "Read the bubblewrap version")),
        Get(FallibleProcessResult, Process, _probe([python.path, "-S", "-s", "-c", isolation.PREFIXES],
                                                   EMPTY_DIGEST, FrozenDict(), "Locate the interpreter")),
    )
    try:
        prefixes = tuple(isolation.read_prefixes(prefixes_run.stdout))
    except ValueError as error:
        return Jail(Isolation.none(f"the interpreter's folders are unknown: {error}"), mode, EMPTY_DIGEST, (), root)
    fixed_clock = jail_tools.clock.missing is None
    argv = isolation.jailed_argv([python.path, "-S", "-s", "-c", isolation.PROBE, root], {}, prefixes, root,
                                 fixed_clock)
    probe = await Get(FallibleProcessResult, Process, _probe(argv, tools, FrozenDict(), "Probe the jail"))
    name = version.stdout.decode("utf-8", "replace").strip() or "bubblewrap"
    judged = isolation.judge_probe(name, probe.exit_code, probe.stdout, probe.stderr, fixed_clock)
    return Jail(judged, mode, tools if judged.jailed else EMPTY_DIGEST, prefixes, root)


def rules() -> list:
    return [*collect_rules()]
