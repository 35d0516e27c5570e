"""The chips of this worker, live: HBM used and total, duty cycle and TensorCore
utilisation of each, as libtpu's runtime metrics and SDK serve them on the VM, put in the
worker's status (`chips`) for `tpuctl jobs JOB`.

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

Memory is served per device, the duty cycle per chip: on generations with two devices per
chip (v2, v3 and TPU7x in tpu-info's device table) each chip's duty cycle is shown for
both of its devices (`per_device`), as tpu-info does.

The agent is standard library only and gRPC is HTTP/2, so the call is made by a small
probe (PROBE) run by the job's own Python, or the VM's `python3`, whichever has the
`grpc` module (an image with JAX and libtpu, or with tpu-info, has it): it stays up and
answers one line per look, so a look costs a few milliseconds, not an interpreter's start.
The probe passes the answers' bytes on as they are; `decode` reads protobuf's wire
format here. tpu-info's own CLI is not used: it prints a table for people.

TensorCore utilisation is not among the gRPC service's metrics; tpu-info reads it from the
libtpu SDK (tpu_info/tpu_info/cli_helper.py, `TensorCoreUtilizationTable.render`:
`from libtpu import sdk`, then `sdk.tpumonitoring` or, in older libtpu, `sdk.monitoring`,
`.get_metric("tensorcore_util").data()`; each value printed as `f"{value}%"`, labelled by
its position in the list; tpu-info runs as a process of its own, beside the workload).
Where the probe's Python imports `libtpu.sdk`, the probe reads it too; its values (a
number or a number's text, percent) are taken by position, the i-th for the i-th chip the
gRPC service lists, when there are as many as chips (`tensorcore`); else, or without the
SDK, `tensorcore_util` is None. The SDK is imported with the Python's PYTHONPATH added
(after its own path: an image may install libtpu there); a probe that dies is started
again without the SDK, which never costs the gRPC figures.

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
SDK_METRIC = "tensorcore_util"  # the libtpu SDK's TensorCore utilisation, percent per chip
MOST_VALUES = 64  # a TPU VM has at most 8 chips; the probe passes on at most this many + 1


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
monitoring = None
if sys.argv[2] == "sdk":
    import os
    sys.path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    try:
        from libtpu import sdk
        monitoring = getattr(sdk, "tpumonitoring", None) or getattr(sdk, "monitoring", None)
    except Exception:
        pass
channel = grpc.secure_channel(sys.argv[1], grpc.local_channel_credentials())
call = channel.unary_unary("/tpu.monitoring.runtime.RuntimeMetricService/GetRuntimeMetric")
for _ in sys.stdin:
    out = {}
    for name in sys.argv[3:]:
        request = b"\n" + bytes([len(name)]) + name.encode()
        try:
            out[name] = base64.b64encode(call(request, timeout=3)).decode()
        except grpc.RpcError as e:
            out[name] = {"error": "%s: %s" % (e.code().name, e.details())}
    if monitoring is not None:
        try:
            data = monitoring.get_metric("tensorcore_util").data()
            out["tensorcore_util"] = [str(v)[:40] for v in list(data)[:65]]  # MOST_VALUES
        except Exception as e:
            out["tensorcore_util"] = {"error": repr(e)[:200]}
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


def _percent(value: Any) -> float | None:
    """A value of the SDK's list: a number, or a number's text, within 0..100."""
    if isinstance(value, str) and len(value) <= 40:
        try:
            value = float(value.strip().rstrip("%"))
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(float(value), 1) if 0.0 <= value <= 100.0 else None  # not NaN either


def tensorcore(values: Any, chips: int) -> list[float | None]:
    """The SDK's `tensorcore_util` answer -> one figure per chip, by position, or Nones
    when it is no list, an error, or not one value per chip."""
    if not isinstance(values, list) or len(values) != chips or chips > MOST_VALUES:
        return [None] * chips
    return [_percent(v) for v in values]


def per_device(duty: dict[int, float], devices: set[int]) -> dict[int, float]:
    """Duty cycle is measured per chip and memory per device: on a generation with two
    devices (TensorCores) per chip the duty cycle has half as many points. tpu-info
    repeats each chip's value for its devices, by position (tpu_info/tpu_info/metrics.py,
    `get_chip_usage`); so does this, when the memory's devices are a whole multiple of
    the duty cycle's points. Otherwise the points are kept by their own ids."""
    if not duty or not devices or set(duty) == devices or len(devices) % len(duty):
        return duty
    each, values = len(devices) // len(duty), [duty[k] for k in sorted(duty)]
    return {device: values[i // each] for i, device in enumerate(sorted(devices))}


def figures(answers: dict[str, Any]) -> dict[str, Any]:
    """The probe's answer -> `{"chips": [{chip, hbm_used, hbm_total, duty_cycle,
    tensorcore_util}]}`, or `{"error": ...}` when a gRPC metric could not be read."""
    if "error" in answers:
        return {"error": str(answers["error"])}
    per: dict[str, dict[int, float]] = {}
    for name, key in METRICS.items():
        got = answers.get(name)
        if not isinstance(got, str):
            why = got.get("error") if isinstance(got, dict) else "no answer"
            return {"error": f"{name}: {why}"}
        per[key] = decode(base64.b64decode(got))
    per["duty_cycle"] = per_device(per["duty_cycle"], set(per["hbm_used"]) | set(per["hbm_total"]))
    chips = []
    for chip in sorted(set().union(*(set(v) for v in per.values()))):
        row: dict[str, Any] = {"chip": chip}
        for key, values in per.items():
            value = values.get(chip)
            row[key] = (
                None if value is None else (round(value, 1) if key == "duty_cycle" else int(value))
            )
        chips.append(row)
    for row, util in zip(chips, tensorcore(answers.get(SDK_METRIC), len(chips))):
        row[SDK_METRIC] = util
    return {"chips": chips}


class Probe:
    """The probe process of one Python (started on the first look, again after it died)."""

    def __init__(self, python: str, where: str, env: dict[str, str]) -> None:
        self.python, self.where, self.env = python, where, env
        self.proc: subprocess.Popen | None = None  # type: ignore[type-arg]
        self.sdk = True  # read the libtpu SDK too, until a probe dies (a crashing import)

    def look(self) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            sdk = "sdk" if self.sdk else "-"
            self.proc = subprocess.Popen(
                [self.python, "-I", "-c", PROBE, self.where, sdk, *METRICS],
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
            self.sdk = self.sdk and not ready  # it died (EOF): no SDK import next time
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
