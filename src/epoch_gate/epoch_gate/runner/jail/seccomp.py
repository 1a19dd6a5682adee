"""The system calls the product's own jail refuses: those that hold memory no process of the tree shows, so
that the watch over the child (`epoch_gate.runner.jail.confine.Watch`) would not see it.

- `shmget`, `msgget`, `semget`: SysV shared memory, message queues and semaphore sets live in the jail's
  IPC namespace, in no process's memory and in no file the watch can read (200 sets of 32,000
  semaphores held 400 MiB);
- `memfd_create`, `memfd_secret`: a memfd sent over a Unix socket and closed is in no process's table;
- `io_uring_setup`: its rings and buffers are the kernel's;
- `vmsplice`: a pipe holding one byte of each huge page keeps the whole page (64 bytes kept 128 MiB);
- `listen`: a listener's queue holds every connection made to it and closed, with what was sent (2,000
  of them held 417 MiB behind one descriptor). The child has no network but its own loopback: nothing
  to serve;
- `socket` and `socketpair` of Unix sockets other than streams (datagram, sequenced-packet, and raw,
  which the kernel makes a datagram one): a receiver's queue holds the datagrams of senders that closed
  (11 of 3 MiB behind one descriptor); Unix stream sockets, bounded by their send buffers, stay.

The product sees them fail with ENOSYS, as on a kernel without them, so a library that has a fallback takes
it. bubblewrap loads the filter (`--seccomp FD`) as the last step before it runs the child, under
no_new_privs, so it binds everything the child starts.
"""

from __future__ import annotations

import os
import struct
from typing import Optional, Union

# Classic BPF, as seccomp reads it: struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}, over struct
# seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6]} (little-endian: an argument's low
# word first).
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24  # offsets in seccomp_data
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ENOSYS = 0x00050000 | 38  # SECCOMP_RET_ERRNO | ENOSYS
_X32 = 0x40000000  # x86-64's x32 calls: the same arch, these numbers or'ed in
_AF_UNIX, _SOCK_TYPE, _SOCK_STREAM = 1, 0xF, 1

# (the kernel's AUDIT_ARCH, the refused calls' numbers) by `uname -m`
REFUSED = ("shmget", "msgget", "semget", "memfd_create", "memfd_secret", "io_uring_setup", "vmsplice", "listen")
_ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "shmget": 29,
            "msgget": 68,
            "semget": 64,
            "memfd_create": 319,
            "memfd_secret": 447,
            "io_uring_setup": 425,
            "vmsplice": 278,
            "listen": 50,
            "socket": 41,
            "socketpair": 53,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "shmget": 194,
            "msgget": 186,
            "semget": 190,
            "memfd_create": 279,
            "memfd_secret": 447,
            "io_uring_setup": 425,
            "vmsplice": 75,
            "listen": 201,
            "socket": 198,
            "socketpair": 199,
        },
    ),
}


Step = tuple[int, int, str, str]  # (code, k, label when true, label when false): "" is the next step


def _assembled(steps: list[Union[str, Step]]) -> bytes:
    """The program, its jumps to labels (the strings among the steps) counted from the next instruction."""
    at, position = {}, 0
    for step in steps:
        if isinstance(step, str):
            at[step] = position
        else:
            position += 1
    code: list[bytes] = []
    for op, k, when_true, when_false in (step for step in steps if not isinstance(step, str)):
        here = len(code)
        jump_true = at[when_true] - here - 1 if when_true else 0
        jump_false = at[when_false] - here - 1 if when_false else 0
        code.append(struct.pack("=HBBI", op, jump_true, jump_false, k))
    return b"".join(code)


def child_filter(machine: Optional[str] = None) -> Optional[bytes]:
    """The compiled filter for this machine (`os.uname().machine` by default), or None for one it does not
    know: then the product's jail cannot start, and the jail's probe says so. A call made through another
    ABI (x86-64's 32-bit or x32 calls, whose numbers differ) is refused whatever it is."""
    arch, numbers = _ARCHES.get(machine or os.uname().machine, (None, None))
    if arch is None or numbers is None:
        return None
    steps: list[Union[str, Step]] = [
        (_LOAD_WORD, _ARCH, "", ""),
        (_JUMP_EQUAL, arch, "", "refuse"),
        (_LOAD_WORD, _NR, "", ""),
    ]
    if arch == _ARCHES["x86_64"][0]:
        steps.append((_JUMP_AT_LEAST, _X32, "refuse", ""))
    steps += [(_JUMP_EQUAL, numbers[name], "refuse", "") for name in REFUSED]
    steps += [(_JUMP_EQUAL, numbers[name], "socket", "") for name in ("socket", "socketpair")]
    steps += [
        (_RETURN, _ALLOW, "", ""),
        "socket",  # a Unix socket other than a stream (SOCK_RAW is a datagram one there): refused
        (_LOAD_WORD, _ARG0, "", ""),
        (_JUMP_EQUAL, _AF_UNIX, "", "allow"),
        (_LOAD_WORD, _ARG1, "", ""),
        (_AND, _SOCK_TYPE, "", ""),
        (_JUMP_EQUAL, _SOCK_STREAM, "allow", "refuse"),
        "allow",
        (_RETURN, _ALLOW, "", ""),
        "refuse",
        (_RETURN, _ENOSYS, "", ""),
    ]
    return _assembled(steps)
