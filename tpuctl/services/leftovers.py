"""gc's part that has no node to go by: what creates or deletes that did not finish left
of slices an API makes of several resources (`TpuBackend.leftovers`; on Compute Engine a
template or a policy with no managed instance group, a group with no VM,
`cloud/compute/leftovers.py`).

Safety rules, as gc's for nodes:
- only resources with the name and the description tpuctl gave them are found at all;
- a leftover whose template says `managed-by` is not tpuctl, or `tpuctl-keep=true`, stays;
- by default only the current user's (`tpuctl-owner` of its template, which carries the
  VMs' labels, or where the template is gone the owner its policy's description names);
  a policy whose description names none (an older tpuctl's) goes only with `--all-owners`;
- a leftover younger than `GRACE` (by the `creationTimestamp` of its youngest part) may be
  a create still under way, between its policy and its group, and stays. On the Cloud TPU
  API a create in progress is a node in CREATING, which gc never collects; here it is a
  policy and a template alone for as long as the create takes to ask for the group, and
  its age is the only sign a gc on another machine can read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpuctl.durations import format_duration
from tpuctl.errors import NotFoundError, ServiceDisabledError, TpuctlError
from tpuctl.leftover import Leftover
from tpuctl.models import KEEP, MANAGED_BY, MANAGED_BY_VALUE, OWNER, Node

if TYPE_CHECKING:
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.ssh import SshApi
    from tpuctl.services.idle import Busy, IdleProbe
    from tpuctl.services.names import Owner

GRACE = 15 * 60.0  # a create from its policy to its group takes seconds; retries, minutes


@dataclass
class LeftoverDecision:
    leftover: Leftover
    reason: str
    delete: bool
    backend: TpuBackend

    @property
    def label(self) -> str:
        """How a line names it: the slice, the zone and the parts."""
        lo = self.leftover
        return f"{lo.slice} ({lo.zone}, {lo.describe()})"


def decide(
    lo: Leftover, api: TpuBackend, *, owner: Owner | None, now: float, grace: float = GRACE
) -> LeftoverDecision | None:
    """What gc does with one leftover; None when it is none of gc's business."""
    labels = lo.labels
    if labels and labels.get(MANAGED_BY) != MANAGED_BY_VALUE:
        return None
    if owner is not None and labels and not owner.owns(labels.get(OWNER)):
        return None
    if labels.get(KEEP) == "true":
        return LeftoverDecision(lo, "kept (tpuctl-keep=true)", False, api)
    if owner is not None and not labels:
        why = (
            "its owner is unknown (its workload policy's description names none): "
            "--all-owners collects it"
        )
        return LeftoverDecision(lo, why, False, api)
    age = None if lo.newest is None else now - lo.newest
    if age is None or age < grace:
        shown = "of unknown age" if age is None else f"made {format_duration(max(0.0, age))} ago"
        why = (
            f"{lo.why}, but {shown}: may be a create under way "
            f"(collected once {format_duration(grace)} old)"
        )
        return LeftoverDecision(lo, why, False, api)
    return LeftoverDecision(
        lo, f"orphaned: {lo.why}; costs nothing, clutters the project", True, api
    )


def plan(
    backends: Sequence[TpuBackend], parent: str, *, owner: Owner | None, now: float
) -> tuple[list[LeftoverDecision], list[str]]:
    """The decisions on every leftover of the backends that have leftovers, and why a
    backend could not be looked at (a project with Compute Engine off has none)."""
    decisions: list[LeftoverDecision] = []
    skipped: list[str] = []
    for api in backends:
        try:
            found = api.leftovers(parent)
        except ServiceDisabledError:
            continue
        except TpuctlError as e:
            skipped.append(f"could not look for leftovers on {api.kind.called}: {e}")
            continue
        for lo in found:
            d = decide(lo, api, owner=owner, now=now)
            if d is not None:
                decisions.append(d)
    decisions.sort(key=lambda d: (not d.delete, d.leftover.zone, d.leftover.slice))
    return decisions, skipped


def collect(
    doomed: list[LeftoverDecision], *, project: str, log: Path
) -> list[tuple[LeftoverDecision, str]]:
    """Delete each doomed leftover (its group, then its template, then its policy), once
    read again: one that changed since gc looked (a part made again, a VM appeared: a
    create under way) is left alone. One audit line each. Returns each decision with its
    result: `deleted`, `skipped: why` or `failed: why`."""
    from tpuctl.services.audit import AuditEntry
    from tpuctl.services.audit import append as audit

    out: list[tuple[LeftoverDecision, str]] = []
    now: dict[int, dict[str, Leftover] | str] = {}  # per API: its leftovers now, or why not
    for d in doomed:
        lo = d.leftover
        if id(d.backend) not in now:
            try:
                fresh = d.backend.leftovers(f"projects/{project}/locations/-")
                now[id(d.backend)] = {f.full_name: f for f in fresh}
            except TpuctlError as e:
                now[id(d.backend)] = str(e)
        seen = now[id(d.backend)]
        result = "deleted"
        if isinstance(seen, str):
            result = f"failed: could not look at it again before deleting: {seen}"
        elif lo.full_name not in seen:
            result = "skipped: no longer a leftover (gone, or a slice again) since gc looked"
        elif seen[lo.full_name].parts != lo.parts:
            result = "skipped: it changed since gc looked"
        else:
            try:
                d.backend.delete_node(lo.full_name)
            except NotFoundError:
                result = "deleted (gone already)"
            except TpuctlError as e:
                result = f"failed: {e}"
        out.append((d, result))
        audit(
            log,
            AuditEntry(
                project=project,
                kind="computeLeftovers",
                name=lo.slice,
                zone=lo.zone,
                accelerator="",
                reason=f"{d.reason} ({lo.describe()})",
                hourly=None,
                result=result,
            ),
        )
    return out


def to_json(d: LeftoverDecision, result: str | None = None) -> dict[str, Any]:
    lo = d.leftover
    return {
        "name": lo.slice,
        "zone": lo.zone,
        "kind": "computeLeftovers",
        "parts": [{"kind": p.kind, "name": p.name} for p in lo.parts],
        "reason": d.reason,
        "action": "delete" if d.delete else "keep",
        "deleted": bool(result and result.startswith("deleted")),
        "result": result,
    }


def probe_by_api(backends: Sequence[TpuBackend], ssh: Callable[[], SshApi]) -> IdleProbe:
    """gc's SSH probe of a node through the API that holds it (made when first needed)."""
    from tpuctl.cloud import registry
    from tpuctl.services.idle import ssh_probe

    made: dict[int, IdleProbe] = {}

    def probe(node: Node) -> tuple[Busy, str]:
        backend = registry.holder(backends, node)
        if id(backend) not in made:
            made[id(backend)] = ssh_probe(backend, ssh())
        return made[id(backend)](node)

    return probe
