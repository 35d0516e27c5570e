"""The emulator's table of Compute Engine's TPU quotas, which the Cloud Quotas API lists
under `compute.googleapis.com` and an instance's insert is checked against
(`compute.py`). Written from these public sources, not from tpuctl's own table, so that
a wrong fact in one is caught by the other (tests/emulator/test_quotas.py compares them):

- TPUs made through Compute Engine (and GKE) count against Compute Engine quota, a pool
  apart from the Cloud TPU API's (https://cloud.google.com/tpu/docs/consumption-options).
- Spot VMs, and flex-start VMs, use preemptible quota first
  (https://cloud.google.com/compute/docs/instances/provisioning-models).
- A quota-exceeded error carries a `quotaInfo` with `metricName`, `limitName` and
  `dimensions` (`QuotaExceededInfo` in google-cloud-compute's
  `google/cloud/compute_v1/types/compute.py`), and gcloud prints it as `Quota
  'TPUS_PER_TPU_FAMILY' exceeded. Limit: 0.0 in region ...`.
- The ids themselves come from a public third-party migration guide ("The unofficial
  TPU migration guide: Cloud TPU API to Compute Engine"): for v6e, on-demand
  `TPUS-PER-TPU-FAMILY-per-project-region` with dimensions `region` and `tpu_family`
  (`CT6E`), 0 chips in a region with no entry; spot and flex-start
  `PREEMPTIBLE-TPU-V6E-per-project-region`, 1536 chips in a region with no entry.

Rows marked inferred follow the v6e pattern for the other two generations Compute
Engine makes TPU VMs of (v5p, TPU7x; https://cloud.google.com/compute/docs/tpus/tpu-machines)
with no public page naming them; their new-project limits are 0. Every limit counts chips.
"""

from __future__ import annotations

from dataclasses import dataclass

SERVICE = "compute.googleapis.com"
PER_REGION = "-per-project-region"
GRANTED = 1024  # chips of each quota in the emulator's default ("granted") project


@dataclass(frozen=True)
class ComputeQuota:
    """One quota as the emulator enforces and lists it."""

    quota_id: str
    generation: str
    preemptible: bool
    tpu_family: str | None  # the on-demand quota's `tpu_family` dimension
    new_project: int  # the limit where a region has no entry, in a new project
    granted: int = GRANTED

    @property
    def key(self) -> str:
        """Its name in the emulator's config: `<id>` or `<id>/<tpu_family>`."""
        return self.quota_id + (f"/{self.tpu_family}" if self.tpu_family else "")

    @property
    def metric(self) -> str:
        """The metric a QUOTA_EXCEEDED error names: `TPUS_PER_TPU_FAMILY`, ..."""
        return self.quota_id[: -len(PER_REGION)].replace("-", "_")


# generation -> (the on-demand quota's tpu_family value, the preemptible quota's middle
# part, its new-project limit)
_ROWS: dict[str, tuple[str, str, int]] = {
    "v6e": ("CT6E", "V6E", 1536),  # the migration guide's
    "v5p": ("CT5P", "V5P", 0),  # inferred
    "tpu7x": ("TPU7X", "TPU7X", 0),  # inferred
}


def _quotas() -> tuple[ComputeQuota, ...]:
    on_demand = [
        ComputeQuota("TPUS-PER-TPU-FAMILY" + PER_REGION, gen, False, family, 0)
        for gen, (family, _, _) in _ROWS.items()
    ]
    spot = [
        ComputeQuota(f"PREEMPTIBLE-TPU-{middle}{PER_REGION}", gen, True, None, limit)
        for gen, (_, middle, limit) in _ROWS.items()
    ]
    return (*on_demand, *spot)


QUOTAS = _quotas()
BY_KEY = {q.key: q for q in QUOTAS}


def quota_for(generation: str, preemptible: bool) -> ComputeQuota | None:
    """What a VM of `generation` counts against: spot and flex-start VMs the preemptible
    quota, the others their family's."""
    found = [q for q in QUOTAS if (q.generation, q.preemptible) == (generation, preemptible)]
    return found[0] if found else None
