"""The start deadline is a lease the living client renews: a client killed between READY
and the agents' start loses its node within the lease, with no gc; a slow start with a
living client keeps its node past the start deadline."""

from __future__ import annotations

import json

from tests.cli.test_run import _running, bucket_names, bucket_objects, project, wait_for
from tests.cli.test_run_lifecycle import _guard_log
from tpuctl.agent import claims

__all__ = ["project"]  # the fixture, shared


def _renewals(emulator) -> int:  # noqa: ANN001
    """How often the running job's client has renewed its lease (-1: no lease yet)."""
    leases = bucket_objects(emulator, lambda k: k.endswith("/lease.json")).values()
    return max((int(json.loads(v)["renewals"]) for v in leases), default=-1)


def test_a_client_killed_before_the_agents_start_loses_its_node_within_the_lease(
    emulator_server, emulator, project
) -> None:
    emulator.durations(hostkeys=3600)  # the VM boots slowly: the client holds before any agent
    with _running(project / "job.py", "--start-lease", "2s") as proc:
        wait_for(lambda: "renews a lease of 2s" in _guard_log(emulator_server, emulator))
        labels = emulator.nodes()[0]["labels"]  # the deadline is still 10 minutes away
        assert int(labels["tpuctl-start-deadline"]) == int(labels["tpuctl-created"]) + 600
        proc.kill()  # no cleanup of any kind on this side
        proc.communicate(timeout=30)
        logs: list[str] = []  # the guard's log as last read while its node was there

        def gone() -> bool:
            logs.append(_guard_log(emulator_server, emulator))
            return emulator.nodes() == []

        wait_for(gone, timeout=60)
    said = [log for log in logs if "deleting" in log]
    assert not said or "the client's lease was not renewed for 2s: deleting" in said[-1]


def test_a_slow_start_with_a_living_client_outlives_the_start_deadline(
    emulator_server, emulator, project
) -> None:
    # The VM boots slowly: its workers publish no host keys until the test says so, and the
    # client waits for them (as it does for a real slow boot) before any agent starts.
    emulator.durations(hostkeys=3600)
    with _running(project / "job.py", "--start-lease", "2s", "--start-deadline", "3s") as proc:
        wait_for(lambda: "renews a lease of 2s" in _guard_log(emulator_server, emulator))
        seen = _renewals(emulator)
        # Nine renewals (one every 2/3 s) outlast the deadline and the lease together.
        wait_for(lambda: _renewals(emulator) >= seen + 9 or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.communicate()[1]
        [node] = emulator.nodes()
        assert node["state"] == "READY"
        assert "deleting" not in _guard_log(emulator_server, emulator)
        assert emulator.advance(node["name"]) == [node["name"]]  # booted: the agents start
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "w0 SUCCEEDED" in err
    assert "host keys" in err  # the wait for them was shown
    assert emulator.nodes() == []
    assert not any(k.startswith(claims.NODES) for k in bucket_names(emulator))  # released


def test_a_second_ctrl_c_during_the_cleanup_leaves_a_node_being_deleted(emulator, project):
    """Before the agents start, a Ctrl-C makes the run delete its node. A second one
    while it asks the cloud to waits for the delete request to be made: the node goes,
    and the run says it is being deleted (not left billing)."""
    import signal

    emulator.durations(hostkeys=3600)  # the VM boots slowly: no agent starts
    try:
        with _running(project / "job.py") as proc:
            wait_for(lambda: [n["state"] for n in emulator.nodes()] == ["READY"])
            # every call takes 10 s: the second Ctrl-C below reaches the run while the
            # cloud still holds the cleanup's read, however loaded the machine
            emulator.faults(rate=0, delay=10.0)
            asked = emulator.requests().get("GET get", 0)
            proc.send_signal(signal.SIGINT)
            # the cleanup's read of the node has reached the cloud, which takes 10 s over it
            wait_for(lambda: emulator.requests().get("GET get", 0) > asked)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
    finally:
        emulator.faults(rate=0)
    assert proc.returncode == 130, err
    assert "is being deleted (the cloud has the request)" in err, err
    assert "Traceback" not in err
    wait_for(lambda: emulator.nodes() == [], timeout=30)
