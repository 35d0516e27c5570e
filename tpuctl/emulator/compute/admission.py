"""What Compute Engine decides at a TPU VM's insert beyond its body's own rules: whether a
flex-start VM waits (and for how long), and which reservation it consumes. See
scheduling.py for what these mean and where the wordings come from."""

from __future__ import annotations

import re
from typing import Any

from tpuctl.emulator.compute import errors
from tpuctl.emulator.compute.group_models import Reservation
from tpuctl.emulator.compute.models import Instance
from tpuctl.emulator.core.state import State

DEFAULT_WAIT = 7200.0  # requestValidForDuration when none is given
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
AFFINITIES = ("ANY_RESERVATION", "SPECIFIC_RESERVATION", "NO_RESERVATION")


def flex(body: dict[str, Any]) -> bool:
    return (body.get("scheduling") or {}).get("provisioningModel") == "FLEX_START"


def wait_seconds(body: dict[str, Any]) -> float:
    """How long a flex-start insert may wait: `params.requestValidForDuration`."""
    limit = (body.get("params") or {}).get("requestValidForDuration")
    if limit is None:
        return DEFAULT_WAIT
    seconds = str(limit.get("seconds") or "") if isinstance(limit, dict) else ""
    if not seconds.isdigit():
        raise errors.invalid_value(
            "resource.params.requestValidForDuration.seconds", seconds, "Must be a number."
        )
    return float(seconds)


def hold(state: State, instance: Instance, until: float | None) -> None:
    """Leave a flex-start VM PENDING (no capacity now): until `until`, or as long as its
    group waits (None)."""
    instance.status, instance.transition = "PENDING", None
    instance.started = instance.deadline = None
    instance.capacity_error, instance.pending_until = None, until
    state.changed()


def set_reservation(state: State, body: dict[str, Any]) -> dict[str, Any]:
    """Control plane: make (or change; count 0 removes) a reservation."""
    from tpuctl.emulator.compute import catalog, rules
    from tpuctl.emulator.core import errors as core_errors

    try:
        zone, name = str(body["zone"]), rules.check_name(body["name"], "name")
        machine, count = str(body["machineType"]), int(body.get("count", 1))
    except (KeyError, TypeError, ValueError, errors.ComputeError):
        raise core_errors.invalid_argument(
            "a reservation is {project?, zone, name, machineType, count, specific?}"
        ) from None
    if catalog.machine_type(zone, machine) is None or count < 0:
        raise core_errors.invalid_argument(
            f"no machine type {machine} in zone {zone}, or count < 0"
        )
    project = str(body.get("project") or state.defaults["project"])
    found = Reservation(project, zone, name, machine, count, bool(body.get("specific")))
    if count == 0:
        state.compute.reservations.pop(found.path, None)
    else:
        state.compute.reservations[found.path] = found
    state.changed()
    return {**found.__dict__, "path": found.path, "inUse": in_use(state, found)}


def in_use(state: State, reservation: Reservation) -> int:
    return sum(1 for i in state.compute.instances.values() if i.reservation == reservation.path)


def consume(state: State, instance: Instance, affinity: Any, field: str) -> None:
    """The reservation the VM consumes, by its `reservationAffinity` (field: its name in
    the request, for the refusal): set on the instance, or refused."""
    if affinity is None:
        affinity = {}
    if not isinstance(affinity, dict):
        raise errors.invalid_value(field, affinity, "")
    kind = affinity.get("consumeReservationType", "ANY_RESERVATION")
    if kind not in AFFINITIES:
        raise errors.invalid_value(f"{field}.consumeReservationType", kind, "")
    if kind == "NO_RESERVATION":
        return
    # "You can't consume a reservation to create ... Flex-start VMs, Spot VMs or
    # preemptible instances" (https://cloud.google.com/compute/docs/instances/reservations-consume)
    if instance.preemptible:
        if kind == "SPECIFIC_RESERVATION":
            raise errors.bad_request(  # the emulator's wording
                "Spot VMs, preemptible instances and flex-start VMs cannot consume a reservation."
            )
        return
    mine = [
        r
        for r in state.compute.reservations.values()
        if (r.project, r.zone, r.machine_type)
        == (instance.project, instance.zone, instance.machine_type)
    ]
    if kind == "ANY_RESERVATION":
        free = [r for r in mine if not r.specific_only and in_use(state, r) < r.count]
        instance.reservation = free[0].path if free else None
        return
    values = affinity.get("values") or []
    if affinity.get("key") != RESERVATION_KEY or len(values) != 1:
        raise errors.invalid_value(
            f"{field}.key", affinity.get("key"), f"Must be '{RESERVATION_KEY}' with one value."
        )
    wanted = str(values[0])
    match = re.fullmatch(r"(?:projects/([^/]+)/(?:zones/[^/]+/)?reservations/)?([^/]+)", wanted)
    project = (match.group(1) if match else None) or instance.project
    name = match.group(2) if match else wanted
    found = state.compute.reservations.get(
        f"projects/{project}/zones/{instance.zone}/reservations/{name}"
    )
    if found is None:
        raise errors.bad_request(
            f"Could not find the given reservation with the following name: {wanted}"
        )
    if found.machine_type != instance.machine_type:
        raise errors.bad_request(  # the emulator's wording
            f"The reservation '{found.path}' is for machine type {found.machine_type}, not "
            f"{instance.machine_type}."
        )
    if in_use(state, found) >= found.count:
        raise errors.bad_request(  # the emulator's wording
            f"The reservation '{found.path}' has no unused capacity: {found.count} of "
            f"{found.count} VMs in use."
        )
    instance.reservation = found.path
