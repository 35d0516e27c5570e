"""Compute Engine, as the agent calls it about its own TPU VM or slice: read the VM (its
labels), and delete what the job runs on: the instance, or the slice's managed instance
group (which deletes every VM of it). Reached at TPUCTL_COMPUTE_URL (read once, at
import), Google's by default (contributing/runner-internals.md, "Endpoints").

A slice's instance template and workload policy cannot go from here: the group refers to
both until it is gone, and it is gone only once this VM is. They bill nothing (only
VMs and disks do); the client deletes them once the group is gone, and `tpuctl gc` does
when no client is left (docs/compute-engine.md, "gc, top and doctor").

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

from .labels import LAST_ACTIVE, number
from .metadata import Token, metadata
from .monitoring import vm_tensorcore_idle
from .net import HttpError, Json, http

COMPUTE_URL = os.environ.get("TPUCTL_COMPUTE_URL", "https://compute.googleapis.com").rstrip("/")
# What deleting needs, by what the job runs on (roles/compute.instanceAdmin.v1 has both).
SINGLE_PERMISSIONS = ["compute.instances.delete"]
SLICE_PERMISSIONS = ["compute.instanceGroupManagers.delete", "compute.instances.delete"]
ROLE = "roles/compute.instanceAdmin.v1"


def compute(token: Token, method: str, path: str, body: bytes | None = None) -> bytes:
    """One call (`path` after /compute/v1/), with the short tries of tpu_api.tpu."""
    headers = token.headers(**({"Content-Type": "application/json"} if body else {}))
    url = f"{COMPUTE_URL}/compute/v1/{path}"
    return http(method, url, body, headers, attempts=5, timeout=30)[2]


def once(path: str) -> str:
    """`path` with a new `requestId`, one for all the tries `compute` makes of the call:
    a retry of a change that took effect gets its first operation instead of doing it
    again or failing (Compute Engine's `requestId`; the client's cloud/compute/wire.py)."""
    return f"{path}?requestId={uuid.uuid4()}"


class ComputeNode:
    """The job's TPU on Compute Engine: instance `name`, or (`workers` > 1) the managed
    instance group `name` whose VM this is."""

    called = "the Compute Engine API"  # in the log's sentences
    read_permission = "compute.instances.get"  # what `read` needs
    # a Compute Engine VM has no `agent-worker-number`: the job is told its slice's hosts
    hosts_from_metadata = False

    def __init__(self, token: Token, project: str, zone: str, name: str, workers: int) -> None:
        self.token, self.project, self.zone, self.name = token, project, zone, name
        self.slice = workers > 1
        self.permissions: list[str] = SLICE_PERMISSIONS if self.slice else SINGLE_PERMISSIONS
        self.role = ROLE
        kind = "instanceGroupManagers" if self.slice else "instances"
        self.path = f"projects/{project}/zones/{zone}/{kind}/{name}"
        self.what = f"slice {name} (its managed instance group)" if self.slice else f"VM {name}"

    def read(self) -> Json:
        """This VM as Compute Engine shows it (its labels are the job's: the template gives
        every VM of a slice the same). A 404: the VM, or its slice, is gone."""
        return self._instance(self._me())

    @classmethod
    def on_this_vm(cls, token: Token, me: Json, name: str) -> ComputeNode:
        """The VM, or the slice, `name` (the client's: each slice's metadata names its own)."""
        return cls(token, me["project"], me["zone"], name, me["workers"])

    def _me(self) -> str:
        return metadata("instance/name").strip() if self.slice else self.name

    def _instance(self, name: str) -> Json:
        path = f"projects/{self.project}/zones/{self.zone}/instances/{name}"
        return dict(json.loads(compute(self.token, "GET", path)))

    def health(self, worker: int) -> str | None:
        """Nothing to read: a Compute Engine instance has no health or symptoms of its
        TPU (`instances` in compute.v1 has `status`, `statusMessage` and
        `resourceStatus`, none of which names the accelerator's health:
        cloud.google.com/compute/docs/reference/rest/v1/instances;
        `reportHostAsFaulty` is the user's report to the cloud, not the cloud's to the
        user). The device files and the script's own words are what tell here."""
        return None

    def view(self) -> Json:
        """What the idle watchdog reads, in the TPU API's words: this VM's labels, `state`
        READY while it runs, `createTime`; on a slice, `tpuctl-last-active` is the latest
        any of its VMs has (each VM's watchdog labels its own VM: labels are per VM)."""
        me = self.read()
        labels = labels_of(me)
        if self.slice:
            stamps = [number(labels_of(vm).get(LAST_ACTIVE)) for vm in self._members()]
            latest = max((s for s in stamps if s is not None), default=None)
            if latest is not None:
                labels[LAST_ACTIVE] = str(int(latest))
        status = str(me.get("status", ""))
        return {
            "labels": labels,
            "state": "READY" if status == "RUNNING" else status,
            "createTime": me.get("creationTimestamp"),
        }

    def created(self) -> str:
        """When what the job runs on was made (the instance's, or the slice's group's,
        `creationTimestamp`), as the client's claim names it (cloud/compute/wire.py and
        slices.py read the same)."""
        return str(json.loads(compute(self.token, "GET", self.path)).get("creationTimestamp") or "")

    def tensorcore_idle(self, worker: int, now: float) -> float | None:
        """Cloud Monitoring's idle time of this VM's TensorCores (monitoring.py): each VM
        is one worker, its points on the resource the metric's descriptor names."""
        return vm_tensorcore_idle(self.token, self.project, self.zone, now)

    def _members(self) -> list[Json]:
        """The slice's VMs (`listManagedInstances`, then each VM)."""
        listed = json.loads(
            compute(self.token, "POST", f"{self.path}/listManagedInstances", b"{}") or b"{}"
        )
        found = []
        for vm in listed.get("managedInstances") or []:
            try:
                found.append(self._instance(str(vm.get("name") or "").rsplit("/", 1)[-1]))
            except HttpError as e:
                if e.status != 404:
                    raise
        return found

    def set_label(self, key: str, value: str, node: Json) -> None:
        """Label this VM (`instances.setLabels`, with the fingerprint it was read with)."""
        name = self._me()
        current = self._instance(name)
        body = json.dumps(
            {
                "labels": dict(labels_of(current), **{key: value}),
                "labelFingerprint": current.get("labelFingerprint", ""),
            }
        )
        path = f"projects/{self.project}/zones/{self.zone}/instances/{name}/setLabels"
        compute(self.token, "POST", once(path), body.encode())

    def stop(self) -> None:
        """Stop the VM (a slice is refused before: its VMs do not stop as one)."""
        compute(self.token, "POST", once(f"{self.path}/stop"), b"{}")

    def delete(self) -> Json | None:
        """Ask Compute Engine to delete the instance or the group: its operation, or None
        when it is gone already."""
        return self._delete(self.path)

    def _delete(self, path: str) -> Json | None:
        try:
            return dict(json.loads(compute(self.token, "DELETE", once(path)) or b"{}"))
        except HttpError as e:
            if e.status == 404:
                return None
            raise

    def request_what(self, request: str) -> str:
        """How the log names a multislice: Compute Engine has no queued resource."""
        return f"multislice {request}"

    def delete_request(self, request: str, slices: int) -> Json | None:
        """A multislice's every slice (`REQUEST-0` ... on Compute Engine: instances or
        groups as this one is), this VM's own last, since it goes with it: the last
        operation, or None when all are gone."""
        base = self.path.rsplit("/", 1)[0]
        names = [f"{request}-{k}" for k in range(slices)]
        last = None
        for name in sorted(names, key=lambda n: n == self.name):
            last = self._delete(f"{base}/{name}") or last
        return last


def labels_of(resource: Any) -> Json:
    return dict((resource or {}).get("labels") or {})
