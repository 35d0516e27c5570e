#!/usr/bin/env python3
"""Is this TPU VM worker idle? And, as a watchdog, delete (or stop) the node once it is.

One file, standard library only, Python 3.8+; it never imports tpuctl.

    python3 idle.py check                      # one JSON line: {"busy", "reasons", "checked"}
    python3 idle.py watch [--interval 60] [--action delete|stop]

A worker is busy when
- a tpuctl job runs on it (a live `agent.py run|start` process),
- an interactive SSH session is open (a process whose stdin is a pseudo-terminal),
- or a process holds a TPU device open (`/dev/accel*`, `/dev/vfio/*`, and the paths in
  TPUCTL_TPU_DEVICES, comma-separated, when set).
A hung job that has let go of the TPU is not busy. TPUCTL_IDLE_SCOPE=NAME=VALUE limits
the processes looked at to those with that entry in their environment (a machine that
hosts several workers names its own processes that way); unset, every process counts.

The watchdog checks every --interval seconds (TPUCTL_IDLE_INTERVAL, or the node's
metadata attribute `tpuctl-idle-interval`, override it). While the worker is busy it
keeps the node label `tpuctl-last-active` current; on worker 0, once the node has been
idle longer than its `tpuctl-idle-timeout` label and this worker is idle, it deletes the
node (or stops it), unless the node is labelled `tpuctl-keep=true`. Labels are read
from the TPU API on every tick: the cloud is the source of truth. The TPU API and the
metadata server are reached at TPUCTL_TPU_URL and TPUCTL_METADATA_URL, Google's by
default, with the token of the VM's service account (as agent.py does).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict

_GOOGLE_METADATA = "http://metadata.google.internal/computeMetadata/v1"
METADATA_URL = os.environ.get("TPUCTL_METADATA_URL", _GOOGLE_METADATA).rstrip("/")
TPU_URL = os.environ.get("TPUCTL_TPU_URL", "https://tpu.googleapis.com").rstrip("/")
DEVICE_GLOBS = ("/dev/accel*", "/dev/vfio/*")
LAST_ACTIVE = "tpuctl-last-active"
IDLE_TIMEOUT = "tpuctl-idle-timeout"
CREATED = "tpuctl-created"
KEEP = "tpuctl-keep"
RETRIED = (429, 500, 502, 503, 504)
Json = Dict[str, Any]


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
    for i, arg in enumerate(argv[:-1]):
        if os.path.basename(arg) == b"agent.py" and argv[i + 1] in (b"run", b"start"):
            return True
    return False


def _describe(pid: str, argv: list[bytes]) -> str:
    words = b" ".join(argv[:4]).decode(errors="replace")
    return f"pid {pid} ({words[:80]})"


def check() -> Json:
    """Look at every process (in scope): why this worker is busy, if it is."""
    me = {str(os.getpid()), str(os.getppid())}
    scope = os.environ.get("TPUCTL_IDLE_SCOPE", "").encode()
    devices = set(device_paths())
    reasons: list[str] = []
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
        elif tty:
            reasons.append(f"interactive session: {_describe(pid, argv)} on a terminal")
    result: Json = {"busy": bool(reasons), "reasons": reasons, "checked": int(time.time())}
    if unreadable:
        result["unreadable"] = unreadable
    return result


# -- HTTP, the metadata server and the TPU API (the minimum of agent.py's) ---------------
class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def http(
    method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> bytes:
    """One call, retried with jittered back-off on 429, 5xx and network errors."""
    attempts = 5
    for attempt in range(attempts):
        try:
            req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.read()  # type: ignore[no-any-return]
        except urllib.error.HTTPError as e:
            if e.code not in RETRIED or attempt == attempts - 1:
                raise HttpError(e.code, e.read()[:300].decode(errors="replace")) from None
        except OSError as e:
            if attempt == attempts - 1:
                raise HttpError(0, f"{method} {url}: {e}") from None
        time.sleep(min(5.0, 0.25 * 2**attempt) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")


def metadata(path: str) -> str:
    return http("GET", f"{METADATA_URL}/{path}", headers={"Metadata-Flavor": "Google"}).decode()


class Token:
    def __init__(self) -> None:
        self._value, self._expires = "", 0.0

    def headers(self, **extra: str) -> dict[str, str]:
        if time.time() >= self._expires:
            data = json.loads(metadata("instance/service-accounts/default/token"))
            self._value = data["access_token"]
            self._expires = time.time() + float(data.get("expires_in", 300)) - 60
        return dict(extra, Authorization="Bearer " + self._value)


def identity() -> tuple[str, int]:
    """This node's resource name and this worker's number."""
    env = {}
    for line in metadata("instance/attributes/tpu-env").splitlines():
        key, _, value = line.partition(":")
        env[key.strip()] = value.strip().strip("'\"")
    project = metadata("project/project-id")
    zone = metadata("instance/zone").rsplit("/", 1)[-1]
    worker = int(metadata("instance/attributes/agent-worker-number"))
    return f"projects/{project}/locations/{zone}/nodes/{env.get('NODE_ID', '')}", worker


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _rfc3339(value: Any) -> float | None:
    if not isinstance(value, str) or len(value) < 19:
        return None
    import calendar

    try:
        return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


# -- the watchdog ---------------------------------------------------------------------------
class Watchdog:
    def __init__(self, name: str, worker: int, interval: float, action: str) -> None:
        self.name, self.worker, self.interval, self.action = name, worker, interval, action
        self.token = Token()
        self.started = time.time()  # a boot counts as activity (a restarted node starts afresh)
        self.last_write = 0.0
        self.said = ""

    def note(self, text: str) -> None:
        """Say what the watchdog sees when it changes (not on every tick)."""
        if text != self.said:
            self.said = text
            self.say(text)

    def say(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        print(f"{stamp} {text}", flush=True)

    def node(self) -> Json:
        url = f"{TPU_URL}/v2/{self.name}"
        return dict(json.loads(http("GET", url, headers=self.token.headers())))

    def mark_active(self, node: Json, now: float) -> None:
        labels = dict(node.get("labels") or {})
        last = _number(labels.get(LAST_ACTIVE)) or 0.0
        if now - max(last, self.last_write) < self.interval:
            return  # at most once per interval (another worker may have just written it)
        labels[LAST_ACTIVE] = str(int(now))
        url = f"{TPU_URL}/v2/{self.name}?updateMask=labels"
        body = json.dumps({"labels": labels}).encode()
        http("PATCH", url, body, self.token.headers(**{"Content-Type": "application/json"}))
        self.last_write = now

    def idle_since(self, node: Json) -> float:
        labels = node.get("labels") or {}
        times = [self.started, self.last_write]
        for value in (_number(labels.get(LAST_ACTIVE)), _number(labels.get(CREATED))):
            if value is not None:
                times.append(value)
        created = _rfc3339(node.get("createTime"))
        if created is not None:
            times.append(created)
        return max(times)

    def tick(self) -> bool:
        """One look; True once the node was asked to go."""
        state = check()
        node = self.node()
        now = time.time()
        if state["busy"]:
            self.note("busy: " + "; ".join(state["reasons"]))
            self.mark_active(node, now)
            return False
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
        self.say(f"idle for {int(idle)}s (limit {int(limit)}s): {self.action} {self.name}")
        if self.action == "stop":
            url = f"{TPU_URL}/v2/{self.name}:stop"
            http("POST", url, b"{}", self.token.headers(**{"Content-Type": "application/json"}))
        else:
            http("DELETE", f"{TPU_URL}/v2/{self.name}", headers=self.token.headers())
        return True

    def run(self) -> int:
        self.say(f"watching {self.name} worker {self.worker} every {self.interval:g}s")
        while True:
            time.sleep(self.interval)
            try:
                self.tick()
            except HttpError as e:
                if e.status == 404:
                    self.say("the node is gone")
                    return 0
                self.say(f"check failed, trying again: {e}")
            except Exception as e:  # noqa: BLE001 - a watchdog keeps watching
                self.say(f"check failed, trying again: {e!r}")


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
    parser = argparse.ArgumentParser(prog="idle.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["check", "watch"])
    parser.add_argument("--interval", type=float, help="seconds between checks (default 60)")
    parser.add_argument("--action", choices=["delete", "stop"], default="delete")
    args = parser.parse_args(argv)
    if args.command == "check":
        print(json.dumps(check()), flush=True)
        return 0
    name, worker = identity()
    return Watchdog(name, worker, interval_setting(args.interval), args.action).run()


if __name__ == "__main__":
    sys.exit(main())
