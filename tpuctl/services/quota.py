"""TPU quota: limits (from the Cloud Quotas API) beside usage (from the project's nodes).

`report` builds what `tpuctl quota` shows; the Cloud TPU API's check
(`cloud/tpu/quota_check.py`) uses the same usage before and after a create. Which
quota a node counts against, and how much of it, is `tpuctl.catalog`'s table, the one
the emulator enforces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl import catalog
from tpuctl.cloud.usage import (  # noqa: F401  (re-exported: quota's one vocabulary)
    Usage,
    log,
    request_url,
    scheduling_label,
)
from tpuctl.errors import TpuctlError

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.quota import QuotaApi, QuotaInfo, QuotaRequest


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
    tpu: TpuBackend,
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
    usages = tpu.quota_usage(project)
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


@dataclass(frozen=True)
class Filed:
    """A quota request as filed, with the limit it was filed against."""

    request: QuotaRequest
    current: int | None  # the limit before the request (None: the quota named none)


def file_request(
    quotas: QuotaApi,
    project: str,
    spec: catalog.QuotaSpec,
    location: str,
    value: int,
    *,
    justification: str,
    email: str,
    allow_decrease: bool = False,
) -> Filed:
    """File a quota preference of `value`, read against the current limit first.

    A preference sets the limit, whatever it was: one below the current limit lowers the
    quota. Increases are reviewed; a decrease needs no review (Cloud Quotas' own safety
    checks, QuotaSafetyCheck, refuse only one below usage or by more than 10 percent:
    https://cloud.google.com/docs/quotas/reference/rest/v1beta/QuotaSafetyCheck). So a
    decrease is refused here (a UsageError showing both values) unless `allow_decrease`."""
    from tpuctl.errors import NotFoundError, UsageError

    try:
        current = quotas.quota_info(project, spec.quota_id).limit(location)
    except NotFoundError:
        current = None
    where = f"{spec.dimension} {location}"
    if current is not None and value < current and not allow_decrease:
        raise UsageError(
            f"--value {value} is below the current limit of {spec.quota_id} in {where} "
            f"({current} {spec.unit}): the request would lower the quota to {value}",
            hint=f"ask for more than {current}, or pass --allow-decrease to lower it",
        )
    made = quotas.request_increase(
        project, spec.quota_id, value, spec.dimension, location, justification, email
    )
    return Filed(made, current)
