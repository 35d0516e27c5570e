"""SSH to TPU VM workers: who (key and user), where (workers and addresses) and whom to
trust (the host keys the cloud publishes, written to tpuctl's own known-hosts file).

`plan()` does it all for one node and returns a `Plan` that both the system OpenSSH
client (`openssh_command`) and tpuctl's own client (services.remote) connect with.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import ipaddress
import os
import re
import shlex
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl import wording
from tpuctl.config import login_name, state_dir
from tpuctl.errors import CloudError, UntrustedHostKey, UsageError
from tpuctl.models import DEAD_STATES, Node
from tpuctl.services import oslogin
from tpuctl.waiting import poll_until

if TYPE_CHECKING:
    from tpuctl.cloud.ssh import Endpoint, SshApi
    from tpuctl.cloud.tpu import TpuApi

KEY_FILE = "google_compute_engine"  # gcloud's key: both tools share one identity
KNOWN_HOSTS_FILE = "known_hosts"
HOSTKEYS = "hostkeys"
_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def key_path() -> Path:
    return Path.home() / ".ssh" / KEY_FILE


def known_hosts_path() -> Path:
    return state_dir() / KNOWN_HOSTS_FILE


def ssh_user(name: str | None = None) -> str:
    """The local user name made valid for a Linux VM: lowercase letters, digits, `_`
    and `-`, starting with a letter or `_`, at most 32 characters (`John.Doe` ->
    `john_doe`, `1x` -> `_1x`)."""
    if name is None:
        name = login_name()
    user = re.sub(r"[^a-z0-9_-]", "_", name.lower())
    if not user or not re.match(r"[a-z_]", user[0]):
        user = "_" + user
    return user[:32]


def parse_workers(spec: str, count: int, node: str = "the node") -> list[int]:
    """`all`, `0,2`, `1-3` or a mix (`0,2-3`) -> sorted worker indices, each checked."""
    spec = spec.strip().lower()
    if spec == "all":
        return list(range(count))
    wanted: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise UsageError(
                f"invalid --worker {spec!r}: use all, a number, a list (0,2) or a range (1-3)"
            ) from None
        if first > last or first < 0:
            raise UsageError(f"invalid worker range {part!r}")
        wanted.update(range(first, last + 1))
    if not wanted:
        raise UsageError("--worker names no worker: use all, a number, 0,2 or 1-3")
    unknown = sorted(w for w in wanted if w >= count)
    if unknown:
        raise UsageError(
            f"{node} has {wording.count(count, 'worker')} "
            f"({'0' if count == 1 else f'0-{count - 1}'}): "
            f"there is no worker {unknown[0]}",
            hint="--worker all runs on every worker",
        )
    return sorted(wanted)


def check_connectable(node: Node) -> None:
    """Only a READY node can be reached; say why not, in gcloud's words."""
    if node.state == "READY":
        return
    hint = f"wait until it is READY: `tpuctl describe {node.name}` shows its state"
    if node.state in {"STOPPED", "STOPPING"}:
        hint = f"start it with `tpuctl start {node.name}`"
    elif node.state in DEAD_STATES:
        raise UsageError(
            f"TPU {node.name} has terminal state {node.state}, so it cannot be used anymore",
            hint=f"delete it (`tpuctl delete {node.name}`) and create it again",
        )
    raise UsageError(
        f"TPU {node.name} has state {node.state}, so it cannot be currently connected to",
        hint=hint,
    )


def worker_address(node: Node, worker: int, internal_ip: bool) -> str:
    w = node.workers[worker]
    if internal_ip:
        return w.internal_ip
    if not w.external_ip:
        raise UsageError(
            f"worker {worker} of {node.name} has no external IP address",
            hint="connect from inside its VPC network (or over a VPN into it) with --internal-ip",
        )
    return w.external_ip


# -- the key in the node's metadata -------------------------------------------------
def _key_fields(public_key: str) -> tuple[str, str]:
    fields = public_key.split()
    return fields[0], fields[1]


def has_key(metadata: dict[str, str], user: str, public_key: str) -> bool:
    wanted = _key_fields(public_key)
    for line in (metadata.get("ssh-keys") or "").splitlines():
        who, sep, key = line.strip().partition(":")
        if sep and who == user and tuple(key.split()[:2]) == wanted:
            return True
    return False


def with_key(metadata: dict[str, str], user: str, public_key: str) -> dict[str, str] | None:
    """The metadata with `user:KEY user` added to `ssh-keys` (keeping every key already
    there), or None when it is there already."""
    if has_key(metadata, user, public_key):
        return None
    kind, blob = _key_fields(public_key)
    lines = [ln for ln in (metadata.get("ssh-keys") or "").splitlines() if ln.strip()]
    lines.append(f"{user}:{kind} {blob} {user}")
    return {**metadata, "ssh-keys": "\n".join(lines)}


def authorize(api: TpuApi, node: Node, user: str, public_key: str) -> bool:
    """Make sure the node's `ssh-keys` metadata holds the key; True when it was added."""
    if has_key(node.metadata, user, public_key):
        return False
    api.patch_metadata(node.full_name, lambda md: with_key(md, user, public_key))
    return True


# -- host keys ------------------------------------------------------------------------
# Whoever can write one guest attribute on one VM (any process on it) chooses what
# tpuctl reads here, so a value is trusted only when it is exactly one public key of
# the type it claims, and a line is written only for the worker's own address.
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
    api: TpuApi, node: Node, workers: list[int], timeout: float = 60.0
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


# -- all of it for one node --------------------------------------------------------------
@dataclass
class Plan:
    """How to reach chosen workers of one node."""

    node: Node
    user: str
    key: Path
    known_hosts: Path
    endpoints: list[Endpoint]
    key_added: bool = False  # just added (metadata or OS Login): the VMs may need a moment
    oslogin: bool = False  # the node uses OS Login: `user` is the profile's POSIX user
    unsure: str = ""  # why tpuctl could not tell if the project enforces OS Login


def plan(
    api: TpuApi,
    ssh: SshApi,
    full_name: str,
    workers: str = "0",
    internal_ip: bool = False,
    wait: float = 60.0,
    interactive: bool = False,
) -> Plan:
    """Check the node, choose workers and addresses, pick the user and make sure the VMs
    take tpuctl's key (the node's `ssh-keys` metadata, or with OS Login the account's
    profile: services/oslogin.py), and put the workers' host keys in tpuctl's
    known-hosts file. Every connection tpuctl makes starts here. `interactive`: for an
    OpenSSH shell, which can answer what OS Login 2-step verification asks."""
    from tpuctl.cloud.ssh import ensure_key_pair

    node = api.get_node(full_name)
    check_connectable(node)
    chosen = parse_workers(workers, len(node.workers), f"node {node.name}")
    endpoints = [ssh.endpoint(w, worker_address(node, w, internal_ip)) for w in chosen]
    user = ssh_user()
    key = key_path()
    public_key = ensure_key_pair(key, user)
    login = oslogin.login_user(ssh.oslogin, node, public_key, interactive)
    if login.user is not None:
        user, added = login.user, login.imported  # the VMs ignore `ssh-keys`: left alone
    else:
        added = authorize(api, node, user, public_key)
    keys = published_host_keys(api, node, chosen, timeout=wait)
    known_hosts = known_hosts_path()
    write_known_hosts(known_hosts, node, endpoints, keys)
    return Plan(
        node, user, key, known_hosts, endpoints, added, login.user is not None, login.unsure
    )


def openssh_command(plan: Plan, extra: list[str], ssh: str = "ssh") -> list[str]:
    """The OpenSSH command line for an interactive session with the plan's one worker:
    tpuctl's key, user and known-hosts file, strict checking; `extra` goes after the host
    (OpenSSH reads options there too, and a command after them)."""
    ep = plan.endpoints[0]
    return [
        ssh,
        "-i", str(plan.key),
        "-l", plan.user,
        "-p", str(ep.port),
        "-o", f"UserKnownHostsFile={plan.known_hosts}",
        "-o", "GlobalKnownHostsFile=/dev/null",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "IdentitiesOnly=yes",
        "-o", "CheckHostIP=no",
        ep.host,
        *extra,
    ]  # fmt: skip


def printable(argv: list[str]) -> str:
    return shlex.join(argv)
