"""Is this TPU VM worker idle? And, as a watchdog, delete (or stop) the node once it is.

Standard library only, Python 3.8+; it never imports tpuctl (HTTP, the token and
identity come from its siblings net.py and metadata.py). It runs from the agent bundle (bundle.py):

    python3 BUNDLE idle check          # one JSON line: {"busy", "reasons", "checked"}
    python3 BUNDLE idle watch [--interval 60] [--action delete|stop]

A worker is busy when
- a tpuctl job runs on it (a live `BUNDLE agent run|start` process, or an agent of
  before the bundle: `agent.py run|start`),
- an interactive SSH session is open (a process whose stdin is a pseudo-terminal),
- or a process holds a TPU device open (`/dev/accel*`, `/dev/vfio/*`, and the paths in
  TPUCTL_TPU_DEVICES, comma-separated, when set). The check lists these holders (pid,
  command line, user) under "holders".
A hung job that has let go of the TPU is not busy. TPUCTL_IDLE_SCOPE=NAME=VALUE limits
the processes looked at to those with that entry in their environment (a machine that
hosts several workers names its own processes that way); unset, every process counts.

The watchdog checks every --interval seconds (TPUCTL_IDLE_INTERVAL, or the node's
metadata attribute `tpuctl-idle-interval`, override it). While the worker is busy it
keeps the node label `tpuctl-last-active` current; on worker 0, once the node has been
idle longer than its `tpuctl-idle-timeout` label and this worker is idle, it deletes the
node (or stops it), unless the node is labelled `tpuctl-keep=true`. At the node's
`tpuctl-expires` label (the end of its --ttl, or its --max-cost deadline when earlier),
worker 0 deletes it, busy or not (not if kept): a node's TTL and spending cap hold with
no client and no gc. A worker busy only
because processes hold the TPU is idle when Cloud Monitoring says its TensorCores have not
worked for a while (the forgotten notebook): the watchdog reads this worker's
`tpu/tensorcore/idle_duration` (REST, TPUCTL_MONITORING_URL, the same token) and counts
the worker last active when its TensorCores were; with no fresh point (or no access to
Monitoring) a holder keeps the worker busy. Before it deletes or stops a node whose
holders it overruled, it names them (pid, command line, user) in its log and in
`~/.tpuctl/idle-audit.log` (one JSON line per action, gc.log's keys, evidence "watchdog",
plus "holders"; docs/gc.md). Labels are read from the TPU API on every tick: the cloud is
the source of truth. The TPU API and the metadata server are reached at TPUCTL_TPU_URL
and TPUCTL_METADATA_URL, Google's by default, with the token of the VM's service account
(metadata.py, as for agent.py).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import time

from . import target
from .labels import CREATED, IDLE_TIMEOUT, KEEP, LAST_ACTIVE, expiry
from .labels import number as _number
from .metadata import Token, identity, metadata
from .monitoring import rfc3339, stamp
from .net import HttpError, Json
from .processes import BUNDLE_PREFIX, BUNDLE_SUFFIX
from .target import Target

DEVICE_GLOBS = ("/dev/accel*", "/dev/vfio/*")
AUDIT_LOG = "idle-audit.log"  # in ~/.tpuctl, next to the watchdog's own log
RUNS = ([b"run"], [b"start"])


# -- the check ------------------------------------------------------------------------------
def device_paths() -> list[str]:
    paths = set()
    for pattern in DEVICE_GLOBS:
        paths.update(glob.glob(pattern))
    extra = os.environ.get("TPUCTL_TPU_DEVICES", "")
    paths.update(p.strip() for p in extra.split(",") if p.strip())
    return sorted(os.path.realpath(p) for p in paths)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _in_scope(pid: str, scope: bytes) -> bool:
    if not scope:
        return True
    environ = _read(f"/proc/{pid}/environ")
    return environ is not None and scope in environ.split(b"\0")


def _is_agent(argv: list[bytes]) -> bool:
    """An agent's process, by its argv: `python3 BUNDLE agent run|start ...` (after its
    double fork too: argv stays). The bundle's other programs (this check, the log
    follower, the watchdog) are no job. `agent.py run|start` is an agent that a tpuctl
    of before the bundle started, which may still run on a node."""
    for i, arg in enumerate(argv[:-1]):
        if os.path.basename(arg) == b"agent.py" and argv[i + 1] in (b"run", b"start"):
            return True
        if _is_bundle(arg) and argv[i + 1 : i + 2] == [b"agent"] and argv[i + 2 : i + 3] in RUNS:
            return True
    return False


def _is_bundle(arg: bytes) -> bool:
    name = os.path.basename(arg)
    return name.startswith(BUNDLE_PREFIX.encode()) and name.endswith(BUNDLE_SUFFIX.encode())


def _owner(pid: str) -> str:
    """The user a process runs as (its real uid's name, else `uid N`)."""
    status = _read(f"/proc/{pid}/status") or b""
    for line in status.splitlines():
        if line.startswith(b"Uid:"):
            uid = int(line.split()[1])
            try:
                import pwd

                return pwd.getpwuid(uid).pw_name
            except (ImportError, KeyError):
                return f"uid {uid}"
    return "?"


def _describe(pid: str, argv: list[bytes]) -> str:
    shown = argv[:4]
    for i, arg in enumerate(argv):  # an agent's: from its bundle on, past the check's code
        if _is_bundle(arg):
            shown = [argv[0], os.path.basename(arg), *argv[i + 1 : i + 3]]
            break
    words = b" ".join(shown).decode(errors="replace")
    return f"pid {pid} ({words[:80]})"


def check() -> Json:
    """Look at every process (in scope): why this worker is busy, if it is."""
    me = {str(os.getpid()), str(os.getppid())}
    scope = os.environ.get("TPUCTL_IDLE_SCOPE", "").encode()
    devices = set(device_paths())
    reasons: list[str] = []
    holders: list[Json] = []
    unreadable = 0
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if pid in me or not _in_scope(pid, scope):
            continue
        raw = _read(f"/proc/{pid}/cmdline")
        if not raw:
            continue  # a kernel thread, or gone
        argv = raw.rstrip(b"\0").split(b"\0")
        if _is_agent(argv):
            reasons.append(f"tpuctl job running: {_describe(pid, argv)}")
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            unreadable += 1
            continue
        held = None
        tty = False
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target in devices:
                held = target
                break
            if fd == "0" and target.startswith("/dev/pts/"):
                tty = True
        if held:
            reasons.append(f"{_describe(pid, argv)} holds {held}")
            command = b" ".join(argv).decode(errors="replace")[:300]
            holders.append(
                {"pid": int(pid), "command": command, "user": _owner(pid), "device": held}
            )
        elif tty:
            reasons.append(f"interactive session: {_describe(pid, argv)} on a terminal")
    result: Json = {"busy": bool(reasons), "reasons": reasons, "checked": int(time.time())}
    if holders:
        result["holders"] = holders
    if unreadable:
        result["unreadable"] = unreadable
    return result


def _who(holders: list[Json]) -> str:
    return "; ".join(f"pid {h['pid']} ({h['command'][:80]}) of user {h['user']}" for h in holders)


# -- the watchdog ---------------------------------------------------------------------------
class Watchdog:
    def __init__(self, node: Target, worker: int, interval: float, action: str) -> None:
        self.target, self.worker, self.interval, self.action = node, worker, interval, action
        self.name = node.path  # projects/P/locations/Z/nodes/N, or Compute Engine's path
        self.token = node.token
        self.started = time.time()  # a boot counts as activity (a restarted node starts afresh)
        self.last_write = 0.0
        self.active_at = 0.0  # the last activity this watchdog saw
        self.said = ""
        self.expires_at: float | None = None  # the node's expiry, as last read

    def note(self, text: str) -> None:
        """Say what the watchdog sees when it changes (not on every tick)."""
        if text != self.said:
            self.said = text
            self.say(text)

    def say(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(f"{stamp} {text}", flush=True)

    def node(self) -> Json:
        return self.target.view()

    def mark_active(self, node: Json, now: float, at: float | None = None) -> None:
        """The worker was last active `at` (now): keep the node's label current."""
        at = now if at is None else at
        self.active_at = max(self.active_at, at)
        labels = dict(node.get("labels") or {})
        last = _number(labels.get(LAST_ACTIVE)) or 0.0
        if last >= int(at) or now - max(last, self.last_write) < self.interval:
            return  # at most once per interval (another worker may have just written it)
        self.target.set_label(LAST_ACTIVE, str(int(at)), node)
        self.last_write = now

    def idle_since(self, node: Json) -> float:
        labels = node.get("labels") or {}
        times = [self.started, self.active_at]
        for value in (_number(labels.get(LAST_ACTIVE)), _number(labels.get(CREATED))):
            if value is not None:
                times.append(value)
        created = rfc3339(node.get("createTime"))
        if created is not None:
            times.append(created)
        return max(times)

    def expired(self, node: Json, now: float) -> bool:
        """Worker 0: delete the node at its expiry (`tpuctl-expires`: the end of its --ttl
        or its --max-cost deadline, the earlier), busy or not; True once asked to."""
        at, why = expiry(node.get("labels"))
        self.expires_at = at
        if self.worker != 0 or at is None or now < at or node.get("state") != "READY":
            return False
        if str((node.get("labels") or {}).get(KEEP, "")).lower() == "true":
            self.note(f"past {why} since {stamp(at)}, but kept (tpuctl-keep=true)")
            return False
        self.say(f"reached {why} at {stamp(at)}: delete {self.name}")
        self.audit(node, f"reached {why}", [], result="delete")
        self.target.delete()
        return True

    def tick(self) -> bool:
        """One look; True once the node was asked to go."""
        node = self.node()
        now = time.time()
        if self.expired(node, now):
            return True
        state = check()
        now = time.time()
        holders: list[Json] = []
        if state["busy"]:
            held_only = len(state.get("holders") or []) == len(state["reasons"])
            unused = self.unused(now) if held_only else None
            if unused is None or unused < self.interval:  # no evidence, or computing
                self.note("busy: " + "; ".join(state["reasons"]))
                self.mark_active(node, now)
                return False
            holders = [dict(h, tensorcoreIdleSeconds=int(unused)) for h in state["holders"]]
            self.note(f"TPU held, its TensorCores idle (Cloud Monitoring): {_who(holders)}")
            self.mark_active(node, now, now - unused)
        labels = node.get("labels") or {}
        limit = _number(labels.get(IDLE_TIMEOUT))
        if self.worker != 0 or limit is None or node.get("state") != "READY":
            self.note("idle")
            return False
        idle = now - self.idle_since(node)
        if idle < limit:
            self.note("idle")
            return False
        if str(labels.get(KEEP, "")).lower() == "true":
            self.note(f"idle past its limit ({int(limit)}s), but kept (tpuctl-keep=true)")
            return False
        self.say(
            f"idle for {int(idle)}s (limit {int(limit)}s): {self.action} {self.name}"
            + (f"; TPU held but unused by {_who(holders)}" if holders else "")
        )
        if holders:
            self.audit(node, f"idle for {int(idle)}s (limit {int(limit)}s)", holders)
        if self.action == "stop":
            self.target.stop()
        else:
            self.target.delete()
        return True

    def unused(self, now: float) -> float | None:
        """Seconds the TensorCores of this worker have been idle (Cloud Monitoring)."""
        return self.target.tensorcore_idle(self.worker, now)

    def audit(self, node: Json, reason: str, holders: list[Json], result: str = "") -> None:
        """One JSON line (gc.log's keys, then the holders) before the node goes."""
        try:
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name
        except (ImportError, KeyError):
            user = "unknown"
        line = {
            "time": stamp(time.time()),
            "user": user,
            "host": socket.gethostname(),
            "project": self.target.project,
            "kind": "node",
            "zone": self.target.zone,
            "node": self.target.name,
            "accelerator": node.get("acceleratorType", ""),
            "reason": reason,
            "hourly_usd": None,
            "result": result or self.action,
            "evidence": "watchdog",
            "holders": holders,
        }
        folder = os.path.join(os.path.expanduser("~"), ".tpuctl")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, AUDIT_LOG), "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def run(self) -> int:
        self.say(f"watching {self.name} worker {self.worker} every {self.interval:g}s")
        wait = min(self.interval, 5.0)  # a first look soon after the boot: is expiry near?
        while True:
            time.sleep(wait)
            try:
                self.tick()
            except HttpError as e:
                if e.status == 404:
                    self.say("the node is gone")
                    return 0
                self.say(f"check failed, trying again: {e}")
            except Exception as e:  # noqa: BLE001 - a watchdog keeps watching
                self.say(f"check failed, trying again: {e!r}")
            wait = self.interval
            if self.expires_at is not None:  # wake at the expiry (as this look read it)
                wait = max(0.5, min(wait, self.expires_at - time.time()))


def interval_setting(given: float | None) -> float:
    if given:
        return given
    env = _number(os.environ.get("TPUCTL_IDLE_INTERVAL"))
    if env:
        return env
    try:
        attr = _number(metadata("instance/attributes/tpuctl-idle-interval"))
    except HttpError:
        attr = None
    return attr or 60.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="idle", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["check", "watch"])
    parser.add_argument("--interval", type=float, help="seconds between checks (default 60)")
    parser.add_argument("--action", choices=["delete", "stop"], default="delete")
    target.add_arguments(parser, required=False)  # --target KIND:NAME: the watch's
    args = parser.parse_args(argv)
    if args.command == "check":
        print(json.dumps(check()), flush=True)
        return 0
    if args.target is None:
        parser.error("idle watch needs --target KIND:NAME (what it watches)")
    me = identity()
    node = target.of(Token(), me, args.target)
    worker = int(me["worker"])
    return Watchdog(node, worker, interval_setting(args.interval), args.action).run()
