"""The child's seccomp filter, run by a small interpreter of the instructions it uses: the refused calls
end in ENOSYS on each machine it knows, every other call is allowed, and another ABI is refused whole."""

from __future__ import annotations

import struct

import pytest

from epoch_gate.runner.jail.seccomp import _ARCHES, REFUSED, child_filter

ALLOW, ENOSYS = 0x7FFF0000, 0x00050000 | 38


def run(program: bytes, nr: int, arch: int, args: tuple[int, int] = (0, 0)) -> int:
    """What the filter returns for a call: classic BPF's load-absolute, and-constant, jump-if-equal,
    jump-if-at-least and return, over seccomp_data's nr, arch and first two arguments' low words."""
    instructions = list(struct.iter_unpack("=HBBI", program))
    data = {0: nr, 4: arch, 16: args[0], 24: args[1]}
    pc, accumulator = 0, 0
    for _ in range(len(instructions)):
        code, jump_true, jump_false, k = instructions[pc]
        if code == 0x20:
            accumulator, pc = data[k], pc + 1
        elif code == 0x54:
            accumulator, pc = accumulator & k, pc + 1
        elif code in (0x15, 0x35):
            taken = accumulator == k if code == 0x15 else accumulator >= k
            pc += 1 + (jump_true if taken else jump_false)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"instruction {code:#x} at {pc}")
    raise AssertionError("the filter ran off its end")


@pytest.mark.parametrize("machine", sorted(_ARCHES))
def test_the_refused_calls_and_nothing_else(machine: str) -> None:
    arch, numbers = _ARCHES[machine]
    program = child_filter(machine)
    assert program is not None
    refused = {numbers[name] for name in REFUSED}
    assert {nr for nr in range(1024) if run(program, nr, arch) == ENOSYS} == refused
    assert all(run(program, nr, arch) == ALLOW for nr in range(1024) if nr not in refused)
    # Unix sockets but streams (datagram, raw, which the kernel makes datagram, sequenced-packet; SOCK_CLOEXEC
    # and SOCK_NONBLOCK or'ed in or not) are refused; Unix streams, and every other family, are not
    for name in ("socket", "socketpair"):
        for kind in (2, 3, 5, 2 | 0o2000000, 3 | 0o4000, 5 | 0o4000, 0, 10):
            assert run(program, numbers[name], arch, (1, kind)) == ENOSYS
        for family, kind in ((1, 1), (1, 1 | 0o2000000), (2, 2), (10, 1), (16, 3)):
            assert run(program, numbers[name], arch, (family, kind)) == ALLOW


def test_another_abi_is_refused_whole() -> None:
    program = child_filter("x86_64")
    assert program is not None
    i386 = 0x40000003
    assert {run(program, nr, i386) for nr in range(512)} == {ENOSYS}
    x86_64 = _ARCHES["x86_64"][0]
    assert {run(program, 0x40000000 | nr, x86_64) for nr in (0, 1, 29, 319, 512)} == {ENOSYS}  # x32


def test_a_machine_it_does_not_know_has_no_filter() -> None:
    assert child_filter("riscv64") is None
