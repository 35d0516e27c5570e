"""Compute Engine's `instances`, `zoneOperations`, `machineTypes` and `images` methods,
as functions over the emulator's `State` (`state.compute` holds the instances); how
their operations run their course is `transitions.py`'s.

Each function is one API method: it checks the request (`rules`), changes the state and
answers model objects, which `front.py` renders. The caller (the facade) holds the lock
and has applied the transitions that were due (`tick`).
"""

from __future__ import annotations

import copy
from typing import Any

from tpuctl.emulator.compute import admission, catalog, changes, errors, rules, transitions
from tpuctl.emulator.compute.catalog import MachineType
from tpuctl.emulator.compute.models import ALLOWED_FROM, Instance, ZoneOperation
from tpuctl.emulator.core.state import State
from tpuctl.emulator.tpu.models import project_number
from tpuctl.emulator.tpu.rules import page


# -- instances -------------------------------------------------------------------------
def insert(
    state: State, project: str, zone: str, body: dict[str, Any], source: str = ""
) -> ZoneOperation:
    rules.check_zone(zone, project)
    body = changes.from_template(state, project, zone, body, source)
    name = rules.check_name(body.get("name"))
    mtype = rules.machine_type(zone, body.get("machineType"))
    scheduling = rules.check_scheduling(body.get("scheduling"))
    labels = rules.check_labels(body.get("labels"))
    metadata = rules.check_metadata(body.get("metadata"))
    path = f"projects/{project}/zones/{zone}/instances/{name}"
    if path in state.compute.instances:
        raise errors.already_exists(path)
    kept = copy.deepcopy(body)
    kept.update(scheduling=scheduling, metadata=metadata)
    for account in kept.get("serviceAccounts") or []:
        if isinstance(account, dict) and account.get("email") == "default":
            # Compute answers the default account by its email
            account["email"] = f"{project_number(project)}-compute@developer.gserviceaccount.com"
    (address,) = state.allocator.allocate(1)
    instance = Instance(
        project,
        zone,
        name,
        mtype.name,
        mtype.generation,
        mtype.chips,
        kept,
        state.now(),
        address,
        labels=labels,
    )
    admission.consume(
        state, instance, body.get("reservationAffinity"), "resource.reservationAffinity"
    )
    instance.quota_error = transitions.quota_error(state, instance)
    instance.capacity_error = (
        None if instance.quota_error else transitions._capacity_error(state, instance)
    )
    state.compute.instances[path] = instance
    if instance.capacity_error and admission.flex(kept):  # it waits for capacity
        op = ZoneOperation.new(instance, "insert", state.now())
        transitions._keep(state, op)
        admission.hold(state, instance, state.now() + admission.wait_seconds(kept))
        return op
    return transitions._begin(state, instance, "create", "insert")


def _find(store: dict[str, Any], zone: str, path: str) -> Any:
    """The instance or operation at `path`, in a zone that must exist."""
    rules.check_zone(zone, path.split("/")[1])
    if path not in store:
        raise errors.not_found(path)
    return store[path]


def get(state: State, project: str, zone: str, name: str) -> Instance:
    path = f"projects/{project}/zones/{zone}/instances/{name}"
    instance: Instance = _find(state.compute.instances, zone, path)
    return instance


def _listed(state: State, project: str, zones: list[str], filter_: str) -> list[Instance]:
    terms = rules.parse_filter(filter_)
    now = state.now()
    found = [
        i
        for i in state.compute.instances.values()
        if i.project == project
        and i.zone in zones
        and rules.matches(
            {
                "name": i.name,
                "labels": i.labels,
                "status": i.shown_status(now),
                "zone": i.zone,
                "machineType": i.machine_type,
            },
            terms,
        )
    ]
    return sorted(found, key=lambda i: (i.zone, i.name))


def list_page(
    state: State, project: str, zone: str, filter_: str, max_results: str, token: str
) -> tuple[list[Instance], str | None]:
    rules.check_zone(zone, project)
    return page(_listed(state, project, [zone], filter_), _max(max_results), token)


def aggregated(state: State, project: str, filter_: str) -> dict[str, list[Instance]]:
    """`aggregated/instances`: every zone's instances, by zone (empty zones too)."""
    instances = _listed(state, project, catalog.zones(), filter_)
    return {zone: [i for i in instances if i.zone == zone] for zone in catalog.zones()}


def _max(text: str) -> int:
    try:
        value = int(text or 500)
    except ValueError:
        raise errors.invalid_value("maxResults", text, "Must be a number.") from None
    if not 0 <= value <= 500:
        raise errors.invalid_value("maxResults", text, "Must be between 0 and 500.")
    return value


def delete(state: State, project: str, zone: str, name: str) -> ZoneOperation:
    instance = get(state, project, zone, name)
    instance.capacity_error = None
    return transitions._begin(state, instance, "delete", "delete")


def power(state: State, project: str, zone: str, name: str, verb: str) -> ZoneOperation:
    """`stop` or `start`. Compute Engine's API offers both for any instance; whether a TPU
    machine type may be stopped is not documented (contributing/emulator-fidelity.md): single-host
    instances are allowed here. A start needs the zone's capacity again."""
    instance = get(state, project, zone, name)
    status = instance.shown_status(state.now())
    if status not in ALLOWED_FROM[verb]:
        if (verb, status) in (("stop", "TERMINATED"), ("start", "RUNNING")):
            return _noop(state, instance, verb)  # nothing to do: DONE at once, as Compute does
        raise errors.not_ready(instance.path)
    if verb == "start":
        instance.capacity_error = transitions._capacity_error(state, instance)
        instance.preempted_at = None  # a new run: no preemption notice
    return transitions._begin(state, instance, verb, verb)


def _noop(state: State, instance: Instance, verb: str) -> ZoneOperation:
    """A stop of a stopped instance: Compute answers an operation that is DONE at once."""
    op = ZoneOperation.new(instance, verb, state.now())
    op.succeed(state.now())
    transitions._keep(state, op)
    return op


def set_labels(
    state: State, project: str, zone: str, name: str, body: dict[str, Any]
) -> ZoneOperation:
    instance = get(state, project, zone, name)
    if body.get("labelFingerprint") != instance.label_fingerprint:
        raise errors.fingerprint_mismatch()
    instance.labels = rules.check_labels(body.get("labels"), "labels")
    return _noop(state, instance, "setLabels")


def set_metadata(
    state: State, project: str, zone: str, name: str, body: dict[str, Any]
) -> ZoneOperation:
    """`setMetadata`: the whole metadata, guarded by its fingerprint (412 when stale; the
    wording is from memory of Compute's output, contributing/emulator-fidelity.md)."""
    instance = get(state, project, zone, name)
    if body.get("fingerprint") != instance.metadata_fingerprint:
        raise errors.ComputeError(
            412,
            "conditionNotMet",
            "Supplied fingerprint does not match current metadata fingerprint.",
            location="If-Match",
            locationType="header",
        )
    instance.body["metadata"] = rules.check_metadata({"items": body.get("items") or []})
    return _noop(state, instance, "setMetadata")


def guest_attributes(
    state: State, project: str, zone: str, name: str, query_path: str
) -> tuple[Instance, list[dict[str, str]]]:
    """`getGuestAttributes?queryPath=hostkeys/`: the host keys the guest published, once it
    has (the guest agent writes them after boot), and only with `enable-guest-attributes`
    TRUE in the instance's metadata or the project's."""
    instance = get(state, project, zone, name)
    project_md = state.project_metadata.get(project, {})
    enabled = instance.metadata_value("enable-guest-attributes")
    if enabled is None:
        enabled = project_md.get("enable-guest-attributes")
    published = instance.hostkeys_at is not None and state.now() >= instance.hostkeys_at
    # the keys its SSH server has (workers/ssh.py); a key of its own where none serves
    items = [dict(i) for i in instance.published] or [
        {"namespace": "hostkeys", "key": "ssh-ed25519", "value": instance.host_key}
    ]
    if (
        str(enabled).upper() != "TRUE"
        or not published
        or query_path not in ("hostkeys/", "hostkeys")
    ):
        # gcloud's ssh_utils.py reads this sentence as "no host keys"
        raise errors.not_found_kind(query_path or "/", "Guest Attribute")
    return instance, items


# -- operations -----------------------------------------------------------------------
def get_operation(state: State, project: str, zone: str, name: str) -> ZoneOperation:
    path = f"projects/{project}/zones/{zone}/operations/{name}"
    op: ZoneOperation = _find(state.compute.operations, zone, path)
    return op


# -- machine types and images ------------------------------------------------------------
def get_machine_type(state: State, project: str, zone: str, name: str) -> MachineType:
    rules.check_zone(zone, project)
    found = catalog.machine_type(zone, name)
    if found is None:
        raise errors.not_found(f"projects/{project}/zones/{zone}/machineTypes/{name}")
    return found


def list_machine_types(
    state: State, project: str, zone: str, filter_: str, max_results: str, token: str
) -> tuple[list[MachineType], str | None]:
    rules.check_zone(zone, project)
    terms = rules.parse_filter(filter_)
    found = [m for m in catalog.machine_types(zone) if rules.matches({"name": m.name}, terms)]
    return page(found, _max(max_results), token)


def image(project: str, name: str, family: bool) -> str:
    """The image `name` (or the one family `name` points at) of `project`."""
    images = catalog.IMAGES if project == catalog.IMAGE_PROJECT else {}
    found = images.get(name) if family else name if name in images.values() else None
    if found is None:
        kind = "images/family" if family else "images"
        raise errors.not_found(f"projects/{project}/global/{kind}/{name}")
    return found


def all_instances(state: State) -> list[dict[str, str]]:
    """Every instance, as the control plane lists them: path and status."""
    now = state.now()
    return [
        {
            "name": i.path,
            "status": i.shown_status(now),
            "machineType": i.machine_type,
            "networkIP": i.address,
        }
        for i in sorted(state.compute.instances.values(), key=lambda i: i.path)
    ]
