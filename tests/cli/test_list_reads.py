"""`tpuctl list` reads every API at once: a list costs one round trip, not eight."""

from __future__ import annotations

import threading
from typing import Any

from tpuctl.cloud.compute.api import ComputeTpuApi
from tpuctl.cloud.monitoring import MonitoringApi
from tpuctl.cloud.tpu.api import TpuApi

Z = "us-central1-a"


def test_list_asks_every_api_at_once(cli, monkeypatch) -> None:  # noqa: ANN001
    """The TPU API's nodes and queued requests, Compute Engine's VMs, the metrics'
    descriptor (which resources they are on) and both metrics on both resources: each read
    waits at a barrier for the other seven, which only reads made at once can pass."""
    assert cli("create", "both", "-a", "v3-8", "-z", Z).code == 0
    barrier = threading.Barrier(8)
    met: list[str] = []

    def meeting(patch: Any, cls: type, method: str) -> None:
        original = getattr(cls, method)

        def wait_then_read(self: Any, *args: Any, **kw: Any) -> Any:
            barrier.wait(timeout=30)  # broken at once if a read came after another's answer
            met.append(f"{cls.__name__}.{method}")
            return original(self, *args, **kw)

        patch.setattr(cls, method, wait_then_read)

    with monkeypatch.context() as patch:
        for cls, method in ((TpuApi, "list_nodes"), (TpuApi, "list_queued_resources"),
                            (ComputeTpuApi, "list_nodes"), (MonitoringApi, "series"),
                            (MonitoringApi, "resource_types")):  # fmt: skip
            meeting(patch, cls, method)
        r = cli("list", "-z", Z)
    assert r.code == 0, r.err
    assert "both" in r.out and not barrier.broken
    assert sorted(met) == [
        "ComputeTpuApi.list_nodes", "MonitoringApi.resource_types", *["MonitoringApi.series"] * 4,
        "TpuApi.list_nodes", "TpuApi.list_queued_resources",
    ]  # fmt: skip
    assert cli("delete", "both", "-z", Z, "--yes").code == 0
