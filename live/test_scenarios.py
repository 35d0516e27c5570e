"""tpuctl's main scenarios on a real project (`make test-live`; contributing/live-testing.md).

Every node is spot, has the run's TTL and a name that starts with the run's prefix, so
the runner's final sweep finds whatever a failed scenario leaves.
"""

from __future__ import annotations

import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOT_FOUND = 4


def test_create_describe_ssh_exec_delete(live, tpuctl) -> None:  # noqa: ANN001
    name = live.name("node")
    zone = ("--zone", live.zone)
    r = tpuctl(
        "create", name, "-a", live.accelerator, "--spot", "--ttl", live.ttl, *zone, "--wait-ssh"
    )
    assert r.code == 0, r.err
    node = tpuctl("describe", name, *zone, "--json").json()
    assert node["state"] == "READY"
    r = tpuctl("exec", name, *zone, "--", "sh", "-c", "echo worker $TPU_WORKER_ID; id -un")
    assert r.code == 0, r.err
    assert "worker" in r.out
    # the user the VM let in: with OS Login on, the login profile's POSIX user
    r = tpuctl("ssh", name, *zone, "--", "id", "-un")
    assert r.code == 0 and r.out.strip(), r.err
    assert tpuctl("delete", name, *zone, "--yes").code == 0
    assert tpuctl("describe", name, *zone).code == NOT_FOUND


def test_run_a_job_on_spot_and_tear_down(live, tpuctl, tmp_path: Path) -> None:  # noqa: ANN001
    name = live.name("run")
    r = tpuctl(
        "run",
        str(HERE / "hello.py"),
        "--node",
        name,
        "-a",
        live.accelerator,
        "--spot",
        "--ttl",
        live.ttl,
        "--zone",
        live.zone,
        "--outputs",
        str(tmp_path / "out"),
        "--restarts",
        "0",
    )
    assert r.code == 0, r.err
    assert "hello from worker 0" in r.out + r.err
    assert (tmp_path / "out" / "worker-0.txt").read_text() == "done\n"
    assert tpuctl("describe", name, "--zone", live.zone).code == NOT_FOUND


def test_gc_deletes_an_expired_node_and_nothing_else(live, tpuctl) -> None:  # noqa: ANN001
    name = live.name("gc")
    zone = ("--zone", live.zone)
    r = tpuctl("create", name, "-a", live.accelerator, "--spot", "--ttl", "1s", *zone, "--no-wait")
    assert r.code == 0, r.err
    deadline = time.monotonic() + 60
    while True:  # its 1 s TTL has passed once gc plans to delete it
        plan = tpuctl("gc", *zone, "--dry-run", "--json").json()
        planned = {entry["name"] for entry in plan if entry["action"] == "delete"}
        if name in planned or time.monotonic() > deadline:
            break
        if tpuctl("describe", name, *zone).code == NOT_FOUND:
            # the node's own watchdog enforced its TTL first (a node that boots at once)
            print(f"{name} deleted itself at its TTL before gc looked: gc had nothing to do")
            return
    assert name in planned
    if planned == {name}:
        r = tpuctl("gc", *zone, "--yes")
        assert r.code == 0, r.err
        if name not in r.out + r.err:  # its own watchdog came between the plan and gc
            assert tpuctl("describe", name, *zone).code == NOT_FOUND, r.out + r.err
            print(f"{name} deleted itself at its TTL between gc's plan and gc --yes")
    else:  # the project has other expired nodes of this user: never delete those here
        print(f"gc --yes not run: it would also delete {sorted(planned - {name})}")
        assert tpuctl("delete", name, *zone, "--yes").code == 0
    assert tpuctl("describe", name, *zone).code == NOT_FOUND


def test_quota_shows_the_accelerators_limits(live, tpuctl) -> None:  # noqa: ANN001
    r = tpuctl("quota", "--zone", live.zone, "--json")
    assert r.code == 0, r.err
    assert r.json(), "no quota rows"


def test_a_queued_request_is_cancelled(live, tpuctl) -> None:  # noqa: ANN001
    name = live.name("queued")
    zone = ("--zone", live.zone)
    r = tpuctl(
        "create",
        name,
        "-a",
        live.accelerator,
        "--spot",
        "--queued",
        "--ttl",
        live.ttl,
        *zone,
        "--no-wait",
    )
    assert r.code == 0, r.err
    listed = tpuctl("list", *zone, "--json").json()
    assert name in str(listed)
    assert tpuctl("delete", name, *zone, "--yes").code == 0
    assert name not in str(tpuctl("list", *zone, "--json").json())
