"""Cloud Storage's server on a network of its own, which only the emulator reaches.

fake-gcs-server listens on TCP alone, answers any Host, and sends
`Access-Control-Allow-Origin: *`: wherever it listens on the machine's network, a web page
open in a browser, or a worker's process, reaches it past the proxy's checks (proxy.py,
core/browsers.py). So it runs in a network namespace of its own (Linux, unshare(2)), on
that namespace's loopback, which no process outside it can connect to.

`python -m tpuctl.emulator.storage.private_net FD -- fake-gcs-server ...` makes the
namespace (CLONE_NEWNET; with CLONE_NEWUSER where the kernel wants one for that), brings
its loopback up, tells the emulator `ok` (or `error: why`) over the unix socket FD, starts
the server in it, and then hands the emulator, for each `s` it sends, a TCP socket made in
the namespace (SCM_RIGHTS). A socket stays in the namespace it was made in: the
emulator's connect() on it reaches the server, and its bytes flow straight, not through
this process. With `--given` first, the namespace was made already (bubblewrap's
--unshare-net, where the kernel lets bubblewrap but not us). The server goes when the
emulator closes FD, or this process is terminated.

Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import http.client
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable

HOST, PORT = "127.0.0.1", 4443  # in the namespace, where nothing else listens
GIVEN = "--given"
_CLONE_NEWNET, _CLONE_NEWUSER = 0x40000000, 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGKILL the child when its parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    prctl = libc.prctl  # looked up before fork: the child only calls it
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _unshare() -> None:
    """This process into a network namespace of its own (single-threaded, as at start)."""
    if not sys.platform.startswith("linux"):
        raise OSError(f"no network namespaces on {sys.platform}")
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWNET) == 0:  # root, or CAP_SYS_ADMIN
        return
    if libc.unshare(_CLONE_NEWNET | _CLONE_NEWUSER) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET|CLONE_NEWUSER): {os.strerror(err)}")
    # the same ids inside, so the files it writes are the user's
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _loopback_up() -> None:
    """A new namespace's `lo` is down, without 127.0.0.1: up, the kernel gives it one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sh", b"lo", 0).ljust(40, b"\0")
        flags = struct.unpack_from("16sh", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        request = struct.pack("16sh", b"lo", flags | _IFF_UP).ljust(40, b"\0")
        fcntl.ioctl(probe, _SIOCSIFFLAGS, request)


def stop(child: subprocess.Popen[bytes], grace: float = 0) -> None:
    """Reap `child`: ended on its own within `grace` seconds, else terminated, else killed."""
    for end in (None, child.terminate, child.kill):
        if end is not None:
            end()
        try:
            child.wait(timeout=grace if end is None else 5)
            return
        except subprocess.TimeoutExpired:
            continue
    child.wait()


def main(argv: list[str]) -> int:
    given = bool(argv) and argv[0] == GIVEN
    argv = argv[1:] if given else argv
    if len(argv) < 3 or argv[1] != "--":
        print("usage: private_net [--given] FD -- COMMAND...", file=sys.stderr)
        return 2
    channel = socket.socket(fileno=int(argv[0]))
    try:
        if not given:
            _unshare()
            _loopback_up()
    except OSError as exc:
        channel.send(f"error: {exc}".encode())
        return 3
    channel.send(b"ok")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the finally below stops the server
    child = subprocess.Popen(
        argv[2:],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),  # noqa: PLW1509 - only prctl runs in the child
    )
    try:
        while child.poll() is None:
            if not select.select([channel], [], [], 0.5)[0]:
                continue
            if not channel.recv(16):
                break  # the emulator closed its end, or is gone
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as made:
                socket.send_fds(channel, [b"s"], [made.fileno()])
    finally:
        stop(child)
    return 0


class Dialer:
    """The emulator's end of FD: a socket made in the server's namespace, on demand."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self._lock = threading.Lock()  # one request and its answer at a time

    def socket(self) -> socket.socket:
        with self._lock:
            self.channel.sendall(b"s")
            _, fds, _, _ = socket.recv_fds(self.channel, 16, 1)
        if not fds:
            raise ConnectionRefusedError("Cloud Storage's server has stopped")
        return socket.socket(fileno=fds[0])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.channel.close()


class PrivateConnection(http.client.HTTPConnection):
    """An HTTP connection to the server in its namespace, over a socket `dial` hands over."""

    def __init__(self, dial: Callable[[], socket.socket], timeout: float) -> None:
        super().__init__(HOST, PORT, timeout=timeout)
        self._dial = dial

    def connect(self) -> None:
        sock = self._dial()
        try:
            sock.settimeout(self.timeout)
            sock.connect((HOST, PORT))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            sock.close()
            raise
        self.sock = sock


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
