"""A node's create: `validate_create` checks everything the API would refuse and fills
in defaults; `prepare` adds tpuctl's labels and the startup script of the node's
watchdog and guard (tpuctl/startup.py); `create_node` asks for it. Waiting for, changing
and deleting nodes is services/nodes.py's, with the checks a job file's node asks too."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from tpuctl import interrupts
from tpuctl.errors import (
    AlreadyExistsError,
    ConfigError,
    NotFoundError,
    QuotaError,
    UsageError,
)
from tpuctl.models import (
    COST_DEADLINE,
    CREATED,
    EXPIRES,
    IDLE_TIMEOUT,
    MANAGED_BY,
    MANAGED_BY_VALUE,
    MAX_COST,
    OWNER,
    START_DEADLINE,
    CreateSpec,
)
from tpuctl.services import cost
from tpuctl.services.names import validate_labels, validate_name
from tpuctl.services.nodes import check_accelerator, check_scheduling, check_version
from tpuctl.startup import STARTUP_SCRIPT, Startup

if TYPE_CHECKING:
    from tpuctl.cloud.backend import BackendKind, TpuBackend
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.config import Target


def prepare(
    spec: CreateSpec, now: float | None = None, kind: BackendKind | None = None, zone: str = ""
) -> CreateSpec:
    """The spec as the API is to get it: tpuctl's labels added (managed-by, owner, created,
    and from --ttl, --idle-timeout and a job's start deadline), and the startup-script of
    the idle watchdog and the boot guard in its metadata. `kind`: the API it goes to (by
    default `registry.preferred` for its shape); `zone`: where (a --max-cost is at its
    region's price)."""
    from tpuctl.cloud import registry

    kind = kind or registry.preferred(spec.shape)
    check_scheduling(spec)
    created = int(now if now is not None else time.time())
    labels = dict(spec.labels)
    if not spec.owner:  # never a guess: gc and keep tell accounts' nodes apart by it
        raise ConfigError(
            "a node needs its owner (tpuctl-owner), and no account was given",
            hint="set it with `gcloud config set account YOU@example.com`",
        )
    labels.update({MANAGED_BY: MANAGED_BY_VALUE, OWNER: spec.owner, CREATED: str(created)})
    if spec.ttl:
        labels[EXPIRES] = str(created + spec.ttl)
    if spec.max_cost:  # a deadline too: the earlier of the two is the node's expiry
        cheap = spec.spot or spec.preemptible
        seconds, _ = cost.cap_seconds(spec.shape, cheap, spec.max_cost, zone)
        labels[MAX_COST] = str(int(round(spec.max_cost * 100)))
        labels[COST_DEADLINE] = str(created + seconds)
        labels[EXPIRES] = str(min(int(labels.get(EXPIRES) or created + seconds), created + seconds))
    metadata = dict(spec.metadata)
    if spec.idle_timeout:
        labels[IDLE_TIMEOUT] = str(spec.idle_timeout)
    if spec.start_deadline:
        labels[START_DEADLINE] = str(created + spec.start_deadline)
    # The watchdog deletes the node at its expiry itself, with no gc (not where the API
    # ends it at its expiry itself: Compute Engine's maxRunDuration).
    # A startup script of the user's own keeps a --ttl to gc alone; a cap cannot be.
    own_script = STARTUP_SCRIPT in spec.metadata and not spec.max_cost
    watchdog = not kind.ends_at_expiry
    watched = spec.idle_timeout or (EXPIRES in labels and watchdog and not own_script)
    startup = None
    if watched or spec.start_deadline:
        startup = _startup(spec, bool(watched))
        # the guard and the watchdog are told what they run on (agent/target.py)
        metadata[STARTUP_SCRIPT] = startup.script(kind.agent_target(spec.name))
    validate_labels(labels)
    if spec.service_account and "@" not in spec.service_account:
        raise UsageError(
            f"invalid --service-account {spec.service_account!r}: a service account's email address"
        )
    return replace(spec, labels=labels, metadata=metadata, startup=startup)


def _startup(spec: CreateSpec, watched: bool) -> Startup:
    """What the node's startup script starts: its idle watchdog and/or its boot guard
    (tpuctl/startup.py)."""
    if spec.idle_action not in ("delete", "stop"):
        raise UsageError(f"invalid --idle-action {spec.idle_action!r}: use delete or stop")
    if spec.idle_action == "stop" and spec.shape.multi_host:
        raise UsageError(
            f"--idle-action stop: the cloud stops only single-host nodes, and "
            f"{spec.shape.name} has {spec.shape.hosts} workers",
            hint="use --idle-action delete (the default) for a multi-host slice",
        )
    if STARTUP_SCRIPT in spec.metadata:
        flag = "--idle-timeout" if spec.idle_timeout else "--max-cost" if spec.max_cost else "--ttl"
        raise UsageError(
            f"{flag} installs its watchdog as the node's startup-script; "
            "it cannot be combined with --metadata startup-script=...",
            hint="run your own setup over SSH (`tpuctl exec`) or from `tpuctl run --setup`",
        )
    idle_action = spec.idle_action if spec.idle_timeout else "delete" if watched else None
    return Startup(idle_action, start_guard=bool(spec.start_deadline))


def validate_create(
    api: TpuBackend,
    target: Target,
    spec: CreateSpec,
    quotas: QuotaApi | None = None,
    count: int = 1,
) -> CreateSpec:
    """Check everything the API would refuse; fill in defaults; return the spec prepared
    for the create (`prepare`).

    With `quotas`, a create that would exceed its quota is refused here, before the call;
    `count` nodes of the spec are asked for at once (a multislice's slices), every one
    counted.
    """
    validate_name(spec.name)
    validate_labels(spec.labels)
    check_accelerator(api, target, spec.shape)
    if not spec.version:  # the API's default for the generation, where it has one
        spec.version = api.default_runtime(spec.shape)
    if spec.version:  # on Compute Engine: the TPU OS image family (default: the generation's)
        check_version(api, target, spec.version)
    prepared = prepare(spec, kind=api.kind, zone=target.zone)
    try:
        existing = api.get_node(f"{target.parent}/nodes/{spec.name}")
    except NotFoundError:
        existing = None
    if existing is not None:
        raise AlreadyExistsError(
            f"node {spec.name} already exists in zone {target.zone} "
            f"({existing.accelerator_type}, {existing.state})",
            hint=f"use another name, or see it: `tpuctl describe {spec.name} --zone {target.zone}`",
        )
    if quotas is not None:  # the API's own quota pool
        api.check_quota(quotas, target, spec, count)
    return prepared


def create_node(
    api: TpuBackend,
    target: Target,
    spec: CreateSpec,
    prepared: CreateSpec | None = None,
    quotas: QuotaApi | None = None,
) -> str | None:
    """Ask for the node (validating first unless given the spec `validate_create` made).

    Returns the create operation's name (None when a retried create adopted the
    node its lost first attempt had made). A quota refusal from the cloud itself
    is explained like tpuctl's own check. A signal during the call interrupts once it
    has returned (`interrupts.deferred`): then the node is known to exist.
    """
    if prepared is None:
        prepared = validate_create(api, target, spec, quotas)
    try:
        with interrupts.deferred():  # cut in half, the create may still take effect
            return api.create_node(target.parent, prepared)
    except QuotaError as e:
        raise api.explain_quota_refusal(e, target, spec) from e
