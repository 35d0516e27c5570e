"""Compute Engine's TPU quotas: a pool of their own, apart from the Cloud TPU API's
(https://cloud.google.com/tpu/docs/consumption-options: GKE and Compute Engine TPUs use
Compute Engine quota). The emulator's own table, kept apart from the client's
(`tpuctl/cloud/compute/quotas.py`) so that a wrong fact in one is caught by the other.

What a public (third-party) migration guide shows of a v6e project: the on-demand quota
`TPUS-PER-TPU-FAMILY-per-project-region` with the dimensions `region` and `tpu_family`
(`CT6E` for v6e), which a region without an entry reads as 0, and the spot and flex-start
quota `PREEMPTIBLE-TPU-V6E-per-project-region` (1536 chips where the region has no entry).
The family values for v5p and TPU7x and their
preemptible ids are inferred from that pattern (`seen` False), and every quota counts
chips, as the machine types bring them. Spot and flex-start VMs count against the
preemptible quota.
"""

from __future__ import annotations

from dataclasses import dataclass

SERVICE = "compute.googleapis.com"
FAMILY = "TPUS-PER-TPU-FAMILY-per-project-region"


@dataclass(frozen=True)
class ComputeQuota:
    quota_id: str
    generation: str  # v6e, v5p, tpu7x
    preemptible: bool
    tpu_family: str | None  # the `tpu_family` dimension (on-demand), else None
    new_project: int  # chips a region has where it has no entry
    granted: int = 1024  # in the emulator's default project, which has been granted quota
    seen: bool = False

    @property
    def key(self) -> str:
        """How the emulator's config names it: the id, with `/FAMILY` for the family quota."""
        return f"{self.quota_id}/{self.tpu_family}" if self.tpu_family else self.quota_id

    @property
    def metric(self) -> str:
        """What Compute's QUOTA_EXCEEDED calls it: `TPUS_PER_TPU_FAMILY`, `PREEMPTIBLE_TPU_V6E`."""
        return self.quota_id.removesuffix("-per-project-region").replace("-", "_")

    def label(self) -> str:
        kind = "spot/flex-start" if self.preemptible else "on-demand"
        family = f" ({self.tpu_family})" if self.tpu_family else ""
        return f"{self.generation} {kind}: {self.quota_id}{family}"


QUOTAS: tuple[ComputeQuota, ...] = (
    ComputeQuota(FAMILY, "v6e", False, "CT6E", 0, seen=True),
    ComputeQuota(FAMILY, "v5p", False, "CT5P", 0),
    ComputeQuota(FAMILY, "tpu7x", False, "TPU7X", 0),
    ComputeQuota("PREEMPTIBLE-TPU-V6E-per-project-region", "v6e", True, None, 1536, seen=True),
    ComputeQuota("PREEMPTIBLE-TPU-V5P-per-project-region", "v5p", True, None, 0),
    ComputeQuota("PREEMPTIBLE-TPU-TPU7X-per-project-region", "tpu7x", True, None, 0),
)
BY_KEY = {q.key: q for q in QUOTAS}


def quota_for(generation: str, preemptible: bool) -> ComputeQuota | None:
    """The quota a VM of `generation` counts against (spot and flex-start: preemptible)."""
    return next(
        (q for q in QUOTAS if q.generation == generation and q.preemptible == preemptible), None
    )
