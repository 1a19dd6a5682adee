"""The parent's side of the replay's child process: start it, stream batches of records to it while it
evaluates the previous ones, read back exactly one verdict per record, and check how it ended."""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

import epoch_gate
from epoch_gate import stream
from epoch_gate.reasons import Code

# The child's interpreter is isolated (-I: no environment, no script folder, no user site; -S: no
# site-packages) and sees the runner first, then the standard library, then --child-path folders, and
# the sandbox's files only under the names it is given (epoch_gate.finder).
CHILD_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); from epoch_gate.child import main; "
              "sys.exit(main(sys.argv[2:]))")
RUNNER_ROOT = str(Path(epoch_gate.__file__).resolve().parent.parent)

F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, named in the module only from Python 3.10
PIPE_BYTES = 1 << 20  # Linux's default pipe-max-size for an unprivileged process
Batch = list[tuple[int, bytes]]  # (line number, exact record bytes)


class ChildFailed(Exception):
    """The child could not evaluate a property: its reason code and why."""

    def __init__(self, code: Code, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


@dataclass(frozen=True)
class _End:
    """The feeder is done: every record sent, or `error` stopped it (`broken`: writing to the child)."""

    error: Optional[BaseException] = None
    broken: bool = False


class Channel:
    """One child for the whole replay; one `evaluate` at a time."""

    def __init__(self, calls: list[str], sandbox: Path, sandbox_names: Iterable[str],
                 child_path: Iterable[str]) -> None:
        argv = [sys.executable, "-I", "-B", "-S", "-c", CHILD_BOOT, RUNNER_ROOT,
                "--sandbox-names", ",".join(sorted(set(sandbox_names))), f"--parent={os.getpid()}"]
        argv += [f"--call={call}" for call in calls]
        argv += [f"--child-path={folder}" for folder in child_path]
        # Its own session and process group, so `_end` can kill whatever the child forks (see there).
        self._process = subprocess.Popen(argv, cwd=sandbox, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         start_new_session=True)
        with contextlib.suppress(OSError):  # Linux only: room for a few batches in flight
            fcntl.fcntl(self._process.stdin.fileno(), F_SETPIPE_SZ, PIPE_BYTES)  # type: ignore[union-attr]
        self._failure: Optional[ChildFailed] = None

    def fail(self, code: Code, detail: str) -> ChildFailed:
        """Ends the child: after a broken protocol or tampering, nothing more it says is evidence."""
        self._failure = ChildFailed(code, f"not evaluated: the replay's child failed earlier: {detail}"[:500])
        if self._process.returncode is None:  # not reaped: its pid still names its process group
            self._kill_group()
        return ChildFailed(code, detail[:500])

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)

    def _end(self) -> int:
        """Waits for the child to exit, then kills its whole process group before reaping it (while the
        group's id cannot be reused): a process the child forked would otherwise outlive it and could
        rewrite the outputs the parent writes once the child is done. One that left
        the group (setsid) is not reached here; the jail kills it when the parent exits (bwrap
        --die-with-parent, its own PID namespace), after the outputs are written."""
        if self._process.returncode is None:
            os.waitid(os.P_PID, self._process.pid, os.WEXITED | os.WNOWAIT)
            self._kill_group()
        return self._process.wait()

    def _feed(self, index: int, batches: Iterable[Batch], sent: queue.Queue) -> None:
        """Reads ahead while the child evaluates: each batch is queued before it is written, so the reader
        always knows which request the next answer belongs to."""
        pipe = self._process.stdin
        assert pipe is not None
        try:
            for batch in batches:
                sent.put(batch)
                try:
                    pipe.write(stream.request(index, [record for _, record in batch]))
                    pipe.flush()
                except OSError as exc:
                    sent.put(_End(exc, broken=True))
                    return
        except BaseException as exc:  # noqa: BLE001 - reading the world failed: the reader raises it
            sent.put(_End(exc))
            return
        sent.put(_End())

    def evaluate(self, index: int, batches: Iterable[Batch]) -> Iterator[tuple[Batch, list[bytes]]]:
        """Yields each (non-empty) batch with its verdict lines, exactly one per record, in order. Raises
        ChildFailed, or what reading the batches raised (once every batch sent before it is answered)."""
        if self._failure is not None:
            raise self._failure
        sent: queue.Queue[Union[Batch, _End]] = queue.Queue()
        feeder = threading.Thread(target=self._feed, args=(index, batches, sent), daemon=True)
        feeder.start()
        refused: Optional[ChildFailed] = None
        done = False
        try:
            while True:
                item = sent.get()
                if isinstance(item, _End):
                    done = True
                    if item.broken:
                        raise self.fail(Code.RUNNER_PROTOCOL, f"the child stopped reading: {item.error}")
                    if item.error is not None:
                        raise item.error
                    break
                answer = self._answer(len(item))
                if isinstance(answer, ChildFailed):
                    refused = refused or answer  # the rest of the property's answers are read, not used
                elif refused is None:
                    yield item, answer
        finally:
            if not done and self._failure is None:
                self.fail(Code.RUNNER_PROTOCOL, "the replay stopped reading the child's answers")
            feeder.join()
        if refused is not None:
            raise refused

    def _answer(self, count: int) -> Union[list[bytes], ChildFailed]:
        """The next answer's verdict lines, or the property's refusal (an error frame)."""
        try:
            got = stream.read_frame(self._process.stdout)  # type: ignore[arg-type]
        except stream.ProtocolError as exc:
            raise self.fail(Code.RUNNER_PROTOCOL, f"the child broke the protocol: {exc}") from None
        if got is None:
            raise self.fail(Code.RUNNER_PROTOCOL, f"the child ended early (exit {self._end()})")
        kind, payload = got
        if kind == stream.ERROR:
            return self._refusal(payload)
        if kind != stream.VERDICTS:
            raise self.fail(Code.RUNNER_PROTOCOL, f"the child sent an unknown answer kind {kind!r}")
        lines = payload.split(b"\n")
        if len(lines) != count:
            raise self.fail(Code.RUNNER_PROTOCOL, f"the child answered {len(lines)} verdicts for {count} records")
        return lines

    def _refusal(self, payload: bytes) -> ChildFailed:
        try:
            code, detail = stream.parse_error(payload)
        except stream.ProtocolError as exc:
            raise self.fail(Code.RUNNER_PROTOCOL, f"the child broke the protocol: {exc}") from None
        if code == Code.PREDICATE_ERROR.value:
            return ChildFailed(Code.PREDICATE_ERROR, detail[:500])  # that property only: the child goes on
        if code == Code.PREDICATE_REPLACED.value:
            raise self.fail(Code.PREDICATE_REPLACED, detail)
        raise self.fail(Code.RUNNER_PROTOCOL, f"the child sent an unexpected code {code[:80]}")

    def close(self) -> Optional[ChildFailed]:
        """Ends the stream: the child must exit 0 with nothing more on the channel. Returns why not, unless
        an earlier failure already ended it (the properties it left unevaluated carry that one). Either way
        the child's process group is dead on return (`_end`): the parent's outputs come after."""
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        problem = ""
        if self._failure is None:
            try:
                process.stdin.close()
            except OSError as exc:
                problem = f"the child stopped reading: {exc}"
            if process.stdout.read(1):
                problem = "the child wrote more than its answers on the protocol channel"
            status = self._end()
            if status and not problem:
                problem = f"the child exited {status} after its answers"
        self._end()
        with contextlib.suppress(OSError):
            process.stdin.close()
        process.stdout.close()
        return self.fail(Code.RUNNER_PROTOCOL, problem) if problem else None
