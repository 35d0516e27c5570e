"""TPU quota: limits (from the Cloud Quotas API) beside usage (from the project's nodes).

`report` builds what `tpuctl quota` shows; `check_create` stops a create that would
exceed a quota before the API is asked; `explain_refusal` turns the cloud's own quota
refusal into the same message. Which quota a node counts against, and how much of
it, is `tpuctl.catalog`'s table, the one the emulator enforces.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl import catalog
from tpuctl.errors import QuotaError, TpuctlError
from tpuctl.models import Node

if TYPE_CHECKING:
    from tpuctl.cloud.quota import QuotaApi, QuotaInfo, QuotaRequest
    from tpuctl.cloud.tpu import TpuApi
    from tpuctl.config import Target

log = logging.getLogger("tpuctl.quota")
CHECK_PATIENCE = 10.0  # seconds of retries a pre-create check may spend; it never blocks
_REFUSAL = re.compile(
    r"Quota(?: limit)? '(?P<id>[^']+)'.*?Limit:? (?P<limit>\d+) in (?P<dim>region|zone) "
    r"(?P<where>[a-z0-9-]+)"
)


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


def node_usage(node: Node) -> Usage | None:
    """The quota a node holds, if any (a node being deleted, or reserved, holds none)."""
    acc = catalog.parse_accelerator(node.accelerator_type)
    if acc is None or node.state in catalog.QUOTA_FREE_STATES:
        return None
    scheduling = catalog.scheduling_name(node.spot, node.preemptible, node.reserved)
    spec = catalog.quota_for(acc, scheduling)
    if spec is None:
        return None
    return Usage(node, spec, spec.location(node.zone), spec.amount(acc))


def project_usage(tpu: TpuApi, project: str) -> list[Usage]:
    """What the project's nodes, in every zone, hold (one list call).

    Queued resources hold quota too once provisioning; tpuctl does not make them yet.
    When it does, their usage belongs here, beside the nodes'.
    """
    nodes = sorted(tpu.list_nodes(f"projects/{project}/locations/-"), key=lambda n: n.name)
    return [u for u in map(node_usage, nodes) if u is not None]


@dataclass
class QuotaRow:
    """One quota in one region or zone: its limit (None: unknown) and who uses it."""

    region: str
    spec: catalog.QuotaSpec
    location: str
    limit: int | None
    usage: list[Usage] = field(default_factory=list)

    @property
    def in_use(self) -> int:
        return sum(u.amount for u in self.usage)

    @property
    def headroom(self) -> int | None:
        return None if self.limit is None else self.limit - self.in_use

    @property
    def shown(self) -> bool:
        """In the table: used, or with quota where the family is offered (zeros are summed
        up apart; quota where no zone offers the family is no use to anyone)."""
        return bool(self.usage) or bool(self.limit and _offered(self.spec.family, self.location))

    @property
    def relevant(self) -> bool:
        """Used, or where the family is offered (even at zero: that is worth knowing)."""
        return bool(self.usage) or _offered(self.spec.family, self.location)

    def to_json(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "family": self.spec.family,
            "scheduling": scheduling_label(self.spec),
            "location": self.location,
            "dimension": self.spec.dimension,
            "quotaId": self.spec.quota_id,
            "metric": self.spec.metric,
            "unit": self.spec.unit,
            "limit": self.limit,
            "inUse": self.in_use,
            "headroom": self.headroom,
            "nodes": [u.node.name for u in self.usage],
        }


@dataclass
class QuotaReport:
    project: str
    regions: list[str]
    rows: list[QuotaRow]
    limits_error: TpuctlError | None = None  # the quotas API could not be read
    requests: list[QuotaRequest] = field(default_factory=list)  # increase requests filed

    def region_rows(self, region: str) -> list[QuotaRow]:
        return [r for r in self.rows if r.region == region]

    def zero_families(self, region: str) -> list[str]:
        """Families offered in the region with no quota there, e.g. "v6e" (both kinds
        at zero) or "v5p spot"; a family with quota somewhere in the region is left out."""
        rows = [r for r in self.region_rows(region) if _offered(r.spec.family, r.location)]
        out = []
        for family in catalog.QUOTA_FAMILIES:
            kinds = [
                scheduling_label(spec)
                for spec in catalog.QUOTAS
                if spec.family == family
                and (mine := [r for r in rows if r.spec == spec])
                and all(r.limit == 0 and not r.usage for r in mine)
            ]
            if len(kinds) == 2:
                out.append(family)
            elif kinds:
                out.append(f"{family} {kinds[0]}")
        return out

    def to_json(self) -> dict[str, Any]:
        error = self.limits_error
        return {
            "project": self.project,
            "regions": self.regions,
            "limitsAvailable": error is None,
            "limitsError": None
            if error is None
            else {"message": error.message, "hint": error.hint},
            "requestMore": request_url(self.project),
            "quotas": [r.to_json() for r in self.rows if r.relevant],
            "requests": [r.to_json() for r in self.requests],
        }


def _offered(family: str, location: str) -> bool:
    """Whether some accelerator of the family is offered in the region or zone."""
    zones = [location] if location in catalog.ZONES else catalog.zones_in(location)
    return any(
        catalog.quota_family(acc) == family for z in zones for acc in catalog.accelerator_types(z)
    )


def report(
    tpu: TpuApi,
    quotas: QuotaApi,
    project: str,
    *,
    region: str | None = None,
    zone: str | None = None,
) -> QuotaReport:
    """Limits, usage and headroom of every TPU quota in a region (of a zone), or everywhere.

    With a zone, zonal quotas are shown for that zone only; regional ones count the whole
    region, as the cloud does. When the limits cannot be read, usage is still reported.
    A zone tpuctl's catalog does not know is asked of the TPU API, which refuses an
    unknown one as it does for every other command.
    """
    if zone and zone not in catalog.ZONES:
        tpu.accelerator_types(f"projects/{project}/locations/{zone}")
    usages = project_usage(tpu, project)
    infos: dict[str, QuotaInfo] = {}
    error = None
    requests: list[QuotaRequest] = []
    try:
        infos = quotas.quota_infos(project)
    except TpuctlError as e:
        error = e
    if error is None:
        try:
            requests = quotas.requests(project)
        except TpuctlError as e:  # the limits are what matters; requests are a bonus
            log.debug("quota requests not shown: %s", e)
    if zone:
        regions = [catalog.region_of(zone)]
    elif region:
        regions = [region]
    else:
        regions = sorted(set(catalog.regions()) | {catalog.region_of(u.node.zone) for u in usages})
    rows = []
    for reg in regions:
        for spec in catalog.QUOTAS:
            for location in _locations(spec, reg, zone, usages):
                info = infos.get(spec.quota_id)
                used = [u for u in usages if u.spec == spec and u.location == location]
                rows.append(
                    QuotaRow(reg, spec, location, info.limit(location) if info else None, used)
                )
    if error is not None:
        rows = [r for r in rows if r.usage]  # without limits, only usage has anything to say
    return QuotaReport(project, regions, rows, error, requests)


def _locations(
    spec: catalog.QuotaSpec, region: str, zone: str | None, usages: list[Usage]
) -> list[str]:
    if spec.dimension == "region":
        return [region]
    if zone:
        return [zone]
    used = {
        u.location for u in usages if u.spec == spec and catalog.region_of(u.node.zone) == region
    }
    return sorted(set(catalog.zones_in(region)) | used)


# -- before and after a create ----------------------------------------------------------
def _kind(scheduling: str) -> str:
    return "spot" if scheduling == "spot" else scheduling


def _shortage(
    spec: catalog.QuotaSpec,
    location: str,
    limit: int,
    usages: list[Usage],
    acc: catalog.AcceleratorType,
    scheduling: str,
    target: Target,
    refused: bool,
    other_free: int | None = None,
) -> QuotaError:
    """The one message for a create that does not fit a quota, refused by us or the cloud.

    `other_free` is the headroom of the family's other quota (on-demand for spot, and
    the reverse) where the node would go, when known.
    """
    where = f"{spec.dimension} {location}"
    prefix = "quota exceeded" + (" (the cloud refused the create)" if refused else "")
    need = spec.amount(acc)
    if limit == 0 and not usages:
        message = (
            f"{prefix}: the project has no {spec.family} {_kind(scheduling)} quota in {where} "
            f"({spec.quota_id} is 0), and {acc.name} needs {need} {spec.unit}"
        )
    else:
        who = ", ".join(f"{u.node.name} {u.node.accelerator_type}" for u in usages[:4])
        who += f" and {len(usages) - 4} more" if len(usages) > 4 else ""
        used = sum(u.amount for u in usages)
        message = (
            f"{prefix}: {acc.name} ({_kind(scheduling)}) needs {need} {spec.unit} of "
            f"{spec.quota_id}, which allows {limit} in {where}; {used} in use"
            + (f" by {who}" if who else "")
        )
    todo = []
    ask = (
        f"`tpuctl quota request {spec.quota_id} --value {max(need, limit + need)} "
        f"--{spec.dimension} {location}`"
    )
    if limit < need:
        todo.append(
            f"ask for at least {need} {spec.unit} of {spec.quota_id} in {where} with {ask} "
            "(no node of this type fits the current limit, so deleting others cannot help)"
        )
    elif usages:
        first = usages[0].node
        todo.append(f"delete one (`tpuctl delete {first.name} --zone {first.zone}`)")
    switch = "create it on-demand" if spec.preemptible else "use --spot"
    if other_free is None:
        todo.append(f"{switch} (a separate quota)")
    elif other_free >= need:
        todo.append(f"{switch} ({other_free} {spec.unit} free in that quota here)")
    zones = [z for z in catalog.zones_offering(acc.generation) if spec.location(z) != location]
    elsewhere = list(dict.fromkeys(spec.location(z) for z in zones))
    if elsewhere:
        todo.append(
            f"try another {spec.dimension} with {acc.generation} ({', '.join(elsewhere[:3])})"
        )
    todo.append(f"see `tpuctl quota --zone {target.zone}`")
    if limit >= need:
        todo.append(f"request more with {ask}")
    return QuotaError(message, hint="; ".join(todo))


def _scoped(usages: list[Usage], spec: catalog.QuotaSpec, location: str) -> list[Usage]:
    return [u for u in usages if u.spec == spec and u.location == location]


def _limit(quotas: QuotaApi, project: str, spec: catalog.QuotaSpec, location: str) -> int | None:
    info = quotas.quota_info(project, spec.quota_id, patience=CHECK_PATIENCE)
    return info.limit(location)


def check_create(
    tpu: TpuApi, quotas: QuotaApi, target: Target, accelerator: str, scheduling: str
) -> None:
    """Raise QuotaError when creating `accelerator` in the target zone would exceed its quota.

    Never blocks on what it cannot know: when the limit cannot be read (API not enabled,
    no permission, offline), the create goes ahead and the reason is logged for --debug.
    """
    acc = catalog.parse_accelerator(accelerator)
    spec = catalog.quota_for(acc, scheduling) if acc else None
    if acc is None or spec is None:
        return
    location = spec.location(target.zone)
    try:
        limit = _limit(quotas, target.project, spec, location)
    except TpuctlError as e:
        log.debug("quota check skipped: cannot read %s: %s", spec.quota_id, e)
        return
    if limit is None:
        log.debug("quota check skipped: %s has no limit for %s", spec.quota_id, location)
        return
    everything = project_usage(tpu, target.project)
    usages = _scoped(everything, spec, location)
    if sum(u.amount for u in usages) + spec.amount(acc) <= limit:
        return
    other = catalog.quota_for(acc, "on-demand" if spec.preemptible else "spot")
    other_free = None
    if other is not None:
        try:
            other_limit = _limit(quotas, target.project, other, location)
        except TpuctlError:
            other_limit = None
        if other_limit is not None:
            other_free = other_limit - sum(u.amount for u in _scoped(everything, other, location))
    raise _shortage(spec, location, limit, usages, acc, scheduling, target, False, other_free)


def explain_refusal(
    error: QuotaError, tpu: TpuApi, target: Target, accelerator: str, scheduling: str
) -> QuotaError:
    """The cloud's quota refusal of a create, told like `check_create` tells it."""
    match = _REFUSAL.search(error.message)
    acc = catalog.parse_accelerator(accelerator)
    spec = catalog.QUOTAS_BY_ID.get(match["id"]) if match else None
    # A quota tpuctl does not know, or not the one it expected, is told in the cloud's words.
    if match is None or acc is None or spec is None or spec != catalog.quota_for(acc, scheduling):
        return QuotaError(
            f"quota exceeded (the cloud refused the create): "
            f"{error.message.removeprefix('quota exceeded: ')}",
            hint=f"see `tpuctl quota --zone {target.zone}`; delete a node, try --spot or another "
            f"region, or request more at {request_url(target.project)}",
        )
    location, limit = match["where"], int(match["limit"])
    try:
        usages = _scoped(project_usage(tpu, target.project), spec, location)
    except TpuctlError:
        usages = []
    return _shortage(spec, location, limit, usages, acc, scheduling, target, refused=True)


def headroom(
    tpu: TpuApi,
    quotas: QuotaApi | None,
    project: str,
    accelerator: str,
    scheduling: str,
    zones: list[str],
) -> dict[str, str]:
    """For each zone, one phrase on the quota a create of `accelerator` there would count
    against: how much of it is free, or why that cannot be read. Never raises a cloud
    error: it informs a choice, the create's own check decides."""
    acc = catalog.parse_accelerator(accelerator)
    spec = catalog.quota_for(acc, scheduling) if acc else None
    if acc is None or spec is None:
        return {z: "quota: not known for this type" for z in zones}
    if quotas is None:
        return {z: "quota: not readable here" for z in zones}
    try:
        usages = project_usage(tpu, project)
    except TpuctlError as e:
        return {z: f"quota: not readable (usage: {e})" for z in zones}
    out: dict[str, str] = {}
    for zone in zones:
        location = spec.location(zone)
        try:
            limit = _limit(quotas, project, spec, location)
        except TpuctlError as e:
            out[zone] = f"quota: not readable ({e})"
            continue
        if limit is None:
            out[zone] = f"quota: {spec.quota_id} has no limit for {location}"
            continue
        free = limit - sum(u.amount for u in _scoped(usages, spec, location))
        fits = "" if free >= spec.amount(acc) else f", {spec.amount(acc)} needed"
        out[zone] = (
            f"quota: {max(free, 0)} of {limit} {spec.unit} free in {spec.dimension} "
            f"{location} ({spec.quota_id}{fits})"
        )
    return out
