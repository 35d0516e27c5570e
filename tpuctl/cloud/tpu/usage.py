"""What the Cloud TPU API's nodes hold of its quotas (the Cloud Quotas API's
`tpu.googleapis.com` limits): one node's usages and the project's, read by the create's
check (quota_check.py), `tpuctl quota` and `tpuctl init`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuctl import catalog
from tpuctl.cloud.usage import Usage
from tpuctl.models import NODE_HOLDS_NO_QUOTA, Node

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend

CHECK_PATIENCE = 10.0  # seconds of retries a pre-create check may spend; it never blocks


def node_usages(node: Node) -> list[Usage]:
    """The quotas a node holds, zone and region alike (a node being deleted, or reserved,
    holds none)."""
    acc = node.slice
    if not acc.known or node.state in NODE_HOLDS_NO_QUOTA:
        return []
    scheduling = catalog.scheduling_name(node.spot, node.preemptible, node.reserved)
    return [
        Usage(node, spec, spec.location(node.zone), spec.amount(acc))
        for spec in catalog.quotas_for(acc, scheduling)
    ]


def project_usage(tpu: TpuBackend, project: str) -> list[Usage]:
    """What the project's nodes, in every zone, hold (one list call).

    Queued resources hold quota too once provisioning; tpuctl does not make them yet.
    When it does, their usage belongs here, beside the nodes'.
    """
    nodes = sorted(tpu.list_nodes(f"projects/{project}/locations/-"), key=lambda n: n.name)
    return [u for node in nodes for u in node_usages(node)]
