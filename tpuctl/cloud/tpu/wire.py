"""The Cloud TPU v2 API's wire format: request bodies from tpuctl's values, tpuctl's values
from the API's JSON, and long-running operations' errors as tpuctl's errors.

Only `cloud/tpu.py` (the adapter) uses this; services see `Node`, `QueuedResource`,
`CreateSpec` and typed errors. Field names are the v2 REST resource's
(https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes), as gcloud
sends them for the same flags.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tpuctl import catalog
from tpuctl.cloud import maintenance
from tpuctl.errors import CloudError, NoCapacityError, QuotaError, TpuctlError
from tpuctl.models import CreateSpec, Node, QueuedResource, QueueSpec, Symptom, Worker, slice_ids
from tpuctl.timestamps import parse_rfc3339

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
RESOURCE_EXHAUSTED = 8  # google.rpc.Code


# -- requests ---------------------------------------------------------------------
def node_body(spec: CreateSpec) -> dict[str, Any]:
    """The Node JSON of a create (labels and metadata as the services prepared them)."""
    body: dict[str, Any] = {
        "acceleratorType": spec.shape.tpu_type or spec.shape.name,
        "runtimeVersion": spec.version,
        "labels": dict(spec.labels),
        "networkConfig": {"enableExternalIps": not spec.internal_ip_only},
    }
    if spec.description:
        body["description"] = spec.description
    if spec.metadata:
        body["metadata"] = dict(spec.metadata)
    if spec.network:
        body["networkConfig"]["network"] = spec.network
    if spec.subnetwork:
        body["networkConfig"]["subnetwork"] = spec.subnetwork
    if spec.tags:
        body["tags"] = list(spec.tags)
    body["serviceAccount"] = service_account(spec.service_account, spec.scopes)
    sched = {k: True for k in ("spot", "preemptible", "reserved") if getattr(spec, k)}
    if sched:
        body["schedulingConfig"] = sched
    return body


def service_account(email: str | None, scopes: list[str]) -> dict[str, Any]:
    """The node's `serviceAccount`, always sent so that the VM's rights never rest on
    an unstated default. The email is left out when none is named: the API then uses
    the project's default compute account (TPU v2 discovery document, ServiceAccount:
    "If empty, default Compute service account will be used"), which saves a call for
    the project number; the scope is always stated (empty would mean "all Cloud APIs")."""
    body: dict[str, Any] = {"scope": list(scopes) or [CLOUD_PLATFORM]}
    if email:
        body = {"email": email, **body}
    return body


def queued_body(parent: str, name: str, spec: CreateSpec, queue: QueueSpec) -> dict[str, Any]:
    """The QueuedResource JSON asking for `spec`'s node (or `queue.slices` of them)."""
    node = node_body(spec)
    sched = dict(node.pop("schedulingConfig", None) or {})
    node_spec: dict[str, Any] = {"parent": parent, "node": node}
    if queue.slices > 1:
        # What gcloud's `queued-resources create --node-count N --node-prefix P` sends
        # (v2: `multisliceParams`; v2alpha1 called it `multiNodeParams`); it replaces
        # `nodeId`, and the count must be > 1 (google/cloud/tpu/v2/cloud_tpu.proto).
        node_spec["multisliceParams"] = {"nodeCount": queue.slices, "nodeIdPrefix": name}
    else:
        node_spec["nodeId"] = name
    request: dict[str, Any] = {"tpu": {"nodeSpec": [node_spec]}}
    if sched.get("reserved"):
        # As gcloud GA's --reserved sends it: any reservation of the project in the zone
        # (command_lib/compute/tpus/queued_resources/util.py, CreateReservationName).
        request["reservationName"] = f"{parent}/reservations/-"
    if sched.get("spot"):
        request["spot"] = {}
    if queue.flex_start:
        # As gcloud alpha's `queued-resources create --provisioning-model=flex-start
        # --max-run-duration=4h` sends it (captured against the emulator): fields of
        # v2alpha1's QueuedResource, which v2 lacks.
        request["provisioningModel"] = "FLEX_START"
        request["runDuration"] = {"maxRunDuration": f"{int(queue.max_run_duration or 0)}s"}
    if queue.valid_until:
        request["queueingPolicy"] = {"validUntilDuration": f"{int(queue.valid_until)}s"}
    elif queue.valid_until_time:
        request["queueingPolicy"] = {"validUntilTime": queue.valid_until_time}
    return request


def same_node(node: Node, spec: CreateSpec) -> bool:
    """Whether an existing node is the one `spec` asked for (a lost create's)."""
    return (
        node.accelerator_type == (spec.shape.tpu_type or spec.shape.name)
        and node.runtime_version == spec.version
        and node.labels == spec.labels
    )


def same_queued(qr: QueuedResource, spec: CreateSpec, queue: QueueSpec) -> bool:
    """Whether an existing queued resource is the one this client asked for (a lost
    create's): the same type, slices and labels, which carry tpuctl's creation stamp and
    owner, so another client's request of that name is never taken for ours."""
    wanted = slice_ids(spec.name, queue.slices)
    return (
        qr.accelerator_type == (spec.shape.tpu_type or spec.shape.name)
        and qr.labels == spec.labels
        and qr.node_ids == wanted
        and qr.spot == spec.spot
    )


# -- answers ----------------------------------------------------------------------
def _name_parts(name: str) -> tuple[str, str, str]:
    parts = name.split("/")
    return (parts[1], parts[3], parts[5]) if len(parts) == 6 else ("", "", "")


def _time(value: Any) -> Any:
    return parse_rfc3339(str(value)) if value else None


def node_from_json(data: dict[str, Any]) -> Node:
    """A Node from the TPU API's JSON form (camelCase keys)."""
    project, zone, name = _name_parts(data.get("name", ""))
    workers = []
    for i, ep in enumerate(data.get("networkEndpoints") or []):
        ext = (ep.get("accessConfig") or {}).get("externalIp") or None
        workers.append(Worker(index=i, internal_ip=ep.get("ipAddress", ""), external_ip=ext))
    sched = data.get("schedulingConfig") or {}
    accelerator = data.get("acceleratorType", "")
    shape = catalog.parse_accelerator(accelerator)
    config = data.get("acceleratorConfig") or {}
    if shape is None and config:
        shape = catalog.accelerator_for_config(config.get("type", ""), config.get("topology", ""))
    return Node(
        name=name,
        project=project,
        zone=zone,
        accelerator_type=accelerator,
        state=data.get("state", "STATE_UNSPECIFIED"),
        runtime_version=data.get("runtimeVersion", ""),
        health=data.get("health", ""),
        labels=dict(data.get("labels") or {}),
        metadata=dict(data.get("metadata") or {}),
        workers=workers,
        create_time=_time(data.get("createTime")),
        spot=bool(sched.get("spot")),
        preemptible=bool(sched.get("preemptible")),
        reserved=bool(sched.get("reserved")),
        description=data.get("description", ""),
        health_description=data.get("healthDescription", ""),
        queued_resource=str(data.get("queuedResource") or ""),
        symptoms=[
            Symptom(
                kind=str(s.get("symptomType", "")),
                details=str(s.get("details", "")),
                worker=str(s.get("workerId", "")),
            )
            for s in data.get("symptoms") or []
        ],
        maintenance=maintenance.from_json(data.get("upcomingMaintenance")),
        shape=shape,
        raw=data,
    )


def queued_from_json(data: dict[str, Any]) -> QueuedResource:
    """A QueuedResource from the TPU API's JSON form (camelCase keys)."""
    project, zone, name = _name_parts(data.get("name", ""))
    specs = (data.get("tpu") or {}).get("nodeSpec") or []
    node_ids: list[str] = []
    for spec in specs:
        multi = spec.get("multisliceParams") or {}
        if multi:
            # without a prefix the service names the nodes after the request
            prefix = multi.get("nodeIdPrefix") or name
            count = int(multi.get("nodeCount", 0))
            node_ids += [f"{prefix}-{i}" for i in range(count)]
        else:
            node_ids.append(spec.get("nodeId", ""))
    node = (specs[0].get("node") or {}) if specs else {}
    state = data.get("state") or {}
    error = ((state.get("failedData") or {}).get("error") or {}).get("message", "")
    policy = data.get("queueingPolicy") or {}
    created = _time(data.get("createTime"))
    sched = node.get("schedulingConfig") or {}
    return QueuedResource(
        name=name,
        project=project,
        zone=zone,
        state=state.get("state", "STATE_UNSPECIFIED"),
        node_ids=node_ids,
        accelerator_type=node.get("acceleratorType", ""),
        spot="spot" in data or bool(sched.get("spot")),
        reserved=bool(data.get("reservationName") or sched.get("reserved")),
        labels=dict(node.get("labels") or {}),
        create_time=created,
        valid_until=policy.get("validUntilTime") or policy.get("validUntilDuration") or "",
        error=error,
        valid_until_at=_valid_until(policy, created),
        raw=data,
    )


def _valid_until(policy: dict[str, Any], created: Any) -> Any:
    """When a request gives up: its validUntilTime, or its creation time plus its
    validUntilDuration (the API's "21600s" form); None when it waits for ever."""
    if policy.get("validUntilTime"):
        return parse_rfc3339(str(policy["validUntilTime"]))
    duration = str(policy.get("validUntilDuration") or "")
    if duration.endswith("s") and created is not None:
        try:
            return created + timedelta(seconds=float(duration[:-1]))
        except ValueError:
            return None
    return None


def operation_error(op: dict[str, Any], subject: str) -> TpuctlError | None:
    """The error a finished long-running operation carries, as tpuctl's error: no
    capacity and quota (both RESOURCE_EXHAUSTED, told apart by the message) each get
    their own; anything else is a CloudError."""
    err = op.get("error")
    if not err:
        return None
    code, msg = int(err.get("code", 2)), err.get("message", "unknown error")
    if code == RESOURCE_EXHAUSTED:
        if "capacity" in msg.lower():
            # The zone is out of this TPU type for everyone: no quota would change that.
            return NoCapacityError(
                f"no capacity for {subject}: the zone has no more of this TPU type free right "
                f"now (a shortage in the cloud, not your quota): {msg}",
                hint="try another zone that offers it, or again later; spot capacity (--spot) is "
                "often easier to find than on-demand; a queued resource waits for capacity "
                "instead of failing",
            )
        return QuotaError(
            f"quota exceeded for {subject}: {msg}",
            hint="`tpuctl quota` shows limits, usage and which nodes use them",
        )
    return CloudError(f"{subject} failed: {msg}")
