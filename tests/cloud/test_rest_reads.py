"""The reads `tpuctl list` makes over REST through the credentials' session (the TPU API's
node and queued-resource lists, Cloud Monitoring's time series) give what Google's own
clients read from the same emulator; and `list` loads neither those clients nor grpc, nor
requests (cloud/session.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from typing import Any

from google.cloud import tpu_v2

from tests.emulator.monitoring_helpers import on_worker  # noqa: F401 - a fixture
from tests.emulator.ssh_helpers import create, delete
from tests.emulator.test_monitoring import client as monitoring_client
from tpuctl.cloud.clients import ClientFactory
from tpuctl.cloud.monitoring import IDLE, TENSORCORE
from tpuctl.cloud.tpu.api import TpuApi

Z = "us-central1-a"
PARENT = f"projects/tpuctl-demo/locations/{Z}"


def _without_raw(items: list[Any]) -> list[Any]:
    """`raw` is each answer as it came: REST keeps the server's 9 fractional digits of a
    time, where the client's messages print 6. Everything read from it must be equal."""
    return [dataclasses.replace(i, raw={}) for i in items]


def _queued(emulator: Any, name: str) -> None:
    node = tpu_v2.Node(accelerator_type="v3-8", runtime_version="tpu-ubuntu2204-base")
    spec = tpu_v2.QueuedResource.Tpu.NodeSpec(parent=PARENT, node_id=name, node=node)
    request = tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[spec]))
    emulator.tpu_client().create_queued_resource(
        parent=PARENT, queued_resource_id=name, queued_resource=request
    ).result(timeout=10)


def test_rest_lists_give_the_nodes_and_requests_google_cloud_tpu_gives(emulator: Any) -> None:
    made = [
        create(emulator, "plain", "v3-8", labels={"team": "a", "managed-by": "tpuctl"}),
        create(emulator, "spot", "v3-8", scheduling_config={"spot": True}),
        create(emulator, "pod", "v4-32", description="four workers"),
    ]
    _queued(emulator, "waiting")
    rest = ClientFactory().tpu()
    library = TpuApi(emulator.tpu_client())  # no session: google-cloud-tpu's calls
    try:
        for parent in (PARENT, "projects/tpuctl-demo/locations/-"):
            over_rest = rest.list_nodes(parent)
            assert over_rest, parent
            assert _without_raw(over_rest) == _without_raw(library.list_nodes(parent))
            queued = rest.list_queued_resources(parent)
            assert [q.name for q in queued] == ["waiting"]
            assert _without_raw(queued) == _without_raw(library.list_queued_resources(parent))
        by_name = {n.name: n for n in rest.list_nodes("projects/tpuctl-demo/locations/-")}
        assert by_name["spot"].spot and not by_name["plain"].spot
        assert by_name["plain"].labels["team"] == "a"
        assert len(by_name["pod"].workers) == 4
    finally:
        library.delete_queued_resource(f"{PARENT}/queuedResources/waiting")
        for node in made:
            delete(emulator, node.name)


def test_rest_lists_page_through_every_node(emulator: Any, monkeypatch: Any) -> None:
    made = [create(emulator, f"p{i}", "v3-8") for i in range(3)]
    api = ClientFactory().tpu()
    seen: list[dict[str, Any]] = []
    session = api._session
    assert session is not None

    class Paging:  # asks for pages of one node, as a long list comes back from Google
        def request(self, method: str, url: str, **kw: Any) -> Any:
            params = dict(kw.pop("params") or {})
            seen.append(params)
            return session().request(method, url, params={**params, "pageSize": 1}, **kw)

    monkeypatch.setattr(api, "_session", Paging)
    try:
        assert sorted(n.name for n in api.list_nodes(PARENT)) == ["p0", "p1", "p2"]
        assert len(seen) == 3 and "pageToken" in seen[-1]
    finally:
        for node in made:
            delete(emulator, node.name)


def test_rest_series_are_what_google_cloud_monitoring_reads(
    emulator: Any,
    on_worker: Any,  # noqa: F811
) -> None:
    node = create(emulator, "busy", "v3-8")
    try:
        program = on_worker(node.name)
        emulator.sample()
        program.step("75")
        emulator.sample()
        now = time.time()
        api = ClientFactory().monitoring()
        for metric, aligner in ((IDLE, None), (TENSORCORE, "ALIGN_MEAN")):
            found = api.series("tpuctl-demo", metric, zone=Z, aligner=aligner, now=now)
            request: dict[str, Any] = {
                "name": "projects/tpuctl-demo",
                "filter": f'metric.type = "{metric}" AND resource.type = "tpu_worker" '
                f'AND resource.labels.zone = "{Z}"',
                "interval": {
                    "start_time": {"seconds": int(now - 15 * 60)},
                    "end_time": {"seconds": int(now) + 1},
                },
            }
            if aligner:
                request["aggregation"] = {
                    "alignment_period": {"seconds": 60},
                    "per_series_aligner": aligner,
                }
            expected = [
                (
                    dict(ts.resource.labels),
                    dict(ts.metric.labels),
                    [
                        (
                            p.interval.end_time.timestamp(),
                            getattr(p.value, p.value._pb.WhichOneof("value")),
                        )
                        for p in ts.points
                    ],
                )
                for ts in monitoring_client(emulator).list_time_series(request=request)
            ]
            assert len(expected) == 4  # one per chip
            assert [(s.resource, s.labels, s.points) for s in found] == expected
            assert all(s.points for s in found)
        assert {s.node_id for s in found} == {"busy"} and found[0].points[0][1] > 0  # busy
    finally:
        delete(emulator, node.name)


def test_list_loads_neither_google_cloud_tpu_nor_grpc_nor_requests(emulator: Any) -> None:
    create(emulator, "seen", "v3-8")
    code = (
        "import sys\n"
        "from tpuctl.cli import main\n"
        "code = main(['list', '-p', 'tpuctl-demo', '-z', 'us-central1-a'])\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(\n"
        "    ('grpc', 'google.cloud.tpu', 'google.cloud.monitoring', 'google.cloud.compute',\n"
        "     'requests', 'urllib3', 'google.auth.transport.requests', 'cryptography')))\n"
        "print('HEAVY=' + ','.join(heavy), code)\n"
    )
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert "seen" in r.stdout
        assert r.stdout.strip().splitlines()[-1] == "HEAVY= 0"
    finally:
        delete(emulator, f"{PARENT}/nodes/seen")
