"""remote.on_workers: an action that never answers is cut off, and retried when safe; a
wide slice is reached within the process's open-files limit, and a dead worker holds up
no other."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

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


def test_a_long_wait_ticks_every_second_for_its_progress_line(cli, emulator) -> None:  # noqa: ANN001
    assert cli("create", "ticks", "-a", "v3-8").code == 0
    try:
        factory = ClientFactory()
        name = "projects/tpuctl-demo/locations/us-central1-a/nodes/ticks"
        plan = ssh_service.plan(factory.tpu(), factory.ssh(), name, "0")
        ticks: list[float] = []
        ticked = asyncio.Event()

        def tick(waited: float) -> None:
            ticks.append(waited)
            if len(ticks) == 2:
                ticked.set()

        async def action(session, ep) -> int:  # noqa: ANN001
            await asyncio.wait_for(ticked.wait(), 30)  # ends only once it was ticked twice
            return await session.run("true", lambda *_: None)

        results = remote.on_workers(factory.ssh(), plan, action, tick=tick)
        assert [r.status for r in results] == [0]
        assert len(ticks) >= 2 and ticks == sorted(ticks) and ticks[1] >= 1.0
    finally:
        assert cli("delete", "ticks", "--yes").code == 0


def _pod_plan(cli, name: str, accelerator: str) -> tuple[ClientFactory, ssh_service.Plan]:  # noqa: ANN001
    assert cli("create", name, "-a", accelerator, "--zone", "us-central2-b").code == 0
    factory = ClientFactory()
    full = f"projects/tpuctl-demo/locations/us-central2-b/nodes/{name}"
    return factory, ssh_service.plan(factory.tpu(), factory.ssh(), full, "all")


def test_connections_never_outnumber_the_files_the_process_may_open(cli, emulator) -> None:  # noqa: ANN001
    """A slice bigger than the open-files limit (a laptop's 256 or 1,024) is still reached,
    every worker, with no more sessions open at once than there are files for."""
    factory, plan = _pod_plan(cli, "wide", "v4-64")  # 8 workers
    try:
        ssh = factory.ssh()
        ssh._budget = 3  # as if the process could hold three connections
        open_now, most = 0, 0

        async def action(session, ep) -> int:  # noqa: ANN001
            nonlocal open_now, most
            open_now += 1
            most = max(most, open_now)
            try:
                return await session.run("sleep 0.2", lambda *_: None)
            finally:
                open_now -= 1

        results = remote.on_workers(ssh, plan, action)
        assert [r.status for r in results] == [0] * 8
        assert most == 3
    finally:
        assert cli("delete", "wide", "--zone", "us-central2-b", "--yes").code == 0


def test_a_worker_that_does_not_answer_holds_up_no_other(cli, emulator) -> None:  # noqa: ANN001
    """One at a time (`--max-parallel 1`), a dead first worker is retried in the background
    while the others run: they are done long before it is given up."""
    factory, plan = _pod_plan(cli, "holey", "v4-32")  # 4 workers
    try:
        dead = plan.endpoints[0]
        with socket.socket() as s:  # a port nobody listens on: connection refused
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        plan.endpoints[0] = type(dead)(dead.worker, dead.host, port)
        finished: dict[int, float] = {}
        start = time.monotonic()

        async def action(session, ep) -> int:  # noqa: ANN001
            status = await session.run("true", lambda *_: None)
            finished[ep.worker] = time.monotonic() - start
            return status

        timeout = 8.0
        results = remote.on_workers(
            factory.ssh(), plan, action, max_parallel=1, connect_timeout=timeout
        )
        assert [r.status for r in results] == [remote.UNREACHABLE_STATUS, 0, 0, 0]
        assert "refused" in (results[0].error or "").lower()
        assert sorted(finished) == [1, 2, 3]
        assert max(finished.values()) < timeout  # not after the dead worker was given up
    finally:
        assert cli("delete", "holey", "--zone", "us-central2-b", "--yes").code == 0


def test_the_open_files_limit_is_raised_to_what_the_system_allows(tmp_path) -> None:  # noqa: ANN001
    """A soft limit below the hard one (a login shell's 1,024) is raised before counting."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 4000))\n"
        "from tpuctl.cloud.ssh import SshApi\n"
        "budget = SshApi(22).connection_budget()\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], budget)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split()
    soft, budget = int(out[0]), int(out[1])
    assert soft == 4000
    assert 1800 < budget < 2000  # (4000 - what is open - 64 kept free) / 2 per connection
