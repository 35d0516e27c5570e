"""Shared fixtures: one emulator per session, reset, fast and isolated for every test."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Before any gRPC import: the tests fork (pexpect, subprocesses) while gRPC threads of
# the in-process emulator run; its fork handlers could kill a child before its exec.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from tpuctl.emulator.control.client import EmulatorControl
from tpuctl.emulator.core.server import EmulatorServer

ISOLATED_UNSET = (
    "TPUCTL_PROJECT",
    "TPUCTL_ZONE",
    "TPUCTL_STATE_DIR",
    "TPUCTL_SIGNING_KEY",
    "TPUCTL_EMULATOR_HOST",
    "CLOUDSDK_CORE_PROJECT",
    "CLOUDSDK_COMPUTE_ZONE",
)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the collection imported lives as long as the session: frozen, the garbage
    collector no longer walks it, and it runs as seldom as tpuctl's own (tpuctl/entry.py;
    the suite's processes spent ~5% of their CPU in it, by perf)."""
    from tpuctl.entry import GC_THRESHOLDS

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `long` first (in their order), the rest after them as collected:
    `make test`'s workers, handed one test at a time, start the long ones at once and run
    the rest beside them, rather than waiting on them at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


class Emulator(EmulatorControl):
    """The control object tests get: the control plane plus ready-made Google clients."""

    def tpu_client(self) -> Any:
        """google-cloud-tpu's TpuClient (REST) pointed at the emulator."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import tpu_v2

        return tpu_v2.TpuClient(
            transport="rest",
            client_options={"api_endpoint": f"http://{self.address}"},
            credentials=AnonymousCredentials(),
        )

    def quotas_client(self) -> Any:
        """google-cloud-quotas' CloudQuotasClient (REST) pointed at the emulator."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import cloudquotas_v1

        return cloudquotas_v1.CloudQuotasClient(
            transport="rest",
            client_options={"api_endpoint": f"http://{self.address}"},
            credentials=AnonymousCredentials(),
        )

    def storage_client(self, project: str = "tpuctl-demo") -> Any:
        """google-cloud-storage's Client pointed at the emulator's Cloud Storage."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project=project,
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.status()["storage_endpoint"]},
        )

    def discovery_client(self) -> Any:
        """google-api-python-client's `tpu v2` service pointed at the emulator."""
        from google.auth.credentials import AnonymousCredentials
        from googleapiclient.discovery import build

        return build(
            "tpu",
            "v2",
            static_discovery=True,
            client_options={"api_endpoint": f"http://{self.address}"},
            credentials=AnonymousCredentials(),
            cache_discovery=False,
        )


def _ignored(signum: int, frame: object) -> None:
    """SIG_IGN for the test process alone: a caught signal, unlike an ignored one, is back
    at its default in a child once the child execs."""


@pytest.fixture(autouse=True)
def prices_of_this_test(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test reads prices afresh into a cache folder of its own (never the user's
    ~/.cache), so a catalog one test saw is never another's."""
    from tpuctl.services import prices

    saved = os.environ.get("TPUCTL_CACHE_DIR")
    os.environ["TPUCTL_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    prices.forget()
    yield
    prices.forget()
    if saved is None:
        os.environ.pop("TPUCTL_CACHE_DIR", None)
    else:
        os.environ["TPUCTL_CACHE_DIR"] = saved


@pytest.fixture(scope="session", autouse=True)
def signals_at_their_defaults_in_children() -> Iterator[None]:
    """The tests signal tpuctl, emulators, agents and jobs they start, as a terminal's
    Ctrl-C or hangup would, and expect the signal's default effect there. A run started
    with `nohup` or `&` inherits SIGINT and SIGHUP ignored, which every child would inherit
    in turn (and tpuctl rightly keeps an inherited SIG_IGN): the test process catches them
    instead, with a handler that does nothing, so it still outlives a hangup while what it
    starts gets them at their defaults."""
    replaced = {}
    for sig in (signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_IGN:
            replaced[sig] = signal.signal(sig, _ignored)
    yield
    for sig, before in replaced.items():
        signal.signal(sig, before)


@pytest.fixture
def python_signal_defaults() -> Iterator[None]:
    """Python's own dispositions in the test process (SIGINT raises KeyboardInterrupt,
    SIGHUP and SIGTERM at their defaults), whatever the run inherited, for a test that
    signals code it runs in-process; the run's own are put back after it."""
    defaults = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGHUP: signal.SIG_DFL,
        signal.SIGTERM: signal.SIG_DFL,
    }
    before = {sig: signal.signal(sig, handler) for sig, handler in defaults.items()}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.fixture(scope="session")
def emulator_server() -> Iterator[EmulatorServer]:
    server = EmulatorServer(host="127.0.0.1", port=0, state_dir=None).start()
    from tests.emulator import ssh_helpers

    ssh_helpers.INSTANCE = server.backend.workers.instance
    yield server
    server.stop()


@pytest.fixture
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME, config and state dirs, gcloud's config, and the working directory: all under a
    fresh tmp dir."""
    root = tmp_path / "env"
    for sub in ("home", "config", "state", "gcloud"):
        (root / sub).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(root / "state"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(root / "gcloud"))
    monkeypatch.setenv("TPUCTL_CONFIG", str(root / "config" / "tpuctl" / "config.toml"))
    for name in ISOLATED_UNSET:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    (root / "work").mkdir()
    monkeypatch.chdir(root / "work")  # what a command writes where it runs (outputs/) stays here
    return root


@pytest.fixture
def emulator(
    emulator_server: EmulatorServer, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Emulator]:
    """The session's emulator, reset, with instant transitions; fails a test leaking nodes,
    queued resources or Compute Engine instances."""
    control = Emulator(emulator_server.address, timeout=60.0)  # a hang guard (a loaded machine)
    control.reset()
    control.durations(create=0, stop=0, start=0, delete=0)
    control.durations(queued_accept=0, queued_schedule=0, enable_service=0, hostkeys=0)
    control.durations(preempt_notice=0)  # a test that wants the notice asks for one
    control.monitoring(sample_period=None, ingestion_delay=0)  # sampled when a test says
    monkeypatch.setenv("TPUCTL_EMULATOR_HOST", emulator_server.address)
    yield control
    leaked = control.nodes()
    leaked_queued = control.queued()
    leaked_instances = control.instances()
    control.reset()
    if leaked:
        names = ", ".join(f"{n['name']} ({n['state']})" for n in leaked)
        pytest.fail(f"test leaked emulated nodes: {names}")
    if leaked_queued:
        names = ", ".join(f"{q['name']} ({q['state']['state']})" for q in leaked_queued)
        pytest.fail(f"test leaked emulated queued resources: {names}")
    if leaked_instances:
        names = ", ".join(f"{i['name']} ({i['status']})" for i in leaked_instances)
        pytest.fail(f"test leaked emulated Compute Engine resources: {names}")
