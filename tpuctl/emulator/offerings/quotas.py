"""The TPU quotas the emulated Cloud Quotas API serves and enforces (service
tpu.googleapis.com): per quota family and scheduling, per region and (for most families)
per zone too, the tightest refusing.

From the Cloud TPU quota page (https://cloud.google.com/tpu/docs/quota): a new project has
16 on-demand and 48 preemptible TensorCores of v2-8/v3-8 and 0 of the rest; v2 and v3 pods
and v4 and v5p count TensorCores or chips as listed; spot and preemptible nodes count
against the preemptible quotas, reserved nodes against their reservation (not here). Quota
ids follow the pattern Google's quota pages and public outputs show
(`TPUV6EPreemptiblePerProjectPerRegionForTPUAPI`; docs/quota.md gives each id's source).
"""

from __future__ import annotations

from dataclasses import dataclass

from tpuctl.emulator.offerings.accelerators import AcceleratorType
from tpuctl.emulator.offerings.zones import region_of

SERVICE = "tpu.googleapis.com"
# Node states that no longer hold quota (the delete has been accepted).
FREE_STATES = frozenset({"DELETING"})


@dataclass(frozen=True)
class QuotaSpec:
    """One TPU quota. A family's quota may exist per region and per zone at once; the
    `primary` one comes first, its twin in the other dimension after."""

    quota_id: str
    family: str
    preemptible: bool
    metric: str
    unit: str  # "chips" or "cores" (TensorCores)
    dimension: str  # "region" or "zone"
    new_project: int  # the limit a new project starts with
    granted: int  # the limit of the emulator's default project, granted quota
    primary: bool

    def amount(self, acc: AcceleratorType) -> int:
        """What one `acc` slice takes of this quota: its chips, or its TensorCores."""
        return {"chips": acc.chips, "cores": acc.cores}[self.unit]

    def location(self, zone: str) -> str:
        """Where the limit a node in `zone` counts against is set: the zone, or its region."""
        return {"zone": zone, "region": region_of(zone)}[self.dimension]

    @property
    def display_name(self) -> str:
        """E.g. `TPU v6e preemptible chips per project per zone`."""
        scheduling = ["preemptible"] if self.preemptible else []
        words = ["TPU", self.family, *scheduling, self.unit, "per project per", self.dimension]
        return " ".join(words)


@dataclass(frozen=True)
class _Family:
    unit: str
    metric: str  # after `tpu.googleapis.com/`; `-preemptible` added for the preemptible
    stem: str  # of the quota ids: TPU{stem}[Preemptible]{kind}PerProjectPer{Dim}ForTPUAPI
    kind: str
    dimensions: tuple[str, ...]  # the primary's first
    limits: tuple[int, int, int, int]  # on-demand new, granted; preemptible new, granted


_REGION_ZONE, _ZONE = ("region", "zone"), ("zone",)
_FAMILIES: dict[str, _Family] = {
    "v2": _Family("cores", "tpu-v2", "V2s", "", _ZONE, (16, 128, 48, 1024)),
    "v2 pod": _Family("cores", "tpu-v2-pod", "V2s", "Pod", _REGION_ZONE, (0, 512, 0, 2048)),
    "v3": _Family("cores", "tpu-v3", "V3s", "", _ZONE, (16, 128, 48, 1024)),
    "v3 pod": _Family("cores", "tpu-v3-pod", "V3s", "Pod", _REGION_ZONE, (0, 512, 0, 2048)),
    "v4": _Family("chips", "tpu-v4", "V4s", "Pod", _REGION_ZONE, (0, 512, 0, 2048)),
    "v5e": _Family("chips", "tpu-v5s-litepod", "V5s", "Litepod", _REGION_ZONE, (0, 256, 0, 1024)),
    "v5e serving": _Family(
        "chips", "tpu-v5s-litepod-serving", "V5s", "LitepodServing", _ZONE, (0, 64, 0, 256)
    ),
    "v5p": _Family("cores", "tpu-v5p", "V5P", "", ("zone", "region"), (0, 1024, 0, 4096)),
    "v6e": _Family("chips", "tpu-v6e", "V6E", "", _REGION_ZONE, (0, 256, 0, 1024)),
}


def _specs(name: str, family: _Family) -> list[QuotaSpec]:
    out = []
    for dimension in family.dimensions:
        primary = dimension == family.dimensions[0]
        for preemptible in (False, True):
            new, granted = family.limits[2:] if preemptible else family.limits[:2]
            kind = "Preemptible" if preemptible else ""
            quota_id = (
                f"TPU{family.stem}{kind}{family.kind}PerProjectPer{dimension.title()}ForTPUAPI"
            )
            metric = f"{SERVICE}/{family.metric}" + ("-preemptible" if preemptible else "")
            limit = new if primary else granted
            out.append(
                QuotaSpec(
                    quota_id,
                    name,
                    preemptible,
                    metric,
                    family.unit,
                    dimension,
                    limit,
                    granted,
                    primary,
                )
            )
    return out


QUOTAS: tuple[QuotaSpec, ...] = tuple(q for n, f in _FAMILIES.items() for q in _specs(n, f))
QUOTAS_BY_ID: dict[str, QuotaSpec] = {q.quota_id: q for q in QUOTAS}


def quota_family(acc: AcceleratorType) -> str:
    """The family a slice counts against: v2 and v3 single devices (`-8`) apart from their
    pods; single-host v5e against the v5e serving quota, larger v5e slices against v5e."""
    if acc.generation in ("v2", "v3"):
        return acc.generation if acc.cores == 8 else f"{acc.generation} pod"
    if acc.generation == "v5e" and not acc.multi_host:
        return "v5e serving"
    return acc.generation


def scheduling(spot: bool, preemptible: bool, reserved: bool) -> str:
    """A node's scheduling as quota sees it: reserved, spot, preemptible or on-demand."""
    if reserved:
        return "reserved"
    return "spot" if spot else "preemptible" if preemptible else "on-demand"


def quotas_for(acc: AcceleratorType, how: str) -> tuple[QuotaSpec, ...]:
    """Every quota a create of `acc` scheduled `how` counts against, primary first
    (reserved capacity is counted by its reservation: none)."""
    wanted = (quota_family(acc), how in ("spot", "preemptible"))
    primary = [q for q in QUOTAS if (q.family, q.preemptible) == wanted and q.primary]
    twins = [q for q in QUOTAS if (q.family, q.preemptible) == wanted and not q.primary]
    return () if how == "reserved" else (*primary, *twins)
