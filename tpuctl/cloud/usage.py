"""What a node takes from the catalogue's quota table (the quotas `tpuctl quota` reports
row by row): the words services and adapters share. Which nodes hold which quota is the
adapter's to say (`TpuBackend.quota_usage`; the Cloud TPU API's: `cloud/tpu/usage.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tpuctl import catalog
from tpuctl.models import Node

log = logging.getLogger("tpuctl.quota")


def request_url(project: str) -> str:
    """The console page where quota increases are requested."""
    return (
        f"https://console.cloud.google.com/iam-admin/quotas?project={project}"
        f"&service={catalog.QUOTA_SERVICE}"
    )


def scheduling_label(spec: catalog.QuotaSpec) -> str:
    """Spot and preemptible nodes share the preemptible quotas; tpuctl's flag is --spot."""
    return "spot" if spec.preemptible else "on-demand"


@dataclass(frozen=True)
class Usage:
    """What one node takes from one quota."""

    node: Node
    spec: catalog.QuotaSpec
    location: str
    amount: int
