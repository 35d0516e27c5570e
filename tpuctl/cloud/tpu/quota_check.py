"""TPU quota before and after a create: `check_create` stops a create that would exceed
a quota before the API is asked; `explain_refusal` turns the cloud's own quota refusal
into the same message; `headroom` is what `create --zone auto` ranks zones by. Limits
come from the Cloud Quotas API, usage from the project's nodes (quota.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpuctl import catalog
from tpuctl.cloud.tpu.usage import CHECK_PATIENCE, project_usage
from tpuctl.cloud.usage import Usage, log, request_url
from tpuctl.errors import NotFoundError, QuotaError, TpuctlError

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.config import Target


def _kind(scheduling: str) -> str:
    return "spot" if scheduling == "spot" else scheduling


def _shortage(
    spec: catalog.QuotaSpec,
    location: str,
    limit: int,
    usages: list[Usage],
    acc: catalog.SliceShape,
    scheduling: str,
    target: Target,
    refused: bool,
    other_free: int | None = None,
    count: int = 1,
) -> QuotaError:
    """The one message for a create that does not fit a quota, refused by us or the cloud.

    `other_free` is the headroom of the family's other quota (on-demand for spot, and
    the reverse) where the node would go, when known; `count`: the nodes asked for at
    once (a multislice's slices), every one counted.
    """
    where = f"{spec.dimension} {location}"
    prefix = "quota exceeded" + (" (the cloud refused the create)" if refused else "")
    need = spec.amount(acc) * count
    what = f"{count} x {acc.name}" if count > 1 else acc.name
    if limit == 0 and not usages:
        message = (
            f"{prefix}: the project has no {spec.family} {_kind(scheduling)} quota in {where} "
            f"({spec.quota_id} is 0), and {what} needs {need} {spec.unit}"
        )
    else:
        who = ", ".join(f"{u.node.name} {u.node.accelerator_type}" for u in usages[:4])
        who += f" and {len(usages) - 4} more" if len(usages) > 4 else ""
        used = sum(u.amount for u in usages)
        message = (
            f"{prefix}: {what} ({_kind(scheduling)}) needs {need} {spec.unit} of "
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
            f"ask for at least {need} {spec.unit} of {spec.quota_id} in {where} with {ask}"
            + (
                f" (the {count} slices do not fit the current limit together, so deleting "
                "others cannot help)"
                if count > 1
                else " (no node of this type fits the current limit, so deleting others "
                "cannot help)"
            )
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


def _free(limit: Limit, usages: list[Usage], acc: catalog.SliceShape, count: int = 1) -> int | None:
    """Headroom left after a create of `count` nodes of `acc` (negative: they do not fit)."""
    if limit.value is None:
        return None
    used = sum(u.amount for u in _scoped(usages, limit.spec, limit.location))
    return limit.value - used - limit.spec.amount(acc) * count


def check_create(
    tpu: TpuBackend,
    quotas: QuotaApi,
    target: Target,
    acc: catalog.SliceShape,
    scheduling: str,
    count: int = 1,
) -> None:
    """Raise QuotaError when creating `count` nodes of `acc` (a multislice's slices) in
    the target zone would exceed one of their quotas, zonal or regional; the tightest is
    the one named.

    Never blocks on what it cannot know: when the limits cannot be read (API not enabled,
    no permission, offline), the create goes ahead and the reason is logged for --debug.
    A single quota whose limit the API does not give is named in a warning, and the
    create is checked against the others.
    """
    specs = catalog.quotas_for(acc, scheduling)
    if not specs:
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
    frees = [
        (free, lim) for lim in known if (free := _free(lim, everything, acc, count)) is not None
    ]
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
        other_frees = [_free(lim, everything, acc, count) for lim in other_limits]
        if other_frees and None not in other_frees:
            other_free = min(f for f in other_frees if f is not None)
            other_free += tight.spec.amount(acc) * count
    usages = _scoped(everything, tight.spec, tight.location)
    assert tight.value is not None
    raise _shortage(
        tight.spec,
        tight.location,
        tight.value,
        usages,
        acc,
        scheduling,
        target,
        False,
        other_free,
        count,
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
    error: QuotaError, tpu: TpuBackend, target: Target, acc: catalog.SliceShape, scheduling: str
) -> QuotaError:
    """The cloud's quota refusal of a create, told like `check_create` tells it."""
    expected = catalog.quotas_for(acc, scheduling)
    refused = [
        (catalog.QUOTAS_BY_ID[quota_id], limit, where)
        for quota_id, limit, where in refused_quotas(error.message)
        if quota_id in catalog.QUOTAS_BY_ID
    ]
    refused = [r for r in refused if r[0] in expected]
    # A quota tpuctl does not know, or not one it expected, is told in the cloud's words.
    if not refused:
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
    tpu: TpuBackend,
    quotas: QuotaApi | None,
    project: str,
    acc: catalog.SliceShape,
    scheduling: str,
    zones: list[str],
) -> dict[str, str]:
    """For each zone, one phrase on the tightest quota a create of `acc` there
    would count against: how much of it is free, or why that cannot be read. Never raises
    a cloud error: it informs a choice, the create's own check decides."""
    specs = catalog.quotas_for(acc, scheduling)
    if not specs:
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
