"""Every TCP port a process tree listens on, from /proc, and what a web page gets there.

The ports are found, not listed: a process's sockets are the `socket:[inode]` links in
/proc/PID/fd, and /proc/PID/net/tcp and tcp6 name the listening ones (state 0A) of the
network namespace that process is in, with their address and port. A port the emulator
opens tomorrow is in these tables as today's are.
"""

from __future__ import annotations

import http.client
import os
import socket
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"
EVIL_ORIGIN = "https://evil.example"
EVIL_HOST = "attacker.example"


@dataclass(frozen=True)
class Listener:
    pid: int
    command: str  # the process's command line, for the report
    ours: bool  # in this test's network namespace (else in one nothing here reaches)
    host: str
    port: int


def tree(pid: int) -> list[int]:
    """`pid` and every process under it, as they are now."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        tasks = Path(f"/proc/{current}/task")
        try:
            threads = list(tasks.iterdir())
        except FileNotFoundError:
            continue  # gone meanwhile
        for task in threads:
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except FileNotFoundError:
                continue
    return found


def _address(hexed: str) -> tuple[str, int]:
    """/proc/net/tcp's `0100007F:1F90` (or tcp6's 32 hex digits): host, port."""
    addr, port = hexed.split(":")
    raw = b"".join(bytes.fromhex(addr[i : i + 8])[::-1] for i in range(0, len(addr), 8))
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw), int(port, 16)
    host = socket.inet_ntop(socket.AF_INET6, raw)
    return host.removeprefix("::ffff:") if "." in host else host, int(port, 16)


def listeners(root: int) -> list[Listener]:
    """The listening TCP sockets the processes under `root` hold, once each."""
    own_ns = os.readlink("/proc/self/ns/net")
    found: dict[tuple[str, str, int], Listener] = {}
    for pid in tree(root):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/net")
            fds = os.listdir(f"/proc/{pid}/fd")
            tables = [Path(f"/proc/{pid}/net/{t}").read_text() for t in ("tcp", "tcp6")]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone meanwhile
        inodes = set()
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except FileNotFoundError:
                continue  # closed between the listing and the read (a listening one is not)
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        for table in tables:
            for line in table.splitlines()[1:]:
                fields = line.split()
                if fields[3] == LISTEN and fields[9] in inodes:
                    host, port = _address(fields[1])
                    key = (ns, host, port)
                    found.setdefault(key, Listener(pid, command, ns == own_ns, host, port))
    return list(found.values())


def protocol(host: str, port: int) -> str:
    """`http` (HTTP/1), `ssh` (its banner), `http2` (a SETTINGS frame: HTTP/2 alone, as
    gRPC's servers speak in clear text), or what it answered to an HTTP/1 request."""
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        head = b""
        while len(head) < 8:
            data = conn.recv(8 - len(head))
            if not data:
                break
            head += data
    if head.startswith(b"HTTP/1."):
        return "http"
    if head.startswith(b"SSH-"):
        return "ssh"
    if len(head) >= 4 and head[3] == 0x04:  # a frame's type: SETTINGS
        return "http2"
    return f"unknown: {head!r}"


def send(
    host: str, port: int, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (a browser's): status, headers, body."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


SECRET_NAME, SECRET_BYTES = "secret-7f3a", b"secret-bytes-7f3a"  # a bucket's own object
NODE = b'{"acceleratorType": "v3-8", "runtimeVersion": "tpu-ubuntu2204-base"}'

Request = tuple[str, str, dict[str, str], bytes]


def web_page_requests(bucket: str, nodes: str) -> list[Request]:
    """What a page can send to a port it found: uploads, listings, a download and a node's
    creation (`nodes`: the collection's path), cross-origin (with its Origin) or through a
    name rebound to 127.0.0.1 (with its Host)."""
    upload = f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
    text = {"Content-Type": "text/plain;charset=UTF-8"}
    json = {"Content-Type": "application/json"}
    found: list[Request] = []
    for why, header in (("origin", {"Origin": EVIL_ORIGIN}), ("host", {"Host": EVIL_HOST})):
        found += [
            ("POST", f"{upload}planted-by-{why}", {**text, **header}, b"print('owned')"),
            ("GET", f"/storage/v1/b/{bucket}/o", header, b""),
            ("GET", f"/download/storage/v1/b/{bucket}/o/{SECRET_NAME}?alt=media", header, b""),
            ("POST", f"{nodes}?nodeId=evil-{why}", {**text, **header}, NODE),
            ("POST", f"{nodes}?nodeId=evil-{why}-json", {**json, **header}, NODE),
        ]
    return found


def unchecked(host: str, port: int, bucket: str, nodes: str) -> list[str]:
    """What a web page got from the HTTP port host:port that it must not: an answer other
    than 403 to a request with its Origin or Host, a CORS grant, the secret object."""
    problems = []
    for method, path, headers, body in web_page_requests(bucket, nodes):
        status, answer, data = send(host, port, method, path, headers, body)
        said = f"{host}:{port} {method} {path} {sorted(headers)}"
        if status != 403:
            problems.append(f"{said}: {status}, not 403")
        if "access-control-allow-origin" in answer:
            grant = answer["access-control-allow-origin"]
            problems.append(f"{said}: Access-Control-Allow-Origin: {grant}")
        if SECRET_NAME.encode() in data or SECRET_BYTES in data:
            problems.append(f"{said}: the bucket's object in the answer")
    preflight = {"Origin": EVIL_ORIGIN, "Access-Control-Request-Method": "PUT"}
    status, answer, _ = send(host, port, "OPTIONS", f"/storage/v1/b/{bucket}/o", preflight)
    if status < 400 or any(name.startswith("access-control-") for name in answer):
        problems.append(f"{host}:{port} OPTIONS (a preflight): {status}, {sorted(answer)}")
    return problems
