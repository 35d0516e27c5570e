"""Compute Engine's `instances`, `zoneOperations`, `machineTypes` and `images` methods,
as functions over the emulator's `State` (`state.compute` holds the instances).

Each function is one API method: it checks the request (`rules`), changes the state and
answers model objects, which `front.py` renders. The caller (the facade) holds the lock
and has applied the transitions that were due (`tick`).
"""

from __future__ import annotations

import copy
from typing import Any

from tpuctl.emulator.compute import admission, catalog, changes, errors, rules
from tpuctl.emulator.compute.catalog import MachineType
from tpuctl.emulator.compute.models import ALLOWED_FROM, Instance, ZoneOperation
from tpuctl.emulator.core.state import State
from tpuctl.emulator.quotas import compute_table as compute_quotas
from tpuctl.emulator.tpu.models import project_number
from tpuctl.emulator.tpu.rules import page

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
    instance.quota_error = quota_error(state, instance)
    instance.capacity_error = None if instance.quota_error else _capacity_error(state, instance)
    state.compute.instances[path] = instance
    if instance.capacity_error and admission.flex(kept):  # it waits for capacity
        op = ZoneOperation.new(instance, "insert", state.now())
        _keep(state, op)
        admission.hold(state, instance, state.now() + admission.wait_seconds(kept))
        return op
    return _begin(state, instance, "create", "insert")


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
    return _begin(state, instance, "delete", "delete")


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
        instance.capacity_error = _capacity_error(state, instance)
        instance.preempted_at = None  # a new run: no preemption notice
    return _begin(state, instance, verb, verb)


def _noop(state: State, instance: Instance, verb: str) -> ZoneOperation:
    """A stop of a stopped instance: Compute answers an operation that is DONE at once."""
    op = ZoneOperation.new(instance, verb, state.now())
    op.succeed(state.now())
    _keep(state, op)
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
