"""What a job is: the spec the user gave, the adapters it runs on, what it knows as it
goes (`Job`), and what it ends with (`JobOutcome`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tpuctl import catalog
from tpuctl.catalog import SliceShape
from tpuctl.errors import UsageError
from tpuctl.models import CreateSpec, slice_ids

if TYPE_CHECKING:
    from tpuctl.agent.protocol import Beats
    from tpuctl.cloud.backend import TpuBackend
    from tpuctl.cloud.quota import QuotaApi
    from tpuctl.cloud.ssh import SshApi
    from tpuctl.cloud.storage import Bucket
    from tpuctl.config import Target
    from tpuctl.services.receipt import Receipt
    from tpuctl.services.ssh import Plan


class RunUI(Protocol):
    """What the runner tells the user; the CLI implements it (stderr, spinners)."""

    def info(self, message: str) -> None: ...

    def progress(self, label: str) -> Any: ...  # a context manager yielding update(state, s)

    def log(self, worker: int, data: bytes) -> None: ...

    def set_workers(self, count: int, slices: int = 1) -> None: ...

    def log_marker(self, text: str) -> None: ...


# From the create call (and at least that long from the boot) until the boot guard
# deletes a node whose agents never started: the time a TPU VM takes from READY to SSH
# (the guest agent publishes host keys, adds tpuctl's key: a minute or two), plus an
# upload of the code that outlasted the create, with room to spare. A node whose client
# died costs at most this much (docs/run.md, "The boot guard").
START_DEADLINE = 10 * 60
# Until its agents start, the client renews the job's lease every third of this; the boot
# guard deletes the node when it has seen no renewal for this long: a dead client's node
# goes within about a minute, a living client's slow boot has what time it needs
# (services/run/lease.py). START_DEADLINE is left for a client that never wrote a lease.
START_LEASE = 90.0
# An agent whose status has not changed for this long is lost (its heartbeat comes every
# 2 s; a bucket write that fails is retried with back-off for up to ~40 s): the client
# ends the job, worker 0's agent too when a peer is lost (docs/run.md).
HEARTBEAT_DEADLINE = 60.0
# No output and idle chips this long is said to be a hang (agent/hang.py; --hang-after).
HANG_AFTER = 600.0
DEFAULT_OUTPUTS = "outputs"  # where a job's outputs come home: ./outputs/<job id>
# The fewest seconds between output uploads (--sync-every, `sync_every` in a job file).
MIN_SYNC_EVERY = 1.0
# The port of the MEGASCALE coordinator on worker 0 of slice 0 (MEGASCALE_PORT): xpk opens
# 8080 as the megascale port of TPU workloads (src/xpk/core/docker_resources.py,
# `add_container_ports`: "slice builder and megascale container ports", 8471 and 8080);
# Ray-based runners use 8081 (levanter's infra/ray_tpu.py). docs/multislice.md.
MEGASCALE_PORT = 8080


@dataclass
class RunSpec:
    script: str  # relative to workdir
    workdir: Path
    args: list[str] = field(default_factory=list)
    node: str | None = None
    # the node a job makes (its name, the job's label and metadata added per attempt):
    # shape, runtime, scheduling, network, labels, service account, scopes, --ttl, --max-cost
    node_spec: CreateSpec = field(
        default_factory=lambda: CreateSpec("", catalog.shape(catalog.DEFAULT_ACCELERATOR))
    )
    api: str | None = None  # the API asked for (--api, the job file's `api`), else chosen
    excludes: list[str] = field(default_factory=list)
    bucket: str | None = None
    bucket_named_by: str = ""  # "--bucket" or "the config file": trusted as given
    env: dict[str, str] = field(default_factory=dict)
    setup: str | None = None
    outputs: Path | None = None  # where the outputs are downloaded at the end (None: not)
    outputs_per_job: bool = False  # into `outputs`/<job id>
    teardown: bool | None = True  # None: only a node the job creates (decided when it starts)
    detach: bool = False
    name: str | None = None
    queued: bool = False  # ask for the node through a queued resource
    slices: int = 1  # > 1: that many slices through one multislice queued resource
    valid_until: int | None = None  # with queued: seconds the request may wait
    flex_start: bool = False  # flex-start capacity (TPU API: through a queued resource)
    max_run_duration: int | None = None  # with flex_start: seconds the TPUs may run
    restarts: int = 0  # recreate and restart after a preemption at most this often
    repairs: int = 1  # replace a node whose TPU did not come up at most this often
    retry_on_failure: bool = False  # a failed script counts as restartable too
    sync_every: float = 30.0  # seconds between output uploads (checkpoints to resume from)
    hang_after: float = HANG_AFTER  # no output and idle chips this long: a hang (0: off)
    start_deadline: int | None = START_DEADLINE  # a created node's agents start by then
    start_lease: float = START_LEASE  # ...unless a living client renews its lease
    heartbeat_deadline: float = HEARTBEAT_DEADLINE  # an agent silent this long is lost
    environment: dict[str, Any] | None = None  # the request's (services/run/environment.py)
    environment_by_default: bool = False  # ...from the work dir's requirements.txt
    # --image as given, and once resolved on the laptop what every worker pulls:
    # {"name": HOST/P/R/I@sha256:HEX, "registry": HOST[, "pythonpath": the image's]}
    image: str | None = None
    image_pull: dict[str, str] | None = None

    @property
    def shape(self) -> SliceShape:
        return self.node_spec.shape

    @property
    def version(self) -> str | None:
        return self.node_spec.version

    @property
    def spot(self) -> bool:
        """Spot or preemptible: capacity that can be taken back (restarts by default)."""
        return self.node_spec.spot or self.node_spec.preemptible

    @property
    def max_cost(self) -> float | None:
        return self.node_spec.max_cost


def parse_env(pairs: list[str], env_files: list[Path]) -> dict[str, str]:
    """The script's environment from `--env-file` files (in order) then `--env KEY=VALUE`
    pairs, later ones winning."""
    values: dict[str, str] = {}
    for env_file in env_files:
        try:
            text = env_file.read_text()
        except OSError as e:
            raise UsageError(f"cannot read --env-file {env_file}: {e.strerror}") from e
        except UnicodeDecodeError:
            raise UsageError(f"cannot read --env-file {env_file}: not UTF-8 text") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.removeprefix("export ").partition("=")
            if not sep or not key.strip().isidentifier():
                raise UsageError(f"{env_file}:{n}: expected KEY=VALUE")
            values[key.strip()] = value.strip().strip("'\"")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(f"invalid --env {pair!r}: expected KEY=VALUE")
        values[key] = value
    return values


@dataclass
class Adapters:
    backend: TpuBackend  # the API the job's node is on (--api auto: the one being tried)
    ssh: SshApi
    bucket: Callable[[str], Bucket]
    project_number: Callable[[str], str]  # Resource Manager's projects.get
    quotas: QuotaApi | None = None
    # --api auto: the other APIs that offer the accelerator, tried in each zone after
    # `backend`, in the registry's order (provision.place)
    others: tuple[TpuBackend, ...] = ()


@dataclass
class JobOutcome:
    job_id: str
    node: str
    exit_status: int
    states: dict[int, str]
    outputs: list[Path] = field(default_factory=list)
    torn_down: bool = False
    restarts: int = 0
    message: str = ""
    started: bool = True  # did the job start at all (its agents)?
    environment: dict[str, Any] | None = None  # environment.summary of the statuses
    receipt: Receipt | None = None  # where its time and money went


def job_node_name(job_id: str) -> str:
    return f"tpuctl-{job_id}"


def worker_label(worker: int, workers: int, slices: int) -> str:
    """How a worker of the job is named to the user: `w3`, or on a multislice job, where
    worker numbers run across the slices (slice s, worker k is s * per slice + k), `s1/w0`."""
    if slices <= 1:
        return f"w{worker}"
    per = max(1, workers // slices)
    return f"s{worker // per}/w{worker % per}"


def states_summary(states: dict[int, str], workers: int, slices: int) -> str:
    """`w0 SUCCEEDED, w1 FAILED` on a few workers; on many, runs of three or more workers
    of one slice in one state as a range (`w0-w254 SUCCEEDED, w255 FAILED`,
    `s1/w0-w63 SUCCEEDED`), so a 256-worker job's summary stays one readable line."""
    per = max(1, workers // slices) if slices > 1 else max(1, workers)
    runs: list[list[int]] = []
    for worker in sorted(states):
        last = runs[-1] if runs else None
        if (
            last is not None
            and worker == last[-1] + 1
            and states[worker] == states[last[0]]
            and worker // per == last[0] // per
        ):
            last.append(worker)
        else:
            runs.append([worker])
    parts: list[str] = []
    for run in runs:
        state = states[run[0]]
        if len(run) < 3:
            parts += [f"{worker_label(w, workers, slices)} {state}" for w in run]
        else:
            end = worker_label(run[-1], workers, slices).rsplit("/", 1)[-1]
            parts.append(f"{worker_label(run[0], workers, slices)}-{end} {state}")
    return ", ".join(parts)


@dataclass
class Job:
    """What one `tpuctl run` knows of its job as it goes; every step reads and updates it."""

    adapters: Adapters
    target: Target
    spec: RunSpec
    ui: RunUI
    job_id: str
    node_name: str
    bucket: Bucket | None = None
    plan: Plan | None = None  # the SSH plan of the node the agents run on
    attempt: int = 1
    workers: int = 1  # how many workers the job runs on
    staging: bool = False  # its record is (being) written to the bucket
    digest: str = ""  # the sha256 of its request (staging.py), given to every agent start
    created: bool = False  # did this run create the node? (only then is it torn down)
    agents_started: bool = False  # do agents own the current attempt? (they tear down)
    ran: bool = False  # did agents own any attempt? (its outputs may be in the bucket)
    outputs_home: bool = False  # the outputs the bucket had came home (bring_outputs)
    outputs_missed: str = ""  # why they did not: their folder could not be written
    agent_teardown: bool = False  # ...and did their start ask worker 0 to delete the node?
    torn_down: bool = False  # teardown was tried: the guard does not try it again
    node_deleted: bool = False  # ...and it made sure the node is gone
    delete_asked: bool = False  # the cloud has this run's delete of the node (it goes on)
    pids: dict[int, int] = field(default_factory=dict)  # worker -> agent pid
    logs: dict[int, str] = field(default_factory=dict)  # worker -> log file on the VM
    beats: Beats | None = None  # the agents' heartbeats, as the watch saw them change
    lost: dict[int, float] = field(default_factory=dict)  # worker -> seconds it was silent
    claim: int | None = None  # the generation of this job's claim on its node (lease.py)
    node_labels: dict[str, str] = field(default_factory=dict)  # its node's, once READY
    # when its phases ended (time.time(): begin, created, ready, started, ended, gone) and
    # the time its recoveries took: the receipt's (services/receipt.py)
    marks: dict[str, float] = field(default_factory=dict)
    recovery: float = 0.0
    restarts_for: dict[str, int] = field(default_factory=dict)  # reason -> restarts

    @property
    def full_name(self) -> str:
        return f"{self.target.parent}/nodes/{self.node_name}"

    @property
    def multislice(self) -> bool:
        return self.spec.slices > 1

    @property
    def slice_names(self) -> list[str]:
        """The nodes the job runs on: its node, or each slice (`NAME-0`, `NAME-1`, ... of
        the queued resource NAME), in slice order."""
        return slice_ids(self.full_name, self.spec.slices if self.multislice else 1)

    @property
    def slice_ids(self) -> list[str]:
        return [name.rsplit("/", 1)[-1] for name in self.slice_names]

    @property
    def what(self) -> str:
        """The job's node as the user is told of it."""
        if self.multislice:
            called = self.adapters.backend.kind.multislice  # "queued resource" on the TPU API
            return f"{called} {self.node_name} ({self.spec.slices} slices)"
        return f"node {self.node_name}"

    def label(self, worker: int) -> str:
        return worker_label(worker, self.workers, self.spec.slices)

    @property
    def outputs_dir(self) -> Path | None:
        """Where the job's outputs come home (None: they stay in the bucket)."""
        out = self.spec.outputs
        if out is None:
            return None
        return out / self.job_id if self.spec.outputs_per_job else out

    def outcome(self, exit_status: int, states: dict[int, str]) -> JobOutcome:
        return JobOutcome(
            self.job_id, self.node_name, exit_status, states, restarts=self.attempt - 1
        )
