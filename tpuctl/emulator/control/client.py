"""A small stdlib client of the emulator's control plane (`/_emulator/v1/...`)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

CONTROL_PREFIX = "/_emulator/v1/"


class ControlError(RuntimeError):
    """The control plane answered with an error (`status`: its HTTP status)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class EmulatorControl:
    """Talks to the emulator at `address` (`host:port`)."""

    def __init__(self, address: str, timeout: float = 5.0) -> None:
        self.address = address
        self.timeout = timeout

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One control call; raises OSError when nothing listens, ControlError on an error."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://{self.address}{CONTROL_PREFIX}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                message = json.load(exc)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = str(exc)
            raise ControlError(f"{method} {path}: {message}", exc.code) from None

    def status(self) -> dict[str, Any]:
        return dict(self.call("GET", "status"))

    def config(self, **changes: Any) -> dict[str, Any]:
        """The config; with keyword arguments (durations=..., defaults=...) change it first."""
        if changes:
            return dict(self.call("POST", "config", changes))
        return dict(self.call("GET", "config"))

    def durations(self, **seconds: float | None) -> dict[str, Any]:
        """Set some transition durations (create, stop, start, delete; None: hold)."""
        return self.config(durations=seconds)

    def faults(self, **faults: Any) -> dict[str, Any]:
        """Inject faults (rate, codes, delay, after_rate, seed); no arguments turns them off."""
        return dict(self.call("POST", "faults", faults))

    def advance(self, node: str | None = None) -> list[str]:
        """Complete pending transitions now (of one node by full name, or all)."""
        body = {"node": node} if node else {}
        return list(self.call("POST", "advance", body)["completed"])

    def nodes(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "nodes"))

    def instances(self) -> list[dict[str, Any]]:
        """Every Compute Engine instance (path, status, machine type, address)."""
        return list(self.call("GET", "instances"))

    def requests(self) -> dict[str, int]:
        return dict(self.call("GET", "requests"))

    def bodies(self, method: str | None = None) -> list[dict[str, Any]]:
        """The API request bodies the emulator received, oldest first (`method`: of one
        API method, e.g. `create`, `queuedResources.create`, `patch`): each is
        {verb, method, path, query, body}."""
        path = "requests/bodies" + (f"?method={method}" if method else "")
        return list(self.call("GET", path))

    def compute_age(self, path: str, seconds: float) -> dict[str, Any]:
        """Make a Compute Engine group, template or policy (by path) `seconds` older."""
        return dict(self.call("POST", "compute/age", {"path": path, "seconds": seconds}))

    def reset(self) -> None:
        self.call("POST", "reset", {})

    def set_guest_attributes(self, node: str, worker: int, items: list[dict[str, str]]) -> None:
        """Publish `{namespace, key, value}` guest attributes on one worker of a node."""
        self.call("POST", "guest-attributes", {"node": node, "worker": worker, "items": items})

    def preempt(self, node: str, notice: float | None = None) -> dict[str, Any]:
        """Preempt a spot node: `notice` seconds of notice (default: the `preempt_notice`
        duration), then PREEMPTED."""
        body: dict[str, Any] = {"node": node}
        if notice is not None:
            body["notice"] = notice
        return dict(self.call("POST", "preempt", body))

    def maintenance(
        self,
        node: str,
        notice: float | None = None,
        duration: float | None = None,
        worker: int | None = None,
        kind: str | None = None,
    ) -> dict[str, Any]:
        """Announce a host maintenance on a TPU API node or a Compute Engine VM (or slice)
        by path: it starts `notice` seconds from now (0 by default) and lasts `duration`
        (60 s by default); `worker`: only that VM of a slice; `kind`: SCHEDULED (default)
        or UNSCHEDULED. `advance(path)` moves it to its next phase."""
        given = {"notice": notice, "duration": duration, "worker": worker, "type": kind}
        body = {"node": node, **{k: v for k, v in given.items() if v is not None}}
        return dict(self.call("POST", "maintenance", body))

    def preempt_instance(self, instance: str, notice: float | None = None) -> dict[str, Any]:
        """Preempt a RUNNING Compute Engine spot VM (path, or name): its metadata shows
        `instance/preempted` TRUE for `notice` seconds (default 30), then Compute ends it
        as its instanceTerminationAction says."""
        body: dict[str, Any] = {"instance": instance}
        if notice is not None:
            body["notice"] = notice
        return dict(self.call("POST", "compute/preempt", body))

    def preempt_worker(
        self,
        project: str,
        zone: str,
        name: str,
        worker: int | None = None,
        notice: float | None = None,
    ) -> dict[str, Any]:
        """Preempt the Compute Engine VM of a node as tpuctl names it: a single-host VM,
        or worker `worker` of a slice (a managed instance group's VMs in worker order)."""
        body: dict[str, Any] = {"project": project, "zone": zone, "name": name}
        if worker is not None:
            body["worker"] = worker
        if notice is not None:
            body["notice"] = notice
        return dict(self.call("POST", "compute/preempt-worker", body))

    def reservation(
        self,
        zone: str,
        name: str,
        machine_type: str,
        count: int = 1,
        specific: bool = False,
        project: str | None = None,
    ) -> dict[str, Any]:
        """Make (count 0: remove) a Compute Engine reservation of `count` VMs of
        `machine_type` in `zone`; `specific`: only a specific affinity consumes it."""
        body = {
            "zone": zone,
            "name": name,
            "machineType": machine_type,
            "count": count,
            "specific": specific,
            "project": project,
        }
        return dict(self.call("POST", "compute/reservations", body))

    def quotas(self, limits: dict[str, Any] | str) -> dict[str, Any]:
        """Set TPU quota limits: `{quotaId: {"*": default, location: n} or n}` (partial),
        or a preset, "granted" or "new-project"."""
        return dict(self.config(quotas=limits)["quotas"])

    def capacity(self, caps: dict[str, dict[str, int | None]]) -> dict[str, Any]:
        """Cap what zones have left: `{zone: {generation: chips or None}}` (partial)."""
        return dict(self.config(capacity=caps)["capacity"])

    def queued(self) -> list[dict[str, Any]]:
        """Every queued resource of every project and zone."""
        return list(self.call("GET", "queued"))

    def fail_queued(self, name: str, message: str = "Failed.") -> dict[str, Any]:
        """End the queued resource `name` (full name) in FAILED with `message`."""
        return dict(self.call("POST", "queued/fail", {"name": name, "message": message}))

    def suspend_queued(self, name: str, held: bool = False) -> dict[str, Any]:
        """SUSPENDED now; `held`: SUSPENDING, and held there."""
        path = "queued/suspending" if held else "queued/suspend"
        return dict(self.call("POST", path, {"name": name}))

    def set_node_state(self, node: str, **fields: Any) -> dict[str, Any]:
        """Put a node (full name) in any state the API lists (`state=`), with `health=`,
        `healthDescription=` and `symptoms=[{symptomType, details, workerId}]`."""
        return dict(self.call("POST", "node-state", {"node": node, **fields}))

    def worker_fault(self, node: str, kind: str, worker: int = 0, **fields: Any) -> dict[str, Any]:
        """Plant a fault on a worker of a node (full name) for `tpuctl doctor NODE`:
        `stale-lockfile`, `no-device`, `unhealthy` (health=, symptoms=), `tpu-held`,
        `disk-full`, or `package` (package=, version=; version None removes it). See
        workers/faults.py."""
        body = {"node": node, "kind": kind, "worker": worker, **fields}
        return dict(self.call("POST", "worker-fault", body))

    def set_chips(
        self, node: str, worker: int, chips: list[dict[str, Any]], sdk: bool | None = None
    ) -> dict[str, Any]:
        """Set what libtpu's runtime metrics (and SDK) show of a worker's chips
        (workers/chips.py): `[{chip, hbm_used?, hbm_total?, duty_cycle?,
        tensorcore_util?}]`, bytes and percent; the others keep theirs (new: nothing used,
        the generation's HBM, 0 %). `sdk`: whether the worker's image has libtpu's SDK
        (workers/libtpu_sdk.py; None: as it was, at first it has)."""
        body: dict[str, Any] = {"node": node, "worker": worker, "chips": chips}
        if sdk is not None:
            body["sdk"] = sdk
        return dict(self.call("POST", "chips", body))

    def provision_queued(self, name: str) -> dict[str, Any]:
        """Provision a waiting queued resource now, whatever the zone's capacity."""
        return dict(self.call("POST", "queued/provision", {"name": name}))

    def monitoring(self, **settings: float | None) -> dict[str, Any]:
        """Sampling settings: `sample_period` (seconds; None: only on `sample`) and
        `ingestion_delay` (seconds before a point is visible)."""
        return dict(self.call("POST", "monitoring", settings))

    def sample(self) -> dict[str, Any]:
        """Sample every worker's metrics now."""
        return dict(self.call("POST", "monitoring/sample", {}))

    def run_lifecycle(self, days: float = 0) -> dict[str, Any]:
        """Apply the buckets' lifecycle rules as Cloud Storage would `days` days from now:
        `{"at": RFC 3339, "deleted": {bucket: [object names]}}`."""
        return dict(self.call("POST", "storage/lifecycle", {"days": days}))
