"""Compute Engine, as the agent calls it about its own TPU VM or slice: read the VM (its
labels), and delete what the job runs on: the instance, or the slice's managed instance
group (which deletes every VM of it). Reached at TPUCTL_COMPUTE_URL (read once, at
import), Google's by default (docs/runner-internals.md, "Endpoints").

A slice's instance template and workload policy cannot go from here: the group refers to
both until it is gone, and it is gone only once this VM is. They bill nothing (only
VMs and disks do); the client deletes them once the group is gone, and `tpuctl gc` does
when no client is left (docs/compute-engine.md, "What tpuctl creates and deletes").

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .metadata import Token, metadata
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


class ComputeNode:
    """The job's TPU on Compute Engine: instance `name`, or (`workers` > 1) the managed
    instance group `name` whose VM this is."""

    api = "compute"

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
        me = metadata("instance/name").strip() if self.slice else self.name
        return dict(
            json.loads(
                compute(
                    self.token, "GET", f"projects/{self.project}/zones/{self.zone}/instances/{me}"
                )
            )
        )

    def delete(self) -> Json | None:
        """Ask Compute Engine to delete the instance or the group: its operation, or None
        when it is gone already."""
        try:
            return dict(json.loads(compute(self.token, "DELETE", self.path) or b"{}"))
        except HttpError as e:
            if e.status == 404:
                return None
            raise


def labels_of(resource: Any) -> Json:
    return dict((resource or {}).get("labels") or {})
