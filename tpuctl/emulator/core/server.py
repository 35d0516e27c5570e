"""The emulator's server: its backend served over HTTP (http_front.py), with the
storage, the workers' sandbox, the gRPC fronts and the ports they keep, started and
stopped together, and the ticks that apply due transitions between requests.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from tpuctl.emulator.core.http_front import HTTPServer
from tpuctl.emulator.core.ports import port_free
from tpuctl.emulator.services import SERVICES, Backend
from tpuctl.emulator.storage.server import StorageServer

TICK_SECONDS = 0.1  # how often due transitions are applied between requests


class EmulatorServer:
    """The emulator on host:port (port 0: any free one), served from a background thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8470,
        state_dir: Path | str | None = None,
        verbose: bool = False,
        storage: bool = True,
        ssh: bool = True,
        ssh_port: int | None = None,
        unconfined: bool | None = None,
    ) -> None:
        # unconfined: run worker commands unconfined where bwrap cannot run (None: as
        # TPUCTL_EMULATOR_UNCONFINED says); see workers/sandbox.py
        self.backend = Backend(state_dir, unconfined=unconfined)
        self._state_dir = Path(state_dir) if state_dir else None
        self._host, self._port, self._verbose = host, port, verbose
        # A restarted emulator serves on the ports it had where they are free, as the
        # cloud's endpoints never move: a client or an agent that outlived it carries on.
        was = self._ports_before()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Cloud Storage (fake-gcs-server, a child process): objects kept beside the nodes,
        # on a network of its own that only the proxy reaches (storage/private_net.py);
        # on 127.0.0.1 only where none can be made and worker commands run unconfined
        self.storage: StorageServer | None = None
        if storage:
            root = Path(state_dir) / "storage" if state_dir else None
            sandbox = self.backend.workers.sandbox
            self.storage = StorageServer(
                host,
                0,
                root,
                preferred=was.get("storage", 0),
                bwrap=sandbox.bwrap,
                open_fallback=sandbox.unconfined,
            )
        self._ssh_wanted, self._ssh_port = ssh, ssh_port or was.get("ssh")  # None: a free one
        self._monitoring_port = was.get("monitoring", 0)
        self._proxy_port = was.get("storage_proxy", 0)
        self._tpu_grpc_port = was.get("tpu_grpc", 0)
        self._ticker: threading.Thread | None = None
        self._stopping = threading.Event()
        self.ssh: Any = None  # the workers' SSH servers (workers.ssh.SshWorkers) once started
        self.monitoring: Any = None  # Cloud Monitoring's gRPC front (monitoring/grpc_front.py)
        self._storage_proxy: Any = None  # in front of fake-gcs-server, for every client
        self.tpu_grpc: Any = None  # the TPU API's gRPC front (tpu/grpc_front.py) once started
        self._was = was  # the services' own ports (service.Front) take theirs back too
        self.fronts: dict[str, Any] = {}

    @property
    def address(self) -> str:
        """`host:port`, the value for TPUCTL_EMULATOR_HOST."""
        port = self._httpd.server_address[1] if self._httpd else self._port
        return f"{self._host}:{port}"

    def start(self) -> EmulatorServer:
        """Bind (raising OSError if the port is taken), start Cloud Storage (raising
        StorageError if it cannot), and serve in a daemon thread."""
        # bwrap is tried once, now: not in a worker's first session, nor while the status
        # already answers without the workers' SSH port
        self.backend.workers.sandbox.problem()
        self._httpd = HTTPServer((self._host, self._port), self.backend, self._verbose)
        if self.storage is not None:
            try:
                self.storage.start()
            except Exception:
                self._httpd.server_close()
                self._httpd = None
                raise
            if not self.storage.private:
                print(
                    f"warning: Cloud Storage's server listens on {self.storage.target}, where "
                    f"web pages and workers reach it unchecked ({self.storage.private_problem})",
                    file=sys.stderr,
                )
            self.backend.clear_storage = self.storage.clear
            self.backend.apply_lifecycle = self.storage.apply_lifecycle
            from tpuctl.emulator.storage.proxy import StorageProxy

            # on the port it had before, where free: a worker's agent outlives a restart.
            # Every client goes through it: it refuses what a web page sends, checks the
            # workers' tokens, and keeps the buckets' lifecycle rules that fake-gcs-server
            # drops.
            try:
                proxy = StorageProxy(self._host, self.storage, self.backend, self._proxy_port)
            except OSError:  # its port taken since it was found free: another one
                proxy = StorageProxy(self._host, self.storage, self.backend, 0)
            self._storage_proxy = proxy.start()
            self.backend.storage_endpoint = proxy.url
        # Cloud Monitoring's gRPC front, before the HTTP server answers: a client that
        # sees the status sees its address (importing grpc takes a moment)
        from tpuctl.emulator.monitoring.grpc_front import MonitoringGrpc

        mon = MonitoringGrpc(
            self.backend.monitoring, self._host, self._monitoring_port, self._monitoring_gate
        )
        self.monitoring = mon.start()
        self.backend.monitoring_endpoint = self.monitoring.address
        self.backend.monitoring.start()  # the sampler
        from tpuctl.emulator.tpu.grpc_front import TpuGrpc  # the TPU API over gRPC, beside REST

        self.tpu_grpc = TpuGrpc(self.backend, self._host, self._tpu_grpc_port).start()
        self.backend.tpu_grpc_endpoint = self.tpu_grpc.address
        for front in (front for service in SERVICES for front in service.fronts):
            port = self._was.get(front.name, 0)
            args = (self.backend, self._host, port, self._state_dir, self._verbose)
            started = self.fronts[front.name] = front.start(*args)
            setattr(self.backend.fronts, front.name, started)
            self.backend.front_endpoints[front.name] = started.address
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # how long stop() may wait for the loop
            name="tpuctl-emulator",
            daemon=True,
        )
        self._thread.start()
        self.backend.endpoint = self.address
        self._stopping.clear()
        self._ticker = threading.Thread(target=self._tick, name="tpuctl-emulator-tick", daemon=True)
        self._ticker.start()
        if self._ssh_wanted:
            from tpuctl.emulator.workers.ssh import SshWorkers

            try:
                self.ssh = SshWorkers(self.backend, self._ssh_port).start()
            except BaseException:
                self.stop()
                raise
        self._remember_ports()
        return self

    _PORTS_FILE = "ports.json"

    def _ports_before(self) -> dict[str, int]:
        """The side ports the last emulator on this state dir had, those free now."""
        if self._state_dir is None:
            return {}
        try:
            saved = json.loads((self._state_dir / self._PORTS_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return {
            k: v
            for k, v in saved.items()
            if isinstance(v, int) and 0 < v < 65536 and port_free(self._host, v)
        }

    def _remember_ports(self) -> None:
        if self._state_dir is None:
            return
        ports = {
            "storage": self.storage.open_port if self.storage else None,
            "ssh": self.ssh.port if self.ssh else None,
            "monitoring": self.monitoring.port if self.monitoring else None,
            "storage_proxy": self._storage_proxy.port if self._storage_proxy else None,
            "tpu_grpc": self.tpu_grpc.port if self.tpu_grpc else None,
            **{name: front.port for name, front in self.fronts.items()},
        }
        with contextlib.suppress(OSError):
            (self._state_dir / self._PORTS_FILE).write_text(json.dumps(ports) + "\n")

    def _tick(self) -> None:
        """Transitions fall due on the clock, whether anyone asks or not: a node's SSH
        servers and startup script come up when it turns READY, not at the next call."""
        while not self._stopping.wait(TICK_SECONDS):
            try:
                self.backend.tick()
            except Exception:  # a bug here must not end the ticking
                traceback.print_exc()

    def _monitoring_gate(self, project: str) -> None:
        """A gRPC ListTimeSeries passes the gate REST calls pass (counted as `RPC
        timeSeries.list`): a project with Cloud Monitoring off gets SERVICE_DISABLED."""
        self.backend.requests.count("RPC timeSeries.list")
        self.backend.admit("timeSeries.list", project, f"/v3/projects/{project}/timeSeries")

    def stop(self) -> None:
        self._stopping.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None
        if self.ssh is not None:
            self.ssh.stop()
            self.ssh = None
        self.backend.monitoring.stop()
        if self.monitoring is not None:
            self.monitoring.stop()
            self.monitoring = None
        if self.tpu_grpc is not None:
            self.tpu_grpc.stop()
            self.tpu_grpc = None
        for front in self.fronts.values():
            front.stop()
        self.fronts.clear()
        self.backend.close()
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.close_connections()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        if self._storage_proxy is not None:
            self._storage_proxy.stop()
            self._storage_proxy = None
        if self.storage is not None:
            self.storage.stop()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
