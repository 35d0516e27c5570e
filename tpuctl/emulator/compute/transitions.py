"""How a Compute Engine VM's operations run their course in the emulator's `State`:
`tick` applies the transitions that are due (a create, start or stop completes; a run
that reached its maxRunDuration ends), each operation begun and kept (`_begin`,
`_keep`: the done ones, and the requestIds a retry is known by), and what a create meets
on its way: the zone's free chips, shared with the TPU API's nodes (`free_chips`), no
capacity (`STOCKOUT`) or no quota (`quota_error`). The API's methods are `api.py`'s."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.compute.models import Instance, ZoneOperation
from tpuctl.emulator.core.state import State
from tpuctl.emulator.quotas import compute_table as compute_quotas

MAX_DONE_OPERATIONS = 500


# how long a retry with the same requestId is recognised: at least 60 minutes after the
# first request (instances.insert's reference,
# https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert)
REQUEST_IDS_KEPT = 3600.0


# An operation that failed for capacity: its code and message (Compute's resource-
# availability troubleshooting page), and the HTTP status gcloud prints (UNCONFIRMED)
STOCKOUT = "ZONE_RESOURCE_POOL_EXHAUSTED"


STOCKOUT_HTTP = (503, "SERVICE UNAVAILABLE")


QUOTA_HTTP = (403, "FORBIDDEN")  # as gcloud reports a quota refusal (UNCONFIRMED)


def quota_error(state: State, instance: Instance) -> dict[str, Any] | None:
    """The QUOTA_EXCEEDED a VM's create ends with, or None (quotas/compute.py)."""
    quota = compute_quotas.quota_for(instance.generation, instance.preemptible)
    region = instance.zone.rsplit("-", 1)[0]
    used = state.compute.quota_in_use(instance)
    return state.quota.compute.exceeded(quota, region, used, instance.chips)


def _stockout(project: str, zone: str) -> str:
    return (
        f"The zone 'projects/{project}/zones/{zone}' does not have enough resources available "
        "to fulfill the request.  Try a different zone, or try again later."
    )


# -- transitions ---------------------------------------------------------------------
def tick(state: State, now: float) -> None:
    """Complete every instance transition that is due, as of when it was due; end the
    instances whose run duration is over."""
    for instance in list(state.compute.instances.values()):
        if instance.due(now):
            _complete(state, instance, instance.deadline or now)
        ends = instance.ends_at()
        if ends is not None and now >= ends and instance.transition is None:
            _end_run(state, instance, now)


def _end_run(state: State, instance: Instance, now: float) -> None:
    """`maxRunDuration` is over: Compute Engine itself stops or deletes the VM, as its
    `instanceTerminationAction` says (STOP unless asked; the instance limits page,
    https://cloud.google.com/compute/docs/instances/limit-vm-runtime)."""
    action = instance.body["scheduling"].get("instanceTerminationAction", "STOP")
    verb = "delete" if action == "DELETE" else "stop"
    instance.begin(verb, now, state.durations.get(verb))
    if instance.due(now):
        _complete(state, instance, now)
    state.changed()


def advance(state: State, path: str | None) -> list[str]:
    """Complete the transition of one instance (`path`) or of all, now (control plane);
    one RUNNING instance whose guest has not published its host keys yet publishes them."""
    now = state.now()
    targets = [state.compute.instances[path]] if path else list(state.compute.instances.values())
    done = [i.path for i in targets if i.transition is not None or (path and _booting(i, now))]
    for instance in targets:
        if instance.transition is not None:
            _complete(state, instance, now)
        elif path and _booting(instance, now):
            instance.hostkeys_at = now
            state.changed()
        elif path and instance.ends_at() is not None:  # one instance: its run ends now
            done.append(instance.path)
            _end_run(state, instance, now)
    return done


def _booting(instance: Instance, now: float) -> bool:
    """RUNNING, its guest's host keys not published yet (the `hostkeys` duration)."""
    at = instance.hostkeys_at
    return instance.status == "RUNNING" and at is not None and at > now


def _complete(state: State, instance: Instance, now: float) -> None:
    verb = instance.transition
    pending = [
        op for op in state.compute.operations.values() if not op.done and op.target == instance.path
    ]
    if verb == "create" and instance.quota_error:
        error = dict(instance.quota_error)
        for op in pending:
            op.fail(now, error.pop("code"), error.pop("message"), QUOTA_HTTP, **error)
            error = dict(instance.quota_error)
        del state.compute.instances[instance.path]
        state.changed()
        return
    if verb in ("create", "start") and instance.capacity_error:
        for op in pending:
            op.fail(now, STOCKOUT, instance.capacity_error, STOCKOUT_HTTP)
        if verb == "create":
            del state.compute.instances[instance.path]
        else:
            instance.transition = instance.started = instance.deadline = None
            instance.capacity_error = None
        state.changed()
        return
    if instance.finish():
        del state.compute.instances[instance.path]
    elif instance.status == "RUNNING":
        instance.last_start = now
        instance.hostkeys_at = now + (state.durations.get("hostkeys") or 0.0)
    elif instance.status == "TERMINATED":
        instance.last_stop, instance.hostkeys_at = now, None
    for op in pending:
        op.succeed(now)
    state.changed()


def _begin(state: State, instance: Instance, verb: str, op_type: str) -> ZoneOperation:
    now = state.now()
    instance.begin(verb, now, state.durations.get(verb))
    op = ZoneOperation.new(instance, op_type, now)
    _keep(state, op)
    if instance.due(now):
        _complete(state, instance, now)
    return op


def _keep(state: State, op: ZoneOperation) -> None:
    """Keep `op`, and the last MAX_DONE_OPERATIONS done ones (and those a `requestId`
    made in the last REQUEST_IDS_KEPT seconds, which a retry may ask for again)."""
    ops = state.compute.operations
    ops[op.path] = op
    recent = state.now() - REQUEST_IDS_KEPT
    done = sorted(
        (o for o in ops.values() if o.done and not (o.request_id and o.inserted > recent)),
        key=lambda o: o.inserted,
    )
    for old in done[: max(0, len(done) - MAX_DONE_OPERATIONS)]:
        del ops[old.path]
    state.changed()


# -- capacity: the zone's chips per generation, shared with the TPU API's nodes ----------
def free_chips(state: State, zone: str, generation: str, but: Instance | None = None) -> int | None:
    """The chips of `generation` the zone has free (None: no limit set)."""
    cap = state.quota.capacity.get(zone, {}).get(generation)
    if cap is None:
        return None
    used = sum(
        n.accelerator.chips
        for n in state.nodes.values()
        if n.zone == zone
        and n.accelerator.generation == generation
        and n.state != "STOPPED"
        and not n.capacity_error
    ) + state.compute.chips_in_use(zone, generation, but=but)
    return int(cap) - used


def _capacity_error(state: State, instance: Instance) -> str | None:
    """The stockout a VM's create or start meets, or None (a VM that consumes a
    reservation needs no free capacity)."""
    if instance.reservation is not None:
        return None
    free = free_chips(state, instance.zone, instance.generation, but=instance)
    return (
        _stockout(instance.project, instance.zone)
        if free is not None and free < instance.chips
        else None
    )
