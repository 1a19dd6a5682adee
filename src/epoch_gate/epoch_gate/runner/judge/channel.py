"""The parent's side of the replay's child process: start it, ask it one call at a time and read back
that call's answer (the two never write at once, so a full pipe cannot deadlock them), and check how it
ended."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable, Optional, Sequence

from epoch_gate.reasons import Code
from epoch_gate.runner import protocol
from epoch_gate.runner.product.child import EXIT_MEMORY, EXIT_UNSHIPPED, LOADED_FROM, UNSHIPPED_MARK
from epoch_gate.runner.jail.confine import MAX_CHILDREN, ChildJail, Limits, Watch, cpu_seconds
from epoch_gate.runner.jail.reaper import OrphansRemain, children_cpu_seconds, exits_within, kill_orphans, pin

# The child's interpreter is isolated (-I: no environment, no script folder, no user site; -S: no
# site-packages) and sees the runner first, then the standard library, then --child-path folders, and
# the sandbox's files only under the product's names (epoch_gate.runner.finder).
CHILD_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from epoch_gate.runner.product.child import main; "
    "sys.exit(main(sys.argv[2:]))"
)

EXIT_GRACE = 5.0  # seconds the child has to exit once its channel is closed
# The share of its CPU limit a process killed there is seen charged at least: a jailed one is seen by the
# watch's samples only, the last of them up to a poll (or, under load, a few) before the kill.
CPU_ACCOUNTED = 0.8


def close_all(channels: Sequence[Channel]) -> Optional[ChildFailed]:
    """Ends every child: each gets its end of stream, then all are reaped with everything they started
    (the last one's sweep spares nothing) before any pipe is read for bytes after the last answer, so no
    process still alive can hold the parent on a pipe. Returns the first reason a child did not end as it
    should, unless an earlier failure already ended them. Every child's process group is dead on return:
    the parent's outputs come after."""
    for channel in channels:
        channel.finish()
    settled = [channel._settle() for channel in channels]
    stuck = next((failed for _, _, failed in settled if failed is not None), None)
    ended = [channel._conclude(problem, status) for channel, (problem, status, _) in zip(channels, settled)]
    return stuck or next((failed for failed in ended if failed is not None), None)


class ChildFailed(Exception):
    """The child could not answer: its reason code and why, and whether it is a fault of the run (an end
    the runner cannot lay at a limit or the product's own exit: a signal from outside, processes that would
    not end, the host short of memory), which is never a verdict to keep."""

    def __init__(self, code: Code, detail: str, fault: bool = False) -> None:
        super().__init__(detail)
        self.code, self.detail, self.fault = code, detail, fault


FAULT = " (a fault of the run, not a verdict: the next judgement replays it)"


def _said(detail: str, fault: bool) -> str:
    """A failure's detail as the evidence says it: bounded, and a fault said to be one."""
    return f"{detail[: 500 - len(FAULT)]}{FAULT}" if fault else detail[:500]


class Fate:
    """What the replay's children share: the first failure of any of them ends them all, and every later
    question to any of them gets that failure (nothing a child says after it is evidence)."""

    def __init__(self) -> None:
        # The failure that ended them all, as it was said, and what every later question gets; each
        # child's thread that meets the end (its child killed with the rest) reports the first one
        self.first: Optional[ChildFailed] = None
        self.failure: Optional[ChildFailed] = None
        self.lock = threading.Lock()
        self.alive: set[int] = set()  # the children's pids, until each is reaped
        self.watches: list[Watch] = []

    def exceeded(self) -> Optional[Watch]:
        """The watch that first saw a limit exceeded: its kill ended every child, so it is why each of them
        ended."""
        return next((watch for watch in self.watches if watch.exceeded), None)


class Channel:
    """One child of the replay, for the whole replay: `ask` sends it a call and reads the answer. Children
    that share a `Fate` fail together."""

    def __init__(
        self,
        sandbox: Path,
        product_names: Iterable[str],
        child_path: Iterable[str],
        jail: Optional[ChildJail] = None,
        limits: Limits = Limits(),
        fate: Optional[Fate] = None,
        cpu: Optional[int] = None,
    ) -> None:
        names = sorted(set(product_names))
        argv = [sys.executable, "-I", "-B", "-S", "-c", CHILD_BOOT, LOADED_FROM, "--sandbox-names", ",".join(names)]
        argv += [f"--child-path={folder}" for folder in child_path]
        passed = (jail.filter_fd(),) if jail else ()  # the seccomp filter, for the child's bubblewrap
        self._limits, self._late, self._fate = limits, False, fate or Fate()
        self._cpu_seconds = 0.0
        self.cpu = cpu  # the core it and the parent's thread for it share (`pin`)
        # Its own session and process group, so `_end` can kill whatever the child forks (see there).
        try:
            if jail is None:
                argv.append(f"--parent={os.getpid()}")
            else:  # its parent there is the jail's first process, which dies with this one (--die-with-parent)
                argv = jail.argv(argv, sandbox, names, child_path, limits, passed[0])
            self._process = subprocess.Popen(
                argv,
                cwd=sandbox,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=passed,
                preexec_fn=lambda: (limits.apply(), pin(cpu)),
            )
        finally:
            for fd in passed:
                os.close(fd)
        self._fate.alive.add(self._process.pid)
        self._watch = Watch(limits, self._process.stderr, self._process.pid)  # type: ignore[arg-type]
        self._fate.watches.append(self._watch)
        self._broken: Optional[OSError] = None
        self.scopes = 0  # the scopes taken so far: each run of a predicate on a record takes the next
        # What the judge holds of the current scope's answers (`protocol.parsed_cost`) and its bound: the
        # product shapes its answers, and the parent is under no limit of its own
        self._scope, self._spent, self._budget = 0, 0, limits.memory // MAX_CHILDREN

    def take_scope(self) -> int:
        self.scopes += 1
        return self.scopes

    def fail(self, code: Code, detail: str, fault: bool = False) -> ChildFailed:
        """Ends the child, and the replay's other children with it (every process below the runner): after
        a broken protocol, nothing more any of them says is evidence."""
        with self._fate.lock:
            if self._fate.first is None:
                self._fate.first = ChildFailed(code, _said(detail, fault), fault)
                later = f"not evaluated: the replay's child failed earlier: {detail}"
                self._fate.failure = ChildFailed(code, _said(later, fault), fault)
            first = self._fate.first
        if self._process.returncode is None:  # not reaped: its pid still names its process group
            self._kill_group()
        else:
            Watch.kill_tree()
        return first

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        Watch.kill_tree()  # every process below the runner: in a child's jail they are in sessions of their own

    def _end(self) -> int:
        """Waits (EXIT_GRACE at most) for the child to exit, then kills its whole process group before
        reaping it (while the group's id cannot be reused), then every process it left behind: a process
        the child forked would otherwise outlive it and could rewrite the outputs the parent writes once
        the child is done. One that left the group (setsid) was reparented to this process, a child
        subreaper (`guard_parent`); in the child's jail, all of them die with its PID namespace."""
        if self._process.returncode is None:
            self._late = not exits_within(self._process.pid, EXIT_GRACE)
            if self._fate.failure is None:  # its own processes only: the other children may still answer
                Watch.kill_tree(self._process.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
            else:
                self._kill_group()
            os.waitid(os.P_PID, self._process.pid, os.WEXITED | os.WNOWAIT)
            self._watch.stop_polling()  # it kills by the group's id, free for reuse once the child is reaped
            own = cpu_seconds(self._process.pid)  # the charge RLIMIT_CPU checked, unjailed
            before = children_cpu_seconds()
            self._process.wait()
            self._fate.alive.discard(self._process.pid)
            # In the child's jail this reaps its init, and with it the CPU time of its processes.
            try:
                kill_orphans(spare=self._fate.alive)
            except OrphansRemain as exc:
                raise ChildFailed(Code.RUNNER_PROTOCOL, str(exc), fault=True) from None
            self._cpu_seconds = max(own, children_cpu_seconds() - before)
        self._watch.stop_polling()
        self._watch.output_ended()
        return self._process.returncode

    def _ended(self, status: int) -> tuple[Code, str, bool]:
        """Why the child ended before its answers: a limit it went over, its own word, or an early exit
        nothing names (a fault)."""
        # bubblewrap exits 128 + n when the process it started was killed by signal n
        signal_number = -status if status < 0 else status - 128 if 128 < status < 128 + 65 else 0
        watched = self._fate.exceeded()
        if watched is not None:
            return Code.REPLAY_FAILED, f"the product went over {watched.exceeded}", watched.fault
        # A limit the kernel enforces is named only on the parent's own evidence, the CPU time the child's
        # processes used; the exit status alone is the product's to choose.
        if (
            signal_number in (signal.SIGXCPU, signal.SIGKILL)
            and max(self._cpu_seconds, self._watch.cpu_seen) >= self._limits.cpu_seconds * CPU_ACCOUNTED
        ):
            return Code.REPLAY_FAILED, f"the product went over {self._limits.cpu_limit()}", False
        if status == EXIT_MEMORY:  # the child's word: a MemoryError under the address-space limit
            memory = self._limits.address_space_limit()
            return Code.REPLAY_FAILED, f"the product ran out of memory under {memory}", False
        if status == EXIT_UNSHIPPED:
            # The stub's line names the module; the product can print one too, so only a module's name is said
            said = [
                line[len(UNSHIPPED_MARK) + 1 :]
                for line in bytes(self._watch.kept).decode("ascii", "replace").splitlines()
                if line.startswith(UNSHIPPED_MARK + " ")
            ]
            named = said[-1] if said and all(part.isidentifier() for part in said[-1].split(".")) else "a module"
            return (
                Code.REPLAY_FAILED,
                (
                    f"the product imported {named} of the candidate, which the suite's imports "
                    "do not reach (a name built at run time?), so the replay did not ship it: name it in the code "
                    "(an import, or its name as a string literal) so that it ships"
                ),
                False,
            )
        # Killed by a signal no limit explains (from outside: the host's OOM killer, an operator): a fault.
        # An exit of its own is the product's word, cached as any.
        return Code.RUNNER_PROTOCOL, f"the child ended early (exit {status})", signal_number != 0

    def cause(self) -> Optional[ChildFailed]:
        """The failure that ended the replay's children, as it was said when it happened."""
        return self._fate.first

    def healthy(self) -> bool:
        return self._fate.failure is None

    def check(self) -> None:
        if self._fate.failure is not None:
            raise self._fate.failure

    def ask(self, scope: int, call: bytes) -> bytes:
        """The answer to one call (`protocol`): sent, then read before anything else is sent."""
        self.check()
        if self._broken is None:
            try:
                self._process.stdin.write(protocol.call_frame(scope, call))  # type: ignore[union-attr]
                self._process.stdin.flush()  # type: ignore[union-attr]
            except OSError as exc:  # it stopped reading: its end, read below, says why
                self._broken = exc
        try:
            got = protocol.read_frame(self._process.stdout, protocol.MAX_ANSWER)  # type: ignore[arg-type]
            if got is None:  # its end, not the broken pipe, is the cause
                raise self._child_ended("")
            kind, payload = got
            if kind != protocol.ANSWER:
                raise protocol.ProtocolError(f"an unknown answer kind {kind!r}")
        except protocol.Truncated as exc:  # its end cut the answer short: why it ended is the cause
            raise self._child_ended(f" mid-answer ({exc})") from None
        except protocol.ProtocolError as exc:
            raise self.broke(str(exc)) from None
        self._charge(scope, payload)
        return payload

    def _child_ended(self, when: str) -> ChildFailed:
        """The failure of a child whose channel ended before its answer: a limit it went over (the watch's
        kill), or its early exit, `when` it ended."""
        try:
            status = self._end()
        except ChildFailed as failed:  # what it left behind would not end
            return self.fail(failed.code, failed.detail, failed.fault)
        code, why, fault = self._ended(status)
        return self.fail(code, why + when if code is Code.RUNNER_PROTOCOL else why, fault)

    def broke(self, why: str) -> ChildFailed:
        return self.fail(Code.RUNNER_PROTOCOL, f"the child broke the protocol: {why}")

    def _charge(self, scope: int, payload: bytes) -> None:
        """Ends the replay before the parent parses answers that would take it over what the product may
        use itself, with every answer it holds of the same run of a predicate. Decided on the texts alone,
        in the order they are read: the same answers always get the same outcome."""
        if scope != self._scope:
            self._scope, self._spent = scope, 0
        cost = protocol.parsed_cost(payload)
        if self._spent + cost > self._budget:
            raise self.fail(
                Code.REPLAY_FAILED,
                f"the product's answers to one record's calls ({len(payload)} bytes the last) would take some "
                f"{self._spent + cost} bytes of the judge's memory: over 1/{MAX_CHILDREN} of "
                f"{self._limits.address_space_limit()}",
            )
        self._spent += cost

    def finish(self) -> None:
        """Ends the stream of calls: the child exits once it has answered them all."""
        with contextlib.suppress(OSError):
            self._process.stdin.close()  # type: ignore[union-attr]

    def _settle(self) -> tuple[str, int, Optional[ChildFailed]]:
        """Waits for the child to exit (it has its end of stream), then kills and reaps its process group and
        what it left behind (`_end`): (why it did not end as it should, as far as known; its exit status;
        the failure that ended every child when what it left behind would not end: no pipe is read then)."""
        problem, status = "", 0
        try:
            if self._fate.failure is None:
                if self._broken is not None:
                    problem = f"the child stopped reading: {self._broken}"
                status = self._end()
            self._end()
        except ChildFailed as failed:
            return problem, status, self.fail(failed.code, failed.detail, failed.fault)
        return problem, status, None

    def _conclude(self, problem: str, status: int) -> Optional[ChildFailed]:
        """Once every child is reaped: the child must have exited 0 in time with nothing more on the channel.
        Returns why not, unless an earlier failure already ended it (the properties it left unevaluated
        carry that one)."""
        process = self._process
        assert process.stdout is not None
        fault = bool(problem)  # it stopped reading its calls
        if self._fate.failure is None:
            if process.stdout.read(1):
                problem, fault = "the child wrote more than its answers on the protocol channel", False
            if self._late and not problem:
                problem = f"the child did not exit within {EXIT_GRACE:g} s of its last answer"
            if status and not problem:
                problem = f"the child exited {status} after its answers"
        process.stdout.close()
        self._pass_on_output()
        watched = self._fate.exceeded()
        if self._fate.failure is None and watched is not None:
            return self.fail(Code.REPLAY_FAILED, f"the product went over {watched.exceeded}", watched.fault)
        return self.fail(Code.RUNNER_PROTOCOL, problem, fault) if problem else None

    def _pass_on_output(self) -> None:
        """What the product printed, the first KEPT_OUTPUT bytes of it, on the runner's own stderr."""
        if self._watch.kept:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.buffer.write(bytes(self._watch.kept))
                sys.stderr.flush()
