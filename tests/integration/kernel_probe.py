#!/usr/bin/python3
"""A sandboxed tool that tries the kernel interfaces a tool never needs (x86-64
system call numbers) and prints what each answered: "ok" or the errno's name.
Run as a tool by tests/integration/test_seccomp_filter.py."""

import ctypes
import errno
import json
import os
import socket
import sys

sys.stdin.read()
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    return "ok" if r != -1 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def sock(*args):
    try:
        s = socket.socket(*args)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    s.close()
    return "ok"


def listen_unbound():
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    try:
        s.listen()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        s.close()
    return "ok"


def x32():
    pid = os.fork()
    if pid == 0:
        libc.syscall(ctypes.c_long(0x40000000 | 41), 17, 3, 0)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else "exited"


def traceme():
    # In a child: a traced process would change how the rest of the probes run.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, sc(101, 0, 0, 0, 0).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return os.read(read, 64).decode()


buf = ctypes.create_string_buffer(120)
KIND, NAME = ctypes.create_string_buffer(b"user"), ctypes.create_string_buffer(b"x")
probes = {
    "tcp": lambda: sock(socket.AF_INET, socket.SOCK_STREAM, 0),
    "tcp6": lambda: sock(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC, 6),
    "udp": lambda: sock(socket.AF_INET, socket.SOCK_DGRAM, 0),
    "unix": lambda: sock(socket.AF_UNIX, socket.SOCK_STREAM, 0),
    "netlink_route": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 0),
    "mptcp": lambda: sock(socket.AF_INET, socket.SOCK_STREAM, 262),
    "sctp": lambda: sock(socket.AF_INET, socket.SOCK_SEQPACKET, 132),
    "ping": lambda: sock(socket.AF_INET, socket.SOCK_DGRAM, 1),
    "raw": lambda: sock(socket.AF_INET, socket.SOCK_RAW, 255),
    "packet": lambda: sock(17, socket.SOCK_RAW, 0),
    "sock_diag": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 4),
    "high_family": lambda: sc(41, (1 << 32) | 17, 3, 0),
    "listen_unbound": listen_unbound,
    "keyctl": lambda: sc(250, 0, -3, 0),
    "add_key": lambda: sc(
        248,
        ctypes.addressof(ctypes.create_string_buffer(b"user")),
        ctypes.addressof(ctypes.create_string_buffer(b"x")),
        0,
        0,
        -3,
    ),
    "io_uring_setup": lambda: sc(425, 1, ctypes.addressof(buf)),
    "userfaultfd": lambda: sc(323, 1),
    "unshare_user": lambda: sc(272, 0x10000000),
    "unshare_net": lambda: sc(272, 0x40000000),
    "clone3": lambda: sc(435, 0, 0),
    "ptrace": traceme,
    "bpf": lambda: sc(321, 0, 0, 0),
    "perf_event_open": lambda: sc(298, 0, 0, -1, -1, 0),
    "mount": lambda: sc(165, 0, 0, 0, 0, 0),
    "tiocsti": lambda: sc(16, 0, (1 << 32) | 0x5412, ctypes.addressof(buf)),
    "x32_socket": x32,
}
print(json.dumps({name: probe() for name, probe in probes.items()}))
