"""The TPU chips of the emulated workers, as libtpu's runtime metrics show them: each
worker serves `tpu.monitoring.runtime.RuntimeMetricService/GetRuntimeMetric` on a port of
its own (the worker's `TPU_RUNTIME_METRICS_PORTS`), as libtpu does on a TPU VM, with the
HBM used and total and the duty cycle of each of its chips, which a test sets through the
control plane (`EmulatorControl.set_chips`). TensorCore utilisation is not among that
service's metrics: libtpu's SDK gives it, which the emulator stands in for in each
worker's image (workers/libtpu_sdk.py) with the values kept here.

The service, its messages and the metric names are those Google's `tpu-info` reads
(github.com/AI-Hypercomputer/cloud-accelerator-diagnostics, tpu_info/tpu_info/metrics.py
and tpu_info/proto/tpu_metric_service.proto): one `Metric` per chip, its `device-id`
attribute an int, its gauge an int (bytes) or a double (percent). Served with local
credentials (LOCAL_TCP), which tpu-info's `grpc.local_channel_credentials()` expects.

Each message is written by hand (protobuf's wire format), as no generated code exists.
"""

from __future__ import annotations

import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tpuctl.emulator.core import errors

SERVICE = "tpu.monitoring.runtime.RuntimeMetricService"
USED = "tpu.runtime.hbm.memory.usage.bytes"
TOTAL = "tpu.runtime.hbm.memory.total.bytes"
DUTY = "tpu.runtime.tensorcore.dutycycle.percent"
GIB = 1 << 30
# HBM per chip by generation (Google's system architecture pages,
# https://cloud.google.com/tpu/docs/v4, /v5e, /v5p, /v6e, /v2, /v3: "HBM capacity").
HBM_PER_CHIP = {"v2": 16, "v3": 32, "v4": 32, "v5e": 16, "v5p": 95, "v6e": 32}


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 takes ten bytes
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # length-delimited (wire type 2)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _int(number: int, value: int) -> bytes:  # varint (wire type 0)
    return _varint(number << 3) + _varint(value)


def _metric(chip: int, value: float | int, at: float) -> bytes:
    attribute = _field(1, b"device-id") + _field(2, _int(3, chip))  # AttrValue.int_attr
    stamp = _int(1, int(at)) + _int(2, int((at % 1) * 1e9))
    if isinstance(value, float):
        gauge = _varint(1 << 3 | 1) + struct.pack("<d", value)  # Gauge.as_double
    else:
        gauge = _int(2, value)  # Gauge.as_int
    return _field(1, attribute) + _field(2, stamp) + _field(3, gauge)


def response(name: str, values: list[float | int], at: float) -> bytes:
    """A MetricResponse: TPUMetric{name, metrics: one Metric per chip}."""
    metrics = b"".join(_field(3, _metric(i, v, at)) for i, v in enumerate(values))
    return _field(1, _field(1, name.encode()) + metrics)


def requested_name(request: bytes) -> str:
    """MetricRequest.metric_name (field 1): the first length-delimited field 1."""
    if len(request) < 2 or request[0] != (1 << 3 | 2):
        return ""
    size, pos, shift = 0, 1, 0
    while pos < len(request):
        byte = request[pos]
        size |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            break
    return request[pos : pos + size].decode("utf-8", "replace")


class Chips:
    """What each worker's chips show (by the worker's marker: a recreated node starts
    afresh), and the gRPC servers that show it, one per worker, started when the
    worker's environment is first made."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: dict[str, list[dict[str, Any]]] = {}
        self.servers: dict[str, tuple[Any, int]] = {}
        self.without_sdk: set[str] = set()  # workers whose image lacks the SDK's stand-in
        self.pool: ThreadPoolExecutor | None = None

    @staticmethod
    def fresh(generation: str, chips: int) -> list[dict[str, Any]]:
        total = HBM_PER_CHIP.get(generation, 16) * GIB
        idle = {"hbm_used": 0, "hbm_total": total, "duty_cycle": 0.0, "tensorcore_util": 0.0}
        return [dict(idle) for _ in range(chips)]

    def port(self, marker: str, generation: str, chips: int) -> int:
        """The port of the worker's metrics server, started now if it has none."""
        with self.lock:
            self.values.setdefault(marker, self.fresh(generation, chips))
            if marker not in self.servers:
                self.servers[marker] = self._serve(marker)
            return self.servers[marker][1]

    def memory(self, marker: str, generation: str, chips: int) -> tuple[tuple[int, int], ...]:
        """Each chip's HBM (used, total) as the worker's libtpu shows it, for Cloud
        Monitoring's samples (monitoring/models.py)."""
        with self.lock:
            shown = self.values.get(marker) or self.fresh(generation, chips)
            return tuple((int(c["hbm_used"]), int(c["hbm_total"])) for c in shown)

    def tensorcore(self, marker: str) -> list[float] | None:
        """What the worker's SDK stand-in shows per chip; None: the image has none."""
        with self.lock:
            if marker in self.without_sdk or marker not in self.values:
                return None
            return [float(c["tensorcore_util"]) for c in self.values[marker]]

    def update(
        self, marker: str, generation: str, count: int, chips: list[Any], sdk: bool | None = None
    ) -> list[Any]:
        """Set some of the worker's chips: `[{chip, hbm_used?, hbm_total?, duty_cycle?,
        tensorcore_util?}]`; `sdk`: whether its image has libtpu's SDK (None: as it was)."""
        with self.lock:
            current = self.values.setdefault(marker, self.fresh(generation, count))
            for item in chips:
                chip = item.get("chip") if isinstance(item, dict) else None
                if not isinstance(chip, int) or not 0 <= chip < len(current):
                    raise errors.invalid_argument(f"chip {chip!r} is out of range")
                for key in ("hbm_used", "hbm_total", "duty_cycle", "tensorcore_util"):
                    value = item.get(key, current[chip][key])
                    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                        raise errors.invalid_argument(f"{key} must be a number >= 0")
                    if key == "tensorcore_util" and value > 100:
                        raise errors.invalid_argument(f"{key} is a percent: 0 to 100")
                    whole = key in ("hbm_used", "hbm_total")
                    current[chip][key] = int(value) if whole else float(value)
            if sdk is not None:
                (self.without_sdk.discard if sdk else self.without_sdk.add)(marker)
            return [dict(c) for c in current]

    def _answer(self, marker: str, request: bytes, context: Any) -> bytes:
        import grpc

        name = requested_name(request)
        with self.lock:
            chips = [dict(c) for c in self.values.get(marker, [])]
        keys = {USED: "hbm_used", TOTAL: "hbm_total", DUTY: "duty_cycle"}
        if name not in keys:
            context.abort(grpc.StatusCode.NOT_FOUND, f"metric {name!r} is not supported")
        return response(name, [c[keys[name]] for c in chips], time.time())

    def _serve(self, marker: str) -> tuple[Any, int]:
        import grpc

        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chips")
        server = grpc.server(self.pool)
        handler = grpc.unary_unary_rpc_method_handler(
            lambda request, context: self._answer(marker, request, context)
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"GetRuntimeMetric": handler}),)
        )
        credentials = grpc.local_server_credentials(grpc.LocalConnectionType.LOCAL_TCP)
        port = server.add_secure_port("127.0.0.1:0", credentials)
        server.start()
        return server, port

    def forget(self, nodes: set[str] | None = None) -> None:
        """Stop the servers (and drop the values) of the workers of nodes not in `nodes`
        (their markers without the worker: `instance/uid`; None: of every node)."""

        def gone(marker: str) -> bool:
            return nodes is None or marker.rsplit("/", 1)[0] not in nodes

        with self.lock:
            servers = [self.servers.pop(m)[0] for m in list(self.servers) if gone(m)]
            for m in [m for m in self.values if gone(m)]:
                del self.values[m]
            self.without_sdk = {m for m in self.without_sdk if not gone(m)}
        for server in servers:
            server.stop(grace=None).wait(5)
        if nodes is None and self.pool is not None:
            self.pool.shutdown(wait=False)
            self.pool = None
