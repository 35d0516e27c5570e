"""SSH to TPU VM workers: who (key and user), where (workers and addresses) and whom to
trust (the host keys the cloud publishes, written to tpuctl's own known-hosts file).

`plan()` does it all for one node and returns a `Plan` that both the system OpenSSH
client (`openssh_command`) and tpuctl's own client (services.remote) connect with.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuctl import wording
from tpuctl.config import login_name, state_dir
from tpuctl.errors import UsageError
from tpuctl.models import NODE_DEAD, Node
from tpuctl.services import oslogin
from tpuctl.services.hostkeys import published_host_keys, write_known_hosts
from tpuctl.waiting import Progress, noop

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import Endpoint, SshApi

KEY_FILE = "google_compute_engine"  # gcloud's key: both tools share one identity
KNOWN_HOSTS_FILE = "known_hosts"
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
    elif node.state in NODE_DEAD:
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


def authorize(api: TpuBackend, node: Node, user: str, public_key: str) -> bool:
    """Make sure the node's `ssh-keys` metadata holds the key; True when it was added."""
    if has_key(node.metadata, user, public_key):
        return False
    api.patch_metadata(node.full_name, lambda md: with_key(md, user, public_key))
    return True


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


def merged(plans: dict[int, Plan], per: int) -> Plan:
    """One plan for the workers of several slices (slice s: `plans[s]`), each endpoint
    numbered across them (slice s, worker k: s * per + k)."""
    endpoints = [
        dataclasses.replace(ep, worker=s * per + ep.worker)
        for s, one in sorted(plans.items())
        for ep in one.endpoints
    ]
    first = plans[min(plans)]
    return dataclasses.replace(
        first, endpoints=endpoints, key_added=any(p.key_added for p in plans.values())
    )


def plan(
    api: TpuBackend | Sequence[TpuBackend],
    ssh: SshApi,
    full_name: str,
    workers: str = "0",
    internal_ip: bool = False,
    wait: float = 60.0,
    interactive: bool = False,
    node: Node | None = None,
    progress: Progress = noop,
) -> Plan:
    """Check the node, choose workers and addresses, pick the user and make sure the VMs
    take tpuctl's key (the node's `ssh-keys` metadata, or with OS Login the account's
    profile: services/oslogin.py), and put the workers' host keys in tpuctl's
    known-hosts file. Every connection tpuctl makes starts here. `interactive`: for an
    OpenSSH shell, which can answer what OS Login 2-step verification asks. `api`: the
    node's API, or several (the Cloud TPU API, then Compute Engine) to look it up on.
    `node`: the node as just read, when the caller has it. `progress`: told while the
    workers have not published their host keys yet (for up to `wait` seconds)."""
    from tpuctl.cloud import registry
    from tpuctl.cloud.ssh import ensure_key_pair
    from tpuctl.services.lookup import find_node

    if node is None:
        api, node = find_node(api, full_name)
    elif isinstance(api, Sequence):  # the node's own API, of those given
        api = registry.holder(api, node)
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
    keys = published_host_keys(api, node, chosen, timeout=wait, progress=progress)
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
        "-i",
        str(plan.key),
        "-l",
        plan.user,
        "-p",
        str(ep.port),
        "-o",
        f"UserKnownHostsFile={plan.known_hosts}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "CheckHostIP=no",
        ep.host,
        *extra,
    ]


def printable(argv: list[str]) -> str:
    return shlex.join(argv)
