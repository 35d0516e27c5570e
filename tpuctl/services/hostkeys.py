"""The host keys of TPU VM workers, as the cloud publishes them in each worker's guest
attributes (`hostkeys/<type>`), checked and written to tpuctl's own known-hosts file.

Whoever can write one guest attribute on one VM (any process on it) chooses what tpuctl
reads here, so a value is trusted only when it is exactly one public key of the type it
claims, and a line is written only for the worker's own address (docs/ssh.md; the chaos
harness's "injected host keys" scenario attacks it).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import ipaddress
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl.errors import CloudError, UntrustedHostKey
from tpuctl.models import Node
from tpuctl.waiting import Progress, noop, poll_until

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import Endpoint

HOSTKEYS = "hostkeys"
_ECDSA = {"ecdsa-sha2-nistp256": 32, "ecdsa-sha2-nistp384": 48, "ecdsa-sha2-nistp521": 66}
HOST_KEY_TYPES = ("ssh-ed25519", *_ECDSA, "ssh-rsa")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_RSA_BITS = (1024, 16384)


def _wire_strings(blob: bytes) -> list[bytes]:
    """The SSH wire format's length-prefixed strings (uint32 length, bytes) making up
    `blob`, all of it; ValueError when a length runs past the end."""
    fields = []
    at = 0
    while at < len(blob):
        if at + 4 > len(blob):
            raise ValueError("truncated length")
        (size,) = struct.unpack(">I", blob[at : at + 4])
        at += 4
        if at + size > len(blob):
            raise ValueError("truncated string")
        fields.append(blob[at : at + size])
        at += size
    return fields


def _positive_mpint(data: bytes) -> int | None:
    """An SSH mpint that is positive and minimally encoded, else None."""
    if not data or data[0] & 0x80 or (data[0] == 0 and (len(data) == 1 or not data[1] & 0x80)):
        return None
    return int.from_bytes(data, "big")


def _blob_fits(algorithm: str, fields: list[bytes]) -> bool:
    """Whether the fields after the type string are a public key of `algorithm`."""
    if algorithm == "ssh-ed25519":
        return len(fields) == 1 and len(fields[0]) == 32
    if algorithm == "ssh-rsa":
        if len(fields) != 2:
            return False
        e, n = (_positive_mpint(f) for f in fields)
        return bool(e and n and e > 1 and _RSA_BITS[0] <= n.bit_length() <= _RSA_BITS[1])
    size = _ECDSA[algorithm]  # uncompressed point: 0x04, x, y
    curve = algorithm.rsplit("-", 1)[1].encode()
    return (
        len(fields) == 2
        and fields[0] == curve
        and len(fields[1]) == 1 + 2 * size
        and fields[1][0] == 4
    )


def host_key_problem(algorithm: str, value: str) -> str | None:
    """Why (`algorithm`, `value`) is not exactly one public host key, or None when it is:
    the algorithm one of HOST_KEY_TYPES, the value one canonical base64 string (no
    whitespace, nothing after it) of an SSH key blob of that very type."""
    if algorithm not in HOST_KEY_TYPES:
        return "not a host key type tpuctl accepts (" + ", ".join(HOST_KEY_TYPES) + ")"
    if not _BASE64.fullmatch(value) or len(value) % 4:
        return "not one base64 key"
    try:
        blob = base64.b64decode(value, validate=True)
        fields = _wire_strings(blob)
    except (binascii.Error, ValueError):
        return "not an SSH public key"
    if base64.b64encode(blob).decode() != value or not fields:
        return "not an SSH public key"
    if fields[0] != algorithm.encode():
        return f"a key of another type ({fields[0][:40]!r})"
    if not _blob_fits(algorithm, fields[1:]):
        return f"not a well-formed {algorithm} key"
    return None


def published_host_keys(
    api: TpuBackend,
    node: Node,
    workers: list[int],
    timeout: float = 60.0,
    progress: Progress = noop,
) -> dict[int, list[tuple[str, str]]]:
    """(algorithm, base64 key) per worker, from the node's guest attributes, only the
    well-formed ones (`host_key_problem`); waits (with back-off) while a booting worker
    has published nothing yet. `UntrustedHostKey` for a worker whose keys are all
    malformed: it is refused, never trusted on its word."""
    missing: list[int] = []

    def check() -> tuple[dict[int, list[tuple[str, str]]] | None, str]:
        attributes = api.get_guest_attributes(node.full_name, f"{HOSTKEYS}/")
        keys = {}
        for w in workers:
            published = [
                (path.split("/", 1)[1], value)
                for path, value in (attributes[w] if w < len(attributes) else {}).items()
                if path.startswith(f"{HOSTKEYS}/") and value
            ]
            keys[w] = [(kind, v) for kind, v in published if not host_key_problem(kind, v)]
            if published and not keys[w]:
                kind, value = published[0]
                raise UntrustedHostKey(
                    f"worker {w} of {node.name} publishes no well-formed SSH host key "
                    f"({HOSTKEYS}/{kind[:40]}: {host_key_problem(kind, value)}): refused",
                    hint="a TPU VM publishes one base64 key per algorithm; anything else "
                    "was written by something on the VM (docs/ssh.md, Host keys)",
                )
        missing[:] = [w for w, found in keys.items() if not found]
        return (None if missing else keys), "no host keys"

    return poll_until(
        check,
        what=f"the host keys of {node.name}",
        progress=progress,
        timeout=timeout,
        poll=0.5,
        factor=1.6,
        timed_out=lambda state, elapsed: CloudError(
            f"worker {missing[0]} of {node.name} has not published its SSH host keys "
            f"(guest attributes {HOSTKEYS}/) after {timeout:.0f} s",
            hint="a TPU VM publishes them once booted; try again in a minute",
        ),
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _one_host(pattern: str) -> bool:
    """Whether a known-hosts host field names exactly one address: `IP` or `[IP]:PORT`,
    never a wildcard, a list, a negation or a hashed name."""
    if _is_address(pattern):
        return True
    m = re.fullmatch(r"\[([0-9A-Fa-f.:]+)\]:(\d{1,5})", pattern)
    return bool(m and _is_address(m[1]) and 0 < int(m[2]) < 65536)


def _trusted_line(line: str) -> bool:
    """A line tpuctl would write: one address, an accepted algorithm, one good key."""
    fields = line.split()
    return (
        len(fields) in (3, 4)
        and _one_host(fields[0])
        and host_key_problem(fields[1], fields[2]) is None
    )


def write_known_hosts(
    path: Path, node: Node, endpoints: list[Endpoint], keys: dict[int, list[tuple[str, str]]]
) -> None:
    """Put the published keys of these workers in tpuctl's known-hosts file, one line
    per key: `HOST ALGORITHM KEY tpuctl:PROJECT/ZONE/NODE/wK`, HOST being the worker's
    own address (with its port when not 22). Lines of the same node and worker, or of
    the same address (a recreated node, a reused IP), are replaced; lines that are not
    of that form (a wildcard, a marker, another pattern) are dropped: the file is
    tpuctl's alone. A key or an address that is not well-formed is a CloudError."""
    tag = re.sub(r"[^A-Za-z0-9._:/-]", "_", f"tpuctl:{node.project}/{node.zone}/{node.name}/")
    patterns = {ep.host_pattern for ep in endpoints}
    workers = {f"{tag}w{ep.worker}" for ep in endpoints}
    new = []
    for ep in endpoints:
        if not _one_host(ep.host_pattern):
            raise CloudError(f"worker {ep.worker} of {node.name} has no valid address: {ep.host!r}")
        for kind, value in keys[ep.worker]:
            problem = host_key_problem(kind, value)
            if problem:
                raise UntrustedHostKey(
                    f"worker {ep.worker} of {node.name}: host key {kind[:40]!r} is {problem}"
                )
            new.append(f"{ep.host_pattern} {kind} {value} {tag}w{ep.worker}")
    with _locked(path):
        try:
            old = path.read_text().splitlines()
        except FileNotFoundError:
            old = []
        kept = []
        for line in old:
            fields = line.split()
            if not _trusted_line(line) or fields[0] in patterns or fields[-1] in workers:
                continue
            kept.append(line)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(f"{ln}\n" for ln in kept + new))
        os.replace(tmp, path)
