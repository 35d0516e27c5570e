"""The seam between tpuctl's services and a TPU API: what services ask of one, in
tpuctl's own values.

Each API is one package under `cloud/`: `cloud/tpu/` (the Cloud TPU API through
google-cloud-tpu) and `cloud/compute/` (Compute Engine: VM instances, and for a
multi-host slice a workload policy, an instance template and a managed instance group).
Its `__init__.py` declares its `BackendKind` (no client library loaded), which
`cloud/registry.py` lists; its adapter implements `TpuBackend`. Services ask the adapter
questions (the type name of a shape, its request rules, its quota, its leftovers) and
never compare an API's name. An adapter builds the API's request bodies, reads its
answers into `Node` and `QueuedResource`, waits on its operations and turns its
failures into tpuctl's typed errors (`NoCapacityError`, `QuotaError`,
`PermissionDeniedError`, `ServiceDisabledError`, `NotFoundError`, `AlreadyExistsError`,
`CloudError`). Services never see wire JSON, and
nothing above `cloud/` knows which API is behind the value it holds.

Names are full resource names in the TPU API's form,
`projects/P/locations/ZONE/nodes/NAME`, on every backend: they are how services and
users name a slice, whatever the API calls its parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tpuctl.catalog.shapes import SliceShape
from tpuctl.errors import QuotaError, UsageError
from tpuctl.leftover import Leftover
from tpuctl.models import CreateSpec, Node, OperationStatus, QueuedResource, QueueSpec
from tpuctl.quota_pool import QuotaPool

if TYPE_CHECKING:
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.cloud.usage import Usage
    from tpuctl.config import Target
    from tpuctl.queueing import QueueOptions


@dataclass(frozen=True)
class BackendKind:
    """What tpuctl knows of a TPU API without loading its client library: its entry in the
    registry (`cloud/registry.py`). `--api` choices, the config file's `api`, display
    names and which API offers a shape all come from these.

    A node names its API by `key` (`Node.api`); `registry.holder` maps it back."""

    key: str  # what --api, the config file and job files call it: "tpu"
    title: str  # as a table or `describe` shows it: "Cloud TPU API"
    called: str  # in a sentence: "the Cloud TPU API"
    service: str  # the Google API that must be enabled: "tpu.googleapis.com"
    type_name: Callable[[SliceShape], str | None]  # its name for a shape; None: not offered
    build: Callable[[Any], TpuBackend]  # the adapter, from a `ClientFactory`
    # the API itself ends a VM at its expiry (Compute Engine's maxRunDuration), so a --ttl
    # alone installs no watchdog
    ends_at_expiry: bool = False
    # flex-start is offered only through a queued request (the Cloud TPU API's; Compute
    # Engine's flex-start VM waits by itself)
    queues_flex_start: bool = False
    permissions: tuple[str, ...] = ()  # what the caller needs of the project beyond the rest
    # what N slices made as one unit are called in a sentence (docs/multislice.md)
    multislice: str = "queued resource"
    # -- what it can do, which callers ask instead of its place in the registry ---------
    # its queued requests are listed on their own (`list_queued_resources`: the Cloud TPU
    # API's); `registry.requests_api` finds it
    lists_requests: bool = False
    # its quota is the one `tpuctl quota` reports row by row (`quota_usage`, the
    # catalogue's quota table); `registry.quota_api` finds it
    reports_quota: bool = False
    # which API a shape that several offer goes to when nothing says otherwise: the
    # highest (`registry.preferred`), never the registry's order
    preference: int = 0
    # a shape name tpuctl does not know is passed to it as it is, the judge of what it
    # offers, unless another API claims the name by its `type_name`
    judges_unknown: bool = False
    # the Cloud Monitoring resource type its TPU series are written on ("" : none known)
    metrics_resource: str = ""
    # the path of a standard-library module (Python 3.8+) the agent bundle carries as its
    # target for `--target KEY:NAME` (its class `TARGET`, agent/target.py); "": the
    # agent's own `agent/targets/KEY.py`
    agent_module: str = ""

    def offers(self, shape: SliceShape) -> bool:
        return self.type_name(shape) is not None

    def claims(self, shape: SliceShape) -> bool:
        """Whether `shape` goes to it by name: it offers a known shape, or names an unknown
        one as its own (not merely as the judge of unknown names)."""
        return self.offers(shape) and (shape.known or not self.judges_unknown)

    @property
    def flag(self) -> str:
        return f"--api {self.key}"

    def agent_target(self, node: str) -> tuple[str, ...]:
        """What the node's own programs (the agent, the boot guard, the idle watchdog, the
        checkup) are told they run on: `--target KEY:NAME`, `node` its short name. The
        agent maps KEY to the class that reads, labels, stops and deletes such a node
        (agent/target.py: `targets/KEY.py`, or `agent_module`), and refuses a key it has
        no module for."""
        return ("--target", f"{self.key}:{node}")


@dataclass(frozen=True)
class MonitoredWorkers:
    """Where Cloud Monitoring keeps the series of some workers of a node: the monitored
    resource they are written on, the resource labels that narrow a filter to them (each
    to its values), and which worker a series is, by the values of `keys` among its
    resource labels (docs/observability.md, "Chips")."""

    resource: str  # "tpu_worker", "gce_instance"
    labels: dict[str, tuple[str, ...]]
    keys: tuple[str, ...]
    workers: dict[tuple[str, ...], int]  # the keys' values -> the worker's number
    project: str = ""  # the project whose Cloud Monitoring holds them ("": the node's)


class TpuBackend(Protocol):
    """A TPU API as tpuctl's services use it."""

    kind: BackendKind  # which API, by the registry's entry

    # -- the API's own rules (defaults in `BackendDefaults`) -------------------------
    def type_name(self, shape: SliceShape) -> str | None:
        """What this API calls `shape` (None: it does not offer it)."""
        ...

    def default_runtime(self, shape: SliceShape) -> str | None:
        """The runtime version a create of `shape` gets when none is asked (None: the API's
        own default)."""
        ...

    def check_request(self, spec: CreateSpec, queue: QueueOptions, queued: bool) -> bool:
        """Refuse, naming the flag, what this API does not take; True when the API waits
        for capacity by itself (a flex-start VM on Compute Engine), with no queued request.
        May set the spec's fields the API takes from the options."""
        ...

    def check_quota(
        self, quotas: QuotaApi, target: Target, spec: CreateSpec, count: int = 1
    ) -> None:
        """Raise QuotaError when `count` nodes of `spec` (a multislice's slices) would
        exceed this API's quota in the target zone; never blocks on what it cannot read."""
        ...

    def explain_quota_refusal(
        self, error: QuotaError, target: Target, spec: CreateSpec
    ) -> QuotaError:
        """The API's own quota refusal of a create, told as `check_quota` tells it."""
        ...

    def headroom(
        self,
        quotas: QuotaApi | None,
        project: str,
        shape: SliceShape,
        scheduling: str,
        zones: list[str],
    ) -> dict[str, str]:
        """For each zone, one phrase on the quota a create of `shape` would count against."""
        ...

    def own_quota(
        self, quotas: QuotaApi, project: str, regions: list[str] | None
    ) -> QuotaPool | None:
        """This API's TPU quota where it is a pool of its own, in `regions` (None: every
        region that offers its TPUs); None for the Cloud TPU API's, which `tpuctl quota`
        reports itself."""
        ...

    def quota_usage(self, project: str) -> list[Usage]:
        """What the project's nodes on this API hold of the catalogue's quota table, where
        its quota is that one (`BackendKind.reports_quota`); [] elsewhere."""
        ...

    def leftovers(self, parent: str) -> list[Leftover]:
        """What unfinished creates or deletes left that is no node (an API that makes a
        slice in one call leaves none)."""
        ...

    def made_of(self, shape: SliceShape) -> str:
        """What a create of `shape` makes, as a message of its undoing names it."""
        ...

    # -- nodes (a slice: one node, with one worker per host) ------------------------
    def get_node(self, name: str) -> Node: ...

    def list_nodes(self, parent: str) -> list[Node]: ...

    def create_node(self, parent: str, spec: CreateSpec) -> str | None:
        """Start the create; the operation's name, or None when a retried create adopted
        the node its lost first attempt had made."""
        ...

    def delete_node(self, name: str) -> str | None:
        """Start the delete; None when the node is already gone or going. Of a node whose
        billing parts are gone and whose free parts are left (`Node.free_parts`, a
        Compute Engine slice's template and policy), delete those."""
        ...

    def stop_node(self, name: str) -> str | None: ...

    def start_node(self, name: str) -> str | None: ...

    def gone_state(self, name: str) -> str:
        """The state a node found gone was last in, as far as the API tells: PREEMPTED
        where it recorded a preemption, else DELETED."""
        ...

    def perform_maintenance(self, name: str) -> str | None:
        """Start the node's pending host maintenance now; the operation's name. A
        CloudError/UsageError when the API offers no such call or nothing is pending."""
        ...

    def set_labels(self, name: str, labels: dict[str, str]) -> str:
        """Replace the node's labels (every VM's, on an API that labels VMs)."""
        ...

    def patch_metadata(
        self, name: str, change: Callable[[dict[str, str]], dict[str, str] | None]
    ) -> Node:
        """Read-modify-write the node's metadata until `change` says it is settled."""
        ...

    def get_guest_attributes(self, name: str, query_path: str = "") -> list[dict[str, str]]:
        """Guest attributes per worker, in worker order (`namespace/key` -> value)."""
        ...

    def operation_status(self, name: str, subject: str) -> OperationStatus: ...

    def monitored_workers(self, node: Node, workers: list[int]) -> MonitoredWorkers:
        """Where Cloud Monitoring keeps the per-chip series of `node`'s workers `workers`
        (their numbers within the node)."""
        ...

    def whole_at_once(self, shape: SliceShape) -> bool:
        """Whether a create of `shape` makes one resource that becomes the node on its own
        (True), or several that are no node until all are up (False: a create of those that
        does not finish is undone, as a queued request is)."""
        ...

    # -- what a zone offers ------------------------------------------------------
    def accelerator_types(self, parent: str) -> list[str]: ...

    def runtime_versions(self, parent: str) -> list[str]: ...

    def locations(self, project: str) -> list[str]:
        """The zones it serves for `project` ([]: it does not say)."""
        ...

    # -- queued requests (capacity asked for, to be granted later) ------------------
    def create_queued_resource(
        self, parent: str, qr_id: str, spec: CreateSpec, queue: QueueSpec
    ) -> str | None: ...

    def get_queued_resource(self, name: str) -> QueuedResource: ...

    def list_queued_resources(self, parent: str) -> list[QueuedResource]: ...

    def delete_queued_resource(self, name: str, force: bool = True) -> str | None: ...

    def requests_of(self, nodes: list[Node]) -> list[QueuedResource]:
        """The queued requests that `nodes` (this API's, as listed) make up, where an API's
        requests are made of its nodes (a Compute Engine multislice); [] where requests
        are listed on their own (`list_queued_resources`)."""
        ...


class BackendDefaults:
    """The answers of an API with no rules, quota or leftovers of its own: what an
    adapter inherits and overrides."""

    kind: BackendKind

    def type_name(self, shape: SliceShape) -> str | None:
        return self.kind.type_name(shape)

    def default_runtime(self, shape: SliceShape) -> str | None:
        return None

    def check_request(self, spec: CreateSpec, queue: QueueOptions, queued: bool) -> bool:
        return False

    def check_quota(
        self, quotas: QuotaApi, target: Target, spec: CreateSpec, count: int = 1
    ) -> None:
        return None

    def explain_quota_refusal(
        self, error: QuotaError, target: Target, spec: CreateSpec
    ) -> QuotaError:
        return error

    def headroom(
        self,
        quotas: QuotaApi | None,
        project: str,
        shape: SliceShape,
        scheduling: str,
        zones: list[str],
    ) -> dict[str, str]:
        return {z: "quota: checked at the create" for z in zones}

    def own_quota(
        self, quotas: QuotaApi, project: str, regions: list[str] | None
    ) -> QuotaPool | None:
        return None

    def locations(self, project: str) -> list[str]:
        return []

    def quota_usage(self, project: str) -> list[Usage]:
        return []

    def leftovers(self, parent: str) -> list[Leftover]:
        return []

    def made_of(self, shape: SliceShape) -> str:
        return "its VM" if shape.known and not shape.multi_host else "its VMs"

    def gone_state(self, name: str) -> str:
        return "DELETED"

    def perform_maintenance(self, name: str) -> str | None:
        raise UsageError(f"{self.kind.title} offers no way to start a maintenance early")

    def requests_of(self, nodes: list[Node]) -> list[QueuedResource]:
        return []
