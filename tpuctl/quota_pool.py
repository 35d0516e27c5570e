"""An API's own TPU quota pool, apart from the Cloud TPU API's (Compute Engine's), as
`tpuctl quota` shows it: plain data, built by the adapter (`TpuBackend.own_quota`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PoolRow:
    """One quota of an API whose TPU quota is a pool of its own (Compute Engine's), in one
    region, with what the project's VMs there use of it."""

    quota_id: str
    family: str | None  # the quota's family dimension (`CT6E`), where it has one
    generation: str
    preemptible: bool  # spot and flex-start count here
    region: str
    limit: int | None  # None: the listing does not show it
    used: int
    unit: str = "chips"

    def to_json(self, api: str) -> dict[str, Any]:
        return {
            "api": api,
            "quotaId": self.quota_id,
            "tpuFamily": self.family,
            "generation": self.generation,
            "scheduling": "preemptible" if self.preemptible else "on-demand",
            "region": self.region,
            "limit": self.limit,
            "inUse": self.used,
            "unit": self.unit,
        }


@dataclass
class QuotaPool:
    """An API's own TPU quota pool, apart from the Cloud TPU API's (`TpuBackend.own_quota`)."""

    title: str  # the API, as a heading names it
    key: str  # and as --json names it
    about: str  # one line on what the pool is
    request_url: str  # where more is asked for
    rows: list[PoolRow]
