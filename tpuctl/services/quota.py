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
from tpuctl.errors import NotFoundError, QuotaError, TpuctlError
from tpuctl.models import Node

if TYPE_CHECKING:
    from tpuctl.cloud.quota import QuotaApi, QuotaInfo, QuotaRequest
    from tpuctl.cloud.tpu import TpuApi
    from tpuctl.config import Target

log = logging.getLogger("tpuctl.quota")
CHECK_PATIENCE = 10.0  # seconds of retries a pre-create check may spend; it never blocks


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


def node_usages(node: Node) -> list[Usage]:
    """The quotas a node holds, zone and region alike (a node being deleted, or reserved,
    holds none)."""
    acc = catalog.parse_accelerator(node.accelerator_type)
    if acc is None or node.state in catalog.QUOTA_FREE_STATES:
        return []
    scheduling = catalog.scheduling_name(node.spot, node.preemptible, node.reserved)
    return [
        Usage(node, spec, spec.location(node.zone), spec.amount(acc))
        for spec in catalog.quotas_for(acc, scheduling)
    ]


def project_usage(tpu: TpuApi, project: str) -> list[Usage]:
    """What the project's nodes, in every zone, hold (one list call).

    Queued resources hold quota too once provisioning; tpuctl does not make them yet.
    When it does, their usage belongs here, beside the nodes'.
    """
    nodes = sorted(tpu.list_nodes(f"projects/{project}/locations/-"), key=lambda n: n.name)
    return [u for node in nodes for u in node_usages(node)]


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
        """In the table: used, or with quota (or an unknown limit) where the family is
        offered (zeros are summed up apart; quota where no zone offers the family is no
        use to anyone)."""
        offered = _offered(self.spec.family, self.location)
        return bool(self.usage) or (offered and (self.limit is None or self.limit > 0))

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
    missing: list[str] = field(default_factory=list)  # ids the quotas API returned nothing for

    def region_rows(self, region: str) -> list[QuotaRow]:
        return [r for r in self.rows if r.region == region]

    def _zero_kinds(self, region: str) -> list[tuple[str, bool]]:
        """(family, preemptible) offered in the region with no quota there: one of its
        quotas (the regional one, or the zonal one in every zone) is zero and unused, and
        the tightest quota wins."""
        rows = [r for r in self.region_rows(region) if _offered(r.spec.family, r.location)]
        out = []
        for family in catalog.QUOTA_FAMILIES:
            for preemptible in (False, True):
                specs = [
                    q for q in catalog.QUOTAS if q.family == family and q.preemptible == preemptible
                ]
                if any(
                    (mine := [r for r in rows if r.spec == spec])
                    and all(r.limit == 0 and not r.usage for r in mine)
                    for spec in specs
                ):
                    out.append((family, preemptible))
        return out

    def shown_rows(self, region: str) -> list[QuotaRow]:
        """The table's rows: `QuotaRow.shown`, less the twins of a quota at zero."""
        zero = self._zero_kinds(region)
        return [
            r
            for r in self.region_rows(region)
            if r.shown and (r.usage or (r.spec.family, r.spec.preemptible) not in zero)
        ]

    def zero_families(self, region: str) -> list[str]:
        """Families offered in the region with no quota there, e.g. "v6e" (both kinds
        at zero) or "v5p spot"."""
        zero = self._zero_kinds(region)
        out = []
        for family in catalog.QUOTA_FAMILIES:
            kinds = [p for f, p in zero if f == family]
            if len(kinds) == 2:
                out.append(family)
            elif kinds:
                out.append(f"{family} {'spot' if kinds[0] else 'on-demand'}")
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
            "limitsMissing": self.missing,
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
    missing: list[str] = []
    if error is not None:
        rows = [r for r in rows if r.usage]  # without limits, only usage has anything to say
    else:
        # A quota the API does not return is named, not skipped: its limit is unknown.
        missing = [q.quota_id for q in catalog.QUOTAS if q.quota_id not in infos]
    return QuotaReport(project, regions, rows, error, requests, missing)


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


@dataclass(frozen=True)
class Limit:
    """One quota's limit where a node would go; None when it cannot be read."""

    spec: catalog.QuotaSpec
    location: str
    value: int | None

    @property
    def unreadable(self) -> str:
        return (
            f"the Cloud Quotas API gives no limit for {self.spec.quota_id} in "
            f"{self.spec.dimension} {self.location}"
        )


def _limits(
    quotas: QuotaApi, project: str, specs: tuple[catalog.QuotaSpec, ...], zone: str
) -> list[Limit]:
    """The limits of `specs` for a node in `zone`. A quota the API does not know (404)
    or has no value for there is a Limit without value; any other failure (API off, no
    permission, offline) is raised: it says nothing about one quota but about them all."""
    out = []
    for spec in specs:
        location = spec.location(zone)
        try:
            value = _limit(quotas, project, spec, location)
        except NotFoundError:
            value = None
        out.append(Limit(spec, location, value))
    return out


def _free(limit: Limit, usages: list[Usage], acc: catalog.AcceleratorType) -> int | None:
    """Headroom left after a create of `acc` (negative: it does not fit)."""
    if limit.value is None:
        return None
    used = sum(u.amount for u in _scoped(usages, limit.spec, limit.location))
    return limit.value - used - limit.spec.amount(acc)


def check_create(
    tpu: TpuApi, quotas: QuotaApi, target: Target, accelerator: str, scheduling: str
) -> None:
    """Raise QuotaError when creating `accelerator` in the target zone would exceed one of
    its quotas, zonal or regional; the tightest is the one named.

    Never blocks on what it cannot know: when the limits cannot be read (API not enabled,
    no permission, offline), the create goes ahead and the reason is logged for --debug.
    A single quota whose limit the API does not give is named in a warning, and the
    create is checked against the others.
    """
    acc = catalog.parse_accelerator(accelerator)
    specs = catalog.quotas_for(acc, scheduling) if acc else ()
    if acc is None or not specs:
        return
    try:
        limits = _limits(quotas, target.project, specs, target.zone)
    except TpuctlError as e:
        log.debug("quota check skipped: cannot read %s: %s", specs[0].quota_id, e)
        return
    for limit in limits:
        if limit.value is None:
            log.warning("warning: %s; the create is not checked against it", limit.unreadable)
    known = [lim for lim in limits if lim.value is not None]
    if not known:
        return
    everything = project_usage(tpu, target.project)
    frees = [(free, lim) for lim in known if (free := _free(lim, everything, acc)) is not None]
    worst, tight = min(frees, key=lambda pair: pair[0])
    if worst >= 0:
        return
    other_free = None
    others = catalog.quotas_for(acc, "on-demand" if tight.spec.preemptible else "spot")
    if others:
        try:
            other_limits = _limits(quotas, target.project, others, target.zone)
        except TpuctlError:
            other_limits = []
        other_frees = [_free(lim, everything, acc) for lim in other_limits]
        if other_frees and None not in other_frees:
            other_free = min(f for f in other_frees if f is not None) + tight.spec.amount(acc)
    usages = _scoped(everything, tight.spec, tight.location)
    assert tight.value is not None
    raise _shortage(
        tight.spec, tight.location, tight.value, usages, acc, scheduling, target, False, other_free
    )


_REFUSAL = re.compile(
    r"Quota(?: limit)? '(?P<ids>[^']+)'.*?Limit:? (?P<limits>[\d,]+) in "
    r"(?P<scopes>(?:region|zone) [a-z0-9-]+(?:,(?:region|zone) [a-z0-9-]+)*)"
)


def refused_quotas(message: str) -> list[tuple[str, int, str]]:
    """(quota id, limit, region or zone) of each quota a 429 names; the cloud joins several
    with commas: `Quota limit 'A,B' has been exceeded. Limit: 0,0 in region R,zone Z.`"""
    match = _REFUSAL.search(message)
    if match is None:
        return []
    ids, limits = match["ids"].split(","), match["limits"].split(",")
    wheres = [scope.split(" ", 1)[1] for scope in match["scopes"].split(",")]
    if not len(ids) == len(limits) == len(wheres):
        return []
    return [(i, int(n), w) for i, n, w in zip(ids, limits, wheres, strict=True)]


def explain_refusal(
    error: QuotaError, tpu: TpuApi, target: Target, accelerator: str, scheduling: str
) -> QuotaError:
    """The cloud's quota refusal of a create, told like `check_create` tells it."""
    acc = catalog.parse_accelerator(accelerator)
    expected = catalog.quotas_for(acc, scheduling) if acc else ()
    refused = [
        (catalog.QUOTAS_BY_ID[quota_id], limit, where)
        for quota_id, limit, where in refused_quotas(error.message)
        if quota_id in catalog.QUOTAS_BY_ID
    ]
    refused = [r for r in refused if r[0] in expected]
    # A quota tpuctl does not know, or not one it expected, is told in the cloud's words.
    if acc is None or not refused:
        return QuotaError(
            f"quota exceeded (the cloud refused the create): "
            f"{error.message.removeprefix('quota exceeded: ')}",
            hint=f"see `tpuctl quota --zone {target.zone}`; delete a node, try --spot or another "
            f"region, or request more at {request_url(target.project)}",
        )
    spec, limit, location = refused[0]
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
    """For each zone, one phrase on the tightest quota a create of `accelerator` there
    would count against: how much of it is free, or why that cannot be read. Never raises
    a cloud error: it informs a choice, the create's own check decides."""
    acc = catalog.parse_accelerator(accelerator)
    specs = catalog.quotas_for(acc, scheduling) if acc else ()
    if acc is None or not specs:
        return {z: "quota: not known for this type" for z in zones}
    if quotas is None:
        return {z: "quota: not readable here" for z in zones}
    try:
        usages = project_usage(tpu, project)
    except TpuctlError as e:
        return {z: f"quota: not readable (usage: {e})" for z in zones}
    out: dict[str, str] = {}
    for zone in zones:
        try:
            limits = _limits(quotas, project, specs, zone)
        except TpuctlError as e:
            out[zone] = f"quota: not readable ({e})"
            continue
        known = [lim for lim in limits if lim.value is not None]
        missing = [lim.spec.quota_id for lim in limits if lim.value is None]
        if not known:
            out[zone] = f"quota: {', '.join(missing)} has no limit for this zone"
            continue
        need = specs[0].amount(acc)
        frees = [
            (free + need, lim) for lim in known if (free := _free(lim, usages, acc)) is not None
        ]
        free, tight = min(frees, key=lambda pair: pair[0])
        assert tight.value is not None
        fits = "" if free >= need else f", {need} needed"
        unknown = f"; no limit for {', '.join(missing)}" if missing else ""
        out[zone] = (
            f"quota: {max(free, 0)} of {tight.value} {tight.spec.unit} free in "
            f"{tight.spec.dimension} {tight.location} ({tight.spec.quota_id}{fits}){unknown}"
        )
    return out
