"""Compute Engine's wire format for a single-host TPU VM: the instance body from tpuctl's
`CreateSpec`, a `Node` from the instance's JSON, and a zone operation's error as
tpuctl's error.

Only `cloud/compute_tpu.py` uses this. The body is what `gcloud compute instances create
NAME --machine-type M --maintenance-policy TERMINATE --image-family F --image-project
ubuntu-os-accelerator-images` sends (Compute Engine's TPU machine types,
https://cloud.google.com/compute/docs/accelerator-optimized-machines): the machine type
brings the TPUs (no guestAccelerators), and a TPU VM cannot live-migrate, so
`onHostMaintenance` is TERMINATE.
"""

from __future__ import annotations

from typing import Any

from tpuctl import catalog
from tpuctl.cloud import maintenance
from tpuctl.errors import CloudError, NoCapacityError, QuotaError, TpuctlError
from tpuctl.models import CREATED, EXPIRES, MAX_COST, CreateSpec, Node, Worker
from tpuctl.timestamps import parse_rfc3339

IMAGE_PROJECT = "ubuntu-os-accelerator-images"
# The TPU OS image family of each generation on Compute Engine (the TPU VM images guide,
# https://cloud.google.com/tpu/docs/tpu-vm-on-compute-engine)
IMAGE_FAMILIES = {
    "v5p": "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
    "v6e": "ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e",
    "tpu7x": "ubuntu-accel-2404-amd64-tpu-tpu7x",
}
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
BOOT_DISK_GB = 100  # the images' default (10 GB) fills up with a framework's wheels
GUEST_ATTRIBUTES = "enable-guest-attributes"  # host keys published there, for SSH
# Compute Engine's status -> the TPU API's state names tpuctl's rules speak
STATES = {
    "PROVISIONING": "CREATING",
    "STAGING": "CREATING",
    "RUNNING": "READY",
    "STOPPING": "STOPPING",
    "TERMINATED": "STOPPED",
    "SUSPENDING": "STOPPING",
    "SUSPENDED": "STOPPED",
    "REPAIRING": "REPAIRING",
    # a flex-start VM waiting for capacity ("for Flex Start provisioning instance is
    # waiting for available capacity from DWS", Instance.Status): as a queued request waits
    "PENDING": "WAITING_FOR_RESOURCES",
}


def once() -> dict[str, str]:
    """The query of a change to make it idempotent: a new `requestId` (a UUID), chosen
    once per logical change, before the retried call (`cloud/retry.py` sends the same
    query again), so that Compute Engine answers a retry whose first attempt took effect
    with that attempt's operation instead of doing it twice or refusing it ("Specify a
    unique request ID so that if you must retry your request, the server will know to
    ignore the request if it has already been completed", e.g.
    https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert)."""
    import uuid

    return {"requestId": str(uuid.uuid4())}


def made_by(resource: dict[str, Any], spec: CreateSpec) -> bool:
    """Whether an instance (or an instance template's properties) that exists under the
    name a create asked for is that create's own: it has every label tpuctl gave it,
    including the second it was made (`tpuctl-created`) and its owner."""
    labels = (resource.get("properties") or resource).get("labels") or {}
    return bool(spec.labels) and all(labels.get(k) == v for k, v in spec.labels.items())


def default_image(shape: catalog.SliceShape) -> str:
    """The TPU OS image family for a shape's generation."""
    return IMAGE_FAMILIES.get(shape.generation, IMAGE_FAMILIES["v6e"])


def instance_body(spec: CreateSpec, zone: str) -> dict[str, Any]:
    """The Instance JSON of `instances.insert` for a single-host TPU VM."""
    family = spec.version or default_image(spec.shape)
    interface: dict[str, Any] = {
        "network": spec.network or "global/networks/default",
        "nicType": "GVNIC",
    }
    if spec.subnetwork:
        interface["subnetwork"] = spec.subnetwork
    if not spec.internal_ip_only:
        interface["accessConfigs"] = [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    # as gcloud states them: automaticRestart spelled out (the API's default for a standard
    # VM), and a spot VM `preemptible` beside its provisioning model
    scheduling: dict[str, Any] = {"onHostMaintenance": "TERMINATE", "automaticRestart": True}
    if spec.spot:
        # a stopped spot TPU would keep its disk billing: a preempted one is deleted
        scheduling.update(
            provisioningModel="SPOT",
            instanceTerminationAction="DELETE",
            automaticRestart=False,
            preemptible=True,
        )
    if spec.flex_start:
        # a flex-start VM waits for capacity, runs its maxRunDuration, and is deleted
        # (`gcloud compute instances create --provisioning-model FLEX_START
        # --max-run-duration D --instance-termination-action DELETE`; About Flex-start VMs,
        # https://cloud.google.com/compute/docs/instances/about-flex-start-vms)
        scheduling.update(
            provisioningModel="FLEX_START",
            instanceTerminationAction="DELETE",
            maxRunDuration={"seconds": str(spec.max_run_duration)},
        )
    limit = _run_limit(spec.labels) or spec.ttl
    if spec.flex_start and limit:
        limit = min(limit, int(spec.max_run_duration or limit))
    if limit:
        # the lifetime (--ttl, or the --max-cost deadline when it is earlier) is Compute
        # Engine's to enforce: it deletes the VM at its end, with no watchdog, gc or laptop
        # (https://cloud.google.com/compute/docs/instances/limit-vm-runtime)
        scheduling.update(
            maxRunDuration={"seconds": str(limit)}, instanceTerminationAction="DELETE"
        )
    metadata = {GUEST_ATTRIBUTES: "TRUE", **spec.metadata}
    body: dict[str, Any] = {
        "name": spec.name,
        "machineType": f"zones/{zone}/machineTypes/{spec.shape.machine_type}",
        "disks": [
            {
                "boot": True,
                "autoDelete": True,
                "initializeParams": {
                    "sourceImage": f"projects/{IMAGE_PROJECT}/global/images/family/{family}",
                    "diskSizeGb": str(BOOT_DISK_GB),
                },
            }
        ],
        "networkInterfaces": [interface],
        "scheduling": scheduling,
        "serviceAccounts": [
            {"email": spec.service_account or "default", "scopes": spec.scopes or [CLOUD_PLATFORM]}
        ],
        "metadata": {"items": [{"key": k, "value": v} for k, v in metadata.items()]},
        "labels": dict(spec.labels),
    }
    if spec.flex_start and spec.request_valid_for:
        # how long the insert may wait for capacity ("Relevant only for Instances.Insert")
        body["params"] = {"requestValidForDuration": {"seconds": str(spec.request_valid_for)}}
    affinity = reservation_affinity(spec)
    if affinity:
        body["reservationAffinity"] = affinity
    if spec.description:
        body["description"] = spec.description
    if spec.tags:
        body["tags"] = {"items": list(spec.tags)}
    return body


RESERVATION_KEY = "compute.googleapis.com/reservation-name"  # gcloud's instance_utils.py


def reservation_affinity(spec: CreateSpec) -> dict[str, Any] | None:
    """What `gcloud compute instances create --reservation-affinity specific --reservation
    R` (or `any`) sends: a specific reservation by name, or any matching one (--reserved)."""
    if spec.reservation:
        return {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [spec.reservation],
        }
    if spec.reserved:
        return {"consumeReservationType": "ANY_RESERVATION"}
    return None


def _run_limit(labels: dict[str, str]) -> int | None:
    """Seconds from the create to the node's expiry when a --max-cost caps it (the
    earlier of the cap and the --ttl), else None."""
    if MAX_COST not in labels:
        return None
    try:
        return max(30, int(labels[EXPIRES]) - int(labels[CREATED]))
    except (KeyError, ValueError):
        return None


def shape_of(machine_type: str) -> catalog.SliceShape | None:
    """The single-host shape a TPU machine type brings (`ct6e-standard-4t` -> v6e-4)."""
    name = machine_type.rsplit("/", 1)[-1]
    return next(
        (s for s in catalog.SHAPES.values() if s.machine_type == name and not s.multi_host),
        None,
    )


def node_from_instance(data: dict[str, Any], project: str) -> Node:
    """A Node (one worker) from Compute Engine's Instance JSON."""
    zone = str(data.get("zone", "")).rsplit("/", 1)[-1]
    shape = shape_of(str(data.get("machineType", "")))
    nics = data.get("networkInterfaces") or [{}]
    nat = [a.get("natIP") for a in nics[0].get("accessConfigs") or [] if a.get("natIP")]
    scheduling = data.get("scheduling") or {}
    items = (data.get("metadata") or {}).get("items") or []
    created = data.get("creationTimestamp")
    return Node(
        name=str(data.get("name", "")),
        project=project,
        zone=zone,
        accelerator_type=shape.name if shape else str(data.get("machineType", "")),
        state=STATES.get(str(data.get("status", "")), str(data.get("status", "UNKNOWN"))),
        runtime_version="",
        labels=dict(data.get("labels") or {}),
        metadata={str(i.get("key")): str(i.get("value") or "") for i in items},
        workers=[
            Worker(
                0,
                str(nics[0].get("networkIP", "")),
                nat[0] if nat else None,
                instance_id=str(data.get("id", "")),
                instance=str(data.get("name", "")),
            )
        ],
        create_time=parse_rfc3339(str(created)) if created else None,
        spot=scheduling.get("provisioningModel") == "SPOT",
        flex_start=scheduling.get("provisioningModel") == "FLEX_START",
        preemptible=bool(scheduling.get("preemptible")),
        reserved=(data.get("reservationAffinity") or {}).get("consumeReservationType")
        == "SPECIFIC_RESERVATION",
        description=str(data.get("description", "")),
        health_description=_why(data),
        api="compute",
        shape=shape,
        maintenance=maintenance.from_json(
            (data.get("resourceStatus") or {}).get("upcomingMaintenance")
        ),
        raw=data,
    )


def _why(data: dict[str, Any]) -> str:
    """What a VM's state means beyond its name: a flex-start VM waiting for capacity."""
    return "flex-start: waiting for capacity" if data.get("status") == "PENDING" else ""


def operation_error(op: dict[str, Any], subject: str) -> TpuctlError | None:
    """A finished zone operation's error as tpuctl's: no capacity
    (ZONE_RESOURCE_POOL_EXHAUSTED), quota (QUOTA_EXCEEDED), else a CloudError."""
    errors = ((op.get("error") or {}).get("errors")) or []
    if not errors:
        return None
    code, message = str(errors[0].get("code", "")), str(errors[0].get("message", ""))
    if code.startswith("ZONE_RESOURCE_POOL_EXHAUSTED"):
        return NoCapacityError(
            f"no capacity for {subject}: {message}",
            hint="try another zone that offers it, or again later; spot capacity (--spot) is "
            "often easier to find",
        )
    if code == "QUOTA_EXCEEDED":
        return QuotaError(
            f"quota exceeded for {subject}: {message}",
            hint="Compute Engine's TPU quota is a pool apart from the Cloud TPU API's: "
            "`tpuctl quota` shows both",
        )
    return CloudError(f"{subject} failed: {message} ({code})")
