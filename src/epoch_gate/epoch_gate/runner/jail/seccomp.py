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
  to serve.

The product sees them fail with ENOSYS, as on a kernel without them, so a library that has a fallback takes
it. bubblewrap loads the filter (`--seccomp FD`) as the last step before it runs the child, under
no_new_privs, so it binds everything the child starts.
"""

from __future__ import annotations

import os
import struct
from typing import Optional

# Classic BPF, as seccomp reads it: struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}, over struct
# seccomp_data {int nr; u32 arch; ...}.
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
_NR, _ARCH = 0, 4  # offsets in seccomp_data
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ENOSYS = 0x00050000 | 38  # SECCOMP_RET_ERRNO | ENOSYS
_X32 = 0x40000000  # x86-64's x32 calls: the same arch, these numbers or'ed in

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
        },
    ),
}


def _instruction(code: int, k: int, jump_true: int = 0, jump_false: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jump_true, jump_false, k)


def child_filter(machine: Optional[str] = None) -> Optional[bytes]:
    """The compiled filter for this machine (`os.uname().machine` by default), or None for one it does not
    know: then the product's jail cannot start, and the jail's probe says so. A call made through another
    ABI (x86-64's 32-bit or x32 calls, whose numbers differ) is refused whatever it is."""
    arch, numbers = _ARCHES.get(machine or os.uname().machine, (None, None))
    if arch is None or numbers is None:
        return None
    refused = [numbers[name] for name in REFUSED]
    checks = [_instruction(_JUMP_AT_LEAST, _X32, len(refused) + 1)] if arch == _ARCHES["x86_64"][0] else []
    # Each check jumps, when it matches, to the refusal after the ALLOW: counted from the next instruction.
    for index, number in enumerate(refused):
        checks.append(_instruction(_JUMP_EQUAL, number, len(refused) - index))
    program = [
        _instruction(_LOAD_WORD, _ARCH),
        _instruction(_JUMP_EQUAL, arch, 0, len(checks) + 2),  # another ABI: to the refusal
        _instruction(_LOAD_WORD, _NR),
        *checks,
        _instruction(_RETURN, _ALLOW),
        _instruction(_RETURN, _ENOSYS),
    ]
    return b"".join(program)
