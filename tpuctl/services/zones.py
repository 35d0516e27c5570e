"""Zone failover: of the zones asked for (`--zone a,b`, `zones = [...]`), which offer the
accelerator, what each costs and how much quota it has left, and the loop that moves on
to the next zone when one has no capacity or no quota left.

Only a `QuotaError` (no capacity, or a quota used up: `NoCapacityError` is one) moves
on; any other error ends the loop at once, since another zone would not fix a bad name
or missing credentials. With one zone the loop is a plain call: its error is raised as
it is, so a single-zone command behaves as it always did.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from tpuctl import catalog

# the services are imported where used: `check_known` runs before every command's calls
from tpuctl.errors import (
    CloudError,
    ConfigError,
    NoCapacityError,
    NotFoundError,
    QuotaError,
    TpuctlError,
    UsageError,
)

if TYPE_CHECKING:
    from tpuctl.catalog import SliceShape
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.config import Target

T = TypeVar("T")


def check_known(target: Target, offered: Callable[[], list[str]]) -> None:
    """Refuse a zone of `target` that no Cloud TPU location has, naming it and the
    nearest zone that does: a UsageError (exit 2) when --zone gave it, else a
    ConfigError naming where it came from.

    The catalogue's zones pass without a call; any other is looked up in the TPU API's
    Locations list (`offered`, called once), which has the zones the catalogue may lack.
    When that list cannot be read, the zone is left to the calls that use it: their
    error says what was wrong (a 403 "Permission denied on 'locations/Z' (or it may not
    exist)" is what the TPU API answers for an unknown zone)."""
    unknown = [z for z in target.candidates if z != "-" and z not in catalog.ZONES]
    if not unknown:
        return
    try:
        known = set(offered()) | set(catalog.ZONES)
    except TpuctlError:
        return
    for zone in unknown:
        if zone not in known:
            raise _unknown_zone(zone, sorted(known), target.zone_source.split(" (", 1)[0])


def _unknown_zone(zone: str, known: list[str], source: str) -> TpuctlError:
    region = catalog.region_of(zone)
    same_region = [z for z in known if catalog.region_of(z) == region]
    if same_region:  # the region's zone most like it; of equals, the first
        nearest = [max(same_region, key=lambda z: difflib.SequenceMatcher(None, zone, z).ratio())]
    else:
        nearest = difflib.get_close_matches(zone, known, n=1, cutoff=0.6)
    message = f"unknown zone {zone!r}" + (f" (from {source})" if source != "--zone" else "")
    message += ": no Cloud TPU zone has that name" + (
        f"; did you mean {nearest[0]}?" if nearest else ""
    )
    hint = (
        f"the zones of {region}: {', '.join(same_region)}"
        if same_region
        else "`gcloud compute tpus locations list` lists the zones"
    )
    if source == "--zone":
        return UsageError(message, hint=hint)
    return ConfigError(message, hint=hint)


@dataclass
class ZoneView:
    """One candidate zone as the user sees it before the first create."""

    zone: str
    price: float | None = None  # USD per hour of the slice, list price
    quota: str = ""  # "quota: 96 of 128 cores free in zone ..." or why it is not readable
    dropped: str = ""  # why the zone cannot be used at all, "" when it can

    def line(self) -> str:
        from tpuctl.services import cost

        if self.dropped:
            return f"zone {self.zone} dropped: {self.dropped}"
        return f"  {self.zone}: about {cost.money(self.price, per_hour=True)}; {self.quota}"


def survey(
    tpu: TpuBackend, quotas: QuotaApi | None, target: Target, shape: SliceShape, spot: bool
) -> list[ZoneView]:
    """Every candidate zone of `target`, in order: dropped (with the reason) where the
    accelerator is not offered or the zone cannot be asked, else its price and quota."""
    from tpuctl.services import cost, nodes

    views: list[ZoneView] = []
    for zone in target.candidates:
        view = ZoneView(zone)
        try:
            nodes.check_accelerator(tpu, target.in_zone(zone), shape)
        except (UsageError, CloudError, NotFoundError) as e:  # not offered; an unknown zone
            view.dropped = e.message
        views.append(view)
    usable = [v.zone for v in views if not v.dropped]
    scheduling = catalog.scheduling_name(spot)
    rooms = tpu.headroom(quotas, target.project, shape, scheduling, usable)  # its own pool
    for view in views:
        if not view.dropped:
            view.price = cost.hourly(shape, spot, view.zone)
            view.quota = rooms[view.zone]
    return views


def usable(views: list[ZoneView], accelerator: str) -> list[str]:
    """The zones left after `survey`; a UsageError (exit 2) when none is."""
    left = [v.zone for v in views if not v.dropped]
    if left:
        return left
    reasons = "; ".join(f"{v.zone}: {v.dropped}" for v in views)
    raise UsageError(
        f"none of the zones asked for can create {accelerator}: {reasons}",
        hint='pick zones that offer it (`tpuctl quota` and docs/run.md, "Zone failover")',
    )


class ZonesExhausted(QuotaError):
    """Every zone was tried and each refused for capacity or quota (exit 5)."""

    def __init__(self, what: str, reasons: dict[str, TpuctlError]) -> None:
        listed = "; ".join(f"{zone}: {e.message}" for zone, e in reasons.items())
        super().__init__(
            f"no zone could take {what}: {listed}",
            hint="add zones to the list, try --spot (a separate quota), or --queued to wait "
            "for capacity",
        )
        self.reasons = reasons

    @property
    def no_capacity(self) -> bool:
        """Some zone only lacked capacity right now: trying again later may work."""
        return any(isinstance(e, NoCapacityError) for e in self.reasons.values())


def failover(
    zones: Sequence[str],
    attempt: Callable[[str], T],
    abandon: Callable[[str], None],
    say: Callable[[str], None],
    what: str,
) -> T:
    """`attempt(zone)` for each zone in turn until one returns; after a QuotaError,
    `abandon(zone)` cleans up what the attempt left there and the next zone is tried,
    `say`ing why. Every zone refused: a ZonesExhausted naming each and why (one zone:
    its own error, as it is)."""
    reasons: dict[str, TpuctlError] = {}
    for i, zone in enumerate(zones):
        try:
            return attempt(zone)
        except QuotaError as e:
            if len(zones) == 1:
                raise
            abandon(zone)
            reasons[zone] = e
            if i + 1 < len(zones):
                say(f"zone {zone} skipped: {e.message}")
    raise ZonesExhausted(what, reasons)


def clear(tpu: TpuBackend, target: Target, name: str, queued_request: bool = False) -> None:
    """After a create refused in `target`'s zone: delete what it may have left there (the
    node, its queued request), waiting until it is gone, so the next zone starts clean."""
    from tpuctl.services import nodes, queued

    if queued_request:
        queued.delete_request(tpu, queued.qr_name(target, name))
    try:
        node = tpu.get_node(f"{target.parent}/nodes/{name}")
    except NotFoundError:
        return
    result = nodes.delete_nodes(tpu, [node])[0]
    if not result.ok and result.error is not None:
        raise result.error
