"""The chips of this worker, live: HBM used and total and duty cycle of each, as libtpu's
runtime metrics serve them on the VM, put in the worker's status (`chips`) for
`tpuctl jobs JOB`.

The source: libtpu serves `tpu.monitoring.runtime.RuntimeMetricService` over gRPC on
localhost, port 8431 unless TPU_RUNTIME_METRICS_PORTS says otherwise; `GetRuntimeMetric`
answers one metric with a point per chip. Metric names, port and messages are those of
Google's `tpu-info` (github.com/AI-Hypercomputer/cloud-accelerator-diagnostics:
tpu_info/tpu_info/metrics.py `MetricName`, `get_chip_usage`; tpu_info/README.md for
TPU_RUNTIME_METRICS_PORTS; tpu_info/proto/tpu_metric_service.proto), which connects with
`grpc.local_channel_credentials()`:

    tpu.runtime.hbm.memory.usage.bytes        HBM in use, bytes, per chip
    tpu.runtime.hbm.memory.total.bytes        HBM of the chip, bytes
    tpu.runtime.tensorcore.dutycycle.percent  share of the last period the TensorCores
                                              ran a program, percent, per chip

The agent is standard library only and gRPC is HTTP/2, so the call is made by a small
probe (PROBE) run by the job's own Python, or the VM's `python3`, whichever has the
`grpc` module (an image with JAX and libtpu, or with tpu-info, has it): it stays up and
answers one line per look, so a look costs a few milliseconds, not an interpreter's start.
The probe passes the answers' bytes on as they are; `decode` reads protobuf's wire
format here. tpu-info's own CLI is not used: it prints a table for people.

Standard library only, Python 3.8+, like every module of the agent (bundle.py).
"""

from __future__ import annotations

import base64
import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Callable

USED = "tpu.runtime.hbm.memory.usage.bytes"
TOTAL = "tpu.runtime.hbm.memory.total.bytes"
DUTY = "tpu.runtime.tensorcore.dutycycle.percent"
METRICS = {USED: "hbm_used", TOTAL: "hbm_total", DUTY: "duty_cycle"}
SOURCE = "libtpu"  # the status names the source: libtpu's runtime metrics on the VM


def _setting(name: str, default: float) -> float:
    try:
        return max(0.2, float(os.environ.get(name, default)))
    except ValueError:
        return default


EVERY = _setting("TPUCTL_CHIPS_EVERY", 5.0)  # seconds between two looks
ANSWER_WITHIN = 5.0  # a look the probe has not answered by then: the probe is restarted
NO_GRPC = "no grpc module"  # the probe's answer when its Python has none
RETRY_LACKING = 60.0  # a Python found without grpc is asked again after this long

PROBE = r"""
import base64, json, sys
try:
    import grpc
except ImportError:
    print(json.dumps({"error": "no grpc module"}), flush=True)  # NO_GRPC
    sys.exit(0)
channel = grpc.secure_channel(sys.argv[1], grpc.local_channel_credentials())
call = channel.unary_unary("/tpu.monitoring.runtime.RuntimeMetricService/GetRuntimeMetric")
for _ in sys.stdin:
    out = {}
    for name in sys.argv[2:]:
        request = b"\n" + bytes([len(name)]) + name.encode()
        try:
            out[name] = base64.b64encode(call(request, timeout=3)).decode()
        except grpc.RpcError as e:
            out[name] = {"error": "%s: %s" % (e.code().name, e.details())}
    print(json.dumps(out), flush=True)
"""


def address(env: dict[str, str] | None = None) -> str:
    """Where libtpu serves its runtime metrics: the first of TPU_RUNTIME_METRICS_PORTS."""
    ports = (env if env is not None else os.environ).get("TPU_RUNTIME_METRICS_PORTS", "")
    first = ports.split(",")[0].strip()
    return f"localhost:{first if first.isdigit() else 8431}"


# -- protobuf's wire format, as much as MetricResponse needs --------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def fields(data: bytes) -> list[tuple[int, Any]]:
    """(number, value) of each field: an int (varint), bytes (length-delimited) or a
    float (64-bit, a double)."""
    out: list[tuple[int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, kind = key >> 3, key & 7
        value: Any
        if kind == 0:
            value, pos = _varint(data, pos)
        elif kind == 1:
            value, pos = struct.unpack("<d", data[pos : pos + 8])[0], pos + 8
        elif kind == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif kind == 5:
            value, pos = struct.unpack("<f", data[pos : pos + 4])[0], pos + 4
        else:
            raise ValueError(f"wire type {kind}")
        out.append((number, value))
    return out


def _first(data: bytes, number: int, default: Any = None) -> Any:
    return next((v for n, v in fields(data) if n == number), default)


def decode(response: bytes) -> dict[int, float]:
    """MetricResponse{metric: TPUMetric{metrics: [Metric{attribute{value{int_attr}},
    gauge{as_double | as_int}}]}} -> {device id: value}."""
    values: dict[int, float] = {}
    metric = _first(response, 1, b"")
    for number, point in fields(metric):
        if number != 3:
            continue
        attribute = _first(point, 1, b"")
        device = _first(_first(attribute, 2, b""), 3, len(values))
        gauge = _first(point, 3, b"")
        for kind, value in fields(gauge):
            if kind in (1, 2):  # as_double, as_int
                values[int(device)] = float(value)
    return values


def figures(answers: dict[str, Any]) -> dict[str, Any]:
    """The probe's answer -> `{"chips": [{chip, hbm_used, hbm_total, duty_cycle}]}`, or
    `{"error": ...}` when a metric could not be read."""
    if "error" in answers:
        return {"error": str(answers["error"])}
    per: dict[str, dict[int, float]] = {}
    for name, key in METRICS.items():
        got = answers.get(name)
        if not isinstance(got, str):
            why = got.get("error") if isinstance(got, dict) else "no answer"
            return {"error": f"{name}: {why}"}
        per[key] = decode(base64.b64decode(got))
    chips = []
    for chip in sorted(set().union(*(set(v) for v in per.values()))):
        row: dict[str, Any] = {"chip": chip}
        for key, values in per.items():
            value = values.get(chip)
            row[key] = (
                None if value is None else (round(value, 1) if key == "duty_cycle" else int(value))
            )
        chips.append(row)
    return {"chips": chips}


class Probe:
    """The probe process of one Python (started on the first look, again after it died)."""

    def __init__(self, python: str, where: str, env: dict[str, str]) -> None:
        self.python, self.where, self.env = python, where, env
        self.proc: subprocess.Popen | None = None  # type: ignore[type-arg]

    def look(self) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [self.python, "-I", "-c", PROBE, self.where, *METRICS],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,  # not in the job's process group (hang.py, stacks)
            )
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], ANSWER_WITHIN)
            line = proc.stdout.readline() if ready else b""
        except OSError as e:
            line = b""
            self.close()
            return {"error": f"the probe failed: {e}"}
        if not line:
            self.close()
            return {"error": f"no answer from {self.python} within {ANSWER_WITHIN:g}s"}
        try:
            answers = json.loads(line)
            if "error" in answers:
                self.close()
            return figures(answers)
        except (ValueError, TypeError, AttributeError) as e:  # not the probe's JSON
            self.close()
            return {"error": f"a bad answer from the probe: {e}"}

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


class Chips:
    """The looks of one attempt: every EVERY seconds, the figures into the worker's
    status (transfer.StatusWriter), written at once when they changed; otherwise the
    next heartbeat carries the time of the newest look."""

    def __init__(
        self,
        pythons: Callable[[], list[str]],
        status: Any,
        env: dict[str, str] | None = None,
        every: float = EVERY,
    ) -> None:
        self.pythons, self.status, self.every = pythons, status, every
        self.env = dict(env if env is not None else os.environ)
        self.where = address(self.env)
        self.probes: dict[str, Probe] = {}
        self.lacking: dict[str, float] = {}  # Python -> when it was found without grpc
        self.shown: Any = None
        self.quietly: Callable[[Callable[[], Any]], None] = lambda fn: fn()

    @classmethod
    def of(cls, job: Any) -> Chips:
        """Those of a Job: its Python (its environment's, once made), then the VM's."""
        made = cls(
            lambda: [getattr(job, "python", "") or sys.executable, sys.executable], job.status
        )
        made.quietly = job.quietly  # a status that cannot be written is said in the log
        return made

    def look(self) -> dict[str, Any]:
        """One look, through the first Python that has gRPC."""
        got: dict[str, Any] = {"error": NO_GRPC}
        now = time.monotonic()
        for python in dict.fromkeys(self.pythons()):
            if now - self.lacking.get(python, -RETRY_LACKING) < RETRY_LACKING:
                continue  # asked a short while ago: still no grpc, most likely
            probe = self.probes.setdefault(python, Probe(python, self.where, self.env))
            got = probe.look()
            if got.get("error") != NO_GRPC:
                break
            self.lacking[python] = now
        if got.get("error") == NO_GRPC:
            got["error"] = "no Python here has the grpc module (pip install grpcio, or tpu-info)"
        return {"source": SOURCE, "address": self.where, "at": round(time.time(), 3), **got}

    def tick(self) -> None:
        seen = self.look()
        figures_only = {k: v for k, v in seen.items() if k != "at"}
        if figures_only != self.shown:
            self.status.write(chips=seen)
        else:
            with self.status.lock:
                self.status.value["chips"] = seen
        self.shown = figures_only

    def watch(self, stop: threading.Event) -> None:
        """A thread: look every `every` seconds until `stop`; the probes end with it."""
        try:
            while True:
                self.quietly(self.tick)
                if stop.wait(self.every):
                    return
        finally:
            for probe in self.probes.values():
                probe.close()
