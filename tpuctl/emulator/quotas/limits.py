"""The Cloud Quotas subset tpuctl uses, TPU quota enforcement and capacity, all from config.

Limits come from the emulator's quota table (offerings/quotas.py) and its config:
`{"quotas": {"<quotaId>": {"*": default, "<region or zone>": limit}}}` (a number stands for
`{"*": number}`), or a preset name, "granted" (the default: a project granted TPU quota in
every family) or "new-project" (16 on-demand and 48 preemptible TensorCores of v2 and v3
per zone, everything else 0; a zone or region twin of a quota starts granted, so a new
project's limit is its primary quota's). `{"quotas_unlisted": [ids]}` leaves quotas out of
what the Cloud Quotas API returns (list and get), while creates still count against
them: a listing that lacks an id is what tpuctl must name rather than skip.
`{"capacity": {"<zone>": {"<generation>": chips}}}` caps what
the zone has left for all projects together (null lifts a cap), and `{"quotas_api":
"enabled" | "disabled" | "denied"}` makes the Cloud Quotas API answer 403 as a project
without the API enabled, or a caller without `cloudquotas.quotas.get`, would see.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from tpuctl.emulator.core import errors
from tpuctl.emulator.offerings import quotas as offered
from tpuctl.emulator.offerings import zones
from tpuctl.emulator.offerings.accelerators import GENERATIONS
from tpuctl.emulator.quotas import compute_table as compute_quotas
from tpuctl.emulator.quotas.compute import ComputeQuotaConfig
from tpuctl.emulator.tpu.models import Node, project_number
from tpuctl.emulator.tpu.rules import listing

PRESETS = ("granted", "new-project")
API_MODES = ("enabled", "disabled", "denied")
CONFIG_KEYS = {"quotas", "capacity", "quotas_api", "quotas_unlisted", "compute_quotas"}
_SERVICE = offered.SERVICE


def _preset(name: str) -> dict[str, dict[str, int]]:
    return {
        q.quota_id: {"*": q.granted if name == "granted" else q.new_project} for q in offered.QUOTAS
    }


def _quota_ids(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(v in offered.QUOTAS_BY_ID for v in value):
        raise errors.invalid_argument("quotas_unlisted must be a list of known quota ids")
    return sorted(set(value))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def node_scheduling(node: Node) -> str:
    sched = node.scheduling
    return offered.scheduling(
        bool(sched.get("spot")), bool(sched.get("preemptible")), bool(sched.get("reserved"))
    )


def _holds(node: Node) -> bool:
    """Whether a node holds quota and capacity (a doomed create holds neither)."""
    return node.state not in offered.FREE_STATES and not node.capacity_error


class QuotaConfig:
    """Limits, capacity and the quotas API switch; rendered into the emulator's config."""

    def __init__(self) -> None:
        self.limits = _preset("granted")
        self.capacity: dict[str, dict[str, int]] = {}
        self.api = "enabled"
        self.unlisted: list[str] = []
        self.compute = ComputeQuotaConfig()  # Compute Engine's TPU quotas (quotas/compute.py)

    # -- config ----------------------------------------------------------------
    def to_config(self) -> dict[str, Any]:
        return {
            "quotas": copy.deepcopy(self.limits),
            "capacity": copy.deepcopy(self.capacity),
            "quotas_api": self.api,
            "quotas_unlisted": list(self.unlisted),
            "compute_quotas": self.compute.to_config(),
        }

    def load(self, config: dict[str, Any]) -> None:
        self.limits.update(config.get("quotas") or {})
        self.capacity.update(config.get("capacity") or {})
        self.api = config.get("quotas_api") or self.api
        self.unlisted = list(config.get("quotas_unlisted") or self.unlisted)
        self.compute.load(config.get("compute_quotas"))

    def update(self, body: dict[str, Any]) -> None:
        """Apply the quota keys of a config update, all checked before any is applied."""
        limits = copy.deepcopy(self.limits)
        quotas = body.get("quotas")
        if isinstance(quotas, str):
            if quotas not in PRESETS:
                raise errors.invalid_argument(f"quotas preset must be one of {list(PRESETS)}")
            limits = _preset(quotas)
        elif quotas is not None:
            if not isinstance(quotas, dict):
                raise errors.invalid_argument("quotas must be a preset name or a map")
            for quota_id, value in quotas.items():
                if quota_id not in offered.QUOTAS_BY_ID:
                    raise errors.invalid_argument(f"unknown quota id '{quota_id}'")
                per_location = {"*": value} if not isinstance(value, dict) else value
                if not all(_count(v) for v in per_location.values()):
                    raise errors.invalid_argument(f"limits of '{quota_id}' must be counts >= 0")
                limits[quota_id].update(per_location)
        capacity = copy.deepcopy(self.capacity)
        for zone, caps in (body.get("capacity") or {}).items():
            if not isinstance(caps, dict):
                raise errors.invalid_argument(f"capacity of '{zone}' must map generations to chips")
            for generation, chips in caps.items():
                if generation not in GENERATIONS or not (chips is None or _count(chips)):
                    raise errors.invalid_argument(
                        f"capacity takes generations {list(GENERATIONS)} -> chips or null"
                    )
                zone_caps = capacity.setdefault(zone, {})
                if chips is None:
                    zone_caps.pop(generation, None)
                else:
                    zone_caps[generation] = chips
            if not capacity.get(zone):
                capacity.pop(zone, None)
        api = body.get("quotas_api", self.api)
        if api not in API_MODES:
            raise errors.invalid_argument(f"quotas_api must be one of {list(API_MODES)}")
        unlisted = self.unlisted
        if "quotas_unlisted" in body:
            unlisted = _quota_ids(body["quotas_unlisted"])
        compute = self.compute.checked(
            body.get("compute_quotas"), quotas if isinstance(quotas, str) else None
        )
        self.limits, self.capacity, self.api, self.unlisted = limits, capacity, api, unlisted
        self.compute.limits = compute

    def limit(self, quota_id: str, location: str) -> int:
        per_location = self.limits[quota_id]
        return per_location.get(location, per_location.get("*", 0))

    # -- enforcement -------------------------------------------------------------
    def admit(self, node: Node, nodes: Iterable[Node], held: int = 0) -> str | None:
        """Refuse a create over quota (429, as the cloud answers before creating anything);
        return the capacity error its operation will end with, or None. `held`: the
        zone's chips of the node's generation that Compute Engine instances hold (the
        zone's capacity is one pool for both APIs)."""
        acc, others = node.accelerator, [n for n in nodes if _holds(n)]
        violations = []
        # Every quota the node counts against, zone and region alike; the cloud names
        # each one exceeded, regions first (as public output shows).
        specs = offered.quotas_for(acc, node_scheduling(node))
        for spec in sorted(specs, key=lambda q: q.dimension != "region"):
            location = spec.location(node.zone)
            limit = self.limit(spec.quota_id, location)
            used = sum(
                spec.amount(n.accelerator)
                for n in others
                if n.project == node.project
                and spec in offered.quotas_for(n.accelerator, node_scheduling(n))
                and spec.location(n.zone) == location
            )
            if used + spec.amount(acc) > limit:
                violations.append((spec.quota_id, limit, spec.dimension, location))
        if violations:
            raise errors.quotas_exceeded(node.project, violations)
        cap = self.capacity.get(node.zone, {}).get(acc.generation)
        if cap is not None:
            # A stopped node has given its chips back (it keeps its quota): starting it
            # again needs capacity like a create.
            used = held + sum(
                n.accelerator.chips
                for n in others
                if n.zone == node.zone
                and n.accelerator.generation == acc.generation
                and n.state != "STOPPED"
            )
            if used + acc.chips > cap:
                return (
                    f'There is no more capacity in the zone "{node.zone}"; you can try in another '
                    "zone where Cloud TPU Nodes are offered (see "
                    f"https://cloud.google.com/tpu/docs/regions) {errors.eid()}"
                )
        return None

    # -- the Cloud Quotas API ------------------------------------------------------
    def _check_api(self, project: str, resource: str) -> None:
        if self.api == "disabled":
            raise errors.service_disabled(project, "cloudquotas.googleapis.com", "Cloud Quotas API")
        if self.api == "denied":
            raise errors.permission_denied(
                "cloudquotas.quotas.get", f"//cloudquotas.googleapis.com/{resource}"
            )

    def _info(self, project: str, spec: offered.QuotaSpec) -> dict[str, Any]:
        per_location = self.limits[spec.quota_id]
        default = per_location.get("*", 0)
        locations = sorted(zones.ZONES) if spec.dimension == "zone" else zones.regions()
        infos = [
            {
                "dimensions": {spec.dimension: location},
                "details": _details(value),
                "applicableLocations": [location],
            }
            for location, value in sorted(per_location.items())
            if location != "*" and value != default
        ]
        # The entry without dimensions is the default, listed last (least specific).
        infos.append({"details": _details(default), "applicableLocations": locations})
        parent = f"projects/{project_number(project)}/locations/global/services/{_SERVICE}"
        return {
            "name": f"{parent}/quotaInfos/{spec.quota_id}",
            "quotaId": spec.quota_id,
            "metric": spec.metric,
            "service": _SERVICE,
            "isPrecise": True,
            "containerType": "PROJECT",
            "dimensions": [spec.dimension],
            "metricDisplayName": spec.display_name.split(" per ")[0],
            "quotaDisplayName": spec.display_name,
            "metricUnit": "1",
            "quotaIncreaseEligibility": {"isEligible": True},
            "dimensionsInfos": infos,
        }

    def list_infos(
        self, project: str, service: str, page_size: int = 0, page_token: str = ""
    ) -> dict[str, Any]:
        self._check_api(project, f"projects/{project}/locations/global/services/{service}")
        if service == compute_quotas.SERVICE:
            infos = self.compute.infos(project_number(project), zones.regions())
            return listing("quotaInfos", infos, page_size, page_token, lambda i: i)
        specs = [q for q in offered.QUOTAS if q.quota_id not in self.unlisted]
        specs = specs if service == _SERVICE else []
        return listing("quotaInfos", specs, page_size, page_token, lambda s: self._info(project, s))

    def get_info(self, project: str, service: str, quota_id: str) -> dict[str, Any]:
        name = f"projects/{project}/locations/global/services/{service}/quotaInfos/{quota_id}"
        self._check_api(project, name)
        if service == compute_quotas.SERVICE:
            infos = self.compute.infos(project_number(project), zones.regions())
            found = next((i for i in infos if i["quotaId"] == quota_id), None)
            if found is None:
                raise errors.not_found(name)
            return found
        spec = offered.QUOTAS_BY_ID.get(quota_id)
        if spec is None or service != _SERVICE or quota_id in self.unlisted:
            raise errors.not_found(name)
        return self._info(project, spec)


def _details(value: int) -> dict[str, str]:
    # int64 travels as a JSON string, and a zero is left out, as proto3 JSON does.
    return {"value": str(value)} if value else {}
