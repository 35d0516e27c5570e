"""Compute Engine's wire format: instances, zone operations, machine types and images as
the REST JSON the real API answers, and `ComputeFront`, the methods the routes
(`urls.py`) name.

Compute writes its timestamps in Pacific time with an offset and 3 digits of fraction
(`2026-12-01T01:30:05.123-08:00`, as `creationTimestamp` shows in public gcloud output,
e.g. zjuul/snowplow-gcloud-installer#1), ids and int64 values as strings, and every link
as a full URL under the API's base: here the emulator's own, for the version asked
(`/compute/v1/`, `/compute/beta/`, `/compute/alpha/`), so gcloud parses them back.
A method renders while it holds the backend's lock (see tpu/front.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from tpuctl.emulator.compute import api, changes, maintenance, scheduling
from tpuctl.emulator.compute.catalog import IMAGE_PROJECT, MachineType
from tpuctl.emulator.compute.models import Instance, ZoneOperation, fingerprint
from tpuctl.emulator.core import maintenance as host_maintenance
from tpuctl.emulator.core.service import Facade

try:
    from zoneinfo import ZoneInfo

    PACIFIC: Any = ZoneInfo("America/Los_Angeles")
except (ImportError, KeyError, OSError):  # no tz database: standard time all year
    PACIFIC = timezone(timedelta(hours=-8))


def timestamp(ts: float) -> str:
    """`1796117405.1234` -> `2026-12-01T01:30:05.123-08:00`."""
    when = datetime.fromtimestamp(ts, PACIFIC)
    return when.isoformat(timespec="milliseconds")


def region(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


class Renderer:
    """Renders the resources with links under `base` (`http://HOST:PORT/compute/v1/`)."""

    def __init__(self, base: str, now: float) -> None:
        self.base, self.now = base, now

    def link(self, path: str) -> str:
        return self.base + path

    def instance(self, i: Instance) -> dict[str, Any]:
        body, zone_path = i.body, f"projects/{i.project}/zones/{i.zone}"
        nics = []
        for n, nic in enumerate(body.get("networkInterfaces") or [{}]):
            network = str(nic.get("network") or "default").rsplit("/", 1)[-1]
            subnet = str(nic.get("subnetwork") or network).rsplit("/", 1)[-1]
            out: dict[str, Any] = {
                "kind": "compute#networkInterface",
                "name": f"nic{n}",
                "network": self.link(f"projects/{i.project}/global/networks/{network}"),
                "subnetwork": self.link(
                    f"projects/{i.project}/regions/{region(i.zone)}/subnetworks/{subnet}"
                ),
                "networkIP": i.address,
                "stackType": "IPV4_ONLY",
                "fingerprint": fingerprint([i.uid, n]),
            }
            if nic.get("nicType"):
                out["nicType"] = nic["nicType"]
            configs = nic.get("accessConfigs") or []
            if configs:
                out["accessConfigs"] = [
                    {
                        "kind": "compute#accessConfig",
                        "type": c.get("type", "ONE_TO_ONE_NAT"),
                        "name": c.get("name", "External NAT"),
                        "natIP": i.address,
                        "networkTier": c.get("networkTier", "PREMIUM"),
                    }
                    for c in configs
                ]
            nics.append(out)
        disks = []
        for n, disk in enumerate(body.get("disks") or []):
            params = disk.get("initializeParams") or {}
            disk_name = params.get("diskName") or (i.name if n == 0 else f"{i.name}-{n}")
            disks.append(
                {
                    "kind": "compute#attachedDisk",
                    "type": disk.get("type", "PERSISTENT"),
                    "mode": disk.get("mode", "READ_WRITE"),
                    "index": n,
                    "source": self.link(f"{zone_path}/disks/{disk_name}"),
                    "deviceName": disk.get("deviceName", disk_name),
                    "boot": bool(disk.get("boot", False)),
                    "autoDelete": bool(disk.get("autoDelete", False)),
                    "interface": "NVME",
                    "diskSizeGb": str(params.get("diskSizeGb", "10")),
                }
            )
        metadata: dict[str, Any] = {
            "kind": "compute#metadata",
            "fingerprint": i.metadata_fingerprint,
        }
        if body["metadata"]["items"]:
            metadata["items"] = body["metadata"]["items"]
        vm: dict[str, Any] = {
            "kind": "compute#instance",
            "id": i.uid,
            "creationTimestamp": timestamp(i.created),
            "name": i.name,
            "tags": {"fingerprint": fingerprint(body.get("tags", {}))},
            "machineType": self.link(f"{zone_path}/machineTypes/{i.machine_type}"),
            "status": i.shown_status(self.now),
            "zone": self.link(zone_path),
            "canIpForward": bool(body.get("canIpForward", False)),
            "networkInterfaces": nics,
            "disks": disks,
            "metadata": metadata,
            "serviceAccounts": body.get("serviceAccounts", []),
            "selfLink": self.link(i.path),
            "scheduling": body["scheduling"],
            "cpuPlatform": "Unknown CPU Platform",
            "labelFingerprint": i.label_fingerprint,
            "startRestricted": False,
            "deletionProtection": False,
            "fingerprint": fingerprint([i.uid, i.status, i.labels]),
        }
        if i.labels:
            vm["labels"] = dict(i.labels)
        if body.get("reservationAffinity"):  # as asked (Instance.reservationAffinity)
            vm["reservationAffinity"] = body["reservationAffinity"]
        if body.get("description"):
            vm["description"] = body["description"]
        ends = i.ends_at()
        if ends is not None:  # when maxRunDuration ends it (ResourceStatusScheduling)
            vm["resourceStatus"] = {"scheduling": {"terminationTimestamp": timestamp(ends)}}
        if i.maintenance is not None:  # an announced host maintenance (compute/maintenance.py)
            shown = host_maintenance.render(i.maintenance)
            vm.setdefault("resourceStatus", {})["upcomingMaintenance"] = shown
        if i.last_start is not None:
            vm["lastStartTimestamp"] = timestamp(i.last_start)
        if i.last_stop is not None:
            vm["lastStopTimestamp"] = timestamp(i.last_stop)
        return vm

    def operation(self, op: ZoneOperation) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(abs(hash(op.name)) % (1 << 63)),
            "name": op.name,
            "operationType": op.operation_type,
            "targetLink": self.link(op.target),
            "targetId": op.target_id,
            "status": op.status,
            "user": "you@example.com",
            "progress": 100 if op.done else 0,
            "insertTime": timestamp(op.inserted),
            "selfLink": self.link(op.path),
        }
        if op.kind != "global":  # `zone` or `region`: the scope's link
            out[op.kind[:-1]] = self.link(f"projects/{op.project}/{op.scope}")
        if op.started is not None:
            out["startTime"] = timestamp(op.started)
        if op.ended is not None:
            out["endTime"] = timestamp(op.ended)
        if op.errors:
            out["error"] = {"errors": [dict(e) for e in op.errors]}
        if op.http_error:
            out["httpErrorStatusCode"], out["httpErrorMessage"] = op.http_error
        return out

    def machine_type(self, m: MachineType, project: str, zone: str) -> dict[str, Any]:
        return {
            "kind": "compute#machineType",
            "id": str(int(fingerprint(m.name).encode().hex()[:15], 16)),
            "creationTimestamp": "2024-10-30T10:00:00.000-07:00",
            "name": m.name,
            "description": m.description,
            "guestCpus": m.guest_cpus,
            "memoryMb": m.memory_mb,
            "imageSpaceGb": 0,
            "maximumPersistentDisks": 128,
            "maximumPersistentDisksSizeGb": "263168",
            "zone": zone,
            "selfLink": self.link(f"projects/{project}/zones/{zone}/machineTypes/{m.name}"),
            "isSharedCpu": False,
            "accelerators": [
                {"guestAcceleratorType": m.accelerator, "guestAcceleratorCount": m.chips}
            ],
            "architecture": "X86_64",
        }

    def image(self, name: str) -> dict[str, Any]:
        family = name.rsplit("-v", 1)[0]
        return {
            "kind": "compute#image",
            "id": str(int(fingerprint(name).encode().hex()[:15], 16)),
            "creationTimestamp": "2026-05-30T12:00:00.000-07:00",
            "name": name,
            "family": family,
            "sourceType": "RAW",
            "status": "READY",
            "archiveSizeBytes": "2147483648",
            "diskSizeGb": "10",
            "architecture": "X86_64",
            "selfLink": self.link(f"projects/{IMAGE_PROJECT}/global/images/{name}"),
            "guestOsFeatures": [{"type": "GVNIC"}, {"type": "UEFI_COMPATIBLE"}],
        }


def _list(kind: str, items: list[dict[str, Any]], token: str | None, self_link: str) -> dict:
    out: dict[str, Any] = {
        "kind": kind,
        "id": self_link.split("/compute/", 1)[-1],
        "items": items,
        "selfLink": self_link,
    }
    if token:
        out["nextPageToken"] = token
    return out


class ComputeFront:
    """Compute Engine's REST methods over a backend: the request's parts in, JSON out."""

    def __init__(self, backend: Facade) -> None:
        self.backend = backend

    def _run(self, version: str, fn: Any, *args: Any) -> tuple[Renderer, Any]:
        answer = self.backend.apply(fn, *args)
        base = f"http://{self.backend.endpoint}/compute/{version}/"
        return Renderer(base, self.backend.state.now()), answer

    def _op(self, version: str, fn: Any, *args: Any) -> dict[str, Any]:
        with self.backend.lock:
            r, op = self._run(version, fn, *args)
            return r.operation(op)

    def _change(self, version: str, request_id: str, fn: Any, *args: Any) -> dict[str, Any]:
        """A mutating method asked with `requestId` (or ""): `changes.once`."""
        return self._op(version, changes.once, request_id, fn, *args)

    def insert(
        self, version: str, project: str, zone: str, body: dict, rid: str = "", source: str = ""
    ) -> dict:
        return self._change(version, rid, api.insert, project, zone, body, source)

    def delete(self, version: str, project: str, zone: str, name: str, rid: str = "") -> dict:
        return self._change(version, rid, api.delete, project, zone, name)

    def stop(self, version: str, project: str, zone: str, name: str, rid: str = "") -> dict:
        return self._change(version, rid, api.power, project, zone, name, "stop")

    def start(self, version: str, project: str, zone: str, name: str, rid: str = "") -> dict:
        return self._change(version, rid, api.power, project, zone, name, "start")

    def simulate_maintenance_event(
        self, version: str, project: str, zone: str, name: str, rid: str = ""
    ) -> dict:
        perform = maintenance.perform
        return self._change(version, rid, perform, project, zone, name, True)

    def perform_maintenance(
        self, version: str, project: str, zone: str, name: str, rid: str = ""
    ) -> dict:
        return self._change(version, rid, maintenance.perform, project, zone, name, False)

    def set_labels(
        self, version: str, project: str, zone: str, name: str, body: dict, rid: str = ""
    ) -> dict:
        return self._change(version, rid, api.set_labels, project, zone, name, body)

    def set_metadata(
        self, version: str, project: str, zone: str, name: str, body: dict, rid: str = ""
    ) -> dict:
        return self._change(version, rid, api.set_metadata, project, zone, name, body)

    def get_operation(self, version: str, project: str, zone: str, name: str) -> dict:
        return self._op(version, api.get_operation, project, zone, name)

    def list_operations(self, version: str, project: str, zone: str, query: dict) -> dict:
        with self.backend.lock:
            r, found = self._run(version, scheduling.list_operations, project, zone, query)
            return _list("compute#operationList", [r.operation(op) for op in found], None, "")

    def wait_operation(self, version: str, project: str, zone: str, name: str) -> dict:
        """`wait`: the operation once DONE. Transitions here run on the clock: when one
        is held (duration None) or still due, the answer is the operation as it is,
        which Compute allows (it returns after about 2 minutes even if not DONE)."""
        with self.backend.changes:
            deadline = self.backend.state.now() + 10.0
            while True:
                r, op = self._run(version, api.get_operation, project, zone, name)
                left = deadline - self.backend.state.now()
                if op.done or left <= 0:
                    return r.operation(op)
                self.backend.changes.wait(min(left, 0.1))

    def get(self, version: str, project: str, zone: str, name: str) -> dict:
        with self.backend.lock:
            r, instance = self._run(version, api.get, project, zone, name)
            return r.instance(instance)

    def _paged(
        self, version: str, fn: Any, project: str, zone: str, query: dict, what: str
    ) -> tuple[Renderer, list[Any], str | None, str]:
        """One page of a zonal list (`filter`, `maxResults`, `pageToken`), and its link."""
        r, (found, token) = self._run(
            version,
            fn,
            project,
            zone,
            query.get("filter", ""),
            query.get("maxResults", ""),
            query.get("pageToken", ""),
        )
        return r, found, token, r.link(f"projects/{project}/zones/{zone}/{what}")

    def list(self, version: str, project: str, zone: str, query: dict) -> dict:
        with self.backend.lock:
            r, found, token, link = self._paged(
                version, api.list_page, project, zone, query, "instances"
            )
            return _list("compute#instanceList", [r.instance(i) for i in found], token, link)

    def aggregated(self, version: str, project: str, query: dict) -> dict:
        with self.backend.lock:
            r, by_zone = self._run(version, api.aggregated, project, query.get("filter", ""))
            items: dict[str, Any] = {}
            for zone, found in by_zone.items():
                if found:
                    items[f"zones/{zone}"] = {"instances": [r.instance(i) for i in found]}
                else:
                    scope = f"zones/{zone}"
                    items[scope] = {
                        "warning": {
                            "code": "NO_RESULTS_ON_PAGE",
                            "message": f"There are no results for scope '{scope}' on this page.",
                            "data": [{"key": "scope", "value": scope}],
                        }
                    }
            link = r.link(f"projects/{project}/aggregated/instances")
            out = _list("compute#instanceAggregatedList", [], None, link)
            out["items"] = items
            return out

    def guest_attributes(
        self, version: str, project: str, zone: str, name: str, query_path: str
    ) -> dict:
        with self.backend.lock:
            r, (instance, items) = self._run(
                version, api.guest_attributes, project, zone, name, query_path
            )
            return {
                "kind": "compute#guestAttributes",
                "queryPath": query_path,
                "queryValue": {"items": items},
                "selfLink": r.link(f"{instance.path}/guestAttributes"),
            }

    def get_machine_type(self, version: str, project: str, zone: str, name: str) -> dict:
        with self.backend.lock:
            r, m = self._run(version, api.get_machine_type, project, zone, name)
            return r.machine_type(m, project, zone)

    def list_machine_types(self, version: str, project: str, zone: str, query: dict) -> dict:
        with self.backend.lock:
            r, found, token, link = self._paged(
                version, api.list_machine_types, project, zone, query, "machineTypes"
            )
            items = [r.machine_type(m, project, zone) for m in found]
            return _list("compute#machineTypeList", items, token, link)

    def get_image(self, version: str, project: str, name: str) -> dict:
        with self.backend.lock:
            r, found = self._run(version, lambda _s: api.image(project, name, False))
            return r.image(found)

    def get_image_from_family(self, version: str, project: str, family: str) -> dict:
        with self.backend.lock:
            r, found = self._run(version, lambda _s: api.image(project, family, True))
            return r.image(found)
