"""`tpuctl init`: check a project for tpuctl and, with consent, prepare it, step by step.

Each step says what it found and what it did (`Step`); a step that cannot finish says
what is left and how to do it. Nothing changes without `consent(action)` answering
yes, so a second run on a ready project changes nothing. Steps: the project and
credentials, the APIs (enabled through Service Usage, waiting for the operation), the
caller's permissions (init_access.py), TPU quota for the accelerator and zone (an
increase request filed through Cloud Quotas when short), the job bucket, the nodes'
service account and what it holds on the project and that bucket (init_access.py), a
lifecycle rule deleting old job folders (offered, optional), and tpuctl's config file.

Adapters come in as arguments (`InitAdapters`); nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tpuctl import catalog, google_apis
from tpuctl.agent.protocol import BLOBS, JOBS
from tpuctl.cloud import registry
from tpuctl.config import for_project, project_table
from tpuctl.errors import TpuctlError, UsageError
from tpuctl.services.init_access import check_permissions, check_service_account
from tpuctl.services.init_step import Step, failed
from tpuctl.services.staging import bucket_name, bucket_source, check_owner
from tpuctl.waiting import Progress, noop, poll_until

if TYPE_CHECKING:
    from tpuctl.cloud.backend import BackendKind, TpuBackend
    from tpuctl.cloud.iam import IamApi
    from tpuctl.cloud.quota import QuotaApi, QuotaRequest
    from tpuctl.cloud.service_usage import ServiceUsageApi
    from tpuctl.cloud.storage import Bucket
    from tpuctl.config import Target

ENABLE_TIMEOUT = 300.0
# ok and done, and an optional step offered and declined (the lifecycle rule)
READY = ("ok", "done", "skipped")
JOB_RETENTION_DAYS = 30
__all__ = ["READY", "InitAdapters", "InitReport", "InitSpec", "Step", "run"]


@dataclass
class InitReport:
    project: str
    zone: str
    accelerator: str | None
    steps: list[Step] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return all(s.status in READY for s in self.steps)

    @property
    def blocked(self) -> bool:
        """Something the user must still do (not just wait for Google)."""
        return any(s.status in ("todo", "failed") for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "zone": self.zone,
            "accelerator": self.accelerator,
            "ready": self.ready,
            "steps": [s.to_json() for s in self.steps],
        }


@dataclass
class InitAdapters:
    service_usage: ServiceUsageApi
    tpu: TpuBackend
    quotas: QuotaApi
    bucket: Callable[[str], Bucket]
    # (values, project): top-level keys, or that project's table; returns the file's path
    write_config: Callable[[Mapping[str, str], str | None], str]
    iam: IamApi
    backends: Sequence[TpuBackend] = ()  # every API's (the pools of their own quota)


@dataclass
class InitSpec:
    target: Target
    shape: catalog.SliceShape | None
    account: str | None  # who the calls are made as, when known
    endpoint: str  # "Google Cloud" or "the local emulator at ..."
    config: Mapping[str, Any]  # tpuctl's config file as it is
    email: str | None = None  # the contact for a quota increase request
    consent: Callable[[str], bool] = lambda action: False
    progress: Progress = noop
    service_account: str | None = None  # the nodes' (None: the default compute account)
    job_retention: int = JOB_RETENTION_DAYS  # days; 0: offer no lifecycle rule

    @property
    def kind(self) -> BackendKind:
        """The API the project's TPUs will be on: the only one that offers the type, else
        the config file's `api`, else the default (as a create chooses)."""
        from tpuctl.services.create import choose_api

        shape = self.shape or catalog.SliceShape.unknown("")
        return registry.kind(choose_api(shape, None, for_project(self.config, self.target.project)))


# -- 1. project and credentials ----------------------------------------------------------
def check_project(spec: InitSpec) -> Step:
    t = spec.target
    who = spec.account or "the account of your Application Default Credentials"
    return Step(
        "project",
        "ok",
        f"project {t.project} (from {t.project_source}), zone {t.zone} (from {t.zone_source}), "
        f"calls made as {who} to {spec.endpoint}",
    )


# -- 2. the APIs -------------------------------------------------------------------------
def _wait_enabled(api: ServiceUsageApi, project: str, op: str, spec: InitSpec) -> None:
    poll_until(
        lambda: (True if api.operation_done(project, op) else None, "running"),
        what=f"enabling the APIs of {project}",
        progress=spec.progress,
        timeout=ENABLE_TIMEOUT,
    )


def check_apis(a: InitAdapters, spec: InitSpec) -> Step:
    project = spec.target.project
    try:
        states = {api.name: a.service_usage.enabled(project, api.name) for api in google_apis.APIS}
    except TpuctlError as e:
        return failed("apis", "cannot read the project's APIs", e)

    def needed(api: google_apis.Api) -> bool:
        return api.required or api.name == spec.kind.service

    off = [api for api in google_apis.APIS if not states[api.name] and needed(api)]
    optional = [api for api in google_apis.APIS if not states[api.name] and not needed(api)]
    on = [api.name for api in google_apis.APIS if states[api.name]]
    found = f"enabled: {', '.join(on) or 'none'}"
    if off:
        found += f"; disabled: {', '.join(api.name for api in off)}"
    if optional:
        found += "; optional, off: " + ", ".join(f"{a.name} (for {a.why})" for a in optional)
    if not off:
        return Step("apis", "ok", found)
    names = " ".join(api.name for api in off)
    if not spec.consent(f"enable {names} in project {project}"):
        return Step(
            "apis", "todo", found, todo=f"`gcloud services enable {names} --project {project}`"
        )
    enabled = [api.name for api in off]
    try:  # one batch, as `gcloud services enable A B ...`: all or none
        op = a.service_usage.enable(project, enabled)
        if op is not None:
            _wait_enabled(a.service_usage, project, op, spec)
    except TpuctlError as e:
        return failed("apis", found, e)
    return Step("apis", "done", found, did=f"enabled {', '.join(enabled)}")


# -- 4. quota ----------------------------------------------------------------------------
def check_quota(a: InitAdapters, spec: InitSpec) -> Step:
    t = spec.target
    acc = spec.shape
    if acc is None:
        return Step("quota", "ok", "no --accelerator given: quota not checked")
    pooled = _pool_quota(a, spec, acc)  # the API the TPUs go to has a pool of its own
    if pooled is not None:
        return pooled
    qspec = catalog.quota_for(acc, "on-demand")
    if qspec is None:  # validate() let only the types of an API with its own pool through
        return Step("quota", "ok", f"{spec.kind.title}'s TPU quota not checked")
    location = qspec.location(t.zone)
    where = f"{qspec.dimension} {location}"
    need = qspec.amount(acc)
    try:
        limit = a.quotas.quota_info(t.project, qspec.quota_id).limit(location) or 0
        used = sum(
            u.amount
            for u in a.tpu.quota_usage(t.project)
            if u.spec == qspec and u.location == location
        )
        asked = [
            r
            for r in a.quotas.requests(t.project)
            if r.quota_id == qspec.quota_id and r.location == location
        ]
    except TpuctlError as e:
        return failed("quota", f"cannot read {qspec.quota_id} in {where}", e)
    found = (
        f"{qspec.quota_id} allows {limit} {qspec.unit} in {where}, {used} in use; "
        f"{acc.name} needs {need}"
    )
    if used + need <= limit:
        return Step("quota", "ok", found)
    pending = [r for r in asked if r.pending]
    if pending:
        return Step("quota", "pending", found, todo=_pending(pending[0]))
    value = used + need
    command = (
        f"`tpuctl quota request {qspec.quota_id} --value {value} --{qspec.dimension} "
        f"{location} --email YOU@example.com`"
    )
    if not spec.email:
        return Step("quota", "todo", found, todo=f"no contact email known: {command}")
    if not spec.consent(f"request {value} {qspec.unit} of {qspec.quota_id} in {where}"):
        return Step("quota", "todo", found, todo=command)
    justification = f"tpuctl init: {acc.name} in {t.zone}"
    try:
        made = a.quotas.request_increase(
            t.project, qspec.quota_id, value, qspec.dimension, location, justification, spec.email
        )
    except TpuctlError as e:
        return failed("quota", found, e)
    return Step(
        "quota",
        "pending" if made.pending else "done",
        found,
        did=f"requested {value} {qspec.unit} ({made.name})",
        todo=_pending(made) if made.pending else "",
    )


def _pool_quota(a: InitAdapters, spec: InitSpec, acc: catalog.SliceShape) -> Step | None:
    """The on-demand quota for `acc` in the zone's region where the API the TPUs go to
    has a pool of its own (Compute Engine's); None where it has none."""
    t = spec.target
    region = catalog.region_of(t.zone)
    backend = next((b for b in a.backends if b.kind is spec.kind), None)
    if backend is None:
        return None
    title = spec.kind.title
    try:
        pool = backend.own_quota(a.quotas, t.project, [region])
    except TpuctlError as e:
        return failed("quota", f"cannot read {title}'s TPU quota in region {region}", e)
    if pool is None:
        return None
    found = [r for r in pool.rows if r.generation == acc.generation and not r.preemptible]
    row = found[0] if found else None
    if row is None or row.limit is None:
        return Step("quota", "ok", f"{title} lists no {acc.generation} quota in {region}")
    family = f" ({row.family})" if row.family else ""
    seen = (
        f"{title}'s {row.quota_id}{family} allows {row.limit} chips in region "
        f"{region}, {row.used} in use; {acc.name} needs {acc.chips}"
    )
    if row.used + acc.chips <= row.limit:
        return Step("quota", "ok", seen)
    return Step("quota", "todo", seen, todo=f"ask for more: {pool.request_url}")


def _pending(request: QuotaRequest) -> str:
    return (
        f"the quota increase request {request.name.rsplit('/', 1)[-1]} ({request.preferred}) is "
        "under review, which can take hours; `tpuctl quota` shows its state"
    )


# -- 5. the job bucket, 7. its lifecycle rule, 8. the config file (6: init_access.py) ---
def check_bucket(a: InitAdapters, spec: InitSpec) -> tuple[Step, str]:
    t = spec.target
    name = bucket_name(None, spec.config, t.project)
    region = catalog.region_of(t.zone)
    try:
        bucket = a.bucket(name)
        if bucket.bucket_exists():
            said: list[str] = []
            named_by = bucket_source(None, spec.config, t.project)
            check_owner(bucket, t.project, a.iam.project_number, named_by, said.append)
            return Step("bucket", "ok", "; ".join(said) or f"gs://{name} exists"), name
        if not spec.consent(f"create the bucket gs://{name} in {region}"):
            todo = (
                f"`gcloud storage buckets create gs://{name} --location {region} "
                "--uniform-bucket-level-access`"
            )
            return Step("bucket", "todo", f"gs://{name} does not exist", todo=todo), name
        bucket.ensure(region)
    except TpuctlError as e:
        return failed("bucket", f"gs://{name}", e), name
    return (
        Step(
            "bucket",
            "done",
            f"gs://{name} did not exist",
            did=f"created gs://{name} in {region} (uniform bucket-level access)",
        ),
        name,
    )


def expiry_days(rules: list[dict[str, Any]], prefix: str) -> int | None:
    """The fewest days after which a Delete rule among `rules` (a bucket's lifecycle,
    as the JSON API shows it) removes every object under `prefix`; None: none does.

    A rule counts when its only conditions are `age`, `matchesPrefix` (one of which
    `prefix` starts with) and `isLive: true`: any other condition (a suffix, a storage
    class, a version count) leaves some objects under `prefix` alone."""
    days = []
    for rule in rules:
        condition = rule.get("condition") or {}
        if (rule.get("action") or {}).get("type") != "Delete" or "age" not in condition:
            continue
        if set(condition) - {"age", "matchesPrefix", "isLive"} or condition.get("isLive") is False:
            continue
        prefixes = condition.get("matchesPrefix")
        if prefixes is None or any(prefix.startswith(p) for p in prefixes):
            days.append(int(condition["age"]))
    return min(days) if days else None


def check_retention(a: InitAdapters, spec: InitSpec, bucket: Step, name: str) -> Step:
    """Offer a lifecycle rule deleting job folders (logs, records, outputs) older than
    `spec.job_retention` days. Never one that reaches the staged code's blobs: they are
    shared by every job, an old one as much as a new one."""
    url = f"gs://{name}"
    if bucket.status not in READY:
        return Step("retention", "todo", f"{url} is not there yet", todo="run init again")
    try:
        rules = a.bucket(name).lifecycle_rules()
    except TpuctlError as e:
        return failed("retention", f"cannot read the lifecycle rules of {url}", e)
    jobs, blobs = expiry_days(rules, JOBS), expiry_days(rules, BLOBS)
    warning = ""
    if blobs is not None:
        warning = (
            f"; careful: a rule also deletes the staged code ({BLOBS}) after {blobs} days, "
            "which a job restarted later needs"
        )
    if jobs is not None:
        found = f"{url} deletes job folders ({JOBS}) after {jobs} days{warning}"
        return Step("retention", "ok", found)
    days = spec.job_retention
    if not days:
        return Step("retention", "ok", f"{url} keeps job folders until deleted{warning}")
    found = f"{url} keeps job folders ({JOBS}: logs, records, outputs) forever{warning}"
    action = f"add a lifecycle rule to {url} deleting job folders older than {days} days"
    if not spec.consent(action):
        todo = "`tpuctl init --yes` adds it; `--job-retention 0` stops offering it"
        return Step("retention", "skipped", found, todo=todo)
    try:
        a.bucket(name).add_delete_rule(JOBS, days)
    except TpuctlError as e:
        return failed("retention", found, e)
    did = f"added a lifecycle rule: objects under {JOBS} older than {days} days are deleted"
    return Step("retention", "done", found, did=did)


def check_config(a: InitAdapters, spec: InitSpec, bucket: str) -> Step:
    """The default project at the top of the config file; the zone and the bucket in that
    project's own table (`[projects."ID"]`), so that another project's commands never
    take this one's zone or send their jobs to this one's bucket."""
    t = spec.target
    mine = for_project(spec.config, t.project)
    top = {} if spec.config.get("project") == t.project else {"project": t.project}
    wanted = {"zone": t.zone, "bucket": bucket}
    own = {k: v for k, v in wanted.items() if mine.get(k) != v}
    table = project_table(t.project)
    shown = f"project = {t.project}; {table} zone = {t.zone}, bucket = {bucket}"
    if not top and not own:
        return Step("config", "ok", f"tpuctl's config file has {shown}")
    parts = [f"project = {t.project}"] if top else []
    if own:
        parts.append(f"{table} " + ", ".join(f"{k} = {v}" for k, v in own.items()))
    changes = "; ".join(parts)
    if not spec.consent(f"write {changes} to tpuctl's config file"):
        return Step("config", "todo", f"tpuctl's config file lacks {changes}", todo="run again")
    path = a.write_config(top, None) if top else ""
    if own:
        path = a.write_config(own, t.project)
    return Step("config", "done", f"tpuctl's config file lacked {changes}", did=f"wrote {path}")


def validate(acc: catalog.SliceShape | None, zone: str) -> None:
    """Refuse an accelerator tpuctl does not know, or one the zone does not offer."""
    if acc is None:
        return
    # offered only by an API with a quota pool of its own (TPU7x: Compute Engine's)
    on_compute = acc.known and not registry.quota_kind().offers(acc)
    if not acc.known or (catalog.quota_for(acc, "on-demand") is None and not on_compute):
        raise UsageError(
            f"invalid --accelerator {acc.name!r}: a TPU type like v5litepod-8, v4-8 or v6e-4"
        )
    if not on_compute and zone in catalog.ZONES and acc not in catalog.accelerator_types(zone):
        zones = ", ".join(catalog.zones_offering(acc.generation)[:4])
        raise UsageError(
            f"invalid --accelerator {acc.name!r}: zone {zone} does not offer it "
            f"(zones with {acc.generation}: {zones})"
        )


def run(a: InitAdapters, spec: InitSpec, on_step: Callable[[Step], None]) -> InitReport:
    """Every step in order, each told to `on_step` as it ends."""
    validate(spec.shape, spec.target.zone)
    shown = spec.shape.name if spec.shape else None
    report = InitReport(spec.target.project, spec.target.zone, shown)

    def told(step: Step) -> Step:
        report.steps.append(step)
        on_step(step)
        return step

    told(check_project(spec))
    told(check_apis(a, spec))
    told(check_permissions(a.iam, a.tpu, spec.target, spec.account, spec.kind.permissions))
    told(check_quota(a, spec))
    step, bucket = check_bucket(a, spec)
    told(step)
    made = step.status in READY
    told(check_service_account(a.iam, spec.target.project, bucket, spec.service_account, made))
    told(check_retention(a, spec, step, bucket))
    told(check_config(a, spec, bucket))
    return report
