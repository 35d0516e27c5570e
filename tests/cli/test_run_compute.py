"""tpuctl run on Compute Engine: a TPU7x VM, and a v6e slice of four VMs (a workload
policy, an instance template, a managed instance group), staged, run on every worker in
worker order, outputs brought home, and nothing left on Compute Engine after."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from tests.cli.conftest import one_line_error
from tests.cli.test_run import EXAMPLE, _running, bucket_objects, project, wait_for
from tests.cli.test_run_service_account import DEFAULT_SA, PROJECT, _statuses
from tpuctl.services.run.spec import job_node_name

__all__ = ["project"]  # the fixture, shared

ZONE = "us-central1-c"  # where the emulated Compute Engine offers TPU7x
SLICE = ("-a", "v6e-16", "--api", "compute", "--zone", "us-east1-d")  # v6e there


def test_a_tpu7x_job_runs_brings_its_outputs_home_and_deletes_its_vm(
    cli, emulator, tmp_path
) -> None:
    out = tmp_path / "out"
    r = cli("run", str(EXAMPLE), "-a", "tpu7x-8", "--zone", ZONE, "--outputs", str(out),
            "--", "--steps", "20")  # fmt: skip
    assert r.code == 0, r.err
    assert "step    20  loss" in r.out and "done: loss" in r.out
    assert json.loads((out / "metrics-worker0.json").read_text())["steps"] == 20
    assert emulator.instances() == []
    # the VM deleted itself (its agent said so in the job's log first), and only once
    (log,) = [v for k, v in bucket_objects(emulator).items() if k.endswith(".log")]
    assert b"tpuctl-agent: teardown: deleting VM tpuctl-" in log and b"teardown failed" not in log
    assert emulator.requests()["DELETE compute.instances.delete"] == 1


def test_a_tpu7x_16_job_runs_on_both_vms_and_brings_every_workers_outputs_home(
    cli, emulator, tmp_path
) -> None:
    out = tmp_path / "out"
    r = cli("run", str(EXAMPLE), "-a", "tpu7x-16", "--zone", ZONE, "--outputs", str(out),
            "--", "--steps", "10")  # fmt: skip
    assert r.code == 0, r.err
    assert "[w0] step    10  loss" in r.out and "[w1] step    10  loss" in r.out
    for worker in (0, 1):
        assert json.loads((out / f"metrics-worker{worker}.json").read_text())["steps"] == 10
    assert emulator.instances() == []  # the group, its template and its policy


# What jax.distributed.initialize() reads to find the hosts, as jax/_src/clusters/
# cloud_tpu_cluster.py reads it: GceTpuCluster when `agent-worker-number` answers,
# else GkeTpuCluster from TPU_WORKER_ID and TPU_WORKER_HOSTNAMES; the coordinator is the
# first host, on port 8476. Each worker prints what JAX would conclude.
# The VM's metadata, as JAX reads it (get_metadata): None where the key is missing
READ_METADATA = """\
import json, os, urllib.error, urllib.request
def attr(key):
    url = os.environ["TPUCTL_METADATA_URL"] + "/instance/attributes/" + key
    try:
        return urllib.request.urlopen(urllib.request.Request(
            url, headers={"Metadata-Flavor": "Google"})).read().decode()
    except urllib.error.HTTPError:
        return None
"""
JAX_VIEW = (
    READ_METADATA
    + """\
if attr("agent-worker-number") is not None:
    cluster = "gcetpu"
    pid = int(attr("agent-worker-number"))
    hosts = [w.split(":")[2] for w in attr("worker-network-endpoints").split(",")]
elif os.environ.get("TPU_WORKER_HOSTNAMES") is not None:
    cluster = "gketpu"
    pid = int(os.environ["TPU_WORKER_ID"])
    hosts = os.environ["TPU_WORKER_HOSTNAMES"].split(",")
else:
    cluster, pid, hosts = None, None, []
print("jax " + json.dumps({"cluster": cluster, "process_id": pid, "num_processes": len(hosts),
      "coordinator": hosts[0] + ":8476" if hosts else None,
      "worker": attr("worker-id"), "tpuctl_worker": os.environ["TPUCTL_WORKER_ID"]}))
"""
)


def script_in(tmp_path: Path, text: str) -> Path:
    """`text` as the script of a work dir of its own."""
    (tmp_path / "w").mkdir()
    script = tmp_path / "w" / "jax_view.py"
    script.write_text(text)
    return script


@pytest.fixture
def jax_view(tmp_path: Path) -> Path:
    return script_in(tmp_path, JAX_VIEW)


def _views(out: str) -> dict[int, dict]:
    views = {}
    for line in out.splitlines():
        if "] jax " in line:
            view = json.loads(line.split("] jax ", 1)[1])
            views[view["process_id"]] = view
    return views


def test_a_v6e_slice_job_runs_on_four_vms_that_find_each_other_and_leaves_nothing(
    cli, emulator, jax_view
) -> None:
    r = cli("run", str(jax_view), *SLICE, "--no-outputs")
    assert r.code == 0, r.err
    views = _views(r.out)
    assert sorted(views) == [0, 1, 2, 3]  # every worker, each its own process id
    assert {v["cluster"] for v in views.values()} == {"gketpu"}
    assert {v["num_processes"] for v in views.values()} == {4}
    assert len({v["coordinator"] for v in views.values()}) == 1  # all agree on one
    for pid, v in views.items():  # JAX's process id is the VM's worker number and tpuctl's
        assert v["worker"] == v["tpuctl_worker"] == str(pid)
    # worker 0's agent deleted the group (its VMs); the client the template and policy
    assert emulator.instances() == []


def test_a_vm_that_cannot_delete_itself_fails_the_job_naming_the_permission_and_role(
    cli, emulator, project
) -> None:
    denied = {"denied_permissions": ["compute.instanceGroupManagers.delete"]}
    emulator.config(service_accounts={DEFAULT_SA: denied})
    r = cli("run", str(project / "job.py"), *SLICE)
    assert r.code == 6, r.err
    assert "worker 0 of 4" not in r.out  # the script never started
    assert f"{DEFAULT_SA} lacks compute.instanceGroupManagers.delete" in r.err
    grant = (
        f"gcloud projects add-iam-policy-binding {PROJECT} "
        f"--member=serviceAccount:{DEFAULT_SA} --role=roles/compute.instanceAdmin.v1"
    )
    assert grant in r.err
    assert emulator.instances() == []  # the runner deleted the slice (the agent could not)
    refused = [s for s in _statuses(emulator) if s["state"] == "FAILED"]
    assert refused and "compute.instanceGroupManagers.delete" in refused[0]["message"]


def test_a_slice_whose_client_died_before_its_agents_deletes_its_vms(
    cli, emulator, project
) -> None:
    """SIGKILL of the client once the slice runs and before any agent: the boot guard on
    worker 0 deletes the group, and with it every VM. The template and policy (which
    bill nothing) are left, listed, for `tpuctl gc` or `delete`: the group refers to
    them until it is gone, and it is gone only once the guard's VM is."""
    emulator.durations(hostkeys=3600)  # the VMs boot slowly: no agent starts
    with _running(project / "job.py", *SLICE, "--start-deadline", "2s") as proc:
        wait_for(lambda: any("getGuestAttributes" in k for k in emulator.requests()))
        assert _kinds(emulator).count("instance") == 4
        proc.kill()  # no cleanup of any kind on this side
        proc.communicate(timeout=30)
        wait_for(lambda: "instance" not in _kinds(emulator) and "group" not in
                 _kinds(emulator), timeout=90)  # fmt: skip
    assert _kinds(emulator) == ["policy", "template"]
    (template,) = [r["name"] for r in emulator.instances() if r["status"] == "INSTANCE_TEMPLATE"]
    name = template.rsplit("/", 1)[-1].removesuffix("-d-it")  # the slice's (compute_slice.py)
    r = cli("delete", name, "--zone", "us-east1-d", "--yes")
    assert r.code == 0, r.err
    assert emulator.instances() == []


def _kinds(emulator) -> list[str]:  # noqa: ANN001
    """What is on Compute Engine: instance, group, template, policy (sorted)."""
    kinds = {"INSTANCE_GROUP_MANAGER": "group", "INSTANCE_TEMPLATE": "template",
             "WORKLOAD_POLICY": "policy"}  # fmt: skip
    return sorted(kinds.get(r["status"], "instance") for r in emulator.instances())


def test_a_detached_slice_job_is_followed_cancelled_and_torn_down_with_no_client(
    cli, emulator, project
) -> None:
    """--detach on a slice: `logs -f`, `jobs` and `cancel` work as on the TPU API, and
    worker 0's agent deletes the group (the VMs) with nobody watching."""
    r = cli("run", str(project / "job.py"), *SLICE, "--detach", "--json", "--env", "NAP=60")
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    # every worker's script has started (`jobs` says RUNNING once one worker does): a
    # cancel before that is a worker that never ran it, and never says its line
    lines = [f"[w{k}] worker {k} of 4 job {job}" for k in range(4)]
    wait_for(lambda: all(line in cli("logs", job).out for line in lines))
    assert cli("cancel", job).code == 0
    logs = cli("logs", job, "-f")
    assert logs.code == 0, logs.err
    assert "[w3] worker 3 of 4 job " + job in logs.out
    wait_for(lambda: "instance" not in _kinds(emulator) and "group" not in _kinds(emulator))
    (row,) = [x for x in json.loads(cli("jobs", "--json").out) if x["id"] == job]
    assert row["state"] == "CANCELLED"
    assert _kinds(emulator) == ["policy", "template"]  # no client left to delete them
    name = job_node_name(job)
    assert cli("delete", name, "--zone", "us-east1-d", "--yes").code == 0


# -- capacity hunting: --api auto, zone by zone, each API in turn -----------------------
V6E_TPU_QUOTA = "TPUV6EPerProjectPerRegionForTPUAPI"  # the Cloud TPU API's, per region
CE_FAMILY_QUOTA = "TPUS-PER-TPU-FAMILY-per-project-region/CT6E"  # Compute Engine's
HUNT = ("-a", "v6e-8", "--api", "auto", "--zone", "us-east5-a,us-east5-b")


def test_auto_falls_back_to_compute_engine_in_the_same_zone_on_no_tpu_api_quota(
    cli, emulator, project
) -> None:
    emulator.quotas({V6E_TPU_QUOTA: {"us-east5": 0}})
    r = cli("run", str(project / "job.py"), *HUNT, "--no-outputs")
    assert r.code == 0, r.err
    assert "zone us-east5-a (Cloud TPU API) skipped: quota exceeded" in r.err
    assert "is in us-east5-a on Compute Engine" in r.err
    assert "[w0] worker 0 of 1" in r.out or "worker 0 of 1" in r.out
    assert emulator.nodes() == [] and emulator.instances() == []


def test_auto_moves_on_to_the_next_zone_when_neither_api_has_capacity(
    cli, emulator, project
) -> None:
    emulator.capacity({"us-east5-a": {"v6e": 0}})  # one zone's chips, whichever API asks
    r = cli("run", str(project / "job.py"), *HUNT, "--no-outputs")
    assert r.code == 0, r.err
    assert "zone us-east5-a (Cloud TPU API) skipped: no capacity" in r.err
    assert "zone us-east5-a (Compute Engine) skipped: " in r.err
    assert "is in us-east5-b on Cloud TPU API" in r.err
    assert emulator.nodes() == [] and emulator.instances() == []


def test_auto_with_nowhere_to_go_names_every_api_and_zone_tried(cli, emulator, project) -> None:
    emulator.quotas({V6E_TPU_QUOTA: {"us-east5": 0}})
    emulator.config(compute_quotas={CE_FAMILY_QUOTA: {"us-east5": 0}})
    r = cli("run", str(project / "job.py"), *HUNT, "--no-outputs")
    assert r.code == 5, r.err
    line = one_line_error(r, after_call=True)
    for place in ("us-east5-a (Cloud TPU API)", "us-east5-a (Compute Engine)",
                  "us-east5-b (Cloud TPU API)", "us-east5-b (Compute Engine)"):  # fmt: skip
        assert f"{place}: quota exceeded" in line, line
    assert emulator.nodes() == [] and emulator.instances() == []


def test_an_api_run_does_not_know_is_refused_in_one_line(cli, emulator, project) -> None:
    r = cli("run", str(project / "job.py"), "--api", "gpu")
    assert r.code == 2
    assert one_line_error(r) == (
        "error: invalid --api 'gpu': tpu (the Cloud TPU API), compute (Compute Engine) or "
        "auto (any, in order)"
    )


def test_worker_0_ends_a_slice_job_whose_peer_is_lost_with_no_client(
    cli, emulator, project
) -> None:
    """A dead agent on a Compute Engine slice: worker 0 sees it silent past the heartbeat
    deadline, ends the job and deletes the group, as on the Cloud TPU API."""
    from tests.cli.test_run_lifecycle import _kill_agent
    from tests.cli.test_run_lifecycle import _statuses as statuses

    r = cli("run", str(project / "job.py"), *SLICE, "--detach", "--json",
            "--heartbeat-deadline", "3s", "--env", "NAP=60")  # fmt: skip
    assert r.code == 0, r.err
    job = json.loads(r.out)["job"]
    wait_for(lambda: [s.get("phase") for s in statuses(emulator).values()] == ["script"] * 4)
    _kill_agent(emulator, job, 2)
    wait_for(lambda: "instance" not in _kinds(emulator), timeout=90)
    states = {s["worker"]: s["state"] for s in statuses(emulator).values()}
    assert states[2] == "LOST" and states[0] == "CANCELLED", states
    assert cli("delete", job_node_name(job), "--zone", "us-east1-d", "--yes").code == 0
    assert emulator.instances() == []


@pytest.mark.long
def test_a_spot_slice_preempted_mid_job_resumes_from_the_step_saved_on_the_notice(
    emulator_server, emulator
) -> None:
    """Worker 0's VM of a spot slice gets Compute Engine's notice: the script saves on the
    SIGTERM, the agent syncs it, the group (DO_NOTHING) does not remake the VM, tpuctl
    deletes the slice, makes it again, and the job resumes from exactly that step."""
    import urllib.request

    with _running(
        EXAMPLE, *SLICE, "--spot", "--restarts", "1", "--",
        "--steps", "400", "--sleep", "0.02", "--checkpoint-every", "1000000",
    ) as proc:  # fmt: skip
        root = emulator_server.backend.workers.root
        wait_for(
            lambda: any(
                "step    20 " in log.read_text(errors="replace")
                for log in root.glob("*/w0/home/.tpuctl/jobs/*/attempt-1.log")
            )
        )
        url = f"http://{emulator.address}/compute/v1/projects/{PROJECT}/zones/us-east1-d/instances"
        vms = json.loads(urllib.request.urlopen(url).read())["items"]
        (first,) = [vm["name"] for vm in vms
                    if {"key": "worker-id", "value": "0"} in vm["metadata"]["items"]]  # fmt: skip
        emulator.preempt_instance(first, notice=30)
        out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    # worker 0's own line: its peers are told too (each saves where it stood)
    found = re.search(r"^\[w0\] SIGTERM at step (\d+):", out, re.M)
    assert found, out
    saved = int(found.group(1))
    assert saved >= 20
    assert "recreating it (restart 1 of 1)" in err
    after = out.split("=== tpuctl: attempt 2")[1]
    assert re.search(rf"^\[w0\] resumed from step {saved} ", after, re.M), after
    assert "after 1 restart(s); exit status 0" in err
    assert emulator.instances() == []


# -- flex-start: the job waits for capacity, on either API ------------------------------
FLEX = ("--flex-start", "--max-run-duration", "1h")


def test_a_flex_start_job_on_compute_engine_runs_on_a_flex_start_vm(cli, emulator, project):
    r = cli("run", str(project / "job.py"), "-a", "tpu7x-8", "--zone", ZONE, *FLEX)
    assert r.code == 0, r.err
    assert "worker 0 of 1" in r.out
    (sent,) = emulator.bodies("compute.instances.insert")
    scheduling = sent["body"]["scheduling"]
    assert (scheduling["provisioningModel"], scheduling["instanceTerminationAction"]) == (
        "FLEX_START", "DELETE")  # fmt: skip
    assert scheduling["maxRunDuration"] == {"seconds": "3600"}  # the earlier of it and the TTL
    assert emulator.instances() == []


def test_ctrl_c_while_a_flex_start_job_waits_for_capacity_leaves_nothing(emulator, project):
    from tests.cli.conftest import spawned

    emulator.capacity({ZONE: {"tpu7x": 0}})
    with spawned("run", str(project / "job.py"), "-a", "tpu7x-8", "--zone", ZONE, *FLEX) as p:
        p.wait_for("flex-start, waiting for capacity: tpuctl-")
        assert [i["status"] for i in emulator.instances()] == ["PENDING"]
        p.proc.send_signal(signal.SIGINT)
    assert p.proc.returncode == 130, p.err
    assert "Traceback" not in p.err
    assert emulator.instances() == []


def test_a_flex_start_job_on_the_tpu_api_goes_through_a_flex_start_queued_resource(
    cli, emulator, project
) -> None:
    r = cli("run", str(project / "job.py"), "-a", "v3-8", *FLEX)
    assert r.code == 0, r.err
    (sent,) = [b for b in emulator.bodies("queuedResources.create")]
    assert sent["body"]["provisioningModel"] == "FLEX_START"
    assert sent["body"]["runDuration"] == {"maxRunDuration": "3600s"}
    assert emulator.nodes() == [] and emulator.queued() == []


def test_flex_start_flags_that_do_not_go_together_are_refused_in_one_line(
    cli, emulator, project
) -> None:
    for flags, said in (
        (["--max-run-duration", "1h"], "--max-run-duration goes with --flex-start"),
        (["--flex-start", "--node", "n"], "--flex-start asks for a new node"),
        ([*FLEX, "--api", "auto"], "--flex-start waits for capacity on one API"),
    ):
        r = cli("run", str(project / "job.py"), *flags)
        assert r.code == 2, r.err
        assert said in one_line_error(r), r.err
    assert emulator.instances() == [] and emulator.nodes() == []
