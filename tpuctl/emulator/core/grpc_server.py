"""A gRPC front of the emulator: generic handlers (no generated code) served unencrypted
on host:port (0, or a port taken meanwhile: a free one) from a thread pool. Cloud
Monitoring (`monitoring.grpc_front`) and the Cloud TPU API (`tpu.grpc_front`) each have
one, as each API has a host of its own.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# The emulator forks its workers' processes (bwrap, shells) while gRPC serves: its fork
# handlers would run in each child before the exec (see tpuctl/entry.py).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


class GrpcFront:
    """Serves the generic handlers `handlers()` returns; `address` once started."""

    thread_prefix = "grpc"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._port = port
        self._server: Any = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def handlers(self) -> list[Any]:
        raise NotImplementedError

    def start(self) -> Any:
        import grpc

        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=16, thread_name_prefix=self.thread_prefix)
        )
        self._server.add_generic_rpc_handlers(tuple(self.handlers()))
        self.port = self._bind(self._port)
        if not self.port and self._port:  # the port it had before (server.py), taken since
            self.port = self._bind(0)
        if not self.port:
            raise OSError(f"gRPC could not listen on {self.host}")
        self._server.start()
        return self

    def _bind(self, port: int) -> int:
        """The port bound, or 0 where gRPC could not bind it (older gRPC answers 0, newer
        raises RuntimeError)."""
        try:
            return int(self._server.add_insecure_port(f"{self.host}:{port}"))
        except RuntimeError:
            return 0

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
