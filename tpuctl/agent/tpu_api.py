"""The Cloud TPU API, as the agent calls it about its own node: one call (`tpu`), and
the deletes of a teardown (the node, or a multislice job's queued resource). Reached at
TPUCTL_TPU_URL (read once, at import), Google's by default (contributing/runner-internals.md,
"Endpoints").

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import json
import os

from .metadata import Token
from .monitoring import tensorcore_idle
from .net import HttpError, Json, http

TPU_URL = os.environ.get("TPUCTL_TPU_URL", "https://tpu.googleapis.com").rstrip("/")
# What a node says of its TPU (the v2 API's Node `health` and `symptoms[]`:
# cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes). Unwell: a
# `health` UNHEALTHY_* but UNHEALTHY_MAINTENANCE (a host maintenance's, which ends:
# maintenance.py), and the symptoms that are the TPU's: a mesh that could not be built, a
# program that timed out on it. OUT_OF_MEMORY and HBM_OUT_OF_MEMORY are the program's,
# PROJECT_ABUSE the project's: neither is mended by a new node.
UNWELL_EXCEPT = ("UNHEALTHY_MAINTENANCE",)
TPU_SYMPTOMS = ("MESH_BUILD_FAIL", "EXECUTE_TIMED_OUT")


def tpu(token: Token, method: str, path: str, body: bytes | None = None) -> bytes:
    """One call about this node (`path` after /v2/); fewer and shorter tries than the
    agent's uploads, so that a watchdog's or guard's tick under faults ends soon and
    tries again on the next one."""
    headers = token.headers(**({"Content-Type": "application/json"} if body else {}))
    return http(method, f"{TPU_URL}/v2/{path}", body, headers, attempts=5, timeout=30)[2]


def delete_node(token: Token, project: str, zone: str, node: str) -> Json | None:
    """Ask the TPU API to delete a node: its operation, or None when the node is gone."""
    url = f"{TPU_URL}/v2/projects/{project}/locations/{zone}/nodes/{node}"
    try:
        return dict(json.loads(http("DELETE", url, headers=token.headers())[2] or b"{}"))
    except HttpError as e:
        if e.status == 404:
            return None
        raise


def delete_request(token: Token, project: str, zone: str, request: str) -> Json | None:
    """Ask the TPU API to delete a queued resource with force (its nodes go with it): its
    operation, or None when it is gone."""
    path = f"projects/{project}/locations/{zone}/queuedResources/{request}?force=true"
    try:
        return dict(json.loads(tpu(token, "DELETE", path) or b"{}"))
    except HttpError as e:
        if e.status == 404:
            return None
        raise


def unwell(node: Json, worker: int) -> str | None:
    """What a node (as read) says is wrong with `worker`'s TPU, or None: its health and
    the symptoms of that worker (or of no worker in particular)."""
    health = str(node.get("health") or "")
    sick = health.startswith("UNHEALTHY_") and health not in UNWELL_EXCEPT
    symptoms = []
    for symptom in node.get("symptoms") or []:
        if not isinstance(symptom, dict) or str(symptom.get("workerId", worker)) != str(worker):
            continue
        kind = str(symptom.get("symptomType") or "")
        if sick or kind in TPU_SYMPTOMS:
            sick = True
            symptoms.append(f"{kind}: {symptom.get('details') or ''}".rstrip(": "))
    if not sick:
        return None
    said = []
    if health.startswith("UNHEALTHY_"):
        described = str(node.get("healthDescription") or "")
        said.append(f"the node's health is {health}" + (f" ({described})" if described else ""))
    if symptoms:
        said.append(f"its symptoms on worker {worker}: " + "; ".join(symptoms))
    return ", ".join(said)[:500]


class TpuNode:
    """The job's node on the Cloud TPU API, as agent/compute_api.py's ComputeNode is a
    Compute Engine VM or slice (target.py: `tpu:NAME`)."""

    called = "the TPU API"  # in the log's sentences
    permissions = ["tpu.nodes.delete"]  # what its delete needs
    read_permission = "tpu.nodes.get"  # what `read` needs
    role = "roles/tpu.admin"
    # JAX finds the slice's hosts from the metadata server (`agent-worker-number`)
    hosts_from_metadata = True

    def __init__(self, token: Token, project: str, zone: str, name: str, workers: int) -> None:
        self.token, self.project, self.zone, self.name = token, project, zone, name
        self.path = f"projects/{project}/locations/{zone}/nodes/{name}"
        self.what = f"node {name}"

    @classmethod
    def on_this_vm(cls, token: Token, me: Json, name: str) -> TpuNode:
        """The node this VM is a worker of: the one its `tpu-env` names (`NODE_ID`), which
        on a slice of a multislice is the slice, where the client named the queued
        resource (one startup script serves every slice); else `name`."""
        own = str(me.get("node") or name)
        return cls(token, me["project"], me["zone"], own, me["workers"])

    def read(self) -> Json:
        return dict(json.loads(tpu(self.token, "GET", self.path)))

    def health(self, worker: int) -> str | None:
        """What the node's `health` and `symptoms` say is wrong with `worker`'s TPU, or
        None (tpu_checks.py reads it before the job and after the script failed)."""
        return unwell(self.read(), worker)

    def view(self) -> Json:
        """What the idle watchdog reads: the node (`labels`, `state`, `createTime`)."""
        return self.read()

    def created(self) -> str:
        """The node's create time (its `createTime`), as the client's claim names it."""
        return str(self.read().get("createTime") or "")

    def tensorcore_idle(self, worker: int, now: float) -> float | None:
        """Cloud Monitoring's idle time of `worker`'s TensorCores (monitoring.py)."""
        return tensorcore_idle(self.token, self.path, worker, now)

    def set_label(self, key: str, value: str, node: Json) -> None:
        """Set one label of the node, its others as they are now: read again just before
        the write, not taken from `node`, which was read at the start of the watchdog's
        tick. The TPU API has no label fingerprint (Compute Engine's `setLabels` has:
        compute_api.py), and a PATCH of `labels` replaces them all, so labels read
        earlier would undo what another party set meanwhile (a `tpuctl keep`, a shorter
        idle timeout). The window left is one GET and one PATCH."""
        labels = dict(self.read().get("labels") or {}, **{key: value})
        body = json.dumps({"labels": labels}).encode()
        tpu(self.token, "PATCH", f"{self.path}?updateMask=labels", body)

    def delete(self) -> Json | None:
        """Delete the node; a slice of a multislice: its queued resource, with force, so
        every slice goes (a multislice is made and ended whole: one slice deleted alone
        would leave the others billing for a job that cannot run). None: gone."""
        try:
            node = self.read()
        except HttpError as e:
            if e.status == 404:
                return None
            raise
        request = str(node.get("queuedResource") or "")
        if node.get("multisliceNode") and request:
            return delete_request(self.token, self.project, self.zone, request.rsplit("/", 1)[-1])
        return delete_node(self.token, self.project, self.zone, self.name)

    def request_what(self, request: str) -> str:
        return f"queued resource {request}"

    def delete_request(self, request: str, slices: int) -> Json | None:
        """A multislice: its queued resource, with force (every slice goes with it)."""
        return delete_request(self.token, self.project, self.zone, request)

    def stop(self) -> None:
        tpu(self.token, "POST", f"{self.path}:stop", b"{}")
