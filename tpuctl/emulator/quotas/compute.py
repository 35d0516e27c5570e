"""Compute Engine's TPU quotas (`compute_table.py`, the emulator's own table): their limits from the
emulator's config, enforced when a VM is made (an instance's insert, or a managed
instance group's VM), and listed by the Cloud Quotas API under `compute.googleapis.com`.

Config: `{"compute_quotas": {"<id>[/<tpu_family>]": {"*": chips, "<region>": chips}}}` (a
number stands for `{"*": number}`), or a preset: "granted" (1024 chips of each, the
default) or "new-project" (0 on-demand; the preemptible v6e quota 1536, the others 0),
which the `quotas` preset of the same name also sets.

A VM over quota is refused in its operation (`error.errors[].code` QUOTA_EXCEEDED, with
Compute's `quotaInfo` detail), in the words gcloud prints for it: `Quota
'TPUS_PER_TPU_FAMILY' exceeded.  Limit: 0.0 in region us-east1.` (the form of Compute's
quota errors in public output; the TPU family one is quoted by a public migration guide).
"""

from __future__ import annotations

import copy
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.quotas import compute_table as compute_quotas
from tpuctl.emulator.quotas.compute_table import ComputeQuota

PRESETS = ("granted", "new-project")


def _preset(name: str) -> dict[str, dict[str, int]]:
    return {
        q.key: {"*": q.granted if name == "granted" else q.new_project}
        for q in compute_quotas.QUOTAS
    }


class ComputeQuotaConfig:
    def __init__(self) -> None:
        self.limits = _preset("granted")

    def to_config(self) -> dict[str, Any]:
        return copy.deepcopy(self.limits)

    def load(self, value: dict[str, Any] | None) -> None:
        for key, per_region in (value or {}).items():
            if key in self.limits:
                self.limits[key].update(per_region)

    def checked(self, value: Any, preset: Any) -> dict[str, dict[str, int]]:
        """The limits a config update makes (`preset`: the `quotas` preset, if any)."""
        limits = _preset(preset) if preset in PRESETS else copy.deepcopy(self.limits)
        if isinstance(value, str):
            if value not in PRESETS:
                raise errors.invalid_argument(f"compute_quotas preset must be one of {PRESETS}")
            return _preset(value)
        if value is None:
            return limits
        if not isinstance(value, dict):
            raise errors.invalid_argument("compute_quotas must be a preset name or a map")
        for key, given in value.items():
            if key not in compute_quotas.BY_KEY:
                known = sorted(compute_quotas.BY_KEY)
                raise errors.invalid_argument(f"unknown Compute quota '{key}': one of {known}")
            per_region = {"*": given} if not isinstance(given, dict) else given
            if not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for v in per_region.values()
            ):
                raise errors.invalid_argument(f"limits of '{key}' must be counts >= 0")
            limits[key].update(per_region)
        return limits

    def limit(self, quota: ComputeQuota, region: str) -> int:
        per_region = self.limits[quota.key]
        return per_region.get(region, per_region.get("*", 0))

    # -- enforcement -----------------------------------------------------------------
    def exceeded(
        self, quota: ComputeQuota | None, region: str, used: int, chips: int
    ) -> dict[str, Any] | None:
        """The operation error of a VM of `chips` over `quota` (None: within it)."""
        if quota is None:
            return None
        limit = self.limit(quota, region)
        if used + chips <= limit:
            return None
        dimensions = {"region": region}
        if quota.tpu_family:
            dimensions["tpu_family"] = quota.tpu_family
        return {
            "code": "QUOTA_EXCEEDED",
            "message": f"Quota '{quota.metric}' exceeded.  Limit: {float(limit)} in region "
            f"{region}.",
            "errorDetails": [
                {
                    "quotaInfo": {
                        "metricName": f"compute.googleapis.com/{quota.metric.lower()}",
                        "limitName": quota.quota_id,
                        "dimensions": dimensions,
                        "limit": float(limit),
                    }
                }
            ],
        }

    # -- the Cloud Quotas API ------------------------------------------------------
    def infos(self, project_number: str, regions: list[str]) -> list[dict[str, Any]]:
        """Each quota id once, its per-family and per-region limits as dimensionsInfos."""
        parent = f"projects/{project_number}/locations/global/services/{compute_quotas.SERVICE}"
        out: dict[str, dict[str, Any]] = {}
        for q in compute_quotas.QUOTAS:
            info = out.setdefault(
                q.quota_id,
                {
                    "name": f"{parent}/quotaInfos/{q.quota_id}",
                    "quotaId": q.quota_id,
                    "metric": f"compute.googleapis.com/{q.metric.lower()}",
                    "service": compute_quotas.SERVICE,
                    "isPrecise": True,
                    "containerType": "PROJECT",
                    "dimensions": ["region", "tpu_family"] if q.tpu_family else ["region"],
                    "metricDisplayName": q.metric.replace("_", " ").title(),
                    "quotaDisplayName": q.quota_id,
                    "metricUnit": "1",
                    "quotaIncreaseEligibility": {"isEligible": True},
                    "dimensionsInfos": [],
                },
            )
            family = {"tpu_family": q.tpu_family} if q.tpu_family else {}
            for region in regions:
                value = self.limit(q, region)
                info["dimensionsInfos"].append(
                    {
                        "dimensions": {"region": region, **family},
                        "details": {"value": str(value)} if value else {},
                        "applicableLocations": [region],
                    }
                )
        return list(out.values())
