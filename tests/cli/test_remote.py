"""remote.on_workers: an action that never answers is cut off, and retried when safe."""

from __future__ import annotations

import asyncio

from tpuctl.cloud.clients import ClientFactory
from tpuctl.services import remote
from tpuctl.services import ssh as ssh_service


def test_a_hung_idempotent_action_is_retried_on_a_new_connection(cli, emulator) -> None:  # noqa: ANN001
    assert cli("create", "hang", "-a", "v3-8").code == 0
    try:
        factory = ClientFactory()
        name = "projects/tpuctl-demo/locations/us-central1-a/nodes/hang"
        plan = ssh_service.plan(factory.tpu(), factory.ssh(), name, "0")
        calls: list[int] = []

        async def action(session, ep) -> int:  # noqa: ANN001
            calls.append(1)
            if len(calls) == 1:
                await asyncio.sleep(30)  # a session that never ends
            return await session.run("true", lambda *_: None)

        results = remote.on_workers(
            factory.ssh(), plan, action, idempotent=True, action_timeout=0.5
        )
        assert [r.status for r in results] == [0]
        assert len(calls) == 2

        calls.clear()
        results = remote.on_workers(factory.ssh(), plan, action, action_timeout=0.5)
        assert results[0].status == remote.UNREACHABLE_STATUS  # not safe to repeat: reported
        assert "no answer within 0s" in (results[0].error or "")
        assert len(calls) == 1
    finally:
        assert cli("delete", "hang", "--yes").code == 0
