"""Cloud Monitoring in the emulator, through google-cloud-monitoring (gRPC) and REST: series
from what runs on the workers, the filter, alignment, paging, the ingestion delay, errors."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from google.api_core import exceptions as gx

from tests.emulator.monitoring_helpers import on_worker  # noqa: F401 - a fixture
from tests.emulator.ssh_helpers import create, delete

IDLE = "tpu.googleapis.com/tpu/tensorcore/idle_duration"
UTIL = "tpu.googleapis.com/accelerator/tensorcore_utilization"
MEMORY = "tpu.googleapis.com/memory/usage"
Z = "us-central1-a"


def client(emulator: Any) -> Any:
    import grpc
    from google.cloud import monitoring_v3
    from google.cloud.monitoring_v3.services.metric_service.transports import (
        MetricServiceGrpcTransport,
    )

    channel = grpc.insecure_channel(emulator.status()["monitoring_endpoint"])
    return monitoring_v3.MetricServiceClient(transport=MetricServiceGrpcTransport(channel=channel))


def series(emulator: Any, metric: str, extra: str = "", **request: Any) -> list[Any]:
    now = time.time()
    return list(
        client(emulator).list_time_series(
            request={
                "name": "projects/tpuctl-demo",
                "filter": f'metric.type = "{metric}"' + extra,
                "interval": {"start_time": {"seconds": int(now) - 600},
                             "end_time": {"seconds": int(now) + 1}},
                **request,
            }
        )
    )  # fmt: skip


def test_busy_while_written_idle_while_only_held(emulator: Any, on_worker: Any) -> None:  # noqa: F811
    node = create(emulator, "mon1", "v3-8")
    try:
        program = on_worker(node.name)
        emulator.sample()  # the first look: held since the boot, never written
        program.step("75")  # a step that kept the TensorCores 75% busy
        emulator.sample()
        emulator.sample()  # nothing written since: idle, though the device is held
        util = series(emulator, UTIL, ' AND resource.labels.node_id = "mon1"')
        assert len(util) == 4  # one per chip (accelerator_id 0..3)
        assert {s.resource.type for s in util} == {"tpu_worker"}
        assert dict(util[0].resource.labels) == {
            "project_id": "tpuctl-demo", "zone": Z, "node_id": "mon1", "worker_id": "0",
        }  # fmt: skip
        assert [p.value.double_value for p in util[0].points] == [0.0, 75.0, 0.0]  # newest first
        idle = series(emulator, IDLE)
        newest = [s.points[0].value.int64_value for s in idle]
        assert all(v >= 0 for v in newest)
        assert [s.points[1].value.int64_value for s in idle] == [0, 0, 0, 0]
        mean = series(
            emulator, UTIL, aggregation={"alignment_period": {"seconds": 60},
                                         "per_series_aligner": "ALIGN_MEAN"},
        )  # fmt: skip
        assert [p.value.double_value for p in mean[0].points] == [25.0]
        memory = series(emulator, MEMORY)
        assert memory[0].points[0].value.int64_value > 1_000_000  # the program's RSS
    finally:
        delete(emulator, node.name)


def test_filter_paging_and_the_ingestion_delay(emulator: Any) -> None:
    a = create(emulator, "mon-a", "v3-8")
    b = create(emulator, "mon-b", "v3-8")
    try:
        emulator.sample()
        assert len(series(emulator, IDLE)) == 8  # 2 nodes x 4 chips
        only_b = series(emulator, IDLE, ' AND resource.labels.node_id = one_of("mon-b", "x")')
        assert {s.resource.labels["node_id"] for s in only_b} == {"mon-b"}
        assert series(emulator, IDLE, ' AND resource.labels.zone = "europe-west4-a"') == []
        pages = client(emulator).list_time_series(
            request={
                "name": "projects/tpuctl-demo", "filter": f'metric.type = "{IDLE}"',
                "interval": {"end_time": {"seconds": int(time.time()) + 1},
                             "start_time": {"seconds": int(time.time()) - 60}},
                "page_size": 3,
            }
        ).pages  # fmt: skip
        assert [len(p.time_series) for p in pages] == [3, 3, 2]
        emulator.monitoring(ingestion_delay=180)  # the documented worst case
        emulator.sample()
        assert series(emulator, IDLE) == []  # sampled seconds ago: not visible yet
        emulator.monitoring(ingestion_delay=0)
        assert {len(s.points) for s in series(emulator, IDLE)} == {2}
    finally:
        delete(emulator, a.name)
        delete(emulator, b.name)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"filter": 'metric.type = "x"'}, "filter"),  # an unknown metric
        ({"filter": "resource.labels.zone = \"a\""}, "filter"),  # no metric type
        ({"filter": f'metric.type = "{IDLE}" AND nonsense'}, "filter"),
        ({"filter": f'metric.type = "{IDLE}"', "interval.endTime": ""}, "interval.end_time"),
        ({"filter": f'metric.type = "{IDLE}"', "interval.startTime": "2030-01-01T00:00:00Z"},
         "interval.start_time"),
        ({"filter": f'metric.type = "{IDLE}"', "aggregation.perSeriesAligner": "ALIGN_MEAN"},
         "aggregation.alignment_period"),
        ({"filter": f'metric.type = "{IDLE}"', "aggregation.perSeriesAligner": "ALIGN_MEAN",
          "aggregation.alignmentPeriod": "10s"}, "aggregation.alignment_period"),
    ],
)  # fmt: skip
def test_bad_requests_are_400_invalid_argument(emulator: Any, query: dict, field: str) -> None:
    from urllib.parse import urlencode

    params = {"interval.endTime": "2026-01-01T00:00:00Z", **query}
    url = f"http://{emulator.address}/v3/projects/p/timeSeries?{urlencode(params)}"
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(url)
    assert raised.value.code == 400
    error = json.load(raised.value)["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"].startswith(f"Field {field} had an invalid value of ")


def test_the_library_sees_invalid_argument(emulator: Any) -> None:
    with pytest.raises(gx.InvalidArgument, match="single metric type"):
        series(emulator, IDLE, f' AND metric.type = "{UTIL}"')


def test_sampling_settings_are_checked(emulator: Any) -> None:
    from tpuctl.emulator.control.client import ControlError

    assert emulator.monitoring(sample_period=0.5)["sample_period"] == 0.5
    with pytest.raises(ControlError, match="unknown monitoring settings"):
        emulator.monitoring(period=1)
    with pytest.raises(ControlError, match="seconds >= 0"):
        emulator.monitoring(ingestion_delay=None)
