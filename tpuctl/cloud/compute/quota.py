"""Compute Engine's TPU quotas (`tpuctl.compute_quotas`), a pool apart from the Cloud TPU
API's: the limits the Cloud Quotas API lists under compute.googleapis.com, what the
project's Compute Engine TPU VMs use of them, and the check before a create.

Like the TPU API's check (quota_check.py), it never blocks on what it cannot read: a
listing that fails, or a quota it does not show, lets the create go ahead (logged for
--debug), and Compute Engine's own QUOTA_EXCEEDED then says the same.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from tpuctl import catalog
from tpuctl.catalog.shapes import SliceShape
from tpuctl.cloud.backend import TpuBackend
from tpuctl.cloud.compute import quotas as compute_quotas
from tpuctl.cloud.compute.quotas import ComputeQuota
from tpuctl.cloud.quota import QuotaApi
from tpuctl.errors import QuotaError, TpuctlError
from tpuctl.models import NODE_HOLDS_NO_QUOTA, Node

log = logging.getLogger("tpuctl.quota")


def request_url(project: str) -> str:
    return (
        f"https://console.cloud.google.com/iam-admin/quotas?project={project}"
        f"&service={compute_quotas.SERVICE}"
    )


def regions() -> list[str]:
    """The regions whose zones offer Compute Engine's TPUs (v6e, v5p; TPU7x in
    us-central1)."""
    found = {
        catalog.region_of(z)
        for q in compute_quotas.QUOTAS
        for z in catalog.zones_offering(q.generation)
    }
    return sorted(found | {"us-central1"})


@dataclass(frozen=True)
class ComputeQuotaRow:
    quota: ComputeQuota
    region: str
    limit: int | None  # None: the listing does not show it
    used: int

    def to_json(self) -> dict[str, Any]:
        return {
            "api": "compute",
            "quotaId": self.quota.quota_id,
            "tpuFamily": self.quota.tpu_family,
            "generation": self.quota.generation,
            "scheduling": "preemptible" if self.quota.preemptible else "on-demand",
            "region": self.region,
            "limit": self.limit,
            "inUse": self.used,
            "unit": "chips",
        }


def _holds(node: Node, quota: ComputeQuota, region: str) -> int:
    shape = node.slice
    elsewhere = catalog.region_of(node.zone) != region
    if not shape.known or shape.generation != quota.generation or elsewhere:
        return 0
    if node.state in NODE_HOLDS_NO_QUOTA:
        return 0
    return shape.chips if (node.spot or node.preemptible) == quota.preemptible else 0


def _limit(limits: dict[tuple[str, str, str], int], quota: ComputeQuota, region: str) -> int | None:
    return limits.get((quota.quota_id, quota.tpu_family or "", region))


def rows(
    quotas: QuotaApi, compute: TpuBackend, project: str, regions: list[str]
) -> list[ComputeQuotaRow]:
    """Each Compute Engine TPU quota in each region, with what the project's VMs use."""
    ids = {q.quota_id for q in compute_quotas.QUOTAS}
    limits = quotas.regional_limits(project, compute_quotas.SERVICE, ids, "tpu_family")
    nodes = compute.list_nodes(f"projects/{project}/locations/-")
    return [
        ComputeQuotaRow(q, r, _limit(limits, q, r), sum(_holds(n, q, r) for n in nodes))
        for r in regions
        for q in compute_quotas.QUOTAS
    ]


def check_create(
    quotas: QuotaApi,
    compute: TpuBackend,
    project: str,
    zone: str,
    shape: SliceShape,
    preemptible: bool,
    count: int = 1,
) -> None:
    """Raise QuotaError when `count` slices of `shape` (a multislice's) in `zone` would
    exceed their Compute Engine quota."""
    quota = compute_quotas.quota_for(shape.generation, preemptible)
    if quota is None or not shape.known:
        return
    region = catalog.region_of(zone)
    try:
        found = [r for r in rows(quotas, compute, project, [region]) if r.quota == quota]
    except TpuctlError as e:
        log.debug("Compute Engine quota check skipped: %s", e)
        return
    row = found[0]
    need = shape.chips * count
    if row.limit is None or row.used + need <= row.limit:
        return
    family = f" (tpu_family {quota.tpu_family})" if quota.tpu_family else ""
    what = f"{count} x {shape.name}" if count > 1 else shape.name
    raise QuotaError(
        f"quota exceeded: {what} needs {need} chips of Compute Engine's "
        f"{quota.quota_id}{family} "
        f"in region {region}: the limit is {row.limit}, {row.used} in use",
        hint=f"Compute Engine's TPU quota is apart from the Cloud TPU API's; ask for more at "
        f"{request_url(project)}"
        + (", or use the Cloud TPU API (--api tpu)" if shape.tpu_type else ""),
    )
