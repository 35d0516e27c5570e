"""The Cloud TPU API (tpu.googleapis.com): nodes and their transitions, queued resources."""

from __future__ import annotations

from typing import Any

from tpuctl.emulator.core.service import Front, Service
from tpuctl.emulator.tpu import enums, maintenance, nodes, queued, urls


def _start_grpc(backend: Any, host: str, port: int, state_dir: Any, verbose: bool) -> Any:
    """The TPU API over gRPC, beside REST: the status's `tpu_grpc_endpoint`."""
    from tpuctl.emulator.tpu.grpc_front import TpuGrpc

    grpc = TpuGrpc(backend, host, port).start()
    backend.tpu_grpc_endpoint = grpc.address
    return grpc


def _numbers(method: str, path: str, query: dict[str, str], result: Any) -> Any:
    """Enums as numbers, where the call asks for them (what Google's REST clients do)."""
    return enums.as_numbers(method, path, result) if enums.wants_numbers(query) else result


SERVICE = Service(
    "tpu.googleapis.com",
    tuple(urls.ROUTES),
    (nodes.tick, queued.tick, maintenance.tick),
    slots=nodes.SLOTS,
    fronts=(Front("tpu_grpc", _start_grpc, shown=False),),
    rewrites=(_numbers,),
)
