"""The emulator's server: its backend served over HTTP (http_front.py), with the
services' own fronts (`services.FRONTS`: Cloud Storage, the gRPC fronts, the registry,
the workers' SSH) and the ports they keep, started and stopped together, and the ticks
that apply due transitions between requests.
"""

from __future__ import annotations

import contextlib
import json
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tpuctl.emulator.core.http_front import HTTPServer
from tpuctl.emulator.core.ports import port_free
from tpuctl.emulator.services import FRONTS, Backend

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
        # The services' own ports (services.FRONTS): those off, and those asked for.
        self._was = self._ports_before()
        self._off = {name for name, on in (("storage", storage), ("ssh", ssh)) if not on}
        self._asked = {"ssh": ssh_port} if ssh_port else {}
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ticker: threading.Thread | None = None
        self._stopping = threading.Event()
        self.fronts: dict[str, Any] = {}  # the fronts started, by name

    @property
    def address(self) -> str:
        """`host:port`, the value for TPUCTL_EMULATOR_HOST."""
        port = self._httpd.server_address[1] if self._httpd else self._port
        return f"{self._host}:{port}"

    def start(self) -> EmulatorServer:
        """Bind (raising OSError if the port is taken), start the services' fronts that
        come before it serves (raising what they raise: Cloud Storage's StorageError),
        and serve in a daemon thread; then the fronts that come after."""
        # bwrap is tried once, now: not in a worker's first session, nor while the status
        # already answers without the workers' SSH port
        self.backend.workers.sandbox.problem()
        self._httpd = HTTPServer((self._host, self._port), self.backend, self._verbose)
        try:
            self._start_fronts(lambda phase: phase != "after")
        except BaseException:
            self._stop_fronts(lambda phase: True, last_first=True)
            self._httpd.server_close()
            self._httpd = None
            raise
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
        try:
            self._start_fronts(lambda phase: phase == "after")
        except BaseException:
            self.stop()
            raise
        self._remember_ports()
        return self

    def _start_fronts(self, which: Callable[[str], bool]) -> None:
        for front in FRONTS:
            if not which(front.phase) or front.name in self._off:
                continue
            port = self._asked.get(front.name) or self._was.get(front.name, 0)
            args = (self.backend, self._host, port, self._state_dir, self._verbose)
            started = front.start(*args)
            if started is None:
                continue
            self.fronts[front.name] = started
            setattr(self.backend.fronts, front.name, started)
            if front.shown:
                self.backend.front_endpoints[front.name] = started.address

    def _stop_fronts(self, which: Callable[[str], bool], last_first: bool = False) -> None:
        for front in reversed(FRONTS) if last_first else FRONTS:
            if which(front.phase) and front.name in self.fronts:
                self.fronts.pop(front.name).stop()

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
        ports = {}
        for front in FRONTS:
            started = self.fronts.get(front.name)
            kept = front.remember or (lambda started: started.port)
            ports[front.name] = kept(started) if started is not None else None
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

    def stop(self) -> None:
        self._stopping.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None
        self._stop_fronts(lambda phase: phase == "after")
        self._stop_fronts(lambda phase: phase == "beside")
        self.backend.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.close_connections()
            self._httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._httpd = None
        self._stop_fronts(lambda phase: phase == "under", last_first=True)

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
