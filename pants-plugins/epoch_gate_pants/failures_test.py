from __future__ import annotations

from epoch_gate_pants.failures import failure_line


class Failed(Exception):
    def __init__(self, stderr: bytes) -> None:
        super().__init__("Process failed with exit code 1.")
        self.stderr = stderr


def test_the_cause_pip_names_is_the_line_not_the_list_of_what_it_tried() -> None:
    """A broken download read `AssertionError 2. colorama 0.4.6 from https://...whl AssertionError`: the
    last lines, with the cause above them."""
    stderr = (
        b"pid 7 -> /pex/venv/bin/python -sE /pex/pip download ... exited with 1 and STDERR:\n"
        b"ERROR: Could not install packages due to an OSError: [Errno 13] Permission denied: '/etc/pip.conf'\n"
        b"Failed to resolve:\n1. pytest 7.0.1 from https://files.example/pytest.whl\n"
        b"2. colorama 0.4.6 from https://files.example/colorama.whl\nAssertionError\n"
        b"Use --keep-sandboxes=on_failure to preserve the process chroot for inspection.\n"
    )
    assert failure_line(Failed(stderr)) == (
        "ERROR: Could not install packages due to an OSError: [Errno 13] Permission denied: '/etc/pip.conf'"
    )


def test_without_a_named_cause_the_last_lines_say_it() -> None:
    assert failure_line(Failed(b"one\ntwo\nthree\nfour\n")) == "two three four"
    assert failure_line(Failed(b"")) == "Process failed with exit code 1."
