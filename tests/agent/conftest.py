"""Run the agent as it runs on a VM: the bundle installed where the runner puts it, in a
process of its own, with only the endpoint overrides an emulated worker gets (no tpuctl
on its path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tpuctl.agent import bundle, protocol, signing
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.storage import Bucket
from tpuctl.cloud.tpu import KIND
from tpuctl.services import staging

# TPUCTL_TEST_AGENT_PYTHON=/path/to/python3.8 runs the agent under another interpreter
CLIENT_KEY = "k" * 64  # the client's (tpuctl/agent/signing.py): Worker.run gives its job key
AGENT_PYTHON = os.environ.get("TPUCTL_TEST_AGENT_PYTHON") or sys.executable
PROJECT = "tpuctl-demo"
FAST = ["--heartbeat", "0.1", "--sync-every", "0.2", "--grace", "2", "--stale", "30"]


def trust(job_id: str) -> str:
    """What the runner gives an agent start of job `job_id` for its trust: its key, of
    CLIENT_KEY (services/run/vouching.py)."""
    key = signing.job_key(CLIENT_KEY, job_id)
    return json.dumps({"job_key": key, "signer": signing.signer(CLIENT_KEY), "vouched": {}})


def install_bundle(home: Path) -> Path:
    """The bundle at its place under `home`, unless it is there as sent: what the
    runner's install command does (atomically) before every start."""
    path = home / bundle.remote_path().removeprefix("~/")
    if not path.exists() or path.read_bytes() != bundle.build():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_bytes(bundle.build())
        os.replace(tmp, path)
    return path


def checked(path: Path, *args: str) -> list[str]:
    """The argv that runs the bundle at `path` with ARGS as the runner does: through
    the check of its sha256 (bundle.BOOTSTRAP)."""
    return [AGENT_PYTHON, "-I", "-S", "-c", bundle.BOOTSTRAP, bundle.sha256(), str(path), *args]


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    """Poll until `condition()` is truthy; the bound only stops a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Worker:
    """One emulated worker of a node: its own metadata server and agent home."""

    env: dict[str, str]
    root: Path
    worker: int
    bundle: Path
    # job id -> what the runner's SSH start gives its agents (--digest, --teardown)
    starts: dict[str, list[str]] = field(default_factory=dict)
    target: tuple[str, ...] = ()  # what the runner names the node (--target KIND:NAME)

    def command(self, verb: str, job_id: str, bucket: str, *extra: str) -> list[str]:
        install_bundle(self.root.parent)  # again: a test may have wiped the worker
        given = [] if "--digest" in extra else self.starts.get(job_id, [])
        return checked(self.bundle, "agent", verb,
                       "--job-id", job_id, "--bucket", bucket, "--root", str(self.root),
                       *FAST, *self.target, *given, *extra)  # fmt: skip

    def run(self, job_id: str, bucket: str, *extra: str, env_values: dict | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:  # fmt: skip
        return subprocess.run(
            self.command("run", job_id, bucket, *extra),
            # as the runner gives it: the env values and the job's trust
            input=json.dumps({protocol.TRUST: trust(job_id), **(env_values or {})}),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def popen(self, verb: str, job_id: str, bucket: str, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(verb, job_id, bucket, *extra),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            text=True,
        )


class Cluster:
    """Nodes made with google-cloud-tpu, jobs staged with tpuctl, agents run by hand."""

    def __init__(self, emulator: Any, tmp_path: Path) -> None:
        self.emulator, self.tmp = emulator, tmp_path
        self.bucket: Bucket = ClientFactory().bucket(staging.default_bucket_name(PROJECT), PROJECT)
        self.bucket.ensure("us-central1")
        self.storage_url = emulator.status()["storage_endpoint"]
        self.starts: dict[str, list[str]] = {}  # job id -> the agents' start arguments

    def create_node(self, name: str, accelerator: str = "v3-8", zone: str = "us-central1-a") -> str:
        from google.cloud import tpu_v2

        parent = f"projects/{PROJECT}/locations/{zone}"
        node = tpu_v2.Node(accelerator_type=accelerator, runtime_version="tpu-ubuntu2204-base")
        self.emulator.tpu_client().create_node(parent=parent, node_id=name, node=node).result(10)
        return f"{parent}/nodes/{name}"

    def worker(self, node: str, k: int) -> Worker:
        _, project, _, zone, _, name = node.split("/")
        home = self.tmp / f"{name}-w{k}"
        home.mkdir(parents=True, exist_ok=True)
        installed = install_bundle(home)
        device = home / "dev" / "accel0"  # the worker's TPU, as an emulated worker has one
        device.parent.mkdir(exist_ok=True)
        device.touch()
        base = f"http://{self.emulator.address}"
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "TPUCTL_METADATA_URL": f"{base}/_emulator/v1/metadata/{project}/{zone}/{name}/{k}"
            "/computeMetadata/v1",
            # as on an emulated worker: through the proxy that checks the VM's token
            "TPUCTL_STORAGE_URL": self.emulator.status()["storage_endpoint"],
            "TPUCTL_TPU_URL": base,
            "TPUCTL_CRM_URL": base,
            "TPUCTL_TPU_DEVICES": str(device),  # what the agent's preflight looks for
        }
        target = KIND.agent_target(name)  # as the runner passes it
        return Worker(env, home / ".tpuctl", k, installed, self.starts, target)

    def stage(self, files: dict[str, str], node: str, **spec: Any) -> str:
        root = self.tmp / f"work-{len(list(self.tmp.glob('work-*')))}"
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
            if text.startswith("#!"):
                (root / rel).chmod(0o755)
        _, project, _, zone, _, name = node.split("/")
        fields: dict[str, Any] = {"project": project, "zone": zone, "node": name,
                                  "accelerator": "v3-8", "workers": 1, "script": "train.py",
                                  "bucket": self.bucket.name}  # fmt: skip
        fields.update(spec)
        staged = staging.stage_job(self.bucket, staging.JobSpec(**fields), root)
        self.starts[staged.job_id] = ["--digest", staged.digest]
        self.starts[staged.job_id] += ["--teardown"] if fields.get("teardown") else []
        return staged.job_id

    def submit(self, request: dict[str, Any]) -> str:
        """A request written as the client writes one (its agents started with its
        digest), for a job of its own: returns the job's id."""
        job = staging.new_job_id()
        request = {**request, "id": job}
        self.bucket.write_json(protocol.request_path(job), request, if_generation_match=0)
        self.starts[job] = ["--digest", protocol.request_digest(request)]
        return job

    def request(self, job_id: str) -> dict[str, Any]:
        return dict(self.bucket.read_json(protocol.request_path(job_id))[0])

    def status(self, job_id: str, worker: int = 0) -> dict[str, Any] | None:
        try:
            return dict(
                self.bucket.read_json(f"tpuctl/jobs/{job_id}/status/worker-{worker}.json")[0]
            )
        except Exception:  # noqa: BLE001 - not written yet
            return None

    def text(self, name: str) -> str:
        return self.bucket.read_bytes(name, 1 << 30)[0].decode()

    def node_names(self) -> list[str]:
        return [n["name"] for n in self.emulator.nodes()]

    def cleanup(self) -> None:
        client = self.emulator.tpu_client()
        for name in self.node_names():
            client.delete_node(name=name).result(10)


@pytest.fixture
def cluster(emulator, tmp_path: Path):  # noqa: ANN001, ANN201
    c = Cluster(emulator, tmp_path)
    yield c
    c.cleanup()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test started (a job's scripts), killed at its end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()
