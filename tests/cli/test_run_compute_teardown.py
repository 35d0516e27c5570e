"""The end of a job on a Compute Engine slice: worker 0's agent deletes the managed
instance group (the VMs, what bills), the client waits for the VMs to go, then deletes
the slice's instance template and workload policy (which bill nothing) and says so; a
job that succeeded exits 0 whatever that bookkeeping meets."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.cli.test_run import project
from tests.cli.test_run_compute import SLICE, _kinds

__all__ = ["project"]  # the fixture, shared


def test_a_slice_job_whose_vms_take_a_while_to_delete_ends_soon_with_nothing_left(
    cli, emulator, project
) -> None:
    emulator.durations(delete=10.0)  # the group's VMs take 10 s to go
    started = time.monotonic()
    r = cli("run", str(project / "job.py"), *SLICE, "--no-outputs")
    assert r.code == 0, r.err
    assert time.monotonic() - started < 120  # not the 30 min of a wait for what never goes
    assert "teardown failed" not in r.err
    assert "instance template" in r.err and "workload policy" in r.err  # said what went
    assert _kinds(emulator) == []  # no instance, group, template or policy


# -- a create whose answer is lost: Compute Engine's requestId, and adoption ---------------
@pytest.mark.parametrize(
    ("shape", "collection"),
    [
        (("-a", "tpu7x-8", "--zone", "us-central1-c"), "instances"),
        (SLICE, "resourcePolicies"),
        (SLICE, "instanceTemplates"),
        (SLICE, "instanceGroupManagers"),
    ],
)
def test_a_job_whose_insert_answer_is_lost_runs_and_leaves_nothing(
    cli, emulator, project, shape, collection
) -> None:
    """One 503 after the insert took effect: the retry, with the same requestId, gets the
    first operation; the job runs and nothing is left."""
    emulator.faults(rate=1.0, codes=[503], after_rate=1.0, count=1,
                    paths=f"/{collection}\\?requestId=")  # fmt: skip
    r = cli("run", str(project / "job.py"), *shape, "--no-outputs")
    assert r.code == 0, r.err
    assert "already exists" not in r.err and "already being used" not in r.err
    verb = {"instanceTemplates": "regionInstanceTemplates"}.get(collection, collection)
    inserts = emulator.bodies(f"compute.{verb}.insert")
    assert len(inserts) == 2  # the first, whose answer was lost, and its retry
    assert inserts[0]["query"]["requestId"] == inserts[1]["query"]["requestId"]
    uuid.UUID(inserts[0]["query"]["requestId"])  # a UUID
    assert _kinds(emulator) == []


def test_a_slice_job_that_succeeded_exits_0_when_its_free_parts_cannot_go(
    cli, emulator, project
) -> None:
    """The VMs went (the agent's delete); the policy's delete is refused: said, with how
    to finish, and no exit status of its own. `tpuctl delete` removes what is left."""
    emulator.durations(delete=10.0)
    emulator.config(denied_permissions=["compute.resourcePolicies.delete"])
    r = cli("run", str(project / "job.py"), *SLICE, "--no-outputs")
    assert r.code == 0, r.err
    assert "could not be deleted" in r.err and "tpuctl gc --yes" in r.err
    assert _kinds(emulator) == ["policy"]  # it bills nothing
    emulator.config(denied_permissions=[])
    (policy,) = [x["name"] for x in emulator.instances()]
    name = policy.rsplit("/", 1)[-1].removesuffix("-d-wp")  # the slice's (compute/slices.py)
    assert cli("delete", name, "--zone", "us-east1-d", "--yes").code == 0
    assert _kinds(emulator) == []


def test_delete_of_a_slice_someone_else_is_deleting_removes_its_template_and_policy(
    cli, emulator
) -> None:
    """The group's delete asked by another (a VM's agent): `tpuctl delete` waits for the
    VMs, then deletes the template and the policy itself, saying so."""
    import requests

    zone = ("--zone", "us-east1-d")
    assert cli("create", "gone", "-a", "v6e-16", "--api", "compute", *zone).code == 0
    emulator.durations(delete=10.0)
    group = "compute/v1/projects/tpuctl-demo/zones/us-east1-d/instanceGroupManagers/gone"
    assert requests.delete(f"http://{emulator.address}/{group}", timeout=10).ok
    r = cli("delete", "gone", *zone, "--yes")
    assert r.code == 0, r.err
    assert "deleted its instance template gone-d-it and workload policy gone-d-wp" in r.err
    assert _kinds(emulator) == []
